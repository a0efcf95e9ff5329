# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The to_toml filter: a nested mapping (a containerd or NVIDIA container runtime configuration) as TOML text."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.node.plugins.module_utils import _managed_files


def to_toml(data):
    try:
        return _managed_files.toml(data)
    except _managed_files.TomlError as error:
        raise AnsibleFilterError('to_toml: %s' % error)


class FilterModule(object):
    def filters(self):
        return {'to_toml': to_toml}
