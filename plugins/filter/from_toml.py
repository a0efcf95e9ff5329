# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The from_toml filter: a TOML document (a containerd or NVIDIA container runtime configuration) as data."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

try:
    import tomllib
except ImportError:  # Python < 3.11 on the controller
    tomllib = None


def from_toml(text):
    if tomllib is None:
        raise AnsibleFilterError('from_toml needs Python 3.11 or later on the controller (tomllib)')
    try:
        return tomllib.loads(str(text))
    except tomllib.TOMLDecodeError as error:
        raise AnsibleFilterError('from_toml: not a TOML document: %s' % error)


class FilterModule(object):
    def filters(self):
        return {'from_toml': from_toml}
