# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The to_toml filter: a nested mapping (a containerd or NVIDIA container runtime configuration) as TOML text."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible.errors import AnsibleFilterError

from ansible.module_utils.six.moves.collections_abc import Mapping

_BARE_KEY = re.compile(r'^[A-Za-z0-9_-]+$')
_SCALARS = (str, bool, int, float)


def _key(key):
    key = str(key)
    return key if _BARE_KEY.match(key) else json.dumps(key)


def _sorted(table):
    # Keys in case-insensitive order, as Jinja's dictsort orders them: the same file for the same data.
    return sorted(table.items(), key=lambda item: str(item[0]).lower())


def _value(path, value):
    # JSON strings, numbers, booleans and arrays of them are valid TOML.
    if isinstance(value, _SCALARS) or (isinstance(value, (list, tuple)) and all(isinstance(v, _SCALARS) for v in value)):
        return json.dumps(value)
    raise AnsibleFilterError('to_toml: %s is a %s; only strings, numbers, booleans, arrays of them and mappings '
                             'have a TOML form here' % (path, type(value).__name__))


def _table(prefix, table, lines):
    items = _sorted(table)
    for key, value in items:
        if not isinstance(value, Mapping):
            lines.append('%s = %s' % (_key(key), _value((prefix + '.' if prefix else '') + str(key), value)))
    for key, value in items:
        if isinstance(value, Mapping):
            path = (prefix + '.' if prefix else '') + _key(key)
            # A table holding only sub-tables gets no header of its own: TOML defines it implicitly.
            if not value or any(not isinstance(v, Mapping) for v in value.values()):
                lines.extend(['', '[%s]' % path])
            _table(path, value, lines)


def to_toml(data):
    if not isinstance(data, Mapping):
        raise AnsibleFilterError('to_toml: expects a mapping, got %s' % type(data).__name__)
    lines = []
    _table('', data, lines)
    return ''.join(line + '\n' for line in lines)


class FilterModule(object):
    def filters(self):
        return {'to_toml': to_toml}
