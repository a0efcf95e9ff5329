"""The install roles' calls into the internal role common, checked against common's argument spec.

The roles import common with ``rolespec_validate: false``: the values are the roles' own, already checked by
their own argument specs, and validating them again at every run cost one task per call (14 per host). This test
does that check once, statically: every call names an entry point, passes only options that entry point has,
every required option, and literal values of the option's choices and type.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SPEC = yaml.safe_load((REPO / "roles" / "common" / "meta" / "argument_specs.yml").read_text())["argument_specs"]
PYTHON_TYPES = {"str": str, "int": int, "bool": bool, "list": list, "dict": dict}


def tasks_of(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for task in items or []:
        yield task
        for section in ("block", "rescue", "always"):
            yield from tasks_of(task.get(section, []))


def common_calls() -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for path in sorted(REPO.glob("roles/*/tasks/*.yml")) + sorted(REPO.glob("playbooks/**/*.yml")):
        if path.parts[-3] == "common":
            continue
        for task in tasks_of(yaml.safe_load(path.read_text()) or []):
            for action in ("ansible.builtin.import_role", "ansible.builtin.include_role"):
                if (task.get(action) or {}).get("name") == "gpufleet.node.common":
                    calls.append((f"{path.relative_to(REPO)}: {task.get('name')}", task))
    return calls


CALLS = common_calls()


def test_every_install_role_calls_common() -> None:
    roles = {where.split("/")[1] for where, _task in CALLS}
    assert roles == {"nvidia_driver", "container_toolkit", "containerd_nvidia"}
    assert len(CALLS) == 15


@pytest.mark.parametrize(("where", "task"), CALLS, ids=[where for where, _task in CALLS])
def test_call_matches_the_entry_point_spec(where: str, task: dict[str, Any]) -> None:
    call = task.get("ansible.builtin.import_role") or task["ansible.builtin.include_role"]
    entry = call.get("tasks_from")
    assert entry in SPEC and entry != "main", f"{where}: no entry point {entry!r}"
    assert call.get("rolespec_validate") is False, f"{where}: internal calls skip the run-time validation"
    options = SPEC[entry]["options"]
    given = task.get("vars", {})
    assert set(given) <= set(options), f"{where}: {sorted(set(given) - set(options))} not in common's {entry} spec"
    required = {name for name, option in options.items() if option.get("required")}
    assert required <= set(given), f"{where}: required {sorted(required - set(given))} missing"
    for name, value in given.items():
        if isinstance(value, str) and "{{" in value:
            continue  # templated: its value is the calling role's variable, checked by that role's spec
        option = options[name]
        if "choices" in option:
            assert value in option["choices"], f"{where}: {name}={value!r} not one of {option['choices']}"
        expected = PYTHON_TYPES.get(option.get("type", "str"))
        if expected is not None:
            assert isinstance(value, expected), f"{where}: {name}={value!r} is not a {option.get('type', 'str')}"
