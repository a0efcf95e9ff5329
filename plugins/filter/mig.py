# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the MIG layouts (module_utils/_mig.py): a node's layout planned against NVIDIA's profile table, the device
plugin's MIG strategy and the node's pools checked against it, and check.yml's check of it. The mig-parted configuration
itself is checked by gpufleet.node.validate_settings (role mig_layout)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils import _mig


def mig_layout_plan(reads, document, selected, where, nvidia_smi='nvidia-smi'):
    return _mig.node_plan(reads, document, selected, where, nvidia_smi)


def mig_pool_problems(replicas, document, selected, where):
    return _mig.pool_problems(replicas, document, selected, where)


def mig_layout_check(commands, document, selected, where):
    return _mig.host_check(commands, document, selected, where)


def mig_strategy_problems(wanted_layout, strategy, where):
    return _mig.strategy_problems(strategy, dict((int(index), layout) for index, layout in wanted_layout.items()), where)


class FilterModule(object):
    def filters(self):
        return {
            'mig_layout_plan': mig_layout_plan,
            'mig_strategy_problems': mig_strategy_problems,
            'mig_pool_problems': mig_pool_problems,
            'mig_layout_check': mig_layout_check,
        }
