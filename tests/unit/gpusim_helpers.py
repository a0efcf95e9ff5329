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


def build_profile(name: str, prefix: Path, **options) -> Path:
    """Build a profile's simulated host under prefix (options: gpusim.build's userspace, host_root, ...); return prefix/root."""
    requires_mknod()
    changed, actions = gpusim.build(str(KIT / "profiles" / f"{name}.json"), str(prefix), **options)
    assert changed and actions
    return prefix / "root"


def install_host_userspace(host_root: Path, version: str | None, library_dir: str = "usr/lib/x86_64-linux-gnu") -> Path:
    """A stand-in for the node's real library directory holding the driver's libnvidia-ml.so.<version> (None: no driver)."""
    directory = host_root / library_dir
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("libnvidia-ml.so*"):
        old.unlink()
    if version:
        (directory / f"libnvidia-ml.so.{version}").write_bytes(b"")
        (directory / "libnvidia-ml.so.1").symlink_to(f"libnvidia-ml.so.{version}")
    return directory
