# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pod_security_baseline_problems filter: what keeps a pod from the Pod Security Standards' baseline level."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils._pod_security import baseline_problems


class FilterModule(object):
    def filters(self):
        return {'pod_security_baseline_problems': baseline_problems}
