"""`labctl bench`: the collection's cost, measured side by side on the Kubernetes lab.

1. Onboarding one bare node with playbooks/onboard.yml vs the raw `apt-get install` of the same
   pinned packages on an identical fresh node (the floor).
2. An idempotent re-run of onboard.yml on 1 and on 4 onboarded nodes.
3. The same idempotent re-run on 1 node with pipelining off vs on.
4. The preflight through nvidia_gpu_check vs the same checklist as separate shell tasks.
5. playbooks/upgrade_driver.yml on the 4 up-to-date nodes (plan only: nothing to change) vs the
   idempotent re-run of onboard.yml on them.
6. playbooks/check.yml on the 4 healthy nodes vs the module's preflight plus one API read per node.

Figures are wall-clock seconds on this machine, reported as ratios measured in one run; they are
written to docs/benchmarks.md and reports/benchmarks.json. Nothing here asserts a time.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

from gpufleet_lab import inventory, package_mirror, standins
from gpufleet_lab.proc import run

REPO = Path(__file__).resolve().parents[2]
LABCTL = str(REPO / "lab" / "labctl")
INVENTORY = str(inventory.default_dir())
PLAYBOOKS = REPO / "lab" / "bench"
PROFILE = "h100x8"
FLEET = ["bench-1", "bench-2", "bench-3", "bench-4"]
RAW = "bench-raw"
REPEATS = 3


def _timed(action: Callable[[], object]) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


def _median(action: Callable[[], object], repeats: int = REPEATS) -> float:
    return statistics.median(_timed(action) for _repeat in range(repeats))


def _playbook(playbook: str, limit: str, pipelining: bool = True) -> None:
    env = dict(os.environ, ANSIBLE_PIPELINING=str(pipelining).lower())
    run([str(Path(sys.executable).with_name("ansible-playbook")), "-i", INVENTORY, playbook, "-l", limit], env=env)


def _held_packages(node: str) -> list[str]:
    listing = run(["docker", "exec", node, "sh", "-c",
                   "dpkg-query -W -f='${Package}=${Version} ${db:Status-Abbrev}\\n' | awk '$2 == \"hi\" {print $1}'"])
    return sorted(listing.stdout.split())


def _raw_install(node: str, packages: list[str]) -> None:
    """What an engineer would type: the sources (the same mirrors the roles use), then apt-get install."""
    mirror = package_mirror.load_versions()["mirror"]
    script = (
        "set -e; export DEBIAN_FRONTEND=noninteractive; mkdir -p /etc/apt/keyrings; "
        "printf '%s' \"$TOOLKIT_KEY\" > /etc/apt/keyrings/toolkit.asc; "
        "printf '%s' \"$MIRROR_KEY\" > /etc/apt/keyrings/mirror.asc; "
        "printf 'Types: deb\\nURIs: %s\\nSuites: %s\\nComponents: %s\\nSigned-By: /etc/apt/keyrings/mirror.asc\\n' "
        "\"$MIRROR_URL\" \"$MIRROR_SUITE\" \"$MIRROR_COMPONENT\" > /etc/apt/sources.list.d/mirror.sources; "
        "printf 'Types: deb\\nURIs: file:/srv/gpufleet-standin-toolkit/amd64\\nSuites: /\\n"
        "Signed-By: /etc/apt/keyrings/toolkit.asc\\n' > /etc/apt/sources.list.d/toolkit.sources; "
        "apt-get update -q; apt-get install -y -q --no-install-recommends --allow-downgrades \"$@\""
    )
    settings = {"TOOLKIT_KEY": standins.public_key(), "MIRROR_KEY": package_mirror.public_key(),
                "MIRROR_URL": mirror["url"], "MIRROR_SUITE": mirror["suite"], "MIRROR_COMPONENT": mirror["component"]}
    environment = [argument for name, value in settings.items() for argument in ("-e", f"{name}={value}")]
    run(["docker", "exec", *environment, node, "sh", "-c", script, "raw", *packages])


def _machine() -> dict[str, str]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    memory_kib = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                          if line.startswith("MemTotal:")))
    return {"cpu": cpu, "cores": str(os.cpu_count()), "memory_gib": f"{memory_kib / 1048576:.0f}",
            "kernel": platform.release(), "python": platform.python_version()}


def measure() -> dict[str, object]:
    run([LABCTL, "kube", "up"])
    for node in [FLEET[0], RAW]:
        run([LABCTL, "kube", "node", "add", node, "--gpu-profile", PROFILE])
    onboard = str(REPO / "playbooks" / "onboard.yml")
    figures: dict[str, object] = {"machine": _machine()}
    figures["onboard_one_bare_s"] = _timed(lambda: _playbook(onboard, FLEET[0]))
    packages = _held_packages(FLEET[0])
    figures["raw_apt_install_s"] = _timed(lambda: _raw_install(RAW, packages))
    figures["raw_packages"] = packages
    for node in FLEET[1:]:
        run([LABCTL, "kube", "node", "add", node, "--gpu-profile", PROFILE])
    _playbook(onboard, ",".join(FLEET[1:]))
    figures["rerun_1_node_s"] = _median(lambda: _playbook(onboard, FLEET[0]))
    figures["rerun_4_nodes_s"] = _median(lambda: _playbook(onboard, ",".join(FLEET)))
    figures["rerun_1_node_no_pipelining_s"] = _median(lambda: _playbook(onboard, FLEET[0], pipelining=False))
    upgrade = str(REPO / "playbooks" / "upgrade_driver.yml")
    figures["upgrade_noop_4_nodes_s"] = _median(lambda: _playbook(upgrade, ",".join(FLEET)))
    figures["preflight_module_s"] = _median(lambda: _playbook(str(PLAYBOOKS / "preflight_module.yml"), ",".join(FLEET)))
    figures["preflight_shell_s"] = _median(lambda: _playbook(str(PLAYBOOKS / "preflight_shell.yml"), ",".join(FLEET)))
    figures["check_4_nodes_s"] = _median(lambda: _playbook(str(REPO / "playbooks" / "check.yml"), ",".join(FLEET)))
    figures["preflight_api_4_nodes_s"] = _median(lambda: _playbook(str(PLAYBOOKS / "preflight_api.yml"), ",".join(FLEET)))
    return figures


def render(figures: dict) -> str:
    machine = figures["machine"]
    rows = [
        ("Onboard one bare node (onboard.yml, 4 roles + Kubernetes join) vs raw `apt-get install` of the same "
         f"{len(figures['raw_packages'])} pinned packages", figures["onboard_one_bare_s"], figures["raw_apt_install_s"]),
        ("Idempotent re-run of onboard.yml: 4 onboarded nodes vs 1", figures["rerun_4_nodes_s"], figures["rerun_1_node_s"]),
        ("Idempotent re-run of onboard.yml on 1 node: pipelining off vs on (docker connection)",
         figures["rerun_1_node_no_pipelining_s"], figures["rerun_1_node_s"]),
        ("Preflight on 4 nodes: the checklist as 6 shell tasks vs one nvidia_gpu_check call",
         figures["preflight_shell_s"], figures["preflight_module_s"]),
        ("upgrade_driver.yml on an up-to-date fleet of 4 vs idempotent onboard.yml of 4",
         figures["upgrade_noop_4_nodes_s"], figures["rerun_4_nodes_s"]),
        ("check.yml on 4 healthy nodes vs the module's preflight plus one API read per node",
         figures["check_4_nodes_s"], figures["preflight_api_4_nodes_s"]),
    ]
    lines = [
        "# Benchmarks",
        "",
        "Measured by `make bench` (lab/gpufleet_lab/bench.py) in one run on the Kubernetes lab: every pair side by",
        "side on the same machine, simulated GPU nodes (profile h100x8) as docker containers reached through the",
        f"docker connection. Re-runs and preflights: median of {REPEATS}. Tests never assert these figures.",
        "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB, Linux {machine['kernel']},",
        f"Python {machine['python']}.",
        "",
        "| comparison | A (s) | B (s) | A / B |",
        "|---|---|---|---|",
    ]
    lines += [f"| {name} | {a:.1f} | {b:.1f} | {a / b:.2f} |" for name, a, b in rows]
    lines += [
        "",
        "Reading the figures:",
        "",
        "- The first ratio is what the collection adds over the floor: repositories, pins, holds, config",
        "  validation, containerd restart, and the Kubernetes side (labels, taints, device plugin, waiting for",
        "  Allocatable, the smoke-test pod).",
        "- Where an idempotent run's time goes: about 150 tasks for one node, none longer than 1.5 s (seen with",
        "  the ansible.posix.profile_tasks callback). On 2 cores it is mostly Ansible's cost per task, which is",
        "  what forks (second row) and pipelining (third row) reduce.",
        "- The second shows how an idempotent run grows with nodes: Ansible runs hosts in parallel (forks), so",
        "  four nodes cost far less than four times one; cluster-wide objects are applied once per play.",
        "- The third is what pipelining saves: a module is piped into the target's Python instead of being",
        "  copied as a file, run and removed, so each task costs one exec into the node rather than several.",
        "  The docker connection of the lab supports it as SSH does; ansible.cfg turns it on for every",
        "  connection and inventories/example sets it for real fleets. Every other figure here runs with it on.",
        "- The fourth is one module round trip against six task round trips per host.",
        "- The fifth is the cost of a driver rollout that finds nothing to do: the plan reads each node's driver",
        "  (nvidia_gpu_check), its packages and apt's candidates, and the Node, then cordons and drains nothing.",
        "- The sixth is what the layered check costs over its floor (the host check and one API read per node).",
        "  check.yml reads each node once (gpu_node_read: the host check, the packages, the toolkit's",
        "  configuration, containerd's loaded configuration and version, the kubelet, and a container run",
        "  through the nvidia handler) and the cluster once (gpu_cluster_read: every Node and plugin pod), then",
        "  judges on the controller (each role's check_record) and writes the report in one task: 8 tasks per",
        "  node. The container run and the judging in Jinja are most of what it costs over the floor.",
        "- The roles gather only the facts they need (`gathering = explicit`).",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    try:
        figures = measure()
    finally:
        run([LABCTL, "kube", "down"], check=False)
    reports = REPO / "reports"
    reports.mkdir(exist_ok=True)
    (reports / "benchmarks.json").write_text(json.dumps(figures, indent=2) + "\n")
    text = render(figures)
    (REPO / "docs" / "benchmarks.md").write_text(text)
    print(text)
    return 0
