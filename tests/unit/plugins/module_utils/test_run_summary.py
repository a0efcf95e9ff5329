"""The playbooks' summaries (module_utils/_run_summary.py): the clusters to read once each, and one row per node of
onboard.yml's and upgrade_driver.yml's runs, from what was observed on the node and in the API."""
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.node.plugins.filter.run_summary import FilterModule
from ansible_collections.gpufleet.node.plugins.module_utils import _run_summary as summary

FAILED_NODE = {"metadata": {"name": "n1", "labels": {"gpufleet.io/driver-upgrade-state": "upgrade-failed",
                                                     "gpufleet.io/nvidia-driver": "535.216.03",
                                                     "gpufleet.io/device-plugin": "paused-for-driver-upgrade",
                                                     "node-role.kubernetes.io/gpu": "", "kubernetes.io/os": "linux"},
                            "annotations": {"gpufleet.io/smoke-test-passed": "2026-12-06T12:00:00Z"}},
               "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}], "unschedulable": True},
               "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
READS = {"results": [{"nodes": [FAILED_NODE]}, {"nodes": [{"metadata": {"name": "node-2"}}]}, {"failed": True, "msg": "x"}]}
STEPS = [{"step": "cordon", "at": 100.0}, {"step": "drain", "at": 112.34}, {"step": "driver", "at": 160.06}]
OBSERVED = {"host": {"nvidia_gpu": {"driver": {"kernel_module_version": "535.261.03", "userspace_version": "535.261.03"},
                                    "gpus": [{"name": "NVIDIA H100 80GB HBM3"}, {"name": "NVIDIA H100 80GB HBM3"}]}},
            "packages": {"containerd": {"status": "installed", "version": "1.7.24~ds1-6+b2"},
                         "nvidia-container-toolkit": {"status": "half-installed", "version": "1.17.8-1"}},
            "commands": {"containerd_config_dump": {"stdout": 'default_runtime_name = "runc"\n[plugins.cri.containerd.runtimes.nvidia]\n'}}}
HOSTS = {
    "h1": {"gpu_node_join_node_name": "n1", "gpu_node_join_kubeconfig": "/etc/a.conf", "gpu_node_join_api_host": "cp-a",
           "__upgrade": {"node": "n1", "target": "535.261.03"}, "__upgrade_from": {"running": "535.216.03", "installed": "535.216.03"},
           "__upgrade_result": {"result": "failed", "step": "driver-upgrade-required", "reason": "dpkg failed"},
           "__upgrade_steps": STEPS, "__upgrade_after": {"nvidia_gpu": {"driver": {"kernel_module_version": "535.216.03"}}},
           "onboard_observed": OBSERVED, "onboard_done": True},
    "h2": {"__upgrade": {"node": "node-2", "target": "535.261.03"}, "onboard_error": "the driver step failed",
           "onboard_observed": {"commands": {"containerd_config_dump": {"stdout": 'default_runtime_name = "nvidia"'}}}},
    "h3": {"gpu_node_join_kubeconfig": "/etc/a.conf", "gpu_node_join_api_host": "cp-a", "__upgrade_result": {"result": "upgraded"}},
    "h4": {},
}
NAMES = list(HOSTS)


def test_the_clusters_to_read_once_each() -> None:
    assert summary.summary_clusters(NAMES, HOSTS) == [
        {"kubeconfig": "/etc/a.conf", "api_host": "cp-a", "nodes": ["n1", "h3"]},
        {"kubeconfig": "~/.kube/config", "api_host": "localhost", "nodes": ["h2", "h4"]}]


def test_an_onboarded_nodes_row_is_what_was_observed() -> None:
    row = summary.onboard_rows(NAMES, HOSTS, READS)[0]
    assert row == {"node": "h1", "result": "onboarded", "error": "", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 2,
                   "driver": "535.261.03", "driver_userspace": "535.261.03", "toolkit": "", "containerd": "1.7.24~ds1-6+b2",
                   "runtime_mode": "runtimeclass",
                   "labels": {"gpufleet.io/driver-upgrade-state": "upgrade-failed", "gpufleet.io/nvidia-driver": "535.216.03",
                              "gpufleet.io/device-plugin": "paused-for-driver-upgrade", "node-role.kubernetes.io/gpu": ""},
                   "taints": ["nvidia.com/gpu"], "allocatable_gpu": "8", "smoke_test_passed": "2026-12-06T12:00:00Z"}


@pytest.mark.parametrize("name, result, error, runtime_mode", [
    ("h2", "failed", "the driver step failed", "default"),
    ("h3", "failed", "", ""),
])
def test_a_node_not_onboarded(name: str, result: str, error: str, runtime_mode: str) -> None:
    row = summary.onboard_rows([name], HOSTS, READS)[0]
    assert (row["result"], row["error"], row["runtime_mode"], row["allocatable_gpu"], row["gpu_count"]) == (
        result, error, runtime_mode, "0", 0)


def test_no_nvidia_handler_in_the_loaded_configuration() -> None:
    host = {"onboard_observed": {"commands": {"containerd_config_dump": {"stdout": 'default_runtime_name = "runc"'}}}}
    assert summary.onboard_rows(["h"], {"h": host}, {})[0]["runtime_mode"] == "no nvidia handler"


def test_a_failed_upgrade_row_names_its_step_reason_and_remedy() -> None:
    row = summary.upgrade_rows(NAMES, HOSTS, {"gpufleet_upgrade_batches": [["h1"], ["h2"]]}, READS)[0]
    assert row == {"node": "n1", "result": "failed", "target": "535.261.03",
                   "before": {"running": "535.216.03", "installed": "535.216.03"},
                   "after": {"running": "535.216.03", "userspace": ""}, "state": "upgrade-failed", "driver_label": "535.216.03",
                   "cordoned": True, "node_read_error": "", "plugin_paused": True, "step": "driver-upgrade-required",
                   "reason": "dpkg failed", "remedy": summary.UPGRADE_REMEDIES["driver-upgrade-required"],
                   "steps": [{"step": "cordon", "seconds": 12.3}, {"step": "drain", "seconds": 47.7}], "seconds": 60.1,
                   "mig_before": {}, "mig_after": {}}


@pytest.mark.parametrize("stopped, outcome, remedy", [
    ("the batch would make 3 nodes unavailable", "blocked",
     "re-run once the nodes named are back in service, or raise upgrade_driver_max_unavailable"),
    ("outside the maintenance window (opens at 02:00)", "deferred", "re-run in the next window"),
    ("n1 failed", "not started", "re-run once the failed node is fixed"),
])
def test_a_planned_node_the_rollout_did_not_reach(stopped: str, outcome: str, remedy: str) -> None:
    plan = {"gpufleet_upgrade_batches": [["h1"], ["h2"]], "gpufleet_upgrade_stopped": stopped}
    row = summary.upgrade_rows(["h2"], HOSTS, plan, READS)[0]
    assert (row["node"], row["result"], row["reason"], row["remedy"], row["cordoned"], row["steps"], row["seconds"]) == (
        "node-2", outcome, stopped, remedy, False, [], 0)


def test_nodes_outside_the_plan_are_up_to_date_or_as_they_ended() -> None:
    rows = summary.upgrade_rows(["h3", "h4"], HOSTS, {}, {})
    assert [(row["node"], row["result"], row["remedy"]) for row in rows] == [("h3", "upgraded", ""), ("h4", "up to date", "")]


ONBOARD_HEADER = (
    "# GPU node onboarding summary\n\n"
    "| node | result | GPU | count | driver (kernel module / user space) | toolkit | containerd | runtime | allocatable nvidia.com/gpu"
    " | last smoke test passed (device, time) | taints | labels |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
ONBOARD_ROW = {"node": "h1", "result": "onboarded", "error": "", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 2, "driver": "535.261.03",
               "driver_userspace": "535.261.03", "toolkit": "1.17.8-1", "containerd": "1.7.24", "runtime_mode": "runtimeclass",
               "labels": {"node-role.kubernetes.io/gpu": "", "gpu-tier": "h100"}, "taints": ["nvidia.com/gpu", None],
               "allocatable_gpu": "8", "smoke_test_passed": "GPU-1, 2026-12-06T12:00:00Z"}
ONBOARD_LINE = ("| h1 | onboarded | NVIDIA H100 80GB HBM3 | 2 | 535.261.03 / 535.261.03 | 1.17.8-1 | 1.7.24 | runtimeclass | 8 | "
                "GPU-1, 2026-12-06T12:00:00Z | nvidia.com/gpu, None | node-role.kubernetes.io/gpu=, gpu-tier=h100 |\n")
FAILED_ROW = dict(ONBOARD_ROW, node="h2", result="failed", error="the driver step failed:\nE: no package", gpu_model="", gpu_count=0,
                  driver="", driver_userspace="", toolkit=None, runtime_mode="", labels={}, taints=[], allocatable_gpu="0",
                  smoke_test_passed="")
FAILED_LINE = "| h2 | failed |  | 0 | - / - |  | 1.7.24 |  | 0 | - |  |  |\n"


@pytest.mark.parametrize("rows, text", [
    ([], ONBOARD_HEADER),
    ([ONBOARD_ROW], ONBOARD_HEADER + ONBOARD_LINE),
    ([ONBOARD_ROW, FAILED_ROW], ONBOARD_HEADER + ONBOARD_LINE + FAILED_LINE
     + "\n## Failures\n\n- **h2**: the driver step failed: E: no package\n"),
    ([dict(FAILED_ROW, error="")], ONBOARD_HEADER + FAILED_LINE),
], ids=["no node", "onboarded", "a failure", "failed without an error"])
def test_the_onboarding_summarys_markdown(rows: list, text: str) -> None:
    assert summary.onboard_summary_markdown(rows) == text


UPGRADE_HEADER = (
    "# NVIDIA driver rollout\n\n"
    "| node | result | before (running / installed) | after (running / user space) | state | cordoned | seconds | failure |\n"
    "|---|---|---|---|---|---|---|---|\n")
UPGRADED = {"node": "n1", "result": "upgraded", "target": "535.261.03", "before": {"running": "535.216.03", "installed": "535.216.03"},
            "after": {"running": "535.261.03", "userspace": "535.261.03"}, "state": "upgrade-done", "driver_label": "535.261.03",
            "cordoned": False, "plugin_paused": False, "step": "", "reason": "", "remedy": "",
            "steps": [{"step": "cordon", "seconds": 12.3}, {"step": "drain", "seconds": 47}], "seconds": 59.3}
UPGRADED_LINE = "| n1 | upgraded | 535.216.03 / 535.216.03 | 535.261.03 / 535.261.03 | upgrade-done | no | 59.3 |  |\n"
FAILED = dict(UPGRADED, node="n2", result="failed", after={"running": "", "userspace": ""}, state="upgrade-failed", cordoned=True,
              step="drain-required", reason="PDB a|b blocks\nthe drain", remedy="free it | re-run\nnow", steps=[], seconds=0)
# Pipes and line breaks of the reason and the remedy would break the row: they are replaced.
FAILED_LINE_TEXT = ("| n2 | failed | 535.216.03 / 535.216.03 | - / - | upgrade-failed | yes | 0 | drain-required: PDB a/b blocks the drain"
                    " Remedy: free it / re-run now |\n")
UP_TO_DATE = dict(UPGRADED, node="n3", result="up to date", before={"running": "", "installed": ""}, after={"running": None, "userspace": ""},
                  state="", steps=[], seconds=0)
BLOCKED = dict(UP_TO_DATE, node="n4", result="blocked", reason="the batch would make 2 GPU node(s) unavailable",
               remedy=summary.OUTCOME_REMEDIES["blocked"])


@pytest.mark.parametrize("rows, text", [
    ([], UPGRADE_HEADER),
    ([UPGRADED], UPGRADE_HEADER + UPGRADED_LINE + "\n## Time per step (seconds)\n\n| node | steps |\n|---|---|\n| n1 | cordon 12.3, drain 47 |\n"),
    ([FAILED, UP_TO_DATE], UPGRADE_HEADER + FAILED_LINE_TEXT + "| n3 | up to date | - / - | - / - | - | no | 0 |  |\n"),
], ids=["no node", "upgraded, with its steps", "failed and up to date, no steps"])
def test_the_upgrade_summarys_markdown(rows: list, text: str) -> None:
    assert summary.upgrade_summary_markdown(rows) == text


@pytest.mark.parametrize("rows, message", [
    ([], "Report: /r/upgrade-driver-summary.md"),
    ([UPGRADED, UP_TO_DATE], "Report: /r/upgrade-driver-summary.md"),
    ([FAILED, UPGRADED, BLOCKED],
     "n2: failed at drain-required: PDB a|b blocks\nthe drain Remedy: free it | re-run\nnow "
     "n4: blocked the batch would make 2 GPU node(s) unavailable Remedy: " + summary.OUTCOME_REMEDIES["blocked"]
     + " Report: /r/upgrade-driver-summary.md"),
    ([dict(FAILED, step="", reason="", remedy="")], "n2: failed  Report: /r/upgrade-driver-summary.md"),
], ids=["no node", "nothing failed", "failed and blocked", "a failure without step, reason or remedy"])
def test_the_upgrade_failure_message(rows: list, message: str) -> None:
    assert summary.upgrade_summary_failure(rows, "/r") == message


@pytest.mark.parametrize("row, line", [
    (dict(UPGRADED, node=None, seconds=None, steps=[]), "|  | upgraded | 535.216.03 / 535.216.03 | 535.261.03 / 535.261.03 | upgrade-done | no |  |  |"),
    (dict(FAILED, step="", reason=None, remedy=""), "| n2 | failed | 535.216.03 / 535.216.03 | - / - | upgrade-failed | yes | 0 | None |"),
], ids=["alone: nothing", "joined: None"])
def test_none_prints_as_the_templates_printed_it(row: dict, line: str) -> None:
    assert summary.upgrade_summary_markdown([row]).splitlines()[4] == line


def test_a_node_that_stopped_answering_is_lost_and_stops_the_rollout() -> None:
    lost = {"result": "lost", "step": "driver-upgrade-required", "reason": "the host stopped answering"}
    hosts = dict(HOSTS, h1=dict(HOSTS["h1"], __upgrade_result=lost))
    plan = {"gpufleet_upgrade_batches": [["h1"], ["h2"]], "gpufleet_upgrade_stopped": "a node of an earlier batch failed (h1)"}
    rows = summary.upgrade_rows(["h1", "h2"], hosts, plan, READS)
    assert [(row["result"], row["step"]) for row in rows] == [("lost", "driver-upgrade-required"), ("not started", "")]
    assert rows[0]["reason"] == "the host stopped answering" and rows[0]["remedy"] == summary.OUTCOME_REMEDIES["lost"]
    assert "re-run: the rollout resumes at this node" in rows[0]["remedy"]
    assert rows[1]["reason"] == "a node of an earlier batch failed (h1)"
    assert summary.upgrade_summary_failing(rows) == [rows[0]]
    assert summary.upgrade_summary_failing([dict(rows[1], result=result) for result in ("done", "up to date", "blocked")]) == [
        dict(rows[1], result="blocked")]
    assert summary.upgrade_summary_failure(rows, "/r").startswith(
        "n1: lost at driver-upgrade-required: the host stopped answering Remedy: bring the host back")


@pytest.mark.parametrize("result, remedy", [
    ("failed", summary.API_REMEDY),
    ("lost", summary.API_REMEDY + "; " + summary.OUTCOME_REMEDIES["lost"]),
])
def test_an_api_server_that_stopped_answering_leaves_the_node_unread(result: str, remedy: str) -> None:
    failed = {"result": result, "step": "driver-upgrade-required", "reason": "connection refused. The API server did not answer",
              "api_error": "connection refused"}
    hosts = {"h1": dict(HOSTS["h1"], __upgrade_result=failed)}
    reads = {"results": [{"failed": False, "msg": "connection refused", "item": {"nodes": ["n1"]}}]}
    row = summary.upgrade_rows(["h1"], hosts, {"gpufleet_upgrade_batches": [["h1"]]}, reads)[0]
    assert (row["result"], row["state"], row["cordoned"], row["node_read_error"], row["remedy"]) == (
        result, "", None, "connection refused", remedy)
    line = summary.upgrade_summary_markdown([row]).splitlines()[4]
    assert line.startswith("| n1 | %s | 535.216.03 / 535.216.03 | 535.216.03 / - | not read | unknown | 60.1 | " % result)
    assert "Remedy: bring the API server back, then re-run" in line


def test_the_mig_layout_before_and_after_are_columns_when_a_node_has_one() -> None:
    host = dict(HOSTS["h1"], __upgrade_from=dict(HOSTS["h1"]["__upgrade_from"], mig={"0": "MIG on: 4 x 1g.20gb", "1": "MIG off"}),
                __mig_layout={"observed": {"0": "MIG off", "1": "MIG off"}},
                __upgrade_result={"result": "failed", "step": "mig-layout-required", "reason": "In use by another client"})
    row = summary.upgrade_rows(["h1"], {"h1": host}, {"gpufleet_upgrade_batches": [["h1"]]}, READS)[0]
    assert row["mig_before"] == {"0": "MIG on: 4 x 1g.20gb", "1": "MIG off"} and row["mig_after"] == {"0": "MIG off", "1": "MIG off"}
    assert row["remedy"] == summary.UPGRADE_REMEDIES["mig-layout-required"] and "device plugin stays paused" in row["remedy"]
    lines = summary.upgrade_summary_markdown([row, dict(UPGRADED, mig_before={}, mig_after={})]).splitlines()
    assert lines[2].endswith("| failure | MIG layout before | MIG layout after |")
    assert lines[4].endswith("| GPU 0 MIG on: 4 x 1g.20gb; GPU 1 MIG off | GPU 0 MIG off; GPU 1 MIG off |")
    assert lines[5].endswith("|  | - | - |")


def test_the_filters() -> None:
    assert set(FilterModule().filters()) == {"summary_clusters", "onboard_summary_rows", "upgrade_summary_rows", "onboard_summary_markdown",
                                             "upgrade_summary_markdown", "upgrade_summary_failing", "upgrade_summary_failure"}
