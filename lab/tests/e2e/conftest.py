"""Fixtures driving the real Kubernetes lab (control plane + kubelets on SIMULATED GPU nodes).

Run with ``make kubelab-test`` (``.venv/bin/pytest -p no:cacheprovider lab/tests/e2e``, as root, docker running,
base image built). ``make units`` does not collect these (lab/tests/conftest.py leaves e2e/ out unless it is named).
Figures (build, up, node Ready, memory) are written to ``reports/kubelab-figures.json``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "lab"))

from gpufleet_lab import binaries, kube, node  # noqa: E402
from gpufleet_lab.common import LabSettings  # noqa: E402

FIGURES: dict[str, Any] = {}
NODES = {
    # name: (simulated GPU profile, kubelet root dir)
    "gflab-h100": ("h100x8", "/var/lib/kubelet"),
    "gflab-a100": ("a100x4-mig", "/data/kubelet"),
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kubelab: drives the real Kubernetes lab (slow, needs docker and root)")
    FIGURES["suite_started"] = time.monotonic()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "lab/tests/e2e" in str(item.fspath):
            item.add_marker(pytest.mark.kubelab)


def pytest_unconfigure(config: pytest.Config) -> None:
    started = FIGURES.pop("suite_started", None)
    if started is not None and "up_seconds" in FIGURES:
        FIGURES["whole_test_seconds"] = round(time.monotonic() - started, 1)
        out = REPO / "reports" / "kubelab-figures.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps({k: v for k, v in FIGURES.items() if not k.startswith("_")}, indent=2) + "\n")


def pod_cgroups() -> set[str]:
    """Container cgroups containerd's CRI made in the machine's hierarchy (nodes run with cgroupns=host)."""
    found: set[str] = set()
    for namespace_dir in Path("/sys/fs/cgroup").glob("*/k8s.io"):
        found.update(f"{namespace_dir.parent.name}/{p.name}" for p in namespace_dir.iterdir() if p.is_dir())
    return found


@pytest.fixture(scope="session")
def cgroups_now() -> Callable[[], set[str]]:
    return pod_cgroups


@pytest.fixture(scope="session")
def figures() -> dict[str, Any]:
    return FIGURES


@pytest.fixture(scope="session")
def lab_up() -> Iterator[LabSettings]:
    started = time.monotonic()
    binaries.build_binaries()
    FIGURES["binaries_ready_seconds"] = round(time.monotonic() - started, 1)
    build_json = binaries.cached_bin_dir().parent / "build.json"
    if build_json.is_file():
        FIGURES["cold_build_seconds_recorded"] = json.loads(build_json.read_text()).get("build_seconds")
    started = time.monotonic()
    settings = kube.up()
    FIGURES["up_seconds"] = round(time.monotonic() - started, 1)
    try:
        yield settings
    finally:
        if not os.environ.get("GPUFLEET_LAB_KEEP"):  # keep the lab to look at a failure
            kube.down()


@pytest.fixture(scope="session")
def lab_nodes(lab_up: LabSettings) -> dict[str, node.NodeSpec]:
    specs = {}
    for name, (profile, root) in NODES.items():
        started = time.monotonic()
        specs[name] = node.node_add(name, profile, root, userspace="profile")
        FIGURES[f"node_add_ready_seconds_{name}"] = round(time.monotonic() - started, 1)
    return specs


@pytest.fixture(scope="session")
def k8s(lab_up: LabSettings) -> Any:
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=str(lab_up.admin_kubeconfig))
    return client.CoreV1Api(api_client), client.AppsV1Api(api_client)


VISIBLE_ON_NODE = "/var/lib/gpufleet-lab-test/visible.json"
VISIBLE_SCRIPT = ("import json, sys; sys.path.insert(0, '/opt/gpusim/lib'); import gpusim; "
                  "print(json.dumps(gpusim.injection('/opt/gpusim', ['all'])['payload']))")


@pytest.fixture(scope="session")
def injected_gpus(lab_nodes: dict[str, node.NodeSpec]) -> dict[str, list[str]]:
    """Write on each node what the NVIDIA runtime would inject into the plugin's container (no runtime
    runs on these nodes); return each node's GPU UUIDs."""
    uuids = {}
    for name in lab_nodes:
        payload = subprocess.run(["docker", "exec", name, "python3", "-c", VISIBLE_SCRIPT],
                                 capture_output=True, text=True, check=True).stdout
        subprocess.run(["docker", "exec", "-i", name, "sh", "-c",
                        f"mkdir -p {Path(VISIBLE_ON_NODE).parent} && cat > {VISIBLE_ON_NODE}"],
                       input=payload, text=True, check=True)
        uuids[name] = [gpu["uuid"] for gpu in json.loads(payload)["gpus"]]
    return uuids
