"""gpu_node_join's pods against the Pod Security Standards, as the role's own functions make them
(module_utils/_gpu_node_join_manifests.py): the smoke-test pod needs no more than baseline in every configuration, the
device plugin needs privileged (hostPath, SYS_ADMIN), and its namespace is labelled so."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.node.plugins.module_utils import _gpu_node_join_manifests as manifests
from ansible_collections.gpufleet.node.plugins.module_utils._pod_security import baseline_problems

ROLE = Path(__file__).resolve().parents[2] / "roles/gpu_node_join"
DEFAULTS = yaml.safe_load((ROLE / "defaults/main.yml").read_text())
ROLE_VARS = yaml.safe_load((ROLE / "vars/main.yml").read_text())


def _settings(**overrides) -> dict:
    """The role's manifest settings (vars/main.yml's __gpu_node_join_manifest_settings) from its defaults."""
    settings = {
        "namespace": DEFAULTS["gpu_node_join_device_plugin_namespace"],
        "label_prefix": ROLE_VARS["__gpu_node_join_label_prefix"],
        "app_label": ROLE_VARS["__gpu_node_join_app_label"],
        "pause_label": ROLE_VARS["__gpu_node_join_pause_label"],
        "config_name": ROLE_VARS["__gpu_node_join_config_name"],
        "pod_security_level": ROLE_VARS["__gpu_node_join_pod_security_level"],
        "runtime_class": DEFAULTS["gpu_node_join_runtime_class"],
        "runtime_class_name": DEFAULTS["gpu_node_join_runtime_class_name"],
        "runtime_handler": DEFAULTS["gpu_node_join_runtime_handler"],
        "image": "{gpu_node_join_device_plugin_registry}/{gpu_node_join_device_plugin_image}:{gpu_node_join_device_plugin_version}".format(**DEFAULTS),
        "pull_policy": DEFAULTS["gpu_node_join_device_plugin_pull_policy"],
        "extra_env": DEFAULTS["gpu_node_join_device_plugin_extra_env"],
        "extra_volumes": DEFAULTS["gpu_node_join_device_plugin_extra_volumes"],
        "mig_strategy": DEFAULTS["gpu_node_join_mig_strategy"],
        "device_list_strategy": DEFAULTS["gpu_node_join_device_list_strategy"],
        "device_id_strategy": DEFAULTS["gpu_node_join_device_id_strategy"],
        "time_slicing_replicas": DEFAULTS["gpu_node_join_time_slicing_replicas"],
        "time_slicing_rename_by_default": DEFAULTS["gpu_node_join_time_slicing_rename_by_default"],
        "time_slicing_fail_requests_greater_than_one": DEFAULTS["gpu_node_join_time_slicing_fail_requests_greater_than_one"],
        "pool_labels": DEFAULTS["gpu_node_join_pool_labels"],
        "pool_taint": DEFAULTS["gpu_node_join_pool_taint"],
        "onboarding_taint": DEFAULTS["gpu_node_join_onboarding_taint"],
        "smoke_test_image": DEFAULTS["gpu_node_join_smoke_test_image"],
        "named_configs": DEFAULTS["gpu_node_join_device_plugin_named_configs"],
        "config_manager_api_server": DEFAULTS["gpu_node_join_device_plugin_api_server"],
    }
    return {**settings, **overrides}


SMOKE_CASES = {
    "default": ("nvidia.com/gpu", {}),
    "runtime_class": ("nvidia.com/gpu", {"runtime_class": True}),
    "mig_mixed": ("nvidia.com/mig-1g.10gb", {"runtime_class": True}),
}
PLUGIN = {"dir": "/var/lib/kubelet/device-plugins", "slug": "var-lib-kubelet-device-plugins"}
# (settings, whether some configuration runs a MIG strategy)
PLUGIN_CASES = {
    "volume_mounts": ({}, False),
    "cdi_annotations": ({"device_list_strategy": "cdi-annotations"}, False),
    "envvar_without_mig": ({"device_list_strategy": "envvar"}, False),
    "envvar_with_mig": ({"device_list_strategy": "envvar"}, True),
    "named_configurations": ({"named_configs": True}, False),
}


def test_the_settings_here_are_those_the_role_builds():
    assert set(_settings()) == set(ROLE_VARS["__gpu_node_join_manifest_settings"])


@pytest.mark.parametrize("case", sorted(SMOKE_CASES))
def test_the_smoke_test_pod_needs_no_more_than_baseline(case):
    resource, overrides = SMOKE_CASES[case]
    pod = manifests.smoke_pod("gpu-smoke-gpu-1", "gpu-1", resource, _settings(**overrides))
    assert pod["kind"] == "Pod" and pod["spec"]["containers"][0]["resources"]["limits"]
    assert baseline_problems(pod) == []


@pytest.mark.parametrize("case", sorted(PLUGIN_CASES))
def test_the_device_plugin_needs_privileged_for_its_host_directory(case):
    daemonset = manifests.daemonset(PLUGIN, "0" * 64, PLUGIN_CASES[case][1], _settings(**PLUGIN_CASES[case][0]))
    assert daemonset["metadata"]["name"] == "nvidia-device-plugin-var-lib-kubelet-device-plugins"
    problems = baseline_problems(daemonset["spec"]["template"])
    assert problems[0] == "spec.volumes[0] (device-plugins) is a hostPath volume"
    assert ("spec.containers[0].securityContext.capabilities.add has SYS_ADMIN" in problems) == (case != "envvar_without_mig")


def test_the_plugins_namespace_is_labelled_with_the_level_the_plugin_needs():
    objects = manifests.cluster_objects([], {"config.yaml": "version: v1\n"}, _settings())
    namespace = next(item for item in objects if item["kind"] == "Namespace")
    assert namespace["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "gpufleet.node",
        "pod-security.kubernetes.io/enforce": "privileged",
        "pod-security.kubernetes.io/audit": "privileged",
        "pod-security.kubernetes.io/warn": "privileged",
    }


def test_config_manager_needs_no_more_than_restricted_bar_its_namespace():
    """config-manager's containers add no capability, escalate no privilege and write only their emptyDir."""
    spec = manifests.daemonset(PLUGIN, "0" * 64, False, _settings(named_configs=True))["spec"]["template"]["spec"]
    for container in [*spec["initContainers"], spec["containers"][1]]:
        assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                                "capabilities": {"drop": ["ALL"]}}
