"""The execution environment: ansible-builder makes a build context of the artifact, and finds what it needs.

Building the image needs a container registry (the base image), which the test lab cannot reach; the build
context ``ansible-builder create`` writes, and the requirements ``ansible-builder introspect`` reads from the
installed collection, are what is tested.
"""
from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

import artifact as artifact_tool  # tools/artifact.py (pytest.ini puts tools/ on the path)

REPO = Path(__file__).resolve().parents[2]
EE_FILES = ("execution-environment.yml", "requirements.txt", "bindep.txt")


def _requirement_lines(name: str) -> list[str]:
    lines = (REPO / name).read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


@pytest.fixture(scope="module")
def definition() -> dict:
    return yaml.safe_load((REPO / "execution-environment.yml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The build context ansible-builder writes beside a freshly built artifact, as `make ee-context` does."""
    workdir = tmp_path_factory.mktemp("ee")
    for name in EE_FILES:
        shutil.copy(REPO / name, workdir / name)
    artifact_tool.build(artifact_tool.snapshot(REPO, workdir / "source"), workdir)
    subprocess.run([artifact_tool.tool("ansible-builder"), "create", "-f", "execution-environment.yml", "-c", "context"],
                   cwd=workdir, check=True, capture_output=True, text=True)
    return workdir / "context"


def test_definition_is_schema_3_and_names_this_version(definition: dict) -> None:
    meta = artifact_tool.galaxy_metadata(REPO)
    tarball = f"{meta['namespace']}-{meta['name']}-{meta['version']}.tar.gz"
    assert definition["version"] == 3
    assert definition["additional_build_files"] == [{"src": tarball, "dest": "collections"}]
    assert {"name": f"collections/{tarball}", "type": "file"} in definition["dependencies"]["galaxy"]["collections"]


def test_definition_installs_every_collection_dependency(definition: dict) -> None:
    listed = {entry["name"]: entry.get("version") for entry in definition["dependencies"]["galaxy"]["collections"]}
    assert artifact_tool.galaxy_metadata(REPO)["dependencies"].items() <= listed.items()


def test_context_carries_the_artifact(context: Path) -> None:
    with tarfile.open(next((context / "_build" / "collections").glob("gpufleet-node-*.tar.gz"))) as tar:
        manifest = yaml.safe_load(tar.extractfile("MANIFEST.json"))
    meta = artifact_tool.galaxy_metadata(REPO)
    assert manifest["collection_info"]["name"] == meta["name"]
    assert manifest["collection_info"]["version"] == meta["version"]


def test_context_installs_the_collections_and_their_requirements(context: Path, definition: dict) -> None:
    requirements = yaml.safe_load((context / "_build" / "requirements.yml").read_text(encoding="utf-8"))
    containerfile = next(path for path in (context / "Containerfile", context / "Dockerfile") if path.exists()).read_text()
    assert requirements == definition["dependencies"]["galaxy"]
    assert "ansible-galaxy collection install" in containerfile and "-r requirements.yml" in containerfile
    # introspection at build time turns every collection's requirements.txt and bindep.txt into installs
    assert "introspect.py introspect" in containerfile
    assert "install-from-bindep" in containerfile


@pytest.fixture(scope="module")
def introspected(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What ansible-builder finds in the artifact installed with its dependencies."""
    _tarball, collections_path = artifact_tool.build_and_install(REPO, tmp_path_factory.mktemp("introspect"))
    result = subprocess.run([artifact_tool.tool("ansible-builder"), "introspect", str(collections_path)],
                            check=True, capture_output=True, text=True)
    return yaml.safe_load(result.stdout.split("---", 1)[1])


@pytest.mark.parametrize(("kind", "file"), [("python", "requirements.txt"), ("system", "bindep.txt")])
def test_introspection_finds_the_collections_requirements(introspected: dict, kind: str, file: str) -> None:
    found = {line.split("#")[0].strip() for line in introspected[kind] if "from collection gpufleet.node" in line}
    assert found == set(_requirement_lines(file))
