"""The collection's metadata agrees with itself and with what ships."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import artifact as artifact_tool  # tools/artifact.py (pytest.ini puts tools/ on the path)

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(path.parent.parent.name for path in (REPO / "roles").glob("*/meta/main.yml"))


def _yaml(name: str) -> dict:
    return yaml.safe_load((REPO / name).read_text(encoding="utf-8"))


def _minimum_ansible() -> str:
    requires = _yaml("meta/runtime.yml")["requires_ansible"]
    assert requires.startswith(">="), requires
    return requires[2:].split(",")[0].strip()


@pytest.mark.parametrize("role", ROLES)
def test_roles_need_the_collections_minimum_ansible_core(role: str) -> None:
    assert str(_yaml(f"roles/{role}/meta/main.yml")["galaxy_info"]["min_ansible_version"]) == _minimum_ansible()


def _pinned_ansible_core(requirements: Path) -> str:
    return next(line.split("==")[1] for line in requirements.read_text().splitlines()
                if line.startswith("ansible-core=="))


def test_the_supported_range_is_the_tested_ansible_core() -> None:
    """runtime.yml and the execution environment claim one range, and lanes test its ends: the virtualenv's pinned
    release is its lowest, and the newest controller's a release of the newest minor claimed."""
    from ansible.module_utils.compat.version import LooseVersion  # pylint: disable=import-outside-toplevel
    lowest, below = (part.strip().lstrip(">=<") for part in _yaml("meta/runtime.yml")["requires_ansible"].split(","))
    ee = _yaml("execution-environment.yml")["dependencies"]["ansible_core"]["package_pip"]
    assert ee == f"ansible-core>={lowest},<{'.'.join(below.split('.')[:2])}"
    assert _pinned_ansible_core(REPO / "requirements-dev.txt") == lowest
    newest = LooseVersion(_pinned_ansible_core(REPO / "tests/controllers/newest.txt"))
    major, minor = (int(part) for part in below.split(".")[:2])
    assert LooseVersion(f"{major}.{minor - 1}") <= newest < LooseVersion(below)


def test_requirements_file_lists_galaxy_dependencies() -> None:
    listed = {entry["name"]: entry["version"] for entry in _yaml("requirements.yml")["collections"]}
    assert listed == _yaml("galaxy.yml")["dependencies"]


def test_declared_dependencies_are_used() -> None:
    sources = [path.read_text(encoding="utf-8") for folder in ("roles", "playbooks", "plugins")
               for path in (REPO / folder).rglob("*") if path.suffix in (".yml", ".py", ".j2")]
    unused = [name for name in _yaml("galaxy.yml")["dependencies"] if not any(f"{name}." in text for text in sources)]
    assert unused == []


def _documented_options(module: Path) -> dict:
    source = module.read_text(encoding="utf-8")
    documentation = source.split("DOCUMENTATION = r\'\'\'", 1)[1].split("\'\'\'", 1)[0]
    return yaml.safe_load(documentation).get("options") or {}


def test_action_group_holds_every_module_that_reads_a_host_root() -> None:
    # module_defaults of a group hands its options to every module in it: only modules taking host_root belong there.
    modules = sorted(path.stem for path in (REPO / "plugins" / "modules").glob("*.py")
                     if path.stem != "__init__" and "host_root" in _documented_options(path))
    assert modules
    assert sorted(_yaml("meta/runtime.yml")["action_groups"]["gpu"]) == modules


def test_description_names_every_playbook() -> None:
    description = _yaml("galaxy.yml")["description"]
    assert [path.stem for path in (REPO / "playbooks").glob("*.yml") if path.stem not in description] == []


def test_module_defaults_reach_the_module_through_the_action_group(tmp_path: Path) -> None:
    host_root = tmp_path / "host"
    host_root.mkdir()
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "module_defaults": {"group/gpufleet.node.gpu": {"host_root": str(host_root),
                                                        "nvidia_smi_path": str(tmp_path / "no-nvidia-smi")}},
        "tasks": [{"gpufleet.node.nvidia_gpu_check": {"fail_on_error": False}, "register": "result"},
                  {"ansible.builtin.copy": {"content": "{{ result.nvidia_gpu | to_json }}",
                                            "dest": str(tmp_path / "result.json"), "mode": "0600"}}],
    }]), encoding="utf-8")
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".build" / "collections")}
    argv = [artifact_tool.tool("ansible-playbook"), "-i", "localhost,", "-e", f"ansible_python_interpreter={sys.executable}", str(playbook)]
    run = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads((tmp_path / "result.json").read_text(encoding="utf-8"))["host_root"] == str(host_root)
