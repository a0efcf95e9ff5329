# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the gpu_node_join role: its judgements of a node and its Node, made in module_utils/_gpu_node_join.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils import _gpu_node_join as judge


def gpu_node_join_checks(api_read, node_name, node_read, pods, plugin_current, expected, settings):
    """The Kubernetes layer's checks of Node ``node_name`` from check.yml's API read (nodes, or failed with msg)."""
    api_read = api_read or {}
    api_error = str(api_read.get('msg', '')) if api_read.get('failed') or 'msg' in api_read else None
    nodes = [node for node in api_read.get('nodes') or [] if (node.get('metadata') or {}).get('name') == node_name]
    settings = dict(settings, node_name=node_name)
    return judge.kubernetes_checks(api_error, nodes[0] if nodes else None, node_read, pods or [], plugin_current,
                                   expected, settings)


class FilterModule(object):
    def filters(self):
        return {
            'gpu_node_join_tier': judge.gpu_tier,
            'gpu_node_join_driver_problem': judge.driver_problem,
            'gpu_node_join_runtime_problems': judge.runtime_problems,
            'gpu_node_join_expected_resources': judge.expected_resources,
            'gpu_node_join_plugin_pod_current': judge.plugin_pod_current,
            'gpu_node_join_gpus_shown': judge.gpus_shown,
            'gpu_node_join_onboarded': judge.already_onboarded,
            'gpu_node_join_allocated_uuids': judge.allocated_uuids,
            'gpu_node_join_runtime_checks': judge.runtime_checks,
            'gpu_node_join_checks': gpu_node_join_checks,
            'gpu_node_join_disagreements': judge.settings_disagreements,
            'gpu_node_join_play_clusters': judge.play_clusters,
            'gpu_node_join_read_of_host': judge.read_of_host,
            'gpu_node_join_other_stacks': judge.other_stacks,
            'gpu_node_join_cluster_differences': judge.cluster_differences,
            'gpu_node_join_objects_to_apply': judge.objects_to_apply,
            'gpu_node_join_config_disagreements': judge.config_disagreements,
            'gpu_node_join_config_selections': judge.config_selections,
            'gpu_node_join_changed_configs': judge.changed_configs,
            'gpu_node_join_rolling_changes': judge.rolling_changes,
            'gpu_node_join_outside_selections': judge.outside_selections,
            'gpu_node_join_plugin_restart': judge.plugin_restart,
            'gpu_node_join_rollout_plugin_changes': judge.rollout_plugin_changes,
            'gpu_node_join_served_target': judge.served_target,
        }
