"""SSH into lab nodes (ssh.py): the known_hosts entries and what reaches a node, host key checked."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet_lab import ssh
from gpufleet_lab.common import LabError, LabSettings

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKey root@gf-upg-1\n"


def test_a_known_hosts_line_is_the_address_and_the_key() -> None:
    assert ssh.known_hosts_line("172.28.240.10", HOST_KEY) == "172.28.240.10 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKey"


@pytest.mark.parametrize("text", ["", "no key here", "-----BEGIN OPENSSH PRIVATE KEY-----"])
def test_anything_but_a_public_host_key_is_refused(text: str) -> None:
    with pytest.raises(LabError, match="not an SSH public host key"):
        ssh.known_hosts_line("172.28.240.10", text)


def test_a_node_re_created_at_an_address_replaces_its_entry() -> None:
    known = "172.28.240.10 ssh-ed25519 OLD\n172.28.240.11 ssh-ed25519 OTHER\n"
    assert ssh.with_host(known, "172.28.240.10 ssh-ed25519 NEW") == (
        "172.28.240.11 ssh-ed25519 OTHER\n172.28.240.10 ssh-ed25519 NEW\n")
    assert ssh.with_host("", "172.28.240.12 ssh-ed25519 K") == "172.28.240.12 ssh-ed25519 K\n"


def test_the_node_is_reached_as_root_with_the_lab_key_and_its_host_key_checked(tmp_path: Path) -> None:
    settings = LabSettings(state_dir=tmp_path)
    variables = ssh.ansible_vars(settings, "172.28.240.10")
    key = tmp_path / "ssh" / "id_ed25519"
    assert key.is_file() and oct(key.stat().st_mode & 0o777) == "0o600"
    assert variables == {
        "ansible_connection": "ssh", "ansible_host": "172.28.240.10", "ansible_user": "root",
        "ansible_ssh_private_key_file": str(key),
        "ansible_ssh_common_args": f"-o UserKnownHostsFile={tmp_path}/ssh/known_hosts -o StrictHostKeyChecking=yes "
                                   "-o IdentitiesOnly=yes"}
