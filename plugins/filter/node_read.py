# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters over what gpu_node_read read: installed package versions, and whether a file is in place already."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# dpkg states in which no version of the package is on the system (dpkg-query's db:Status-Status).
NOT_INSTALLED = ('not-installed', 'config-files')


def installed_versions(packages):
    """``{name: {version, want, status}}`` as gpu_node_read returns it, to ``{name: version}`` of installed packages."""
    return dict(
        (name, entry.get('version', ''))
        for name, entry in (packages or {}).items()
        if entry.get('status', '') not in NOT_INSTALLED and entry.get('version')
    )


def _octal(mode):
    return int(str(mode), 8)


def file_in_place(entry, content, mode, owner='root', group='root'):
    """Whether a file gpu_node_read read (``entry``) holds ``content`` with this mode, owner and group."""
    entry = entry or {}
    return bool(
        entry.get('exists') and 'error' not in entry and entry.get('content') == content
        and 'mode' in entry and _octal(entry['mode']) == _octal(mode)
        and entry.get('owner') == owner and entry.get('group') == group
    )


class FilterModule(object):
    def filters(self):
        return {'installed_versions': installed_versions, 'file_in_place': file_in_place}
