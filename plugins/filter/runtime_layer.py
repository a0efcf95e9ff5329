# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the runtime layer: the container_toolkit and containerd_nvidia roles' check.yml checks
(module_utils/_runtime_layer.py), what containerd_nvidia's first read found in place
(module_utils/_containerd_nvidia.py), and the playbooks' agreement of the toolkit, containerd and the device plugin
(module_utils/_settings.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.filter.from_toml import from_toml
from ansible_collections.gpufleet.node.plugins.module_utils._containerd_nvidia import host_found as containerd_nvidia_found
from ansible_collections.gpufleet.node.plugins.module_utils._runtime_layer import containerd_checks, toolkit_checks
from ansible_collections.gpufleet.node.plugins.module_utils._settings import runtime_strategy_problems


def container_toolkit_checks(read, settings):
    return toolkit_checks(read or {}, settings, from_toml)


def containerd_nvidia_checks(read, settings):
    return containerd_checks(read or {}, settings)


class FilterModule(object):
    def filters(self):
        return {'container_toolkit_checks': container_toolkit_checks, 'containerd_nvidia_checks': containerd_nvidia_checks,
                'containerd_nvidia_found': containerd_nvidia_found, 'runtime_strategy_problems': runtime_strategy_problems}
