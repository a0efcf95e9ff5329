"""deb822_source predicts the file ansible.builtin.deb822_repository writes; the expected files are ones it wrote
on a lab node (tests/unit/plugins/filter/files/*.sources)."""
from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gpufleet.node.plugins.filter.deb822 import FilterModule, deb822_source, deb822_source_path

FILES = Path(__file__).parent / "files"
MIRROR = ["file:///srv/gpufleet-package-mirror"]


@pytest.mark.parametrize(("fields", "written"), [
    # the key embedded in Signed-By (multi-line: indented, an empty line as ".")
    (dict(name="gpufleet-nvidia-driver", uris=MIRROR, suites=["gpufleet-lab"], components=["main"],
          signed_by=(FILES / "deb822-key.asc").read_text()), "deb822-inline-key.sources"),
    (dict(name="gpufleet-containerd", uris=MIRROR, suites=["gpufleet-lab-containerd"], components=["main"],
          signed_by="/etc/apt/keyrings/gpufleet-containerd.asc"), "deb822-keyring.sources"),
    # a flat repository: no components
    (dict(name="nvidia-container-toolkit", uris=["file:/srv/gpufleet-standin-toolkit/amd64"], suites=["/"],
          components=[], signed_by="/etc/apt/keyrings/nvidia-container-toolkit.asc"), "deb822-flat.sources"),
])
def test_it_predicts_what_deb822_repository_wrote(fields: dict, written: str) -> None:
    assert deb822_source(**fields) == (FILES / written).read_text()


def test_a_key_url_is_left_to_the_module() -> None:
    # the module downloads the key on every run and replaces the URL by the key's file
    assert deb822_source("cuda", ["https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"], ["/"],
                         signed_by="https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub") == ""


@pytest.mark.parametrize(("name", "path"), [
    ("gpufleet-nvidia-driver", "/etc/apt/sources.list.d/gpufleet-nvidia-driver.sources"),
    ("My_Repo x.y", "/etc/apt/sources.list.d/my-repo-xy.sources"),
])
def test_the_path_is_the_modules_slug(name: str, path: str) -> None:
    assert deb822_source_path(name) == path


def test_the_filters_are_registered() -> None:
    assert set(FilterModule().filters()) == {"deb822_source", "deb822_source_path"}
