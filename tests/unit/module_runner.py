"""Runs a module's main() in-process with given arguments and returns what it exited or failed with."""
from __future__ import annotations

from contextlib import ExitStack
from unittest import mock

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpufleet.node.plugins.module_utils import _run


class ModuleExit(Exception):
    pass


def _exit_json(self, **kwargs):
    kwargs.setdefault("changed", False)
    raise ModuleExit(kwargs)


def _fail_json(self, msg, **kwargs):
    raise ModuleExit(dict(kwargs, failed=True, msg=msg))


def _no_commands(argv, environ_update, data=None):
    raise AssertionError("the test gave no answers for commands, and a unit test runs none for real: %r" % (argv,))


def run_module(main, args, commands=_no_commands, **module_methods):
    """main() of a module with args; commands(argv, environ_update, data=None) answers the commands the module runs
    through module_utils/_run.py (none runs for real); module_methods replace AnsibleModule methods (get_bin_path...)."""
    with ExitStack() as stack:
        stack.enter_context(patch_module_args(args))
        stack.enter_context(mock.patch.object(_run, "execute", commands))
        for name, replacement in dict(module_methods, exit_json=_exit_json, fail_json=_fail_json).items():
            stack.enter_context(mock.patch.object(basic.AnsibleModule, name, replacement))
        try:
            main()
        except ModuleExit as outcome:
            return outcome.args[0]
    raise AssertionError("module neither exited nor failed")
