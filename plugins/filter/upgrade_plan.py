# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The filter giving the plan upgrade_driver.yml prints before its first change (module_utils/_upgrade_plan.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils import _upgrade_plan


class FilterModule(object):
    def filters(self):
        return {'driver_upgrade_plan': _upgrade_plan.upgrade_plan}
