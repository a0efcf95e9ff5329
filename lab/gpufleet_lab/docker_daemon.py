"""Make sure a Docker daemon answers: install Debian's docker.io and debootstrap, start dockerd."""
from __future__ import annotations

import os
import shutil
import subprocess
import time

from gpufleet_lab.proc import LabError, run, succeeds

APT_PACKAGES = ("docker.io", "debootstrap", "gnupg")
DOCKERD_LOG = "/var/log/gpufleet-dockerd.log"


def missing_packages() -> list[str]:
    missing = []
    for package in APT_PACKAGES:
        status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, check=False)
        if b"install ok installed" not in status.stdout:
            missing.append(package)
    return missing


def install_packages(packages: list[str]) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", *packages], check=True, env=env)


def daemon_answers() -> bool:
    return succeeds(["docker", "info"])


def start_daemon() -> None:
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise LabError("dockerd not found after installing docker.io")
    with open(DOCKERD_LOG, "ab") as log:
        subprocess.Popen([dockerd], stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)


def wait_for_daemon(timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if daemon_answers():
            return
        time.sleep(1)
    raise LabError(f"the Docker daemon did not answer within {timeout_s:.0f}s; see {DOCKERD_LOG}")


def ensure() -> None:
    missing = missing_packages()
    if missing:
        install_packages(missing)
    if not daemon_answers():
        start_daemon()
        wait_for_daemon()
    run(["docker", "version", "--format", "docker daemon {{.Server.Version}} ready"])
