# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The attributes of the collection's modules that only read."""

    DOCUMENTATION = r'''
attributes:
  check_mode:
    support: full
    description: It only reads; it runs the same in check mode.
  diff_mode:
    support: none
    description: It changes nothing, so there is nothing to show.
  idempotent:
    support: full
    description: It changes nothing.
'''
