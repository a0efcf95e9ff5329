# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's one way to run a command on the target (private to gpufleet.node)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess


class CommandResult:
    """Outcome of one command: rc, stdout, stderr, argv, and timed_out / not_found flags."""

    def __init__(self, argv, rc, stdout='', stderr='', timed_out=False, not_found=False):
        self.argv = list(argv)
        self.rc = rc
        self.stdout = stdout or ''
        self.stderr = stderr or ''
        self.timed_out = timed_out
        self.not_found = not_found

    @property
    def ok(self):
        return self.rc == 0 and not self.timed_out and not self.not_found

    @property
    def output(self):
        """stdout and stderr together (nvidia-smi prints its errors on stdout)."""
        return '\n'.join(part for part in (self.stdout, self.stderr) if part)

    def as_dict(self):
        return {'cmd': self.argv, 'rc': self.rc, 'stdout': self.stdout, 'stderr': self.stderr,
                'timed_out': self.timed_out, 'not_found': self.not_found}


def execute(argv, environ_update, data=None):
    """Runs argv (no shell) with data as its input (else /dev/null) and returns rc, stdout and stderr as text.

    Not AnsibleModule.run_command: its read loop (ansible-core 2.19) asks the process twice whether it has exited,
    and a command that exits between the two asks sends the loop once more into a select() on no pipes, which waits
    out its whole one-second timeout. On a busy host that adds a second to a command now and then, and a task waits
    for its slowest host. communicate() has no such window (hence the pylint exception ansible-test 2.21 asks for).
    """
    try:
        process = subprocess.Popen(  # pylint: disable=ansible-bad-function
            argv, stdin=subprocess.DEVNULL if data is None else subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=dict(os.environ, **environ_update), close_fds=True)
    except OSError as exc:
        return 126, '', '%s: %s' % (argv[0], exc)
    stdout, stderr = process.communicate(None if data is None else data.encode('utf-8'))
    return process.returncode, stdout.decode('utf-8', 'surrogateescape'), stderr.decode('utf-8', 'surrogateescape')


class CommandRunner:
    """Runs commands with a time limit and no shell.

    A missing executable is reported as CommandResult(not_found=True) rather than failing the
    module, and commands are wrapped in coreutils `timeout` when it exists so that a hung
    nvidia-smi (a known symptom of a lost GPU) cannot hang the play.
    """

    TIMEOUT_RC = 124

    def __init__(self, module, timeout=60):
        self.module = module
        self.timeout = timeout
        self._timeout_bin = module.get_bin_path('timeout', required=False)

    def run(self, argv):
        argv = [str(arg) for arg in argv]
        executable = argv[0]
        if os.path.sep in executable:
            if not (os.path.isfile(executable) and os.access(executable, os.X_OK)):
                return CommandResult(argv, 127, stderr='%s: not found or not executable' % executable, not_found=True)
        else:
            found = self.module.get_bin_path(executable, required=False)
            if not found:
                return CommandResult(argv, 127, stderr='%s: not found in PATH' % executable, not_found=True)
            argv[0] = found
        command = argv
        if self._timeout_bin and self.timeout:
            command = [self._timeout_bin, '--kill-after=5', str(self.timeout)] + argv
        rc, stdout, stderr = execute(command, {'LC_ALL': 'C'})
        timed_out = bool(self._timeout_bin and self.timeout and rc in (self.TIMEOUT_RC, 137))
        return CommandResult(argv, rc, stdout, stderr, timed_out=timed_out)
