"""Whole-lab operations: ``up`` and ``down``."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from gpufleet_lab import access, controlplane, inventory, sysctl
from gpufleet_lab.common import LabSettings, docker_exists
from gpufleet_lab.proc import log, run
from gpufleet_lab.node import lab_containers, load_specs, node_rm, other_labs


def up() -> LabSettings:
    """Start the control plane and create the playbooks' restricted identity (idempotent)."""
    settings = controlplane.up()
    access.ensure(settings)
    return settings


def restore_kernel_parameters(labs_still_up: set[str], record_dir: Path = sysctl.MACHINE_DIR,
                              proc_sys: Path = sysctl.PROC_SYS) -> dict[str, tuple[str, str]]:
    """Put back the machine's kernel parameters unless another lab's kubelets still run with them."""
    if labs_still_up:
        log(f"kernel parameters left to the labs still up ({', '.join(sorted(labs_still_up))}): their kubelets use them")
        return {}
    return sysctl.restore(record_dir, proc_sys)


def down() -> list[str]:
    """Remove every lab node, stop the control plane by pid file, remove network and state.

    Restores the kernel parameters recorded before the first kubelet ran, when no other lab is up. Returns what was
    removed.
    """
    settings = LabSettings.from_env()
    started = time.monotonic()
    removed: list[str] = []
    for spec in load_specs(settings):
        if node_rm(spec.name):
            removed.append(f"node {spec.name}")
    for name in lab_containers("node"):  # nodes whose state was lost: still labelled as ours
        if node_rm(name):
            removed.append(f"node {name}")
    if docker_exists("container", settings.control_plane_name):
        removed.append("control plane")
    controlplane.remove(settings)
    for name in lab_containers():
        run(["docker", "rm", "-f", "-v", name])
        removed.append(f"container {name}")
    if docker_exists("network", settings.network):
        run(["docker", "network", "rm", settings.network])
    _remove_empty_pod_cgroup_parents()
    restore_kernel_parameters(other_labs())
    inventory.remove_inventory()
    if settings.state_dir.exists():
        shutil.rmtree(settings.state_dir)
    try:
        settings.state_dir.parent.rmdir()  # /var/lib/gpufleet-lab, when the lab made it and nothing else is there
    except OSError:
        pass
    log(f"lab down in {time.monotonic() - started:.1f} s: removed {', '.join(removed) or 'nothing (no lab was up)'}")
    return removed


def _remove_empty_pod_cgroup_parents() -> None:
    """Drop ``/sys/fs/cgroup/*/k8s.io`` when empty (containerd's CRI made it; its pod cgroups are gone)."""
    for parent in Path("/sys/fs/cgroup").glob("*/k8s.io"):
        try:
            parent.rmdir()  # fails, and is kept, while anything is still inside
        except OSError:
            pass


def _pid_namespace(pid: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _pss_kib(pid: str) -> int:
    """Proportional set size of one process (shared pages split between their users)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _parent_pid(pid: str) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[1]
    except (OSError, IndexError):
        return None


def memory_report() -> dict[str, float]:
    """MiB (PSS) of each lab container: its processes and their descendants (pods included).

    docker stats cannot say it: with ``--cgroupns=host`` the pods' cgroups sit outside the
    node container's cgroup, and pods run in pid namespaces nested in the node's.
    """
    inits: dict[str, str] = {}
    namespaces: dict[str, str] = {}
    for name in lab_containers():
        pid = run(["docker", "inspect", "-f", "{{.State.Pid}}", name], quiet=True).stdout.strip()
        namespace = _pid_namespace(pid)
        if namespace:
            inits[pid] = name
            namespaces[namespace] = name
    parents = {pid: _parent_pid(pid) for pid in os.listdir("/proc") if pid.isdigit()}
    totals: dict[str, int] = {name: 0 for name in inits.values()}
    for pid in parents:
        owner = namespaces.get(_pid_namespace(pid) or "")
        ancestor: str | None = pid
        while owner is None and ancestor not in (None, "0", "1"):
            owner = inits.get(ancestor or "")
            ancestor = parents.get(ancestor or "")
        if owner:
            totals[owner] += _pss_kib(pid)
    report = {name: round(kib / 1024, 1) for name, kib in sorted(totals.items())}
    report["total"] = round(sum(totals.values()) / 1024, 1)
    return report
