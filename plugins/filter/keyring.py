# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The keyring_in_place filter: whether a keyring gpu_node_read read holds exactly the expected keys."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils._node_state import keyring_in_place


class FilterModule(object):
    def filters(self):
        return {'keyring_in_place': keyring_in_place}
