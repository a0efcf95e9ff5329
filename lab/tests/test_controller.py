"""Controller containers: another ansible-core on another Python, reaching the lab as the host's controller does."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpufleet_lab import controller, images
from gpufleet_lab.common import REPO_ROOT
from gpufleet_lab.proc import LabError


def test_the_newest_controller_pins_ansible_core():
    pins = [line for line in controller.requirements("newest").read_text().splitlines()
            if line.startswith("ansible-core==")]
    assert len(pins) == 1


def test_an_unknown_controller_names_the_known_ones():
    with pytest.raises(LabError, match=r"no controller 'oldest'.*known: newest"):
        controller.requirements("oldest")


def test_the_image_is_built_once_per_base_image_and_requirements(monkeypatch):
    built, images_there = [], set()
    monkeypatch.setattr(images, "ensure", lambda release: f"gpufleet-lab/node:{release}")
    monkeypatch.setattr(images, "succeeds", lambda argv: argv[-1] in images_there)

    def fake_run(argv, **kwargs):
        if argv[:3] == ["docker", "image", "inspect"]:
            return subprocess.CompletedProcess(argv, 0, stdout=base_id[0] + "\n", stderr="")
        if argv[:2] == ["docker", "commit"]:
            images_there.add(argv[-1])
            built.append(argv[-1])
        if argv[:2] == ["docker", "run"]:
            assert kwargs["input_text"] == controller.requirements("newest").read_text()
        return subprocess.CompletedProcess(argv, 0, stdout="", stderr="")

    monkeypatch.setattr(images, "run", fake_run)
    base_id = ["sha256:a"]
    first = controller.ensure("newest")
    assert first.startswith("gpufleet-lab/controller:newest-") and controller.ensure("newest") == first
    base_id[0] = "sha256:b"
    assert controller.ensure("newest") != first
    assert len(built) == 2


def test_only_the_runs_own_settings_pass_into_the_controller():
    environ = {"ANSIBLE_COLLECTIONS_PATH": "/c", "GPUFLEET_LAB_NAME": "kube2", "MOLECULE_DEBUG": "1", "CI": "true",
               "PY_COLORS": "0", "PATH": "/host/bin", "HOME": "/root", "VIRTUAL_ENV": "/venv"}
    assert controller.passed_env(environ) == {"ANSIBLE_COLLECTIONS_PATH": "/c", "GPUFLEET_LAB_NAME": "kube2",
                                              "MOLECULE_DEBUG": "1", "CI": "true", "PY_COLORS": "0"}


def _options(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == flag]


def test_the_controller_reaches_the_checkout_and_docker_as_the_host_does(monkeypatch):
    monkeypatch.setattr(controller.shutil, "which", lambda name: "/usr/bin/docker")
    monkeypatch.setattr(controller.os, "nice", lambda increment: 0)
    argv = controller.run_argv("gpufleet-lab/controller:newest-abc", "newest", ["pytest", "tests/unit"],
                               REPO_ROOT, {"GPUFLEET_LAB_NAME": "kube2"})
    assert _options(argv, "--network") == ["host"]
    volumes = _options(argv, "-v")
    assert f"{REPO_ROOT}:{REPO_ROOT}" in volumes
    assert "/var/run/docker.sock:/var/run/docker.sock" in volumes
    assert "/usr/bin/docker:/usr/local/bin/docker:ro" in volumes
    assert f"{controller.HOME_CACHE / 'newest-abc'}:/root" in volumes
    assert "GPUFLEET_LAB_NAME=kube2" in _options(argv, "-e")
    assert _options(argv, "-w") == [str(REPO_ROOT)]
    assert argv[-3:] == ["gpufleet-lab/controller:newest-abc", "pytest", "tests/unit"]
    assert "--cpu-shares" not in argv


def test_a_run_at_lower_priority_stays_lower_inside_the_controller(monkeypatch):
    monkeypatch.setattr(controller.shutil, "which", lambda name: "/usr/bin/docker")
    monkeypatch.setattr(controller.os, "nice", lambda increment: 10)
    argv = controller.run_argv("gpufleet-lab/controller:newest-abc", "newest", ["pytest"], Path("/x"),
                               {"GPUFLEET_TEST_CPU_SHARES": "256"})
    assert _options(argv, "--cpu-shares") == ["256"]
    assert argv[-4:] == ["nice", "-n", "10", "pytest"]


def test_no_docker_cli_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(controller.shutil, "which", lambda name: None)
    with pytest.raises(LabError, match="docker CLI is not on PATH"):
        controller.run_argv("t:k", "newest", ["true"], Path("/x"), {})
