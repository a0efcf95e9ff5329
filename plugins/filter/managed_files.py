# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters giving the text of the files the install roles write on a node (module_utils/_managed_files.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.node.plugins.module_utils import _managed_files


def _managed(managed):
    return managed or _managed_files.DEFAULT_MANAGED


def apt_preferences(packages, role, subject, managed=None):
    return _managed_files.apt_preferences(packages, role, subject, _managed(managed))


def unattended_upgrades_blacklist(packages, role, subject, managed=None):
    return _managed_files.unattended_upgrades_blacklist(packages, role, subject, _managed(managed))


def modules_load_conf(modules, managed=None):
    return _managed_files.modules_load(modules, _managed(managed))


def nouveau_blacklist_conf(managed=None):
    return _managed_files.nouveau_blacklist(_managed(managed))


def toml_file(data, comments):
    try:
        return _managed_files.toml_file(comments, data)
    except _managed_files.TomlError as error:
        raise AnsibleFilterError('toml_file: %s' % error)


class FilterModule(object):
    def filters(self):
        return {
            'apt_preferences': apt_preferences,
            'unattended_upgrades_blacklist': unattended_upgrades_blacklist,
            'modules_load_conf': modules_load_conf,
            'nouveau_blacklist_conf': nouveau_blacklist_conf,
            'toml_file': toml_file,
        }
