# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The nvidia_driver role's decisions (private to gpufleet.node): what its first read of the host found in place (the
package source and key, the boot files, the loaded module, nvidia-persistenced), what moves, what to install, which
holds to release, the upgrade's plan, and whether each package is installed, held and pinned as asked.

``wanted`` is the role's package set, {name: exact version, or '' for any}; ``installed`` {name: version} of the
packages dpkg has installed (the installed_versions filter)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.node.plugins.module_utils._node_state import file_in_place, keyring_in_place, systemctl_show

# The files of the role that a package source without a repository of its own (Ubuntu's archive) must not leave.
SOURCE_FILES = ('source', 'keyring_asc', 'keyring_gpg')


def _moves(name, version, installed):
    return name not in installed or (bool(version) and installed[name] != version)


def packages_moving(wanted, installed):
    """The packages an installation changes: not installed, or installed at another version than the exact one."""
    return [name for name, version in wanted.items() if _moves(name, version, installed)]


def install_specs(wanted):
    """apt's name=version for each package, the name alone where any version will do."""
    return [name + ('=' + version if version else '') for name, version in wanted.items()]


def packages_to_unhold(held, wanted, installed, catalogue):
    """The held packages whose hold the installation must release: one of the set that moves, and one the platform's
    data knows (another kernel module flavour, another source's names) that the role no longer installs."""
    return [name for name in held
            if (name in wanted and _moves(name, wanted[name], installed)) or (name not in wanted and name in catalogue)]


def _upstream(version):
    """A Debian version without its epoch and revision: 1:535.261.03-1 -> 535.261.03."""
    return re.sub('-[^-]*$', '', re.sub('^[0-9]+:', '', version))


def driver_plan(wanted, installed, offered, source_changes, target, primary_package):
    """What an upgrade of the host to ``target`` changes: each package's installed and wanted version, the packages
    that change, those whose exact version the host's sources do not offer (``offered``: apt_policy_versions; unknown
    while the source itself changes), and the installed driver version (the primary package's)."""
    packages = dict((name, {'installed': installed.get(name, ''), 'wanted': version}) for name, version in wanted.items())
    unavailable = ['%s=%s' % (name, version) for name, version in wanted.items()
                   if version and installed.get(name, '') != version
                   and version not in (offered.get(name) or {}).get('versions', []) and not source_changes]
    return {'target': str(target), 'packages': packages,
            'changes': packages_moving(wanted, installed),
            'unavailable': unavailable, 'source_changes': source_changes,
            'installed_version': _upstream(installed.get(primary_package, ''))}


def _package_state(name, version, host, predicted):
    moves = predicted['check_mode'] and name in predicted['moving']
    installed = (version or '(this run installs it)') if moves else host['installed'].get(name, '(not installed)')
    held = predicted['check_mode'] or name in host['held']
    candidate = version if (predicted['pin_to_write'] and version) else (
        (host['candidates'].get(name) or {}).get('candidate') or '(none)')
    ok = (moves or name in host['installed']) and held and (not version or (installed == version and candidate == version))
    return {'name': name, 'installed': installed, 'wanted': version, 'held': held, 'candidate': candidate, 'ok': bool(ok)}


def package_states(wanted, host, predicted):
    """Whether each package is installed at its exact version, held, and apt's candidate is that version (the pin).

    ``host``: installed, held (names) and candidates (apt_policy_versions) as read. ``predicted``: check_mode (judge
    what this run would leave: the packages that move, C(moving), at their versions, every package held) and
    pin_to_write (the preferences file is to be written: apt's candidate will be the pinned version)."""
    return [_package_state(name, version, host, predicted) for name, version in wanted.items()]


def _keyring_in_place(files, wanted):
    keyring = wanted['keyring']
    if not keyring:
        return True
    # A binary (.gpg) keyring is not text: keyring_in_place finds it not in place, and apt_signing_key judges it on the host.
    entry = files.get('keyring_gpg' if keyring.endswith('.gpg') else 'keyring_asc')
    return keyring_in_place(entry, wanted['key_fingerprints'], wanted['key_content'])


def _boot_files_to_write(files, wanted, modules_load_in_place, blacklist_in_place):
    blacklist_exists = (files.get('blacklist') or {}).get('exists', True)
    return bool(
        not modules_load_in_place
        or (wanted['blacklist_nouveau'] and not blacklist_in_place)
        or (blacklist_exists and not wanted['blacklist_nouveau'])
        or wanted['dkms_signs']
        or (files.get('dkms_signing') or {}).get('exists', True)
    )


def host_found(read, wanted):
    """What repository.yml's first read of the host (a gpu_node_read result) found, judged against what the role writes.

    ``wanted``: repository (the source has a repository of its own), keyring (its path, '' for none), key_fingerprints,
    key_content, and the text of the source, modules_load and blacklist files; blacklist_nouveau and dkms_signs (the
    role writes the DKMS signing file each run). The answer says what is in place, what repository_write.yml and
    boot_files.yml have to do, the loaded module's version ('' when none is loaded), nvidia-persistenced's states, whether
    apt's lists were there to read, and the files as read (their pin and unattended-upgrades entries serve install.yml).
    """
    files = read.get('files') or {}
    commands = read.get('commands') or {}
    keyring_ok = _keyring_in_place(files, wanted)
    source_ok = file_in_place(files.get('source'), wanted['source'], '0644')
    if wanted['repository']:
        source_to_write = not (source_ok and keyring_ok)
    else:
        source_to_write = any((files.get(name) or {}).get('exists') for name in SOURCE_FILES)
    modules_load_ok = file_in_place(files.get('modules_load'), wanted['modules_load'], '0644')
    blacklist_ok = file_in_place(files.get('blacklist'), wanted['blacklist'], '0644')
    services = systemctl_show((commands.get('services') or {}).get('stdout'))
    return {
        'files': files,
        'keyring_in_place': keyring_ok,
        'source_in_place': source_ok,
        'source_to_write': source_to_write,
        'modules_load_in_place': modules_load_ok,
        'blacklist_in_place': blacklist_ok,
        'boot_files_to_write': _boot_files_to_write(files, wanted, modules_load_ok, blacklist_ok),
        'loaded_module_version': ((files.get('loaded_module') or {}).get('content') or '').strip(),
        'persistenced': services[0] if services else {},
        # An image build may have emptied apt's lists: the directory then looks fresh to cache_valid_time.
        'apt_lists_read': len((commands.get('apt_lists') or {}).get('stdout', 'unread')) > 0,
    }
