# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What gpu_node_read read, judged (private to gpufleet.node): installed and held packages, whether a file, keyring
or directory is in place, units' states. The roles' decide functions build on these."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils import _openpgp

# dpkg states in which no version of the package is on the system (dpkg-query's db:Status-Status).
NOT_INSTALLED = ('not-installed', 'config-files')


def installed_versions(packages):
    """``{name: {version, want, status}}`` as gpu_node_read returns it, to ``{name: version}`` of installed packages."""
    return dict(
        (name, entry.get('version', ''))
        for name, entry in (packages or {}).items()
        if entry.get('status', '') not in NOT_INSTALLED and entry.get('version')
    )


def packages_at(packages, wanted):
    """The names of ``wanted`` (``{name: version}``, an empty version for any) that dpkg has fully installed at that version.

    Fully installed is dpkg's "installed" state: a package left half-configured or unpacked is not, and an
    installation must still run for it.
    """
    packages = packages or {}
    return [
        name for name, version in (wanted or {}).items()
        if packages.get(name, {}).get('status') == 'installed'
        and packages[name].get('version') and (not version or packages[name]['version'] == version)
    ]


def held_packages(packages):
    """The names of the packages whose dpkg selection is "hold", sorted."""
    return sorted(name for name, entry in (packages or {}).items() if entry.get('want') == 'hold')


def apt_failure(result):
    """What a failed apt or dpkg run (an ansible.builtin.apt result) says went wrong, in one line: each of dpkg's
    "error processing" messages with the line before it (a maintainer script's own message), then apt's ``E:`` lines;
    the result's ``msg`` when it has neither."""
    result = result or {}
    stdout = (result.get('stdout') or '').splitlines()
    picked = []
    for index, line in enumerate(stdout):
        if line.startswith('dpkg: error'):
            picked += stdout[max(index - 1, 0):index + 2]
    picked += [line for line in (result.get('stderr') or '').splitlines() if line.startswith('E: ')]
    unique = []
    for line in (line.strip() for line in picked):
        if line and line not in unique:
            unique.append(line)
    return ' '.join(unique) or str(result.get('msg') or 'no message')


def dpkg_audit(output):
    """The packages ``dpkg --audit`` lists (each as `` name  description`` under its paragraph), in its order."""
    return [line.split()[0] for line in (output or '').splitlines() if line.startswith(' ') and line.strip()]


def proc_modules(content):
    """The module names of a /proc/modules text, in its order."""
    return [line.split()[0] for line in (content or '').splitlines() if line.strip()]


def modules_lost(before, after, unload_order):
    """The modules of ``unload_order`` loaded in ``before`` and gone in ``after`` (two /proc/modules texts), in the order
    to load them again (the reverse of ``unload_order``, nvidia before its users): what an unload that stopped
    half-way took."""
    gone = set(proc_modules(before)) - set(proc_modules(after))
    return [name for name in reversed(unload_order) if name in gone]


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


def dir_in_place(entry, mode='0755', owner='root', group='root'):
    """Whether a path gpu_node_read stat'ed (``entry``) is a directory with this mode, owner and group."""
    entry = entry or {}
    return bool(
        entry.get('exists') and entry.get('type') == 'directory' and 'mode' in entry
        and _octal(entry['mode']) == _octal(mode) and entry.get('owner') == owner and entry.get('group') == group
    )


def dirs_in_place(stats, mode='0755', owner='root', group='root'):
    """The names of the paths gpu_node_read stat'ed (``stats``: {name: entry}) that are directories with this mode, owner
    and group (dir_in_place), in the read's order."""
    return [name for name, entry in (stats or {}).items() if dir_in_place(entry, mode, owner, group)]


def systemctl_show(output):
    """``systemctl show --property=... UNIT...`` output as one ``{property: value}`` per unit, in the units' order.

    systemctl separates the units' blocks with an empty line; a unit systemd does not know still gets its block
    (``LoadState=not-found``, ``ActiveState=inactive``).
    """
    units = []
    for block in str(output or '').split('\n\n'):
        properties = dict(line.split('=', 1) for line in block.splitlines() if '=' in line)
        if properties:
            units.append(properties)
    return units


def keyring_in_place(entry, fingerprints, content='', mode='0644', owner='root', group='root'):
    """Whether an ASCII-armored keyring (a ``files`` entry of gpu_node_read) holds exactly the primary keys of
    ``fingerprints`` with this mode, owner and group, and, when ``content`` is given, exactly ``content``."""
    entry = entry or {}
    text = entry.get('content', '')
    in_place = file_in_place(entry, text, mode, owner, group) and _openpgp.is_armored(text)
    if not in_place or (content and text != content):
        return False
    try:
        expected = sorted(set(_openpgp.normalize_fingerprint(value) for value in fingerprints or []))
        return bool(expected) and sorted(set(_openpgp.fingerprints(text))) == expected
    except _openpgp.OpenPGPError:
        return False
