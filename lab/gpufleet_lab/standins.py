"""The STAND-IN NVIDIA container toolkit repository of lab nodes.

NVIDIA's repository cannot be reached from the lab, so each node gets the signed local apt
repository that tests/standins/build_toolkit_repo.py builds (stand-in packages with the real
names at two versions); the lab inventory points container_toolkit's repository settings at it,
so the role's real repository, keyring, pin and hold code runs.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

from gpufleet_lab import apt_repo
from gpufleet_lab.common import REPO_ROOT
from gpufleet_lab.proc import exclusive, log, run

BUILDER = REPO_ROOT / "tests" / "standins" / "build_toolkit_repo.py"
CACHE = Path("/var/cache/gpufleet/standin-toolkit")
NODE_DIR = "/srv/gpufleet-standin-toolkit"
REPO_URL = f"file:{NODE_DIR}/$(ARCH)"


def _key() -> str:
    return hashlib.sha256(BUILDER.read_bytes()).hexdigest()[:12]


def ensure_repository() -> Path:
    """Build the signed repository once per builder content; return its directory."""
    out = CACHE / _key()
    with exclusive(CACHE / ".lock"):
        if not (out / "gpgkey").is_file() or not out.with_suffix(".tar.gz").is_file():
            log("building the stand-in NVIDIA container toolkit repository")
            shutil.rmtree(out, ignore_errors=True)
            run([sys.executable, str(BUILDER), "--out", str(out), "--archive", str(out.with_suffix(".tar.gz"))])
        apt_repo.write_fingerprint(out / "gpgkey")
    return out


def public_key() -> str:
    return (ensure_repository() / "gpgkey").read_text()


def public_key_fingerprint() -> str:
    """The repository key's fingerprint as gpg read it when the repository was built (``gpgkey.fingerprint``)."""
    return apt_repo.fingerprint_file(ensure_repository() / "gpgkey").read_text().strip()


def install(container: str) -> None:
    """Unpack the repository into the node at NODE_DIR."""
    archive = ensure_repository().with_suffix(".tar.gz")
    run(["docker", "exec", container, "mkdir", "-p", NODE_DIR])
    run(["docker", "cp", str(archive), f"{container}:/tmp/gpufleet-standin-toolkit.tar.gz"])
    run(["docker", "exec", container, "tar", "-xzf", "/tmp/gpufleet-standin-toolkit.tar.gz", "-C", NODE_DIR])
    run(["docker", "exec", container, "rm", "-f", "/tmp/gpufleet-standin-toolkit.tar.gz"])
