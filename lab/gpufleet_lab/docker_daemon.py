"""Make sure a Docker daemon answers: install what the lab needs from Debian (docker.io, debootstrap, gnupg, the SSH
client), start dockerd."""
from __future__ import annotations

import shutil
import subprocess

from gpufleet_lab.proc import LabError, host_apt, run, succeeds, wait_for

# openssh-client: the lab reaches nodes over SSH where a test needs it (ssh.py)
APT_PACKAGES = ("docker.io", "debootstrap", "gnupg", "openssh-client")
DOCKERD_LOG = "/var/log/gpufleet-dockerd.log"


def missing_packages() -> list[str]:
    missing = []
    for package in APT_PACKAGES:
        status = run(["dpkg-query", "-W", "-f=${Status}", package], check=False, quiet=True)
        if "install ok installed" not in status.stdout:
            missing.append(package)
    return missing


def install_packages(packages: list[str]) -> None:
    host_apt("update", "-qq", capture=False)
    host_apt("install", "-y", "-qq", *packages, capture=False)


def daemon_answers() -> bool:
    return succeeds(["docker", "info"])


def start_daemon() -> None:
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise LabError("dockerd not found after installing docker.io")
    with open(DOCKERD_LOG, "ab") as log:
        subprocess.Popen([dockerd], stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)


def wait_for_daemon(timeout_s: float = 90.0) -> None:
    wait_for(f"the Docker daemon to answer (see {DOCKERD_LOG})", daemon_answers, timeout_s)


def ensure() -> None:
    missing = missing_packages()
    if missing:
        install_packages(missing)
    if not daemon_answers():
        start_daemon()
        wait_for_daemon()
    run(["docker", "version", "--format", "docker daemon {{.Server.Version}} ready"], capture=False)
