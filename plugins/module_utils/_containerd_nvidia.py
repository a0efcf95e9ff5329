# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The containerd_nvidia role's decision (private to gpufleet.node): what preflight.yml's read of the host found in
place, and so what configure.yml and verify.yml have left to do."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils._node_state import (
    dirs_in_place, file_in_place, packages_at, systemctl_show,
)


def _files_in_place(files, dirs, wanted):
    checker = file_in_place(files.get('checker'), wanted['checker'], '0644')
    dropin = file_in_place(files.get('dropin'), wanted['dropin'], '0644')
    in_place = checker and 'checker_dir' in dirs and 'config_dir' in dirs and (
        not wanted['killmode_dropin'] or (dropin and 'dropin_dir' in dirs))
    return checker, dropin, in_place


def host_found(read, wanted):
    """What preflight.yml's read (a gpu_node_read result) found, judged against what the role installs and writes.

    ``wanted``: package and version (containerd's), os_packages (what the checker needs, any version), the text of
    the config, checker and dropin files, killmode_dropin (the drop-in is wanted) and require_runtime_binary. Each
    file, the configuration and the service count as in place only with containerd installed at its version then: an
    installation could replace them after the read. ``configured``: configure.yml has nothing to do.
    ``live_unchanged``: nothing this run does can change what containerd loads and runs, so verify.yml judges this read.
    """
    files, stats = read.get('files') or {}, read.get('stats') or {}
    packages = read.get('packages') or {}
    dirs = dirs_in_place(stats)
    installed = bool(packages_at(packages, {wanted['package']: wanted['version']}))
    checker, dropin, files_ok = _files_in_place(files, dirs, wanted)
    config = installed and file_in_place(files.get('config'), wanted['config'], '0644')
    units = systemctl_show(((read.get('commands') or {}).get('services') or {}).get('stdout'))
    service = units[0] if units else {}
    service_ok = installed and service.get('UnitFileState') == 'enabled' and service.get('ActiveState') == 'active'
    everything = files_ok and config and service_ok
    os_packages = wanted['os_packages']
    return {
        'installed': installed,
        'dirs_in_place': dirs,
        'checker_in_place': checker,
        'dropin_in_place': dropin,
        'files_in_place': files_ok,
        'config_in_place': config,
        'service_in_place': service_ok,
        'configured': everything and bool(
            (stats.get('runtime_binary') or {}).get('exists') or not wanted['require_runtime_binary']),
        'live_unchanged': everything and len(packages_at(packages, dict((name, '') for name in os_packages))) == len(os_packages),
    }
