"""tests/run_stages.py: the CPU time each stage reports, and the table make test ends with."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SPEC = importlib.util.spec_from_file_location("run_stages", Path(__file__).resolve().parents[1] / "run_stages.py")
run_stages = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(run_stages)

# A grandchild that spends 0.3 s of its own CPU time, started by a child that waits for it, as make starts molecule.
GRANDCHILD = "import time\nwhile time.process_time() < 0.3:\n    pass\n"
CHILD = f"import subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c', {GRANDCHILD!r}]).returncode)"


def test_cpu_of_a_stage_counts_the_processes_it_waited_for(tmp_path):
    with (tmp_path / "log").open("w") as log:
        ok, cpu = run_stages.run_measured([sys.executable, "-c", CHILD], log, {})
    assert ok
    assert cpu >= 0.3


def test_a_failing_stage_is_reported_failed(tmp_path):
    with (tmp_path / "log").open("w") as log:
        ok, _cpu = run_stages.run_measured([sys.executable, "-c", "print('no'); raise SystemExit(3)"], log, {})
    assert not ok
    assert (tmp_path / "log").read_text() == "no\n"


def test_table_has_wall_and_cpu_time_per_stage_and_in_total():
    text = run_stages.table([("lint", 61.4, True, 95.0), ("molecule default", 119.6, False, 30.2)], ["units"], 181.0)
    assert text.splitlines()[1:] == [
        "| stage | result | wall time | CPU time (stage's processes) |",
        "|---|---|---|---|",
        "| lint | passed | 1 min 01 s | 1 min 35 s |",
        "| molecule default | FAILED | 2 min 00 s | 0 min 30 s |",
        "| units | not run | | |",
        "| total (wall clock; the test lanes overlap) | | 3 min 01 s | 2 min 05 s |",
    ]


RESCUED_THEN_FAILED = """\
TASK [Check container_toolkit_version] *****************************************
fatal: [gf-a]: FAILED! =>
    assertion: container_toolkit_version is match('x')
    msg: container_toolkit_version must be exact; got '1.17.8'.
Friday 04 December 2026  17:20:53 +0000 (0:00:00.188)       0:00:07.736 *******

TASK [Probe the API] ***********************************************************
fatal: [localhost]: FAILED! => {"changed": false, "msg": "refused"}
...ignoring

TASK [Onboarding failed at the device plugin layer] ****************************
fatal: [localhost]: FAILED! =>
    assertion: '''did you configure the NVIDIA Container Toolkit'' in __plugin_log.log'
    changed: false
    msg: |-
        gf-join-h100 did not show its GPUs within 60s
        Layer: device plugin.
Friday 04 December 2026  17:20:54 +0000 (0:00:00.350)       0:00:08.087 *******

PLAY RECAP *********************************************************************
localhost                  : ok=3    changed=0    unreachable=0    failed=1    skipped=0    rescued=1    ignored=1
"""


def test_why_a_stage_failed_is_its_last_failure_that_was_not_ignored():
    assert run_stages.what_failed(RESCUED_THEN_FAILED, lines=3).splitlines() == [
        "TASK [Onboarding failed at the device plugin layer] failed on localhost:",
        "    msg: |-",
        "        gf-join-h100 did not show its GPUs within 60s",
        "        Layer: device plugin.",
    ]


def test_an_ignored_failure_does_not_say_why():
    ignored = RESCUED_THEN_FAILED.split("TASK [Onboarding", maxsplit=1)[0]
    assert run_stages.what_failed(ignored).splitlines()[0] == "TASK [Check container_toolkit_version] failed on gf-a:"


def test_why_pytest_failed_is_its_failed_tests():
    log = "....F\n=== short test summary info ===\nFAILED lab/tests/e2e/test_kube_lab.py::test_down - assert 1 == 0\n"
    assert run_stages.what_failed(log) == "FAILED lab/tests/e2e/test_kube_lab.py::test_down - assert 1 == 0"


def test_the_longest_lanes_run_at_normal_priority_and_the_others_nicer():
    assert run_stages.niceness_of("kube") == [] and run_stages.niceness_of("kube3") == []
    assert run_stages.niceness_of("kube2") == ["nice", "-n", "3"] == run_stages.niceness_of("kube4")
    assert run_stages.niceness_of("hosts1") == ["nice", "-n", str(run_stages.HOST_LANE_NICENESS)]


def test_the_newest_ansible_core_has_a_host_stage():
    plan = run_stages.lanes()
    host_stages = [stage for lane, (stages, _env) in plan.items() if lane.startswith("hosts") for stage in stages]
    assert run_stages.controllers() == ["newest"]
    assert "ansible-range newest" in host_stages
    assert run_stages.argv_of("ansible-range newest") == ["make", "ansible-range", "CONTROLLERS=newest"]
