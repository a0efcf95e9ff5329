"""Where a playbook run's time goes, from the ansible.posix.json callback's output: seconds per role.

A task's time is from its start to its last host's result (the linear strategy waits for every host), so the
parts add up to the run's wall time less Ansible's start and the gaps between tasks. A task of a role counts
for the role (``gpufleet.node.nvidia_driver : Install ...`` for nvidia_driver); a playbook's own tasks count
for ``playbook``.
"""
from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

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


def part_of(task_name: str) -> str:
    role, separator, _task = task_name.partition(" : ")
    return role.rsplit(".", 1)[-1] if separator else PLAYBOOK_PART


def _instant(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def task_times(report: dict) -> list[tuple[str, float]]:
    """(name, seconds) of every task that ran, in order, from one json callback report."""
    times = []
    for play in report.get("plays", []):
        for entry in play.get("tasks", []):
            task = entry["task"]
            duration = task["duration"]
            if "end" in duration:
                times.append((task["name"], (_instant(duration["end"]) - _instant(duration["start"])).total_seconds()))
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


def profile_of(seconds: float, report: dict, slowest: int = SLOWEST) -> Profile:
    times = task_times(report)
    parts: dict[str, float] = defaultdict(float)
    for name, task_seconds in times:
        parts[part_of(name)] += task_seconds
    ranked = sorted(times, key=lambda item: -item[1])[:slowest]
    return Profile(seconds, dict(parts), len(times), ranked)


def profiled(run_playbook: Callable[[], str]) -> Profile:
    """Run a playbook whose stdout is the json callback's report; its wall time, CPU time and where they went."""
    output: list[str] = []
    cpu_before = busy_cpu_seconds()
    seconds = timed(lambda: output.append(run_playbook()))
    profile = profile_of(seconds, json.loads(output[0]))
    profile.cpu_seconds = busy_cpu_seconds() - cpu_before
    return profile


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
