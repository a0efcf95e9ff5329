"""The Kubernetes lab end to end: real control plane, real kubelets, SIMULATED GPUs and device plugin.

The tests run in file order and share one lab (session fixtures); the last one takes it down. They
test the lab itself, without the collection's roles: no NVIDIA runtime runs on these nodes, so the
tests hand the simulated plugin what the runtime would inject into its container (the simulated
driver's view of every GPU, /run/gpusim/visible.json) through a hostPath. The collection's
scenarios get it through the STAND-IN runtime instead.
"""
from __future__ import annotations

import json
import re
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, TypeVar

import yaml
from kubernetes.client.rest import ApiException

from gpufleet_lab import gpuprofiles, kube, kube_images, standins, sysctl
from gpufleet_lab.inventory import write_inventory
from gpufleet_lab.common import LabSettings
from gpufleet_lab.node import NodeSpec, node_add, node_rm, other_labs

from ansible_collections.gpufleet.node.plugins.module_utils import _gpu_node_join_manifests as manifests

T = TypeVar("T")
NS = "kube-system"
VENV_BIN = Path(__file__).resolve().parents[3] / ".venv" / "bin"
VISIBLE_ON_NODE = "/var/lib/gpufleet-lab-test/visible.json"  # written by conftest's lab_nodes fixture
PLUGIN_CONTAINER = "nvidia-device-plugin-ctr"


def wait(what: str, probe: Callable[[], T | None], timeout: float = 120, interval: float = 2) -> T:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def plugin_daemonset(name: str, node_name: str, host_device_plugin_dir: str,
                     config_map: str | None = None, gpus_injected: bool = True) -> dict[str, Any]:
    """The test manifest: the SIMULATED plugin, hostPath = the node's <kubelet root>/device-plugins,
    and (gpus_injected) the node's simulated GPUs where the runtime would have injected them."""
    volumes: list[dict[str, Any]] = [{"name": "device-plugin", "hostPath": {"path": host_device_plugin_dir}}]
    mounts: list[dict[str, Any]] = [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}]
    if gpus_injected:
        volumes.append({"name": "visible", "hostPath": {"path": VISIBLE_ON_NODE, "type": "File"}})
        mounts.append({"name": "visible", "mountPath": "/run/gpusim/visible.json", "readOnly": True})
    args: list[str] = []
    if config_map:
        volumes.append({"name": "config", "configMap": {"name": config_map}})
        mounts.append({"name": "config", "mountPath": "/etc/nvidia-device-plugin", "readOnly": True})
        args.append("--config-file=/etc/nvidia-device-plugin/config.yaml")
    labels = {"app.kubernetes.io/name": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node_name},
                    "tolerations": [{"operator": "Exists"}],
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{
                        "name": "plugin",
                        "image": kube_images.DEVICE_PLUGIN_IMAGE,
                        "imagePullPolicy": "IfNotPresent",
                        "args": args,
                        "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                },
            },
        },
    }


def smoke_pod(name: str, gpus: int) -> dict[str, Any]:
    """A pod asking for GPUs; it prints the allocation the plugin answered (no runtime injects it here)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "smoke",
                "image": kube_images.SMOKE_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "args": ['echo "NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES"'],
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            }],
        },
    }


def allocatable_gpus(core: Any, node_name: str, resource: str = "nvidia.com/gpu") -> int | None:
    value = (core.read_node(node_name).status.allocatable or {}).get(resource)
    return None if value is None else int(value)


def plugin_pod(core: Any, ds_name: str) -> Any:
    pods = core.list_namespaced_pod(NS, label_selector=f"app.kubernetes.io/name={ds_name}").items
    return pods[0] if pods else None


def delete_daemonset(apps: Any, core: Any, name: str) -> None:
    try:
        apps.delete_namespaced_daemon_set(name, NS)
    except ApiException as error:
        if error.status != 404:
            raise
    wait(f"pods of {name} gone", lambda: plugin_pod(core, name) is None, timeout=90)


def pod_log(core: Any, name: str, namespace: str) -> str:
    """The pod's log through its kubelet; '' while there is none yet: the kubelet not answering
    (restarting) or the container not started (the API answers 400 "... is waiting to start")."""
    try:
        return str(core.read_namespaced_pod_log(name, namespace))
    except ApiException as error:
        if error.status and (error.status >= 500 or error.status == 404):  # kubelet (re)starting
            return ""
        if error.status == 400 and "is waiting to start" in str(error.body):
            return ""
        raise


def docker_ok(container: str, *argv: str) -> bool:
    return subprocess.run(["docker", "exec", container, *argv], capture_output=True, check=False).returncode == 0


def lab_container_ids(lab_nodes: dict[str, NodeSpec]) -> set[str]:
    """Ids of every container (pod sandboxes included) containerd's CRI runs on the lab's nodes."""
    ids: set[str] = set()
    for name in lab_nodes:
        out = subprocess.run(["docker", "exec", name, "ctr", "-n", "k8s.io", "containers", "ls", "-q"],
                             capture_output=True, text=True, check=True).stdout
        ids.update(out.split())
    return ids


LAB_PROCESS_MARKS = ("/opt/kubelab/", "/var/lib/kubelab", "/opt/gpusim-device-plugin/")
OWNER_RE = re.compile(r"/(?:docker|k8s\.io)/([0-9a-f]{64})")


def lab_processes() -> dict[int, tuple[str, str | None]]:
    """pid -> (command line, owner) of every lab component running on the machine, whichever lab runs it.

    The owner is the container whose cgroup holds the process: a node's or control plane's docker container
    (/docker/<id>), or a pod's container on a node (/k8s.io/<id>, the nodes run with cgroupns=host).
    """
    found: dict[int, tuple[str, str | None]] = {}
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            cgroups = (proc / "cgroup").read_text() if proc.name.isdigit() else ""
        except OSError:  # gone meanwhile, or not a process
            continue
        if any(mark in args for mark in LAB_PROCESS_MARKS):
            owner = OWNER_RE.search(cgroups)
            found[int(proc.name)] = (args, owner.group(1) if owner else None)
    return found


def docker_ids(*names: str) -> set[str]:
    out = subprocess.run(["docker", "inspect", "--format", "{{.Id}}", *names], capture_output=True, text=True,
                         check=True).stdout
    return set(out.split())


def profile_gpu_count(spec: NodeSpec) -> int:
    return len(gpuprofiles.find_profile(spec.gpu_profile).gpus)


def test_both_nodes_ready_with_their_kubelet_root(lab_nodes: dict[str, NodeSpec], k8s: Any,
                                                  figures: dict[str, Any]) -> None:
    core = k8s[0]
    names = sorted(lab_nodes)
    nodes = {n.metadata.name: n for n in core.list_node().items}
    assert sorted(nodes) == names
    for name, spec in lab_nodes.items():
        ready = [c for c in nodes[name].status.conditions if c.type == "Ready"]
        assert ready and ready[0].status == "True", f"{name} not Ready: {ready}"
        addresses = {a.type: a.address for a in nodes[name].status.addresses}
        assert addresses["InternalIP"] == spec.ip
        # the kubelet really uses its root dir (pod directories live there)
        assert docker_ok(name, "test", "-d", f"{spec.kubelet_root_dir}/pods"), f"{name}: no {spec.kubelet_root_dir}/pods"
        assert docker_ok(name, "test", "-S", f"{spec.device_plugin_dir}/kubelet.sock")
    assert {s.kubelet_root_dir for s in lab_nodes.values()} == {"/var/lib/kubelet", "/data/kubelet"}
    # Observed behaviour of upstream kubelet 1.20: the device-plugin registration socket stays at
    # /var/lib/kubelet/device-plugins whatever --root-dir says (pluginapi.KubeletSocket is fixed).
    # If a kubelet ever follows its root dir here, this fails and the lab's inventory must change.
    moved = next(s for s in lab_nodes.values() if s.kubelet_root_dir == "/data/kubelet")
    assert moved.device_plugin_dir == "/var/lib/kubelet/device-plugins"
    assert not docker_ok(moved.name, "test", "-e", f"{moved.root_device_plugin_dir}/kubelet.sock")
    figures["memory_mib_two_nodes_ready"] = kube.memory_report()


def test_lab_inventory_reaches_the_nodes(lab_nodes: dict[str, NodeSpec], tmp_path: Path) -> None:
    directory = write_inventory(tmp_path / "lab")
    lint = subprocess.run([str(VENV_BIN / "yamllint"), "--strict", "-d", "{extends: default, rules: {line-length: {max: 160}}}",
                           str(directory)], capture_output=True, text=True, check=False)
    assert lint.returncode == 0, lint.stdout
    listing = subprocess.run([str(VENV_BIN / "ansible-inventory"), "-i", str(directory), "--list"],
                             capture_output=True, text=True, check=True)
    data = json.loads(listing.stdout)
    assert sorted(data["gpu_new"]["hosts"]) == sorted(lab_nodes)
    assert "gpu_new" in data["gpu_nodes"]["children"]
    ping = subprocess.run([str(VENV_BIN / "ansible"), "-i", str(directory), "gpu_new", "-m", "ansible.builtin.ping"],
                          capture_output=True, text=True, check=False)
    assert ping.returncode == 0, ping.stdout + ping.stderr
    assert ping.stdout.count("SUCCESS") == len(lab_nodes)


def test_plugin_without_injected_gpus_fails_at_init_and_never_registers(lab_nodes: dict[str, NodeSpec], k8s: Any) -> None:
    core, apps = k8s
    name, spec = sorted(lab_nodes.items())[0]
    ds = "gpusim-plugin-no-runtime"
    apps.create_namespaced_daemon_set(NS, plugin_daemonset(ds, name, spec.device_plugin_dir, gpus_injected=False))
    try:
        pod = wait("the plugin pod created", lambda: plugin_pod(core, ds))
        log = wait("the plugin's init failure", lambda: (text := pod_log(core, pod.metadata.name, NS))
                   and "did you configure the NVIDIA Container Toolkit" in text and text, timeout=90)
        assert "registered" not in log
        assert allocatable_gpus(core, name) in (None, 0)
    finally:
        delete_daemonset(apps, core, ds)


def test_wrong_hostpath_means_no_gpus(lab_nodes: dict[str, NodeSpec], k8s: Any, injected_gpus: dict[str, list[str]]) -> None:
    core, apps = k8s
    # the node with kubelet root /data/kubelet; the wrong hostPath is the one a plugin deployment
    # derived from the root dir would use: <root>/device-plugins, where this kubelet has no socket
    name, spec = next((n, s) for n, s in lab_nodes.items() if s.kubelet_root_dir != "/var/lib/kubelet")
    wrong = spec.root_device_plugin_dir
    assert wrong != spec.device_plugin_dir
    ds = "gpusim-plugin-wrong-root"
    apps.create_namespaced_daemon_set(NS, plugin_daemonset(ds, name, wrong))
    try:
        pod = wait("the wrongly mounted plugin pod running",
                   lambda: (p := plugin_pod(core, ds)) is not None and p.status.phase == "Running" and p)
        wait("the plugin logging that it has no kubelet socket", lambda: "no kubelet socket at"
             in pod_log(core, pod.metadata.name, NS), timeout=60)
        time.sleep(15)  # give a registration every chance to happen
        log = core.read_namespaced_pod_log(pod.metadata.name, NS)
        assert "registered" not in log
        assert allocatable_gpus(core, name) in (None, 0), f"{name} shows GPUs with a wrong hostPath"
    finally:
        delete_daemonset(apps, core, ds)


def test_right_hostpath_shows_each_profiles_gpus(lab_nodes: dict[str, NodeSpec], k8s: Any, injected_gpus: dict[str, list[str]],
                                                 figures: dict[str, Any]) -> None:
    core, apps = k8s
    for name, spec in lab_nodes.items():
        apps.create_namespaced_daemon_set(
            NS, plugin_daemonset(f"gpusim-plugin-{name}", name, spec.device_plugin_dir))
    for name, spec in lab_nodes.items():
        expected = profile_gpu_count(spec)
        assert expected > 0
        got = wait(f"{name} Allocatable nvidia.com/gpu == {expected}",
                   lambda: allocatable_gpus(core, name) == expected and expected, timeout=120)
        assert got == expected
    figures["memory_mib_two_nodes_with_plugins"] = kube.memory_report()
    counts = {name: profile_gpu_count(spec) for name, spec in lab_nodes.items()}
    assert len(set(counts.values())) == 2, f"the two profiles should differ in GPU count: {counts}"


def test_pod_with_one_gpu_is_allocated_one_gpu_of_its_node(lab_nodes: dict[str, NodeSpec], k8s: Any,
                                                           injected_gpus: dict[str, list[str]]) -> None:
    core = k8s[0]
    core.create_namespaced_pod("default", smoke_pod("gpu-smoke-one", 1))
    try:
        pod = wait("gpu-smoke-one Succeeded",
                   lambda: (p := core.read_namespaced_pod("gpu-smoke-one", "default")).status.phase
                   in ("Succeeded", "Failed") and p, timeout=120)
        log = core.read_namespaced_pod_log("gpu-smoke-one", "default")  # through the node's kubelet
        assert pod.status.phase == "Succeeded", log
        match = re.search(r"^NVIDIA_VISIBLE_DEVICES=(\S*)$", log, flags=re.M)
        assert pod.spec.node_name in lab_nodes
        # the plugin's default strategy (envvar) with device IDs by UUID: one GPU of that node
        assert match and match.group(1) in injected_gpus[pod.spec.node_name], f"expected one GPU UUID: {log!r}"
    finally:
        core.delete_namespaced_pod("gpu-smoke-one", "default", grace_period_seconds=0)


def test_pod_asking_too_many_gpus_stays_pending(lab_nodes: dict[str, NodeSpec], k8s: Any) -> None:
    core = k8s[0]
    too_many = max(profile_gpu_count(s) for s in lab_nodes.values()) + 1
    core.create_namespaced_pod("default", smoke_pod("gpu-smoke-too-many", too_many))
    try:
        def unschedulable() -> str | None:
            pod = core.read_namespaced_pod("gpu-smoke-too-many", "default")
            for condition in pod.status.conditions or []:
                if condition.type == "PodScheduled" and condition.status == "False" and condition.message:
                    return str(condition.message)
            return None
        message = wait("gpu-smoke-too-many reported unschedulable", unschedulable, timeout=60)
        assert "Insufficient nvidia.com/gpu" in message
        time.sleep(5)
        pod = core.read_namespaced_pod("gpu-smoke-too-many", "default")
        assert pod.status.phase == "Pending" and not pod.spec.node_name
    finally:
        core.delete_namespaced_pod("gpu-smoke-too-many", "default", grace_period_seconds=0)


def test_plugin_registers_again_after_a_kubelet_restart(lab_nodes: dict[str, NodeSpec], k8s: Any) -> None:
    core = k8s[0]
    name, spec = sorted(lab_nodes.items())[0]
    ds = f"gpusim-plugin-{name}"
    pod = plugin_pod(core, ds)
    subprocess.run(["docker", "exec", name, "systemctl", "restart", "kubelet"], check=True)
    wait("the plugin noticing the kubelet restart", lambda: "registering again"
         in pod_log(core, pod.metadata.name, NS), timeout=90, interval=3)
    # The kubelet starts ListAndWatch before its Register answer reaches the plugin, so the second
    # "registered" line can trail the restart notice: wait for it rather than read the log once.
    wait("the plugin's second registration to succeed", lambda: pod_log(core, pod.metadata.name, NS)
         .count("registered nvidia.com/gpu with the kubelet") >= 2, timeout=90, interval=3)
    expected = profile_gpu_count(spec)
    wait(f"{name} Allocatable back to {expected}", lambda: allocatable_gpus(core, name) == expected, timeout=90)


def test_time_slicing_replicas_multiply_the_devices(lab_nodes: dict[str, NodeSpec], k8s: Any,
                                                    injected_gpus: dict[str, list[str]]) -> None:
    core, apps = k8s
    name, spec = sorted(lab_nodes.items())[-1]
    config = ("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
              "      - name: nvidia.com/gpu\n        replicas: 3\n")
    core.create_namespaced_config_map(NS, {"metadata": {"name": "gpusim-plugin-config"},
                                           "data": {"config.yaml": config}})
    ds = f"gpusim-plugin-{name}"
    delete_daemonset(apps, core, ds)
    apps.create_namespaced_daemon_set(NS, plugin_daemonset(ds, name, spec.device_plugin_dir, "gpusim-plugin-config"))
    expected = 3 * profile_gpu_count(spec)
    wait(f"{name} Allocatable nvidia.com/gpu == {expected}", lambda: allocatable_gpus(core, name) == expected,
         timeout=120)


REPO = Path(__file__).resolve().parents[3]
NVIDIA_NODE = "gflab-nvidia"
NVIDIA_PLUGIN_NAMESPACE = "gflab-nvidia-device-plugin"  # the lab's own plugin has the role's default namespace
# Debian's driver packages a node with the driver needs for nvidia-smi and libcuda (the mirror's own versions)
DRIVER_PACKAGES = ("nvidia-smi", "libnvidia-ml1", "libcuda1", "nvidia-alternative", "libnvidia-ptxjitcompiler1",
                   "libnvidia-pkcs11-openssl3", "nvidia-legacy-check")
GPU_LINE = re.compile(r"^GPU \d+: NVIDIA H100 80GB HBM3 \(UUID: (GPU-[0-9a-f-]+)\)$", flags=re.M)


def on_node(*argv: str) -> str:
    done = subprocess.run(["docker", "exec", NVIDIA_NODE, *argv], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{argv}: rc {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


# nvmlEventSetWait on the node's library (NVIDIA's mock there): its return code and the seconds it took.
EVENT_WAIT = """
import ctypes, sys, time
nvml = ctypes.CDLL(sys.argv[1])
assert nvml.nvmlInit_v2() == 0
event_set = ctypes.c_void_p()
assert nvml.nvmlEventSetCreate(ctypes.byref(event_set)) == 0
data = ctypes.create_string_buffer(64)
started = time.monotonic()
print(nvml.nvmlEventSetWait_v2(event_set, data, 700), round(time.monotonic() - started, 2))
"""
NVML_ERROR_TIMEOUT = 10


def install_nvidias_stack() -> None:
    """What onboarding installs on a lab node NVIDIA's code serves: Debian's driver user space from the lab's mirror,
    then the simulated module reloaded at its version; gpusim follows both (the node's dpkg runs and module loads) and
    puts NVIDIA's mock, carrying the node's GPUs, in the library's place. Then NVIDIA's toolkit 1.20.0 packages from
    the node's toolkit repository (libnvidia-container: stand-ins) with containerd's default runtime and the secure
    settings the collection sets."""
    mirror = yaml.safe_load((REPO / ".build" / "package-mirror" / "versions.yml").read_text())
    version = mirror["driver_package_version"]["current"]
    on_node("sh", "-ec", "cp /srv/gpufleet-package-mirror/gpgkey /etc/apt/keyrings/gpufleet-mirror.asc && echo "
            "'deb [signed-by=/etc/apt/keyrings/gpufleet-mirror.asc] file:/srv/gpufleet-package-mirror gpufleet-lab main' "
            "> /etc/apt/sources.list.d/gpufleet-mirror.list && echo "
            f"'deb [signed-by=/etc/apt/keyrings/gpufleet-toolkit.asc] {standins.REPO_URL.replace('$(ARCH)', 'amd64')} /' "
            "> /etc/apt/sources.list.d/gpufleet-toolkit.list")
    subprocess.run(["docker", "exec", "-i", NVIDIA_NODE, "sh", "-c", "cat > /etc/apt/keyrings/gpufleet-toolkit.asc"],
                   input=standins.public_key(), text=True, check=True)
    on_node("apt-get", "update", "-qq")
    on_node("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq", "--no-install-recommends",
            *(f"{package}={version}" for package in DRIVER_PACKAGES))
    on_node("/opt/gpusim/bin/gpusim", "reload")
    library = f"/usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.{mirror['driver']['current']}"
    assert "#gpusim-mock-nvml-config:" in on_node("tail", "-c", "40", library), f"{library} is not NVIDIA's mock"
    # As the driver's library does, the mock waits out the timeout when no event comes (NVIDIA's plugin's health
    # monitor waits in a loop: a wait that returned at once spun it on a CPU core).
    code, seconds = on_node("python3", "-c", EVENT_WAIT, library).split()
    assert int(code) == NVML_ERROR_TIMEOUT and float(seconds) >= 0.65, (code, seconds)
    on_node("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq", "--no-install-recommends",
            *(f"{name}=1.20.0-1" for name in ("libnvidia-container1", "libnvidia-container-tools",
                                              "nvidia-container-toolkit-base", "nvidia-container-toolkit")))
    assert "STAND-IN" not in on_node("nvidia-ctk", "--version"), "the node's toolkit repository served stand-ins"
    on_node("nvidia-ctk", "runtime", "configure", "--runtime=containerd", "--set-as-default")
    on_node("nvidia-ctk", "config", "--in-place", "--set", "accept-nvidia-visible-devices-envvar-when-unprivileged=false",
            "--set", "accept-nvidia-visible-devices-as-volume-mounts=true")
    on_node("systemctl", "restart", "containerd")


def role_manifest_settings(**overrides: Any) -> dict[str, Any]:
    """gpu_node_join's manifest settings at the role's own defaults (what a user gets), each read from the variable
    the role builds it from; ``overrides`` for what the role derives with Jinja (the image)."""
    role = REPO / "roles" / "gpu_node_join"
    values = {**yaml.safe_load((role / "defaults" / "main.yml").read_text()),
              **yaml.safe_load((role / "vars" / "main.yml").read_text())}
    settings = {key: values[re.match(r"\{\{\s*([a-z_]+)", template).group(1)]
                for key, template in values["__gpu_node_join_manifest_settings"].items()}
    return {**settings, **overrides}


def nvidias_plugin_objects(image: str, named: dict[str, dict[str, Any]] | None = None,
                           **overrides: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The role's settings for NVIDIA's plugin image in the test's namespace, and the objects gpu_node_join renders
    from them (its Python): Namespace, ConfigMap, DaemonSet; with ``named`` configurations ({name: settings the
    hosts selecting it override}), config-manager's identity too."""
    settings = role_manifest_settings(image=image, pull_policy="Never", namespace=NVIDIA_PLUGIN_NAMESPACE, **overrides)
    target = {"dir": "/var/lib/kubelet/device-plugins", "slug": "var-lib-kubelet-device-plugins"}
    texts = {name: manifests.device_plugin_config({**settings, **values}) for name, values in (named or {}).items()}
    data = manifests.config_map_data(texts, {}, {}, settings)
    return settings, manifests.cluster_objects([target], data, settings)


def deploy_nvidias_plugin(core: Any, apps: Any) -> dict[str, Any]:
    """NVIDIA's device plugin v0.20.0 from an image, through the objects gpu_node_join applies, at the role's defaults
    but the namespace: the volume-mounts strategy, SYS_ADMIN the one capability added. The image is the one node_add
    imported into the node's containerd, as a registry mirror would serve it. Returns the DaemonSet."""
    image = f"docker.io/{kube_images.LAB_PLUGIN_IMAGE}"  # node_add imported it on a node NVIDIA's code serves
    settings, (namespace, config_map, daemonset) = nvidias_plugin_objects(image)
    slug = daemonset["spec"]["template"]["metadata"]["labels"][f"{settings['label_prefix']}/device-plugin-dir"]
    core.patch_node(NVIDIA_NODE, {"metadata": {"labels": {
        **settings["pool_labels"], f"{settings['label_prefix']}/device-plugin-dir": slug}}})
    core.create_namespace(namespace)
    core.create_namespaced_config_map(NVIDIA_PLUGIN_NAMESPACE, config_map)
    return apps.create_namespaced_daemon_set(NVIDIA_PLUGIN_NAMESPACE, daemonset).to_dict()


def reconfigure_nvidias_plugin(core: Any, apps: Any, named: dict[str, dict[str, Any]] | None = None,
                               **overrides: Any) -> list[dict[str, Any]]:
    """The role's objects for other settings, replaced as the role applies them: the configuration's hash in the
    DaemonSet's pod template rolls the plugin. config-manager's identity (named configurations) is created, as
    playbooks/access.yml does. Returns that identity's objects."""
    from kubernetes import client

    image = f"docker.io/{kube_images.LAB_PLUGIN_IMAGE}"
    objects = nvidias_plugin_objects(image, named, **overrides)[1][1:]
    access, (config_map, daemonset) = objects[:-2], objects[-2:]
    rbac = client.RbacAuthorizationV1Api(core.api_client)
    for item in access:
        {"ServiceAccount": lambda body: core.create_namespaced_service_account(NVIDIA_PLUGIN_NAMESPACE, body),
         "ClusterRole": rbac.create_cluster_role, "ClusterRoleBinding": rbac.create_cluster_role_binding}[item["kind"]](item)
    core.replace_namespaced_config_map(config_map["metadata"]["name"], NVIDIA_PLUGIN_NAMESPACE, config_map)
    apps.replace_namespaced_daemon_set(daemonset["metadata"]["name"], NVIDIA_PLUGIN_NAMESPACE, daemonset)
    return access


def remove_cluster_objects(core: Any, objects: list[dict[str, Any]]) -> None:
    from kubernetes import client

    rbac = client.RbacAuthorizationV1Api(core.api_client)
    for item in objects:
        delete = {"ClusterRole": rbac.delete_cluster_role, "ClusterRoleBinding": rbac.delete_cluster_role_binding}.get(item["kind"])
        if delete:
            try:
                delete(item["metadata"]["name"])
            except ApiException:
                pass


def the_plugin_pod(core: Any) -> Any:
    pods = core.list_namespaced_pod(NVIDIA_PLUGIN_NAMESPACE, field_selector=f"spec.nodeName={NVIDIA_NODE}").items
    return pods[0] if len(pods) == 1 and not pods[0].metadata.deletion_timestamp else None


def settled_plugin_log(core: Any, namespace: str, words: str) -> str | None:
    """The log of the node's one plugin pod once it has been Ready for 15 s (gpu_node_join's rule for a plugin that
    counts: a replaced or restarting plugin is Ready for a moment) and has logged ``words``; None before."""
    pods = core.list_namespaced_pod(namespace, field_selector=f"spec.nodeName={NVIDIA_NODE}").items
    if len(pods) != 1 or pods[0].metadata.deletion_timestamp:
        return None
    ready = [c for c in pods[0].status.conditions or [] if c.type == "Ready" and c.status == "True"]
    if not ready or (datetime.now(timezone.utc) - ready[0].last_transition_time).total_seconds() < 15:
        return None
    log = core.read_namespaced_pod_log(pods[0].metadata.name, namespace, container=PLUGIN_CONTAINER)
    return log if words in log else None


def run_pod(core: Any, name: str, gpus: int, env: dict[str, str] | None = None,
            resource: str = "nvidia.com/gpu") -> tuple[Any, str]:
    pod = smoke_pod(name, gpus)
    container = pod["spec"]["containers"][0]
    container["args"] = ["ls /dev/nvidia* 2>&1; nvidia-smi -L"]
    container["resources"] = {"limits": {resource: str(gpus)}}
    if not gpus:
        del container["resources"]
    container["env"] = [{"name": key, "value": value} for key, value in (env or {}).items()]
    pod["spec"]["nodeName"] = NVIDIA_NODE
    core.create_namespaced_pod("default", pod)
    done = wait(f"{name} finished", lambda: (p := core.read_namespaced_pod(name, "default")).status.phase
                in ("Succeeded", "Failed") and p, timeout=120)
    try:
        return done, core.read_namespaced_pod_log(name, "default")
    except ApiException:  # refused at admission: it never ran
        return done, ""


def allocated_device_ids(pod_uid: str) -> list[str]:
    """The devices the kubelet gave the pod, from its device manager's checkpoint."""
    checkpoint = json.loads(on_node("cat", "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"))
    return sorted(device for entry in checkpoint["Data"]["PodDeviceEntries"] if entry["PodUID"] == pod_uid
                  for ids in entry["DeviceIDs"].values() for device in ids)


def test_nvidias_plugin_and_toolkit_give_a_pod_exactly_its_gpus(lab_up: LabSettings, k8s: Any) -> None:
    """NVIDIA's code above the SIMULATED GPU and module: the device plugin from its image, in the DaemonSet the
    collection renders, on the mock NVML that the toolkit's runtime (jit-cdi) injects into the plugin's own container
    (unprivileged, SYS_ADMIN its one added capability); the driver's nvidia-smi and the mock injected into a pod; the
    real nvidia-smi in the pod."""
    core, apps = k8s
    spec = node_add(NVIDIA_NODE, "h100x8", "/var/lib/kubelet", userspace="host")
    namespace = NVIDIA_PLUGIN_NAMESPACE
    try:
        assert spec.nvidia_software, spec
        install_nvidias_stack()
        daemonset = deploy_nvidias_plugin(core, apps)
        container = daemonset["spec"]["template"]["spec"]["containers"][0]
        assert container["security_context"]["capabilities"] == {"add": ["SYS_ADMIN"], "drop": ["ALL"]}
        # NVIDIA's plugin's own words, from its pod: it read the role's config.yaml and found the mock's GPUs by NVML
        log = wait("NVIDIA's plugin registered", lambda: settled_plugin_log(
            core, namespace, "Registered device plugin for 'nvidia.com/gpu' with Kubelet"), timeout=180)
        assert "Running with config" in log and '"volume-mounts"' in log, log
        wait(f"{NVIDIA_NODE} Allocatable nvidia.com/gpu == 8", lambda: allocatable_gpus(core, NVIDIA_NODE) == 8, timeout=60)
        pod, log = run_pod(core, "nvidia-two", 2)
        assert pod.status.phase == "Succeeded", (pod.status, log)
        uuids = GPU_LINE.findall(log)
        profile_uuids = {gpu.uuid for gpu in gpuprofiles.find_profile("h100x8").gpus}
        assert len(uuids) == 2 and set(uuids) <= profile_uuids, log
        assert sorted(uuids) == allocated_device_ids(pod.metadata.uid), log
        assert len(re.findall(r"^/dev/nvidia\d+$", log, flags=re.M)) == 2, log
        # unprivileged, no GPU asked for, NVIDIA_VISIBLE_DEVICES=all: NVIDIA's runtime gives it nothing
        pod, log = run_pod(core, "nvidia-sneaky", 0, {"NVIDIA_VISIBLE_DEVICES": "all"})
        assert pod.status.phase == "Failed" and "nvidia-smi: not found" in log, log
        assert "No such file or directory" in log and not GPU_LINE.search(log), log
        # The role's time-slicing settings, read by NVIDIA's plugin: two pods per GPU, shared GPUs named as shared,
        # and no pod given two slices of what may be one GPU.
        reconfigure_nvidias_plugin(core, apps, time_slicing_replicas=2, time_slicing_rename_by_default=True,
                                   time_slicing_fail_requests_greater_than_one=True)
        log = wait("NVIDIA's plugin with the time-slicing configuration", lambda: settled_plugin_log(
            core, namespace, '"renameByDefault": true'), timeout=180)
        assert "Registered device plugin for 'nvidia.com/gpu.shared' with Kubelet" in log, log
        wait("nvidia.com/gpu.shared == 16", lambda: allocatable_gpus(core, NVIDIA_NODE, "nvidia.com/gpu.shared") == 16, timeout=60)
        pod, log = run_pod(core, "nvidia-shared-one", 1, resource="nvidia.com/gpu.shared")
        assert pod.status.phase == "Succeeded" and len(GPU_LINE.findall(log)) == 1, (pod.status, log)
        pod = run_pod(core, "nvidia-shared-two", 2, resource="nvidia.com/gpu.shared")[0]
        assert pod.status.phase == "Failed", pod.status
        assert "maximum request size for shared resources is 1; found 2" in (pod.status.message or ""), pod.status
        # Named configurations (gpu_node_join_device_plugin_named_configs): NVIDIA's config-manager beside the plugin
        # links the configuration the node's label selects and signals the plugin, which restarts in its pod. Pods
        # reach the API server at its address: the lab runs no kube-proxy for the kubernetes Service.
        sharing = dict(time_slicing_replicas=2, time_slicing_rename_by_default=True,
                       time_slicing_fail_requests_greater_than_one=True)
        cluster_objects = reconfigure_nvidias_plugin(
            core, apps, {"dev-shared": sharing}, named_configs=True,
            config_manager_api_server=f"{lab_up.control_plane_ip}:6443")
        log = wait("NVIDIA's plugin with the shared configuration", lambda: settled_plugin_log(
            core, namespace, "Registered device plugin for 'nvidia.com/gpu' with Kubelet"), timeout=180)
        assert '"replicas"' not in log.split("Running with config", 1)[1].split("Registered", 1)[0], log
        wait("nvidia.com/gpu == 8 with the shared configuration", lambda: allocatable_gpus(core, NVIDIA_NODE) == 8, timeout=60)
        pod_uid = the_plugin_pod(core).metadata.uid
        core.patch_node(NVIDIA_NODE, {"metadata": {"labels": {manifests.CONFIG_LABEL: "dev-shared"}}})
        wait("nvidia.com/gpu.shared == 16 once the label selects dev-shared",
             lambda: allocatable_gpus(core, NVIDIA_NODE, "nvidia.com/gpu.shared") == 16, timeout=120)
        pod = the_plugin_pod(core)
        assert pod.metadata.uid == pod_uid, "config-manager switched the plugin in its pod, without a new pod"
        sidecar = core.read_namespaced_pod_log(pod.metadata.name, namespace, container="nvidia-device-plugin-sidecar")
        assert "Successfully updated to config: dev-shared" in sidecar and "Successfully sent signal" in sidecar, sidecar
        plugin_log = core.read_namespaced_pod_log(pod.metadata.name, namespace, container=PLUGIN_CONTAINER)
        assert "Received SIGHUP, restarting." in plugin_log, plugin_log
        core.patch_node(NVIDIA_NODE, {"metadata": {"labels": {manifests.CONFIG_LABEL: None}}})
        wait("nvidia.com/gpu == 8 once the label is gone", lambda: allocatable_gpus(core, NVIDIA_NODE) == 8, timeout=120)
    finally:
        remove_cluster_objects(core, locals().get("cluster_objects") or [])
        for name in ("nvidia-two", "nvidia-sneaky", "nvidia-shared-one", "nvidia-shared-two"):
            try:
                core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
            except ApiException:
                pass
        try:
            core.delete_namespace(namespace)
        except ApiException:
            pass
        node_rm(NVIDIA_NODE)


def test_down_leaves_nothing_behind(lab_nodes: dict[str, NodeSpec], lab_up: LabSettings,
                                    figures: dict[str, Any], cgroups_now: Callable[[], set[str]]) -> None:
    recorded = json.loads(sysctl.record_path().read_text())
    ids = lab_container_ids(lab_nodes)
    this_labs_cgroups = {c for c in cgroups_now() if c.rsplit("/", 1)[-1] in ids}
    assert this_labs_cgroups, "the lab's pods should have cgroups in the machine's hierarchy before down"
    # Other labs (make test's parallel lanes) run the same programs meanwhile: only this lab's containers count.
    owners = ids | docker_ids(*lab_nodes, lab_up.control_plane_name)
    this_labs_processes = {pid: args for pid, (args, owner) in lab_processes().items() if owner in owners}
    kinds = {kind for kind in ("kubelet", "kube-apiserver", "etcd", "plugin.py")
             if any(kind in args for args in this_labs_processes.values())}
    assert kinds == {"kubelet", "kube-apiserver", "etcd", "plugin.py"}, "the lab's components, found by their cgroups"
    started = time.monotonic()
    kube.down()
    figures["down_seconds"] = round(time.monotonic() - started, 1)

    def docker_lines(*argv: str) -> list[str]:
        out = subprocess.run(["docker", *argv], capture_output=True, text=True, check=True).stdout
        return [line for line in out.splitlines() if line.strip()]

    assert docker_lines("ps", "-a", "--filter", f"label={LabSettings.from_env().label}", "--format", "{{.Names}}") == []
    names = [*lab_nodes, lab_up.control_plane_name]
    assert [c for c in docker_lines("ps", "-a", "--format", "{{.Names}}") if c in names] == []
    volumes = docker_lines("volume", "ls", "--format", "{{.Name}}")
    assert [v for v in volumes if v in {s.volume for s in lab_nodes.values()}] == []
    assert lab_up.network not in docker_lines("network", "ls", "--format", "{{.Name}}")
    leftovers = [args for pid, (args, owner) in lab_processes().items()
                 if owner in owners or this_labs_processes.get(pid) == args]
    assert leftovers == []
    assert not lab_up.state_dir.exists()
    if other_labs():  # their kubelets still run with the values; the last lab down restores them
        assert json.loads(sysctl.record_path().read_text()) == recorded
    else:
        assert sysctl.read() == recorded
        assert not sysctl.record_path().exists()
    assert not Path(lab_up.admin_kubeconfig).exists()
    # Other labs (parallel lanes) may create and remove their own pods meanwhile: only this lab's count.
    assert sorted(this_labs_cgroups & cgroups_now()) == [], "the lab's pod cgroups left in the machine's hierarchy"
