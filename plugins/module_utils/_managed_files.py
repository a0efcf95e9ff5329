# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The text of the files the install roles write on a node, built from explicit values.

Each role writes the text with ansible.builtin.copy and, before that, compares it with the file gpu_node_read found
(file_in_place): the same function gives both, so the comparison and the write cannot disagree. ``managed`` is the
first comment line, ``ansible_managed`` where a play sets it (as ansible.builtin.template would use it).

Private to the collection: no compatibility promise.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible.module_utils.six.moves.collections_abc import Mapping

DEFAULT_MANAGED = 'Ansible managed'

_BARE_TOML_KEY = re.compile(r'^[A-Za-z0-9_-]+$')
_TOML_SCALARS = (str, bool, int, float)


class TomlError(ValueError):
    """A value without a TOML form here."""


def _text(lines):
    return ''.join(line + '\n' for line in lines)


def _by_name(names):
    # Case-insensitive, as Jinja's dictsort and sort order them: the files the templates wrote stay the same.
    return sorted(names, key=lambda name: str(name).lower())


def apt_preferences(packages, role, subject, managed=DEFAULT_MANAGED):
    """An apt preferences file pinning each package of ``packages`` ({name: exact version}) at priority 1001.

    A package without a version of its own ('') is named in a comment: it is held, not pinned.
    """
    lines = [
        '# %s' % managed,
        '# gpufleet.node.%s: %s.' % (role, subject),
        '# Every package is pinned to its exact version (priority 1001: apt neither upgrades nor replaces it);',
        '# the packages are also held with dpkg selections.',
    ]
    for name in _by_name(packages):
        if packages[name]:
            lines.extend(['', 'Package: %s' % name, 'Pin: version %s' % packages[name], 'Pin-Priority: 1001'])
    unpinned = [name for name, version in packages.items() if version == '']
    if unpinned:
        lines.extend(['', '# Held but not pinned (no version of their own to pin): %s' % ', '.join(unpinned)])
    return _text(lines)


def unattended_upgrade_pattern(name):
    """unattended-upgrades' blacklist entry for exactly this package: a regular expression, "." and "+" as classes."""
    return '^%s$' % name.replace('.', '[.]').replace('+', '[+]')


def unattended_upgrades_blacklist(packages, role, subject, managed=DEFAULT_MANAGED):
    """An apt.conf.d file keeping unattended-upgrades away from ``packages`` (names)."""
    lines = [
        '// %s' % managed,
        '// gpufleet.node.%s: %s; the packages move only when the role moves them.' % (role, subject),
        '// Entries are regular expressions matched against package names ("." and "+" written as classes).',
        'Unattended-Upgrade::Package-Blacklist {',
    ]
    lines.extend('    "%s";' % unattended_upgrade_pattern(name) for name in _by_name(packages))
    lines.append('};')
    return _text(lines)


def modules_load(modules, managed=DEFAULT_MANAGED):
    """A modules-load.d file loading the NVIDIA kernel modules at boot, in the given order."""
    lines = [
        '# %s' % managed,
        '# gpufleet.node.nvidia_driver: NVIDIA modules loaded at boot. nvidia-uvm is what CUDA needs:',
        '# without it nvidia-smi works and CUDA programs fail with "unknown error".',
    ]
    lines.extend(modules)
    return _text(lines)


def nouveau_blacklist(managed=DEFAULT_MANAGED):
    """A modprobe.d file keeping nouveau from claiming the GPUs."""
    return _text([
        '# %s' % managed,
        '# gpufleet.node.nvidia_driver: nouveau must not claim the GPUs before the NVIDIA driver.',
        'blacklist nouveau',
        'options nouveau modeset=0',
    ])


def _toml_key(key):
    key = str(key)
    return key if _BARE_TOML_KEY.match(key) else json.dumps(key)


def _toml_value(path, value):
    # JSON strings, numbers, booleans and arrays of them are valid TOML.
    if isinstance(value, _TOML_SCALARS) or (isinstance(value, (list, tuple)) and all(isinstance(v, _TOML_SCALARS) for v in value)):
        return json.dumps(value)
    raise TomlError('%s is a %s; only strings, numbers, booleans, arrays of them and mappings have a TOML form here'
                    % (path, type(value).__name__))


def _toml_table(prefix, table, lines):
    items = [(key, table[key]) for key in _by_name(table)]
    for key, value in items:
        if not isinstance(value, Mapping):
            lines.append('%s = %s' % (_toml_key(key), _toml_value((prefix + '.' if prefix else '') + str(key), value)))
    for key, value in items:
        if isinstance(value, Mapping):
            path = (prefix + '.' if prefix else '') + _toml_key(key)
            # A table holding only sub-tables gets no header of its own: TOML defines it implicitly.
            if not value or any(not isinstance(v, Mapping) for v in value.values()):
                lines.extend(['', '[%s]' % path])
            _toml_table(path, value, lines)


def toml(data):
    """A nested mapping (a containerd or NVIDIA container runtime configuration) as TOML text, keys sorted."""
    if not isinstance(data, Mapping):
        raise TomlError('expects a mapping, got %s' % type(data).__name__)
    lines = []
    _toml_table('', data, lines)
    return _text(lines)


def toml_file(comments, data):
    """A TOML file: ``comments`` (lines, each written as a ``#`` comment) above ``data`` as TOML."""
    return _text('# %s' % line for line in comments) + toml(data)
