# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One flag's value from a process's /proc/PID/cmdline (private to gpufleet.node: a filter and a module use it)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def cmdline_flag(cmdline, name):
    """Value of ``--name=value`` or ``--name value`` in a command line (NUL-separated, as /proc/PID/cmdline holds it,
    or a list of arguments); the last one wins, '' if absent."""
    args = list(cmdline) if isinstance(cmdline, (list, tuple)) else cmdline.split('\x00')
    flag = '--' + name
    value = ''
    for index, arg in enumerate(args):
        if arg.startswith(flag + '='):
            value = arg[len(flag) + 1:]
        elif arg == flag:
            value = args[index + 1] if index + 1 < len(args) else ''
    return value
