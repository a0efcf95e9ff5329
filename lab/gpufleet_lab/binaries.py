"""Build the Kubernetes binaries of the lab from Debian's ``kubernetes`` source package.

No registry ships kube-apiserver, so the lab compiles the control plane, the kubelet,
kubectl and the pause binary from Debian bookworm's ``kubernetes`` source package
(vendored, built with Debian's Go), with the lab's patches of ``lab/kubernetes/patches``
applied (each says what it changes and why), and caches them outside the checkout, keyed
by the source version; ``build.json`` records the patches' key, and other patches rebuild::

    <cache root>/<source version>/bin/{kube-apiserver,kube-controller-manager,
                                       kube-scheduler,kubelet,kubectl,pause}
    <cache root>/<source version>/src/   unpacked tree (the device plugin proto comes from it)

The build is skipped when every cached binary answers ``--version`` and was built with these patches.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Iterable, Sequence

from gpufleet_lab.apt_mirror import AptSource, host_apt_sources
from gpufleet_lab.proc import LabError, host_apt, log, run

SOURCE_PACKAGE = "kubernetes"
SOURCE_SUITE = "bookworm"
DEFAULT_CACHE_ROOT = Path("/var/cache/gpufleet/kubernetes")
SRC_LIST_PATH = Path("/etc/apt/sources.list.d/gpufleet-lab-kubernetes-src.sources")
BUILD_PACKAGES: tuple[str, ...] = ("golang-go", "rsync", "jq", "etcd-server", "gcc", "make", "patch")
KUBE_COMMANDS: tuple[str, ...] = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kubectl",
)
PAUSE = "pause"
ALL_BINARIES: tuple[str, ...] = KUBE_COMMANDS + (PAUSE,)
DEVICE_PLUGIN_PROTO = "staging/src/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto"
PATCHES_DIR = Path(__file__).resolve().parents[1] / "kubernetes" / "patches"


class BuildError(LabError):
    """The binaries could not be built or verified."""


def lab_patches(patches_dir: Path = PATCHES_DIR) -> list[Path]:
    """The lab's patches of the source tree, in the order they apply."""
    return sorted(patches_dir.glob("*.patch"))


def patches_key(patches: Sequence[Path]) -> str:
    """What the binaries were built with besides the source version: the patches' names and contents."""
    digest = hashlib.sha256()
    for patch in patches:
        digest.update(patch.name.encode() + b"\0" + patch.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def built_patches_key(work: Path) -> str | None:
    """The patches' key recorded in ``work/build.json`` (None: no record, or built before the lab patched)."""
    try:
        return json.loads((work / "build.json").read_text()).get("patches")
    except (OSError, ValueError, AttributeError):
        return None


def apply_patches(src: Path, patches: Sequence[Path]) -> None:
    for patch in patches:
        log(f"applying {patch.name}")
        run(["patch", "-p1", "--forward", "--batch", "-i", str(patch)], cwd=src)


def cache_root() -> Path:
    """Cache root; ``GPUFLEET_KUBE_CACHE`` overrides the default."""
    return Path(os.environ.get("GPUFLEET_KUBE_CACHE", str(DEFAULT_CACHE_ROOT)))


def find_debian_mirror(sources: Iterable[AptSource], suite: str = SOURCE_SUITE) -> AptSource:
    """Return the host's Debian source serving ``suite`` ``main`` (not -security/-updates)."""
    for source in sources:
        if suite in source.suites and "main" in source.components:
            return source
    raise BuildError(
        f"no Debian apt source for suite {suite!r} component 'main' found on this host; "
        "add one (deb822 under /etc/apt/sources.list.d/ or /etc/apt/sources.list)"
    )


def render_deb_src(source: AptSource, suite: str = SOURCE_SUITE) -> str:
    """Render the deb822 ``deb-src`` entry for ``suite`` main of ``source``'s mirror."""
    lines = [
        "# Managed by the gpufleet lab: Debian source packages (kubernetes) for the lab build.",
        "Types: deb-src",
        f"URIs: {source.uri}",
        f"Suites: {suite}",
        "Components: main",
    ]
    if source.signed_by:
        lines.append(f"Signed-By: {source.signed_by}")
    return "\n".join(lines) + "\n"


def upstream_version(source_version: str) -> str:
    """Kubernetes version inside a Debian version: ``1.20.5+really1.20.2-1`` -> ``1.20.2``."""
    version = source_version.split(":", 1)[-1]
    version = version.rsplit("-", 1)[0] if "-" in version else version
    if "+really" in version:
        version = version.split("+really", 1)[1]
    match = re.match(r"^(\d+\.\d+\.\d+)", version)
    if not match:
        raise BuildError(f"cannot read a Kubernetes version from source version {source_version!r}")
    return match.group(1)


def make_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for ``make``: vendored modules only, no network for Go.

    The version stamp needs nothing: the orig tarball is a ``git archive`` whose
    hack/lib/version.sh carries the release tag and commit.
    """
    env = dict(os.environ if base is None else base)
    env.update({"GOFLAGS": "-mod=vendor", "GO111MODULE": "on", "GOPROXY": "off", "GOTOOLCHAIN": "local"})
    return env


def pause_tag(makefile_text: str) -> str:
    """``TAG`` of build/pause/Makefile (the pause image version, 3.4 in Kubernetes 1.20)."""
    match = re.search(r"^TAG\s*\??=\s*(\S+)", makefile_text, flags=re.M)
    if not match:
        raise BuildError("build/pause/Makefile has no TAG line")
    return match.group(1)


def pause_gcc_argv(src: Path, output: Path, version: str) -> list[str]:
    """gcc command of build/pause/Makefile (CFLAGS ``-Os -Wall -Werror -static -DVERSION=...``)."""
    return [
        "gcc", "-Os", "-Wall", "-Werror", "-static", f"-DVERSION={version}",
        "-o", str(output), str(src / "build" / "pause" / "linux" / "pause.c"),
    ]


def build_pause(src: Path, output: Path, source_version: str) -> None:
    tag = pause_tag((src / "build" / "pause" / "Makefile").read_text())
    run(pause_gcc_argv(src, output, f"v{tag}-debian-{upstream_version(source_version)}"), capture=False)


def make_what(commands: Sequence[str] = KUBE_COMMANDS) -> str:
    """The ``WHAT=`` argument of the Kubernetes Makefile."""
    return " ".join(f"cmd/{name}" for name in commands)


def answers_version(binary: Path) -> str | None:
    """Return the ``--version`` output of ``binary`` (``-v`` for pause) or None."""
    if not os.access(binary, os.X_OK):
        return None
    flag = "-v" if binary.name == PAUSE else "--version"
    if binary.name == "kubectl":
        argv = [str(binary), "version", "--client", "--short"]
    else:
        argv = [str(binary), flag]
    try:
        result = run(argv, check=False, quiet=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    output = (result.stdout + result.stderr).strip()
    if result.returncode != 0 or not output:
        return None
    line = output.splitlines()[0]
    expected = r"^pause\.c v\d" if binary.name == PAUSE else r"(Kubernetes|Client Version:) v\d+\.\d+\.\d+"
    return line if re.search(expected, line) else None


def verify_bin_dir(bin_dir: Path) -> dict[str, str] | None:
    """All binaries answer: their version lines; otherwise None."""
    versions: dict[str, str] = {}
    for name in ALL_BINARIES:
        line = answers_version(bin_dir / name)
        if line is None:
            return None
        versions[name] = line
    return versions


def ensure_build_packages() -> None:
    """Add the deb-src entry (mirror from the host's own source) and install the toolchain."""
    mirror = find_debian_mirror(host_apt_sources())
    wanted = render_deb_src(mirror)
    if not SRC_LIST_PATH.is_file() or SRC_LIST_PATH.read_text() != wanted:
        SRC_LIST_PATH.write_text(wanted)
        SRC_LIST_PATH.chmod(0o644)
    host_apt("update", "-q", capture=False)
    # policy-rc.d: installing etcd-server must not start the system etcd service; the lab
    # runs its own etcd process.
    policy = Path("/usr/sbin/policy-rc.d")
    created_policy = False
    if not policy.exists():
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
        created_policy = True
    try:
        host_apt("install", "-y", "-q", "--no-install-recommends", *BUILD_PACKAGES, capture=False)
    finally:
        if created_policy:
            policy.unlink()


def source_version() -> str:
    """Candidate version of the ``kubernetes`` source package (needs the deb-src entry)."""
    out = run(["apt-cache", "showsrc", SOURCE_PACKAGE], quiet=True).stdout
    versions = re.findall(r"^Version:\s*(\S+)", out, flags=re.M)
    if not versions:
        raise BuildError(f"apt-cache showsrc {SOURCE_PACKAGE} found no version: is deb-src set up?")
    return str(versions[0])


def _unpack_source(version: str, work: Path) -> Path:
    """Download the source package and unpack its orig tarball into ``work/src``."""
    download = work / "download"
    download.mkdir(parents=True, exist_ok=True)
    run(["apt-get", "source", "--download-only", f"{SOURCE_PACKAGE}={version}"], cwd=download, capture=False)
    origs = sorted(
        p for p in download.iterdir() if ".orig" in p.name and p.name.endswith((".tar.gz", ".tar.xz"))
    )
    main_orig = [p for p in origs if re.search(r"\.orig\.tar\.", p.name)]
    if not main_orig:
        raise BuildError(f"no orig tarball in {download}: {[p.name for p in download.iterdir()]}")
    src = work / "src"
    tmp = work / "src.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    with tarfile.open(main_orig[0]) as archive:
        archive.extractall(tmp)  # noqa: S202 - Debian archive, verified by apt
    children = list(tmp.iterdir())
    top = children[0] if len(children) == 1 and children[0].is_dir() else tmp
    shutil.rmtree(src, ignore_errors=True)
    top.rename(src)
    shutil.rmtree(tmp, ignore_errors=True)
    return src


def _find_built(src: Path, name: str) -> Path:
    for candidate in (
        src / "_output" / "bin" / name,
        src / "_output" / "local" / "bin" / "linux" / "amd64" / name,
    ):
        if candidate.is_file():
            return candidate
    hits = list((src / "_output").rglob(name))
    if not hits:
        raise BuildError(f"make did not produce {name} under {src / '_output'}")
    return hits[0]


def build_binaries(force: bool = False) -> Path:
    """Build (or reuse) the cached binaries; return the ``bin`` directory."""
    root = cache_root()
    patches = lab_patches()
    key = patches_key(patches)
    if not force and root.is_dir():
        for candidate in sorted(root.iterdir(), reverse=True):
            if (built_patches_key(candidate) == key and verify_bin_dir(candidate / "bin") is not None
                    and (candidate / "src").is_dir()):
                log(f"cached binaries answer --version: {candidate / 'bin'}")
                prune_build_output(candidate / "src")
                return candidate / "bin"
    started = time.monotonic()
    ensure_build_packages()
    version = source_version()
    work = root / version
    bin_dir = work / "bin"
    if not force and built_patches_key(work) == key and verify_bin_dir(bin_dir) is not None:
        return bin_dir
    work.mkdir(parents=True, exist_ok=True)
    # A fresh tree each time: one built before, or with other patches, is not the tree these patches apply to.
    src = _unpack_source(version, work)
    apply_patches(src, patches)
    env = make_environment()
    run(["make", f"WHAT={make_what()}"], cwd=src, env=env, capture=False)
    bin_tmp = work / "bin.tmp"
    shutil.rmtree(bin_tmp, ignore_errors=True)
    bin_tmp.mkdir()
    for name in KUBE_COMMANDS:
        shutil.copy2(_find_built(src, name), bin_tmp / name)
    build_pause(src, bin_tmp / PAUSE, version)
    versions = verify_bin_dir(bin_tmp)
    if versions is None:
        raise BuildError(f"built binaries in {bin_tmp} do not all answer --version")
    shutil.rmtree(bin_dir, ignore_errors=True)
    bin_tmp.rename(bin_dir)
    prune_build_output(src)
    elapsed = time.monotonic() - started
    (work / "build.json").write_text(
        json.dumps(
            {"source_version": version, "versions": versions, "build_seconds": round(elapsed, 1),
             "patches": key, "patch_files": [patch.name for patch in patches]},
            indent=2,
        )
        + "\n"
    )
    log(f"built {', '.join(ALL_BINARIES)} in {elapsed:.0f} s -> {bin_dir}")
    return bin_dir


def prune_build_output(src: Path) -> None:
    """Drop the build's intermediate tree (``_output``, about 3 GB) once the binaries are copied out.

    The cache keeps the binaries and the source tree the lab still reads (the device plugin API's proto file);
    a forced rebuild compiles from scratch.
    """
    shutil.rmtree(src / "_output", ignore_errors=True)


def cached_bin_dir() -> Path:
    """The cached ``bin`` directory built with the lab's patches; raise if none."""
    root = cache_root()
    key = patches_key(lab_patches())
    if root.is_dir():
        for candidate in sorted(root.iterdir(), reverse=True):
            if (candidate / "bin" / "kube-apiserver").is_file() and built_patches_key(candidate) == key:
                return candidate / "bin"
    raise BuildError(f"no Kubernetes binaries built with the lab's patches under {root}: run the binaries build first")


def source_dir(bin_dir: Path) -> Path:
    """The unpacked source tree next to a cached ``bin`` directory."""
    return bin_dir.parent / "src"


if __name__ == "__main__":
    print(build_binaries(force="--force" in sys.argv))
