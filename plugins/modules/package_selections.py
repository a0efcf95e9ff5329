#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: package_selections
short_description: Set the dpkg selection (hold, install) of several packages in one run
version_added: 0.4.0
description:
  - Sets the dpkg selection of every package of O(names) to O(selection), as C(ansible.builtin.dpkg_selections) does
    for one package, in one module run. It reads C(dpkg --get-selections) once and, when some packages' selections
    differ, runs one C(dpkg --set-selections) for those packages only.
  - A package dpkg does not know (not installed, as in check mode on a new host) counts as a change, as with
    C(ansible.builtin.dpkg_selections); dpkg itself then only warns.
author:
  - gpufleet maintainers (@gpufleet)
options:
  names:
    description: Package names, without an architecture (C(libcuda1), not C(libcuda1:amd64)).
    type: list
    elements: str
    required: true
  selection:
    description: The selection to set.
    type: str
    required: true
    choices: [install, hold, deinstall, purge]
attributes:
  check_mode:
    support: full
    description: Reports the packages it would change and sets nothing.
  diff_mode:
    support: full
    description: Shows the selections of the packages it changes before and after.
  idempotent:
    support: full
    description: Only packages whose selection differs are set.
  platform:
    support: full
    platforms: debian
    description: Debian and Ubuntu (dpkg).
seealso:
  - module: ansible.builtin.dpkg_selections
'''

EXAMPLES = r'''
- name: Hold the driver packages against unplanned upgrades
  gpufleet.node.package_selections:
    names: [nvidia-driver, nvidia-kernel-dkms, libcuda1]
    selection: hold

- name: Release the holds of the packages that move
  gpufleet.node.package_selections:
    names: [nvidia-driver]
    selection: install
'''

RETURN = r'''
changed_names:
  description: The packages whose selection was (in check mode, would be) set.
  returned: always
  type: list
  elements: str
  sample: [libcuda1, nvidia-smi]
before:
  description: The selection of each package of O(names) before the run; C(not present) when dpkg does not know it.
  returned: always
  type: dict
  sample: {libcuda1: install, nvidia-smi: hold}
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils import _run

NOT_PRESENT = 'not present'


def parse_selections(text):
    """{package: selection} from `dpkg --get-selections`, the architecture suffix (`:amd64`) removed."""
    selections = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2:
            selections[fields[0].split(':', 1)[0]] = fields[1]
    return selections


def _render(selections):
    return ''.join('%s %s\n' % (name, selection) for name, selection in sorted(selections.items()))


def _dpkg(module, argv, data=None):
    """dpkg's output; the module fails naming the command when dpkg does."""
    rc, out, err = _run.execute(argv, {'LC_ALL': 'C'}, data)
    if rc != 0:
        module.fail_json(msg='%s failed (rc %d): %s' % (' '.join(argv), rc, (err or out).strip()), rc=rc, stdout=out, stderr=err)
    return out


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            names=dict(type='list', elements='str', required=True),
            selection=dict(type='str', required=True, choices=['install', 'hold', 'deinstall', 'purge']),
        ),
        supports_check_mode=True,
    )
    names, selection = module.params['names'], module.params['selection']
    dpkg = module.get_bin_path('dpkg', required=True)
    # All selections: naming a package dpkg does not know makes `dpkg --get-selections NAME` fail.
    known = parse_selections(_dpkg(module, [dpkg, '--get-selections']))
    before = dict((name, known.get(name, NOT_PRESENT)) for name in names)
    changes = sorted(name for name in set(names) if before[name] != selection)
    if changes and not module.check_mode:
        _dpkg(module, [dpkg, '--set-selections'], _render(dict.fromkeys(changes, selection)))
    result = dict(changed=bool(changes), changed_names=changes, before=before)
    if module._diff and changes:
        result['diff'] = dict(before=_render(dict((name, before[name]) for name in changes)),
                              after=_render(dict.fromkeys(changes, selection)))
    module.exit_json(**result)


def main():
    run_module()


if __name__ == '__main__':
    main()
