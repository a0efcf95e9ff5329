"""gpu_node_join's manifests and diagnosis (module_utils/_gpu_node_join_manifests.py): the device plugin's configuration
text, the smoke-test pod, the DaemonSet, the cluster-wide objects in apply order, and the message naming the layer to
look at."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.node.plugins.filter.gpu_node_join_manifests import (
    FilterModule,
    gpu_node_join_config_manager_access,
    gpu_node_join_diagnosis,
)
from ansible_collections.gpufleet.node.plugins.module_utils import _gpu_node_join_manifests as manifests

REPO = Path(__file__).resolve().parents[4]
ROLE_VARS = yaml.safe_load((REPO / "roles/gpu_node_join/vars/main.yml").read_text())

SETTINGS = {
    "namespace": "nvidia-device-plugin", "label_prefix": "gpufleet.io", "app_label": "nvidia-device-plugin",
    "pause_label": {"key": "gpufleet.io/device-plugin", "value": "paused-for-driver-upgrade"},
    "config_name": "nvidia-device-plugin-config", "pod_security_level": "privileged",
    "runtime_class": False, "runtime_class_name": "nvidia", "runtime_handler": "nvidia",
    "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1", "pull_policy": "IfNotPresent",
    "extra_env": {}, "extra_volumes": [],
    "mig_strategy": "none", "device_list_strategy": "volume-mounts", "device_id_strategy": "uuid",
    "time_slicing_replicas": 0, "time_slicing_rename_by_default": False, "time_slicing_fail_requests_greater_than_one": False,
    "named_configs": False, "config_manager_api_server": "",
    "pool_labels": {"node-role.kubernetes.io/gpu": "true"},
    "pool_taint": {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
    "onboarding_taint": {"key": "gpufleet.io/onboarding", "value": "in-progress", "effect": "NoSchedule"},
    "smoke_test_image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
}
TARGET = {"dir": "/var/lib/kubelet/device-plugins", "slug": "var-lib-kubelet-device-plugins"}
OTHER_TARGET = {"dir": "/srv/K8s_Root/device-plugins", "slug": "srv-K8s_Root-device-plugins"}
SHA = "0123456789abcdef" * 4


def _settings(**overrides) -> dict:
    return {**SETTINGS, **overrides}


def _container(daemonset: dict) -> dict:
    return daemonset["spec"]["template"]["spec"]["containers"][0]


def test_the_settings_here_are_those_the_role_builds():
    assert set(SETTINGS) == set(ROLE_VARS["__gpu_node_join_manifest_settings"])


def test_the_filters():
    assert FilterModule().filters() == {
        "gpu_node_join_device_plugin_config": manifests.device_plugin_config,
        "gpu_node_join_smoke_pod": manifests.smoke_pod,
        "gpu_node_join_cluster_objects": manifests.cluster_objects,
        "gpu_node_join_config_map_data": manifests.config_map_data,
        "gpu_node_join_shared_config": manifests.shared_config,
        "gpu_node_join_config_manager_access": gpu_node_join_config_manager_access,
        "gpu_node_join_diagnosis": gpu_node_join_diagnosis,
    }


def test_access_yml_creates_the_identity_the_daemonset_names():
    """playbooks/access.yml creates config-manager's identity from the same function the role applies it with."""
    objects = manifests.cluster_objects([TARGET], {"default": "x"}, NAMED)
    assert gpu_node_join_config_manager_access("nvidia-device-plugin") == objects[1:4]
    spec = objects[-1]["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == objects[1]["metadata"]["name"]


@pytest.mark.parametrize("name", sorted(FilterModule().filters()))
def test_every_filter_is_documented(name):
    documentation = yaml.safe_load((REPO / "plugins/filter" / f"{name}.yml").read_text())["DOCUMENTATION"]
    assert documentation["name"] == name


CONFIG_HEAD = """\
# NVIDIA device plugin configuration, managed by gpufleet.node.gpu_node_join.
version: v1
flags:
  migStrategy: {mig}
  failOnInitError: true
  plugin:
    deviceListStrategy: {strategy}
    deviceIDStrategy: {ids}
"""
SHARING = """\
sharing:
  timeSlicing:
    renameByDefault: {rename}
    failRequestsGreaterThanOne: {fail}
    resources:
      - name: nvidia.com/gpu
        replicas: {replicas}
"""


@pytest.mark.parametrize("overrides, sharing", [
    ({}, ""),
    ({"mig_strategy": "mixed", "device_list_strategy": "cdi-annotations", "device_id_strategy": "index"}, ""),
    ({"time_slicing_replicas": 2}, SHARING.format(rename="false", fail="false", replicas=2)),
    ({"time_slicing_replicas": 4, "time_slicing_rename_by_default": True}, SHARING.format(rename="true", fail="false", replicas=4)),
    ({"time_slicing_replicas": 8, "time_slicing_fail_requests_greater_than_one": True, "mig_strategy": "single"},
     SHARING.format(rename="false", fail="true", replicas=8)),
])
def test_the_configuration_text(overrides, sharing):
    settings = _settings(**overrides)
    head = CONFIG_HEAD.format(mig=settings["mig_strategy"], strategy=settings["device_list_strategy"], ids=settings["device_id_strategy"])
    text = manifests.device_plugin_config(settings)
    assert text == head + sharing
    assert yaml.safe_load(text)["flags"]["migStrategy"] == settings["mig_strategy"]


@pytest.mark.parametrize("strategy, mig_monitored, needed", [
    ("envvar", False, False),
    ("envvar", True, True),
    ("volume-mounts", False, True),
    ("cdi-annotations", False, True),
])
def test_the_plugin_needs_sys_admin_unless_envvar_without_mig(strategy, mig_monitored, needed):
    settings = _settings(device_list_strategy=strategy)
    assert manifests.plugin_needs_sys_admin(settings, mig_monitored) is needed
    capabilities = _container(manifests.daemonset(TARGET, SHA, mig_monitored, settings))["securityContext"]["capabilities"]
    assert capabilities == ({"drop": ["ALL"], "add": ["SYS_ADMIN"]} if needed else {"drop": ["ALL"]})


@pytest.mark.parametrize("text, strategy", [
    (CONFIG_HEAD.format(mig="mixed", strategy="envvar", ids="uuid"), "mixed"),
    (CONFIG_HEAD.format(mig="none", strategy="envvar", ids="uuid"), "none"),
    ("version: v1\nflags:\n  migStrategy: 'single'\n", "single"),
    ("version: v1\nflags:\n  failOnInitError: true\n", "none"),  # the plugin's default
    ("", "none"),
])
def test_the_mig_strategy_of_a_configuration(text, strategy):
    assert manifests.config_mig_strategy(text) == strategy


@pytest.mark.parametrize("strategies, monitored", [
    ({"config.yaml": "none"}, False),
    ({"config.yaml": "single"}, True),
    ({"default": "none", "dev": "none"}, False),
    ({"default": "none", "dev": "none", "a100-mig": "mixed"}, True),
])
def test_the_daemonset_is_ready_for_mig_when_any_configuration_uses_it(strategies, monitored):
    """One DaemonSet serves every node group: it gets the MIG monitor devices, and SYS_ADMIN under envvar, when any
    configuration of its ConfigMap runs a MIG strategy."""
    settings = _settings(device_list_strategy="envvar", named_configs=len(strategies) > 1)
    data = {name: manifests.device_plugin_config(_settings(mig_strategy=mig)) for name, mig in strategies.items()}
    assert manifests.mig_monitored(data) is monitored
    daemonset = next(item for item in manifests.cluster_objects([TARGET], data, settings) if item["kind"] == "DaemonSet")
    container = _container(daemonset)
    assert ({"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"} in container["env"]) is monitored
    assert ("add" in container["securityContext"]["capabilities"]) is monitored


@pytest.mark.parametrize("runtime_class", [False, True])
@pytest.mark.parametrize("resource", ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"])
def test_the_smoke_test_pod(runtime_class, resource):
    pod = manifests.smoke_pod("gpu-smoke-gpu-1", "GPU-1", resource, _settings(runtime_class=runtime_class))
    assert pod["metadata"] == {
        "generateName": "gpu-smoke-gpu-1-", "namespace": "nvidia-device-plugin",
        "labels": {"app.kubernetes.io/name": "gpu-smoke-test", "app.kubernetes.io/managed-by": "gpufleet.node",
                   "gpufleet.io/smoke-node": "gpu-smoke-gpu-1"}}
    spec = pod["spec"]
    assert spec["nodeSelector"] == {"kubernetes.io/hostname": "GPU-1"}
    assert ("runtimeClassName" in spec) is runtime_class and spec.get("runtimeClassName", "nvidia") == "nvidia"
    assert [toleration["key"] for toleration in spec["tolerations"]] == [
        "nvidia.com/gpu", "gpufleet.io/onboarding", "node.kubernetes.io/unschedulable"]
    container = spec["containers"][0]
    assert container["image"] == SETTINGS["smoke_test_image"] and container["command"] == ["nvidia-smi", "-L"]
    assert container["resources"] == {"limits": {resource: 1}}


@pytest.mark.parametrize("slug, name", [
    ("var-lib-kubelet-device-plugins", "nvidia-device-plugin-var-lib-kubelet-device-plugins"),
    ("srv-K8s_Root-device-plugins", "nvidia-device-plugin-srv-k8s-root-device-plugins"),
])
def test_the_daemonset_is_named_after_its_directory(slug, name):
    assert manifests.daemonset_name(slug) == name


def test_the_daemonset_of_a_target():
    settings = _settings(pool_labels={"node-role.kubernetes.io/gpu": "true", "gpufleet.io/device-plugin-dir": "elsewhere"})
    daemonset = manifests.daemonset(OTHER_TARGET, SHA, False, settings)
    assert daemonset["metadata"]["name"] == "nvidia-device-plugin-srv-k8s-root-device-plugins"
    labels = {"app.kubernetes.io/name": "nvidia-device-plugin", "gpufleet.io/device-plugin-dir": "srv-K8s_Root-device-plugins"}
    assert daemonset["spec"]["selector"] == {"matchLabels": labels}
    template = daemonset["spec"]["template"]
    assert template["metadata"] == {"labels": labels, "annotations": {"gpufleet.io/config-sha256": SHA}}
    spec = template["spec"]
    assert spec["nodeSelector"] == {"node-role.kubernetes.io/gpu": "true", "gpufleet.io/device-plugin-dir": "srv-K8s_Root-device-plugins"}
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "gpufleet.io/device-plugin", "operator": "NotIn", "values": ["paused-for-driver-upgrade"]}]}]
    assert spec["volumes"][0] == {"name": "device-plugins", "hostPath": {"path": "/srv/K8s_Root/device-plugins", "type": "Directory"}}
    assert "runtimeClassName" not in spec
    container = _container(daemonset)
    assert container["image"] == SETTINGS["image"] and container["imagePullPolicy"] == "IfNotPresent"
    assert container["volumeMounts"][0] == {"name": "device-plugins", "mountPath": "/var/lib/kubelet/device-plugins"}


@pytest.mark.parametrize("mig_monitored, extra_env, names", [
    (False, {}, ["CONFIG_FILE", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"]),
    (True, {}, ["CONFIG_FILE", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_MIG_MONITOR_DEVICES"]),
    (False, {"FOO": "bar", "COUNT": 5, "FLAG": True},
     ["CONFIG_FILE", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "FOO", "COUNT", "FLAG"]),
])
def test_the_plugins_environment(mig_monitored, extra_env, names):
    env = _container(manifests.daemonset(TARGET, SHA, mig_monitored, _settings(extra_env=extra_env)))["env"]
    assert [variable["name"] for variable in env] == names
    assert all(isinstance(variable["value"], str) for variable in env)
    if extra_env:  # strings, as the API wants them
        assert env[3:] == [{"name": "FOO", "value": "bar"}, {"name": "COUNT", "value": "5"}, {"name": "FLAG", "value": "True"}]


@pytest.mark.parametrize("strategy, extra_volumes, mounts, volumes", [
    ("volume-mounts", [], ["device-plugins", "config"], ["device-plugins", "config"]),
    ("cdi-annotations", [], ["device-plugins", "config", "cdi-root"], ["device-plugins", "config", "cdi-root"]),
    ("cdi-annotations", [{"name": "host-lib", "host_path": "/usr/lib", "mount_path": "/host/lib"}],
     ["device-plugins", "config", "cdi-root", "host-lib"], ["device-plugins", "config", "cdi-root", "host-lib"]),
])
def test_the_plugins_volumes(strategy, extra_volumes, mounts, volumes):
    daemonset = manifests.daemonset(TARGET, SHA, False, _settings(device_list_strategy=strategy, extra_volumes=extra_volumes))
    spec = daemonset["spec"]["template"]["spec"]
    assert [mount["name"] for mount in _container(daemonset)["volumeMounts"]] == mounts
    assert [volume["name"] for volume in spec["volumes"]] == volumes
    if strategy == "cdi-annotations":
        assert {"name": "cdi-root", "hostPath": {"path": "/var/run/cdi", "type": "DirectoryOrCreate"}} in spec["volumes"]
    if extra_volumes:
        assert _container(daemonset)["volumeMounts"][-1] == {"name": "host-lib", "mountPath": "/host/lib", "readOnly": True}
        assert spec["volumes"][-1] == {"name": "host-lib", "hostPath": {"path": "/usr/lib", "type": "Directory"}}


@pytest.mark.parametrize("runtime_class, targets, kinds", [
    (False, [], ["Namespace", "ConfigMap"]),
    (True, [TARGET], ["Namespace", "RuntimeClass", "ConfigMap", "DaemonSet"]),
    (False, [OTHER_TARGET, TARGET], ["Namespace", "ConfigMap", "DaemonSet", "DaemonSet"]),
])
def test_the_cluster_objects_in_apply_order(runtime_class, targets, kinds):
    config = manifests.device_plugin_config(SETTINGS)
    objects = manifests.cluster_objects(targets, {"config.yaml": config}, _settings(runtime_class=runtime_class))
    assert [item["kind"] for item in objects] == kinds
    config_map = next(item for item in objects if item["kind"] == "ConfigMap")
    assert config_map["metadata"]["name"] == "nvidia-device-plugin-config" and config_map["data"] == {"config.yaml": config}
    daemonsets = [item for item in objects if item["kind"] == "DaemonSet"]
    assert [item["spec"]["template"]["spec"]["volumes"][0]["hostPath"]["path"] for item in daemonsets] == [target["dir"] for target in targets]
    for item in daemonsets:
        assert item["spec"]["template"]["metadata"]["annotations"] == {
            "gpufleet.io/config-sha256": hashlib.sha256(config.encode()).hexdigest()}
    if runtime_class:
        assert objects[1] == {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                              "metadata": {"name": "nvidia", "labels": {"app.kubernetes.io/managed-by": "gpufleet.node"}},
                              "handler": "nvidia"}


NAMED = _settings(named_configs=True)
SLICED = _settings(named_configs=True, time_slicing_replicas=2, time_slicing_rename_by_default=True)


def test_without_named_configurations_the_one_configuration_is_every_nodes():
    sliced = _settings(time_slicing_replicas=2)
    assert manifests.shared_config(sliced) == manifests.device_plugin_config(sliced)
    assert "timeSlicing" in manifests.shared_config(sliced)
    assert manifests.config_map_data({"": "ignored"}, {"config.yaml": "old"}, {}, sliced) == {
        "config.yaml": manifests.device_plugin_config(sliced)}


def test_with_named_configurations_the_shared_one_never_slices_nor_serves_mig():
    """Every host knows the shared configuration (and the DaemonSet's hash) from the settings the fleet agrees on,
    whatever its own time-slicing and MIG strategy are."""
    partitioned = _settings(named_configs=True, mig_strategy="single")
    assert (manifests.shared_config(SLICED) == manifests.shared_config(NAMED) == manifests.shared_config(partitioned)
            == manifests.device_plugin_config(SETTINGS))
    assert "timeSlicing" in manifests.device_plugin_config(SLICED)
    assert manifests.config_mig_strategy(manifests.device_plugin_config(partitioned)) == "single"


def test_the_configmap_keeps_what_nodes_outside_the_run_select_and_drops_the_rest():
    live = {"default": "old default", "dev": "dev text", "gone": "nobody selects it", "config.yaml": "before named"}
    data = manifests.config_map_data({"": "run shared", "team-a": "team-a text"}, live, {"gpu-9": "dev"}, NAMED)
    assert data == {"default": manifests.shared_config(NAMED), "dev": "dev text", "team-a": "team-a text"}


def test_the_runs_text_of_a_named_configuration_wins_over_the_clusters():
    data = manifests.config_map_data({"dev": "new"}, {"default": "x", "dev": "old"}, {"gpu-9": "dev"}, NAMED)
    assert data["dev"] == "new"


def test_named_configurations_run_nvidias_config_manager_beside_the_plugin():
    objects = manifests.cluster_objects([TARGET], {"default": "shared text", "dev": "dev text"}, NAMED)
    assert [item["kind"] for item in objects] == [
        "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet"]
    account, role, binding, config_map, daemonset = objects[1:]
    assert account["metadata"] == {"name": "nvidia-device-plugin-config-manager", "namespace": "nvidia-device-plugin",
                                   "labels": {"app.kubernetes.io/managed-by": "gpufleet.node"}}
    assert account["automountServiceAccountToken"] is False
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "nvidia-device-plugin-config-manager",
                                    "namespace": "nvidia-device-plugin"}]
    assert config_map["data"] == {"default": "shared text", "dev": "dev text"}
    spec = daemonset["spec"]["template"]["spec"]
    assert daemonset["spec"]["template"]["metadata"]["annotations"] == {
        "gpufleet.io/config-sha256": hashlib.sha256(b"shared text").hexdigest()}
    assert spec["serviceAccountName"] == "nvidia-device-plugin-config-manager"
    assert spec["automountServiceAccountToken"] is False and spec["shareProcessNamespace"] is True
    assert [c["name"] for c in spec["initContainers"]] == ["nvidia-device-plugin-init"]
    assert [c["name"] for c in spec["containers"]] == ["nvidia-device-plugin-ctr", "nvidia-device-plugin-sidecar"]
    plugin, sidecar = spec["containers"]
    init = spec["initContainers"][0]
    assert {"name": "CONFIG_FILE", "value": "/config/config.yaml"} in plugin["env"]
    assert "config-manager-token" not in [mount["name"] for mount in plugin["volumeMounts"]]
    for container, oneshot, signal in ((init, "true", "false"), (sidecar, "false", "true")):
        env = {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}
        assert container["command"] == ["config-manager"] and container["image"] == plugin["image"]
        assert env["ONESHOT"] == oneshot and env["SEND_SIGNAL"] == signal
        assert env["NODE_LABEL"] == "nvidia.com/device-plugin.config" and env["DEFAULT_CONFIG"] == "default"
        assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
        assert env["CONFIG_FILE_SRCDIR"] == "/available-configs" and env["CONFIG_FILE_DST"] == "/config/config.yaml"
        assert env["NVIDIA_VISIBLE_DEVICES"] == "void" and "KUBERNETES_SERVICE_HOST" not in env
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert {"name": "config-manager-token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "readOnly": True} in container["volumeMounts"]
    assert {c["name"]: {e["name"]: e["value"] for e in c["env"] if "value" in e}["PROCESS_TO_SIGNAL"]
            for c in (init, sidecar)} == {"nvidia-device-plugin-init": "", "nvidia-device-plugin-sidecar": "nvidia-device-plugin"}
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    assert volumes["available-configs"] == {"name": "available-configs", "configMap": {"name": "nvidia-device-plugin-config"}}
    assert volumes["selected-config"] == {"name": "selected-config", "emptyDir": {}}
    sources = volumes["config-manager-token"]["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["path"] == "token"
    assert sources[1]["configMap"]["name"] == "kube-root-ca.crt"


@pytest.mark.parametrize("api_server, host, port", [
    ("10.0.0.2:6443", "10.0.0.2", "6443"),
    ("api.example.org:443", "api.example.org", "443"),
    ("[fd00::2]:6443", "fd00::2", "6443"),
])
def test_config_manager_can_be_given_the_api_server(api_server, host, port):
    daemonset = manifests.daemonset(TARGET, SHA, False, _settings(named_configs=True, config_manager_api_server=api_server))
    for container in daemonset["spec"]["template"]["spec"]["containers"][1:]:
        env = {item["name"]: item.get("value") for item in container["env"]}
        assert (env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]) == (host, port)


def test_without_named_configurations_no_identity_and_no_config_manager():
    daemonset = manifests.daemonset(TARGET, SHA, False, SETTINGS)
    spec = daemonset["spec"]["template"]["spec"]
    assert "serviceAccountName" not in spec and "initContainers" not in spec and len(spec["containers"]) == 1
    assert {"name": "CONFIG_FILE", "value": "/etc/nvidia-device-plugin/config.yaml"} in _container(daemonset)["env"]


WAITED = {"node_name": "gpu-1", "timeout": 300, "expected": {"nvidia.com/gpu": 8}, "plugin_dir": "/var/lib/kubelet/device-plugins",
          "kubelet_root_dir": "/var/lib/kubelet", "config_sha256": SHA}
NODE = {"resources": [{"status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "0", "nvidiaXcom/odd": "1"}}}]}
POD = {"metadata": {"name": "nvidia-device-plugin-abcde"},
       "spec": {"containers": [{"name": "nvidia-device-plugin-ctr",
                                "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}}]},
       "status": {"phase": "Running", "containerStatuses": [
           {"name": "nvidia-device-plugin-ctr", "ready": False, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}
LOG = {"log_lines": ["I0101 starting", "E0101 could not load NVML"]}
SKIPPED = {"skipped": True, "changed": False}
HEAD = ("gpu-1 did not show its GPUs within 300s; it keeps the taint gpufleet.io/onboarding.\n"
        'Expected: {"nvidia.com/gpu": 8}; Allocatable: {"nvidia.com/gpu": "0", "nvidiaXcom/odd": "1"}.\n')
POD_LINE = ('Device plugin pod nvidia-device-plugin-abcde: phase Running, container nvidia-device-plugin-ctr ready=False '
            'state={"waiting": {"reason": "CrashLoopBackOff"}}.\n')
NO_PODS = HEAD + (
    "Layer: device plugin scheduling. No device plugin pod was created on the node: check that the DaemonSet's nodeSelector\n"
    '({"node-role.kubernetes.io/gpu": "true"}) matches the node\'s labels and that it tolerates every NoSchedule taint the node carries.')
CURRENT = HEAD + POD_LINE + (
    "Layer: kubelet device plugin registration. The plugin runs but the kubelet shows no GPUs from it: the plugin mounts\n"
    "/var/lib/kubelet/device-plugins, where the kubelet (--root-dir /var/lib/kubelet) serves kubelet.sock;\n"
    "check the plugin's log for its registration with the kubelet and for NVML errors (RuntimeClass none (default runtime)).\n"
    "Last log lines: I0101 starting | E0101 could not load NVML")
NOT_CURRENT = HEAD + POD_LINE + (
    "Layer: device plugin. No pod of the current template (image nvcr.io/nvidia/k8s-device-plugin:v0.17.1, configuration\n"
    "0123456789ab) is Ready on the node: an image that cannot be pulled, a rolling update stuck on another node, a\n"
    "missing host directory, or a plugin that cannot initialise NVML because the container runtime gave its own container no GPU\n"
    "(RuntimeClass none (default runtime); device-list strategy\n"
    "volume-mounts; the plugin runs with CAP_SYS_ADMIN\n"
    "and NVIDIA_VISIBLE_DEVICES=all, which the runtime honours only for a container it treats as privileged unless\n"
    "accept-nvidia-visible-devices-envvar-when-unprivileged is true).\n"
    "Last log lines: I0101 starting | E0101 could not load NVML")


@pytest.mark.parametrize("pods, log, current, message", [
    ([], SKIPPED, False, NO_PODS),
    ([POD], LOG, True, CURRENT),
    ([POD], LOG, False, NOT_CURRENT),
], ids=["no_pods", "current_pod", "pod_not_current"])
def test_the_diagnosis_names_the_layer(pods, log, current, message):
    assert gpu_node_join_diagnosis({"resources": pods}, NODE, log, current, WAITED, SETTINGS) == message


def _pod_adding(capabilities):
    return {**POD, "spec": {"containers": [
        {"name": "nvidia-device-plugin-sidecar", "securityContext": {"capabilities": {"drop": ["ALL"]}}},
        {"name": "nvidia-device-plugin-ctr", "securityContext": {"capabilities": {"drop": ["ALL"], "add": capabilities}}}]}}


@pytest.mark.parametrize("overrides, pod, part", [
    ({"runtime_class": True}, POD, "(RuntimeClass nvidia; device-list strategy\n"),
    ({"device_list_strategy": "envvar"}, _pod_adding([]), "the plugin runs with no capabilities\n"),
    # what the pod runs with, not what this node's settings ask: another group's MIG strategy gave the DaemonSet SYS_ADMIN
    ({"device_list_strategy": "envvar"}, _pod_adding(["SYS_ADMIN"]), "the plugin runs with CAP_SYS_ADMIN\n"),
    ({}, {key: value for key, value in POD.items() if key != "spec"}, "the plugin runs with capabilities not read\n"),
])
def test_the_diagnosis_of_a_plugin_not_current_names_its_settings(overrides, pod, part):
    assert part in gpu_node_join_diagnosis({"resources": [pod]}, NODE, LOG, False, WAITED, _settings(**overrides))


def test_the_diagnosis_of_a_current_plugin_names_the_runtime_class():
    message = gpu_node_join_diagnosis({"resources": [POD]}, NODE, LOG, True, WAITED, _settings(runtime_class=True))
    assert "and for NVML errors (RuntimeClass nvidia).\n" in message


@pytest.mark.parametrize("node, log, allocatable, last", [
    ({"resources": []}, {"failed": True, "msg": "no log"}, "{}", "Last log lines: (none)"),
    ({"resources": [{"metadata": {"name": "gpu-1"}}]}, {"log_lines": []}, "{}", "Last log lines:"),
    ({"resources": [{"status": {"allocatable": {"nvidia.com/mig-1g.10gb": "7", "cpu": "8"}}}]}, {"log_lines": ["a | b"]},
     '{"nvidia.com/mig-1g.10gb": "7"}', "Last log lines: a | b"),
])
def test_the_diagnosis_of_what_could_not_be_read(node, log, allocatable, last):
    message = gpu_node_join_diagnosis({"resources": [{"metadata": {"name": "p"}, "status": {}}]}, node, log, True, WAITED, SETTINGS)
    assert f"; Allocatable: {allocatable}.\n" in message
    assert "\nDevice plugin pod p: phase ?.\n" in message
    assert message.endswith("\n" + last)
