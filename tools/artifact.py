"""Build the Galaxy artifact and install it, with its declared dependencies, into an empty collections path.

    python tools/artifact.py [--source DIR] [--dest DIR]

``DEST/gpufleet-node-<version>.tar.gz`` is what ``ansible-galaxy collection build`` makes of SOURCE (the
checkout by default); ``DEST/collections`` holds it installed as a user installs it, with every collection
galaxy.yml depends on. Galaxy is not reachable from the test lab, so the dependencies are installed offline
from the collections the pinned ``ansible`` bundle ships, never from the checkout. The molecule scenario
``onboard_fleet`` runs the main job from that install.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DEST = REPO / ".build" / "artifact"


def tool(name: str) -> str:
    """An executable of the running Python's virtualenv, else of PATH."""
    return shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name) or name


SKIPPED_DIRS = {".git", ".venv", ".build", ".pytest_cache", "__pycache__"}


def checkout_files(repo: Path = REPO) -> list[str]:
    """The checkout's files as git sees them (tracked, and untracked but not ignored); every file outside
    SKIPPED_DIRS where ``repo`` is no git work tree."""
    listing = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=repo,
                             capture_output=True, check=False)
    if listing.returncode == 0:
        return [name for name in listing.stdout.decode().split("\0") if name and (repo / name).is_file()]
    return [str(path.relative_to(repo)) for path in repo.rglob("*")
            if path.is_file() and not SKIPPED_DIRS.intersection(path.relative_to(repo).parts)]


def snapshot(repo: Path, dest: Path) -> Path:
    """A copy of the checkout's files in ``dest``: what a clean clone holds, whatever runs write meanwhile."""
    for name in checkout_files(repo):
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / name, target)
    return dest


def _run(argv: list[str], env: dict[str, str] | None = None) -> None:
    """Run ``argv``; a failure raises with everything the command printed."""
    result = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}{result.stderr}")


def galaxy_metadata(source: Path) -> dict:
    return yaml.safe_load((source / "galaxy.yml").read_text(encoding="utf-8"))


def build(source: Path, dest: Path) -> Path:
    """The tarball ``ansible-galaxy collection build`` makes of ``source``."""
    dest.mkdir(parents=True, exist_ok=True)
    meta = galaxy_metadata(source)
    tarball = dest / f"{meta['namespace']}-{meta['name']}-{meta['version']}.tar.gz"
    _run([tool("ansible-galaxy"), "collection", "build", "--force", "--output-path", str(dest), str(source)])
    return tarball


def bundled_collection(fqcn: str) -> Path:
    """Where the Python environment's ``ansible`` bundle keeps collection ``fqcn``."""
    import ansible_collections  # the bundle's namespace package

    namespace, name = fqcn.split(".")
    for root in ansible_collections.__path__:
        candidate = Path(root) / namespace / name
        if (candidate / "MANIFEST.json").is_file():
            return candidate
    raise SystemExit(f"collection {fqcn} (a dependency in galaxy.yml) is not in the installed ansible bundle")


def requirements(tarball: Path, dependencies: dict[str, str]) -> dict:
    """A requirements file: the artifact, and each dependency from the bundle."""
    return {"collections": [{"name": str(tarball), "type": "file"}]
            + [{"name": str(bundled_collection(fqcn)), "type": "dir"} for fqcn in sorted(dependencies)]}


def install(tarball: Path, dependencies: dict[str, str], collections_path: Path) -> Path:
    """Install the artifact and its dependencies into ``collections_path``, which is emptied first."""
    shutil.rmtree(collections_path, ignore_errors=True)
    collections_path.mkdir(parents=True)
    requirements_file = collections_path.parent / "requirements.yml"
    requirements_file.write_text(yaml.safe_dump(requirements(tarball, dependencies)), encoding="utf-8")
    # Without the scan, collections already in the Python environment do not count as installed.
    env = {**os.environ, "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false"}
    _run([tool("ansible-galaxy"), "collection", "install", "--offline", "-p", str(collections_path),
          "-r", str(requirements_file)], env=env)
    return collections_path


def build_and_install(source: Path, dest: Path) -> tuple[Path, Path]:
    tarball = build(source, dest)
    return tarball, install(tarball, galaxy_metadata(source).get("dependencies") or {}, dest / "collections")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=REPO, help="the collection's source tree")
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help="where the tarball and the install go")
    args = parser.parse_args()
    try:
        tarball, collections_path = build_and_install(args.source.resolve(), args.dest.resolve())
    except RuntimeError as error:
        sys.stderr.write(f"{error}\n")
        return 1
    print(f"artifact: {tarball}\ninstalled into: {collections_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
