"""NVIDIA's own code for the lab, built from pinned sources, offline and cached.

The lab simulates only the GPU and its kernel module. What NVIDIA ships above the module is NVIDIA's code,
built here from release tags (each with its committed ``vendor/``, so Go builds it without a network):

- k8s-test-infra's mock NVML (``pkg/gpu/mocknvml``): a ``libnvidia-ml.so`` that NVIDIA's real ``nvidia-smi``,
  device plugin and operator run on without a GPU. The patches of this repository are applied
  (``lab/nvidia/patches/k8s-test-infra/``), so that it behaves as the driver's library does: it refuses a kernel
  module of another version, carries its configuration into containers, and blocks in ``nvmlEventSetWait``.
- the container toolkit's ``nvidia-ctk`` (1.17.8 and 1.20.0), whose ``runtime configure`` is NVIDIA's own writer of
  containerd's configuration: the containerd scenarios compare the role's configuration with it.

Sources come from the directory ``GPUFLEET_UPSTREAM_DIR`` names (default: ``../shared/upstream`` beside the
checkout, when it exists), each archive checked against the SHA-256 pinned below; otherwise from a ``git clone``
of the tag, checked against the pinned commit. Go is Debian's (sid's ``golang-1.26-go``), in a build container of
the lab's sid image. Builds are cached under ``/var/cache/gpufleet/nvidia/<component>-<key>/``, the key made of the
archive's checksum, the patches and this builder's revision; ``.build/nvidia/<component>`` links to the one in use.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpufleet_lab import images
from gpufleet_lab.common import REPO_ROOT, replace_link
from gpufleet_lab.proc import LabError, exclusive, log, run

CACHE = Path("/var/cache/gpufleet/nvidia")
LINKS = REPO_ROOT / ".build" / "nvidia"
PATCHES = REPO_ROOT / "lab" / "nvidia" / "patches"
SOURCES_ENV = "GPUFLEET_UPSTREAM_DIR"
BUILDER_REVISION = 1
BUILDER_IMAGE = "gpufleet-lab/go-builder"
BUILDER_PACKAGES = ("golang-1.26-go", "gcc", "libc6-dev", "make", "patch", "debhelper")
GO_ENV = {"PATH": "/usr/lib/go-1.26/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
          "GOFLAGS": "-mod=vendor", "GOTOOLCHAIN": "local", "GOPROXY": "off", "GOCACHE": "/tmp/gocache"}


@dataclass(frozen=True)
class Source:
    """One pinned release of an NVIDIA repository."""

    name: str
    repository: str
    tag: str
    commit: str
    archive: str
    sha256: str

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repository}.git"


SOURCES = {
    "nvidia-container-toolkit-1.17.8": Source(
        "nvidia-container-toolkit", "NVIDIA/nvidia-container-toolkit", "v1.17.8", "f202b80a9b9d0db00d9b1d73c0128c8962c55f4d",
        "nvidia-container-toolkit-v1.17.8.tar.xz", "c82c6a8a855fe04337e14a40005e4e304d8880f4a2de99624f709be5700e9a3c"),
    "nvidia-container-toolkit-1.20.0": Source(
        "nvidia-container-toolkit", "NVIDIA/nvidia-container-toolkit", "v1.20.0", "5505e2f94d9aaa08561490db974ba3cd676af209",
        "nvidia-container-toolkit-v1.20.0.tar.xz", "d8734162ad0fef79addb94cba6e23ec7a81d64f53c586b53c4104413bdeb868e"),
    "k8s-device-plugin-0.17.1": Source(
        "k8s-device-plugin", "NVIDIA/k8s-device-plugin", "v0.17.1", "3c378193fcebf6e955f0d65bd6f2aeed099ad8ea",
        "k8s-device-plugin-v0.17.1.tar.xz", "bd382d413b0ff36dfb084176dac7a1a2f2b01ef74707b67f2755e0d85f664288"),
    "k8s-device-plugin-0.20.0": Source(
        "k8s-device-plugin", "NVIDIA/k8s-device-plugin", "v0.20.0", "1b826acc6af3079d8923bac395c3124b8861a9a6",
        "k8s-device-plugin-v0.20.0.tar.xz", "42a2cfc4b99f8eb8621f18708c00a428119a81e9fb950dd5eefec3c59853a321"),
    "k8s-test-infra": Source(
        "k8s-test-infra", "NVIDIA/k8s-test-infra", "v0.3.0", "204019fb69e4d49285625a6829ff0e5b143bba3b",
        "k8s-test-infra-v0.3.0.tar.xz", "e9e980af983ecbd02007030a9452cd6b2edb0f8ec1bbe9537a40232c89bffb6c"),
}


def sources_dir() -> Path | None:
    """The directory holding the source archives: ``GPUFLEET_UPSTREAM_DIR``, else ``../shared/upstream`` if present."""
    named = os.environ.get(SOURCES_ENV)
    if named:
        return Path(named)
    default = REPO_ROOT.parent / "shared" / "upstream"
    return default if default.is_dir() else None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_archive(source: Source, directory: Path) -> Path:
    """The archive of ``source`` in ``directory``, its checksum the pinned one; LabError naming the file otherwise."""
    path = directory / source.archive
    if not path.is_file():
        raise LabError(f"{source.name}: {path} is missing. Put {source.archive} ({source.repository} {source.tag}, "
                       f"sha256 {source.sha256}) in {directory}, or unset {SOURCES_ENV} on a machine that can "
                       f"clone {source.url}")
    found = sha256_of(path)
    if found != source.sha256:
        raise LabError(f"{source.name}: {path} has sha256 {found}, expected {source.sha256} "
                       f"({source.repository} {source.tag}); replace the file with the release archive")
    return path


def verify_commit(source: Source, found: str, where: str) -> None:
    if found.strip() != source.commit:
        raise LabError(f"{source.name}: {where} is at commit {found.strip() or '(none)'}, expected {source.commit} "
                       f"({source.repository} {source.tag}); the tag moved or the clone is not NVIDIA's")


def unpack_source(source: Source, into: Path) -> Path:
    """The source tree of ``source`` under ``into``, from the checked archive or a checked clone."""
    directory = sources_dir()
    tree = into / source.name
    if directory is not None:
        archive = verify_archive(source, directory)
        tree.mkdir(parents=True)
        run(["tar", "-xJf", str(archive), "-C", str(tree), "--strip-components=1"], quiet=True)
        return tree
    log(f"{source.name}: no {SOURCES_ENV} and no ../shared/upstream: cloning {source.url} {source.tag}")
    run(["git", "clone", "--quiet", "--depth", "1", "--branch", source.tag, source.url, str(tree)])
    head = run(["git", "-C", str(tree), "rev-parse", "HEAD"], quiet=True).stdout
    verify_commit(source, head, f"the clone of {source.url} {source.tag}")
    return tree


def patches_of(source: Source) -> list[Path]:
    return sorted((PATCHES / source.name).glob("*.patch"))


def build_key(source: Source) -> str:
    payload = {"sha256": source.sha256, "commit": source.commit, "revision": BUILDER_REVISION,
               "packages": BUILDER_PACKAGES,
               "patches": [hashlib.sha256(path.read_bytes()).hexdigest() for path in patches_of(source)]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def builder_image() -> str:
    """The Go build container image: the lab's sid image with Debian's Go and a C toolchain (cgo)."""
    script = ("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
              + " ".join(BUILDER_PACKAGES) + " >/dev/null && apt-get clean")
    return images.derived("sid", BUILDER_IMAGE, BUILDER_PACKAGES, script)


def build_in_container(tree: Path, script: str) -> None:
    """Run ``script`` (sh) in the Go build container with ``tree`` at /src; no network."""
    env = [arg for name, value in GO_ENV.items() for arg in ("-e", f"{name}={value}")]
    run(["docker", "run", "--rm", "--network", "none", *env, "-v", f"{tree}:/src", "-w", "/src",
         builder_image(), "sh", "-ec", script])


def ensure_build(component: str, source: Source, build) -> Path:
    """``component`` of ``source``, built once per build key under ``CACHE/<component>-<key>``: ``build(tree, out)``
    compiles in the unpacked, patched tree and puts what it made in ``out`` (a directory moved into the cache whole,
    with ``BUILD.json``: what it was built from). ``.build/nvidia/<component>`` links to the build."""
    target = CACHE / f"{component}-{build_key(source)}"
    with exclusive(CACHE / ".lock"):
        if not (target / "BUILD.json").is_file():
            log(f"building NVIDIA's {component} from {source.repository} {source.tag}")
            with tempfile.TemporaryDirectory(prefix=f"gpufleet-{component}-") as scratch:
                tree = unpack_source(source, Path(scratch))
                partial = target.with_name(target.name + ".partial")
                shutil.rmtree(partial, ignore_errors=True)
                partial.mkdir(parents=True)
                provenance = build(tree, partial)
                (partial / "BUILD.json").write_text(json.dumps({
                    "component": component, "repository": source.repository, "tag": source.tag,
                    "commit": source.commit, "archive_sha256": source.sha256,
                    "patches": [path.name for path in patches_of(source)],
                    "go": (tree / "GO_VERSION").read_text().strip(), **provenance}, indent=1) + "\n")
                partial.rename(target)
    print(f"{component}: {target}", flush=True)
    replace_link(LINKS / component, target)
    return target


MOCK_DIR = "pkg/gpu/mocknvml"
MOCK_LIBRARY = "libnvidia-ml.so"


def _mock_configs_as_json(tree: Path, into: Path) -> None:
    """NVIDIA's GPU configurations of the mock, as JSON (the mock reads JSON as YAML; gpusim on a node has no YAML)."""
    into.mkdir()
    for path in sorted((tree / MOCK_DIR / "configs").glob("mock-nvml-config-*.yaml")):
        model = path.stem.removeprefix("mock-nvml-config-")
        (into / f"{model}.json").write_text(json.dumps(yaml.safe_load(path.read_text()), indent=1) + "\n")


def _build_mock(tree: Path, out: Path) -> dict:
    patches = patches_of(SOURCES["k8s-test-infra"])
    for patch in patches:
        shutil.copy(patch, tree / patch.name)
    apply = "".join(f"patch -p1 --forward --quiet < {patch.name}\n" for patch in patches)
    # LIB_VERSION only names the file; gpusim installs the one build under each driver version's name.
    build_in_container(tree, apply + f"make -C {MOCK_DIR} NO_PADDING=1 REPO_ROOT=/src LIB_VERSION=0.0.0 >/dev/null\n"
                       f"go version > GO_VERSION\nchown -R {os.getuid()}:{os.getgid()} /src")
    shutil.copy(tree / MOCK_DIR / f"{MOCK_LIBRARY}.0.0.0", out / MOCK_LIBRARY)
    _mock_configs_as_json(tree, out / "configs")
    return {"what": "mock NVML (k8s-test-infra pkg/gpu/mocknvml)"}


def ensure_mock_nvml() -> Path:
    """NVIDIA's mock NVML, built once per source and patches; the directory with ``libnvidia-ml.so`` and
    ``configs/<model>.json``. ``.build/nvidia/mocknvml`` links to it."""
    return ensure_build("mocknvml", SOURCES["k8s-test-infra"], _build_mock)


TOOLKIT_VERSIONS = ("1.17.8", "1.20.0")
TOOLKIT_PACKAGE_REVISION = "1"
TOOLKIT_PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base",
                    "nvidia-container-toolkit-operator-extensions")
TOOLKIT_PROGRAMS = ("nvidia-ctk", "nvidia-container-runtime", "nvidia-container-runtime-hook", "nvidia-cdi-hook")


def _toolkit_script(version: str, commit: str) -> str:
    """Build the toolkit the way NVIDIA's ``docker/Dockerfile.debian`` does: ``make cmds`` with the release's version
    and commit, then ``dpkg-buildpackage`` on the tag's ``packaging/debian`` with the binaries and
    ``deployments/systemd`` beside it. Only the changelog is written here (NVIDIA's uses ``dch``), dated at the
    commit (the archive's file times). ``-d``: the build container has debhelper but not build-essential's C++."""
    revision = f"{version}-{TOOLKIT_PACKAGE_REVISION}"
    return f"""
make cmds PREFIX=/src/dist GIT_COMMIT={commit} VERSION={version} > build.log 2>&1 || {{ tail -40 build.log; exit 1; }}
./dist/nvidia-ctk --version > NVIDIA_CTK_VERSION
go version > GO_VERSION
cp -r packaging/debian dist/debian
if [ -d deployments/systemd ]; then cp deployments/systemd/* dist/; fi
epoch=$(stat -c %Y Makefile)
cat > dist/debian/changelog <<CHANGELOG
nvidia-container-toolkit ({revision}) UNRELEASED; urgency=medium

  * See https://github.com/NVIDIA/nvidia-container-toolkit/blob/{commit}/CHANGELOG.md for the changelog

 -- NVIDIA CORPORATION <cudatools@nvidia.com>  $(date -R -u -d @$epoch)
CHANGELOG
cd dist
VERSION={revision} LIBNVIDIA_CONTAINER_TOOLS_VERSION={revision} SECTION= DISTRIB= sh debian/prepare
SOURCE_DATE_EPOCH=$epoch dpkg-buildpackage -us -uc -b -d > ../package.log 2>&1 || {{ tail -40 ../package.log; exit 1; }}
cd ..
chown -R {os.getuid()}:{os.getgid()} /src
"""


def _toolkit_builder(version: str, commit: str):
    def build(tree: Path, out: Path) -> dict:
        build_in_container(tree, _toolkit_script(version, commit))
        (out / "bin").mkdir()
        for program in TOOLKIT_PROGRAMS:
            shutil.copy(tree / "dist" / program, out / "bin" / program)
        (out / "debs").mkdir()
        debs = sorted(tree.glob("*.deb"))
        if {deb.name.split("_")[0] for deb in debs} != set(TOOLKIT_PACKAGES):
            raise LabError(f"nvidia-container-toolkit {version}: packaging/debian made {[deb.name for deb in debs]}, "
                           f"expected one .deb of each of {', '.join(TOOLKIT_PACKAGES)}")
        for deb in debs:
            shutil.copy(deb, out / "debs" / deb.name)
        return {"what": "NVIDIA container toolkit: its programs and its Debian packages (packaging/debian)",
                "version_output": (tree / "NVIDIA_CTK_VERSION").read_text().strip(),
                "packages": [deb.name for deb in debs]}
    return build


def ensure_toolkit(version: str) -> Path:
    """NVIDIA's container toolkit ``version``, built once per source: ``bin/`` holds its programs (``nvidia-ctk``,
    the runtime, the hooks) and ``debs/`` the packages its own ``packaging/debian`` makes (``<version>-1``).
    ``.build/nvidia/toolkit-<version>`` links to it. The lab compares the configurations the roles write with what
    NVIDIA's own writer (``nvidia-ctk runtime configure``, ``nvidia-ctk config default``) makes of the same
    settings."""
    source = SOURCES[f"nvidia-container-toolkit-{version}"]
    return ensure_build(f"toolkit-{version}", source, _toolkit_builder(version, source.commit))


DEVICE_PLUGIN_VERSIONS = ("0.17.1", "0.20.0")
DEVICE_PLUGIN_PROGRAMS = ("nvidia-device-plugin", "config-manager", "gpu-feature-discovery", "mps-control-daemon")


def _device_plugin_builder(version: str, commit: str):
    def build(tree: Path, out: Path) -> dict:
        # NVIDIA's deployments/container/Dockerfile: `make PREFIX=/artifacts cmds` with VERSION and GIT_COMMIT
        build_in_container(tree, f"make cmds PREFIX=/src/dist VERSION=v{version} GIT_COMMIT={commit} > build.log 2>&1 "
                                 "|| { tail -40 build.log; exit 1; }\n"
                                 "./dist/nvidia-device-plugin --version > PLUGIN_VERSION\ngo version > GO_VERSION\n"
                                 f"chown -R {os.getuid()}:{os.getgid()} /src")
        (out / "bin").mkdir()
        for program in DEVICE_PLUGIN_PROGRAMS:
            shutil.copy(tree / "dist" / program, out / "bin" / program)
        return {"what": "NVIDIA device plugin for Kubernetes: the programs of its image",
                "version_output": (tree / "PLUGIN_VERSION").read_text().strip()}
    return build


def ensure_device_plugin(version: str) -> Path:
    """NVIDIA's device plugin ``version``, built once per source: ``bin/`` holds the programs NVIDIA's image carries
    (``nvidia-device-plugin``, ``config-manager``, ``gpu-feature-discovery``, ``mps-control-daemon``).
    ``.build/nvidia/device-plugin-<version>`` links to it."""
    source = SOURCES[f"k8s-device-plugin-{version}"]
    return ensure_build(f"device-plugin-{version}", source, _device_plugin_builder(version, source.commit))


def ensure_all() -> None:
    ensure_mock_nvml()
    for version in TOOLKIT_VERSIONS:
        ensure_toolkit(version)
    for version in DEVICE_PLUGIN_VERSIONS:
        ensure_device_plugin(version)
