"""check.yml's report (module_utils/_check_report.py): its Markdown, its HTML page and the run's failure message,
from the report's nodes and version drift."""
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.node.plugins.filter.check_report import FilterModule
from ansible_collections.gpufleet.node.plugins.module_utils import _check_report as report_text

LAYERS_PASS = [{"name": "host", "status": "pass"}, {"name": "runtime", "status": "pass"}, {"name": "kubernetes", "status": "pass"}]


def node(host: str, status: str = "pass", **entry: object) -> dict:
    return {"host": host, "group": "gpu_nodes", "status": status, "first_failing_layer": None, "start_here": [], "failed_checks": [],
            "critical_xids": [], "layers": LAYERS_PASS, **entry}


def row(host: str, *values: str, drift: tuple = ()) -> dict:
    cells = [{"field": field, "value": value, "status": "fail" if field in drift else "pass"}
             for field, value in zip(("driver_running", "toolkit"), values)]
    return {"host": host, "group": "gpu_nodes", "status": "pass", "drift": bool(drift), "cells": cells}


FAILED = node("gpu-2", "fail", first_failing_layer="host", failed_checks=["critical_xids_absent", "nvidia_smi"],
              critical_xids=["Xid 79 <fallen off the bus>"],
              start_here=[{"id": "critical_xids_absent", "message": "Xid 79 <fallen off the bus>", "remedy": "reseat the GPU"},
                          {"id": "nvidia_smi", "message": "NVML & driver mismatch", "remedy": "reboot"}],
              layers=[{"name": "host", "status": "fail"}, {"name": "runtime", "status": "warn"}])
DRIFT = {"group": "gpu_nodes", "field": "driver_running", "majority": "535.261.03", "odd": [{"host": "gpu-2", "value": "535.216.03"}]}
PASSING = {"nodes": [node("gpu-1")], "drift": {"fields": ["driver_running", "toolkit"], "drift": [],
                                               "rows": [row("gpu-1", "535.261.03", "1.17.8-1")]}}
FAILING = {"nodes": [node("gpu-1"), FAILED],
           "drift": {"fields": ["driver_running", "toolkit"], "drift": [DRIFT],
                     "rows": [row("gpu-2", "535.216.03", "1.17.8-1", drift=("driver_running",)), row("gpu-1", "535.261.03", "1.17.8-1")]}}

# A line of the versions' table ends with "| " (a space before the line break).
MARKDOWN_PASSING = "\n".join([
    "# GPU fleet check",
    "",
    "1 nodes checked: 0 failed, 0 version drifts.",
    "",
    "| node | status | start at | failed checks |",
    "|---|---|---|---|",
    "| gpu-1 | pass |  |  |",
    "",
    "## Versions",
    "",
    "| node | group | driver_running | toolkit |",
    "|---|---|---|---|",
    "| gpu-1 | gpu_nodes | 535.261.03 | 1.17.8-1 | ",
    "",
])
MARKDOWN_FAILING = "\n".join([
    "# GPU fleet check",
    "",
    "2 nodes checked: 1 failed, 1 version drifts.",
    "",
    "| node | status | start at | failed checks |",
    "|---|---|---|---|",
    "| gpu-1 | pass |  |  |",
    "| gpu-2 | fail | host | critical_xids_absent, nvidia_smi |",
    "",
    "## gpu-2: start at the host layer",
    "",
    "**Critical Xid: Xid 79 <fallen off the bus>**",
    "",
    "- `critical_xids_absent`: Xid 79 <fallen off the bus>. Remedy: reseat the GPU",
    "- `nvidia_smi`: NVML & driver mismatch. Remedy: reboot",
    "",
    "## Versions",
    "",
    "| node | group | driver_running | toolkit |",
    "|---|---|---|---|",
    "| gpu-2 | gpu_nodes | **535.216.03** (drift) | 1.17.8-1 | ",
    "| gpu-1 | gpu_nodes | 535.261.03 | 1.17.8-1 | ",
    "- Drift in gpu_nodes: driver_running is `535.261.03` on most nodes; `535.216.03` on gpu-2",
    "",
])


@pytest.mark.parametrize("report, text", [(PASSING, MARKDOWN_PASSING), (FAILING, MARKDOWN_FAILING)], ids=["passing", "failing, with drift"])
def test_the_markdown(report: dict, text: str) -> None:
    assert report_text.check_report_markdown(report) == text


@pytest.mark.parametrize("hosts, order", [
    ([("b", "pass"), ("A", "pass"), ("c", "fail"), ("d", "warn"), ("C", "skip")], ["d", "C", "A", "b", "c"]),
    ([("gpu-10", "fail"), ("GPU-2", "fail"), ("gpu-1", "pass")], ["gpu-1", "gpu-10", "GPU-2"]),
], ids=["by status then name", "names case ignored"])
def test_the_markdown_lists_the_nodes_by_status_in_reverse_then_by_name(hosts: list, order: list) -> None:
    nodes = [node(host, status, first_failing_layer="host" if status == "fail" else None) for host, status in hosts]
    text = report_text.check_report_markdown({"nodes": nodes, "drift": {"fields": [], "drift": [], "rows": []}})
    table = text.split("|---|---|---|---|\n")[1].split("\n\n")[0].splitlines()
    assert [line.split(" | ")[0][2:] for line in table] == order


HTML_ROW_FAILING = (
    '<tr data-node="gpu-2">\n<td>gpu-2</td><td>gpu_nodes</td><td class="fail">fail</td>\n'
    '<td class="fail">fail</td><td class="warn">warn</td><td class="skip"></td>'
    '<td class="fail" data-field="driver_running">535.216.03</td><td class="pass" data-field="toolkit">1.17.8-1</td>'
    '<td><div class="xid">Critical Xid: Xid 79 &lt;fallen off the bus&gt;</div>host layer: '
    '<div><code>critical_xids_absent</code>: Xid 79 &lt;fallen off the bus&gt;. Remedy: reseat the GPU</div>'
    '<div><code>nvidia_smi</code>: NVML &amp; driver mismatch. Remedy: reboot</div></td>\n</tr>\n')


def test_the_html_page() -> None:
    page = report_text.check_report_html(FAILING)
    assert page.startswith('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>GPU fleet check</title>\n<style>\n')
    assert page.endswith(
        '<h1>GPU fleet check</h1>\n<p>2 nodes checked: 1 failed,\n1 version drifts.</p>\n<table id="nodes">\n'
        '<tr><th>node</th><th>group</th><th>status</th><th>host</th><th>runtime</th><th>kubernetes</th><th>driver_running</th>'
        '<th>toolkit</th><th>start here</th></tr>\n' + HTML_ROW_FAILING
        + '<tr data-node="gpu-1">\n<td>gpu-1</td><td>gpu_nodes</td><td class="pass">pass</td>\n'
        '<td class="pass">pass</td><td class="pass">pass</td><td class="pass">pass</td>'
        '<td class="pass" data-field="driver_running">535.261.03</td><td class="pass" data-field="toolkit">1.17.8-1</td><td></td>\n</tr>\n'
        '</table>\n<h2>Drift</h2>\n<ul>\n'
        '<li class="fail">gpu_nodes: driver_running is 535.261.03 on most nodes; 535.216.03 on gpu-2</li>\n</ul>\n</body>\n</html>\n')


def test_the_html_page_without_drift_has_no_drift_list() -> None:
    assert report_text.check_report_html(PASSING).endswith("<td></td>\n</tr>\n</table>\n</body>\n</html>\n")


@pytest.mark.parametrize("value, escaped", [
    ("<b>&\"'", "&lt;b&gt;&amp;&#34;&#39;"),
    ("plain 535.261.03", "plain 535.261.03"),
    (None, "None"),
])
def test_the_html_escapes_as_jinjas_escape_filter(value: object, escaped: str) -> None:
    report = {"nodes": [node("h", critical_xids=[value])], "drift": {"fields": ["toolkit"], "drift": [], "rows": [
        {"host": "h", "group": value, "cells": [{"field": "toolkit", "value": value, "status": "pass"}]}]}}
    page = report_text.check_report_html(report)
    assert '<td>h</td><td>%s</td>' % escaped in page
    assert '<td class="pass" data-field="toolkit">%s</td>' % escaped in page
    assert '<div class="xid">Critical Xid: %s</div>' % escaped in page


def test_a_node_without_layers_shows_them_skipped() -> None:
    report = {"nodes": [node("h", layers=[])], "drift": {"fields": [], "drift": [], "rows": [row("h")]}}
    assert '<td class="skip"></td><td class="skip"></td><td class="skip"></td><td></td>' in report_text.check_report_html(report)


@pytest.mark.parametrize("report, message", [
    (PASSING, "Report: /r/check-report.html"),
    (FAILING, "gpu-2: start at the host layer: critical_xids_absent (Xid 79 <fallen off the bus>; remedy: reseat the GPU); "
              "nvidia_smi (NVML & driver mismatch; remedy: reboot).\n"
              "Drift in group gpu_nodes: driver_running is 535.261.03 on most nodes but 535.216.03 on gpu-2.\n"
              "Report: /r/check-report.html"),
    ({"nodes": [], "drift": {"drift": [{"group": "g", "field": "toolkit", "majority": "", "odd": [
        {"host": "a", "value": "1.17.8-1"}, {"host": "b", "value": ""}]}]}},
     "Drift in group g: toolkit is (none) on most nodes but 1.17.8-1 on a, (none) on b.\nReport: /r/check-report.html"),
], ids=["passing", "a failed node and a drift", "empty values"])
def test_the_failure_message(report: dict, message: str) -> None:
    assert report_text.check_report_failure(report, "/r") == message


def test_the_filters() -> None:
    assert FilterModule().filters() == {"check_report_markdown": report_text.check_report_markdown,
                                        "check_report_html": report_text.check_report_html,
                                        "check_report_failure": report_text.check_report_failure}
