"""The GPU alert rules: valid for Prometheus, unit-tested with promtool, the same in both forms, Xids as the module's.

promtool comes from Debian's prometheus package (`lab/labctl promtool` unpacks and caches it).
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.node.plugins.module_utils._nvidia_health import DEFAULT_CRITICAL_XIDS

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "monitoring" / "gpufleet-gpu-alerts.rules.yml"
MANIFEST = REPO / "monitoring" / "gpufleet-gpu-alerts.prometheusrule.yml"
RULE_TESTS = REPO / "tests" / "alerts" / "gpufleet-gpu-alerts.test.yml"


def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _alerts() -> dict[str, dict]:
    return {rule["alert"]: rule for group in _yaml(RULES)["groups"] for rule in group["rules"]}


@pytest.fixture(scope="module")
def promtool() -> str:
    """labctl's promtool, or the one GPUFLEET_PROMTOOL names (a controller container runs the host's)."""
    if os.environ.get("GPUFLEET_PROMTOOL"):
        return os.environ["GPUFLEET_PROMTOOL"]
    result = subprocess.run([str(REPO / "lab" / "labctl"), "promtool"], capture_output=True, text=True, check=True)
    return result.stdout.strip()


def test_rules_are_valid_for_prometheus(promtool: str) -> None:
    result = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rules_pass_their_unit_tests(promtool: str) -> None:
    result = subprocess.run([promtool, "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_prometheusrule_carries_the_same_groups() -> None:
    manifest = _yaml(MANIFEST)
    assert (manifest["apiVersion"], manifest["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert manifest["spec"]["groups"] == _yaml(RULES)["groups"]


def test_critical_xids_are_the_modules() -> None:
    expr = _alerts()["GpufleetGPUCriticalXid"]["expr"]
    assert sorted(int(xid) for xid in re.findall(r"DCGM_FI_DEV_XID_ERRORS == (\d+)", expr)) == sorted(DEFAULT_CRITICAL_XIDS)


def _cases(alert: str) -> list[tuple[int, list]]:
    """Per promtool case of ``alert``: how many input series of its metric the test has, and the alerts it expects."""
    metric = re.search(r"\b(?:DCGM_FI_|kube_)\w+", _alerts()[alert]["expr"]).group(0)
    return [(sum(1 for series in test["input_series"] if series["series"].startswith(metric + "{")), case["exp_alerts"])
            for test in _yaml(RULE_TESTS)["tests"] for case in test["alert_rule_test"] if case["alertname"] == alert]


@pytest.mark.parametrize("alert", sorted(_alerts()))
def test_every_alert_is_tested_firing_and_silent(alert: str) -> None:
    """promtool compares the whole list of alerts: a case expecting fewer alerts than series proves some stay silent."""
    cases = _cases(alert)
    assert any(expected for _series, expected in cases), f"{alert}: no case where it fires"
    assert any(len(expected) < series for series, expected in cases), f"{alert}: no case where a series must stay silent"
