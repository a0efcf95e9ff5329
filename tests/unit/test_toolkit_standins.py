"""Tests of the STAND-IN toolkit repository builder and the OCI image builder (tests/standins)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.node.plugins.module_utils import _openpgp
from gpusim_helpers import build_profile, profile_data

STANDINS = Path(__file__).resolve().parents[2] / "tests" / "standins"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"standins_{name}", STANDINS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[f"standins_{name}"] = module
    spec.loader.exec_module(module)
    return module


repo_builder = _load("build_toolkit_repo")
image_builder = _load("build_oci_image")


def _stanzas(text: str) -> list[dict[str, str]]:
    result = []
    for block in text.strip().split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if line.startswith(" "):
                continue
            key, _sep, value = line.partition(": ")
            fields[key] = value
        result.append(fields)
    return result


def test_dependency_relations_are_nvidias():
    packages = {pkg.name: pkg for pkg in repo_builder.packages_for("1.17.7-1", "amd64")}
    assert sorted(packages) == [
        "libnvidia-container-tools",
        "libnvidia-container1",
        "nvidia-container-toolkit",
        "nvidia-container-toolkit-base",
    ]
    assert packages["nvidia-container-toolkit"].depends == [
        "nvidia-container-toolkit-base (= 1.17.7-1)",
        "libnvidia-container-tools (>= 1.17.7-1)",
        "libnvidia-container-tools (<< 2.0.0)",
    ]
    assert packages["libnvidia-container-tools"].depends == ["libnvidia-container1 (>= 1.17.7-1)"]
    # The one relation NVIDIA's packages lack: the stand-in runtime and nvidia-ctk are Python 3.11 programs (tomllib).
    assert packages["nvidia-container-toolkit-base"].depends == ["python3 (>= 3.11)"]
    assert packages["nvidia-container-toolkit-base"].conffiles == ["/etc/nvidia-container-runtime/config.toml"]


def test_upstream_version():
    assert repo_builder.upstream_version("1.17.8-1") == "1.17.8"
    assert repo_builder.upstream_version("1:1.18.0~rc.1-1") == "1.18.0~rc.1"


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("standin") / "repo"
    repo_builder.main(["--out", str(out), "--archive", str(out) + ".tar.gz"])
    return out


def test_repository_has_both_versions_of_all_four_packages(repo: Path):
    stanzas = _stanzas((repo / "amd64" / "Packages").read_text())
    assert sorted((s["Package"], s["Version"]) for s in stanzas) == sorted(
        (name, version)
        for name in ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1")
        for version in ("1.17.7-1", "1.17.8-1")
    )
    for stanza in stanzas:
        deb = repo / "amd64" / stanza["Filename"]
        assert deb.is_file()
        assert hashlib.sha256(deb.read_bytes()).hexdigest() == stanza["SHA256"]
        assert "STAND-IN" in stanza["Description"]


def test_release_hashes_and_signature_verify(repo: Path, tmp_path: Path):
    release = (repo / "amd64" / "Release").read_text()
    for name in ("Packages", "Packages.gz"):
        digest = hashlib.sha256((repo / "amd64" / name).read_bytes()).hexdigest()
        assert f" {digest} " in release
    keyring = tmp_path / "key.gpg"
    subprocess.run(["gpg", "--batch", "--yes", "--dearmor", "--output", str(keyring), str(repo / "gpgkey")], check=True)
    subprocess.run(["gpgv", "--keyring", str(keyring), str(repo / "amd64" / "InRelease")], check=True, capture_output=True)
    tampered = tmp_path / "InRelease"
    tampered.write_text((repo / "amd64" / "InRelease").read_text().replace("Packages.gz", "Packages.xz"))
    bad = subprocess.run(["gpgv", "--keyring", str(keyring), str(tampered)], check=False, capture_output=True)
    assert bad.returncode != 0


def test_the_fingerprint_file_is_the_keys_fingerprint(repo: Path):
    fingerprint = (repo / "gpgkey.fingerprint").read_text()
    assert fingerprint.endswith("\n") and _openpgp.fingerprints((repo / "gpgkey").read_text()) == [fingerprint.strip()]


def test_standin_binaries_are_marked_and_versioned(repo: Path, tmp_path: Path):
    deb = repo / "amd64" / "nvidia-container-toolkit-base_1.17.8-1_amd64.deb"
    subprocess.run(["dpkg-deb", "--extract", str(deb), str(tmp_path)], check=True)
    ctk = tmp_path / "usr" / "bin" / "nvidia-ctk"
    assert "STAND-IN" in ctk.read_text()
    version = subprocess.run([str(ctk), "--version"], check=True, capture_output=True, text=True).stdout
    assert version.splitlines()[0] == "NVIDIA Container Toolkit CLI version 1.17.8"
    runtime = (tmp_path / "usr" / "bin" / "nvidia-container-runtime").read_text()
    assert runtime.startswith("#!/usr/bin/python3\n") and "STAND-IN" in runtime
    assert 'UPSTREAM_VERSION = "1.17.8"' in runtime and "@UPSTREAM@" not in runtime
    assert (tmp_path / "usr" / "bin" / "nvidia-container-runtime").stat().st_mode & 0o777 == 0o755
    fields = subprocess.run(["dpkg-deb", "--field", str(deb), "Depends"], check=True, capture_output=True, text=True).stdout
    assert fields.strip() == "python3 (>= 3.11)"


def _ctk(repo: Path, tmp_path: Path) -> Path:
    deb = repo / "amd64" / "nvidia-container-toolkit-base_1.17.7-1_amd64.deb"
    subprocess.run(["dpkg-deb", "--extract", str(deb), str(tmp_path / "pkg")], check=True)
    return tmp_path / "pkg" / "usr" / "bin" / "nvidia-ctk"


def _generate(ctk: Path, *args: str, prefix: Path | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", **({"GPUSIM_PREFIX": str(prefix)} if prefix else {})}
    return subprocess.run([str(ctk), "cdi", "generate", *args], check=False, capture_output=True, text=True, env=env)


def test_standin_cdi_generate_names_gpus_and_mig_devices_of_the_simulated_host(repo: Path, tmp_path: Path):
    prefix = tmp_path / "gpusim"
    root = build_profile("a100x2-mig-1g10gb", prefix)
    gpus = profile_data("a100x2-mig-1g10gb")["gpus"]
    ctk = _ctk(repo, tmp_path)
    spec_path = tmp_path / "cdi" / "nvidia.yaml"
    result = _generate(ctk, "--output", str(spec_path), prefix=prefix)
    assert result.returncode == 0, result.stderr
    assert "Generated CDI spec with version 0.5.0" in result.stderr
    text = spec_path.read_text()
    assert text.startswith("# STAND-IN CDI spec") and "driver version of the simulated host: 535.216.01" in text
    spec = yaml.safe_load(text)
    assert spec == json.loads(text.split("\n", 1)[1])
    assert (spec["cdiVersion"], spec["kind"]) == ("0.5.0", "nvidia.com/gpu")
    names = [device["name"] for device in spec["devices"]]
    migs = [(f"{gpu['index']}:{mig['index']}", mig["uuid"]) for gpu in gpus for mig in gpu["mig_devices"]]
    assert names == ["0", gpus[0]["uuid"], "1", gpus[1]["uuid"], *[name for pair in migs for name in pair], "all"]
    by_name = {device["name"]: device["containerEdits"]["deviceNodes"] for device in spec["devices"]}
    assert by_name["1"] == [{"path": "/dev/nvidia1", "hostPath": f"{root}/dev/nvidia1"}]
    assert by_name["1:6"] == by_name["1"] and by_name[gpus[0]["mig_devices"][0]["uuid"]] == by_name["0"]
    assert [node["path"] for node in by_name["all"]] == ["/dev/nvidia0", "/dev/nvidia1"]
    assert spec["containerEdits"]["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]
    assert [node["path"] for node in spec["containerEdits"]["deviceNodes"]] == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    same = _generate(ctk, f"--driver-root={root}", "--output", str(tmp_path / "nvidia.json"))
    assert same.returncode == 0 and json.loads((tmp_path / "nvidia.json").read_text()) == spec


def test_standin_cdi_generate_fails_without_a_working_driver(repo: Path, tmp_path: Path):
    ctk = _ctk(repo, tmp_path)
    spec_path = tmp_path / "cdi" / "nvidia.yaml"
    no_kit = _generate(ctk, "--output", str(spec_path), prefix=tmp_path / "nothing")
    assert no_kit.returncode == 1 and not spec_path.exists()
    assert "failed to generate CDI spec: failed to create device CDI specs: failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND" in no_kit.stderr
    prefix = tmp_path / "mismatch"
    build_profile("rtx8000x10-version-mismatch", prefix)
    mismatch = _generate(ctk, "--output", str(spec_path), prefix=prefix)
    assert mismatch.returncode == 1 and not spec_path.exists()
    assert "failed to initialize NVML: Driver/library version mismatch" in mismatch.stderr


def test_standin_cdi_generate_reads_a_bare_tree_without_kit(repo: Path, tmp_path: Path):
    """extensions/molecule/container_toolkit_install's hand-made host (no gpusim kit): module version file and dev/nvidia<N> nodes."""
    ctk = _ctk(repo, tmp_path)
    host = tmp_path / "host"
    (host / "sys" / "module" / "nvidia").mkdir(parents=True)
    (host / "dev").mkdir()
    spec_path = tmp_path / "cdi" / "nvidia.yaml"
    empty = _generate(ctk, "--driver-root", str(host), "--output", str(spec_path))
    assert empty.returncode == 1 and "Driver Not Loaded" in empty.stderr and not spec_path.exists()
    (host / "sys" / "module" / "nvidia" / "version").write_text("535.216.01\n")
    no_gpu = _generate(ctk, "--driver-root", str(host), "--output", str(spec_path))
    assert no_gpu.returncode == 1 and "no simulated GPU" in no_gpu.stderr
    for node in ("nvidia1", "nvidia0", "nvidiactl"):
        (host / "dev" / node).write_text("")
    result = _generate(ctk, f"--driver-root={host}", "--output", str(spec_path))
    assert result.returncode == 0, result.stderr
    spec = yaml.safe_load(spec_path.read_text())
    assert spec["kind"] == "nvidia.com/gpu" and isinstance(spec["cdiVersion"], str)
    assert [device["name"] for device in spec["devices"]] == ["0", "1", "all"]
    assert "driver version of the simulated host: 535.216.01" in spec_path.read_text()


def test_archive_holds_the_repository(repo: Path):
    with tarfile.open(str(repo) + ".tar.gz") as archive:
        names = set(archive.getnames())
    assert {"./gpgkey", "./amd64/InRelease", "./amd64/Packages"} <= names


def test_oci_image_layout(tmp_path: Path):
    binary = tmp_path / "busybox"
    binary.write_bytes(b"\x7fELF fake static binary")
    out = tmp_path / "image.tar"
    image_builder.main(["--binary", str(binary), "--name", "lab.invalid/test/busybox:1", "--out", str(out)])
    with tarfile.open(out) as archive:
        index = json.load(archive.extractfile("index.json"))
        manifest_desc = index["manifests"][0]
        assert manifest_desc["annotations"]["io.containerd.image.name"] == "lab.invalid/test/busybox:1"
        blobs = {}
        for member in archive.getmembers():
            if member.name.startswith("blobs/sha256/") and member.isfile():
                blobs["sha256:" + member.name.rsplit("/", 1)[1]] = archive.extractfile(member).read()
    for digest, data in blobs.items():
        assert digest == "sha256:" + hashlib.sha256(data).hexdigest()
    manifest = json.loads(blobs[manifest_desc["digest"]])
    config = json.loads(blobs[manifest["config"]["digest"]])
    assert config["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]
    with tarfile.open(fileobj=__import__("io").BytesIO(blobs[manifest["layers"][0]["digest"]])) as layer:
        assert layer.getmember("bin/busybox").mode == 0o755
        assert layer.getmember("bin/sleep").linkname == "busybox"


def _fake_nvidia_deb(directory: Path, name: str, version: str) -> Path:
    """A package named and versioned as NVIDIA's build of it (make nvidia-builds) would be."""
    root = directory / f"{name}-{version}-tree"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: amd64\nMaintainer: NVIDIA CORPORATION <cudatools@nvidia.com>\n"
        f"Description: NVIDIA's {name}\n")
    deb = directory / f"{name}_{version}_amd64.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(deb)], check=True, stdout=subprocess.DEVNULL)
    return deb


def _nvidia_build_of_1_20(tmp_path: Path) -> dict[str, list[Path]]:
    """NVIDIA's packages of toolkit 1.20.0-1 as make nvidia-builds leaves them, by version."""
    built = tmp_path / "toolkit-1.20.0"
    built.mkdir()
    for name in repo_builder.NVIDIA_BUILT:
        _fake_nvidia_deb(built, name, "1.20.0-1")
    return repo_builder.nvidia_debs([built], "amd64")


def test_nvidias_packages_are_served_with_libnvidia_container_stand_ins(tmp_path: Path):
    out = repo_builder.build_repository(tmp_path / "repo", ["1.20.0-1"], "amd64", _nvidia_build_of_1_20(tmp_path))
    stanzas = {s["Package"]: s for s in _stanzas((out / "amd64" / "Packages").read_text())}
    assert sorted(stanzas) == sorted(repo_builder.NVIDIA_BUILT + repo_builder.LIBNVIDIA_CONTAINER)
    for name in repo_builder.NVIDIA_BUILT:
        assert stanzas[name]["Maintainer"] == "NVIDIA CORPORATION <cudatools@nvidia.com>"
        assert "STAND-IN" not in stanzas[name]["Description"]
    for name in repo_builder.LIBNVIDIA_CONTAINER:
        assert "STAND-IN" in stanzas[name]["Description"] and stanzas[name]["Version"] == "1.20.0-1"


def test_the_stand_in_copy_has_the_same_versions_signed_with_the_same_key(tmp_path: Path):
    out = repo_builder.build_repository(tmp_path / "repo", ["1.20.0-1"], "amd64", _nvidia_build_of_1_20(tmp_path),
                                        tmp_path / "standin")
    copy = {s["Package"]: s for s in _stanzas((tmp_path / "standin" / "amd64" / "Packages").read_text())}
    assert sorted(copy) == ["libnvidia-container-tools", "libnvidia-container1", "nvidia-container-toolkit",
                            "nvidia-container-toolkit-base"]
    assert all("STAND-IN" in stanza["Description"] and stanza["Version"] == "1.20.0-1" for stanza in copy.values())
    assert not (tmp_path / "standin" / "gpgkey").exists()  # one key, kept with the repository
    for tree in (out / "amd64", tmp_path / "standin" / "amd64"):
        keyring = tmp_path / f"{tree.parent.name}.gpg"
        subprocess.run(["gpg", "--dearmor", "--output", str(keyring), str(out / "gpgkey")], check=True)
        verified = subprocess.run(["gpgv", "--keyring", str(keyring), str(tree / "InRelease")], capture_output=True, text=True,
                                  check=False)
        assert verified.returncode == 0, verified.stderr


def test_a_version_missing_one_of_nvidias_packages_is_refused(tmp_path: Path):
    _fake_nvidia_deb(tmp_path, "nvidia-container-toolkit", "1.20.0-1")
    with pytest.raises(SystemExit, match="NVIDIA's toolkit 1.20.0-1: no package nvidia-container-toolkit-base, "
                                         "nvidia-container-toolkit-operator-extensions"):
        repo_builder.nvidia_debs([tmp_path], "amd64")


def test_nvidias_packages_of_a_version_not_served_are_refused(tmp_path: Path):
    for name in repo_builder.NVIDIA_BUILT:
        _fake_nvidia_deb(tmp_path, name, "1.20.0-1")
    with pytest.raises(SystemExit):
        repo_builder.main(["--out", str(tmp_path / "repo"), "--versions", "1.17.8-1", "--nvidia-debs", str(tmp_path)])
