"""gpu_node_join's pods against the Pod Security Standards, rendered by Ansible from the role's own templates: the
smoke-test pod needs no more than baseline in every configuration, the device plugin needs privileged (hostPath,
SYS_ADMIN), and its namespace is labelled so."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from template_runner import render_per_host

from ansible_collections.gpufleet.node.plugins.module_utils._pod_security import baseline_problems

ROLE = Path(__file__).resolve().parents[2] / "roles/gpu_node_join"
# The role's defaults and internal variables, as a play of the role sees them (templated when a template reads them).
ROLE_VARIABLES = {**yaml.safe_load((ROLE / "defaults/main.yml").read_text()),
                  **yaml.safe_load((ROLE / "vars/main.yml").read_text()),
                  "gpu_node_join_node_name": "gpu-1", "__gpu_node_join_config_sha256": "0" * 64}

SMOKE_CASES = {
    "default": {"__gpu_node_join_smoke_resource": "nvidia.com/gpu"},
    "runtime_class": {"__gpu_node_join_smoke_resource": "nvidia.com/gpu", "gpu_node_join_runtime_class": True},
    "mig_mixed": {"__gpu_node_join_smoke_resource": "nvidia.com/mig-1g.10gb", "gpu_node_join_runtime_class": True},
}
PLUGIN = {"__plugin_dir": "/var/lib/kubelet/device-plugins", "__slug": "var-lib-kubelet-device-plugins",
          "__daemonset_name": "nvidia-device-plugin-var-lib-kubelet-device-plugins"}
PLUGIN_CASES = {
    "volume_mounts": {},
    "cdi_annotations": {"gpu_node_join_device_list_strategy": "cdi-annotations"},
    "envvar_without_mig": {"gpu_node_join_device_list_strategy": "envvar"},
}


def _render(tmp_path_factory, template: str, cases: dict[str, dict]) -> dict[str, dict]:
    hosts = {name: {**ROLE_VARIABLES, **variables} for name, variables in cases.items()}
    rendered = render_per_host(tmp_path_factory.mktemp(template.split(".")[0]), ROLE / "templates" / template, hosts)
    return {name: yaml.safe_load(text) for name, text in rendered.items()}


@pytest.fixture(scope="module")
def smoke_pods(tmp_path_factory) -> dict[str, dict]:
    return _render(tmp_path_factory, "smoke-pod.yml.j2", SMOKE_CASES)


@pytest.fixture(scope="module")
def plugin_daemonsets(tmp_path_factory) -> dict[str, dict]:
    return _render(tmp_path_factory, "daemonset.yml.j2", {name: {**PLUGIN, **case} for name, case in PLUGIN_CASES.items()})


@pytest.mark.parametrize("case", sorted(SMOKE_CASES))
def test_the_smoke_test_pod_needs_no_more_than_baseline(smoke_pods, case):
    pod = smoke_pods[case]
    assert pod["kind"] == "Pod" and pod["spec"]["containers"][0]["resources"]["limits"]
    assert baseline_problems(pod) == []


@pytest.mark.parametrize("case", sorted(PLUGIN_CASES))
def test_the_device_plugin_needs_privileged_for_its_host_directory(plugin_daemonsets, case):
    problems = baseline_problems(plugin_daemonsets[case]["spec"]["template"])
    assert problems[0] == "spec.volumes[0] (device-plugins) is a hostPath volume"
    assert ("spec.containers[0].securityContext.capabilities.add has SYS_ADMIN" in problems) == (case != "envvar_without_mig")


def test_the_plugins_namespace_is_labelled_with_the_level_the_plugin_needs(tmp_path_factory):
    objects = _render(tmp_path_factory, "cluster_objects.yml.j2", {"cluster": {
        "__gpu_node_join_plugin_targets": [], "__gpu_node_join_device_plugin_config": "version: v1\n"}})["cluster"]
    namespace = next(item for item in objects if item["kind"] == "Namespace")
    assert namespace["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "gpufleet.node",
        "pod-security.kubernetes.io/enforce": "privileged",
        "pod-security.kubernetes.io/audit": "privileged",
        "pod-security.kubernetes.io/warn": "privileged",
    }
