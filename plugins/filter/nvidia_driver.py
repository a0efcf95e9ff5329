# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the nvidia_driver role: its decisions about its packages (module_utils/_nvidia_driver.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils import _nvidia_driver


class FilterModule(object):
    def filters(self):
        return {
            'driver_packages_moving': _nvidia_driver.packages_moving,
            'driver_install_specs': _nvidia_driver.install_specs,
            'driver_packages_to_unhold': _nvidia_driver.packages_to_unhold,
            'driver_plan': _nvidia_driver.driver_plan,
            'driver_package_states': _nvidia_driver.package_states,
            'nvidia_driver_found': _nvidia_driver.host_found,
        }
