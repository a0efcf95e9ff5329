# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The render lookup: ansible.builtin.template without its deep copy of every variable."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: render
author:
  - gpufleet maintainers (@gpufleet)
version_added: 1.0.0
short_description: Render a template with the task's variables, as ansible.builtin.template does, without copying them
description:
  - Renders each template it is given exactly as the P(ansible.builtin.template#lookup) lookup does (the same search
    path, options, C(ansible_managed) and C(template_*) variables), and returns the rendered text.
  - The builtin lookup deep-copies every variable of the host before each rendering (all of C(hostvars) reachable
    through C(vars), every registered result); on a host with many variables that costs tens of milliseconds a call,
    and a role that judges its state with templates calls it many times a host. This lookup gives the rendering a
    shallow copy instead, so a template must not change the variables it reads (the collection's templates build
    their own lists and dictionaries).
options:
  _terms:
    description: The templates to render, found in the role's or playbook's C(templates) directory.
    required: true
  template_vars:
    description: A dictionary whose keys become additional variables of the rendering.
    type: dict
    default: {}
  variable_start_string:
    description: The string marking the beginning of a print statement.
    type: str
    default: '{{'
  variable_end_string:
    description: The string marking the end of a print statement.
    type: str
    default: '}}'
  comment_start_string:
    description: The string marking the beginning of a comment statement.
    type: str
    default: '{#'
  comment_end_string:
    description: The string marking the end of a comment statement.
    type: str
    default: '#}'
  trim_blocks:
    description: Whether the first newline after a block is removed (block, not variable tag).
    type: bool
    default: true
notes:
  - The options are those of P(ansible.builtin.template#lookup) that ansible-core still uses, with its defaults.
seealso:
  - plugin: ansible.builtin.template
    plugin_type: lookup
"""

EXAMPLES = r"""
- name: Judge the node with a template
  ansible.builtin.set_fact:
    checks: "{{ lookup('gpufleet.node.render', 'checks.j2') | from_json }}"
"""

RETURN = r"""
_raw:
  description: The rendered text of each template.
  type: list
  elements: raw
"""

from ansible.plugins.lookup.template import LookupModule as TemplateLookup


class _ShallowOnDeepCopy(dict):
    """The variables, copied one level deep where the builtin lookup asks for a deep copy."""

    def __deepcopy__(self, memo):
        return dict(self)


class LookupModule(TemplateLookup):
    def run(self, terms, variables=None, **kwargs):
        return super(LookupModule, self).run(terms, variables=_ShallowOnDeepCopy(variables or {}), **kwargs)
