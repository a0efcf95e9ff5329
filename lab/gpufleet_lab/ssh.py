"""SSH into lab nodes, as a real fleet is reached: the node's own sshd, a key the lab generates, host keys checked.

The lab's scenarios reach their nodes through docker, where a node that dies is a failed task. Over SSH it is an
unreachable host, which no rescue catches: the faults that only show there (a node lost mid-upgrade) are tested
through ``labctl kube node ssh NAME``, which turns on the node's sshd and prints the Ansible variables that reach it.
"""

from __future__ import annotations

from pathlib import Path

from gpufleet_lab import node
from gpufleet_lab.common import LabError, LabSettings, docker_exec, put_file
from gpufleet_lab.proc import run

KEY_NAME = "id_ed25519"
# Host keys are made on each node when its sshd is turned on: the node image carries none, so no two nodes share one.
ENABLE_SCRIPT = (
    "rm -f /etc/ssh/ssh_host_*; ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key; "
    "systemctl enable -q --now ssh.service"
)


def ssh_dir(settings: LabSettings) -> Path:
    return settings.state_dir / "ssh"


def lab_key(settings: LabSettings) -> Path:
    """The lab's private key (made once per lab, mode 0600); its public half is authorised on the nodes."""
    key = ssh_dir(settings) / KEY_NAME
    if not key.is_file():
        key.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"gpufleet-lab-{settings.name}", "-f", str(key)])
    return key


def known_hosts_line(ip: str, host_key: str) -> str:
    """``<ip> <type> <key>`` from the node's ``ssh_host_*_key.pub`` (its comment dropped)."""
    fields = host_key.split()
    if len(fields) < 2 or not fields[0].startswith("ssh-"):
        raise LabError(f"not an SSH public host key: {host_key!r}")
    return f"{ip} {fields[0]} {fields[1]}"


def with_host(known_hosts: str, line: str) -> str:
    """``known_hosts`` with ``line`` as the only entry of its address (a node re-created at that address replaces it)."""
    address = line.split()[0]
    kept = [entry for entry in known_hosts.splitlines() if entry.strip() and entry.split()[0] != address]
    return "\n".join([*kept, line]) + "\n"


def ansible_vars(settings: LabSettings, ip: str) -> dict[str, str]:
    """What reaches the node over SSH: its address, root with the lab's key, host keys checked against the lab's file."""
    known_hosts = ssh_dir(settings) / "known_hosts"
    return {
        "ansible_connection": "ssh",
        "ansible_host": ip,
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(lab_key(settings)),
        "ansible_ssh_common_args": f"-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes",
    }


def enable(name: str) -> dict[str, str]:
    """Turn on node ``name``'s sshd with a fresh host key, authorise the lab's key, record the host key; return the
    Ansible variables that reach the node."""
    settings = LabSettings.from_env()
    spec = next((s for s in node.load_specs(settings) if s.name == name), None)
    if spec is None or not spec.ip:
        raise LabError(f"no lab node {name!r}: add it first (node add)")
    public_key = lab_key(settings).with_suffix(".pub").read_text()
    put_file(name, "/root/.ssh/authorized_keys", public_key, 0o600)
    docker_exec(name, ["chmod", "0700", "/root/.ssh"])
    docker_exec(name, ["sh", "-ec", ENABLE_SCRIPT])
    host_key = docker_exec(name, ["cat", "/etc/ssh/ssh_host_ed25519_key.pub"]).stdout
    known_hosts = ssh_dir(settings) / "known_hosts"
    current = known_hosts.read_text() if known_hosts.is_file() else ""
    known_hosts.write_text(with_host(current, known_hosts_line(spec.ip, host_key)))
    return ansible_vars(settings, spec.ip)
