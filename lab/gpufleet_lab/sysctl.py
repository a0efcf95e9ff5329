"""Kernel parameters a kubelet changes machine-wide (they are not namespaced).

A kubelet that can write /proc/sys sets kernel.panic, kernel.panic_on_oops and
vm.overcommit_memory for the whole machine. Several labs may run side by side (make test
runs one per Kubernetes lane), so the record is the machine's, not a lab's: the first
lab ``up`` records the values before any kubelet ran, and the last lab ``down`` puts
them back and removes the record. A lab that goes down while another is up leaves the
values to that one: its kubelets still run with them.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpufleet_lab.proc import log

KUBELET_SYSCTLS: tuple[str, ...] = ("kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory")
RECORD_NAME = "sysctl-before.json"
PROC_SYS = Path("/proc/sys")
MACHINE_DIR = Path("/var/lib/gpufleet-lab")  # shared by every lab on the machine


def sysctl_path(name: str, proc_sys: Path = PROC_SYS) -> Path:
    return proc_sys / name.replace(".", "/")


def read(proc_sys: Path = PROC_SYS) -> dict[str, str]:
    return {name: sysctl_path(name, proc_sys).read_text().strip() for name in KUBELET_SYSCTLS}


def record_path(record_dir: Path = MACHINE_DIR) -> Path:
    return record_dir / RECORD_NAME


def record(record_dir: Path = MACHINE_DIR, proc_sys: Path = PROC_SYS) -> dict[str, str]:
    """Record the current values once (a second ``up``, or a second lab, keeps the first record)."""
    path = record_path(record_dir)
    if path.is_file():
        return dict(json.loads(path.read_text()))
    values = read(proc_sys)
    record_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(values, indent=2) + "\n")
    return values


def restore(record_dir: Path = MACHINE_DIR, proc_sys: Path = PROC_SYS) -> dict[str, tuple[str, str]]:
    """Write back the recorded values that differ and remove the record; return name -> (found, restored)."""
    path = record_path(record_dir)
    changed: dict[str, tuple[str, str]] = {}
    if not path.is_file():
        return changed
    recorded = json.loads(path.read_text())
    for name, value in recorded.items():
        target = sysctl_path(name, proc_sys)
        current = target.read_text().strip()
        if current != value:
            target.write_text(value + "\n")
            changed[name] = (current, value)
    path.unlink()
    if changed:
        log("restored kernel parameters: " + ", ".join(f"{k}={v[1]} (was {v[0]})" for k, v in changed.items()))
    return changed
