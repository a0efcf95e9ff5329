"""Kubernetes lab binaries build: apt source discovery, versions, make and gcc arguments."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpufleet_lab.apt_mirror import AptSource, parse_deb822_sources
from gpufleet_lab import binaries


def test_mirror_is_the_bookworm_main_source_not_security(host_deb822_sources: str) -> None:
    sources = list(reversed(parse_deb822_sources(host_deb822_sources)))
    assert binaries.find_debian_mirror(sources).uri == "http://mirror.example/debian"


def test_no_bookworm_source_is_a_clear_error() -> None:
    with pytest.raises(binaries.BuildError, match="'bookworm' component 'main'"):
        binaries.find_debian_mirror([AptSource("http://x/debian", ("trixie",), ("main",), None)])


def test_deb_src_entry_uses_the_hosts_mirror_and_keyring() -> None:
    text = binaries.render_deb_src(AptSource("http://m/debian", ("bookworm",), ("main",), "/k.gpg"))
    assert "Types: deb-src\nURIs: http://m/debian\nSuites: bookworm\nComponents: main\nSigned-By: /k.gpg\n" in text


@pytest.mark.parametrize(("debian", "upstream"), [
    ("1.20.5+really1.20.2-1.1+deb12u1", "1.20.2"),
    ("1.20.5+really1.20.2-1", "1.20.2"),
    ("1:1.28.3-2", "1.28.3"),
])
def test_upstream_version(debian: str, upstream: str) -> None:
    assert binaries.upstream_version(debian) == upstream


def test_bad_version_is_rejected() -> None:
    with pytest.raises(binaries.BuildError, match="cannot read a Kubernetes version"):
        binaries.upstream_version("latest")


def test_make_what_and_environment() -> None:
    assert binaries.make_what(("kubelet", "kubectl")) == "cmd/kubelet cmd/kubectl"
    env = binaries.make_environment({"PATH": "/usr/bin"})
    assert env["GOFLAGS"] == "-mod=vendor" and env["GOPROXY"] == "off" and env["PATH"] == "/usr/bin"


def test_pause_is_compiled_like_its_makefile() -> None:
    assert binaries.pause_tag("ARCH ?= amd64\nTAG = 3.4\nREV = $(shell git describe)\n") == "3.4"
    argv = binaries.pause_gcc_argv(Path("/src"), Path("/out/pause"), "v3.4-x")
    assert argv[:6] == ["gcc", "-Os", "-Wall", "-Werror", "-static", "-DVERSION=v3.4-x"]
    assert argv[-1] == "/src/build/pause/linux/pause.c"
    with pytest.raises(binaries.BuildError):
        binaries.pause_tag("no tag here\n")


def test_binary_that_does_not_answer_is_not_accepted(tmp_path: Path) -> None:
    fake = tmp_path / "kube-apiserver"
    fake.write_text("#!/bin/sh\necho 'something else'\n")
    fake.chmod(0o755)
    assert binaries.answers_version(fake) is None
    fake.write_text("#!/bin/sh\necho 'Kubernetes v1.20.2'\n")
    assert binaries.answers_version(fake) == "Kubernetes v1.20.2"
    assert binaries.verify_bin_dir(tmp_path) is None  # the others are missing


def test_the_cache_keeps_binaries_and_source_but_not_the_build_tree(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "_output" / "local" / "go" / "cache").mkdir(parents=True)
    (src / "_output" / "bin").mkdir()
    (src / "_output" / "bin" / "kubelet").write_text("built")
    proto = src / binaries.DEVICE_PLUGIN_PROTO
    proto.parent.mkdir(parents=True)
    proto.write_text("syntax = \"proto3\";")
    binaries.prune_build_output(src)
    assert not (src / "_output").exists()
    assert proto.read_text() == "syntax = \"proto3\";"
    binaries.prune_build_output(src)  # nothing left to prune is no error


def test_the_patches_key_follows_their_names_and_contents(tmp_path: Path) -> None:
    first = tmp_path / "0001-a.patch"
    first.write_text("--- a/x\n+++ b/x\n")
    key = binaries.patches_key([first])
    assert binaries.patches_key([first]) == key and len(key) == 12
    first.write_text("--- a/x\n+++ b/x\n@@ changed\n")
    assert binaries.patches_key([first]) != key
    renamed = tmp_path / "0002-a.patch"
    first.rename(renamed)
    assert binaries.patches_key([renamed]) not in (key, binaries.patches_key([]))
    assert binaries.lab_patches(tmp_path) == [renamed]


def test_the_lab_patches_the_kubelet_alone_and_says_why() -> None:
    patches = binaries.lab_patches()
    assert [patch.name for patch in patches] == ["0001-kubelet-remove-a-deleted-pods-stopped-sandbox-at-housekeeping.patch"]
    text = patches[0].read_text()
    assert text.startswith("Lab patch of the kubelet 1.20")
    assert re.findall(r"^\+\+\+ b/(\S+)", text, flags=re.M) == ["pkg/kubelet/kubelet_pods.go"]


def test_only_binaries_built_with_these_patches_are_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFLEET_KUBE_CACHE", str(tmp_path))
    key = binaries.patches_key(binaries.lab_patches())
    for name, recorded in (("1.20.2-old", None), ("1.20.2-new", key)):
        (tmp_path / name / "bin").mkdir(parents=True)
        (tmp_path / name / "bin" / "kube-apiserver").write_text("")
        (tmp_path / name / "build.json").write_text(json.dumps({"source_version": name, "patches": recorded}))
    assert binaries.built_patches_key(tmp_path / "1.20.2-old") is None
    assert binaries.cached_bin_dir() == tmp_path / "1.20.2-new" / "bin"
    (tmp_path / "1.20.2-new" / "build.json").write_text(json.dumps({"patches": "another"}))
    with pytest.raises(binaries.BuildError, match="built with the lab's patches"):
        binaries.cached_bin_dir()
