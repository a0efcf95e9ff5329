"""The Galaxy artifact carries the collection and nothing of the test lab."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOT_SHIPPED = (".ansible/", "pytest.ini", "tests/", "molecule/", "lab/", ".ci/", ".config/", ".venv/", ".build/", "Makefile", "requirements-dev.txt")


@pytest.fixture(scope="module")
def artifact_members(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    out = tmp_path_factory.mktemp("galaxy")
    galaxy = shutil.which("ansible-galaxy", path=str(Path(sys.executable).parent)) or "ansible-galaxy"
    subprocess.run([galaxy, "collection", "build", "--output-path", str(out), str(REPO)], check=True, capture_output=True)
    (tarball,) = out.glob("gpufleet-node-*.tar.gz")
    with tarfile.open(tarball) as tar:
        return tar.getnames()


def test_artifact_has_the_collection(artifact_members: list[str]) -> None:
    for required in ("MANIFEST.json", "FILES.json", "README.md", "meta/runtime.yml"):
        assert required in artifact_members


@pytest.mark.parametrize("prefix", NOT_SHIPPED)
def test_artifact_has_no_lab_or_test_files(artifact_members: list[str], prefix: str) -> None:
    leaked = [name for name in artifact_members if name == prefix.rstrip("/") or name.startswith(prefix)]
    assert leaked == []
