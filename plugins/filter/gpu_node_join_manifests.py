# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the gpu_node_join role: what it sends to the API and its diagnosis of a node that did not show its GPUs,
made in module_utils/_gpu_node_join_manifests.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils import _gpu_node_join_manifests as manifests


def gpu_node_join_diagnosis(pods_read, node_read, log_read, plugin_current, waited, settings):
    """The diagnosis from diagnose.yml's reads as registered: the plugin pods and the Node (k8s_info), and the first
    pod's log (k8s_log; skipped or failed when there is none)."""
    nodes = (node_read or {}).get('resources') or [{}]
    log_lines = (log_read or {}).get('log_lines', ['(none)'])
    return manifests.diagnosis(pods_read['resources'], nodes[0], log_lines, plugin_current, waited, settings)


def gpu_node_join_config_manager_access(namespace):
    """The identity of NVIDIA's config-manager in the plugin's pods in ``namespace``: its ServiceAccount, ClusterRole
    and ClusterRoleBinding."""
    return manifests.config_manager_access({'namespace': namespace})


class FilterModule(object):
    def filters(self):
        return {
            'gpu_node_join_device_plugin_config': manifests.device_plugin_config,
            'gpu_node_join_smoke_pod': manifests.smoke_pod,
            'gpu_node_join_cluster_objects': manifests.cluster_objects,
            'gpu_node_join_config_map_data': manifests.config_map_data,
            'gpu_node_join_shared_config': manifests.shared_config,
            'gpu_node_join_config_manager_access': gpu_node_join_config_manager_access,
            'gpu_node_join_diagnosis': gpu_node_join_diagnosis,
        }
