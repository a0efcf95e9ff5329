"""Run `make test`'s stages, stop at the first failure, and end with a table of wall times.

The build stages (virtualenv, collection, artifact, images, package mirror) run first, one after the other. The test stages
then run in lanes at once, each lane's stages one after the other. The Kubernetes binaries (a build from source
when the cache is cold, the longest build) are built from the moment the virtualenv is there, beside the other
builds and the host lanes; NVIDIA's code for the lab (the mock NVML, from pinned sources) and the lab's pod images
follow once the node images are there too, and the Kubernetes lanes start after them:

- ``kube`` to ``kube4``: the scenarios on the Kubernetes lab and the lab's own tests, each lane on its own lab (its own name,
  network, subnet, API port, state and inventory: lab/README.md). Much of their time is waiting for
  the kubelet (a deleted pod's sandbox goes with the kubelet's garbage collection, once a minute), so they
  overlap well;
- ``hosts``, ``hosts2``: lint, sanity, unit tests, the same under the newest supported ansible-core (``make
  ansible-range``: a controller container) and the scenarios on plain systemd containers, shared out by
  their usual duration. They run at a lower priority (``nice``, and a lower CPU weight for their containers),
  so the Kubernetes lanes, the longest, get the CPU first and the host lanes fill the Kubernetes lanes' waits.

A stage's output goes to ``.build/test-logs/<stage>.log`` and is printed whole when the stage ends. After a
failure no new stage starts; the stages already running finish. The table gives each stage's wall time and the CPU
time of its own processes (make, molecule, the Ansible controllers, the modules they run locally, the docker CLI:
everything the stage started and waited for; not what runs in docker's containers). After the table come how busy
the CPUs were and where the test lanes' CPU time went, then the last lines of each failed stage's log (the whole log
is printed earlier, where it may be far from the end), then why each failed (its last failed task and the end of its
message, or pytest's failed tests), and the last line counts the stages: "stages: N passed,
N failed".
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOGS = REPO / ".build" / "test-logs"
BUILD_STAGES = ["venv", "collection", "artifact", "images", "package-mirror"]
# The Kubernetes lanes need these; the host lanes do not. The binaries need only the virtualenv, the pod images
# also the node images.
KUBE_BUILD_STAGES = ["kube-binaries", "nvidia-builds", "kube-images"]
# The Kubernetes lanes. In the last warm run: upgrade_driver_rolling 35 minutes, onboard_fleet 32,
# gpu_node_join_cluster 30, and kubelab-test (the lab's own tests) 10: behind any of the others it would make the run's
# longest lane, so it has a lab of its own and runs beside them, mostly waiting for its nodes.
KUBE_LANES = {
    "kube": ["molecule upgrade_driver_rolling"],
    "kube2": ["molecule gpu_node_join_cluster"],
    "kube3": ["molecule onboard_fleet"],
    "kube4": ["kubelab-test"],
}
# Minutes a stage usually takes alone on 2 cores, to share the host stages out between two lanes.
HOST_MINUTES = {
    "lint": 2.6, "sanity": 0.5, "units": 0.5, "molecule nvidia_driver_upgrade": 4.6, "molecule containerd_nvidia_v2": 3.7,
    "molecule nvidia_gpu_check_hosts": 2.9, "molecule nvidia_driver_gpusim": 2.7,
    "molecule nvidia_driver_bad_input": 2.5, "molecule containerd_nvidia_v1": 2.4, "molecule default": 1.5,
    "molecule container_toolkit_install": 1.5, "molecule containerd_nvidia_bad_input": 1.3,
    "ansible-range newest": 4.8,
}


# The host lanes' priority: niceness of their commands, CPU weight of their containers (docker's default is 1024).
HOST_LANE_NICENESS = 10
HOST_LANE_ENV = {"GPUFLEET_TEST_CPU_SHARES": "256"}
# Kubernetes lanes that end minutes before the longest (gpu_node_join_cluster about 30 minutes, the lab's own tests 10,
# upgrade_driver_rolling 35) yield it some CPU: their commands run a little nicer.
KUBE_LANE_NICENESS = {"kube2": 3, "kube4": 3}


def lab_env(index: int) -> dict[str, str]:
    """The settings of Kubernetes lane ``index`` (0: the default lab, as `make demo` uses it)."""
    if index == 0:
        return {}
    name = f"kube{index + 1}"
    return {
        "GPUFLEET_LAB_NAME": name,
        "GPUFLEET_LAB_SUBNET": f"172.28.{240 + index}.0/24",
        "GPUFLEET_LAB_API_PORT": str(6443 + index),
        "GPUFLEET_LAB_INVENTORY_DIR": str(REPO / ".build" / "labs" / name / "inventory"),
    }


def molecule_scenarios() -> list[str]:
    return sorted(path.parent.name for path in (REPO / "extensions" / "molecule").glob("*/molecule.yml"))


def controllers() -> list[str]:
    """The controllers of the supported ansible-core range's ends (tests/controllers/<name>.txt)."""
    return sorted(path.stem for path in (REPO / "tests" / "controllers").glob("*.txt"))


def argv_of(stage: str) -> list[str]:
    if stage.startswith("molecule "):
        return ["make", "molecule", f"SCENARIO={stage.split(' ', 1)[1]}"]
    if stage.startswith("ansible-range "):
        return ["make", "ansible-range", f"CONTROLLERS={stage.split(' ', 1)[1]}"]
    return ["make", stage]


def lanes() -> dict[str, tuple[list[str], dict[str, str]]]:
    """Every lane's stages and environment; a scenario no lane names goes to the host lane with less work."""
    scenarios = [f"molecule {name}" for name in molecule_scenarios()]
    kube_stages = {stage for stages in KUBE_LANES.values() for stage in stages}
    plan = {name: ([s for s in stages if s in scenarios or not s.startswith("molecule ")], lab_env(index))
            for index, (name, stages) in enumerate(KUBE_LANES.items())}
    hosts: dict[str, list[str]] = {"hosts": [], "hosts2": []}
    load = {"hosts": 0.0, "hosts2": 0.0}
    host_stages = (["lint", "sanity", "units"] + [f"ansible-range {name}" for name in controllers()]
                   + [s for s in scenarios if s not in kube_stages])
    for stage in sorted(host_stages, key=lambda s: -HOST_MINUTES.get(s, 3.0)):
        lane = min(load, key=lambda name: load[name])
        hosts[lane].append(stage)
        load[lane] += HOST_MINUTES.get(stage, 3.0)
    # lint, sanity and units first: they fail fastest
    plan.update({name: (sorted(stages, key=lambda s: s.startswith("molecule ")), dict(HOST_LANE_ENV))
                 for name, stages in hosts.items()})
    return plan


def niceness_of(lane: str) -> list[str]:
    """The prefix that runs a lane's command at a lower priority (none for the longest lanes)."""
    niceness = HOST_LANE_NICENESS if lane.startswith("hosts") else KUBE_LANE_NICENESS.get(lane, 0)
    return ["nice", "-n", str(niceness)] if niceness else []


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


CPUACCT = Path("/sys/fs/cgroup/cpuacct")  # cgroup v1; elsewhere the split below is left out
# Where the CPU goes, by cgroup: docker's containers (the lab nodes, control planes and scenario hosts) and the rest.
CPU_GROUPS = {"all": ".", "containers": "docker"}


def cpu_by_group() -> dict[str, int] | None:
    """Nanoseconds of CPU each group has used (cpuacct counts its removed children too); None where unreadable."""
    try:
        return {name: int((CPUACCT / sub / "cpuacct.usage").read_text()) for name, sub in CPU_GROUPS.items()}
    except (OSError, ValueError):
        return None


def cpu_split(then: dict[str, int] | None, now: dict[str, int] | None) -> str:
    """One line: the CPU time of the test lanes, split between docker's containers and the rest."""
    if not then or not now:
        return "CPU split of the test lanes: not available (no cgroup v1 cpuacct hierarchy for docker)"
    whole = max(now["all"] - then["all"], 1)
    containers = now["containers"] - then["containers"]
    return (f"CPU time of the test lanes: {whole / 60e9:.0f} CPU-minutes; {100 * containers / whole:.0f}% in docker's "
            f"containers (lab nodes, control planes, scenario hosts), {100 * (whole - containers) / whole:.0f}% outside "
            "them (Ansible controllers and the modules they run locally, molecule, pytest, the docker CLI, the lab's pods)")


def log_of(stage: str) -> Path:
    return LOGS / (stage.replace(" ", "-") + ".log")


class Runner:
    def __init__(self) -> None:
        self.results: list[tuple[str, float, bool, float]] = []
        self.failed = threading.Event()
        self.lock = threading.Lock()

    def run_stage(self, stage: str, env: dict[str, str] | None = None, lane: str = "") -> bool:
        LOGS.mkdir(parents=True, exist_ok=True)
        log_path = log_of(stage)
        started = time.monotonic()
        with log_path.open("w", encoding="utf-8") as log:
            ok, cpu = run_measured(niceness_of(lane) + argv_of(stage), log, {**os.environ, **(env or {})})
        seconds = time.monotonic() - started
        with self.lock:
            print(f"\n=== stage {stage}{' (lane ' + lane + ')' if lane else ''}: {' '.join(argv_of(stage))}", flush=True)
            sys.stdout.write(log_path.read_text(encoding="utf-8", errors="replace"))
            print(f"=== stage {stage}: {'passed' if ok else 'FAILED'} in {minutes(seconds)}, {minutes(cpu)} of CPU",
                  flush=True)
            self.results.append((stage, seconds, ok, cpu))
        if not ok:
            self.failed.set()
        return ok

    def run_lane(self, lane: str, stages: list[str], env: dict[str, str] | None) -> None:
        for stage in stages:
            if self.failed.is_set():
                return
            self.run_stage(stage, env, lane)


def run_measured(argv: list[str], log, env: dict[str, str]) -> tuple[bool, float]:
    """Run argv with its output in log; (passed, CPU seconds of it and every descendant it waited for)."""
    process = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env)
    _pid, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode == 0, usage.ru_utime + usage.ru_stime


def minutes(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60:02d} s"


def table(results: list[tuple[str, float, bool, float]], skipped: list[str], total: float) -> str:
    lines = ["", "| stage | result | wall time | CPU time (stage's processes) |", "|---|---|---|---|"]
    lines += [f"| {name} | {'passed' if ok else 'FAILED'} | {minutes(seconds)} | {minutes(cpu)} |"
              for name, seconds, ok, cpu in results]
    lines += [f"| {name} | not run | | |" for name in skipped]
    cpu_total = sum(cpu for _name, _seconds, _ok, cpu in results)
    lines.append(f"| total (wall clock; the test lanes overlap) | | {minutes(total)} | {minutes(cpu_total)} |")
    return "\n".join(lines)


def failure_tail(stage: str, lines: int = 80) -> str:
    log_path = log_of(stage)
    tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    return "\n".join([f"\n--- stage {stage} FAILED; the last {len(tail)} lines of {log_path.relative_to(REPO)}:", *tail])


ANSIBLE_FAILURE = re.compile(r"^(fatal|failed): \[(?P<host>[^]]+)\]: FAILED! =>(?P<inline>.*)$")
PYTEST_FAILURE = re.compile(r"^(FAILED|ERROR) \S+::")


def what_failed(log: str, lines: int = 15, width: int = 240) -> str:
    """The last task failure in a stage's log that was not ignored: the task's name, the host and the last lines of
    the result (the callback writes it as indented YAML; an assertion's message may quote a nested run's output).
    Without one, pytest's summary lines of the failed tests. Printed last, so that the end of a CI log says why."""
    log_lines = log.splitlines()
    for index in range(len(log_lines) - 1, -1, -1):
        failure = ANSIBLE_FAILURE.match(log_lines[index])
        if not failure:
            continue
        end = index + 1
        while end < len(log_lines) and (log_lines[end].startswith(" ") or not log_lines[end].strip()):
            end += 1
        if end < len(log_lines) and log_lines[end] == "...ignoring":
            continue
        result = [failure["inline"].strip(), *log_lines[index + 1:end]]
        task = next((line for line in reversed(log_lines[:index]) if line.startswith("TASK [")), "TASK [?]")
        excerpt = [line[:width] for line in result if line.strip()][-lines:]
        return "\n".join([f"{task.rstrip(' *')} failed on {failure['host']}:", *excerpt])
    return "\n".join(line[:width] for line in log_lines if PYTEST_FAILURE.match(line))


def start(target, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args)
    thread.start()
    return thread


def run_all(runner: Runner, plan: dict[str, tuple[list[str], dict[str, str]]]) -> dict[str, int] | None:
    """The build stages, then the host lanes at once; the Kubernetes binaries from the virtualenv on (a cold
    cache compiles them, the longest build), their pod images once the node images are there, then the
    Kubernetes lanes. Returns the CPU use by group when the test lanes started."""
    if not runner.run_stage(BUILD_STAGES[0]):
        return None
    kube_binaries = start(runner.run_stage, KUBE_BUILD_STAGES[0], None, "kube build")
    for stage in BUILD_STAGES[1:]:
        if runner.failed.is_set() or not runner.run_stage(stage):
            break
    lanes_cpu = cpu_by_group()
    threads = [kube_binaries]
    if not runner.failed.is_set():
        threads += [start(runner.run_lane, name, *plan[name]) for name in plan if name not in KUBE_LANES]
    kube_binaries.join()
    if not runner.failed.is_set() and all(runner.run_stage(stage, lane="kube build") for stage in KUBE_BUILD_STAGES[1:]):
        threads += [start(runner.run_lane, name, *plan[name]) for name in plan if name in KUBE_LANES]
    for thread in threads:
        thread.join()
    return lanes_cpu


def main() -> int:
    runner, started, cpu_started = Runner(), time.monotonic(), cpu_times()
    plan = lanes()
    lanes_cpu = run_all(runner, plan)
    ran = {name for name, _seconds, _ok, _cpu in runner.results}
    planned = BUILD_STAGES + KUBE_BUILD_STAGES + [s for stages, _env in plan.values() for s in stages]
    skipped = [s for s in planned if s not in ran]
    failed = sum(1 for _name, _seconds, ok, _cpu in runner.results if not ok)
    print(table(runner.results, skipped, time.monotonic() - started))
    busy, total = (now - then for now, then in zip(cpu_times(), cpu_started))
    print(f"\nCPU busy over the whole run: {100 * busy / max(total, 1):.0f}% of {os.cpu_count()} CPUs")
    print(cpu_split(lanes_cpu, cpu_by_group()))
    for name, _seconds, ok, _cpu in runner.results:
        if not ok:
            print(failure_tail(name))
    for name, _seconds, ok, _cpu in runner.results:
        if not ok:
            print(f"\n--- why stage {name} failed:\n{what_failed(log_of(name).read_text(encoding='utf-8', errors='replace'))}")
    print(f"stages: {len(runner.results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
