"""The Galaxy artifact: what it carries, and that it installs and resolves like a collection from Galaxy.

The artifact is built from a copy of the checkout on which a lab run, a test run and a report have left their
files (a generated lab inventory, reports, caches, a build tree): none of them may ship.
"""
from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

import artifact as artifact_tool  # tools/artifact.py (pytest.ini puts tools/ on the path)

REPO = Path(__file__).resolve().parents[2]
# What a checkout holds after the lab, the tests and a run have been used in it.
LEFT_BY_RUNS = (
    ".build/lab/inventory/hosts.yml", ".build/lab/inventory/group_vars/gpu_nodes.yml", "reports/onboard-summary.json",
    ".build/test-logs/units.log", ".pytest_cache/v/cache/lastfailed", "context/_build/requirements.yml",
    "gpufleet-node-0.0.9.tar.gz", ".ansible/collections/x", "tests/output/junit.xml",
)
NOT_SHIPPED = (
    ".ansible/", ".build/", ".ci/", ".config/", ".git/", ".pytest_cache/", ".venv/", "context/",
    "lab/", "extensions/", "reports/", "tests/", "tools/", "Makefile", "pytest.ini", "requirements-dev.txt",
    "ansible.cfg", ".ansible-lint", ".ansible-lint-ignore", ".yamllint",
)
SHIPPED = (
    "MANIFEST.json", "FILES.json", "README.md", "CHANGELOG.md", "COPYING", "meta/runtime.yml", "requirements.yml",
    "requirements.txt", "bindep.txt", "execution-environment.yml", "changelogs/changelog.yaml",
    "plugins/modules/nvidia_gpu_check.py", "playbooks/onboard.yml", "playbooks/upgrade_driver.yml",
    "playbooks/access.yml", "playbooks/templates/access_objects.yml.j2",
    "inventories/example/hosts.yml", "monitoring/gpufleet-gpu-alerts.rules.yml", "monitoring/gpufleet-gpu-alerts.prometheusrule.yml",
)


@pytest.fixture(scope="module")
def used_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout's files (as a clean clone has them) with what runs leave behind."""
    source = artifact_tool.snapshot(REPO, tmp_path_factory.mktemp("checkout") / "node")
    for name in LEFT_BY_RUNS:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text("left by a run\n", encoding="utf-8")
    return source


@pytest.fixture(scope="module")
def artifact(used_checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tarball, and the collections path it was installed into with its dependencies."""
    return artifact_tool.build_and_install(used_checkout, tmp_path_factory.mktemp("artifact"))


@pytest.fixture(scope="module")
def members(artifact: tuple[Path, Path]) -> list[str]:
    with tarfile.open(artifact[0]) as tar:
        return tar.getnames()


@pytest.mark.parametrize("name", SHIPPED)
def test_artifact_has_the_collection(members: list[str], name: str) -> None:
    assert name in members


@pytest.mark.parametrize("prefix", NOT_SHIPPED)
def test_artifact_has_nothing_of_the_lab_tests_or_runs(members: list[str], prefix: str) -> None:
    leaked = [name for name in members if name == prefix.rstrip("/") or name.startswith(prefix)]
    assert leaked == []


def test_artifact_has_no_tarballs_or_bytecode(members: list[str]) -> None:
    assert [name for name in members if name.endswith((".tar.gz", ".pyc")) or "__pycache__" in name] == []


def _only(collections_path: Path) -> dict[str, str]:
    """An environment in which Ansible sees the collections of ``collections_path`` and no other."""
    env = {name: value for name, value in os.environ.items() if name != "ANSIBLE_CONFIG"}
    return {**env, "ANSIBLE_COLLECTIONS_PATH": str(collections_path), "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false"}


def _ansible(tool: str, *args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([artifact_tool.tool(tool), *args], env=env, cwd=cwd, capture_output=True, text=True, check=False)


def test_installed_with_every_declared_dependency(artifact: tuple[Path, Path], tmp_path: Path) -> None:
    listed = _ansible("ansible-galaxy", "collection", "list", "--format", "json", env=_only(artifact[1]), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    installed = {name for path, collections in json.loads(listed.stdout).items()
                 if path.startswith(str(artifact[1])) for name in collections}
    declared = set(artifact_tool.galaxy_metadata(REPO)["dependencies"])
    assert installed == {"gpufleet.node"} | declared


@pytest.mark.parametrize("playbook", ["gpufleet.node.onboard", "gpufleet.node.upgrade_driver", "gpufleet.node.access"])
def test_playbooks_resolve_from_the_installed_collection_alone(artifact: tuple[Path, Path], tmp_path: Path,
                                                               playbook: str) -> None:
    """Every role, module and filter the playbook names is found in the install (a missing one fails the check)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    gpu_nodes:\n      hosts:\n        gpu-1: {}\n", encoding="utf-8")
    result = _ansible("ansible-playbook", "--syntax-check", "-i", str(inventory), playbook,
                      env=_only(artifact[1]), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_module_documented_from_the_installed_collection(artifact: tuple[Path, Path], tmp_path: Path) -> None:
    result = _ansible("ansible-doc", "--json", "-t", "module", "gpufleet.node.nvidia_gpu_check",
                      env=_only(artifact[1]), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)["gpufleet.node.nvidia_gpu_check"]["doc"]
    assert doc["filename"].startswith(str(artifact[1]))
