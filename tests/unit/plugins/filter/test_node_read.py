"""Filters over gpu_node_read results: installed_versions and file_in_place."""
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.node.plugins.filter.node_read import FilterModule, file_in_place, installed_versions


@pytest.mark.parametrize(("entry", "installed"), [
    ({"version": "535.261.03-1", "want": "hold", "status": "installed"}, True),
    ({"version": "535.261.03-1", "want": "install", "status": "half-configured"}, True),  # a version is on disk
    ({"version": "535.261.03-1", "want": "deinstall", "status": "config-files"}, False),  # removed, config kept
    ({"version": "", "want": "purge", "status": "not-installed"}, False),
    ({"version": "", "want": "unknown", "status": "installed"}, False),                   # no version: nothing to compare
])
def test_what_counts_as_installed(entry: dict, installed: bool) -> None:
    assert ("nvidia-smi" in installed_versions({"nvidia-smi": entry})) is installed


def test_versions_are_kept_as_dpkg_gives_them() -> None:
    packages = {"nvidia-smi": {"version": "535.261.03-1", "want": "hold", "status": "installed"},
                "containerd": {"version": "1:1.6.20~ds1-1+deb12u3", "want": "install", "status": "installed"}}
    assert installed_versions(packages) == {"nvidia-smi": "535.261.03-1", "containerd": "1:1.6.20~ds1-1+deb12u3"}


def test_nothing_read_is_nothing_installed() -> None:
    assert installed_versions({}) == {}
    assert installed_versions(None) == {}


PIN = {"path": "/etc/apt/preferences.d/x", "exists": True, "content": "Package: nvidia-smi\n", "mode": "0644",
       "owner": "root", "group": "root"}


@pytest.mark.parametrize(("change", "in_place"), [
    ({}, True),
    ({"content": "Package: nvidia-smi\nPin: version 1\n"}, False),
    ({"mode": "0600"}, False),
    ({"owner": "nobody"}, False),
    ({"group": "adm"}, False),
    ({"exists": False, "content": ""}, False),
    ({"error": "Permission denied"}, False),
])
def test_a_file_is_in_place_only_when_content_mode_owner_and_group_match(change: dict, in_place: bool) -> None:
    assert file_in_place(dict(PIN, **change), "Package: nvidia-smi\n", "0644") is in_place


def test_modes_compare_as_numbers() -> None:
    assert file_in_place(PIN, "Package: nvidia-smi\n", "644") is True


def test_a_file_never_read_is_not_in_place() -> None:
    assert file_in_place(None, "", "0644") is False
    assert file_in_place({"path": "/x", "exists": True, "content": ""}, "", "0644") is False  # read without its mode


def test_filters_are_registered() -> None:
    filters = FilterModule().filters()
    assert filters["installed_versions"] is installed_versions and filters["file_in_place"] is file_in_place
