"""Kernel parameters a kubelet changes machine-wide (they are not namespaced).

A kubelet that can write /proc/sys sets kernel.panic, kernel.panic_on_oops and
vm.overcommit_memory for the whole machine. The lab records the values before its first
kubelet starts and puts them back on ``down``.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpufleet_lab.proc import log

KUBELET_SYSCTLS: tuple[str, ...] = ("kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory")
RECORD_NAME = "sysctl-before.json"
PROC_SYS = Path("/proc/sys")


def sysctl_path(name: str, proc_sys: Path = PROC_SYS) -> Path:
    return proc_sys / name.replace(".", "/")


def read(proc_sys: Path = PROC_SYS) -> dict[str, str]:
    return {name: sysctl_path(name, proc_sys).read_text().strip() for name in KUBELET_SYSCTLS}


def record(state_dir: Path, proc_sys: Path = PROC_SYS) -> dict[str, str]:
    """Record the current values once (a second ``up`` keeps the first record)."""
    path = state_dir / RECORD_NAME
    if path.is_file():
        return dict(json.loads(path.read_text()))
    values = read(proc_sys)
    path.write_text(json.dumps(values, indent=2) + "\n")
    return values


def restore(state_dir: Path, proc_sys: Path = PROC_SYS) -> dict[str, tuple[str, str]]:
    """Write back the recorded values that differ; return name -> (found, restored)."""
    path = state_dir / RECORD_NAME
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
    if changed:
        log("restored kernel parameters: " + ", ".join(f"{k}={v[1]} (was {v[0]})" for k, v in changed.items()))
    return changed
