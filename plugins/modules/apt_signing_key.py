#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: apt_signing_key
short_description: Write an apt repository's signing key to a keyring file after checking its fingerprints
version_added: 0.4.0
description:
  - Writes the OpenPGP public key of an apt repository, given as O(content) or fetched from O(url), to the keyring
    file O(path) that the repository's C(Signed-By) names, only after the primary keys it holds have exactly the
    fingerprints O(fingerprints). A key with other fingerprints fails the module and nothing is written.
  - When O(path) already holds exactly the keys of O(fingerprints) (in the format its name asks for), a key given as
    O(url) is not fetched again; a key given as O(content) is written when the file's bytes differ from it.
  - The fingerprints are computed in Python (version 4 keys); neither the host nor the controller needs gpg.
  - An O(path) ending in C(.asc) gets the key ASCII-armored, any other name a binary keyring, as apt reads them; a key
    in the other format is converted. The file's mode is O(mode), C(0644) when not given.
author:
  - gpufleet maintainers (@gpufleet)
options:
  path:
    description: The keyring file, for example C(/etc/apt/keyrings/example.asc). Its directory must exist.
    type: path
    required: true
  content:
    description: The key, ASCII-armored. Exactly one of O(content) and O(url) is given.
    type: str
  url:
    description:
      - Where to fetch the key (ASCII-armored or binary), an C(https://) URL (the certificate is checked) or a
        C(file://) URL of a file on the host. Any other scheme is refused.
    type: str
  fingerprints:
    description:
      - The fingerprints of the primary keys the key must hold, no more and no fewer (40 hex characters each, spaces
        allowed, as C(gpg --show-keys) prints them). Subkeys do not count.
    type: list
    elements: str
    required: true
  fingerprints_from:
    description: The name failure messages give O(fingerprints), for example the variable they came from.
    type: str
    default: fingerprints
  key_from:
    description: The name failure messages give O(url) or O(content), for example the variable it came from.
    type: str
    default: the key
  timeout:
    description: Seconds to wait for the key's server.
    type: int
    default: 30
extends_documentation_fragment:
  - ansible.builtin.files
attributes:
  check_mode:
    support: full
    description: Fetches and checks the key as in a real run (reading only) and writes nothing.
  diff_mode:
    support: full
    description: Shows the keys (fingerprint and user IDs) and the file's SHA-256 before and after.
  idempotent:
    support: full
    description: A keyring that holds the expected keys is kept; a key given as URL is then not fetched.
  platform:
    support: full
    platforms: posix
    description: Any host with Python; the keyring is for apt (Debian and Ubuntu).
notes:
  - A key whose owner extended its expiry keeps its fingerprint, so a keyring fetched from O(url) is not refreshed by
    it; remove the keyring file to fetch the key again.
seealso:
  - module: ansible.builtin.get_url
'''

EXAMPLES = r'''
- name: Install NVIDIA's container toolkit repository key
  gpufleet.node.apt_signing_key:
    path: /etc/apt/keyrings/nvidia-container-toolkit.asc
    url: https://nvidia.github.io/libnvidia-container/gpgkey
    fingerprints: ["C95B 321B 61E8 8C18 09C4  F759 DDCA E044 F796 ECB0"]
    owner: root
    group: root
    mode: "0644"

- name: Install a site mirror's key given inline
  gpufleet.node.apt_signing_key:
    path: /etc/apt/keyrings/site-mirror.asc
    content: "{{ site_mirror_key }}"
    fingerprints: ["{{ site_mirror_key_fingerprint }}"]
    fingerprints_from: site_mirror_key_fingerprint
    key_from: site_mirror_key
'''

RETURN = r'''
primary_keys:
  description: The primary keys the keyring holds (in check mode, would hold), with their user IDs.
  returned: success
  type: list
  elements: dict
  sample: [{fingerprint: C95B321B61E88C1809C4F759DDCAE044F796ECB0,
            user_ids: ["NVIDIA CORPORATION (Open Source Projects) <cudatools@nvidia.com>"]}]
fetched:
  description: Whether the key was fetched from O(url) in this run (false when the keyring held it already).
  returned: success
  type: bool
  sample: false
'''

import hashlib
import os
import tempfile
from urllib.parse import unquote, urlparse

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url
from ansible_collections.gpufleet.node.plugins.module_utils import _openpgp

# A public key file is a few KiB; a larger answer is not one.
MAX_KEY_BYTES = 1024 * 1024


def _read_keyring(path, armored):
    """(bytes, keys) of the keyring file; keys is None when it is missing, unreadable, not OpenPGP or not in the
    format its name asks for."""
    try:
        with open(path, 'rb') as handle:
            data = handle.read(MAX_KEY_BYTES + 1)
    except (IOError, OSError):
        return None, None
    if _openpgp.is_armored(data) != armored:
        return data, None
    try:
        return data, _openpgp.public_keys(data)
    except _openpgp.OpenPGPError:
        return data, None


def _fetch(module, url):
    """The bytes at an https:// or file:// URL; the module fails naming the URL when they cannot be read."""
    if url.startswith('file://'):
        parsed = urlparse(url)
        if parsed.netloc not in ('', 'localhost'):
            module.fail_json(msg="%s is '%s': expected a file:// URL of a file on the host (file:///path)."
                             % (module.params['key_from'], url))
        try:
            with open(unquote(parsed.path), 'rb') as handle:
                return handle.read(MAX_KEY_BYTES + 1)
        except (IOError, OSError) as error:
            module.fail_json(msg='Cannot read the key at %s: %s. Nothing was written.' % (url, error))
    response, info = fetch_url(module, url, timeout=module.params['timeout'])
    if response is None or info.get('status') != 200:
        module.fail_json(msg='Cannot fetch the key from %s: %s (HTTP status %s). Nothing was written.'
                         % (url, info.get('msg', 'no answer'), info.get('status')))
    return response.read(MAX_KEY_BYTES + 1)


def _checked_key(module, data, source, expected):
    """The keys of ``data``; the module fails, writing nothing, unless their fingerprints are ``expected``."""
    params = module.params
    if len(data) > MAX_KEY_BYTES:
        module.fail_json(msg='The key from %s is larger than %d bytes: not a public key file. Nothing was written to %s.'
                         % (source, MAX_KEY_BYTES, params['path']))
    try:
        keys = _openpgp.public_keys(data)
    except _openpgp.OpenPGPError as error:
        module.fail_json(msg='The key from %s is not an OpenPGP public key this module reads: %s. Nothing was written'
                         ' to %s.' % (source, error, params['path']))
    actual = sorted(set(key['fingerprint'] for key in keys))
    if actual != expected:
        module.fail_json(
            msg="%s is '%s': the key from %s holds %s, not %s. Nothing was written to %s. Give the fingerprint of the"
                " key you trust, or fix where the key comes from."
                % (params['fingerprints_from'], ', '.join(params['fingerprints']), source, _openpgp.describe(keys),
                   ', '.join(expected), params['path']),
            expected=expected, actual=actual)
    return keys


def _expected(module):
    """The normalised fingerprints of O(fingerprints); the module fails on settings that are not valid."""
    params = module.params
    problems = _openpgp.key_source_problems(params['key_from'], params['url'] or '', params['fingerprints_from'],
                                            params['fingerprints'])
    if problems:
        module.fail_json(msg=' '.join(problems) + ' Nothing was written to %s.' % params['path'])
    return sorted(set(_openpgp.normalize_fingerprint(value) for value in params['fingerprints']))


def _in_format(data, armored):
    if armored:
        return data if _openpgp.is_armored(data) else _openpgp.armor(data).encode('ascii')
    return _openpgp.dearmor(data) if _openpgp.is_armored(data) else data


def _write(module, path, data):
    directory = os.path.dirname(path) or '.'
    if not os.path.isdir(directory):
        module.fail_json(msg='The keyring directory %s does not exist.' % directory)
    handle, staged = tempfile.mkstemp(prefix='.%s.' % os.path.basename(path), dir=directory)
    with os.fdopen(handle, 'wb') as staged_file:
        staged_file.write(data)
    module.atomic_move(staged, path)


def _describe(keys, data):
    if data is None:
        return ''
    lines = ['%s %s\n' % (key['fingerprint'], '; '.join(key['user_ids'])) for key in keys or []]
    return ''.join(lines) + 'sha256 %s\n' % hashlib.sha256(data).hexdigest()


def _keyring(module, expected):
    """(keys, data to write, data before, fetched): the keyring in place when it holds the keys and may stay."""
    params = module.params
    armored = params['path'].endswith('.asc')
    before, current = _read_keyring(params['path'], armored)
    in_place = current is not None and sorted(set(key['fingerprint'] for key in current)) == expected
    if params['url'] and in_place:
        return current, before, before, False
    source = '%s (%s)' % (params['url'], params['key_from']) if params['url'] else params['key_from']
    data = _fetch(module, params['url']) if params['url'] else params['content'].encode('utf-8')
    keys = _checked_key(module, data, source, expected)
    return keys, _in_format(data, armored), before, bool(params['url'])


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            content=dict(type='str'),
            url=dict(type='str'),
            fingerprints=dict(type='list', elements='str', required=True),
            fingerprints_from=dict(type='str', default='fingerprints'),
            key_from=dict(type='str', default='the key', no_log=False),
            timeout=dict(type='int', default=30),
        ),
        mutually_exclusive=[('content', 'url')],
        required_one_of=[('content', 'url')],
        add_file_common_args=True,
        supports_check_mode=True,
    )
    expected = _expected(module)
    keys, data, before, fetched = _keyring(module, expected)
    changed = data != before
    if changed and not module.check_mode:
        _write(module, module.params['path'], data)
    file_args = module.load_file_common_arguments(module.params)
    file_args['mode'] = file_args['mode'] or '0644'
    changed = module.set_fs_attributes_if_different(file_args, changed)
    result = dict(changed=changed, primary_keys=keys, fetched=fetched)
    if module._diff and data != before:
        path = module.params['path']
        result['diff'] = dict(before_header=path, after_header=path, before=_describe(_keys_of(before), before),
                              after=_describe(keys, data))
    module.exit_json(**result)


def _keys_of(data):
    try:
        return _openpgp.public_keys(data or b'')
    except _openpgp.OpenPGPError:
        return []


def main():
    run_module()


if __name__ == '__main__':
    main()
