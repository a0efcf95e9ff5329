"""Helpers shared by the nvidia_gpu_check and gpusim unit tests."""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "nvidia"
KIT = REPO / "lab" / "gpusim"
PROFILES = sorted(path.stem for path in (KIT / "profiles").glob("*.json"))


def load_gpusim():
    spec = importlib.util.spec_from_file_location("gpusim", KIT / "gpusim.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpusim = load_gpusim()


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def profile_data(name: str) -> dict:
    return json.loads((KIT / "profiles" / f"{name}.json").read_text(encoding="utf-8"))


def requires_mknod():
    """The simulated tree holds real character devices: building it needs root (CAP_MKNOD)."""
    if os.geteuid() != 0:
        pytest.skip("building the simulated GPU host tree needs root (mknod of character devices)")


def build_profile(name: str, prefix: Path) -> Path:
    """Build a profile's simulated host under prefix; return prefix/root."""
    requires_mknod()
    changed, actions = gpusim.build(str(KIT / "profiles" / f"{name}.json"), str(prefix))
    assert changed and actions
    return prefix / "root"
