# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The deb822 source file that ansible.builtin.deb822_repository writes, predicted on the controller."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import textwrap

SOURCES_DIR = '/etc/apt/sources.list.d'


def deb822_source_path(name):
    """The file deb822_repository writes for the source ``name`` (its slug, as the module forms it)."""
    slug = re.sub(r'[^a-z0-9-]+', '', re.sub(r'[_\s]+', '-', str(name).lower()))
    return '%s/%s.sources' % (SOURCES_DIR, slug)


def _field_name(key):
    return {'name': 'X-Repolib-Name', 'uris': 'URIs'}.get(key, key.replace('_', '-').title())


def _value(value):
    if isinstance(value, (list, tuple)):
        value = ' '.join(str(item) for item in value)
    value = str(value)
    if '\n' in value:
        value = '\n' + textwrap.indent('\n'.join(line.strip() or '.' for line in value.strip().splitlines()), '    ')
    return value


def deb822_source(name, uris, suites, components=None, signed_by=None, types=('deb',)):
    """The text deb822_repository (state present, no other option) writes for these fields.

    '' when only the module can know it: a ``signed_by`` URL, which the module downloads on every run and
    replaces by the key's file. The fields come in the module's order (sorted by option name); an empty
    option is left out, as the module leaves out one that is omitted.
    """
    if signed_by and re.match(r'^[A-Za-z][A-Za-z0-9+.-]*://', str(signed_by)):
        return ''
    fields = {'name': name, 'uris': uris, 'suites': suites, 'components': components, 'signed_by': signed_by,
              'types': types}
    lines = []
    for key in sorted(fields):
        if fields[key] in (None, '', [], ()):
            continue
        value = _value(fields[key])
        lines.append('%s:%s' % (_field_name(key), value) if value.startswith('\n') else '%s: %s' % (_field_name(key), value))
    return '\n'.join(lines) + '\n'


class FilterModule(object):
    def filters(self):
        return {'deb822_source': deb822_source, 'deb822_source_path': deb822_source_path}
