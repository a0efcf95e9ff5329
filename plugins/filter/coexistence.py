# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters that find another NVIDIA GPU stack: the GPU Operator's labels on a node, and DaemonSets of the operator or of
another NVIDIA device plugin."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils._coexistence import operator_node_labels, other_gpu_daemonsets


class FilterModule(object):
    def filters(self):
        return {
            'gpu_operator_node_labels': operator_node_labels,
            'other_gpu_daemonsets': other_gpu_daemonsets,
        }
