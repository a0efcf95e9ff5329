# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the playbooks' summaries: the clusters to read, one row per node, and the reports' text
(module_utils/_run_summary.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils import _run_summary


class FilterModule(object):
    def filters(self):
        return {
            'summary_clusters': _run_summary.summary_clusters,
            'onboard_summary_rows': _run_summary.onboard_rows,
            'upgrade_summary_rows': _run_summary.upgrade_rows,
            'onboard_summary_markdown': _run_summary.onboard_summary_markdown,
            'upgrade_summary_markdown': _run_summary.upgrade_summary_markdown,
            'upgrade_summary_failing': _run_summary.upgrade_summary_failing,
            'upgrade_summary_failure': _run_summary.upgrade_summary_failure,
        }
