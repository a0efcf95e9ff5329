"""Lab nodes: systemd containers with containerd, a CNI bridge and a real kubelet.

Each node is a container on the lab's docker network (own network namespace and address),
``/var/lib/containerd`` on a docker volume (overlayfs cannot stack on the container's overlay
root), the simulated GPU host for its profile, the pod images imported into its containerd, and
a kubelet (bind-mounted from the build cache) that registers the Node with a client certificate
``system:node:<name>`` and serves with a certificate for its container address.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from gpufleet_lab import binaries, controlplane, gpuprofiles, kube_images, package_mirror, pki, standins
from gpufleet_lab.common import (
    BIN_MOUNT,
    LABEL_KEY,
    LabSettings,
    container_ip,
    container_running,
    docker_exec,
    docker_exists,
    put_file,
    validate_node_name,
)
from gpufleet_lab.proc import LabError, log, run, wait_for

DEFAULT_KUBELET_ROOT = "/var/lib/kubelet"
DEFAULT_DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
KUBELET_BASE_PORT = 10250
NODE_PKI = "/etc/kubernetes/pki"
KUBELET_KUBECONFIG = "/etc/kubernetes/kubelet.conf"
CNI_BIN_DIR = "/usr/lib/cni"  # Debian's containernetworking-plugins
POD_IMAGES_TMP = "/var/lib/containerd/gpufleet-lab-pod-kube_images.tar"
PROFILE_LABEL = "gpufleet.lab/gpu-profile"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    gpu_profile: str
    kubelet_root_dir: str
    index: int
    ip: str = ""
    # where this kubelet serves kubelet.sock, observed after it started (see device_plugin_dir_candidates)
    device_plugin_dir: str = ""
    # NVIDIA's toolkit and device plugin run on the node's SIMULATED GPUs (gpuprofiles.nvidia_refusal); else stand-ins
    nvidia_software: bool = False

    @property
    def kubelet_port(self) -> int:
        return KUBELET_BASE_PORT + self.index

    @property
    def bridge(self) -> str:
        return f"gflab{self.index}"

    def pod_subnet(self, settings: LabSettings) -> str:
        return f"{settings.pod_cidr_prefix}.{self.index}.0/24"

    @property
    def volume(self) -> str:
        return f"{self.name}-containerd"

    @property
    def root_device_plugin_dir(self) -> str:
        """``<kubelet root dir>/device-plugins``: where a plugin would look if it followed --root-dir."""
        return str(PurePosixPath(self.kubelet_root_dir) / "device-plugins")


def device_plugin_dir_candidates(kubelet_root_dir: str) -> list[str]:
    """Where a kubelet may serve its device-plugin registration socket, most specific first.

    Upstream kubelet 1.20 serves it at the fixed ``/var/lib/kubelet/device-plugins/kubelet.sock``
    whatever ``--root-dir`` says (pluginapi.KubeletSocket); a kubelet that follows its root
    dir would serve it under ``<root>/device-plugins``. The lab observes which one it is.
    """
    candidates = [str(PurePosixPath(kubelet_root_dir) / "device-plugins"), DEFAULT_DEVICE_PLUGIN_DIR]
    return list(dict.fromkeys(candidates))


def validate_kubelet_root_dir(value: str | None) -> str:
    if value is None or value == "":
        return DEFAULT_KUBELET_ROOT
    path = PurePosixPath(value)
    if not path.is_absolute() or ".." in path.parts or str(path) in ("/", "/proc", "/sys", "/dev", "/run"):
        raise LabError(
            f"kubelet_root_dir={value!r} is not allowed: use an absolute directory such as "
            f"{DEFAULT_KUBELET_ROOT} or /data/kubelet (no '..', not a system directory)"
        )
    return str(path)


def next_index(used: set[int], limit: int = 250) -> int:
    for index in range(1, limit):
        if index not in used:
            return index
    raise LabError(f"no free node index below {limit}: remove nodes first")


def containerd_config() -> str:
    """Minimal containerd 1.6 config (version 2) for a lab node.

    ``restrict_oom_score_adj``: without CAP_SYS_RESOURCE runc cannot lower the sandbox's
    oom_score_adj; ``sandbox_image``: the pause image imported from the lab build.
    """
    return (
        "# Managed by the gpufleet lab (lab node; the containerd_nvidia role owns real nodes).\n"
        "version = 2\n"
        "\n"
        '[plugins."io.containerd.grpc.v1.cri"]\n'
        f'  sandbox_image = "docker.io/{kube_images.PAUSE_IMAGE}"\n'
        "  restrict_oom_score_adj = true\n"
        "\n"
        '[plugins."io.containerd.grpc.v1.cri".cni]\n'
        f'  bin_dir = "{CNI_BIN_DIR}"\n'
        '  conf_dir = "/etc/cni/net.d"\n'
    )


def cni_conflist(spec: NodeSpec, settings: LabSettings) -> str:
    config = {
        "cniVersion": "0.4.0",
        "name": "gpufleet-lab",
        "plugins": [
            {
                "type": "bridge",
                "bridge": spec.bridge,
                "isGateway": True,
                "ipMasq": True,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": spec.pod_subnet(settings)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(config, indent=2) + "\n"


def kubelet_flags(spec: NodeSpec) -> list[str]:
    """Flags of the node's kubelet 1.20 (LAB.md: what a kubelet needs in a lab container)."""
    if not spec.ip:
        raise LabError(f"node {spec.name}: kubelet flags need the container address (node IP)")
    return [
        f"--kubeconfig={KUBELET_KUBECONFIG}",
        "--container-runtime=remote",
        "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
        f"--pod-infra-container-image={kube_images.PAUSE_IMAGE}",
        f"--hostname-override={spec.name}",
        f"--node-ip={spec.ip}",
        f"--node-labels={PROFILE_LABEL}={spec.gpu_profile}",
        f"--root-dir={spec.kubelet_root_dir}",
        f"--port={spec.kubelet_port}",
        "--read-only-port=0",
        f"--address={spec.ip}",
        f"--tls-cert-file={NODE_PKI}/kubelet-serving.crt",
        f"--tls-private-key-file={NODE_PKI}/kubelet-serving.key",
        f"--client-ca-file={NODE_PKI}/ca.crt",
        "--anonymous-auth=false",
        "--authorization-mode=Webhook",
        "--cgroup-driver=cgroupfs",
        "--fail-swap-on=false",
        "--cgroups-per-qos=false",
        "--enforce-node-allocatable=",
        "--image-gc-high-threshold=100",
        "--eviction-hard=",
        "--resolv-conf=/etc/resolv.conf",
        "--v=1",
    ]


def kubelet_unit(spec: NodeSpec) -> str:
    args = " \\\n    ".join(kubelet_flags(spec))
    return (
        "# Managed by the gpufleet lab.\n"
        "[Unit]\n"
        "Description=kubelet (gpufleet lab node)\n"
        "After=containerd.service\n"
        "Requires=containerd.service\n"
        "\n"
        "[Service]\n"
        f"ExecStart={BIN_MOUNT}/kubelet \\\n    {args}\n"
        "Restart=always\n"
        "RestartSec=2\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


# --- state ----------------------------------------------------------------------------------

def _spec_path(settings: LabSettings, name: str) -> Path:
    return settings.nodes_dir / f"{name}.json"


def load_specs(settings: LabSettings) -> list[NodeSpec]:
    if not settings.nodes_dir.is_dir():
        return []
    return [NodeSpec(**json.loads(p.read_text())) for p in sorted(settings.nodes_dir.glob("*.json"))]


@contextlib.contextmanager
def nodes_lock(settings: LabSettings) -> Iterator[None]:
    """Held while a node takes its index, gets its certificates, and while the inventory is written: node adds may run
    at once."""
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    with open(settings.state_dir / "nodes.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _save_spec(settings: LabSettings, spec: NodeSpec) -> None:
    """Write the spec in one rename: another node's add reads every spec while this one may be writing."""
    settings.nodes_dir.mkdir(parents=True, exist_ok=True)
    path = _spec_path(settings, spec.name)
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    staged.write_text(json.dumps(asdict(spec), indent=2) + "\n")
    staged.replace(path)


# --- node lifecycle -------------------------------------------------------------------------

def _run_container(settings: LabSettings, spec: NodeSpec, image: str, bin_dir: Path) -> None:
    run([
        "docker", "run", "-d", "--name", spec.name, "--hostname", spec.name,
        "--label", settings.label, "--label", f"{LABEL_KEY}.role=node",
        "--network", settings.network,
        "--cap-add", "SYS_ADMIN", "--cap-add", "NET_ADMIN", "--cap-add", "SYSLOG",
        "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
        "--security-opt", "systempaths=unconfined",
        "--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
        "--tmpfs", "/run", "--tmpfs", "/run/lock",
        "--device", "/dev/kmsg",
        "-v", f"{spec.volume}:/var/lib/containerd",
        "-v", f"{bin_dir / 'kubelet'}:{BIN_MOUNT}/kubelet:ro",
        *package_mirror.docker_volume(),
        image,
    ])


def _systemd_up(name: str) -> bool:
    result = docker_exec(name, ["systemctl", "is-system-running"], check=False)
    return result.stdout.strip() in ("running", "degraded")


def _node_files(settings: LabSettings, spec: NodeSpec) -> dict[str, tuple[str, int]]:
    d = settings.pki_dir
    client_crt, client_key = pki.ensure_cert(
        d, f"node-{spec.name}", f"/O=system:nodes/CN=system:node:{spec.name}", client=True)
    serving_crt, serving_key = pki.ensure_cert(
        d, f"kubelet-serving-{spec.name}-{spec.ip}", f"/CN={spec.name}", server=True,
        ips=[spec.ip], dns=[spec.name])
    ca = (d / "ca.crt").read_text()
    kubeconfig = pki.render_kubeconfig(
        cluster="gpufleet-lab", server=settings.in_network_api_url, ca_pem=ca, user=f"system:node:{spec.name}",
        client_cert_pem=client_crt.read_text(), client_key_pem=client_key.read_text())
    return {
        "/etc/containerd/config.toml": (containerd_config(), 0o644),
        "/etc/cni/net.d/10-gpufleet-lab.conflist": (cni_conflist(spec, settings), 0o644),
        f"{NODE_PKI}/ca.crt": (ca, 0o644),
        f"{NODE_PKI}/kubelet-serving.crt": (serving_crt.read_text(), 0o644),
        f"{NODE_PKI}/kubelet-serving.key": (serving_key.read_text(), 0o600),
        KUBELET_KUBECONFIG: (kubeconfig, 0o600),
        "/etc/systemd/system/kubelet.service": (kubelet_unit(spec), 0o644),
    }


def _import_pod_images(name: str, archive: Path) -> None:
    run(["docker", "cp", str(archive), f"{name}:{POD_IMAGES_TMP}"], quiet=True)
    try:
        docker_exec(name, ["ctr", "-n", "k8s.io", "images", "import", POD_IMAGES_TMP], timeout=600)
    finally:
        docker_exec(name, ["rm", "-f", POD_IMAGES_TMP], check=False)


# dpkg runs this after every run (dpkg.cfg(5) post-invoke): a driver package that wrote its own libnvidia-ml.so.<version>
# gets the mock in its place again (gpusim follow_exposure), at the loaded module's version.
DPKG_FOLLOW = ("# The lab's SIMULATED GPUs, exposed to NVIDIA's software (lab/gpusim: follow_exposure)\n"
               "post-invoke=/opt/gpusim/bin/gpusim expose --follow\n")


def _expose_to_nvidia_software(name: str) -> None:
    """From now on NVIDIA's software on the node reads the SIMULATED GPUs: the mock NVML in the driver library's place
    once a driver is installed and its module loaded, again after each module load and each dpkg run."""
    put_file(name, "/etc/dpkg/dpkg.cfg.d/gpusim-expose", DPKG_FOLLOW, 0o644)
    docker_exec(name, ["/opt/gpusim/bin/gpusim", "expose", "--enable"])


def _import_device_plugin(settings: LabSettings, name: str, nvidia_software: bool) -> None:
    """NVIDIA's device plugin image under the reference the lab inventory gives the role. Where NVIDIA's code cannot
    serve the SIMULATED GPUs (MIG), the node's containerd holds the SIMULATED plugin under that reference instead."""
    reference = f"docker.io/{kube_images.LAB_PLUGIN_IMAGE}"
    if nvidia_software:
        _import_pod_images(name, kube_images.nvidia_plugin_archive(settings, kube_images.LAB_PLUGIN_VERSION))
    else:
        docker_exec(name, ["ctr", "-n", "k8s.io", "images", "tag", "--force",
                           f"docker.io/{kube_images.DEVICE_PLUGIN_IMAGE}", reference])


def _node_status(settings: LabSettings, name: str) -> dict[str, Any] | None:
    status, body = controlplane.api_request(settings, "GET", f"/api/v1/nodes/{name}")
    return body if status == 200 and isinstance(body, dict) else None


def node_ready(settings: LabSettings, name: str) -> bool:
    node = _node_status(settings, name)
    if node is None:
        return False
    conditions = node.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def node_add(name: str, gpu_profile: str, kubelet_root_dir: str | None = None,
             timeout: float = 180.0, userspace: str = "host") -> NodeSpec:
    """Create node ``name`` with the simulated GPUs of ``gpu_profile``; wait until Ready."""
    settings = LabSettings.from_env()
    started = time.monotonic()
    validate_node_name(name)
    root_dir = validate_kubelet_root_dir(kubelet_root_dir)
    profile = gpuprofiles.find_profile(gpu_profile)
    if name == settings.control_plane_name:
        raise LabError(f"node name {name!r} is the control-plane container's name: choose another")
    if not (settings.pki_dir / "tokens.csv").is_file() or not controlplane.api_ready(settings):
        raise LabError("the lab control plane is not up: run `up` first")
    bin_dir = binaries.cached_bin_dir()
    image = kube_images.ensure_node_image(settings)
    archive = kube_images.ensure_pod_images(settings)
    refusal = gpuprofiles.nvidia_refusal(profile, userspace)
    with nodes_lock(settings):
        existing = {s.name: s for s in load_specs(settings)}
        if name in existing and container_running(name) and node_ready(settings, name):
            spec = existing[name]
            if spec.gpu_profile != gpu_profile or spec.kubelet_root_dir != root_dir:
                raise LabError(
                    f"node {name} exists with gpu_profile={spec.gpu_profile!r} kubelet_root_dir={spec.kubelet_root_dir!r}: "
                    "remove it first (node rm) to change them")
            log(f"node {name} is already Ready")
            return spec
        if docker_exists("container", name) and name not in existing:
            raise LabError(f"a container named {name!r} exists and is not a lab node: choose another name")
        used = {s.index for s in existing.values() if s.name != name}
        index = existing[name].index if name in existing else next_index(used)
        spec = NodeSpec(name=name, gpu_profile=gpu_profile, kubelet_root_dir=root_dir, index=index,
                        nvidia_software=refusal is None)
        _save_spec(settings, spec)
    if refusal:
        log(f"node {name}: STAND-INs of NVIDIA's toolkit and device plugin ({refusal})")
    if docker_exists("container", name):
        run(["docker", "rm", "-f", name])
    _run_container(settings, spec, image, bin_dir)
    wait_for(f"systemd in {name}", lambda: _systemd_up(name), timeout=60)
    spec = NodeSpec(name=name, gpu_profile=gpu_profile, kubelet_root_dir=root_dir, index=index,
                    ip=container_ip(name, settings.network), nvidia_software=spec.nvidia_software)
    _save_spec(settings, spec)
    gpuprofiles.install(name, profile, userspace)
    standins.install(name, "nvidia" if spec.nvidia_software else "standin")
    if spec.nvidia_software:
        _expose_to_nvidia_software(name)
    with nodes_lock(settings):  # the node's certificates: openssl keeps the CA's serial in one file (ca.srl)
        files = _node_files(settings, spec)
    for path, (content, mode) in files.items():
        put_file(name, path, content, mode)
    docker_exec(name, ["systemctl", "restart", "containerd"])
    wait_for(f"containerd in {name}", lambda: docker_exec(
        name, ["ctr", "version"], check=False).returncode == 0, timeout=60)
    _import_pod_images(name, archive)
    _import_device_plugin(settings, name, spec.nvidia_software)
    docker_exec(name, ["systemctl", "daemon-reload"])
    docker_exec(name, ["systemctl", "enable", "--now", "kubelet"])
    try:
        wait_for(f"Node {name} Ready", lambda: node_ready(settings, name), timeout=timeout, interval=2)
    except LabError as error:
        journal = docker_exec(name, ["journalctl", "-u", "kubelet", "--no-pager", "-n", "40"], check=False).stdout
        raise LabError(f"{error}\nkubelet journal:\n{journal}") from None
    plugin_dir = wait_for(f"the device-plugin socket of {name}'s kubelet", lambda: _observe_plugin_dir(name, root_dir),
                          timeout=60)
    spec = NodeSpec(name=name, gpu_profile=gpu_profile, kubelet_root_dir=root_dir, index=index, ip=spec.ip,
                    device_plugin_dir=plugin_dir, nvidia_software=spec.nvidia_software)
    _save_spec(settings, spec)
    software = "NVIDIA's toolkit and plugin" if spec.nvidia_software else "stand-ins"
    log(f"node {name} ({gpu_profile}, {software}, kubelet root {root_dir}, device plugins {plugin_dir}, {spec.ip}) Ready in "
        f"{time.monotonic() - started:.1f} s")
    return spec


def _observe_plugin_dir(name: str, root_dir: str) -> str | None:
    for candidate in device_plugin_dir_candidates(root_dir):
        if docker_exec(name, ["test", "-S", f"{candidate}/kubelet.sock"], check=False).returncode == 0:
            return candidate
    return None


def node_rm(name: str) -> bool:
    """Remove node ``name``: the Node object, its container, volume, certificates, state."""
    settings = LabSettings.from_env()
    validate_node_name(name)
    spec_path = _spec_path(settings, name)
    known = spec_path.is_file()
    if not known and not _is_lab_container(name):
        log(f"node {name} is not a lab node: nothing to remove")
        return False
    if container_running(name):
        _stop_pods(name)
    if docker_exists("container", name):
        run(["docker", "rm", "-f", "-v", name])
    if (settings.pki_dir / "tokens.csv").is_file() and controlplane.api_ready(settings):
        controlplane.api_request(settings, "DELETE", f"/api/v1/nodes/{name}")
    volume = f"{name}-containerd"
    if docker_exists("volume", volume):
        run(["docker", "volume", "rm", volume])
    for cert in list(settings.pki_dir.glob(f"node-{name}.*")) + list(settings.pki_dir.glob(f"kubelet-serving-{name}-*")):
        cert.unlink()
    spec_path.unlink(missing_ok=True)
    return True


STOP_PODS_SCRIPT = (
    "systemctl stop kubelet 2>/dev/null; "
    "for t in $(ctr -n k8s.io tasks ls -q 2>/dev/null); do ctr -n k8s.io tasks delete -f \"$t\" >/dev/null 2>&1; done; "
    "ctr -n k8s.io tasks ls -q 2>/dev/null | wc -l"
)


def _stop_pods(name: str) -> None:
    """Stop the kubelet and delete every pod task, so runc removes their cgroups.

    With ``--cgroupns=host`` the pods' cgroups live in the machine's hierarchy
    (``/sys/fs/cgroup/*/k8s.io/<id>``); removing the node container alone would kill the
    processes but leave those directories behind.
    """
    result = docker_exec(name, ["sh", "-c", STOP_PODS_SCRIPT], check=False, timeout=120)
    left = result.stdout.strip()
    if left not in ("", "0"):
        log(f"node {name}: {left} pod tasks still listed after delete")


def _is_lab_container(name: str) -> bool:
    """A node container of this lab (GPUFLEET_LAB_NAME), never another lab's."""
    fmt = "{{index .Config.Labels \"" + LABEL_KEY + ".role\"}} {{index .Config.Labels \"" + LABEL_KEY + "\"}}"
    result = run(["docker", "inspect", "-f", fmt, name], check=False, quiet=True)
    return result.returncode == 0 and result.stdout.split() == ["node", LabSettings.from_env().name]


def lab_containers(role: str | None = None) -> list[str]:
    """This lab's containers (all, or those of one role); docker ANDs the label filters."""
    filters = ["--filter", f"label={LabSettings.from_env().label}"]
    if role:
        filters += ["--filter", f"label={LABEL_KEY}.role={role}"]
    out = run(["docker", "ps", "-a", *filters, "--format", "{{.Names}}"], quiet=True).stdout
    return [line for line in out.splitlines() if line]


def other_labs() -> set[str]:
    """Names of the other Kubernetes labs on this machine that still have a node or control plane (make test runs
    several side by side). Molecule's plain scenario hosts carry ``gpufleet.lab=molecule`` but no role: no kubelet."""
    out = run(["docker", "ps", "-a", "--filter", f"label={LABEL_KEY}.role",
               "--format", "{{.Label \"" + LABEL_KEY + "\"}}"], quiet=True).stdout
    return {line for line in out.splitlines() if line} - {LabSettings.from_env().name}
