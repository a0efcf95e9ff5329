"""gpu_node_join's judgements (module_utils/_gpu_node_join.py): a node's tier, driver and runtime, the resources its
Node must show, its device plugin pod, whether it is onboarded already, the smoke pod's GPUs, and check.yml's checks."""
from __future__ import annotations

import base64
import datetime
import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.node.plugins.filter.gpu_node_join import FilterModule, gpu_node_join_checks
from ansible_collections.gpufleet.node.plugins.module_utils import _gpu_node_join as judge

REPO = Path(__file__).resolve().parents[4]
ROLE_VARS = yaml.safe_load((REPO / "roles/gpu_node_join/vars/main.yml").read_text())
SETTLE = ROLE_VARS["__gpu_node_join_plugin_settle_seconds"]
TOOLKIT = "/etc/nvidia-container-runtime/config.toml"
H100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0", "memory_total_mib": 81559, "mig_mode": "Disabled"}


def _gpu(index: int, mig: list[str] | None = None, **fields) -> dict:
    gpu = {**H100, "index": index, "uuid": f"GPU-{index}", **fields}
    if mig is not None:
        gpu["mig_mode"] = "Enabled"
        gpu["mig_devices"] = [{"index": i, "profile": profile, "uuid": f"MIG-{index}-{i}"} for i, profile in enumerate(mig)]
    return gpu


TIERS = [{"tier": "h100-large", "model_regex": "H100", "min_memory_mib": 80000},
         {"tier": "h100", "model_regex": "H100"},
         {"tier": "a100", "model_regex": "A100"}]


@pytest.mark.parametrize("gpus, tier", [
    ([H100], "h100-large"),
    ([{**H100, "memory_total_mib": 40000}], "h100"),
    ([{**H100, "memory_total_mib": None}], "h100"),
    ([{**H100, "name": "NVIDIA A100-SXM4-40GB"}, H100], "a100"),
    ([{**H100, "name": "Tesla T4"}], ""),
    ([], ""),
])
def test_tier_is_the_first_rule_the_first_gpu_meets(gpus: list, tier: str) -> None:
    assert judge.gpu_tier(gpus, TIERS) == tier


@pytest.mark.parametrize("driver, expected, problem", [
    ({"kernel_module_version": "535.261.03", "userspace_version": "535.261.03"}, "535.261.03", ""),
    ({"kernel_module_version": "535.261.03", "userspace_version": "535.261.03"}, "", ""),
    ({"kernel_module_version": "535.261.03"}, "", ""),
    ({"kernel_module_version": "", "userspace_version": "535.261.03"}, "",
     "no NVIDIA kernel module is loaded (user space 535.261.03 is installed): load it (modprobe nvidia nvidia_uvm) or "
     "reboot the node"),
    ({}, "", "no NVIDIA kernel module is loaded: load it (modprobe nvidia nvidia_uvm) or reboot the node"),
    ({"kernel_module_version": "535.216.03", "userspace_version": "535.261.03"}, "535.261.03",
     "the loaded kernel module runs driver 535.216.03 but the installed user space is 535.261.03 (a driver/library "
     "mismatch: NVML and every GPU container fail): reload the NVIDIA kernel modules (gpufleet.node.nvidia_driver with "
     "nvidia_driver_module_reload=auto, once no GPU process holds them) or reboot the node"),
    ({"kernel_module_version": "535.216.03", "userspace_version": "535.216.03"}, "535.261.03",
     "the node runs driver 535.216.03, not gpu_node_join_expected_driver_version=535.261.03: install it with "
     "gpufleet.node.nvidia_driver, then reload the modules or reboot"),
])
def test_driver_problem(driver: dict, expected: str, problem: str) -> None:
    assert judge.driver_problem(driver, expected) == problem


SECURE = """accept-nvidia-visible-devices-as-volume-mounts = true
accept-nvidia-visible-devices-envvar-when-unprivileged = false

[nvidia-container-cli]
ldconfig = "@/sbin/ldconfig"

[nvidia-container-runtime]
log-level = "info"
mode = "%s"
"""


@pytest.mark.parametrize("text, expected", [
    ("", {"envvar": "true", "mounts": "false", "mode": "auto"}),
    (SECURE % "legacy", {"envvar": "false", "mounts": "true", "mode": "legacy"}),
    (SECURE % "cdi", {"envvar": "false", "mounts": "true", "mode": "cdi"}),
    # a key of another table is not the top-level key; mode is read from [nvidia-container-runtime] only
    ('[nvidia-container-cli]\naccept-nvidia-visible-devices-as-volume-mounts = true\nmode = "cdi"\n',
     {"envvar": "true", "mounts": "false", "mode": "auto"}),
    ('[nvidia-container-runtime]\nmode = "jit-cdi"\n\n[nvidia-container-runtime.modes.cdi]\nmode = "x"\n',
     {"envvar": "true", "mounts": "false", "mode": "jit-cdi"}),
])
def test_toolkit_device_settings(text: str, expected: dict) -> None:
    assert judge.toolkit_device_settings(text) == expected


@pytest.mark.parametrize("text, strategy, fragment", [
    (None, "volume-mounts", f"{TOOLKIT} is missing: install the NVIDIA container toolkit first"),
    (SECURE % "legacy", "volume-mounts", None),
    (SECURE % "auto", "volume-mounts", None),
    (SECURE % "cdi", "volume-mounts", "the runtime runs in mode cdi"),
    (SECURE.replace("mounts = true", "mounts = false") % "auto", "volume-mounts",
     "accept-nvidia-visible-devices-as-volume-mounts = false in " + TOOLKIT),
    ("", "volume-mounts", "accept-nvidia-visible-devices-as-volume-mounts = false"),
    (SECURE % "auto", "envvar", "accept-nvidia-visible-devices-envvar-when-unprivileged = false in " + TOOLKIT),
    ("", "envvar", None),
    (SECURE % "auto", "cdi-annotations", "the runtime runs in mode auto"),
    (SECURE % "cdi", "cdi-annotations", None),
])
def test_runtime_problems(text: str | None, strategy: str, fragment: str | None) -> None:
    problems = judge.runtime_problems(text, TOOLKIT, strategy)
    if fragment is None:
        assert problems == []
    else:
        assert len(problems) == 1 and fragment in problems[0]


@pytest.mark.parametrize("gpus, strategy, replicas, resource, expected", [
    ([_gpu(0), _gpu(1)], "none", 1, "nvidia.com/gpu", {"nvidia.com/gpu": 2}),
    ([_gpu(0), _gpu(1)], "none", 4, "nvidia.com/gpu.shared", {"nvidia.com/gpu.shared": 8}),
    ([_gpu(0)], "none", 0, "nvidia.com/gpu", {"nvidia.com/gpu": 1}),
    ([_gpu(0, ["1g.10gb", "1g.10gb"]), _gpu(1)], "none", 1, "nvidia.com/gpu", {"nvidia.com/gpu": 2}),
    ([_gpu(0, ["1g.10gb", "1g.10gb", "1g.10gb"])], "single", 1, "nvidia.com/gpu", {"nvidia.com/gpu": 3}),
    ([_gpu(0, ["3g.40gb", "1g.10gb", "1g.10gb"]), _gpu(1)], "mixed", 1, "nvidia.com/gpu",
     {"nvidia.com/gpu": 1, "nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-1g.10gb": 2}),
    ([_gpu(0, ["3g.40gb"])], "mixed", 1, "nvidia.com/gpu", {"nvidia.com/mig-3g.40gb": 1}),
    # MIG enabled with no device yet counts as a whole GPU
    ([_gpu(0, [])], "mixed", 1, "nvidia.com/gpu", {"nvidia.com/gpu": 1}),
    ([], "none", 1, "nvidia.com/gpu", {}),
])
def test_expected_resources(gpus: list, strategy: str, replicas: int, resource: str, expected: dict) -> None:
    assert judge.expected_resources(gpus, strategy, replicas, resource) == expected


NOW = datetime.datetime(2026, 12, 6, 12, 0, 0)
IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.4"
SHA = "4700d1d89eb4"
TEMPLATE = {"image": IMAGE, "config_annotation": "gpufleet.io/config-sha256", "config_sha256": SHA,
            "settle_seconds": str(SETTLE)}


def _pod(ready_for: float | None = SETTLE + 60, image: str = IMAGE, sha: str = SHA, deleting: bool = False,
         transition: bool = True, name: str = "plugin") -> dict:
    """A plugin pod whose Ready condition turned true ready_for seconds before NOW (None: not Ready)."""
    condition = {"type": "Ready", "status": "True" if ready_for is not None else "False"}
    if transition and ready_for is not None:
        condition["lastTransitionTime"] = (NOW - datetime.timedelta(seconds=ready_for)).strftime("%Y-%m-%dT%H:%M:%SZ")
    metadata = {"name": name, "annotations": {"gpufleet.io/config-sha256": sha}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata, "spec": {"containers": [{"image": image}]},
            "status": {"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}, condition]}}


@pytest.mark.parametrize("pods, current", [
    ([_pod()], True),
    ([_pod(ready_for=SETTLE)], True),
    ([_pod(ready_for=SETTLE - 1)], False),
    ([_pod(transition=False)], True),
    ([_pod(ready_for=None)], False),
    ([_pod(sha="0000")], False),
    ([_pod(image="nvcr.io/nvidia/k8s-device-plugin:v0.16.0")], False),
    ([_pod(deleting=True)], False),
    ([_pod(sha="0000"), _pod()], True),
    ([], False),
], ids=["ready_long_enough", "ready_exactly_the_settling_time", "ready_a_moment", "ready_without_transition_time",
        "not_ready", "other_configuration", "other_image", "deleting", "an_old_pod_and_a_settled_current_one", "no_pod"])
def test_plugin_pod_current(pods: list, current: bool) -> None:
    assert judge.plugin_pod_current(pods, TEMPLATE, now=NOW) is current


def test_plugin_pod_current_reads_the_controllers_clock() -> None:
    """Without ``now``, a pod Ready since an hour ago has settled and one Ready from an hour ahead has not."""
    ahead = (datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - NOW).total_seconds()
    assert judge.plugin_pod_current([_pod(ready_for=3600 - ahead)], TEMPLATE)
    assert not judge.plugin_pod_current([_pod(ready_for=-3600 - ahead)], TEMPLATE)


def test_the_settling_time_outlasts_the_kubelets_status_period() -> None:
    assert SETTLE > 10


def _node(labels: dict | None = None, taints: list | None = None, capacity: dict | None = None,
          allocatable: dict | None = None, annotations: dict | None = None, name: str = "gpu-1") -> dict:
    return {"metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
            "spec": {"taints": taints} if taints is not None else {},
            "status": {"capacity": capacity or {}, "allocatable": allocatable if allocatable is not None else capacity or {}}}


@pytest.mark.parametrize("node, expected, shown", [
    (_node(capacity={"nvidia.com/gpu": "2"}), {"nvidia.com/gpu": 2}, True),
    (_node(capacity={"nvidia.com/gpu": "2"}, allocatable={"nvidia.com/gpu": "1"}), {"nvidia.com/gpu": 2}, False),
    (_node(capacity={"nvidia.com/gpu": "8"}), {"nvidia.com/gpu": 2}, False),
    (_node(capacity={"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "2"}),
     {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 2}, True),
    (_node(capacity={"nvidia.com/gpu": "1"}), {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 2}, False),
    (_node(), {}, False),
    ({}, {"nvidia.com/gpu": 1}, False),
])
def test_gpus_shown(node: dict, expected: dict, shown: bool) -> None:
    assert judge.gpus_shown(node, expected) is shown


POOL_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
ONBOARDING = {"key": "gpufleet.io/onboarding", "value": "in-progress", "effect": "NoSchedule"}
DESIRED = {"gpufleet.io/gpu-pool": "true", "gpufleet.io/nvidia-driver": "535.261.03"}
GPUS = {"nvidia.com/gpu": 2}
ONBOARDED = _node(labels={**DESIRED, "kubernetes.io/hostname": "gpu-1"}, taints=[POOL_TAINT], capacity={"nvidia.com/gpu": "2"})


@pytest.mark.parametrize("node, problem, onboarded", [
    (ONBOARDED, "", True),
    (ONBOARDED, "no NVIDIA kernel module is loaded", False),
    ({**ONBOARDED, "metadata": {"labels": {**DESIRED, "gpufleet.io/nvidia-driver": "535.216.03"}}}, "", False),
    ({**ONBOARDED, "metadata": {"labels": {"gpufleet.io/gpu-pool": "true"}}}, "", False),
    ({**ONBOARDED, "spec": {}}, "", False),
    ({**ONBOARDED, "spec": {"taints": [{**POOL_TAINT, "value": "other"}]}}, "", False),
    ({**ONBOARDED, "spec": {"taints": [{**POOL_TAINT, "effect": "NoExecute"}]}}, "", False),
    ({**ONBOARDED, "spec": {"taints": [POOL_TAINT, ONBOARDING]}}, "", False),
    ({**ONBOARDED, "spec": {"taints": [POOL_TAINT, {**ONBOARDING, "effect": "NoExecute"}]}}, "", False),
    ({**ONBOARDED, "status": {"capacity": {"nvidia.com/gpu": "2"}, "allocatable": {}}}, "", False),
], ids=["onboarded", "driver_problem", "label_differs", "label_missing", "no_pool_taint", "pool_taint_value",
        "pool_taint_effect", "onboarding_taint", "onboarding_taint_any_effect", "gpus_not_allocatable"])
def test_already_onboarded(node: dict, problem: str, onboarded: bool) -> None:
    assert judge.already_onboarded(node, problem, DESIRED, POOL_TAINT, ONBOARDING, GPUS) is onboarded


def _checkpoint(*entries: tuple[str, str, object]) -> str:
    data = {"Data": {"PodDeviceEntries": [{"PodUID": uid, "ContainerName": "smoke", "ResourceName": resource,
                                           "DeviceIDs": ids} for uid, resource, ids in entries],
                     "RegisteredDevices": {}}, "Checksum": 1}
    return base64.b64encode(json.dumps(data).encode()).decode()


MIG_GPUS = [_gpu(0, ["1g.10gb", "1g.10gb"]), _gpu(1)]


@pytest.mark.parametrize("checkpoint, uuids", [
    (_checkpoint(("pod", "nvidia.com/gpu", {"-1": ["GPU-1"]})), ["GPU-1"]),
    (_checkpoint(("pod", "nvidia.com/gpu", ["GPU-1"])), ["GPU-1"]),
    (_checkpoint(("pod", "nvidia.com/gpu", {"0": ["1"]})), ["GPU-1"]),
    (_checkpoint(("pod", "nvidia.com/gpu", {"0": ["1::2"]})), ["GPU-1"]),
    (_checkpoint(("pod", "nvidia.com/gpu.shared", {"0": ["GPU-1::0", "GPU-1::3"]})), []),
    (_checkpoint(("pod", "nvidia.com/mig-1g.10gb", {"0": ["0:1"]})), []),
    (_checkpoint(("pod", "nvidia.com/gpu", {"0": ["0:1"]})), ["MIG-0-1"]),
    (_checkpoint(("pod", "nvidia.com/gpu", {"0": ["MIG-0-0", "GPU-1"]})), ["MIG-0-0", "GPU-1"]),
    (_checkpoint(("pod", "nvidia.com/gpu", {"0": ["7"]})), ["7"]),
    (_checkpoint(("pod", "nvidia.com/gpu", {"0": ["0:9"]})), ["0:9"]),
    (_checkpoint(("pod", "nvidia.com/gpu", {"0": ["abc"]})), ["abc"]),
    (_checkpoint(("other", "nvidia.com/gpu", {"0": ["GPU-0"]}), ("pod", "nvidia.com/gpu", {"0": ["GPU-1"]})), ["GPU-1"]),
    (_checkpoint(("pod", "nvidia.com/gpu", None)), []),
    ("", []),
], ids=["uuid", "uuid_list", "index", "index_replica", "other_resource", "other_mig_resource", "mig_index",
        "uuids", "index_unknown", "mig_index_unknown", "not_an_index", "other_pod", "no_ids", "no_checkpoint"])
def test_allocated_uuids(checkpoint: str, uuids: list) -> None:
    assert judge.allocated_uuids(checkpoint, "pod", "nvidia.com/gpu", MIG_GPUS) == uuids


def test_allocated_uuids_of_shared_gpus_name_each_gpu_once() -> None:
    checkpoint = _checkpoint(("pod", "nvidia.com/gpu.shared", {"0": ["GPU-1::0", "GPU-1::3"]}))
    assert judge.allocated_uuids(checkpoint, "pod", "nvidia.com/gpu.shared", MIG_GPUS) == ["GPU-1"]


RUNTIME_SETTINGS = {"device_list_strategy": "volume-mounts", "strategy_passable": True, "gpus": [H100],
                    "smoke_test_image": "registry.local/cuda:12", "runtime_handler": "nvidia"}
BINARY = "/usr/bin/nvidia-container-runtime"


def _run(stdout: str, rc: int = 0, stderr: str = "", attempts: int = 1) -> dict:
    return {"ran": True, "binary": BINARY, "attempts": attempts, "image_present": True,
            "result": {"rc": rc, "stdout": stdout, "stderr": stderr}}


def test_runtime_checks_pass_when_the_container_sees_exactly_its_gpu() -> None:
    checks = judge.runtime_checks([], _run("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n"), RUNTIME_SETTINGS)
    assert checks == [
        {"id": "runtime_honours_strategy", "layer": "runtime", "part": "gpu_node_join", "status": "pass",
         "message": "the runtime honours the device plugin's device-list strategy volume-mounts", "remedy": ""},
        {"id": "container_sees_gpus", "layer": "runtime", "part": "gpu_node_join", "status": "pass",
         "message": f"a container asking for GPU 0 through {BINARY} saw exactly it: GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)",
         "remedy": ""}]


def test_runtime_checks_name_the_problems_and_what_the_container_saw() -> None:
    listing = "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})\n" for i in range(8))
    checks = judge.runtime_checks(["problem one", "problem two"], _run(listing, attempts=2), RUNTIME_SETTINGS)
    assert [check["status"] for check in checks] == ["fail", "fail"]
    assert checks[0]["message"] == "problem one; problem two"
    assert checks[0]["remedy"] == ("apply gpufleet.node.container_toolkit with the setting named here, or change "
                                   "gpu_node_join_device_list_strategy: problem one; problem two")
    assert checks[1]["message"].startswith(f"a container asking for GPU 0 through {BINARY} (volume-mounts) saw 8 GPUs "
                                           "(rc 0, runs 2): GPU 0: NVIDIA H100")
    assert checks[1]["message"].endswith("...") and len(checks[1]["message"]) < 450
    assert checks[1]["remedy"] == f"fix the lower checks first; `ctr run --runc-binary {BINARY}` by hand shows the runtime's error"


def test_runtime_checks_a_failed_container() -> None:
    checks = judge.runtime_checks([], _run("", rc=1, stderr="  nvidia-container-cli: initialization error\n"), RUNTIME_SETTINGS)
    assert checks[1]["status"] == "fail"
    assert checks[1]["message"].endswith("saw 0 GPUs (rc 1, runs 1): nvidia-container-cli: initialization error")


@pytest.mark.parametrize("settings, container, reason", [
    ({"strategy_passable": False, "device_list_strategy": "cdi-annotations"}, {}, "ctr cannot pass the strategy cdi-annotations"),
    ({"gpus": []}, {}, "the node shows no GPU"),
    ({}, {"ran": False, "image_present": False},
     "the image registry.local/cuda:12 is not in containerd's k8s.io namespace (onboarding with gpu_node_join_smoke_test=true pulls it)"),
    ({}, {"ran": False, "image_present": True}, "containerd has no runtime handler nvidia"),
])
def test_runtime_checks_say_why_no_container_ran(settings: dict, container: dict, reason: str) -> None:
    checks = judge.runtime_checks([], container, {**RUNTIME_SETTINGS, **settings})
    assert checks[1] == {"id": "container_sees_gpus", "layer": "runtime", "part": "gpu_node_join", "status": "skip",
                         "message": "no container was run: " + reason, "remedy": ""}


SETTINGS = {"kubeconfig": "/etc/gpufleet/kubeconfig", "api_host": "cp-1", "kubelet_service": "kubelet",
            "default_kubelet_root_dir": "/var/lib/kubelet", "kubelet_root_dir": "",
            "plugin_dir": "/var/lib/kubelet/device-plugins", "device_plugin_namespace": "nvidia-device-plugin",
            "image": IMAGE, "labels": {"gpufleet.io/gpu-pool": "true", "team": True}, "pool_taint": POOL_TAINT,
            "onboarding_taint_key": ONBOARDING["key"], "label_prefix": "gpufleet.io"}
HEALTHY = _node(labels={"gpufleet.io/gpu-pool": "true", "team": "True"}, taints=[POOL_TAINT], capacity={"nvidia.com/gpu": "2"})
NODE_READ = {"kubelet": {"cmdline": ["/usr/bin/kubelet", "--root-dir=/var/lib/kubelet"]},
             "stats": {"gpu_node_join_kubelet_socket": {"exists": True}}}


def _checks(api: dict | None = None, node_read: dict | None = None, pods: list | None = None, current: bool = True,
            settings: dict | None = None) -> dict:
    api = {"nodes": [HEALTHY]} if api is None else api
    checks = gpu_node_join_checks(api, "gpu-1", NODE_READ if node_read is None else node_read,
                                  [_pod()] if pods is None else pods, current, GPUS, {**SETTINGS, **(settings or {})})
    assert all(check["layer"] == "kubernetes" and check["part"] == "gpu_node_join" for check in checks)
    return {check["id"]: check for check in checks}


def test_a_healthy_node_passes_every_kubernetes_check() -> None:
    checks = _checks()
    assert list(checks) == ["node_registered", "kubelet_running", "device_plugin_ready", "kubelet_root_dir",
                            "allocatable_gpus", "pool_labels", "pool_taint", "onboarding_taint_absent", "self_check_healthy"]
    assert {check["status"] for check in checks.values()} == {"pass"}
    assert checks["allocatable_gpus"]["message"] == "Allocatable shows {\"nvidia.com/gpu\": 2}, as the node's GPUs and settings give"
    assert checks["kubelet_root_dir"]["message"] == ("the device plugin mounts /var/lib/kubelet/device-plugins, where the "
                                                     "kubelet (--root-dir /var/lib/kubelet) serves kubelet.sock")


@pytest.mark.parametrize("api, check_id, message", [
    ({"failed": True, "msg": "Unauthorized"}, "api_reachable",
     "the API could not be read with /etc/gpufleet/kubeconfig (from cp-1): Unauthorized"),
    ({"msg": "x" * 400}, "api_reachable", "the API could not be read with /etc/gpufleet/kubeconfig (from cp-1): " + "x" * 297 + "..."),
    ({"nodes": []}, "node_registered", "the API has no Node gpu-1"),
    ({"nodes": [{**HEALTHY, "metadata": {"name": "gpu-2"}}]}, "node_registered", "the API has no Node gpu-1"),
])
def test_a_node_the_api_does_not_show_has_one_failed_check(api: dict, check_id: str, message: str) -> None:
    checks = _checks(api=api)
    assert list(checks) == [check_id]
    assert (checks[check_id]["status"], checks[check_id]["message"]) == ("fail", message)


def test_no_plugin_pod() -> None:
    checks = _checks(pods=[], current=False)
    assert "kubelet_root_dir" not in checks
    assert checks["device_plugin_ready"]["message"] == "no device plugin pod runs on the node (namespace nvidia-device-plugin)"
    assert checks["device_plugin_ready"]["remedy"] == ("check the DaemonSet's node selector and the node's labels and taints; "
                                                       "run playbooks/onboard.yml for the node")


def test_a_plugin_pod_not_current() -> None:
    checks = _checks(pods=[_pod(name="a"), _pod(name="b")], current=False)
    assert checks["device_plugin_ready"]["message"] == (
        f"no device plugin pod on the node runs {IMAGE} with the current configuration and is Ready (a, b)")
    assert checks["device_plugin_ready"]["remedy"] == "read the plugin pod's events and log (`kubectl -n nvidia-device-plugin logs a`)"


@pytest.mark.parametrize("node_read, settings, status, message", [
    ({"kubelet": {"cmdline": ["/usr/bin/kubelet", "--root-dir", "/data/kubelet"]},
      "stats": {"gpu_node_join_kubelet_socket": {"exists": True}}}, {"kubelet_root_dir": "/data/kubelet//"}, "pass",
     "the device plugin mounts /var/lib/kubelet/device-plugins, where the kubelet (--root-dir /data/kubelet) serves kubelet.sock"),
    (NODE_READ, {"kubelet_root_dir": "/data/kubelet"}, "fail",
     "gpu_node_join_kubelet_root_dir is /data/kubelet but the kubelet runs with --root-dir /var/lib/kubelet"),
    ({"kubelet": {"cmdline": ["/usr/bin/kubelet"]}, "stats": {}}, {}, "fail",
     "the device plugin mounts /var/lib/kubelet/device-plugins, where the kubelet (--root-dir /var/lib/kubelet) serves "
     "no kubelet.sock: the plugin cannot register its GPUs"),
    ({"kubelet": {}}, {}, "fail",
     "the device plugin mounts /var/lib/kubelet/device-plugins, where the kubelet (--root-dir ?) serves no kubelet.sock: "
     "the plugin cannot register its GPUs"),
])
def test_kubelet_root_dir(node_read: dict, settings: dict, status: str, message: str) -> None:
    check = _checks(node_read=node_read, settings=settings)["kubelet_root_dir"]
    assert (check["status"], check["message"]) == (status, message)


def test_a_stopped_kubelet() -> None:
    checks = _checks(node_read={"kubelet": {"cmdline": []}})
    assert (checks["kubelet_running"]["status"], checks["kubelet_running"]["message"]) == (
        "fail", "the kubelet (kubelet.service) is not running")
    assert checks["kubelet_root_dir"]["remedy"].startswith("set gpu_node_join_kubelet_root_dir to the kubelet's --root-dir (?)")


def test_allocatable_short_of_the_gpus() -> None:
    api = {"nodes": [_node(labels=HEALTHY["metadata"]["labels"], taints=[POOL_TAINT], capacity={"nvidia.com/gpu": "2"},
                           allocatable={"nvidia.com/gpu": "1"})]}
    check = _checks(api=api)["allocatable_gpus"]
    assert (check["status"], check["message"]) == ("fail", 'Allocatable shows {"nvidia.com/gpu": 1}, expected {"nvidia.com/gpu": 2}')


def test_labels_taints_and_self_check() -> None:
    node = _node(labels={"team": "True", "gpufleet.io/gpu-health": "unhealthy"}, taints=[ONBOARDING],
                 capacity={"nvidia.com/gpu": "2"}, annotations={"gpufleet.io/gpu-health-failed-checks": "uvm_module_loaded"})
    checks = _checks(api={"nodes": [node]})
    assert checks["pool_labels"]["message"] == "the Node lacks the labels gpufleet.io/gpu-pool=true"
    assert checks["pool_taint"]["message"] == ("the pool taint nvidia.com/gpu:NoSchedule is missing: pods without a GPU "
                                               "toleration may land on the node")
    assert checks["onboarding_taint_absent"]["message"] == "the onboarding taint gpufleet.io/onboarding is still set: onboarding did not finish"
    assert checks["self_check_healthy"]["message"] == "the node's boot-time self-check reports it unhealthy: uvm_module_loaded"
    assert all(checks[name]["status"] == "fail" for name in ("pool_labels", "pool_taint", "onboarding_taint_absent",
                                                             "self_check_healthy"))


def test_no_pool_taint_asked_no_pool_taint_check() -> None:
    assert "pool_taint" not in _checks(settings={"pool_taint": {}})


def test_every_judgement_is_a_filter() -> None:
    assert set(FilterModule().filters()) == {
        "gpu_node_join_tier", "gpu_node_join_driver_problem", "gpu_node_join_runtime_problems",
        "gpu_node_join_expected_resources", "gpu_node_join_plugin_pod_current", "gpu_node_join_gpus_shown",
        "gpu_node_join_onboarded", "gpu_node_join_allocated_uuids", "gpu_node_join_runtime_checks", "gpu_node_join_checks",
        "gpu_node_join_disagreements", "gpu_node_join_play_clusters", "gpu_node_join_read_of_host", "gpu_node_join_other_stacks",
        "gpu_node_join_cluster_differences", "gpu_node_join_objects_to_apply", "gpu_node_join_config_disagreements",
        "gpu_node_join_config_selections", "gpu_node_join_changed_configs", "gpu_node_join_rolling_changes",
        "gpu_node_join_outside_selections", "gpu_node_join_plugin_restart", "gpu_node_join_rollout_plugin_changes",
        "gpu_node_join_served_target"}


def test_settings_disagreements_name_each_value_and_its_hosts() -> None:
    keys = {"gpu_node_join_mig_strategy": "none", "gpu_node_join_pool_labels": {}, "gpu_node_join_time_slicing_replicas": 0}
    settings = [{"gpu_node_join_mig_strategy": "none", "gpu_node_join_pool_labels": {"pool": "a"}, "gpu_node_join_time_slicing_replicas": 0},
                {"gpu_node_join_mig_strategy": "mixed", "gpu_node_join_pool_labels": {"pool": "a"}, "gpu_node_join_time_slicing_replicas": 0},
                {"gpu_node_join_mig_strategy": "none", "gpu_node_join_pool_labels": {"pool": "b"}, "gpu_node_join_time_slicing_replicas": 0}]
    assert judge.settings_disagreements(keys, ["a", "b", "c"], settings) == [
        'gpu_node_join_mig_strategy: "none" on a, c, "mixed" on b',
        'gpu_node_join_pool_labels: {"pool": "a"} on a, b, {"pool": "b"} on c']
    assert judge.settings_disagreements(keys, ["a"], settings[:1]) == []


API_A = {"kubeconfig": "/etc/a.conf", "api_host": "cp-a"}
API_B = {"kubeconfig": "/etc/b.conf", "api_host": "cp-b"}


def test_play_clusters_read_each_cluster_once() -> None:
    apis = [{**API_A, "node": "n1"}, {**API_B, "node": "n2"}, {**API_A, "node": "n3"}]
    assert judge.play_clusters(apis) == [{**API_A, "nodes": ["n1", "n3"]}, {**API_B, "nodes": ["n2"]}]
    assert judge.play_clusters([]) == []


PLUGIN_LABELS = {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/managed-by": "Helm"}
PLUGIN_DS = {"metadata": {"namespace": "kube-system", "name": "nvdp", "labels": PLUGIN_LABELS},
             "spec": {"template": {"metadata": {}, "spec": {"containers": [{"image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"}]}}}}
READS = [{"results": [{"item": {**API_A, "nodes": ["n1", "n3"]}, "nodes": [_node(name="n1"), _node(name="n3")],
                       "pods": [{"metadata": {"name": "p1"}, "spec": {"nodeName": "n1"}}, {"metadata": {"name": "p0"}, "spec": {}}],
                       "daemonsets": [PLUGIN_DS]},
                      {"item": {**API_B, "nodes": ["n2"]}, "failed": True, "msg": "Unauthorized"}]}]


def test_read_of_host_keeps_the_hosts_part() -> None:
    part = judge.read_of_host(READS, {**API_A, "node": "n1"}, "nvidia-device-plugin")
    assert [node["metadata"]["name"] for node in part["nodes"]] == ["n1"]
    assert [pod["metadata"]["name"] for pod in part["pods"]] == ["p1"]
    assert part["error"] == "" and len(part["other_stacks"]) == 1 and part["other_stacks"][0].startswith("DaemonSet kube-system/nvdp")


@pytest.mark.parametrize("api, error", [
    ({**API_B, "node": "n2"}, "Unauthorized"),
    ({**API_A, "node": "n9"}, "no read of the API covered this node"),
    ({**API_B, "node": "n1"}, "no read of the API covered this node"),
])
def test_read_of_host_names_why_its_cluster_was_not_read(api: dict, error: str) -> None:
    part = judge.read_of_host(READS, api, "nvidia-device-plugin")
    assert part == {"nodes": [], "pods": [], "other_stacks": [], "error": error}


def test_read_of_a_host_its_node_unknown_to_the_api() -> None:
    part = judge.read_of_host([{"results": [{"item": {**API_A, "nodes": ["n4"]}, "nodes": [], "pods": []}]}],
                              {**API_A, "node": "n4"}, "nvidia-device-plugin")
    assert part == {"nodes": [], "pods": [], "other_stacks": [], "error": ""}


def test_other_stacks_name_the_gpu_operators_labels_and_other_plugins() -> None:
    node = _node(labels={"nvidia.com/gpu.deploy.driver": "true", "nvidia.com/gpu.deploy.device-plugin": "true"})
    assert judge.other_stacks({"nodes": [node], "other_stacks": ["kube-system/nvdp (...)"]}, "gpu-1") == [
        "Node gpu-1 (managed by the NVIDIA GPU Operator: labels nvidia.com/gpu.deploy.device-plugin=true, "
        "nvidia.com/gpu.deploy.driver=true)", "kube-system/nvdp (...)"]
    assert judge.other_stacks({"nodes": [], "other_stacks": []}, "gpu-1") == []
    opted_out = _node(labels={"nvidia.com/gpu.deploy.operands": "false", "nvidia.com/gpu.deploy.driver": "true"})
    assert judge.other_stacks({"nodes": [opted_out], "other_stacks": []}, "gpu-1") == []


def _applied(kind: str, name: str, diff: dict | None) -> dict:
    result = {"result": {"kind": kind, "metadata": {"name": name}}, "changed": False}
    if diff is not None:
        result["diff"] = diff
    return result


def test_cluster_differences_of_a_dry_run() -> None:
    dry_run = {"result": {"results": [
        _applied("Namespace", "nvidia-device-plugin", {"before": {}, "after": {"metadata": {"name": "x"}}}),
        _applied("RuntimeClass", "nvidia", None),
        _applied("ConfigMap", "nvidia-device-plugin-config", {"before": {"data": {"a": "1"}}, "after": {"data": {"a": "2"}}}),
        _applied("DaemonSet", "plugin", {"before": {"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}},
                                         "after": {"metadata": {"annotations": {"b": "2"}}}}),
    ]}}
    assert judge.cluster_differences(dry_run) == {"RuntimeClass/nvidia": [], "ConfigMap/nvidia-device-plugin-config": ["data"],
                                                  "DaemonSet/plugin": ["spec", "labels", "annotations"]}


def test_cluster_differences_of_one_object_and_of_none() -> None:
    one = _applied("RuntimeClass", "nvidia", {"before": {"handler": "runc"}, "after": {"handler": "nvidia"}})
    assert judge.cluster_differences(one) == {"RuntimeClass/nvidia": ["handler"]}
    assert judge.cluster_differences({}) == {}
    assert judge.cluster_differences({"skipped": True}) == {}


def test_objects_to_apply_are_the_missing_and_the_different() -> None:
    objects = [{"kind": kind, "metadata": {"name": name}} for kind, name in
               [("Namespace", "ns"), ("RuntimeClass", "nvidia"), ("ConfigMap", "config"), ("DaemonSet", "plugin")]]
    differences = {"RuntimeClass/nvidia": [], "ConfigMap/config": ["data"], "DaemonSet/plugin": ["labels"]}
    assert [obj["kind"] for obj in judge.objects_to_apply(objects, differences)] == ["Namespace", "ConfigMap", "DaemonSet"]


NAMED = {"named_configs": True}
SINGLE = {"named_configs": False}


def _labelled(name: str, config: str | None) -> dict:
    labels = {"nvidia.com/device-plugin.config": config} if config is not None else {}
    return {"metadata": {"name": name, "labels": labels}}


def test_config_disagreements_compare_hosts_of_one_configuration_only() -> None:
    keys = ["gpu_node_join_time_slicing_replicas"]
    settings = [{"gpu_node_join_time_slicing_replicas": value} for value in (0, 0, 2, 4, 3)]
    names, configs = ["a", "b", "c", "d", "e"], ["", "", "dev", "dev", "other"]
    assert judge.config_disagreements(keys, names, configs, settings) == [
        "configuration 'dev' (gpu_node_join_device_plugin_config), gpu_node_join_time_slicing_replicas: 2 on c, 4 on d"]
    assert judge.config_disagreements(keys, ["a", "b"], ["", ""], settings[1:3]) == [
        "the shared configuration, gpu_node_join_time_slicing_replicas: 0 on a, 2 on b"]
    assert judge.config_disagreements(keys, [], [], []) == []


def test_config_selections_are_the_labelled_nodes_outside_the_run() -> None:
    nodes = [_labelled("gpu-1", "dev"), _labelled("gpu-2", "dev"), _labelled("gpu-3", ""), _labelled("gpu-4", None)]
    assert judge.config_selections(nodes, ["gpu-1"]) == {"gpu-2": "dev"}
    assert judge.config_selections([], ["gpu-1"]) == {}


def test_changed_configs_leave_the_shared_one_to_the_daemonset() -> None:
    live = {"default": "a", "dev": "1", "same": "s"}
    data = {"default": "b", "dev": "2", "same": "s", "new": "n"}
    assert judge.changed_configs(live, data, NAMED) == ["dev", "new"]
    assert judge.changed_configs({}, {"default": "b"}, NAMED) == []
    assert judge.changed_configs({"config.yaml": "a"}, {"config.yaml": "b"}, SINGLE) == []


@pytest.mark.parametrize("differences, live, data, settings, rolling", [
    # a named configuration's text restarts only its nodes
    ({"ConfigMap/c": ["data"]}, {"default": "a", "dev": "1"}, {"default": "a", "dev": "2"}, NAMED, []),
    # the shared one restarts every node
    ({"ConfigMap/c": ["data"]}, {"default": "a"}, {"default": "b"}, NAMED, ["ConfigMap/c"]),
    ({"ConfigMap/c": ["data"]}, {"config.yaml": "a"}, {"config.yaml": "b"}, SINGLE, ["ConfigMap/c"]),
    ({"DaemonSet/d": ["spec"], "ConfigMap/c": ["labels"], "RuntimeClass/r": []}, {}, {}, NAMED, ["DaemonSet/d"]),
    ({"RuntimeClass/r": ["handler"], "ServiceAccount/s": ["annotations"]}, {}, {}, SINGLE, ["RuntimeClass/r"]),
])
def test_rolling_changes(differences, live, data, settings, rolling) -> None:
    assert judge.rolling_changes(differences, live, data, settings) == rolling


@pytest.mark.parametrize("differences, live, data, settings, changes", [
    ({}, {"default": "a", "dev": "1"}, {"default": "a", "dev": "1"}, NAMED, []),
    # a named configuration the batches would write, and one they would add
    ({"ConfigMap/c": ["data"]}, {"default": "a", "dev": "1"}, {"default": "a", "dev": "2", "new": "n"}, NAMED,
     ["the device plugin configuration 'dev'", "the device plugin configuration 'new'"]),
    ({"DaemonSet/d": ["spec"], "ConfigMap/c": ["data"]}, {"config.yaml": "a"}, {"config.yaml": "b"}, SINGLE,
     ["ConfigMap/c", "DaemonSet/d"]),
    # labels and annotations restart nothing
    ({"DaemonSet/d": ["labels"]}, {"config.yaml": "a"}, {"config.yaml": "a"}, SINGLE, []),
])
def test_a_rollout_changes_nothing_of_the_device_plugin(differences, live, data, settings, changes) -> None:
    assert judge.rollout_plugin_changes(differences, live, data, settings) == changes


def _served_by(slug, path, name="device-plugins"):
    return {"spec": {"template": {"metadata": {"labels": {"gpufleet.io/device-plugin-dir": slug}},
                                  "spec": {"volumes": [{"name": "config", "configMap": {"name": "c"}},
                                                       {"name": name, "hostPath": {"path": path}}]}}}}


@pytest.mark.parametrize("labels, daemonsets, target", [
    ({"gpufleet.io/device-plugin-dir": "data-kubelet-device-plugins"},
     [_served_by("var-lib-kubelet-device-plugins", "/var/lib/kubelet/device-plugins"),
      _served_by("data-kubelet-device-plugins", "/data/kubelet/device-plugins")],
     {"dir": "/data/kubelet/device-plugins", "slug": "data-kubelet-device-plugins"}),
    ({}, [_served_by("var-lib-kubelet-device-plugins", "/var/lib/kubelet/device-plugins")], {}),
    ({"gpufleet.io/device-plugin-dir": "elsewhere"}, [_served_by("var-lib-kubelet-device-plugins", "/x")], {}),
    ({"gpufleet.io/device-plugin-dir": "s"}, [_served_by("s", "/x", name="other")], {}),
    ({"gpufleet.io/device-plugin-dir": "s"}, [], {}),
])
def test_the_target_that_serves_a_node_is_read_from_the_api(labels, daemonsets, target) -> None:
    node = {"metadata": {"name": "gpu-1", "labels": labels}}
    assert judge.served_target(daemonsets, node, "gpufleet.io") == target


def test_outside_selections_name_the_nodes_a_changed_configuration_would_leave_behind() -> None:
    live = {"default": "a", "dev": "1", "ops": "o"}
    data = {"default": "a", "dev": "2", "ops": "o", "new": "n"}
    selections = {"gpu-7": "dev", "gpu-3": "dev", "gpu-5": "ops", "gpu-6": "new"}
    assert judge.outside_selections(live, data, selections, NAMED) == [
        "the device plugin configuration 'dev' is also selected by gpu-3, gpu-7"]
    assert judge.outside_selections(live, live, selections, NAMED) == []


@pytest.mark.parametrize("label, wanted, changed, settings, restart", [
    ("dev", "dev", [], NAMED, False),       # as it was
    ("dev", "dev", ["dev"], NAMED, True),   # its text changed
    (None, "dev", [], NAMED, True),         # it selects one now
    ("dev", "", [], NAMED, True),           # back to the shared one
    (None, "", ["dev"], NAMED, False),      # the shared one changes through the DaemonSet's hash
    ("dev", "dev", ["dev"], SINGLE, False),
])
def test_plugin_restart(label, wanted, changed, settings, restart) -> None:
    assert judge.plugin_restart(_labelled("gpu-1", label), wanted, changed, settings) is restart


@pytest.mark.parametrize("label, wanted, status, message", [
    ("dev", "dev", "pass", "the Node selects configuration 'dev' of the device plugin"),
    (None, "", "pass", "the Node selects the shared configuration of the device plugin"),
    (None, "dev", "fail", "the Node selects the shared configuration of the device plugin, not configuration 'dev' "
                          "(label nvidia.com/device-plugin.config)"),
    ("dev", "", "fail", "the Node selects configuration 'dev' of the device plugin, not the shared configuration "
                        "(label nvidia.com/device-plugin.config)"),
])
def test_with_named_configurations_the_node_must_select_its_configuration(label, wanted, status, message) -> None:
    labels = dict(HEALTHY["metadata"]["labels"], **({"nvidia.com/device-plugin.config": label} if label else {}))
    node = dict(HEALTHY, metadata=dict(HEALTHY["metadata"], labels=labels))
    checks = _checks(api={"nodes": [node]}, settings={"plugin_config": wanted})
    assert list(checks)[-3:] == ["onboarding_taint_absent", "plugin_config", "self_check_healthy"]
    assert (checks["plugin_config"]["status"], checks["plugin_config"]["message"]) == (status, message)
