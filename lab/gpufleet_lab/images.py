"""Node base images built with debootstrap (no registry is needed), cached by a content key."""
from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpufleet_lab import apt_mirror
from gpufleet_lab.proc import exclusive, log, run, succeeds

CACHE_DIR = Path("/var/cache/gpufleet/images")
REPOSITORY = "gpufleet-lab/node"
BUILDER_REVISION = 1
PACKAGES = ("python3", "python3-apt", "systemd", "systemd-sysv", "sudo", "ca-certificates", "gnupg")
RELEASES = {"bookworm": ("bookworm", "bookworm-updates"), "trixie": ("trixie", "trixie-updates"), "sid": ("sid",)}
SECURITY_SUITES = {"bookworm": "bookworm-security", "trixie": "trixie-security"}


@dataclass(frozen=True)
class ImageSpec:
    release: str
    mirrors: apt_mirror.Mirrors

    @property
    def key(self) -> str:
        payload = json.dumps({"release": self.release, "packages": PACKAGES, "revision": BUILDER_REVISION,
                              "sources": sources_file(self.release, self.mirrors)}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]

    @property
    def tag(self) -> str:
        return f"{REPOSITORY}:{self.release}"

    @property
    def keyed_tag(self) -> str:
        return f"{REPOSITORY}:{self.release}-{self.key}"

    @property
    def tarball(self) -> Path:
        return CACHE_DIR / f"node-{self.release}-{self.key}.tar.gz"


def sources_file(release: str, mirrors: apt_mirror.Mirrors) -> str:
    """deb822 sources of a freshly installed server of that release: `main` only."""
    keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
    stanzas = [f"Types: deb\nURIs: {mirrors.archive}\nSuites: {' '.join(RELEASES[release])}\n"
               f"Components: main\nSigned-By: {keyring}\n"]
    if release in SECURITY_SUITES:
        stanzas.append(f"Types: deb\nURIs: {mirrors.security}\nSuites: {SECURITY_SUITES[release]}\n"
                       f"Components: main\nSigned-By: {keyring}\n")
    return "\n".join(stanzas)


def _configure_rootfs(rootfs: Path, spec: ImageSpec) -> None:
    (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
    (rootfs / "etc/apt/sources.list.d/debian.sources").write_text(sources_file(spec.release, spec.mirrors))
    if spec.release == "sid":
        # The archive's sid Release file can be past its Valid-Until date on mirrors.
        (rootfs / "etc/apt/apt.conf.d/99gpufleet-lab-valid-until").write_text('Acquire::Check-Valid-Until "false";\n')
    (rootfs / "etc/machine-id").write_text("")  # systemd makes a new one in each container
    shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
    (rootfs / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)


def _debootstrap_to_tarball(spec: ImageSpec) -> None:
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpufleet-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", spec.release,
             str(rootfs), spec.mirrors.archive], capture=False)
        _configure_rootfs(rootfs, spec)
        partial = spec.tarball.with_suffix(".partial")
        run(["tar", "-C", str(rootfs), "-czf", str(partial), "."], capture=False)
        partial.rename(spec.tarball)


def ensure(release: str) -> str:
    """Make `gpufleet-lab/node:<release>` exist; reuse the image, else the cached tarball, else build."""
    spec = ImageSpec(release=release, mirrors=apt_mirror.host_mirrors())
    # make test's lanes may ask for one release at once (the Go builder's sid, the controller's trixie).
    with exclusive(CACHE_DIR / f".{release}.lock"):
        if not succeeds(["docker", "image", "inspect", spec.keyed_tag]):
            if not spec.tarball.exists():
                _debootstrap_to_tarball(spec)
            run(["docker", "import", str(spec.tarball), spec.keyed_tag], capture=False)
        run(["docker", "tag", spec.keyed_tag, spec.tag], quiet=True)
    print(f"{spec.tag} = {spec.keyed_tag}", flush=True)
    return spec.tag


def derived(release: str, repository: str, key_parts: object, script: str, *, tag_prefix: str = "",
            options: tuple[str, ...] = (), input_text: str | None = None) -> str:
    """An image of the lab's ``release`` image with ``script`` (sh) run in it, committed once per key: the base
    image's id and ``key_parts``. ``options`` go to ``docker run``; ``input_text`` is the script's standard input."""
    base = ensure(release)
    base_id = run(["docker", "image", "inspect", "--format", "{{.Id}}", base], quiet=True).stdout.strip()
    tag = f"{repository}:{tag_prefix}{hashlib.sha256(json.dumps([base_id, key_parts]).encode()).hexdigest()[:12]}"
    if succeeds(["docker", "image", "inspect", tag]):
        return tag
    log(f"building {tag} (Debian {release})")
    container = f"gpufleet-image-build-{os.getpid()}"
    run(["docker", "rm", "-f", container], check=False, quiet=True)
    try:
        run(["docker", "run", *(["-i"] if input_text is not None else []), "--name", container, *options, base,
             "sh", "-ec", script], input_text=input_text, capture=False)
        run(["docker", "commit", container, tag], quiet=True)
    finally:
        run(["docker", "rm", "-f", container], check=False, quiet=True)
    return tag


def ensure_all(releases: list[str]) -> list[str]:
    """`ensure` every release at once: a cold build is mostly debootstrap waiting on the archive, one per release."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(len(releases), 1)) as pool:
        return list(pool.map(ensure, releases))
