# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action of gpufleet.node.report_files: writes report files on the controller, without a module run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_bytes
from ansible.plugins.action import ActionBase

ARGUMENT_SPEC = dict(
    dest=dict(type='path', required=True),
    files=dict(type='dict', required=True),
    mode=dict(type='raw', default='0640'),
    dir_mode=dict(type='raw', default='0750'),
)


def _octal(name, value):
    try:
        return int(str(value), 8)
    except ValueError:
        raise AnsibleActionFail('%s is %r: it must be an octal mode such as 0640' % (name, value))


def _unchanged(path, data):
    try:
        with open(path, 'rb') as handle:
            return handle.read() == data
    except (IOError, OSError):
        return False


def _write(path, data, mode):
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix='.' + os.path.basename(path))
    try:
        with os.fdopen(handle, 'wb') as stream:
            stream.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        dest = os.path.expanduser(args['dest'])
        mode, dir_mode = _octal('mode', args['mode']), _octal('dir_mode', args['dir_mode'])
        bad = [name for name in args['files'] if not name or os.path.basename(name) != name or name in ('.', '..')]
        if bad:
            raise AnsibleActionFail('files: %s must be plain file names inside dest' % ', '.join(sorted(bad)))
        contents = dict((name, to_bytes(text, errors='surrogate_or_strict')) for name, text in args['files'].items())
        paths = dict((name, os.path.join(dest, name)) for name in contents)
        changed = sorted(name for name in contents if not _unchanged(paths[name], contents[name]))
        result.update(changed=bool(changed), dest=dest, files=sorted(paths.values()), changed_files=changed)
        if self._task.check_mode:
            return result
        try:
            if not os.path.isdir(dest):
                os.makedirs(dest, dir_mode)
            for name in contents:
                if name in changed:
                    _write(paths[name], contents[name], mode)
                else:
                    os.chmod(paths[name], mode)
        except (IOError, OSError) as exc:
            raise AnsibleActionFail('cannot write the reports in %s: %s' % (dest, exc))
        return result
