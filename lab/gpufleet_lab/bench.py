"""`labctl bench`: the collection's cost, measured side by side on the Kubernetes lab.

1. Onboarding one bare node with playbooks/onboard.yml vs the raw `apt-get install` of the same
   pinned packages on an identical fresh node (the floor); its Kubernetes part (gpu_node_join) apart.
2. An idempotent re-run of onboard.yml on 1 node vs a one-task play on it (the floor of a play).
3. The scaling curve: the idempotent re-run on 1, 2, 4 and 8 onboarded nodes, with where the time goes
   per role (ansible.posix.json callback), plotted to docs/benchmarks-scaling.png.
4. The same idempotent re-run on 1 node with pipelining off vs on, and with Mitogen's strategy vs without.
5. The preflight through nvidia_gpu_check vs the same checklist as separate shell tasks.
6. playbooks/upgrade_driver.yml on 4 up-to-date nodes (plan only: nothing to change) vs the
   idempotent re-run of onboard.yml on them.
7. playbooks/check.yml on 4 healthy nodes vs the module's preflight plus one API read per node.
8. Plays that do nothing, of the re-run's shape and of its module calls alone, at 1, 4 and 8 nodes: what
   Ansible alone costs, and from them the most a restructure of the roles could reach.

Every playbook runs with the json callback as its stdout, the floors included, so every figure pays the
same reporting cost. Figures are wall-clock seconds on this machine, reported as ratios measured in one run;
they are written to docs/benchmarks.md and reports/benchmarks.json. Nothing here asserts a time.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import platform
import sys
from pathlib import Path

from gpufleet_lab import bench_profile, inventory, package_mirror, standins
from gpufleet_lab.bench_profile import Profile
from gpufleet_lab.proc import LabError, log, run

REPO = Path(__file__).resolve().parents[2]
LABCTL = str(REPO / "lab" / "labctl")
INVENTORY = str(inventory.default_dir())
PLAYBOOKS = REPO / "lab" / "bench"
ONBOARD = str(REPO / "playbooks" / "onboard.yml")
CURVE_PNG = REPO / "docs" / "benchmarks-scaling.png"
PROFILE = "h100x8"
CURVE = [1, 2, 4, 8]
FLEET = [f"bench-{index}" for index in range(1, max(CURVE) + 1)]
RAW = "bench-raw"
# Runs per figure (their median); GPUFLEET_BENCH_REPEATS=1 gives a quicker, noisier run.
REPEATS = int(os.environ.get("GPUFLEET_BENCH_REPEATS", "3"))
KUBERNETES_PART = "gpu_node_join"
SHAPE_PLAY = REPO / ".build" / "bench" / "shape.yml"
# The same module calls as the re-run and nothing else: what is left if every other task were free.
MODULES_PLAY = REPO / ".build" / "bench" / "modules.yml"
MODULE_KINDS = ["node module", "local module"]
SHAPE_CURVE = [1, 4, 8]


def _nodes(count: int) -> str:
    return ",".join(FLEET[:count])


def _playbook(playbook: str, limit: str, pipelining: bool = True, mitogen: bool = False) -> str:
    """Run a playbook with the json callback as stdout; its report."""
    env = dict(os.environ, ANSIBLE_PIPELINING=str(pipelining).lower(), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_STRATEGY="linear")
    env.pop("ANSIBLE_STRATEGY_PLUGINS", None)
    if mitogen:  # the lab inventory's connection is the short name docker, which Mitogen takes over
        env.update(ANSIBLE_STRATEGY_PLUGINS=str(_mitogen_strategies()), ANSIBLE_STRATEGY="mitogen_linear")
    argv = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", INVENTORY, playbook, "-l", limit]
    result = run(argv, env=env, check=False)
    if result.returncode != 0:
        raise LabError(f"{Path(playbook).name} -l {limit} failed (exit {result.returncode}): {_why(result.stdout, result.stderr)}")
    return result.stdout


def _why(report: str, stderr: str) -> str:
    """The task that failed, from the json callback's report, else the last line Ansible wrote."""
    try:
        failed = bench_profile.last_failure(json.loads(report))
    except ValueError:
        failed = []
    return "; ".join(failed) if failed else (stderr.strip() or report.strip() or "no output").splitlines()[-1]


def _mitogen_strategies() -> Path:
    spec = importlib.util.find_spec("ansible_mitogen")
    if spec is None or spec.origin is None:
        raise LabError("Mitogen is not installed in the virtualenv (make venv installs requirements-dev.txt)")
    return Path(spec.origin).parent / "plugins" / "strategy"


def _once(playbook: str, limit: str, **options: bool) -> Profile:
    return bench_profile.profiled(lambda: _playbook(playbook, limit, **options), is_node=_is_node)


def _is_node(container: str) -> bool:
    return container in FLEET or container == RAW


def shape_playbook(shape: dict[str, int]) -> str:
    """A play with as many tasks of each kind as ``shape`` (bench_profile.SHAPE_KINDS) that do nothing: what
    Ansible alone costs for a run of that shape.

    A module that does nothing is ping: a module round trip that runs no command (the builtin command module
    runs its command through AnsibleModule.run_command, which now and then waits a second, see
    plugins/module_utils/_run.py; the collection's modules do not)."""
    tasks = {
        "node module": "ansible.builtin.ping:",
        "local module": "ansible.builtin.ping:\n      delegate_to: localhost",
        "controller only": "ansible.builtin.set_fact: {bench_shape: 1}",
        "skipped": "ansible.builtin.debug: {msg: never}\n      when: false",
    }
    lines = ["---", "# Benchmark: made by lab/gpufleet_lab/bench.py from the idempotent re-run's tasks.",
             "- name: A run of the idempotent re-run's shape that does nothing", "  hosts: gpu_nodes",
             "  gather_facts: false", "  tasks:"]
    for kind, count in shape.items():
        lines += [f"    - name: {kind} {index}\n      {tasks[kind]}" for index in range(1, count + 1)]
    return "\n".join(lines) + "\n"


def _median(playbook: str, limit: str, **options: bool) -> Profile:
    return bench_profile.median([_once(playbook, limit, **options) for _repeat in range(REPEATS)])


def _held_packages(node: str) -> list[str]:
    listing = run(["docker", "exec", node, "sh", "-c",
                   "dpkg-query -W -f='${Package}=${Version} ${db:Status-Abbrev}\\n' | awk '$2 == \"hi\" {print $1}'"])
    return sorted(listing.stdout.split())


def _raw_install(node: str, packages: list[str]) -> float:
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
    return bench_profile.timed(lambda: run(["docker", "exec", *environment, node, "sh", "-c", script, "raw", *packages]))


def _machine() -> dict[str, str]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    memory_kib = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                          if line.startswith("MemTotal:")))
    return {"cpu": cpu, "cores": str(os.cpu_count()), "memory_gib": f"{memory_kib / 1048576:.0f}",
            "kernel": platform.release(), "python": platform.python_version(),
            "forks": _ansible_setting("DEFAULT_FORKS")}


def _ansible_setting(name: str) -> str:
    """A setting as Ansible resolves it here (ansible.cfg, environment, default)."""
    dump = run([str(Path(sys.executable).with_name("ansible-config")), "dump"], quiet=True).stdout
    return next(line.split(" = ", 1)[1].strip() for line in dump.splitlines() if line.startswith(f"{name}("))


def _add_nodes(nodes: list[str]) -> None:
    for node in nodes:
        run([LABCTL, "kube", "node", "add", node, "--gpu-profile", PROFILE])


def _attempted(playbook: str, limit: str, **options: bool) -> Profile | str:
    """A figure measured after the curve, or why its playbook failed: the bench records it and goes on."""
    try:
        return _median(playbook, limit, **options)
    except LabError as error:
        log(str(error))
        return str(error)[:400]


def measure(figures: dict[str, object]) -> dict[str, object]:
    """Fill ``figures`` as each is measured, so that a failure keeps what came before it."""
    run([LABCTL, "kube", "up"])
    _add_nodes([FLEET[0], RAW])
    figures["machine"] = _machine()
    figures["onboard_one_bare"] = _once(ONBOARD, FLEET[0])
    packages = _held_packages(FLEET[0])
    figures["raw_apt_install_s"] = _raw_install(RAW, packages)
    figures["raw_packages"] = packages
    _add_nodes(FLEET[1:])
    _once(ONBOARD, ",".join(FLEET[1:]))
    figures["one_task_1_node"] = _median(str(PLAYBOOKS / "one_task.yml"), FLEET[0])
    curve: dict[int, Profile] = {}
    figures["curve"] = curve
    for count in CURVE:
        curve[count] = _median(ONBOARD, _nodes(count))
    SHAPE_PLAY.parent.mkdir(parents=True, exist_ok=True)
    SHAPE_PLAY.write_text(shape_playbook(curve[1].shape))
    MODULES_PLAY.write_text(shape_playbook({kind: curve[1].shape.get(kind, 0) for kind in MODULE_KINDS}))
    for count in SHAPE_CURVE:
        figures[f"shape_{count}_nodes"] = _attempted(str(SHAPE_PLAY), _nodes(count))
        figures[f"modules_{count}_nodes"] = _attempted(str(MODULES_PLAY), _nodes(count))
    fleet = _nodes(4)
    figures["check_4_nodes"] = _attempted(str(REPO / "playbooks" / "check.yml"), fleet)
    figures["preflight_api_4_nodes"] = _attempted(str(PLAYBOOKS / "preflight_api.yml"), fleet)
    figures["preflight_module"] = _attempted(str(PLAYBOOKS / "preflight_module.yml"), fleet)
    figures["preflight_shell"] = _attempted(str(PLAYBOOKS / "preflight_shell.yml"), fleet)
    figures["upgrade_noop_4_nodes"] = _attempted(str(REPO / "playbooks" / "upgrade_driver.yml"), fleet)
    figures["rerun_1_node_no_pipelining"] = _attempted(ONBOARD, FLEET[0], pipelining=False)
    # Last: Mitogen leaves its own interpreters behind on the node.
    figures["rerun_1_node_mitogen"] = _attempted(ONBOARD, FLEET[0], mitogen=True)
    for count in (4, 8):
        figures[f"rerun_{count}_nodes_mitogen"] = _attempted(ONBOARD, _nodes(count), mitogen=True)
    return figures


def _host_part(onboard: Profile) -> float:
    return onboard.seconds - onboard.parts.get(KUBERNETES_PART, 0.0)


def comparisons(figures: dict) -> list[tuple[str, float, float]]:
    """(what, A, B) for every row of the table; A / B is the figure."""
    curve, onboard = figures["curve"], figures["onboard_one_bare"]
    rows = [
        ("Onboard one bare node (onboard.yml, 4 roles + Kubernetes join) vs raw `apt-get install` of the same "
         f"{len(figures['raw_packages'])} pinned packages", onboard.seconds, figures["raw_apt_install_s"]),
        (f"The same onboard less its Kubernetes part ({KUBERNETES_PART}'s tasks) vs the raw `apt-get install`",
         _host_part(onboard), figures["raw_apt_install_s"]),
        (f"The Kubernetes part of that onboard ({KUBERNETES_PART}: gating, device plugin, Allocatable, smoke pod) "
         "vs the whole onboard", onboard.parts.get(KUBERNETES_PART, 0.0), onboard.seconds),
        ("Idempotent re-run of onboard.yml on 1 node vs a one-task play on it (the floor of a play)",
         curve[1].seconds, figures["one_task_1_node"].seconds),
    ]
    rows += [(f"Idempotent re-run of onboard.yml: {count} onboarded nodes vs 1", curve[count].seconds, curve[1].seconds)
             for count in CURVE[1:]]
    known = {**figures, "rerun_1_node": curve[1], "rerun_4_nodes": curve[4]}
    rows += [(name, known[a].seconds, known[b].seconds) for name, a, b in OPTIONAL_ROWS if _measured(known, a, b)]
    return rows + [(name, known[a].cpu_seconds, known[b].cpu_seconds) for name, a, b in CPU_ROWS if _measured(known, a, b)]


# (what, key of A, key of B) of the rows measured after the curve, whose playbooks may fail.
OPTIONAL_ROWS = [
    ("Idempotent re-run of onboard.yml on 1 node: pipelining off vs on (docker connection)",
     "rerun_1_node_no_pipelining", "rerun_1_node"),
    ("Idempotent re-run of onboard.yml on 1 node: Mitogen's strategy (mitogen_linear) vs Ansible's",
     "rerun_1_node_mitogen", "rerun_1_node"),
    ("Preflight on 4 nodes: the checklist as 6 shell tasks vs one nvidia_gpu_check call",
     "preflight_shell", "preflight_module"),
    ("upgrade_driver.yml on an up-to-date fleet of 4 vs idempotent onboard.yml of 4",
     "upgrade_noop_4_nodes", "rerun_4_nodes"),
    ("check.yml on 4 healthy nodes vs the module's preflight plus one API read per node",
     "check_4_nodes", "preflight_api_4_nodes"),
    ("Idempotent re-run of onboard.yml on 1 node vs a play of its shape that does nothing (see Scaling)",
     "rerun_1_node", "shape_1_nodes"),
    ("A play of the re-run's shape that does nothing: 4 nodes vs 1", "shape_4_nodes", "shape_1_nodes"),
    ("A play of the re-run's shape that does nothing: 8 nodes vs 1", "shape_8_nodes", "shape_1_nodes"),
    ("A play of the re-run's module calls alone that does nothing: 4 nodes vs 1", "modules_4_nodes", "modules_1_nodes"),
    ("A play of the re-run's module calls alone that does nothing: 8 nodes vs 1", "modules_8_nodes", "modules_1_nodes"),
    ("Idempotent re-run of onboard.yml with Mitogen's strategy: 4 onboarded nodes vs 1",
     "rerun_4_nodes_mitogen", "rerun_1_node_mitogen"),
    ("Idempotent re-run of onboard.yml with Mitogen's strategy: 8 onboarded nodes vs 1",
     "rerun_8_nodes_mitogen", "rerun_1_node_mitogen"),
]


# (what, key of A, key of B) of the rows that compare CPU time, the whole machine's during the run.
CPU_ROWS = [
    ("CPU time of the idempotent re-run of onboard.yml on 1 node (controller, node and lab together): Mitogen's "
     "strategy vs Ansible's", "rerun_1_node_mitogen", "rerun_1_node"),
]


def _measured(figures: dict, *keys: str) -> bool:
    return all(isinstance(figures.get(key), Profile) for key in keys)


def failures(figures: dict) -> list[tuple[str, str]]:
    """(figure, why) of every figure whose playbook failed."""
    return [(key, value) for key, value in figures.items() if key not in ("machine", "raw_packages") and isinstance(value, str)]


def goals(figures: dict) -> list[tuple[str, float, float]]:
    """(goal, limit, measured) of docs/benchmarks.md's goals table; a goal is met when measured <= limit."""
    curve, onboard = figures["curve"], figures["onboard_one_bare"]
    return [
        ("Idempotent re-run on 1 node / one-task play", 20.0, curve[1].seconds / figures["one_task_1_node"].seconds),
        ("Idempotent re-run: 4 nodes / 1 node", 1.5, curve[4].seconds / curve[1].seconds),
        ("Idempotent re-run: 8 nodes / 1 node", 2.5, curve[8].seconds / curve[1].seconds),
        ("Bare onboard less the Kubernetes part / raw apt-get install", 10.0,
         _host_part(onboard) / figures["raw_apt_install_s"]),
    ] + ([
        # The module must stay faster than the checklist: its time over the checklist's below 1.
        ("Preflight: nvidia_gpu_check / the 6 shell tasks", 1.0,
         figures["preflight_module"].seconds / figures["preflight_shell"].seconds),
    ] if _measured(figures, "preflight_module", "preflight_shell") else [])


def _role_table(curve: dict[int, Profile], cores: int) -> list[str]:
    parts = sorted({part for profile in curve.values() for part in profile.parts},
                   key=lambda part: -curve[1].parts.get(part, 0.0))
    lines = ["| part | " + " | ".join(f"{count} node{'s' if count > 1 else ''} (s)" for count in CURVE) + " |",
             "|---|" + "---|" * len(CURVE)]
    lines += [f"| {part} | " + " | ".join(f"{curve[count].parts.get(part, 0.0):.1f}" for count in CURVE) + " |"
              for part in parts]
    lines.append("| tasks run | " + " | ".join(str(curve[count].tasks) for count in CURVE) + " |")
    lines.append("| wall time | " + " | ".join(f"{curve[count].seconds:.1f}" for count in CURVE) + " |")
    lines.append("| CPU time of the machine | " + " | ".join(f"{curve[count].cpu_seconds:.1f}" for count in CURVE) + " |")
    lines.append(f"| CPU time / {cores} cores: the least wall time the CPUs allow | "
                 + " | ".join(f"{curve[count].cpu_seconds / cores:.1f}" for count in CURVE) + " |")
    if all(curve[count].cpu_parts for count in CURVE):
        lines += [f"| CPU time of the {part} | " + " | ".join(f"{curve[count].cpu_parts[part]:.1f}" for count in CURVE)
                  + " |" for part in bench_profile.CPU_PARTS]
    return lines


def _cpu_bound(curve: dict[int, Profile], cores: int) -> list[str]:
    """What the CPU time allows: its fixed and per-node parts (from 1 and 8 nodes), and the least ratios."""
    first, last = CURVE[0], CURVE[-1]
    per_node = (curve[last].cpu_seconds - curve[first].cpu_seconds) / (last - first)
    fixed = curve[first].cpu_seconds - first * per_node
    lines = [f"Each node adds {per_node:.1f} s of CPU time to the re-run and the run itself costs {fixed:.1f} s"
             + (":" if curve[first].cpu_parts else ".")]
    if curve[first].cpu_parts:
        lines += [f"- {part}: {(curve[last].cpu_parts[part] - curve[first].cpu_parts[part]) / (last - first):.1f} s per node"
                  for part in bench_profile.CPU_PARTS]
    lines += ["", f"On {cores} cores n nodes therefore take at least ({fixed:.1f} + n x {per_node:.1f}) / {cores} s: "
              + ", ".join(f"{count} nodes at least {curve[count].cpu_seconds / cores / curve[first].seconds:.2f}x the 1-node re-run"
                          for count in CURVE[1:]) + " (their measured CPU time over the cores, over the 1-node wall time)."]
    return lines


def _time_by_kind(figures: dict) -> list[str]:
    """The 1-node re-run's task time by kind against the play of its shape's, where both were measured."""
    rerun, shape = figures["curve"][1], figures.get("shape_1_nodes")
    if not isinstance(shape, Profile) or not rerun.kind_seconds or not shape.kind_seconds:
        return []
    lines = ["Where the 1-node re-run's task time goes by kind of task, against the play of its shape that does nothing",
             "(the difference is the work those tasks do: the modules' reads, the API calls, the templating of the",
             "roles' decisions and conditions):", "",
             "| kind | tasks | re-run (s) | play of its shape (s) | difference (s) |", "|---|---|---|---|---|"]
    lines += [f"| {kind} | {rerun.shape.get(kind, 0)} | {rerun.kind_seconds.get(kind, 0.0):.1f} "
              f"| {shape.kind_seconds.get(kind, 0.0):.1f} "
              f"| {rerun.kind_seconds.get(kind, 0.0) - shape.kind_seconds.get(kind, 0.0):.1f} |"
              for kind in bench_profile.SHAPE_KINDS]
    return lines + [""]


def restructure_estimates(figures: dict) -> dict[int, tuple[float, float]]:
    """By node count (SHAPE_CURVE), two estimates of the re-run from the plays that do nothing, or nothing where one
    of them was not measured: less what its controller-only and skipped tasks cost Ansible (the play of its shape
    less the play of its module calls alone); and the work its tasks do (less the whole play of its shape, plus the
    one-task play measured on 1 node: a run has to start)."""
    keys = ["one_task_1_node"] + [key for count in SHAPE_CURVE for key in (f"shape_{count}_nodes", f"modules_{count}_nodes")]
    if not _measured(figures, *keys):
        return {}
    estimates = {}
    for count in SHAPE_CURVE:
        work = figures["curve"][count].seconds - figures[f"shape_{count}_nodes"].seconds
        estimates[count] = (work + figures[f"modules_{count}_nodes"].seconds, work + figures["one_task_1_node"].seconds)
    return estimates


def _restructure_bound(figures: dict) -> list[str]:
    estimates = restructure_estimates(figures)
    if not estimates:
        return []
    modules, work = estimates[SHAPE_CURVE[0]]
    lines = ["What a restructure of the roles could reach, estimated from the plays that do nothing: the re-run less its",
             "other tasks (as if every controller-only and skipped task were free, each role's decisions made inside its",
             "modules, the same module calls kept: the re-run less the play of its shape plus the play of its module",
             "calls alone), and the work its tasks do (as if a task cost Ansible nothing but that work: the re-run less",
             "the play of its shape plus the one-task play on 1 node; the work is the modules' reads on the node, the",
             "API calls and the templating of the roles' decisions):", "",
             "| nodes | re-run (s) | play of its shape (s) | its module calls alone (s) | the re-run less its other tasks (s) "
             "| that / 1 node | the work its tasks do (s) | that / 1 node |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {count} | {figures['curve'][count].seconds:.1f} | {figures[f'shape_{count}_nodes'].seconds:.1f} "
              f"| {figures[f'modules_{count}_nodes'].seconds:.1f} | {estimates[count][0]:.1f} | {estimates[count][0] / modules:.2f} "
              f"| {estimates[count][1]:.1f} | {estimates[count][1] / work:.2f} |" for count in SHAPE_CURVE]
    return lines + [""]


def plot(curve: dict[int, Profile], path: Path) -> None:
    """The scaling curve: wall time and cost per node, and the per-role split, at each fleet size."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, (left, right) = pyplot.subplots(1, 2, figsize=(11, 4.2))
    seconds = [curve[count].seconds for count in CURVE]
    left.plot(CURVE, seconds, marker="o", label="wall time (s)")
    left.plot(CURVE, [total / count for total, count in zip(seconds, CURVE)], marker="s", label="per node (s)")
    left.set(xlabel="onboarded nodes", ylabel="seconds", xticks=CURVE, title="Idempotent onboard.yml re-run")
    left.grid(alpha=0.3)
    left.legend()
    parts = sorted({part for profile in curve.values() for part in profile.parts},
                   key=lambda part: -curve[1].parts.get(part, 0.0))
    bottoms = [0.0] * len(CURVE)
    positions = range(len(CURVE))
    bars = []
    for part in parts:
        values = [curve[count].parts.get(part, 0.0) for count in CURVE]
        bars.append(right.bar(positions, values, bottom=bottoms))
        bottoms = [bottom + value for bottom, value in zip(bottoms, values)]
    right.set(xlabel="onboarded nodes", ylabel="seconds", title="Where the time goes (json callback, per role)")
    right.set_xticks(list(positions), [str(count) for count in CURVE])
    # Labels given to legend() itself: matplotlib leaves out labels that start with "_".
    right.legend(bars, parts, fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)


def render(figures: dict) -> str:
    machine, curve = figures["machine"], figures["curve"]
    one, floor = curve[1], figures["one_task_1_node"]
    per_task = (one.seconds - floor.seconds) / max(one.tasks - floor.tasks, 1)
    lines = [
        "# Benchmarks",
        "",
        "Measured by `make bench` (lab/gpufleet_lab/bench.py) in one run on the Kubernetes lab: every pair side by",
        "side on the same machine, simulated GPU nodes (profile h100x8) as docker containers reached through the",
        f"docker connection, {machine['forks']} forks. Re-runs, floors and preflights: median of {REPEATS}. Every",
        "playbook runs with the ansible.posix.json callback as its stdout, which times each task.",
        "Tests never assert these figures.",
        "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB, Linux {machine['kernel']},",
        f"Python {machine['python']}.",
        "",
        "| comparison | A (s) | B (s) | A / B |",
        "|---|---|---|---|",
    ]
    lines += [f"| {name} | {a:.1f} | {b:.1f} | {a / b:.2f} |" for name, a, b in comparisons(figures)]
    lines += ["", "## Goals", "", "| goal | at most | measured | met |", "|---|---|---|---|"]
    lines += [f"| {name} | {limit:.2f} | {measured:.2f} | {'yes' if measured <= limit else 'no'} |"
              for name, limit, measured in goals(figures)]
    lines += [
        "",
        "## Scaling",
        "",
        "![Idempotent re-run at 1, 2, 4 and 8 nodes](benchmarks-scaling.png)",
        "",
        "Where the idempotent re-run's time goes, per role (the sum of each task's time from its start to its",
        "last host's result; `playbook` is onboard.yml's own tasks: preflight, summary):",
        "",
        *_role_table(curve, int(machine["cores"])),
        "",
        *_cpu_bound(curve, int(machine["cores"])),
        "",
        "The shape of the re-run (the first node's tasks by kind): "
        + ", ".join(f"{count} {kind}" for kind, count in one.shape.items())
        + ". The play of that shape that does nothing runs ping for each module, `set_fact` for each controller-only"
        " task and a `when: false` task for each skipped one; the play of its module calls alone has only the pings.",
        "",
        *_time_by_kind(figures),
        *_restructure_bound(figures),
        f"On 1 node the re-run runs {one.tasks} tasks; over the one-task play that is "
        f"{per_task:.2f} s per task. The slowest tasks of the 1-node re-run:",
        "",
        *[f"- {seconds:.1f} s: {name}" for name, seconds in one.slowest],
        "",
    ]
    if failures(figures):
        lines += ["Figures that could not be measured, because their playbook failed:", ""]
        lines += [f"- {key}: `{why}`" for key, why in failures(figures)]
        lines.append("")
    lines += [
        "Reading the figures:",
        "",
        "- The bare onboard is what the collection adds over apt: repositories, pins, holds, config",
        "  validation, containerd restart, and the Kubernetes side (labels, taints, device plugin, waiting for",
        "  Allocatable, the smoke-test pod), which the next two rows take apart.",
        "- The idempotent re-runs find every node in service: they check the plugin pod and Allocatable, and",
        "  start no smoke-test pod (gpu_node_join_smoke_test_in_service: a node in service may have no free GPU).",
        "- An idempotent run is Ansible's cost per task: each task is a round trip into the node and, on the",
        "  controller, a fork and the templating of its arguments. The scaling rows show how it grows with nodes:",
        "  Ansible runs hosts in parallel (forks), so more nodes cost far less than as many times one;",
        "  cluster-wide objects are applied once per play. On 2 cores the controller's CPU is what they share.",
        "- The CPU rows split the machine's CPU time by where it was spent: the controller (ansible-playbook, its",
        "  forks, its local modules such as gpu_cluster_read, the docker CLI), the node containers (the modules run",
        "  on the node, each starting Python and importing ansible-core's module_utils from the module's zip; kubelet,",
        "  containerd), the lab's control plane, and the rest. In the lab the nodes share the controller's cores; on",
        "  a real fleet a node's part runs on the node. The play of the re-run's shape that does nothing is the least",
        "  Ansible costs for as many tasks of each kind: its ratios are the scaling a run of this shape can reach here.",
        "  The two estimates under Scaling assume that the costs add up, as they do where every host's tasks",
        "  share the same cores: they are estimates, not runs.",
        "- Pipelining pipes a module into the target's Python instead of copying it as a file, running it and",
        "  removing it, so each task costs one exec into the node rather than several. ansible.cfg turns it on",
        "  for every connection and inventories/example sets it for real fleets; every other figure runs with it.",
        "- Mitogen's strategy is an option the collection does not need; `make test` runs every scenario with it",
        "  (docs/development.md: Speed at fleet scale).",
        "- The preflight row is one module round trip against six task round trips per host.",
        "- upgrade_driver.yml on an up-to-date fleet reads each node's driver (nvidia_gpu_check), its packages",
        "  and apt's candidates, and the Node, then cordons and drains nothing.",
        "- check.yml reads each node once (gpu_node_read) and the cluster once (gpu_cluster_read), then judges",
        "  on the controller and writes the report in one task.",
        "- The roles gather only the facts they need (`gathering = explicit`).",
        "",
    ]
    return "\n".join(lines)


COMPARISONS_HEADING = "## Before and after a change"


def with_comparisons_kept(text: str, previous: str) -> str:
    """The new page, with the previous page's before-and-after comparisons (measured by hand, side by side, for a
    change; make bench does not measure them) kept at its end."""
    _before, heading, kept = previous.partition(COMPARISONS_HEADING)
    return text.rstrip("\n") + "\n\n" + heading + kept if heading else text


def _jsonable(value: object) -> object:
    if isinstance(value, Profile):
        return dataclasses.asdict(value)
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    return value


def main() -> int:
    reports = REPO / "reports"
    reports.mkdir(exist_ok=True)
    figures: dict[str, object] = {}
    try:
        measure(figures)
    finally:
        # Written on a failure too: a run of most of an hour keeps the figures it got before the failing one.
        (reports / "benchmarks.json").write_text(json.dumps(_jsonable(figures), indent=2) + "\n")
        run([LABCTL, "kube", "down"], check=False)
    plot(figures["curve"], CURVE_PNG)
    page = REPO / "docs" / "benchmarks.md"
    text = with_comparisons_kept(render(figures), page.read_text() if page.exists() else "")
    page.write_text(text)
    print(text)
    return 0
