"""Another NVIDIA GPU stack in the cluster (module_utils/_coexistence.py): the GPU Operator's node labels and operands
(as NVIDIA's gpu-operator deploys them), and device plugin DaemonSets of NVIDIA's Helm chart, static manifest or
operator, told apart from gpufleet.node's own."""
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils._coexistence import operator_node_labels, other_gpu_daemonsets

NAMESPACE = "nvidia-device-plugin"


def _daemonset(namespace, name, labels=None, image="example/pause:1", node_selector=None, owners=None, template_labels=None):
    pod_spec = {"containers": [{"name": "c", "image": image}]}
    if node_selector is not None:
        pod_spec["nodeSelector"] = node_selector
    metadata = {"namespace": namespace, "name": name, "labels": labels or {}}
    if owners:
        metadata["ownerReferences"] = owners
    return {"metadata": metadata, "spec": {"template": {"metadata": {"labels": template_labels or {}}, "spec": pod_spec}}}


OWN = _daemonset(NAMESPACE, "nvidia-device-plugin-var-lib-kubelet-device-plugins",
                 {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/managed-by": "gpufleet.node"},
                 image="nvcr.io/nvidia/k8s-device-plugin:v0.17.1")
HELM = _daemonset("kube-system", "nvdp-nvidia-device-plugin",
                  {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": "nvdp",
                   "app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": "nvidia-device-plugin-0.17.1"},
                  image="nvcr.io/nvidia/k8s-device-plugin:v0.17.1")
STATIC = _daemonset("kube-system", "nvidia-device-plugin-daemonset", template_labels={"name": "nvidia-device-plugin-ds"},
                    image="registry.example:5000/mirror/nvidia/k8s-device-plugin@sha256:0123")
OPERATOR_TOOLKIT = _daemonset("gpu-operator", "nvidia-container-toolkit-daemonset", {"app": "nvidia-container-toolkit-daemonset"},
                              image="nvcr.io/nvidia/k8s/container-toolkit:v1.17.8-ubuntu20.04",
                              node_selector={"nvidia.com/gpu.deploy.container-toolkit": "true"},
                              owners=[{"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "name": "cluster-policy"}])
UNRELATED = _daemonset("kube-system", "kube-proxy", {"k8s-app": "kube-proxy"}, image="registry.k8s.io/kube-proxy:v1.30.0",
                       node_selector={"kubernetes.io/os": "linux"})


def test_the_roles_own_plugin_and_unrelated_daemonsets_are_no_other_stack():
    assert other_gpu_daemonsets([OWN, UNRELATED], NAMESPACE) == []
    assert other_gpu_daemonsets([], NAMESPACE) == [] and other_gpu_daemonsets(None, NAMESPACE) == []


def test_a_helm_installed_plugin_is_named_with_its_image_and_labels():
    assert other_gpu_daemonsets([OWN, HELM], NAMESPACE) == [
        "DaemonSet kube-system/nvdp-nvidia-device-plugin (another NVIDIA device plugin: image "
        "nvcr.io/nvidia/k8s-device-plugin:v0.17.1, label app.kubernetes.io/name=nvidia-device-plugin; labels "
        "app.kubernetes.io/instance=nvdp, app.kubernetes.io/managed-by=Helm, app.kubernetes.io/name=nvidia-device-plugin, "
        "helm.sh/chart=nvidia-device-plugin-0.17.1)"]


def test_the_static_manifest_from_a_mirror_is_found_by_its_image_and_pod_label():
    assert other_gpu_daemonsets([STATIC], NAMESPACE) == [
        "DaemonSet kube-system/nvidia-device-plugin-daemonset (another NVIDIA device plugin: image "
        "registry.example:5000/mirror/nvidia/k8s-device-plugin@sha256:0123, label name=nvidia-device-plugin-ds; labels none)"]


def test_an_operator_operand_is_named_with_its_owner_and_node_selector():
    assert other_gpu_daemonsets([OPERATOR_TOOLKIT], NAMESPACE) == [
        "DaemonSet gpu-operator/nvidia-container-toolkit-daemonset (a GPU Operator operand: owned by "
        "ClusterPolicy/cluster-policy, runs on nodes labelled nvidia.com/gpu.deploy.container-toolkit=true; labels "
        "app=nvidia-container-toolkit-daemonset)"]


def test_an_operand_is_found_by_its_node_selector_alone():
    operand = _daemonset("gpu-operator", "nvidia-dcgm-exporter", node_selector={"nvidia.com/gpu.deploy.dcgm-exporter": "true"})
    assert other_gpu_daemonsets([operand], NAMESPACE)[0].startswith(
        "DaemonSet gpu-operator/nvidia-dcgm-exporter (a GPU Operator operand: runs on nodes labelled "
        "nvidia.com/gpu.deploy.dcgm-exporter=true")


def test_the_roles_plugin_in_another_namespace_is_another_plugin():
    moved = _daemonset("old-namespace", OWN["metadata"]["name"], OWN["metadata"]["labels"], image="nvcr.io/nvidia/k8s-device-plugin:v0.16.0")
    assert [line.split(" (")[0] for line in other_gpu_daemonsets([OWN, moved], NAMESPACE)] == [
        "DaemonSet old-namespace/nvidia-device-plugin-var-lib-kubelet-device-plugins"]


def test_a_plugin_labelled_like_the_role_but_not_managed_by_it_is_another_plugin():
    lookalike = _daemonset(NAMESPACE, "nvidia-device-plugin", {"app.kubernetes.io/name": "nvidia-device-plugin"})
    assert len(other_gpu_daemonsets([lookalike], NAMESPACE)) == 1


def test_another_image_named_like_the_plugin_only_in_part_is_not_one():
    other = _daemonset("x", "y", image="example/k8s-device-plugin-exporter:1")
    assert other_gpu_daemonsets([other], NAMESPACE) == []


@pytest.mark.parametrize("labels, expected", [
    ({}, {}),
    (None, {}),
    ({"kubernetes.io/hostname": "gpu-1", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, {}),
    ({"nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/gpu.deploy.driver": "true", "nvidia.com/gpu.present": "true"},
     {"nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/gpu.deploy.driver": "true"}),
    # the operator's upgrade controller pauses an operand with this value: still the operator's
    ({"nvidia.com/gpu.deploy.device-plugin": "paused-for-driver-upgrade"},
     {"nvidia.com/gpu.deploy.device-plugin": "paused-for-driver-upgrade"}),
    # one operand turned off, the others still deployed
    ({"nvidia.com/gpu.deploy.device-plugin": "false", "nvidia.com/gpu.deploy.dcgm": "true"}, {"nvidia.com/gpu.deploy.dcgm": "true"}),
    # the whole node opted out: the operator removes its operands (and, in time, these labels)
    ({"nvidia.com/gpu.deploy.operands": "false", "nvidia.com/gpu.deploy.device-plugin": "true"}, {}),
])
def test_the_operator_manages_a_node_by_its_deploy_labels(labels, expected):
    assert operator_node_labels(labels) == expected
