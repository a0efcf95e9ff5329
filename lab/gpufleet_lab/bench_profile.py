"""Where a playbook run's time goes, from the ansible.posix.json callback's output: seconds per role.

A task's time is from its start to its last host's result (the linear strategy waits for every host), so the
parts add up to the run's wall time less Ansible's start and the gaps between tasks. A task of a role counts
for the role (``gpufleet.node.nvidia_driver : Install ...`` for nvidia_driver); a playbook's own tasks count
for ``playbook``.
"""
from __future__ import annotations

import json
import os
import resource
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable

from gpufleet_lab.proc import LabError, run

PLAYBOOK_PART = "playbook"
SLOWEST = 5


@dataclass
class Profile:
    seconds: float
    parts: dict[str, float] = field(default_factory=dict)
    tasks: int = 0
    slowest: list[tuple[str, float]] = field(default_factory=list)
    # CPU time the whole machine spent during the run: the controller, the node containers, docker, the lab
    cpu_seconds: float = 0.0
    # That CPU time by where it was spent (CPU_PARTS); empty where the containers' cgroups cannot be read
    cpu_parts: dict[str, float] = field(default_factory=dict)
    # What the first host's tasks were (SHAPE_KINDS): each task costs Ansible according to its kind
    shape: dict[str, int] = field(default_factory=dict)
    # The time of those tasks by kind (each task from its start to its last host's result)
    kind_seconds: dict[str, float] = field(default_factory=dict)


CONTROLLER = "controller: Ansible, its local modules, the docker CLI"
NODES = "node containers: modules on the node, kubelet, containerd"
LAB = "the lab's other containers: control plane"
REST = "docker daemon, kernel and the rest"
CPU_PARTS = [CONTROLLER, NODES, LAB, REST]
# Tasks whose action runs on the controller only (no module round trip)
CONTROLLER_ACTIONS = {"set_fact", "assert", "debug", "fail", "include_tasks", "include_role", "import_tasks",
                      "import_role", "include_vars", "validate_argument_spec", "meta", "add_host", "group_by"}
SHAPE_KINDS = ["node module", "local module", "controller only", "skipped"]


def part_of(task_name: str) -> str:
    role, separator, _task = task_name.partition(" : ")
    return role.rsplit(".", 1)[-1] if separator else PLAYBOOK_PART


def _instant(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _task_seconds(task: dict) -> float | None:
    """A task's time from its start to its last host's result; None where it did not end."""
    duration = task["duration"]
    return (_instant(duration["end"]) - _instant(duration["start"])).total_seconds() if "end" in duration else None


def task_times(report: dict) -> list[tuple[str, float]]:
    """(name, seconds) of every task that ran, in order, from one json callback report."""
    times = []
    for play in report.get("plays", []):
        for entry in play.get("tasks", []):
            seconds = _task_seconds(entry["task"])
            if seconds is not None:
                times.append((entry["task"]["name"], seconds))
    return times


def last_failure(report: dict) -> list[str]:
    """`host: task: msg` of the last task that failed in one json callback report, one per host.

    The report does not say which failures were ignored (ignore_errors); the one that stopped the
    play is the last."""
    failures: list[tuple[int, str]] = []
    for play in report.get("plays", []):
        for entry in play.get("tasks", []):
            for host, result in entry.get("hosts", {}).items():
                if result.get("failed") or result.get("unreachable"):
                    failures.append((id(entry), f"{host}: {entry['task']['name']}: {result.get('msg', '')}"))
    return [text for entry, text in failures if entry == failures[-1][0]] if failures else []


def _first_host_tasks(report: dict) -> list[tuple[str, float | None]]:
    """(kind, seconds or None where the task did not end) of each task the report's first host ran."""
    tasks = []
    first_host = None
    for play in report.get("plays", []):
        for entry in play.get("tasks", []):
            hosts = entry.get("hosts", {})
            first_host = first_host or next(iter(hosts), None)
            if first_host in hosts:
                tasks.append((_kind(hosts[first_host]), _task_seconds(entry["task"])))
    return tasks


def shape_of(report: dict) -> dict[str, int]:
    """How many tasks of each kind (SHAPE_KINDS) the report's first host ran."""
    kinds = Counter(kind for kind, _seconds in _first_host_tasks(report))
    return {kind: kinds[kind] for kind in SHAPE_KINDS}


def time_by_kind(report: dict) -> dict[str, float]:
    """The time of the first host's tasks by kind (SHAPE_KINDS)."""
    seconds: dict[str, float] = defaultdict(float)
    for kind, task_seconds in _first_host_tasks(report):
        seconds[kind] += task_seconds or 0.0
    return {kind: seconds[kind] for kind in SHAPE_KINDS}


def _kind(result: dict) -> str:
    if result.get("skipped"):
        return "skipped"
    if result.get("action", "").rsplit(".", 1)[-1] in CONTROLLER_ACTIONS:
        return "controller only"
    return "local module" if "_ansible_delegated_vars" in result else "node module"


def profile_of(seconds: float, report: dict, slowest: int = SLOWEST) -> Profile:
    times = task_times(report)
    parts: dict[str, float] = defaultdict(float)
    for name, task_seconds in times:
        parts[part_of(name)] += task_seconds
    ranked = sorted(times, key=lambda item: -item[1])[:slowest]
    return Profile(seconds, dict(parts), len(times), ranked, shape=shape_of(report), kind_seconds=time_by_kind(report))


def profiled(run_playbook: Callable[[], str], is_node: Callable[[str], bool] = lambda _name: False) -> Profile:
    """Run a playbook whose stdout is the json callback's report; its wall time, CPU time and where they went.

    ``is_node`` tells the lab's node containers (by name) from its other containers."""
    output: list[str] = []
    cgroups = container_cgroups()
    before = cpu_snapshot(cgroups)
    seconds = timed(lambda: output.append(run_playbook()))
    after = cpu_snapshot(cgroups)
    profile = profile_of(seconds, json.loads(output[0]))
    spent = {key: after[key] - before[key] for key in after}
    profile.cpu_seconds = spent.pop("machine")
    controller = spent.pop("controller")
    if cgroups:
        nodes = sum(value for name, value in spent.items() if is_node(name))
        lab = sum(value for name, value in spent.items() if not is_node(name))
        profile.cpu_parts = {CONTROLLER: controller, NODES: nodes, LAB: lab,
                             REST: max(profile.cpu_seconds - controller - nodes - lab, 0.0)}
    return profile


def cpu_snapshot(cgroups: dict[str, Path]) -> dict[str, float]:
    """CPU seconds so far: the machine's, this process's children's (ansible-playbook and everything it waited
    for), and each container's (its cgroup). The children first: reading a cgroup starts no process."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    snapshot = {"controller": children.ru_utime + children.ru_stime, "machine": busy_cpu_seconds()}
    snapshot.update({name: _cgroup_cpu_seconds(path) for name, path in cgroups.items()})
    return snapshot


def container_cgroups() -> dict[str, Path]:
    """The CPU accounting file of each running container, by name: cgroup v1 (cpuacct) or v2 (cpu.stat);
    empty when docker or the files cannot be read."""
    try:
        listing = run(["docker", "ps", "--no-trunc", "--format", "{{.Names}} {{.ID}}"], quiet=True).stdout
    except (OSError, LabError):
        return {}
    found = {}
    for line in listing.splitlines():
        name, _separator, container_id = line.partition(" ")
        candidates = [Path(f"/sys/fs/cgroup/cpuacct/docker/{container_id}/cpuacct.usage"),
                      Path(f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/cpu.stat"),
                      Path(f"/sys/fs/cgroup/docker/{container_id}/cpu.stat")]
        readable = next((path for path in candidates if path.is_file()), None)
        if readable is None:
            return {}
        found[name] = readable
    return found


def _cgroup_cpu_seconds(path: Path) -> float:
    text = path.read_text(encoding="ascii")
    if path.name == "cpuacct.usage":
        return int(text) / 1e9
    usage = next(line.split()[1] for line in text.splitlines() if line.startswith("usage_usec "))
    return int(usage) / 1e6


def busy_cpu_seconds() -> float:
    """CPU seconds every CPU of the machine has been busy since boot (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat", encoding="ascii") as stat:
        jiffies = [int(value) for value in stat.readline().split()[1:]]
    return (sum(jiffies) - jiffies[3] - jiffies[4]) / os.sysconf("SC_CLK_TCK")


def median(profiles: list[Profile]) -> Profile:
    """The run of median wall time (an odd number of runs: the middle one)."""
    ordered = sorted(profiles, key=lambda profile: profile.seconds)
    return ordered[len(ordered) // 2]


def timed(action: Callable[[], object]) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started
