"""The lab's package mirror: a local signed apt repository of the packages the tests pin.

Debian's archive moves: a point release replaces the driver of the bookworm suite, and a version the tests
pinned is gone from every suite. So the lab fetches, once per set of versions, the NVIDIA driver's packages
(every driver version of one branch that bookworm's suites offer: the release, backports, security) and
containerd's into one signed repository under ``/var/cache/gpufleet/package-mirror/<key>/``, where the key
is the versions it holds. Its ``versions.yml`` is the one place the test versions are chosen, from what the
archive offered the day the mirror was built: the three newest driver versions (``previous``,
``current``, ``newest``) and bookworm's containerd. ``.build/package-mirror`` points at the mirror in use.

A second suite, FAULT_SUITE, holds one SIMULATED fault: Debian's own nvidia-modprobe of the newest driver,
rebuilt at another version with a post-installation script that fails (as a DKMS build failing in
nvidia-kernel-dkms's does). ``versions.yml``'s ``faults`` names it; a test adds the suite and pins that version
to make apt and dpkg fail half-way through a driver change.

Lab nodes and scenario hosts mount it read-only at NODE_DIR, and the roles reach it through their documented
mirror settings (``nvidia_driver_source: mirror``, ``containerd_nvidia_repo_*``): the air-gapped path. The roles
check its key against ``gpgkey.fingerprint``, gpg's reading of the key the mirror was signed with.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
import urllib.parse
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Iterable, Sequence

import yaml

from gpufleet_lab import apt_mirror, apt_repo
from gpufleet_lab.common import REPO_ROOT, replace_link
from gpufleet_lab.proc import LabError, exclusive, log, run, succeeds

CACHE = Path("/var/cache/gpufleet/package-mirror")
LINK = REPO_ROOT / ".build" / "package-mirror"
NODE_DIR = "/srv/gpufleet-package-mirror"
URL = f"file://{NODE_DIR}"
SUITE = "gpufleet-lab"
# apt refuses two sources of one URI and suite with different Signed-By values, and each role names a keyring file
# of its own: each role gets a suite of its own over the same pool.
CONTAINERD_SUITE = "gpufleet-lab-containerd"
FAULT_SUITE = "gpufleet-lab-faults"
FAULT_PACKAGE = "nvidia-modprobe"
FAULT_VERSION_SUFFIX = "+gpufleet.postinst.fails1"
FAULT_COMPONENT_DIR = "faults"
COMPONENT = "main"
ARCH = "amd64"
BUILDER_REVISION = 3
NODE_IMAGE = "gpufleet-lab/node:bookworm"
KEY_UID = apt_repo.KEY_UID_FORMAT.format(what="package mirror")

RELEASE = "bookworm"
SUITES = (RELEASE, f"{RELEASE}-updates", f"{RELEASE}-backports")
SECURITY_SUITE = f"{RELEASE}-security"
COMPONENTS = ("main", "contrib", "non-free", "non-free-firmware")
DRIVER_BRANCH = "535"
DRIVER_PRIMARY = "nvidia-smi"
# Packages of their own source with their own versions: the newest at or below the driver's version.
SEPARATELY_VERSIONED = ("nvidia-persistenced", "nvidia-modprobe")
DRIVER_ROLES = ("previous", "current", "newest")
CONTAINERD = "containerd"
ROLE_CATALOG = REPO_ROOT / "roles" / "nvidia_driver" / "vars" / "Debian.yml"


@dataclass(frozen=True)
class Offer:
    """One version of a package as ``apt-cache madison`` lists it."""

    version: str
    suite: str


def compare_versions(left: str, right: str) -> int:
    """dpkg's order of two Debian versions: negative, zero or positive."""
    if left == right:
        return 0
    return -1 if succeeds(["dpkg", "--compare-versions", left, "lt", right]) else 1


def upstream(version: str) -> str:
    """``535.216.03-2~bpo12+1`` -> ``535.216.03``."""
    return version.split(":", 1)[-1].rsplit("-", 1)[0]


def parse_madison(text: str) -> list[Offer]:
    """``apt-cache madison`` lines: ``name | version | uri suite/component arch Packages``."""
    offers = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split("|")]
        if len(fields) == 3 and fields[2].endswith("Packages"):
            offers.append(Offer(fields[1], fields[2].split()[1].split("/")[0]))
    return offers


def userspace_packages() -> list[str]:
    """The driver packages the role installs with kernel module ``none``: its Debian catalog, one source."""
    return list(yaml.safe_load(ROLE_CATALOG.read_text())["__nvidia_driver_debian_userspace"])


def choose_versions(offers: dict[str, list[Offer]], built: str) -> dict:
    """The test versions: the three newest driver versions of the branch, their package versions, containerd."""
    newest_first = functools.cmp_to_key(lambda a, b: compare_versions(b.version, a.version))
    drivers = sorted((o for o in offers[DRIVER_PRIMARY] if upstream(o.version).startswith(DRIVER_BRANCH + ".")),
                     key=newest_first)
    unique = list({upstream(o.version): o for o in reversed(drivers)}.values())[::-1][:len(DRIVER_ROLES)]
    if len(unique) < len(DRIVER_ROLES):
        found = ", ".join(f"{o.version} ({o.suite})" for o in drivers) or "none"
        raise LabError(f"the archive offers {len(unique)} {DRIVER_BRANCH} driver version(s) of {DRIVER_PRIMARY} "
                       f"({found}); the tests need {len(DRIVER_ROLES)}: previous, current and newest")
    packages = {}
    for offer in unique:
        separate = {}
        for name in SEPARATELY_VERSIONED:
            fitting = [o for o in sorted(offers[name], key=newest_first)
                       if compare_versions(upstream(o.version), upstream(offer.version)) <= 0]
            if not fitting:
                raise LabError(f"the archive has no {name} at or below {offer.version}")
            separate[name] = fitting[0].version
        packages[upstream(offer.version)] = {"suite": offer.suite, "package_version": offer.version,
                                             "package_versions": separate}
    containerd = [o for o in offers[CONTAINERD] if o.suite == RELEASE]
    if not containerd:
        raise LabError(f"the archive's {RELEASE} suite has no {CONTAINERD}")
    roles = dict(zip(DRIVER_ROLES, sorted(packages, key=functools.cmp_to_key(compare_versions))))
    fault_base = packages[roles["newest"]]["package_versions"][FAULT_PACKAGE]
    return {
        "built": built,
        "driver": roles,
        "driver_package_version": {role: packages[version]["package_version"] for role, version in roles.items()},
        "driver_packages": packages,
        "containerd": {"version": containerd[0].version, "suite": RELEASE},
        "mirror": {"url": URL, "suite": SUITE, "containerd_suite": CONTAINERD_SUITE, "component": COMPONENT},
        "faults": {"suite": FAULT_SUITE, "driver": roles["newest"], "fails": "postinst",
                   "package_versions": {FAULT_PACKAGE: fault_base + FAULT_VERSION_SUFFIX}, "rebuilt_from": fault_base},
    }


def key_of(versions: dict) -> str:
    """The cache key: the versions the mirror holds and the builder's revision (not the day it was built)."""
    held = {name: value for name, value in versions.items() if name != "built"}
    return hashlib.sha256(json.dumps([BUILDER_REVISION, held], sort_keys=True).encode()).hexdigest()[:12]


class ScratchApt:
    """apt on this machine with its own sources, lists and cache, and a lab node's dpkg status: it reads the
    archive and resolves what a fresh node would download, without touching this machine's apt."""

    def __init__(self, root: Path) -> None:
        self.root = root
        mirrors = apt_mirror.host_mirrors()
        keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
        lines = [f"deb [signed-by={keyring}] {mirrors.archive} {suite} {' '.join(COMPONENTS)}" for suite in SUITES]
        lines.append(f"deb [signed-by={keyring}] {mirrors.security} {SECURITY_SUITE} {' '.join(COMPONENTS)}")
        for sub in ("lists/partial", "cache/archives/partial", "parts", "preferences.d"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "sources.list").write_text("\n".join(lines) + "\n")
        (root / "status").write_bytes(run(["docker", "run", "--rm", NODE_IMAGE, "cat", "/var/lib/dpkg/status"],
                                          quiet=True).stdout.encode())
        (root / "apt.conf").write_text("".join(f'{name} "{root / value}";\n' for name, value in (
            ("Dir::State::Lists", "lists"), ("Dir::State::status", "status"), ("Dir::Cache", "cache"),
            ("Dir::Etc::SourceList", "sources.list"), ("Dir::Etc::SourceParts", "parts"),
            ("Dir::Etc::Preferences", "preferences"), ("Dir::Etc::PreferencesParts", "preferences.d"))))
        (root / "apt.conf").write_text((root / "apt.conf").read_text() + 'APT::Architecture "amd64";\n')

    def __call__(self, *args: str) -> str:
        return run(["apt-get" if args[0] in ("update", "install") else "apt-cache", *args],
                   env=dict(os.environ, APT_CONFIG=str(self.root / "apt.conf"), DEBIAN_FRONTEND="noninteractive"),
                   quiet=True).stdout

    def offers(self, names: Iterable[str]) -> dict[str, list[Offer]]:
        return {name: parse_madison(self("madison", name)) for name in names}

    def download_list(self, pins: Sequence[str]) -> list[str]:
        """Every package (name=version) a fresh node downloads to install ``pins`` (name=version)."""
        text = self("install", "-qq", "--print-uris", "--no-install-recommends", "-y", *pins)
        return [_pin_of_file_name(line.split()[1]) for line in text.splitlines() if line.startswith("'")]

    def download(self, pins: Sequence[str], into: Path) -> None:
        """apt-get download: apt checks every file against the signed index."""
        run(["apt-get", "download", "-qq", *pins], env=dict(os.environ, APT_CONFIG=str(self.root / "apt.conf")),
            cwd=into, quiet=True)


def _pin_of_file_name(file_name: str) -> str:
    """``libpci3_1%3a3.9.0-4_amd64.deb`` -> ``libpci3=1:3.9.0-4``."""
    name, version, _arch = urllib.parse.unquote(file_name).removesuffix(".deb").split("_")
    return f"{name}={version}"


def pins_of(versions: dict) -> list[list[str]]:
    """Every install the tests make from the mirror, as apt-get arguments (name=version)."""
    userspace = userspace_packages()
    installs = []
    for data in versions["driver_packages"].values():
        exact = dict.fromkeys(userspace, data["package_version"]) | data["package_versions"]
        installs.append([f"{name}={version}" for name, version in exact.items()])
    installs.append([f"{CONTAINERD}={versions['containerd']['version']}"])
    return installs


def _write_suite(root: Path, suite: str, pool: str = COMPONENT) -> Path:
    """dists/<suite> indexing every package of pool/<pool>; the directory to sign."""
    release_dir = root / "dists" / suite
    debs = sorted((root / "pool" / pool).iterdir())
    indexes = apt_repo.write_packages(release_dir / COMPONENT / f"binary-{ARCH}", debs, root)
    fields = {"Origin": "gpufleet test lab (package mirror of Debian's archive)", "Label": "gpufleet-package-mirror",
              "Suite": suite, "Codename": suite, "Architectures": ARCH, "Components": COMPONENT}
    (release_dir / "Release").write_text(apt_repo.release_text(release_dir, indexes, fields))
    return release_dir


def _build(target: Path, apt: ScratchApt, versions: dict) -> None:
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    pool = partial / "pool" / COMPONENT
    pool.mkdir(parents=True)
    wanted = sorted({pin for pins in pins_of(versions) for pin in apt.download_list(pins)})
    log(f"package mirror: downloading {len(wanted)} packages from the archive")
    apt.download(wanted, pool)
    _add_fault_package(pool, partial / "pool" / FAULT_COMPONENT_DIR, versions["faults"])
    release_dirs = [_write_suite(partial, suite) for suite in (SUITE, CONTAINERD_SUITE)]
    release_dirs.append(_write_suite(partial, FAULT_SUITE, FAULT_COMPONENT_DIR))
    apt_repo.sign(release_dirs[0], partial / "gpgkey", KEY_UID, also=release_dirs[1:])
    (partial / "versions.yml").write_text(
        "# The lab's test versions, chosen by lab/gpufleet_lab/package_mirror.py from what Debian's archive\n"
        "# offered that day; the packages are in this repository. Do not edit.\n"
        + yaml.safe_dump(versions, sort_keys=False, default_flow_style=False))
    apt_repo.make_readable(partial)
    partial.rename(target)


FAULT_POSTINST = """#!/bin/sh
# SIMULATED fault of the gpufleet test lab: this package is Debian's, rebuilt with a post-installation script
# that fails, as a DKMS module build failing in nvidia-kernel-dkms's postinst does.
echo "gpufleet test lab: SIMULATED failure of $DPKG_MAINTSCRIPT_PACKAGE's postinst ($1)" >&2
exit 1
"""


def _add_fault_package(pool: Path, into: Path, faults: dict) -> None:
    """Rebuild the archive's FAULT_PACKAGE at the fault's version with a postinst that fails, into ``into``."""
    (name, version), = faults["package_versions"].items()
    wanted = f"{name}={faults['rebuilt_from']}"
    source = next((deb for deb in pool.iterdir() if _pin_of_file_name(deb.name) == wanted), None)
    if source is None:
        raise LabError(f"package mirror: {wanted} is not in the pool; the fault package is rebuilt from it")
    into.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="gpufleet-fault-") as scratch:
        tree = Path(scratch) / "tree"
        run(["dpkg-deb", "-R", str(source), str(tree)], quiet=True)
        control = tree / "DEBIAN" / "control"
        control.write_text("".join(f"Version: {version}\n" if line.startswith("Version:") else line
                                   for line in control.read_text().splitlines(keepends=True)))
        postinst = tree / "DEBIAN" / "postinst"
        postinst.write_text(FAULT_POSTINST)
        postinst.chmod(0o755)
        run(["dpkg-deb", "--root-owner-group", "-b", str(tree),
             str(into / f"{name}_{version.replace(':', '%3a')}_{ARCH}.deb")], quiet=True)


def _link(target: Path) -> Path:
    apt_repo.write_fingerprint(target / "gpgkey")
    replace_link(LINK, target)
    print(f"package mirror: {target}", flush=True)
    return target


def ensure() -> Path:
    """Resolve the test versions against the archive, build the mirror unless the cache holds it, link it."""
    with exclusive(CACHE / ".lock"), tempfile.TemporaryDirectory(prefix="gpufleet-apt-") as scratch:
        try:
            apt = ScratchApt(Path(scratch))
            apt("update", "-qq")
            versions = choose_versions(
                apt.offers([DRIVER_PRIMARY, *SEPARATELY_VERSIONED, CONTAINERD]), date.today().isoformat())
        except LabError as error:
            cached = current()
            if cached is None:
                raise
            log(f"package mirror: the archive could not be read ({error}); using {cached}")
            return _link(cached)
        target = CACHE / key_of(versions)
        if not (target / "versions.yml").is_file():
            _build(target, apt, versions)
    return _link(target)


def current() -> Path | None:
    """The mirror in use (the linked one), else the newest in the cache, else None."""
    if (LINK / "versions.yml").is_file():
        return LINK.resolve()
    built = sorted(CACHE.glob("*/versions.yml"), key=lambda path: path.stat().st_mtime) if CACHE.is_dir() else []
    return built[-1].parent if built else None


def require() -> Path:
    """The mirror in use; a clear error where none was built."""
    found = current()
    if found is None:
        raise LabError("no package mirror: run `make package-mirror` (lab/labctl package-mirror) first")
    return found


def load_versions() -> dict:
    return yaml.safe_load((require() / "versions.yml").read_text())


def public_key() -> str:
    return (require() / "gpgkey").read_text()


def public_key_fingerprint() -> str:
    """The mirror key's fingerprint as gpg reads it (``gpgkey.fingerprint``), the roles' expected fingerprint."""
    return apt_repo.write_fingerprint(require() / "gpgkey")


def docker_volume() -> list[str]:
    """The ``docker run`` arguments that mount the mirror read-only into a node."""
    return ["-v", f"{require()}:{NODE_DIR}:ro"]
