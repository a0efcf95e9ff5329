"""Build STAND-IN NVIDIA container toolkit packages and a signed flat apt repository.

NVIDIA's repository is unreachable from the test lab and Debian does not carry the toolkit, so the
tests build packages with the real names and dependency relations (binaries clearly marked as
stand-ins), index them and sign the index with a throwaway key. The layout mirrors NVIDIA's
flat repository (``<url>/$(ARCH)/``, suite ``/``) so the roles' repository code runs unchanged.

With ``--nvidia-debs``, the versions NVIDIA's own packages were built for (``make nvidia-builds``, from the tag's
``packaging/debian``) are served as NVIDIA built them; only ``libnvidia-container1`` and
``libnvidia-container-tools`` stay stand-ins (libnvidia-container does not build offline).

Usage: build_toolkit_repo.py --out DIR [--versions 1.17.7-1 1.17.8-1] [--arch amd64] [--archive FILE.tar.gz]
                             [--nvidia-debs DIR ...] [--standin-copy DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "lab"))
from gpufleet_lab import apt_repo  # noqa: E402  (the lab package, beside the tests)

SOURCES = HERE / "toolkit"
DEFAULT_VERSIONS = ("1.17.7-1", "1.17.8-1")
MAINTAINER = "gpufleet test lab <lab@example.invalid>"
STANDIN_PYTHON = "python3 (>= 3.11)"
KEY_UID = apt_repo.KEY_UID_FORMAT.format(what="stand-in repository")
RELEASE_FIELDS = {
    "Origin": "gpufleet test lab (STAND-IN NVIDIA container toolkit)",
    "Label": "gpufleet-standin-nvidia-container-toolkit",
}


@dataclass
class Package:
    """One stand-in binary package."""

    name: str
    description: str
    depends: list[str] = field(default_factory=list)
    extra_fields: dict[str, str] = field(default_factory=dict)
    # destination path inside the package -> (source file name in SOURCES, mode)
    files: dict[str, tuple[str, int]] = field(default_factory=dict)
    conffiles: list[str] = field(default_factory=list)


def upstream_version(version: str) -> str:
    """Return the upstream part of a Debian version (``1.17.7-1`` -> ``1.17.7``)."""
    base = version.split(":", 1)[-1]
    return base.rsplit("-", 1)[0] if "-" in base else base


def lib_triplet(arch: str) -> str:
    """Return the multiarch library directory name of a Debian architecture."""
    return {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}.get(arch, f"{arch}-linux-gnu")


def packages_for(version: str, arch: str) -> list[Package]:
    """Return the four packages of one toolkit version with NVIDIA's dependency relations."""
    marker = "/usr/share/doc/{name}/STAND-IN"
    return [
        Package(
            name="libnvidia-container1",
            description="NVIDIA container runtime library (STAND-IN for tests)",
            files={marker.format(name="libnvidia-container1"): ("", 0o644)},
            extra_fields={"Section": "libs"},
        ),
        Package(
            name="libnvidia-container-tools",
            description="NVIDIA container runtime library, command-line tools (STAND-IN for tests)",
            depends=[f"libnvidia-container1 (>= {version})"],
            files={"/usr/bin/nvidia-container-cli": ("nvidia-container-cli", 0o755)},
        ),
        Package(
            name="nvidia-container-toolkit-base",
            description="NVIDIA Container Toolkit Base (STAND-IN for tests)",
            # Not one of NVIDIA's relations: the stand-in runtime and nvidia-ctk are Python programs.
            depends=[STANDIN_PYTHON],
            extra_fields={
                "Breaks": "nvidia-container-toolkit (<= 1.10.0-1)",
                "Replaces": "nvidia-container-toolkit (<= 1.10.0-1)",
            },
            files={
                "/usr/bin/nvidia-container-runtime": ("nvidia-container-runtime", 0o755),
                "/usr/bin/nvidia-ctk": ("nvidia-ctk", 0o755),
                "/usr/bin/nvidia-cdi-hook": ("nvidia-cdi-hook", 0o755),
                "/etc/nvidia-container-runtime/config.toml": ("config.toml", 0o644),
            },
            conffiles=["/etc/nvidia-container-runtime/config.toml"],
        ),
        Package(
            name="nvidia-container-toolkit",
            description="NVIDIA Container toolkit (STAND-IN for tests)",
            depends=[
                f"nvidia-container-toolkit-base (= {version})",
                f"libnvidia-container-tools (>= {version})",
                "libnvidia-container-tools (<< 2.0.0)",
            ],
            extra_fields={
                "Breaks": "nvidia-container-runtime (<= 3.5.0-1), nvidia-container-runtime-hook",
                "Replaces": "nvidia-container-runtime (<= 3.5.0-1), nvidia-container-runtime-hook",
            },
            files={"/usr/bin/nvidia-container-runtime-hook": ("nvidia-container-runtime-hook", 0o755)},
        ),
    ]


# Stand-ins written in Python: the package gets them with the interpreter line of the node's python3.
PYTHON_PROGRAMS = ("nvidia-container-runtime", "nvidia-ctk")


def render_source(source: str, version: str) -> str:
    """Return a stand-in file's text with its version placeholders filled in."""
    if not source:
        return f"STAND-IN package built by the gpufleet test lab, version {version}. Not NVIDIA's software.\n"
    text = (SOURCES / source).read_text(encoding="utf-8")
    if source in PYTHON_PROGRAMS:
        text = "#!/usr/bin/python3\n" + text
    return text.replace("@VERSION@", version).replace("@UPSTREAM@", upstream_version(version))


def control_text(pkg: Package, version: str, arch: str) -> str:
    """Return the DEBIAN/control text of a package."""
    lines = [
        f"Package: {pkg.name}",
        f"Version: {version}",
        f"Architecture: {arch}",
        f"Maintainer: {MAINTAINER}",
        "Priority: optional",
    ]
    if "Section" not in pkg.extra_fields:
        lines.append("Section: utils")
    if pkg.depends:
        lines.append("Depends: " + ", ".join(pkg.depends))
    lines.extend(f"{key}: {value}" for key, value in pkg.extra_fields.items())
    lines.append(f"Description: {pkg.description}")
    lines.append(" Built by the gpufleet test lab because NVIDIA's repository is unreachable there.")
    lines.append(" Carries the real package name and dependency relations; the programs are stand-ins.")
    return "\n".join(lines) + "\n"


def build_deb(pkg: Package, version: str, arch: str, outdir: Path, workdir: Path) -> Path:
    """Build one .deb with dpkg-deb and return its path."""
    root = workdir / f"{pkg.name}_{version}"
    (root / "DEBIAN").mkdir(parents=True)
    for dest, (source, mode) in pkg.files.items():
        target = root / dest.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render_source(source, version), encoding="utf-8")
        target.chmod(mode)
    (root / "DEBIAN" / "control").write_text(control_text(pkg, version, arch), encoding="utf-8")
    if pkg.conffiles:
        (root / "DEBIAN" / "conffiles").write_text("\n".join(pkg.conffiles) + "\n", encoding="utf-8")
    deb = outdir / f"{pkg.name}_{version}_{arch}.deb"
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return deb


# NVIDIA's own packages, built from the tag's packaging/debian (lab/gpufleet_lab/nvidia_builds.py); with them the
# repository's stand-ins are only libnvidia-container's, which the lab cannot build offline.
NVIDIA_BUILT = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "nvidia-container-toolkit-operator-extensions")
LIBNVIDIA_CONTAINER = ("libnvidia-container1", "libnvidia-container-tools")


def nvidia_debs(directories: list[Path], arch: str) -> dict[str, list[Path]]:
    """NVIDIA's toolkit packages in ``directories``, by Debian version; every version must have all of NVIDIA_BUILT."""
    by_version: dict[str, list[Path]] = {}
    for directory in directories:
        for deb in sorted(directory.glob(f"*_{arch}.deb")):
            name, version = deb.name.split("_")[:2]
            if name in NVIDIA_BUILT:
                by_version.setdefault(version, []).append(deb)
    for version, debs in by_version.items():
        missing = set(NVIDIA_BUILT) - {deb.name.split("_")[0] for deb in debs}
        if missing:
            raise SystemExit(f"NVIDIA's toolkit {version}: no package {', '.join(sorted(missing))} in "
                             f"{', '.join(map(str, directories))} (make nvidia-builds)")
    if directories and not by_version:
        raise SystemExit(f"no NVIDIA toolkit package for {arch} in {', '.join(map(str, directories))} (make nvidia-builds)")
    return by_version


def _index(arch_dir: Path, versions: list[str], arch: str, nvidia: dict[str, list[Path]]) -> None:
    """The packages of every version in ``arch_dir`` (NVIDIA's where ``nvidia`` has them), indexed, unsigned."""
    arch_dir.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="standin-build-") as work:
        debs = [build_deb(pkg, version, arch, arch_dir, Path(work))
                for version in versions for pkg in packages_for(version, arch)
                if version not in nvidia or pkg.name in LIBNVIDIA_CONTAINER]
    for version in versions:
        for deb in nvidia.get(version, []):
            debs.append(Path(shutil.copy(deb, arch_dir / deb.name)))
    indexes = apt_repo.write_packages(arch_dir, debs, arch_dir)
    (arch_dir / "Release").write_text(apt_repo.release_text(arch_dir, indexes, RELEASE_FIELDS | {"Architectures": arch}),
                                      encoding="utf-8")


def build_repository(out: Path, versions: list[str], arch: str, nvidia: dict[str, list[Path]] | None = None,
                     standin_copy: Path | None = None) -> Path:
    """Build the packages of every version and the signed repository under ``out``. With ``nvidia`` (NVIDIA's
    packages by version), those versions are NVIDIA's packages plus the libnvidia-container stand-ins. With
    ``standin_copy``, the same versions as stand-ins only are laid out there too, signed with the same key, for the
    nodes NVIDIA's code cannot serve (the lab's MIG simulation)."""
    arch_dirs = [out / arch] + ([standin_copy / arch] if standin_copy else [])
    for directory in (out, standin_copy):
        if directory and directory.exists():
            shutil.rmtree(directory)
    _index(arch_dirs[0], versions, arch, nvidia or {})
    if standin_copy:
        _index(arch_dirs[1], versions, arch, {})
    apt_repo.sign(arch_dirs[0], out / "gpgkey", KEY_UID, also=arch_dirs[1:])
    for directory in (out, standin_copy):
        if directory:
            apt_repo.make_readable(directory)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="repository directory (replaced)")
    parser.add_argument("--versions", nargs="+", default=list(DEFAULT_VERSIONS), help="Debian versions to build")
    parser.add_argument("--arch", default="amd64", help="Debian architecture (default amd64)")
    parser.add_argument("--archive", type=Path, help="also write the repository as a .tar.gz (one file to copy)")
    parser.add_argument("--nvidia-debs", nargs="+", type=Path, default=[],
                        help="directories of NVIDIA's toolkit packages (make nvidia-builds): their versions are served "
                             "as NVIDIA built them, with stand-ins for libnvidia-container only")
    parser.add_argument("--standin-copy", type=Path,
                        help="also lay the same versions out as stand-ins only in this directory, signed with the same "
                             "key (for hosts NVIDIA's code cannot serve)")
    args = parser.parse_args(argv)
    for tool in ("dpkg-deb", "gpg"):
        if shutil.which(tool) is None:
            parser.error(f"{tool} not found: install Debian's dpkg and gnupg")
    nvidia = nvidia_debs(args.nvidia_debs, args.arch)
    unknown = set(nvidia) - set(args.versions)
    if unknown:
        parser.error(f"--nvidia-debs holds {', '.join(sorted(unknown))}, not in --versions {' '.join(args.versions)}")
    out = build_repository(args.out.resolve(), args.versions, args.arch, nvidia,
                           args.standin_copy.resolve() if args.standin_copy else None)
    if args.archive:
        with tarfile.open(args.archive, "w:gz") as archive:
            archive.add(out, arcname=".")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
