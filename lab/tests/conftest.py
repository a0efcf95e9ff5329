"""The lab's own tests (`make units` runs them with the collection's unit tests; `make kubelab-test` runs e2e/).

pytest.ini puts lab/ on sys.path, so `gpufleet_lab` imports directly; the helpers that build simulated GPU hosts
(gpusim_helpers) are shared with the collection's unit tests, which use them too.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "unit"))


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """e2e/ drives the real Kubernetes lab (root, docker, minutes): collected only when named on the command line."""
    if collection_path.name == "e2e" and not any("e2e" in str(arg) for arg in config.args):
        return True
    return None


HOST_DEB822 = """Types: deb
# a comment
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://src.example/debian
Suites: bookworm
Components: main
"""


@pytest.fixture
def host_deb822_sources() -> str:
    """A host's deb822 sources: the archive, security and a deb-src entry (apt_mirror and binaries read them)."""
    return HOST_DEB822
