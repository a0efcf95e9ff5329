"""gpu_node_join's judgement of a device plugin pod (roles/gpu_node_join/templates/plugin_pod_current.j2), rendered
by Ansible: a pod counts when it runs the current image and configuration and has been Ready long enough that a
plugin dying at start (Ready for a moment at each restart) does not."""
from __future__ import annotations

import datetime
from pathlib import Path

import pytest
import yaml
from template_runner import render_per_host

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "roles/gpu_node_join/templates/plugin_pod_current.j2"
SETTLE = yaml.safe_load((REPO / "roles/gpu_node_join/vars/main.yml").read_text())["__gpu_node_join_plugin_settle_seconds"]
IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.4"
SHA = "4700d1d89eb4"

# The role's own variables the template reads, as the role sets them.
ROLE_VARIABLES = {
    "__gpu_node_join_image": IMAGE,
    "__gpu_node_join_label_prefix": "gpufleet.io",
    "__gpu_node_join_config_sha256": SHA,
    "__gpu_node_join_plugin_settle_seconds": SETTLE,
}


def _pod(ready_for: float | None = SETTLE + 60, image: str = IMAGE, sha: str = SHA, deleting: bool = False,
         transition: bool = True) -> dict:
    """A plugin pod whose Ready condition turned true ready_for seconds ago (None: not Ready), as of now."""
    condition = {"type": "Ready", "status": "True" if ready_for is not None else "False"}
    if transition and ready_for is not None:
        since = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=ready_for)
        condition["lastTransitionTime"] = since.strftime("%Y-%m-%dT%H:%M:%SZ")
    metadata = {"name": "plugin", "annotations": {"gpufleet.io/config-sha256": sha}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata, "spec": {"containers": [{"image": image}]}, "status": {"conditions": [condition]}}


# The pods of each case (made when the fixture renders them: the times are relative to then) and the verdict.
CASES: dict[str, tuple[list[dict], bool]] = {
    "ready_long_enough": ([{}], True),
    # Ready from "now" as the fixture made it; a minute ahead, so that a slow render (a loaded machine can take longer
    # than the settle time to start ansible-playbook) still reads a pod that has not been Ready long enough.
    "ready_a_moment": ([{"ready_for": -60}], False),
    "ready_without_transition_time": ([{"transition": False}], True),
    "not_ready": ([{"ready_for": None}], False),
    "other_configuration": ([{"sha": "0000"}], False),
    "other_image": ([{"image": "nvcr.io/nvidia/k8s-device-plugin:v0.16.0"}], False),
    "deleting": ([{"deleting": True}], False),
    "an_old_pod_and_a_settled_current_one": ([{"sha": "0000"}, {}], True),
    "no_pod": ([], False),
}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    hosts = {name: {**ROLE_VARIABLES, "__pods": [_pod(**pod) for pod in pods]} for name, (pods, _verdict) in CASES.items()}
    return render_per_host(tmp_path_factory.mktemp("plugin_pod_current"), TEMPLATE, hosts)


@pytest.mark.parametrize("case", sorted(CASES))
def test_verdict(verdicts: dict[str, str], case: str) -> None:
    assert verdicts[case].strip() == str(CASES[case][1])


def test_the_settling_time_outlasts_the_kubelets_status_period() -> None:
    assert SETTLE > 10
