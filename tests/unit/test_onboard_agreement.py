"""onboard.yml's check that the layers agree (playbooks/templates/strategy_problems.j2), rendered by Ansible
with the roles' own defaults: every disagreement is named before any host is changed, and the defaults agree."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from template_runner import render_per_host

REPO = Path(__file__).resolve().parents[2]
ROLES = ("container_toolkit", "containerd_nvidia", "gpu_node_join")

CASES: dict[str, dict] = {
    "defaults": {},
    "lab": {"containerd_nvidia_mode": "runtimeclass", "gpu_node_join_runtime_class": True},
    "runtimeclass_without_runtime_class": {"containerd_nvidia_mode": "runtimeclass"},
    "runtime_class_with_default_mode": {"gpu_node_join_runtime_class": True},
    "envvar_secure_toolkit": {"gpu_node_join_device_list_strategy": "envvar"},
    "envvar_accepted": {"gpu_node_join_device_list_strategy": "envvar",
                        "container_toolkit_accept_envvar_when_unprivileged": True},
}


def _defaults() -> dict:
    merged: dict = {}
    for role in ROLES:
        merged.update(yaml.safe_load((REPO / "roles" / role / "defaults/main.yml").read_text()) or {})
    return merged


@pytest.fixture(scope="module")
def problems(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    defaults = _defaults()
    hosts = {name: {**defaults, **overrides} for name, overrides in CASES.items()}
    rendered = render_per_host(tmp_path_factory.mktemp("onboard_agreement"),
                               REPO / "playbooks/templates/strategy_problems.j2", hosts)
    return {name: json.loads(text) for name, text in rendered.items()}


@pytest.mark.parametrize("case", ["defaults", "lab", "envvar_accepted"])
def test_settings_that_agree_pass(problems: dict, case: str) -> None:
    assert problems[case] == []


def test_a_runtimeclass_containerd_needs_the_plugin_on_the_runtime_class(problems: dict) -> None:
    assert problems["runtimeclass_without_runtime_class"] == [
        "containerd_nvidia_mode is runtimeclass but gpu_node_join_runtime_class is false: the nvidia runtime is not "
        "the default, so pods get GPUs only through a RuntimeClass; set gpu_node_join_runtime_class=true"]


def test_a_runtime_class_needs_a_runtimeclass_containerd(problems: dict) -> None:
    assert problems["runtime_class_with_default_mode"] == [
        "containerd_nvidia_mode is default but gpu_node_join_runtime_class is true: "
        "set gpu_node_join_runtime_class=true only with containerd_nvidia_mode=runtimeclass"]


def test_the_envvar_strategy_needs_the_insecure_toolkit_setting(problems: dict) -> None:
    [problem] = problems["envvar_secure_toolkit"]
    assert problem.startswith("gpu_node_join_device_list_strategy=envvar needs "
                              "container_toolkit_accept_envvar_when_unprivileged=true")
