"""onboard.yml's check that the layers agree (runtime_strategy_problems in module_utils/_settings.py), with the roles'
own defaults: every disagreement is named before any host is changed, and the defaults agree."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.node.plugins.filter.runtime_layer import FilterModule
from ansible_collections.gpufleet.node.plugins.module_utils._settings import runtime_strategy_problems

REPO = Path(__file__).resolve().parents[2]
ROLES = ("container_toolkit", "containerd_nvidia", "gpu_node_join")
SETTINGS = ("gpu_node_join_device_list_strategy", "gpu_node_join_runtime_class", "containerd_nvidia_mode",
            "containerd_nvidia_cdi_enabled", "container_toolkit_accept_envvar_when_unprivileged",
            "container_toolkit_accept_devices_as_volume_mounts", "container_toolkit_runtime_mode",
            "container_toolkit_cdi_enabled")
STRATEGY = "gpu_node_join_device_list_strategy="

CASES: dict[str, dict] = {
    "defaults": {},
    "lab": {"containerd_nvidia_mode": "runtimeclass", "gpu_node_join_runtime_class": True},
    "runtimeclass_without_runtime_class": {"containerd_nvidia_mode": "runtimeclass"},
    "runtime_class_with_default_mode": {"gpu_node_join_runtime_class": True},
    "envvar_secure_toolkit": {"gpu_node_join_device_list_strategy": "envvar"},
    "envvar_accepted": {"gpu_node_join_device_list_strategy": "envvar",
                        "container_toolkit_accept_envvar_when_unprivileged": True},
    "mounts_with_envvar_accepted": {"container_toolkit_accept_envvar_when_unprivileged": "yes"},
    "mounts_refused": {"container_toolkit_accept_devices_as_volume_mounts": False},
    "mounts_in_cdi_mode": {"container_toolkit_runtime_mode": "cdi"},
    "cdi_annotations_alone": {"gpu_node_join_device_list_strategy": "cdi-annotations"},
    "cdi_annotations_complete": {"gpu_node_join_device_list_strategy": "cdi-annotations", "container_toolkit_runtime_mode": "cdi",
                                 "container_toolkit_cdi_enabled": True, "containerd_nvidia_cdi_enabled": True},
}


def _defaults() -> dict:
    merged: dict = {}
    for role in ROLES:
        merged.update(yaml.safe_load((REPO / "roles" / role / "defaults/main.yml").read_text()) or {})
    return {name: merged[name] for name in SETTINGS}


@pytest.fixture(scope="module")
def problems() -> dict[str, list[str]]:
    defaults = _defaults()
    return {name: runtime_strategy_problems({**defaults, **overrides}) for name, overrides in CASES.items()}


@pytest.mark.parametrize("case", ["defaults", "lab", "envvar_accepted", "cdi_annotations_complete"])
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
    assert problem.startswith(STRATEGY + "envvar needs container_toolkit_accept_envvar_when_unprivileged=true")


def test_another_strategy_refuses_the_insecure_toolkit_setting(problems: dict) -> None:
    [problem] = problems["mounts_with_envvar_accepted"]
    assert problem.startswith(STRATEGY + "volume-mounts is meant to keep GPUs from pods that set NVIDIA_VISIBLE_DEVICES")


@pytest.mark.parametrize("case, start", [
    ("mounts_refused", "volume-mounts needs container_toolkit_accept_devices_as_volume_mounts=true"),
    ("mounts_in_cdi_mode", "volume-mounts does not work with container_toolkit_runtime_mode=cdi"),
])
def test_the_volume_mounts_strategy_needs_the_runtime_to_read_them(problems: dict, case: str, start: str) -> None:
    [problem] = problems[case]
    assert problem.startswith(STRATEGY + start)


def test_cdi_annotations_need_cdi_in_every_layer(problems: dict) -> None:
    assert [problem.split(" (")[0] for problem in problems["cdi_annotations_alone"]] == [
        STRATEGY + "cdi-annotations needs container_toolkit_runtime_mode=cdi",
        STRATEGY + "cdi-annotations needs container_toolkit_cdi_enabled=true",
        STRATEGY + "cdi-annotations needs containerd_nvidia_cdi_enabled=true"]


def test_the_playbook_reaches_it_as_a_filter() -> None:
    assert FilterModule().filters()["runtime_strategy_problems"] is runtime_strategy_problems
