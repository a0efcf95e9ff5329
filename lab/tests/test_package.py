"""The lab is one package with one command line, described by lab/pyproject.toml."""
from __future__ import annotations

import importlib
import subprocess
import tomllib
from pathlib import Path

LAB = Path(__file__).resolve().parents[1]


def _project() -> dict:
    return tomllib.loads((LAB / "pyproject.toml").read_text())


def test_the_lab_is_one_package() -> None:
    packages = sorted(path.parent.name for path in LAB.glob("*/__init__.py"))
    assert packages == ["gpufleet_lab"]
    assert _project()["tool"]["setuptools"]["packages"] == ["gpufleet_lab"]


def test_labctl_is_the_one_entry_point_and_resolves() -> None:
    scripts = _project()["project"]["scripts"]
    assert list(scripts) == ["labctl"]
    module, _colon, function = scripts["labctl"].partition(":")
    assert callable(getattr(importlib.import_module(module), function))


def test_the_wrapper_runs_that_entry_point() -> None:
    result = subprocess.run([str(LAB / "labctl"), "--help"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: labctl")
    for command in ("docker", "images", "bench", "promtool", "kube"):
        assert command in result.stdout


def test_one_process_helper() -> None:
    # Every command the package runs goes through gpufleet_lab.proc (the Docker daemon's own start is a Popen).
    offenders = [path.name for path in (LAB / "gpufleet_lab").glob("*.py")
                 if path.name != "proc.py" and "subprocess.run(" in path.read_text()]
    assert offenders == []
