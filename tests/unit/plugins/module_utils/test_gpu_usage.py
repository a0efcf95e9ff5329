"""The GPU utilisation and waste report (module_utils/_gpu_usage.py, _gpu_usage_text.py): Prometheus's answers joined
with the API's allocations, the figures per workload, namespace and node, and missing data never read as idle."""
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.node.plugins.filter.gpu_usage import FilterModule
from ansible_collections.gpufleet.node.plugins.module_utils import _gpu_usage as usage
from ansible_collections.gpufleet.node.plugins.module_utils import _gpu_usage_text as text

END = 1_800_000_000
SETTINGS = {"window_hours": 168, "threshold_percent": 30, "price_per_gpu_hour": 2.5, "currency": "EUR", "end": str(END),
            "quotas": {"team-a": 4, "team-e": 0}}
TOTAL_MIB = 81559
# node, UUID, namespace, pod: compute mean, p95, memory used mean, p95 (MiB), hours of data
GPUS = [
    ("gpu-1", "GPU-0", "team-a", "train-0", 85.0, 90.0, 60000, 61000, 168),
    ("gpu-1", "GPU-1", "team-a", "train-0", 75.0, 80.0, 60000, 61000, 168),
    ("gpu-1", "GPU-2", "team-b", "notebook-0", 12.0, 14.0, 8000, 8155.9, 168),
    ("gpu-1", "GPU-3", "", "", 0.0, 0.0, 0, 0, 168),
    ("gpu-2", "GPU-4", "team-c", "idle-0", 2.0, 3.0, 50000, 50000, 84),
]


def _metric(node, uuid, namespace, pod):
    metric = {"__name__": "x", "Hostname": node, "UUID": uuid, "gpu": uuid[-1], "modelName": "NVIDIA H100 80GB HBM3"}
    return dict(metric, namespace=namespace, pod=pod) if pod else metric


def _vector(index):
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": _metric(*gpu[:4]), "value": [END, str(gpu[index])]} for gpu in GPUS]}}


def _answers(**overrides):
    free = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": _metric(*gpu[:4]), "value": [END, str(TOTAL_MIB - gpu[6])]} for gpu in GPUS]}}
    hourly = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": _metric(*gpu[:4]), "values": [[END - 3600 * (gpu[8] - 1 - hour), str(gpu[4])] for hour in range(gpu[8])]}
        for gpu in GPUS]}}
    answers = {"util_mean": _vector(4), "util_p95": _vector(5), "fb_used_mean": _vector(6), "fb_used_p95": _vector(7),
               "fb_free_mean": free, "hourly_util": hourly}
    answers.update(overrides)
    return answers


def _pod(namespace, name, node, gpus, phase="Running", resource="nvidia.com/gpu"):
    return {"metadata": {"namespace": namespace, "name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": {resource: str(gpus)}}}]},
            "status": {"phase": phase}}


PODS = [_pod("team-a", "train-0", "gpu-1", 2), _pod("team-b", "notebook-0", "gpu-1", 1), _pod("team-c", "idle-0", "gpu-2", 1),
        _pod("team-d", "no-metrics-0", "gpu-2", 1), _pod("team-d", "done-0", "gpu-2", 1, phase="Succeeded"),
        _pod("team-d", "cpu-0", "gpu-2", 0), _pod("team-e", "mig-0", "gpu-2", 1, resource="nvidia.com/mig-1g.10gb")]


@pytest.fixture(name="report")
def fixture_report() -> dict:
    return usage.usage_report(_answers(), PODS, SETTINGS)


def _row(rows: list, **key) -> dict:
    return next(row for row in rows if all(row[name] == value for name, value in key.items()))


def test_each_workload_has_its_gpu_hours_utilisation_and_cost(report: dict) -> None:
    train = _row(report["workloads"], pod="train-0")
    assert (train["gpus_allocated"], train["gpus_seen"], train["gpu_hours"], train["cost"]) == (2, 2, 336, 840.0)
    assert (train["util_mean"], train["util_p95"]) == (80.0, 90.0)
    assert (train["mem_mean"], train["mem_p95"]) == (73.6, 74.8)
    assert train["under_threshold"] is False and train["suggestion"] == ""


@pytest.mark.parametrize(("pod", "suggestion"), [
    ("notebook-0", "a smaller MIG profile"),
    ("idle-0", "release its GPUs"),
])
def test_workloads_under_the_threshold_are_flagged_with_a_suggestion(report: dict, pod: str, suggestion: str) -> None:
    row = _row(report["flagged"], pod=pod)
    assert row["suggestion"].startswith(suggestion)
    assert [row["pod"] for row in report["flagged"]] == ["notebook-0", "idle-0"]


def test_namespaces_sum_their_workloads_and_show_their_quota(report: dict) -> None:
    team_a = _row(report["namespaces"], namespace="team-a")
    assert (team_a["gpus_allocated"], team_a["quota"], team_a["gpu_hours"], team_a["cost"], team_a["util_mean"]) == (
        2, 4, 336, 840.0, 80.0)
    team_d = _row(report["namespaces"], namespace="team-d")
    assert (team_d["gpus_allocated"], team_d["gpu_hours"], team_d["util_mean"]) == (1, 0, None)
    assert _row(report["namespaces"], namespace="team-e")["gpus_allocated"] == 1   # a MIG device is a GPU resource


def test_nodes_count_idle_gpu_hours_and_chart_the_mean_compute_per_hour(report: dict) -> None:
    node = _row(report["nodes"], node="gpu-1")
    assert (node["gpus"], node["gpu_hours"], node["idle_gpu_hours"]) == (4, 672, 168)
    assert len(node["hourly"]) == 168 and node["hourly"][-1] == [END, 43.0]       # (85 + 75 + 12 + 0) / 4
    assert report["totals"]["gpu_hours"] == 756 and report["totals"]["gpus"] == 5 and report["totals"]["gpus_allocated"] == 6


def test_a_pod_holding_gpus_without_data_is_named_not_counted_as_idle(report: dict) -> None:
    assert report["no_data"] == [{"namespace": "team-d", "pod": "no-metrics-0", "node": "gpu-2", "gpus": 1},
                                 {"namespace": "team-e", "pod": "mig-0", "node": "gpu-2", "gpus": 1}]
    assert "no-metrics-0" not in [row["pod"] for row in report["workloads"]]


@pytest.mark.parametrize(("answer", "words"), [
    ({"status": "success", "data": {"resultType": "vector", "result": []}}, "returned no series"),
    ({"status": "error", "error": "parse error"}, "did not answer: parse error"),
    (None, "did not answer: no answer"),
])
def test_a_source_without_series_fails_the_report_and_gives_no_figures(answer, words: str) -> None:
    report = usage.usage_report(_answers(util_p95=answer), PODS, SETTINGS)
    [problem] = report["problems"]
    assert problem.startswith("util_p95 (quantile_over_time(0.95, DCGM_FI_DEV_GPU_UTIL[168h])): ") and words in problem
    assert report["workloads"] == [] and report["totals"] == {}
    assert "No figures" in text.usage_report_markdown(report)
    assert text.usage_report_failure(report, "/tmp/r").endswith("Report: /tmp/r/gpu-usage-report.md")


def test_a_failed_request_becomes_an_error_answer() -> None:
    results = [{"item": {"key": "util_mean"}, "status": -1, "msg": "Request failed: Connection refused"},
               {"item": {"key": "util_p95"}, "json": {"status": "success"}}]
    answers = usage.answers_of(results)
    assert answers["util_mean"] == {"status": "error", "error": "Request failed: Connection refused"}
    assert answers["util_p95"] == {"status": "success"}


@pytest.mark.parametrize(("changes", "words"), [
    ({"report_prometheus_url": "prometheus:9090"}, "report_prometheus_url is 'prometheus:9090'"),
    ({"report_prometheus_url": ""}, "with its scheme"),
    ({"report_window_hours": 0}, "report_window_hours is 0"),
    ({"report_window_hours": "a week"}, "a whole number of hours"),
    ({"report_window_hours": 1.5}, "a whole number of hours"),
    ({"report_threshold_percent": 0}, "above 0 and at most 100"),
    ({"report_threshold_percent": 130}, "report_threshold_percent is 130"),
    ({"report_price_per_gpu_hour": -1}, "at least 0"),
    ({"report_end": "yesterday"}, "Unix time"),
    ({"gpufleet_gpu_quotas": {"team-a": -1}}, "gpufleet_gpu_quotas.team-a is -1"),
    ({"gpufleet_gpu_quotas": {"team-a": 1.5}}, "a whole number of GPUs"),
    ({"gpufleet_gpu_quotas": ["team-a"]}, "a mapping of namespace to GPUs"),
])
def test_bad_settings_are_named(changes: dict, words: str) -> None:
    settings = {"report_prometheus_url": "https://prometheus.example.internal", "report_window_hours": 168,
                "report_threshold_percent": 30, "report_price_per_gpu_hour": 2.5, "report_end": "",
                "gpufleet_gpu_quotas": {"team-a": 4}}
    assert usage.settings_problems(settings) == []
    assert usage.settings_problems(dict(settings, report_window_hours="24", report_threshold_percent="12.5")) == []
    [problem] = usage.settings_problems(dict(settings, **changes))
    assert words in problem, problem


def test_markdown_and_html_show_the_figures(report: dict) -> None:
    markdown = text.usage_report_markdown(report)
    assert "| team-b | notebook-0 | 12.0 % | 9.8 % | 168 | 420.00 EUR | a smaller MIG profile" in markdown
    assert "Over the 168 hours to 2027-01-15 08:00 UTC: 5 GPUs, 756 GPU-hours (168 idle, no pod)" in markdown
    assert "## Pods holding GPUs without data" in markdown
    html = text.usage_report_html(report)
    assert html.count("<svg ") == 2 and '<svg data-node="gpu-1"' in html and 'class="under"' in html
    assert "<script" not in html and "http" not in html.split("<body>")[1]


def test_the_filters() -> None:
    assert set(FilterModule().filters()) == {"gpu_usage_queries", "gpu_usage_settings_problems", "gpu_usage_report",
                                             "gpu_usage_report_markdown", "gpu_usage_report_html", "gpu_usage_report_failure",
                                             "gpu_quota_problems", "gpu_quota_objects", "gpu_quotas_to_remove"}


def test_each_team_gets_a_quota_on_whole_and_shared_gpus() -> None:
    [team_a, team_b] = usage.quota_objects({"team-b": 0, "team-a": 4})
    assert team_a == {"apiVersion": "v1", "kind": "ResourceQuota",
                      "metadata": {"name": "gpufleet-gpu", "namespace": "team-a",
                                   "labels": {"app.kubernetes.io/managed-by": "gpufleet.node"}},
                      "spec": {"hard": {"requests.nvidia.com/gpu": "4", "requests.nvidia.com/gpu.shared": "4"}}}
    assert team_b["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"


def test_only_the_collections_quotas_of_namespaces_no_longer_listed_are_removed() -> None:
    listed = [{"metadata": {"namespace": "team-a", "name": "gpufleet-gpu"}},
              {"metadata": {"namespace": "team-c", "name": "gpufleet-gpu"}},
              {"metadata": {"namespace": "team-c", "name": "other"}}]
    assert usage.quotas_to_remove(listed, {"team-a": 4}) == [{"namespace": "team-c", "name": "gpufleet-gpu"}]
