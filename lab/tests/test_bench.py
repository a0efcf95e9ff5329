"""The bench's profile of a run (from a real ansible.posix.json report), its goals and its plot; no lab needed."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from gpufleet_lab import bench, bench_profile
from gpufleet_lab.bench_profile import Profile

PLAYBOOK = """
- name: Two plays' worth of tasks
  hosts: localhost
  gather_facts: false
  tasks:
    - name: A playbook's own task
      ansible.builtin.command: sleep 0.3
      changed_when: false
    - name: The role
      ansible.builtin.import_role:
        name: slow_role
    - name: Skipped everywhere
      ansible.builtin.debug:
        msg: never
      when: false
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A real report: ansible-playbook on localhost with the json callback as stdout."""
    root = tmp_path_factory.mktemp("play")
    tasks = root / "roles" / "slow_role" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text("- name: Sleep in the role\n  ansible.builtin.command: sleep 0.6\n  changed_when: false\n")
    (root / "play.yml").write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_ROLES_PATH=str(root / "roles"))
    ansible_playbook = Path(sys.executable).with_name("ansible-playbook")
    argv = [str(ansible_playbook), "-i", "localhost,", "-c", "local",
            "-e", f"ansible_python_interpreter={sys.executable}", str(root / "play.yml")]
    output = bench.run(argv, env=env)
    return json.loads(output.stdout)


def test_time_goes_to_the_role_and_the_playbook(report: dict) -> None:
    profile = bench_profile.profile_of(2.0, report)
    assert profile.tasks == 3
    assert set(profile.parts) == {"slow_role", bench_profile.PLAYBOOK_PART}
    assert profile.parts["slow_role"] >= 0.6
    assert profile.parts[bench_profile.PLAYBOOK_PART] >= 0.3
    play = report["plays"][0]["play"]["duration"]
    assert sum(profile.parts.values()) <= (bench_profile._instant(play["end"]) - bench_profile._instant(play["start"])).total_seconds()
    # ranked by time, longest first (which task is longest depends on the machine's load: not asserted)
    assert [seconds for _name, seconds in profile.slowest] == sorted((s for _n, s in profile.slowest), reverse=True)
    assert "slow_role : Sleep in the role" in [name for name, _seconds in profile.slowest]


@pytest.mark.parametrize("name, part", [
    ("gpufleet.node.nvidia_driver : Install the driver", "nvidia_driver"),
    ("gpufleet.node.common : Check the arguments", "common"),
    ("Summarise, once, on the controller", bench_profile.PLAYBOOK_PART),
])
def test_part_of(name: str, part: str) -> None:
    assert bench_profile.part_of(name) == part


def test_median_is_the_middle_run() -> None:
    runs = [Profile(3.0), Profile(1.0), Profile(2.0)]
    assert bench_profile.median(runs).seconds == 2.0


def _figures(rerun_8: float) -> dict:
    curve = {count: Profile(10.0 + count, {"nvidia_driver": 4.0, "playbook": 2.0}, 150, [("a : b", 1.0)])
             for count in bench.CURVE}
    curve[8] = Profile(rerun_8, {"nvidia_driver": 8.0}, 1200)
    return {
        "machine": {"cpu": "cpu", "cores": "2", "memory_gib": "24", "kernel": "6", "python": "3.11", "forks": "5"},
        "onboard_one_bare": Profile(80.0, {"gpu_node_join": 30.0}), "raw_apt_install_s": 5.0, "raw_packages": ["a=1"],
        "one_task_1_node": Profile(1.0, tasks=1), "curve": curve,
        "rerun_1_node_no_pipelining": Profile(14.0), "rerun_1_node_mitogen": "ERROR! not supported",
        **{name: Profile(2.0) for name in ["upgrade_noop_4_nodes", "preflight_module", "preflight_shell",
                                           "check_4_nodes", "preflight_api_4_nodes"]},
        **{f"shape_{count}_nodes": Profile(5.0 * count) for count in bench.SHAPE_CURVE},
        **{f"modules_{count}_nodes": Profile(2.0 * count) for count in bench.SHAPE_CURVE},
    }


def test_the_estimates_take_off_what_the_plays_that_do_nothing_cost() -> None:
    figures = _figures(40.0)
    # less the other tasks: 11 - (5 - 2), 14 - (20 - 8), 40 - (40 - 16); the work alone: 11 - 5 + 1, 14 - 20 + 1, 40 - 40 + 1
    assert bench.restructure_estimates(figures) == {1: (8.0, 7.0), 4: (2.0, -5.0), 8: (16.0, 1.0)}
    text = bench.render(figures)
    assert "| 8 | 40.0 | 40.0 | 16.0 | 16.0 | 2.00 | 1.0 | 0.14 |" in text
    assert "| A play of the re-run's module calls alone that does nothing: 4 nodes vs 1 | 8.0 | 2.0 | 4.00 |" in text


def test_no_estimate_without_both_plays_at_every_size() -> None:
    figures = dict(_figures(40.0), modules_4_nodes="modules.yml -l bench-1 failed (exit 2): bench-1: t: boom")
    assert bench.restructure_estimates(figures) == {}
    assert "the re-run less its other tasks (s)" not in bench.render(figures)


@pytest.mark.parametrize("rerun_8, met", [(22.0, "yes"), (40.0, "no")])
def test_goals_are_judged_on_the_figures(rerun_8: float, met: str) -> None:
    text = bench.render(_figures(rerun_8))
    assert f"| Idempotent re-run: 8 nodes / 1 node | 2.50 | {rerun_8 / 11:.2f} | {met} |" in text
    assert "| Bare onboard less the Kubernetes part / raw apt-get install | 10.00 | 10.00 | yes |" in text
    assert "- rerun_1_node_mitogen: `ERROR! not supported`" in text
    assert "Mitogen's strategy (mitogen_linear) vs Ansible's" not in text


def test_mitogen_rows_compare_wall_and_cpu_time_with_the_1_node_re_run() -> None:
    figures = _figures(22.0)
    figures["curve"][1].cpu_seconds = 40.0
    figures["rerun_1_node_mitogen"] = Profile(9.0, cpu_seconds=24.0)
    text = bench.render(figures)
    assert "| Idempotent re-run of onboard.yml on 1 node: Mitogen's strategy (mitogen_linear) vs Ansible's | 9.0 | 11.0 | 0.82 |" in text
    assert ("| CPU time of the idempotent re-run of onboard.yml on 1 node (controller, node and lab together): Mitogen's "
            "strategy vs Ansible's | 24.0 | 40.0 | 0.60 |") in text


def test_scaling_table_gives_the_cpu_time_and_the_wall_time_it_allows() -> None:
    figures = _figures(22.0)
    for count, profile in figures["curve"].items():
        profile.cpu_seconds = 10.0 * count
    text = bench.render(figures)
    assert "| CPU time of the machine | 10.0 | 20.0 | 40.0 | 80.0 |" in text
    assert "| CPU time / 2 cores: the least wall time the CPUs allow | 5.0 | 10.0 | 20.0 | 40.0 |" in text


def test_a_run_is_profiled_with_the_cpu_time_spent_during_it() -> None:
    def burn_cpu() -> str:
        started = time.process_time()
        while time.process_time() - started < 0.3:
            pass
        return json.dumps({"plays": []})

    profile = bench_profile.profiled(burn_cpu)
    assert profile.cpu_seconds >= 0.25  # the machine was busy at least while this process burned its 0.3 s


def test_a_failed_figure_drops_its_rows_and_goals_but_not_the_rest() -> None:
    figures = dict(_figures(22.0), preflight_shell="preflight_shell.yml -l bench-1 failed (exit 2): bench-1: t: boom")
    text = bench.render(figures)
    assert "- preflight_shell: `preflight_shell.yml -l bench-1 failed (exit 2): bench-1: t: boom`" in text
    assert "the checklist as 6 shell tasks" not in text and "Preflight: nvidia_gpu_check" not in text
    assert "| check.yml on 4 healthy nodes vs the module's preflight plus one API read per node | 2.0 | 2.0 | 1.00 |" in text


def test_a_failed_task_is_named_with_its_host_and_message(tmp_path: Path) -> None:
    (tmp_path / "play.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - name: Tolerated\n      ansible.builtin.fail:\n        msg: ignored\n      ignore_errors: true\n"
        "    - name: Refuse\n      ansible.builtin.fail:\n        msg: the node saw 0 GPUs\n")
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    argv = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "localhost,", "-c", "local",
            "-e", f"ansible_python_interpreter={sys.executable}", str(tmp_path / "play.yml")]
    output = bench.run(argv, env=env, check=False)
    assert output.returncode == 2
    assert bench_profile.last_failure(json.loads(output.stdout)) == ["localhost: Refuse: the node saw 0 GPUs"]


def test_plot_writes_a_png(tmp_path: Path) -> None:
    target = tmp_path / "curve.png"
    bench.plot(_figures(22.0)["curve"], target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_shape_counts_the_first_hosts_tasks_by_kind(report: dict) -> None:
    # the playbook's command and the role's command run as modules on the host; the debug is skipped
    assert bench_profile.profile_of(2.0, report).shape == {
        "node module": 2, "local module": 0, "controller only": 0, "skipped": 1}


def test_time_by_kind_sums_the_first_hosts_tasks(report: dict) -> None:
    seconds = bench_profile.profile_of(2.0, report).kind_seconds
    assert seconds["node module"] >= 0.9  # the two commands: sleep 0.3 and sleep 0.6
    assert seconds["local module"] == seconds["controller only"] == 0.0
    assert 0.0 <= seconds["skipped"] < seconds["node module"]


def test_the_time_by_kind_table_gives_what_the_re_run_adds_to_the_play_of_its_shape() -> None:
    figures = _figures(40.0)
    figures["curve"][1].shape = {"node module": 10, "local module": 3, "controller only": 47, "skipped": 43}
    figures["curve"][1].kind_seconds = {"node module": 5.5, "local module": 1.7, "controller only": 3.3, "skipped": 1.9}
    figures["shape_1_nodes"].kind_seconds = {"node module": 3.0, "local module": 1.0, "controller only": 1.0, "skipped": 0.4}
    text = bench.render(figures)
    assert "| controller only | 47 | 3.3 | 1.0 | 2.3 |" in text
    assert "| skipped | 43 | 1.9 | 0.4 | 1.5 |" in text
    assert "by kind of task" not in bench.render(_figures(40.0))  # not measured: no table


@pytest.mark.parametrize("result, kind", [
    ({"action": "ansible.builtin.set_fact"}, "controller only"),
    ({"action": "assert"}, "controller only"),
    ({"action": "gpufleet.node.gpu_cluster_read", "_ansible_delegated_vars": {"ansible_host": "localhost"}}, "local module"),
    ({"action": "gpufleet.node.gpu_node_read"}, "node module"),
    ({"action": "ansible.builtin.set_fact", "skipped": True}, "skipped"),
])
def test_kind_of_a_result(result: dict, kind: str) -> None:
    assert bench_profile._kind(result) == kind


def test_the_shape_playbook_has_the_shape_it_was_made_from(tmp_path: Path) -> None:
    shape = {"node module": 2, "local module": 1, "controller only": 3, "skipped": 2}
    (tmp_path / "shape.yml").write_text(bench.shape_playbook(shape))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(f"[gpu_nodes]\nnode-1 ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    argv = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory), str(tmp_path / "shape.yml")]
    output = bench.run(argv, env=env)
    assert bench_profile.shape_of(json.loads(output.stdout)) == shape


@pytest.mark.parametrize("name, content, seconds", [
    ("cpuacct.usage", "2500000000\n", 2.5),
    ("cpu.stat", "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n", 1.5),
])
def test_a_containers_cpu_time_is_read_from_its_cgroup(tmp_path: Path, name: str, content: str, seconds: float) -> None:
    (tmp_path / name).write_text(content)
    assert bench_profile._cgroup_cpu_seconds(tmp_path / name) == seconds


def test_the_cpu_bound_splits_fixed_and_per_node_cpu_time() -> None:
    figures = _figures(22.0)
    parts = bench_profile.CPU_PARTS
    for count, profile in figures["curve"].items():
        profile.cpu_seconds = 4.0 + 10.0 * count
        profile.cpu_parts = {parts[0]: 2.0 + 6.0 * count, parts[1]: 2.0 * count, parts[2]: 1.0 + count, parts[3]: 1.0 + count}
    text = bench.render(figures)
    assert "Each node adds 10.0 s of CPU time to the re-run and the run itself costs 4.0 s:" in text
    assert f"- {parts[0]}: 6.0 s per node" in text
    assert "4 nodes at least 2.00x the 1-node re-run" in text  # (4 + 40) / 2 cores / 11 s
    assert f"| CPU time of the {parts[1]} | 2.0 | 4.0 | 8.0 | 16.0 |" in text


def test_the_before_and_after_comparisons_survive_a_new_bench() -> None:
    previous = "# Benchmarks\n\nold figures\n\n## Before and after a change\n\n| a | b |\n"
    assert bench.with_comparisons_kept("# Benchmarks\n\nnew figures\n", previous) == (
        "# Benchmarks\n\nnew figures\n\n## Before and after a change\n\n| a | b |\n")
    assert bench.with_comparisons_kept("# Benchmarks\n\nnew figures\n", "# Benchmarks\n\nold\n") == "# Benchmarks\n\nnew figures\n"
