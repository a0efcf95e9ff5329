# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action of gpufleet.node.validate_settings: a role's settings against its argument spec and the rules between
them (module_utils/_settings.py), on the controller, without touching the host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import yaml

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible_collections.gpufleet.node.plugins.module_utils import _settings

ARGUMENT_SPEC = dict(
    role=dict(type='str', required=True, choices=sorted(_settings.RULES)),
    context=dict(type='dict', default={}),
)
ROLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'roles')


def role_options(role):
    """The options of the role's main entry point, from its meta/argument_specs.yml."""
    path = os.path.join(ROLES_DIR, role, 'meta', 'argument_specs.yml')
    try:
        with open(path) as handle:
            return yaml.safe_load(handle)['argument_specs']['main']['options']
    except (IOError, OSError, KeyError, TypeError, yaml.YAMLError) as error:
        raise AnsibleActionFail('cannot read the argument spec of role %s (%s): %s' % (role, path, error))


def validate(role, given, facts, context):
    """The argument spec's errors, or else the problems the rules between the settings find."""
    result = ArgumentSpecValidator(role_options(role)).validate(given)
    if result.error_messages:
        return ['%s: %s' % (role, message) for message in result.error_messages]
    return _settings.problems(role, _settings.as_given(result.validated_parameters, given), facts, context)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        task_vars = task_vars or {}
        options = role_options(args['role'])
        given = self._templar.template({name: task_vars[name] for name in options if name in task_vars})
        facts = self._templar.template(task_vars.get('ansible_facts', {}))
        problems = validate(args['role'], given, facts, args['context'])
        result.update(changed=False, role=args['role'], problems=problems)
        if problems:
            result.update(failed=True, msg=' '.join(problems))
        else:
            result['msg'] = 'The settings of %s are valid.' % args['role']
        return result
