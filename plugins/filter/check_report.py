# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters giving the text of check.yml's report: its Markdown, its HTML page and the run's failure message
(module_utils/_check_report.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils import _check_report


class FilterModule(object):
    def filters(self):
        return {
            'check_report_markdown': _check_report.check_report_markdown,
            'check_report_html': _check_report.check_report_html,
            'check_report_failure': _check_report.check_report_failure,
        }
