# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The keyring_in_place filter: whether a keyring gpu_node_read read holds exactly the expected keys."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.filter.node_read import file_in_place
from ansible_collections.gpufleet.node.plugins.module_utils import _openpgp


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


class FilterModule(object):
    def filters(self):
        return {'keyring_in_place': keyring_in_place}
