"""The NVIDIA container toolkit repository of lab nodes: NVIDIA's packages, stand-ins where NVIDIA's code cannot serve.

NVIDIA's repository cannot be reached from the lab, so each node gets a signed local apt repository that
tests/standins/build_toolkit_repo.py builds, at the path and with the key the lab inventory gives
container_toolkit's repository settings, so the role's real repository, keyring, pin and hold code runs. The
repository comes in two flavours signed with one key, the same versions in both:

- ``nvidia``: NVIDIA's own packages (built from the tags' ``packaging/debian`` by ``make nvidia-builds``), with
  STAND-INs for ``libnvidia-container1`` and ``libnvidia-container-tools`` only (not buildable offline; only the
  legacy mode calls them). Nodes whose GPUs NVIDIA's mock NVML serves get it (``gpuprofiles.nvidia_serves``).
- ``standin``: every package a STAND-IN (tests/standins/README.md), for the nodes the mock cannot serve (the MIG
  simulation): NVIDIA's runtime would find no MIG device there.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

from gpufleet_lab import apt_repo, nvidia_builds
from gpufleet_lab.common import REPO_ROOT
from gpufleet_lab.proc import exclusive, log, run

BUILDER = REPO_ROOT / "tests" / "standins" / "build_toolkit_repo.py"
CACHE = Path("/var/cache/gpufleet/standin-toolkit")
NODE_DIR = "/srv/gpufleet-standin-toolkit"
REPO_URL = f"file:{NODE_DIR}/$(ARCH)"
VERSIONS = tuple(f"{version}-{nvidia_builds.TOOLKIT_PACKAGE_REVISION}" for version in nvidia_builds.TOOLKIT_VERSIONS)
FLAVOURS = ("nvidia", "standin")


def _nvidia_debs() -> list[Path]:
    """NVIDIA's packages of each toolkit version, built when ``make nvidia-builds`` has not linked them yet."""
    linked = [nvidia_builds.LINKS / f"toolkit-{version}" for version in nvidia_builds.TOOLKIT_VERSIONS]
    return [(link if (link / "BUILD.json").is_file() else nvidia_builds.ensure_toolkit(version)) / "debs"
            for link, version in zip(linked, nvidia_builds.TOOLKIT_VERSIONS)]


def _key(debs: list[Path]) -> str:
    """The builder's content and NVIDIA's builds (their cache directories are keyed by source)."""
    parts = [BUILDER.read_bytes(), *(str(directory.resolve()).encode() for directory in debs)]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:12]


def ensure_repository() -> Path:
    """Build both flavours once per key; return the directory holding ``nvidia/``, ``standin/`` (each with a
    ``.tar.gz`` beside it) and ``nvidia/gpgkey``, the one key."""
    debs = _nvidia_debs()
    out = CACHE / _key(debs)
    with exclusive(CACHE / ".lock"):
        if not all((out / f"{flavour}.tar.gz").is_file() for flavour in FLAVOURS):
            log("building the lab's NVIDIA container toolkit repository (NVIDIA's packages; stand-ins)")
            shutil.rmtree(out, ignore_errors=True)
            run([sys.executable, str(BUILDER), "--out", str(out / "nvidia"), "--standin-copy", str(out / "standin"),
                 "--versions", *VERSIONS, "--nvidia-debs", *map(str, debs)])
            for flavour in FLAVOURS:
                run(["tar", "-czf", str(out / f"{flavour}.tar.gz"), "-C", str(out / flavour), "."])
        apt_repo.write_fingerprint(out / "nvidia" / "gpgkey")
    return out


def public_key() -> str:
    return (ensure_repository() / "nvidia" / "gpgkey").read_text()


def public_key_fingerprint() -> str:
    """The repository key's fingerprint as gpg read it when the repository was built (``gpgkey.fingerprint``)."""
    return apt_repo.fingerprint_file(ensure_repository() / "nvidia" / "gpgkey").read_text().strip()


def install(container: str, flavour: str) -> None:
    """Unpack the repository's ``flavour`` (nvidia or standin) into the node at NODE_DIR."""
    archive = ensure_repository() / f"{flavour}.tar.gz"
    run(["docker", "exec", container, "mkdir", "-p", NODE_DIR])
    run(["docker", "cp", str(archive), f"{container}:/tmp/gpufleet-standin-toolkit.tar.gz"])
    run(["docker", "exec", container, "tar", "-xzf", "/tmp/gpufleet-standin-toolkit.tar.gz", "-C", NODE_DIR])
    run(["docker", "exec", container, "rm", "-f", "/tmp/gpufleet-standin-toolkit.tar.gz"])
