# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The cmdline_flag filter: one flag's value from a process's /proc/PID/cmdline."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils._cmdline import cmdline_flag


class FilterModule(object):
    def filters(self):
        return {'cmdline_flag': cmdline_flag}
