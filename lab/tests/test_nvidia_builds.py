"""Sources and cache keys of NVIDIA's code built for the lab (lab/gpufleet_lab/nvidia_builds.py)."""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from gpufleet_lab import nvidia_builds
from gpufleet_lab.proc import LabError


def _source(archive: Path, sha256: str | None = None) -> nvidia_builds.Source:
    return nvidia_builds.Source("demo", "NVIDIA/demo", "v1.0.0", "a" * 40, archive.name,
                                sha256 or hashlib.sha256(archive.read_bytes()).hexdigest())


def test_pins_are_full_checksums_and_commits():
    for source in nvidia_builds.SOURCES.values():
        assert re.fullmatch(r"[0-9a-f]{64}", source.sha256), source.name
        assert re.fullmatch(r"[0-9a-f]{40}", source.commit), source.name
        assert source.archive == f"{source.name}-{source.tag}.tar.xz"
        assert source.url == f"https://github.com/{source.repository}.git"


def test_an_archive_with_the_pinned_checksum_is_used(tmp_path):
    archive = tmp_path / "demo-v1.0.0.tar.xz"
    archive.write_bytes(b"release")
    assert nvidia_builds.verify_archive(_source(archive), tmp_path) == archive


def test_a_corrupt_archive_stops_the_build_naming_the_file(tmp_path):
    archive = tmp_path / "demo-v1.0.0.tar.xz"
    archive.write_bytes(b"release")
    source = _source(archive)
    archive.write_bytes(b"tampered")
    with pytest.raises(LabError) as raised:
        nvidia_builds.verify_archive(source, tmp_path)
    message = str(raised.value)
    assert str(archive) in message and source.sha256 in message
    assert hashlib.sha256(b"tampered").hexdigest() in message and "NVIDIA/demo v1.0.0" in message


def test_a_missing_archive_says_where_to_put_it(tmp_path):
    source = nvidia_builds.Source("demo", "NVIDIA/demo", "v1.0.0", "a" * 40, "demo-v1.0.0.tar.xz", "b" * 64)
    with pytest.raises(LabError) as raised:
        nvidia_builds.verify_archive(source, tmp_path)
    message = str(raised.value)
    assert f"{tmp_path / 'demo-v1.0.0.tar.xz'} is missing" in message
    assert "b" * 64 in message and nvidia_builds.SOURCES_ENV in message and source.url in message


def test_a_clone_at_another_commit_is_refused():
    source = nvidia_builds.SOURCES["k8s-test-infra"]
    nvidia_builds.verify_commit(source, source.commit + "\n", "the clone")
    with pytest.raises(LabError, match="the clone is at commit 0{40}, expected " + source.commit):
        nvidia_builds.verify_commit(source, "0" * 40, "the clone")


def test_the_sources_directory_is_the_variable_else_the_shared_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(nvidia_builds.SOURCES_ENV, str(tmp_path))
    assert nvidia_builds.sources_dir() == tmp_path
    monkeypatch.delenv(nvidia_builds.SOURCES_ENV)
    default = nvidia_builds.REPO_ROOT.parent / "shared" / "upstream"
    assert nvidia_builds.sources_dir() == (default if default.is_dir() else None)


def test_the_cache_key_follows_the_patches(tmp_path, monkeypatch):
    source = nvidia_builds.SOURCES["k8s-test-infra"]
    monkeypatch.setattr(nvidia_builds, "PATCHES", tmp_path)
    (tmp_path / source.name).mkdir()
    bare = nvidia_builds.build_key(source)
    patch = tmp_path / source.name / "0001-x.patch"
    patch.write_text("one")
    patched = nvidia_builds.build_key(source)
    patch.write_text("two")
    assert len({bare, patched, nvidia_builds.build_key(source)}) == 3


def test_the_lab_patches_of_the_mock_are_there_and_explain_themselves():
    version, carried, event_wait = nvidia_builds.patches_of(nvidia_builds.SOURCES["k8s-test-infra"])
    for patch in (version, carried, event_wait):
        assert patch.read_text().startswith("gpufleet.node lab patch")
    assert "+++ b/pkg/gpu/mocknvml/engine/library_version.go" in version.read_text()
    assert "ERROR_LIB_RM_VERSION_MISMATCH" in version.read_text()
    assert "+++ b/pkg/gpu/mocknvml/engine/embedded_config.go" in carried.read_text()
    assert '+const configFooterMark = "\\n#gpusim-mock-nvml-config:"' in carried.read_text()
    assert "+++ b/pkg/gpu/mocknvml/bridge/events.go" in event_wait.read_text()
    assert "+\treturn waitForXid(data, timeoutms)" in event_wait.read_text()


def _fake_toolkit_build(monkeypatch, debs):
    def build_in_container(tree: Path, script: str) -> None:
        (tree / "dist").mkdir()
        for program in nvidia_builds.TOOLKIT_PROGRAMS:
            (tree / "dist" / program).write_text(program)
        for deb in debs:
            (tree / deb).write_text(deb)
        (tree / "NVIDIA_CTK_VERSION").write_text("NVIDIA Container Toolkit CLI version 1.20.0\n")
    monkeypatch.setattr(nvidia_builds, "build_in_container", build_in_container)


def test_the_toolkit_is_built_and_packaged_as_nvidia_does(tmp_path, monkeypatch):
    debs = [f"{name}_1.20.0-1_amd64.deb" for name in nvidia_builds.TOOLKIT_PACKAGES]
    _fake_toolkit_build(monkeypatch, debs)
    tree, out = tmp_path / "tree", tmp_path / "out"
    tree.mkdir(), out.mkdir()
    provenance = nvidia_builds._toolkit_builder("1.20.0", "c" * 40)(tree, out)
    assert sorted(path.name for path in (out / "bin").iterdir()) == sorted(nvidia_builds.TOOLKIT_PROGRAMS)
    assert sorted(path.name for path in (out / "debs").iterdir()) == sorted(debs) == provenance["packages"]
    script = nvidia_builds._toolkit_script("1.20.0", "c" * 40)
    assert f"make cmds PREFIX=/src/dist GIT_COMMIT={'c' * 40} VERSION=1.20.0" in script
    assert "VERSION=1.20.0-1 LIBNVIDIA_CONTAINER_TOOLS_VERSION=1.20.0-1" in script
    assert "nvidia-container-toolkit (1.20.0-1) UNRELEASED" in script and "dpkg-buildpackage -us -uc -b" in script


def test_a_toolkit_build_missing_a_package_stops_naming_it(tmp_path, monkeypatch):
    _fake_toolkit_build(monkeypatch, ["nvidia-container-toolkit_1.20.0-1_amd64.deb"])
    tree, out = tmp_path / "tree", tmp_path / "out"
    tree.mkdir(), out.mkdir()
    with pytest.raises(LabError, match="expected one .deb of each of nvidia-container-toolkit, nvidia-container-toolkit-base"):
        nvidia_builds._toolkit_builder("1.20.0", "c" * 40)(tree, out)


def test_every_toolkit_the_lab_builds_is_pinned_at_its_tag():
    for version in nvidia_builds.TOOLKIT_VERSIONS:
        source = nvidia_builds.SOURCES[f"nvidia-container-toolkit-{version}"]
        assert source.tag == f"v{version}" and source.repository == "NVIDIA/nvidia-container-toolkit"


def test_a_build_is_made_once_with_its_provenance_and_linked(tmp_path, monkeypatch):
    tree = tmp_path / "src" / "demo-1.0.0"
    tree.mkdir(parents=True)
    (tree / "main.go").write_text("package main\n")
    archive = tmp_path / "upstream" / "demo-v1.0.0.tar.xz"
    archive.parent.mkdir()
    subprocess.run(["tar", "-cJf", str(archive), "-C", str(tree.parent), tree.name], check=True)
    source = _source(archive)
    monkeypatch.setenv(nvidia_builds.SOURCES_ENV, str(archive.parent))
    monkeypatch.setattr(nvidia_builds, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(nvidia_builds, "LINKS", tmp_path / "links")
    calls = []

    def build(unpacked: Path, out: Path) -> dict:
        calls.append(unpacked)
        assert (unpacked / "main.go").is_file()
        (unpacked / "GO_VERSION").write_text("go version go1.26.10 linux/amd64\n")
        (out / "demo").write_text("binary")
        return {"what": "demo"}

    built = nvidia_builds.ensure_build("demo", source, build)
    assert built == tmp_path / "cache" / f"demo-{nvidia_builds.build_key(source)}"
    assert (built / "demo").read_text() == "binary"
    provenance = json.loads((built / "BUILD.json").read_text())
    assert (provenance["tag"], provenance["archive_sha256"], provenance["go"], provenance["what"]) == (
        "v1.0.0", source.sha256, "go version go1.26.10 linux/amd64", "demo")
    assert (tmp_path / "links" / "demo").resolve() == built
    assert nvidia_builds.ensure_build("demo", source, build) == built
    assert len(calls) == 1


def test_the_device_plugin_is_built_as_nvidias_image_build_does(tmp_path, monkeypatch):
    scripts = []

    def build_in_container(tree: Path, script: str) -> None:
        scripts.append(script)
        (tree / "dist").mkdir()
        for program in nvidia_builds.DEVICE_PLUGIN_PROGRAMS:
            (tree / "dist" / program).write_text(program)
        (tree / "PLUGIN_VERSION").write_text("NVIDIA Device Plugin version v0.20.0\n")
    monkeypatch.setattr(nvidia_builds, "build_in_container", build_in_container)
    tree, out = tmp_path / "tree", tmp_path / "out"
    tree.mkdir(), out.mkdir()
    provenance = nvidia_builds._device_plugin_builder("0.20.0", "d" * 40)(tree, out)
    assert sorted(path.name for path in (out / "bin").iterdir()) == sorted(nvidia_builds.DEVICE_PLUGIN_PROGRAMS)
    assert provenance["version_output"] == "NVIDIA Device Plugin version v0.20.0"
    assert f"make cmds PREFIX=/src/dist VERSION=v0.20.0 GIT_COMMIT={'d' * 40}" in scripts[0]
    for version in nvidia_builds.DEVICE_PLUGIN_VERSIONS:
        source = nvidia_builds.SOURCES[f"k8s-device-plugin-{version}"]
        assert source.tag == f"v{version}" and source.repository == "NVIDIA/k8s-device-plugin"
