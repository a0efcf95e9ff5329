"""Settings, paths and docker helpers of the Kubernetes lab (processes: gpufleet_lab.proc)."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from gpufleet_lab.proc import LabError, run, succeeds


LABEL_KEY = "gpufleet.lab"
LABEL_VALUE = "kube"  # the default lab's name (GPUFLEET_LAB_NAME)
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class LabSettings:
    """Where the lab keeps its state and how its network is laid out.

    Every value can be overridden through the environment (``GPUFLEET_LAB_*``) so that a
    second lab or CI can move it; the defaults are what tests and the demo use.
    """

    name: str = "kube"
    state_dir: Path = Path("/var/lib/gpufleet-lab/kube")
    network: str = "gpufleet-lab-kube"
    subnet: str = "172.28.240.0/24"
    control_plane_name: str = "gpufleet-lab-control-plane"
    api_host_port: int = 6443
    base_image: str = "gpufleet-lab/node:bookworm"
    service_cidr: str = "10.96.0.0/16"
    pod_cidr_prefix: str = "10.244"
    extra: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "LabSettings":
        env = os.environ if env is None else env
        name = env.get("GPUFLEET_LAB_NAME", cls.name)
        if not LAB_NAME_RE.match(name):
            raise LabError(f"GPUFLEET_LAB_NAME={name!r}: use 1-20 lower-case letters, digits and '-', starting with a letter")
        # A second lab (GPUFLEET_LAB_NAME) gets its own state, network and control-plane container by default;
        # its subnet and API port must be given (GPUFLEET_LAB_SUBNET, GPUFLEET_LAB_API_PORT).
        defaults = cls() if name == cls.name else cls(
            name=name, state_dir=Path(f"/var/lib/gpufleet-lab/{name}"), network=f"gpufleet-lab-{name}",
            control_plane_name=f"gpufleet-lab-{name}-control-plane")
        port_text = env.get("GPUFLEET_LAB_API_PORT", str(defaults.api_host_port))
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            raise LabError(
                f"GPUFLEET_LAB_API_PORT={port_text!r} is not a TCP port: use an integer 1-65535"
            )
        subnet = env.get("GPUFLEET_LAB_SUBNET", defaults.subnet)
        try:
            net = ipaddress.ip_network(subnet)
        except ValueError as error:
            raise LabError(f"GPUFLEET_LAB_SUBNET={subnet!r} is not an IP network: {error}") from None
        if net.version != 4 or net.prefixlen > 28:
            raise LabError(f"GPUFLEET_LAB_SUBNET={subnet!r}: use an IPv4 network of /28 or larger")
        return cls(
            name=name,
            control_plane_name=defaults.control_plane_name,
            state_dir=Path(env.get("GPUFLEET_LAB_STATE_DIR", str(defaults.state_dir))),
            network=env.get("GPUFLEET_LAB_NETWORK", defaults.network),
            subnet=subnet,
            api_host_port=int(port_text),
            base_image=env.get("GPUFLEET_LAB_BASE_IMAGE", defaults.base_image),
        )

    @property
    def label(self) -> str:
        """The docker label of this lab's containers and network (``gpufleet.lab=<name>``)."""
        return f"{LABEL_KEY}={self.name}"

    @property
    def gateway(self) -> str:
        return str(next(ipaddress.ip_network(self.subnet).hosts()))

    @property
    def control_plane_ip(self) -> str:
        hosts = ipaddress.ip_network(self.subnet).hosts()
        next(hosts)
        return str(next(hosts))

    @property
    def node_ip_range(self) -> str:
        """Docker hands node addresses out of the upper half, away from the control plane."""
        net = ipaddress.ip_network(self.subnet)
        return str(list(net.subnets(prefixlen_diff=1))[1])

    @property
    def kubernetes_service_ip(self) -> str:
        return str(next(ipaddress.ip_network(self.service_cidr).hosts()))

    @property
    def pki_dir(self) -> Path:
        return self.state_dir / "pki"

    @property
    def cp_dir(self) -> Path:
        """Bind-mounted into the control-plane container at ``CP_MOUNT``."""
        return self.state_dir / "control-plane"

    @property
    def nodes_dir(self) -> Path:
        return self.state_dir / "nodes"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.state_dir / "admin.kubeconfig"

    @property
    def node_kubeconfig(self) -> Path:
        """The playbooks' restricted identity (playbooks/access.yml writes it; the inventory points at it)."""
        return self.state_dir / "gpufleet-node.kubeconfig"

    @property
    def api_url(self) -> str:
        return f"https://127.0.0.1:{self.api_host_port}"

    @property
    def in_network_api_url(self) -> str:
        return f"https://{self.control_plane_ip}:6443"


CP_MOUNT = "/var/lib/kubelab"
BIN_MOUNT = "/opt/kubelab/bin"
LAB_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
NODE_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$")


def docker_exists(kind: str, name: str) -> bool:
    return succeeds(["docker", kind, "inspect", name])


def container_running(name: str) -> bool:
    result = run(["docker", "inspect", "-f", "{{.State.Running}}", name], check=False, quiet=True)
    return result.returncode == 0 and result.stdout.strip() == "true"


def container_ip(name: str, network: str) -> str:
    fmt = "{{json .NetworkSettings.Networks}}"
    networks = json.loads(run(["docker", "inspect", "-f", fmt, name], quiet=True).stdout)
    address = (networks.get(network) or {}).get("IPAddress")
    if not address:
        raise LabError(f"container {name} has no address on docker network {network}")
    return str(address)


def docker_exec(
    container: str, argv: Sequence[str], *, check: bool = True, input_text: str | None = None,
    quiet: bool = True, timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    flags = ["-i"] if input_text is not None else []
    return run(["docker", "exec", *flags, container, *argv], check=check, input_text=input_text,
               quiet=quiet, timeout=timeout)


def put_file(container: str, path: str, content: str, mode: int = 0o644) -> None:
    """Write ``content`` to ``path`` inside a running container."""
    script = f'mkdir -p "$(dirname "{path}")" && cat > "{path}" && chmod {mode:o} "{path}"'
    docker_exec(container, ["sh", "-c", script], input_text=content)


def write_private(path: Path, content: str, mode: int = 0o600) -> None:
    """Write a file created with ``mode`` from the start (no window with wider rights)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as handle:
        handle.write(content)
    os.chmod(path, mode)


def replace_link(link: Path, target: Path) -> None:
    """Point ``link`` at ``target`` in one rename: a concurrent reader sees the old link or the new one."""
    link.parent.mkdir(parents=True, exist_ok=True)
    staged = link.with_name(f"{link.name}.{os.getpid()}")
    staged.unlink(missing_ok=True)
    staged.symlink_to(target)
    staged.replace(link)


def validate_node_name(name: str) -> str:
    if not NODE_NAME_RE.match(name):
        raise LabError(
            f"node name {name!r} is not allowed: use 1-42 lower-case letters, digits and '-', "
            "starting and ending with a letter or digit (it names the container and the Node)"
        )
    return name
