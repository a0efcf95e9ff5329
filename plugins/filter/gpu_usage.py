# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of playbooks/report.yml, the GPU utilisation and waste report, and of playbooks/quotas.yml, the teams'
GPU quotas (module_utils/_gpu_usage.py and _gpu_usage_text.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils import _gpu_usage, _gpu_usage_text


def gpu_usage_report(results, pods, settings):
    return _gpu_usage.usage_report(_gpu_usage.answers_of(results), pods, settings)


class FilterModule(object):
    def filters(self):
        return {
            'gpu_usage_queries': _gpu_usage.queries,
            'gpu_usage_settings_problems': _gpu_usage.settings_problems,
            'gpu_usage_report': gpu_usage_report,
            'gpu_usage_report_markdown': _gpu_usage_text.usage_report_markdown,
            'gpu_usage_report_html': _gpu_usage_text.usage_report_html,
            'gpu_usage_report_failure': _gpu_usage_text.usage_report_failure,
            'gpu_quota_problems': _gpu_usage.quota_problems,
            'gpu_quota_objects': _gpu_usage.quota_objects,
            'gpu_quotas_to_remove': _gpu_usage.quotas_to_remove,
        }
