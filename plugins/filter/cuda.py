# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the CUDA gate (module_utils/_cuda.py): the fleet's CUDA releases checked against NVIDIA's table."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils import _cuda


def cuda_release_problems(values, variable):
    return _cuda.release_problems(values, variable)


class FilterModule(object):
    def filters(self):
        return {'cuda_release_problems': cuda_release_problems}
