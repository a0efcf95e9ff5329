"""The package mirror's choice of test versions, from `apt-cache madison` output read off Debian's archive."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpufleet_lab import package_mirror
from gpufleet_lab.proc import LabError

ARCHIVE = "http://deb.debian.org/debian"
SECURITY = "http://deb.debian.org/debian-security"
# apt-cache madison of Debian bookworm's suites on 2026-12-02
MADISON = {
    "nvidia-smi": f"""\
nvidia-smi | 535.309.01-0+deb12u1 | {SECURITY} bookworm-security/non-free amd64 Packages
nvidia-smi | 535.261.03-1 | {ARCHIVE} bookworm/non-free amd64 Packages
nvidia-smi | 535.216.03-2~bpo12+1 | {ARCHIVE} bookworm-backports/non-free amd64 Packages
""",
    "nvidia-persistenced": f"nvidia-persistenced | 535.171.04-1~deb12u1 | {ARCHIVE} bookworm/contrib amd64 Packages\n",
    "nvidia-modprobe": f"""\
nvidia-modprobe | 535.309.01-0+deb12u1 | {SECURITY} bookworm-security/contrib amd64 Packages
nvidia-modprobe | 535.161.07-1~deb12u1 | {ARCHIVE} bookworm/contrib amd64 Packages
""",
    "containerd": f"""\
containerd | 1.6.20~ds1-1+deb12u3 | {ARCHIVE} bookworm/main amd64 Packages
containerd | 1.6.20~ds1-1+deb12u2 | {SECURITY} bookworm-security/main amd64 Packages
""",
}


def offers(**replaced: str) -> dict[str, list[package_mirror.Offer]]:
    return {name: package_mirror.parse_madison(replaced.get(name.replace("-", "_"), text)) for name, text in MADISON.items()}


def test_the_three_newest_driver_versions_and_their_package_versions() -> None:
    versions = package_mirror.choose_versions(offers(), "2026-12-02")
    assert versions["driver"] == {"previous": "535.216.03", "current": "535.261.03", "newest": "535.309.01"}
    assert versions["driver_packages"]["535.216.03"] == {
        "suite": "bookworm-backports", "package_version": "535.216.03-2~bpo12+1",
        "package_versions": {"nvidia-persistenced": "535.171.04-1~deb12u1", "nvidia-modprobe": "535.161.07-1~deb12u1"}}
    # nvidia-modprobe: the newest at or below the driver, so the security update's own for 535.309.01 only
    assert versions["driver_packages"]["535.309.01"]["package_versions"]["nvidia-modprobe"] == "535.309.01-0+deb12u1"
    assert versions["driver_packages"]["535.261.03"]["package_versions"]["nvidia-modprobe"] == "535.161.07-1~deb12u1"
    assert versions["containerd"] == {"version": "1.6.20~ds1-1+deb12u3", "suite": "bookworm"}


def test_after_a_point_release_the_choice_moves_with_the_archive() -> None:
    moved = f"""\
nvidia-smi | 535.330.02-0+deb12u1 | {SECURITY} bookworm-security/non-free amd64 Packages
nvidia-smi | 535.309.01-1~deb12u1 | {ARCHIVE} bookworm/non-free amd64 Packages
nvidia-smi | 535.309.01-0+deb12u1 | {SECURITY} bookworm-security/non-free amd64 Packages
nvidia-smi | 535.216.03-2~bpo12+1 | {ARCHIVE} bookworm-backports/non-free amd64 Packages
nvidia-smi | 550.163.01-1~bpo12+1 | {ARCHIVE} bookworm-backports/non-free amd64 Packages
"""
    versions = package_mirror.choose_versions(offers(nvidia_smi=moved), "2027-01-10")
    assert versions["driver"] == {"previous": "535.216.03", "current": "535.309.01", "newest": "535.330.02"}
    # one entry per driver version: the newest package of it
    assert versions["driver_packages"]["535.309.01"]["package_version"] == "535.309.01-1~deb12u1"


@pytest.mark.parametrize("smi", [
    "",
    f"nvidia-smi | 535.261.03-1 | {ARCHIVE} bookworm/non-free amd64 Packages\n"
    f"nvidia-smi | 535.261.03-1 | {SECURITY} bookworm-security/non-free amd64 Packages\n",
])
def test_fewer_than_three_driver_versions_is_a_clear_error(smi: str) -> None:
    with pytest.raises(LabError, match="the tests need 3: previous, current and newest"):
        package_mirror.choose_versions(offers(nvidia_smi=smi), "2026-12-02")


def test_the_cache_key_is_the_versions_not_the_day() -> None:
    first = package_mirror.choose_versions(offers(), "2026-12-02")
    later = package_mirror.choose_versions(offers(), "2026-12-24")
    assert package_mirror.key_of(first) == package_mirror.key_of(later)
    moved = offers(containerd=f"containerd | 1.6.20~ds1-1+deb12u4 | {ARCHIVE} bookworm/main amd64 Packages\n")
    assert package_mirror.key_of(package_mirror.choose_versions(moved, "2026-12-02")) != package_mirror.key_of(first)


@pytest.mark.parametrize(("file_name", "pin"), [
    ("libpci3_1%3a3.9.0-4_amd64.deb", "libpci3=1:3.9.0-4"),
    ("nvidia-smi_535.309.01-0+deb12u1_amd64.deb", "nvidia-smi=535.309.01-0+deb12u1"),
    ("pci.ids_0.0~2023.04.11-1_all.deb", "pci.ids=0.0~2023.04.11-1"),
])
def test_a_download_file_name_becomes_a_pin(file_name: str, pin: str) -> None:
    assert package_mirror._pin_of_file_name(file_name) == pin  # pylint: disable=protected-access


def test_every_install_pins_the_role_catalog_at_one_version() -> None:
    versions = package_mirror.choose_versions(offers(), "2026-12-02")
    installs = package_mirror.pins_of(versions)
    assert installs[-1] == ["containerd=1.6.20~ds1-1+deb12u3"]
    previous = next(pins for pins in installs if "nvidia-smi=535.216.03-2~bpo12+1" in pins)
    assert "libcuda1=535.216.03-2~bpo12+1" in previous and "nvidia-persistenced=535.171.04-1~deb12u1" in previous


def test_the_fault_is_the_newest_drivers_nvidia_modprobe_at_a_version_of_its_own() -> None:
    faults = package_mirror.choose_versions(offers(), "2026-12-02")["faults"]
    assert faults == {"suite": "gpufleet-lab-faults", "driver": "535.309.01", "fails": "postinst",
                      "package_versions": {"nvidia-modprobe": "535.309.01-0+deb12u1+gpufleet.postinst.fails1"},
                      "rebuilt_from": "535.309.01-0+deb12u1"}


def _deb(tmp_path: Path, name: str, version: str) -> Path:
    """A minimal real .deb built with dpkg-deb, named as apt-get download names it."""
    tree = tmp_path / "src" / name
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "usr" / "bin").mkdir(parents=True)
    (tree / "usr" / "bin" / name).write_text("#!/bin/sh\n")
    (tree / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: amd64\nMaintainer: lab <lab@example.invalid>\n"
        f"Description: test package\n")
    pool = tmp_path / "pool"
    pool.mkdir(exist_ok=True)
    deb = pool / f"{name}_{version}_amd64.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(tree), str(deb)], check=True, capture_output=True)
    return deb


def test_the_fault_package_is_the_archives_with_a_failing_postinst(tmp_path: Path) -> None:
    _deb(tmp_path, "nvidia-modprobe", "535.309.01-0+deb12u1")
    faults = package_mirror.choose_versions(offers(), "2026-12-02")["faults"]
    package_mirror._add_fault_package(tmp_path / "pool", tmp_path / "faults", faults)  # pylint: disable=protected-access
    (built,) = (tmp_path / "faults").iterdir()
    fields = subprocess.run(["dpkg-deb", "--field", str(built), "Package", "Version"], check=True,
                            capture_output=True, text=True).stdout
    assert fields.splitlines() == ["Package: nvidia-modprobe", "Version: 535.309.01-0+deb12u1+gpufleet.postinst.fails1"]
    postinst = subprocess.run(["dpkg-deb", "--info", str(built), "postinst"], check=True, capture_output=True,
                              text=True).stdout
    assert "SIMULATED" in postinst and postinst.rstrip().endswith("exit 1")
    assert package_mirror._pin_of_file_name(built.name) == (  # pylint: disable=protected-access
        "nvidia-modprobe=535.309.01-0+deb12u1+gpufleet.postinst.fails1")


def test_a_fault_package_missing_from_the_pool_is_a_clear_error(tmp_path: Path) -> None:
    _deb(tmp_path, "nvidia-modprobe", "535.161.07-1~deb12u1")
    faults = package_mirror.choose_versions(offers(), "2026-12-02")["faults"]
    with pytest.raises(LabError, match="nvidia-modprobe=535.309.01-0[+]deb12u1 is not in the pool"):
        package_mirror._add_fault_package(tmp_path / "pool", tmp_path / "faults", faults)  # pylint: disable=protected-access
