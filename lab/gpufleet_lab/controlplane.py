"""The lab's Kubernetes control plane: etcd, kube-apiserver, controller-manager, scheduler.

Networking (see lab/README.md): the components run as processes inside one
container, ``gpufleet-lab-control-plane``, attached to the lab's own docker network next to
the node containers. Kubelets reach the API server at the container's address on that
network; the API server reaches kubelets at their container addresses
(``--kubelet-preferred-address-types=InternalIP``); the Ansible controller and the tests reach
it at ``https://127.0.0.1:6443``, a port docker publishes on the loopback address only. Nothing
listens on the machine's external interface.

Each component is started with ``docker exec`` and writes its pid file under
``/var/lib/kubelab/run`` (bind-mounted from the state directory); ``down`` stops exactly those
pids, removes the container, the network and the state.
"""

from __future__ import annotations

import json
import shutil
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from gpufleet_lab import binaries, pki, sysctl
from gpufleet_lab.common import (
    BIN_MOUNT,
    CP_MOUNT,
    LABEL_KEY,
    LabSettings,
    container_running,
    docker_exec,
    docker_exists,
    write_private,
)
from gpufleet_lab.proc import LabError, log, run, wait_for

ETCD_MOUNT = "/opt/kubelab/etcd"
ETCD_HOST_BINARY = Path("/usr/bin/etcd")
COMPONENTS: tuple[str, ...] = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
ADMIN_USER = "gpufleet-lab-admin"


@dataclass(frozen=True)
class Component:
    name: str
    argv: tuple[str, ...]


def etcd_argv() -> list[str]:
    data = f"{CP_MOUNT}/etcd"
    return [
        f"{ETCD_MOUNT}/etcd",
        "--name=lab",
        f"--data-dir={data}",
        "--listen-client-urls=http://127.0.0.1:2379",
        "--advertise-client-urls=http://127.0.0.1:2379",
        "--listen-peer-urls=http://127.0.0.1:2380",
        "--initial-advertise-peer-urls=http://127.0.0.1:2380",
        "--initial-cluster=lab=http://127.0.0.1:2380",
        "--listen-metrics-urls=http://127.0.0.1:2381",
        "--quota-backend-bytes=1073741824",
    ]


def apiserver_argv(settings: LabSettings) -> list[str]:
    p = f"{CP_MOUNT}/pki"
    return [
        f"{BIN_MOUNT}/kube-apiserver",
        "--etcd-servers=http://127.0.0.1:2379",
        "--bind-address=0.0.0.0",  # the container's own namespace: lab network + published loopback port
        "--secure-port=6443",
        f"--advertise-address={settings.control_plane_ip}",
        "--insecure-port=0",
        f"--tls-cert-file={p}/apiserver.crt",
        f"--tls-private-key-file={p}/apiserver.key",
        f"--client-ca-file={p}/ca.crt",
        f"--token-auth-file={p}/tokens.csv",
        f"--service-account-key-file={p}/sa.pub",
        f"--service-account-signing-key-file={p}/sa.key",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--api-audiences=https://kubernetes.default.svc.cluster.local",
        f"--service-cluster-ip-range={settings.service_cidr}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        "--allow-privileged=true",
        "--kubelet-preferred-address-types=InternalIP",
        f"--kubelet-client-certificate={p}/apiserver-kubelet-client.crt",
        f"--kubelet-client-key={p}/apiserver-kubelet-client.key",
        f"--kubelet-certificate-authority={p}/ca.crt",
        "--profiling=false",
        "--v=1",
    ]


def controller_manager_argv(settings: LabSettings) -> list[str]:
    p = f"{CP_MOUNT}/pki"
    return [
        f"{BIN_MOUNT}/kube-controller-manager",
        f"--kubeconfig={CP_MOUNT}/controller-manager.kubeconfig",
        f"--service-account-private-key-file={p}/sa.key",
        f"--root-ca-file={p}/ca.crt",
        "--controllers=*,-nodeipam",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        "--port=0",
        "--use-service-account-credentials=true",  # each controller acts as its own ServiceAccount (RBAC roles system:controller:*)
        f"--service-cluster-ip-range={settings.service_cidr}",
        "--node-monitor-grace-period=40s",
        "--profiling=false",
        "--v=1",
    ]


def scheduler_argv() -> list[str]:
    return [
        f"{BIN_MOUNT}/kube-scheduler",
        f"--kubeconfig={CP_MOUNT}/scheduler.kubeconfig",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        "--port=0",
        "--profiling=false",
        "--v=1",
    ]


def components(settings: LabSettings) -> list[Component]:
    return [
        Component("etcd", tuple(etcd_argv())),
        Component("kube-apiserver", tuple(apiserver_argv(settings))),
        Component("kube-controller-manager", tuple(controller_manager_argv(settings))),
        Component("kube-scheduler", tuple(scheduler_argv())),
    ]


def launch_script(component: Component) -> str:
    """``sh -c`` text that records its pid and becomes the component (pid file = real pid)."""
    quoted = " ".join("'" + arg.replace("'", "'\\''") + "'" for arg in component.argv)
    return (
        f"mkdir -p {CP_MOUNT}/run {CP_MOUNT}/log && echo $$ > {CP_MOUNT}/run/{component.name}.pid && "
        f"exec {quoted} >>{CP_MOUNT}/log/{component.name}.log 2>&1"
    )


# --- state ----------------------------------------------------------------------------------

def _ensure_pki(settings: LabSettings) -> dict[str, str]:
    """CA, serving/client certs, service-account keys and static tokens; return user->token."""
    d = settings.pki_dir
    pki.ensure_ca(d)
    pki.ensure_cert(
        d, "apiserver", "/CN=kube-apiserver", server=True,
        ips=["127.0.0.1", settings.control_plane_ip, settings.kubernetes_service_ip],
        dns=[settings.control_plane_name, "localhost", "kubernetes", "kubernetes.default",
             "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"],
    )
    pki.ensure_cert(d, "apiserver-kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client",
                    client=True)
    pki.ensure_service_account_keys(d)
    tokens_path = d / "tokens.csv"
    if not tokens_path.is_file():
        users = [
            pki.TokenUser(pki.new_token(), ADMIN_USER, "uid-admin", ("system:masters",)),
            pki.TokenUser(pki.new_token(), "system:kube-controller-manager", "uid-kcm"),
            pki.TokenUser(pki.new_token(), "system:kube-scheduler", "uid-sched"),
        ]
        write_private(tokens_path, pki.render_token_file(users))
    return pki.parse_token_file(tokens_path.read_text())


def _write_kubeconfigs(settings: LabSettings, tokens: dict[str, str]) -> None:
    ca = (settings.pki_dir / "ca.crt").read_text()
    pki.write_kubeconfig(settings.admin_kubeconfig, pki.render_kubeconfig(
        cluster="gpufleet-lab", server=settings.api_url, ca_pem=ca, user=ADMIN_USER,
        token=tokens[ADMIN_USER]))
    for name, user in (("controller-manager", "system:kube-controller-manager"),
                       ("scheduler", "system:kube-scheduler")):
        pki.write_kubeconfig(settings.cp_dir / f"{name}.kubeconfig", pki.render_kubeconfig(
            cluster="gpufleet-lab", server="https://127.0.0.1:6443", ca_pem=ca, user=user,
            token=tokens[user]))


def _stage_cp_dir(settings: LabSettings) -> None:
    """Copy what the container needs into its bind-mounted directory."""
    cp_pki = settings.cp_dir / "pki"
    cp_pki.mkdir(parents=True, exist_ok=True)
    settings.cp_dir.chmod(0o700)
    for name in ("ca.crt", "apiserver.crt", "apiserver.key", "apiserver-kubelet-client.crt",
                 "apiserver-kubelet-client.key", "sa.key", "sa.pub", "tokens.csv"):
        shutil.copy2(settings.pki_dir / name, cp_pki / name)
        (cp_pki / name).chmod(0o600)


def admin_token(settings: LabSettings) -> str:
    tokens = pki.parse_token_file((settings.pki_dir / "tokens.csv").read_text())
    return tokens[ADMIN_USER]


# --- API access (stdlib only) ---------------------------------------------------------------

def api_request(
    settings: LabSettings, method: str, path: str, body: object | None = None,
    content_type: str = "application/json", timeout: float = 10.0,
) -> tuple[int, object]:
    """One request to the lab API as the admin; returns (status, decoded JSON or text)."""
    context = ssl.create_default_context(cafile=str(settings.pki_dir / "ca.crt"))
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(settings.api_url + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {admin_token(settings)}")
    if data is not None:
        request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, context=context, timeout=timeout) as response:
            raw = response.read().decode()
            status = response.status
    except urllib.error.HTTPError as error:
        raw = error.read().decode(errors="replace")
        status = error.code
    try:
        return status, json.loads(raw)
    except json.JSONDecodeError:
        return status, raw


def api_ready(settings: LabSettings) -> bool:
    try:
        status, body = api_request(settings, "GET", "/readyz", timeout=3)
    except (OSError, ssl.SSLError):
        return False
    return status == 200 and body == "ok"


# --- container and processes ----------------------------------------------------------------

def ensure_network(settings: LabSettings) -> None:
    if docker_exists("network", settings.network):
        return
    run(["docker", "network", "create", "--driver", "bridge",
         "--subnet", settings.subnet, "--ip-range", settings.node_ip_range,
         "--gateway", settings.gateway, "--label", settings.label, settings.network])


def _ensure_container(settings: LabSettings, bin_dir: Path) -> None:
    name = settings.control_plane_name
    if container_running(name):
        return
    if docker_exists("container", name):
        run(["docker", "rm", "-f", name])
    if not ETCD_HOST_BINARY.is_file():
        raise LabError(f"{ETCD_HOST_BINARY} is missing: install Debian's etcd-server (the build step does)")
    run([
        "docker", "run", "-d", "--name", name, "--hostname", name,
        "--label", settings.label, "--label", f"{LABEL_KEY}.role=control-plane",
        "--network", settings.network, "--ip", settings.control_plane_ip,
        "-p", f"127.0.0.1:{settings.api_host_port}:6443",
        "-v", f"{settings.cp_dir}:{CP_MOUNT}",
        "-v", f"{bin_dir}:{BIN_MOUNT}:ro",
        "-v", f"{ETCD_HOST_BINARY}:{ETCD_MOUNT}/etcd:ro",
        "--entrypoint", "/bin/sh",
        settings.base_image,
        "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done",
    ])


def _pid_alive(settings: LabSettings, component: str) -> bool:
    script = f"p=$(cat {CP_MOUNT}/run/{component}.pid 2>/dev/null) && kill -0 \"$p\" 2>/dev/null"
    return docker_exec(settings.control_plane_name, ["sh", "-c", script], check=False).returncode == 0


def _start(settings: LabSettings, component: Component) -> None:
    if _pid_alive(settings, component.name):
        return
    log(f"starting {component.name}")
    run(["docker", "exec", "-d", settings.control_plane_name, "sh", "-c", launch_script(component)],
        quiet=True)
    time.sleep(0.5)


def _etcd_healthy(settings: LabSettings) -> bool:
    probe = ("import urllib.request,sys;"
             "sys.exit(0 if b'true' in urllib.request.urlopen('http://127.0.0.1:2379/health',timeout=2).read()"
             " else 1)")
    return docker_exec(settings.control_plane_name, ["python3", "-c", probe], check=False).returncode == 0


def _component_log_tail(settings: LabSettings, component: str, lines: int = 30) -> str:
    path = settings.cp_dir / "log" / f"{component}.log"
    if not path.is_file():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def up(timeout: float = 180.0) -> LabSettings:
    """Start (or complete) the control plane; return its settings. Safe to run twice."""
    settings = LabSettings.from_env()
    started = time.monotonic()
    bin_dir = binaries.cached_bin_dir()
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    settings.state_dir.chmod(0o700)
    sysctl.record()
    tokens = _ensure_pki(settings)
    settings.cp_dir.mkdir(parents=True, exist_ok=True)
    _write_kubeconfigs(settings, tokens)
    _stage_cp_dir(settings)
    ensure_network(settings)
    _ensure_container(settings, bin_dir)
    comps = {c.name: c for c in components(settings)}
    _start(settings, comps["etcd"])
    try:
        wait_for("etcd health", lambda: _etcd_healthy(settings), timeout=60, interval=0.5)
    except LabError as error:
        raise LabError(f"{error}\n{_component_log_tail(settings, 'etcd')}") from None
    _start(settings, comps["kube-apiserver"])
    try:
        wait_for("kube-apiserver /readyz", lambda: api_ready(settings), timeout=timeout, interval=1)
    except LabError as error:
        raise LabError(f"{error}\n{_component_log_tail(settings, 'kube-apiserver')}") from None
    _start(settings, comps["kube-controller-manager"])
    _start(settings, comps["kube-scheduler"])
    for name in ("kube-controller-manager", "kube-scheduler"):
        time.sleep(1)
        if not _pid_alive(settings, name):
            raise LabError(f"{name} exited at start:\n{_component_log_tail(settings, name)}")
    _wait_default_service_account(settings)
    log(f"control plane up in {time.monotonic() - started:.1f} s; admin kubeconfig: {settings.admin_kubeconfig}")
    return settings


def _wait_default_service_account(settings: LabSettings) -> None:
    def probe() -> bool:
        status, _body = api_request(settings, "GET", "/api/v1/namespaces/default/serviceaccounts/default")
        return status == 200
    wait_for("the default ServiceAccount (controller-manager working)", probe, timeout=90)


def stop_component(settings: LabSettings, name: str) -> bool:
    """Stop one component by its pid file (TERM, then KILL after 10 s); False when it was not running."""
    pid_file = f"{CP_MOUNT}/run/{name}.pid"
    script = (
        f"p=$(cat {pid_file} 2>/dev/null) || exit 3; kill -TERM \"$p\" 2>/dev/null || exit 4; "
        "i=0; while kill -0 \"$p\" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; "
        "kill -KILL \"$p\" 2>/dev/null; rm -f " + pid_file
    )
    return docker_exec(settings.control_plane_name, ["sh", "-c", script], check=False).returncode == 0


def stop_components(settings: LabSettings) -> list[str]:
    """Stop the components by pid file, in reverse start order; return what was stopped."""
    if not container_running(settings.control_plane_name):
        return []
    return [name for name in reversed(COMPONENTS) if stop_component(settings, name)]


def stop_api_server(settings: LabSettings) -> None:
    """A fault for the tests: the API server goes away, the rest of the lab stays (``up`` starts it again)."""
    if not container_running(settings.control_plane_name) or not stop_component(settings, "kube-apiserver"):
        raise LabError("kube-apiserver is not running: start the lab first (labctl kube up)")
    log("kube-apiserver stopped (labctl kube up starts it again)")


def remove(settings: LabSettings) -> None:
    """Stop the components, remove the container and the network (state is removed by the caller)."""
    stopped = stop_components(settings)
    if stopped:
        log(f"stopped {', '.join(stopped)}")
    if docker_exists("container", settings.control_plane_name):
        run(["docker", "rm", "-f", settings.control_plane_name])
    if docker_exists("network", settings.network):
        run(["docker", "network", "rm", settings.network])


def component_pids(settings: LabSettings) -> dict[str, int]:
    """Pids (in the control-plane container) of the components, from their pid files."""
    pids: dict[str, int] = {}
    for name in COMPONENTS:
        path = settings.cp_dir / "run" / f"{name}.pid"
        if path.is_file():
            pids[name] = int(path.read_text().strip())
    return pids


def exec_in_cp(settings: LabSettings, argv: Sequence[str]) -> str:
    return docker_exec(settings.control_plane_name, list(argv)).stdout
