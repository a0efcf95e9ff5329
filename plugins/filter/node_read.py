# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters over what gpu_node_read read: installed and held packages, whether a file or directory is in place, units' states."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils._node_state import (
    apt_failure, dir_in_place, dirs_in_place, dpkg_audit, file_in_place, held_packages, installed_versions, modules_lost,
    packages_at, systemctl_show,
)


class FilterModule(object):
    def filters(self):
        return {
            'installed_versions': installed_versions, 'packages_at': packages_at, 'held_packages': held_packages,
            'file_in_place': file_in_place, 'dir_in_place': dir_in_place, 'dirs_in_place': dirs_in_place, 'systemctl_show': systemctl_show,
            'modules_lost': modules_lost, 'apt_failure': apt_failure, 'dpkg_audit': dpkg_audit,
        }
