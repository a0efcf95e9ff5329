"""Judging gpu_node_read results (module_utils/_node_state.py, behind the node_read filters): installed_versions,
packages_at, held_packages, file_in_place, dir_in_place, systemctl_show, modules_lost, apt_failure, dpkg_audit."""
from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gpufleet.node.plugins.filter.node_read import FilterModule
from ansible_collections.gpufleet.node.plugins.module_utils._node_state import (
    apt_failure, dir_in_place, dirs_in_place, dpkg_audit, file_in_place, held_packages, installed_versions, modules_lost,
    packages_at, proc_modules, systemctl_show,
)


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


@pytest.mark.parametrize(("entry", "wanted", "at"), [
    ({"version": "535.261.03-1", "want": "hold", "status": "installed"}, "535.261.03-1", True),
    ({"version": "535.261.03-1", "want": "hold", "status": "installed"}, "535.216.03-1", False),     # another version
    ({"version": "535.261.03-1", "want": "hold", "status": "installed"}, "", True),                 # any version
    ({"version": "535.261.03-1", "want": "install", "status": "half-configured"}, "535.261.03-1", False),
    ({"version": "535.261.03-1", "want": "install", "status": "unpacked"}, "", False),
    ({"version": "535.261.03-1", "want": "deinstall", "status": "config-files"}, "535.261.03-1", False),
    ({"version": "", "want": "unknown", "status": "not-installed"}, "", False),
])
def test_only_a_fully_installed_package_at_its_version_needs_no_installation(entry: dict, wanted: str, at: bool) -> None:
    assert packages_at({"nvidia-smi": entry}, {"nvidia-smi": wanted}) == (["nvidia-smi"] if at else [])


def test_packages_at_keeps_the_order_wanted_and_ignores_what_was_not_read() -> None:
    packages = {name: {"version": "1.17.8-1", "want": "install", "status": "installed"}
                for name in ("libnvidia-container1", "nvidia-container-toolkit")}
    wanted = {"nvidia-container-toolkit": "1.17.8-1", "nvidia-container-toolkit-base": "1.17.8-1",
              "libnvidia-container1": "1.17.8-1"}
    assert packages_at(packages, wanted) == ["nvidia-container-toolkit", "libnvidia-container1"]
    assert packages_at(None, wanted) == []
    assert packages_at(packages, {}) == []


def test_held_packages_are_those_selected_hold() -> None:
    packages = {"nvidia-smi": {"version": "535.261.03-1", "want": "hold", "status": "installed"},
                "containerd": {"version": "1.6.20~ds1-1", "want": "install", "status": "installed"},
                "libcuda1": {"version": "535.261.03-1", "want": "hold", "status": "half-configured"},
                "nvidia-kernel-dkms": {"version": "", "want": "unknown", "status": "not-installed"}}
    assert held_packages(packages) == ["libcuda1", "nvidia-smi"]
    assert held_packages({}) == [] and held_packages(None) == []


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


DROPINS = {"path": "/etc/systemd/system/containerd.service.d", "exists": True, "type": "directory", "mode": "0755",
           "owner": "root", "group": "root"}


@pytest.mark.parametrize(("change", "in_place"), [
    ({}, True),
    ({"mode": "0700"}, False),
    ({"owner": "nobody"}, False),
    ({"group": "adm"}, False),
    ({"type": "file"}, False),
    ({"exists": False, "type": None}, False),
])
def test_a_directory_is_in_place_only_when_type_mode_owner_and_group_match(change: dict, in_place: bool) -> None:
    assert dir_in_place(dict(DROPINS, **change)) is in_place


def test_a_directory_never_stated_is_not_in_place() -> None:
    assert dir_in_place(None) is False
    assert dir_in_place({"path": "/x", "exists": True, "type": "directory"}) is False  # stat'ed without its mode
    assert dir_in_place(dict(DROPINS, mode="0700"), "700") is True


def test_filters_are_registered() -> None:
    filters = FilterModule().filters()
    assert filters == {"installed_versions": installed_versions, "packages_at": packages_at,
                       "held_packages": held_packages, "file_in_place": file_in_place, "dir_in_place": dir_in_place,
                       "dirs_in_place": dirs_in_place,
                       "systemctl_show": systemctl_show, "modules_lost": modules_lost,
                       "apt_failure": apt_failure, "dpkg_audit": dpkg_audit}


# Outputs captured on lab nodes (systemd containers); `systemctl show`: the driver's clients and containerd, one block per unit.
FILES = Path(__file__).parent / "files"


def test_systemctl_show_gives_one_entry_per_unit_in_order() -> None:
    units = systemctl_show((FILES / "systemctl-show-clients.txt").read_text())
    assert [unit["Id"] for unit in units] == [
        "nvidia-persistenced.service", "nvidia-dcgm.service", "dcgm.service", "nvidia-fabricmanager.service",
        "containerd.service"]
    assert [unit["Id"] for unit in units if unit["SubState"] == "running"] == ["containerd.service"]


def test_systemctl_show_of_one_unit() -> None:
    units = systemctl_show((FILES / "systemctl-show-service.txt").read_text())
    assert units == [{"ActiveState": "active", "UnitFileState": "enabled"}]


@pytest.mark.parametrize("output", ["", None, "\n\n"])
def test_systemctl_show_of_nothing_is_no_unit(output) -> None:
    assert systemctl_show(output) == []


def test_systemctl_show_keeps_an_equals_sign_in_a_value() -> None:
    assert systemctl_show("ExecStart={ path=/usr/bin/containerd ; argv[]=/usr/bin/containerd }\n") == [
        {"ExecStart": "{ path=/usr/bin/containerd ; argv[]=/usr/bin/containerd }"}]


# /proc/modules of a real H200 host (open kernel module 580.159.04): nvidia_uvm and nvidia.
PROC_MODULES = (Path(__file__).parents[3] / "fixtures" / "nvidia"
                / "proc-modules_nvidia_no-module-unload_open-kmod-580.159.04_H200.txt").read_text()
UNLOAD_ORDER = ["nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia_peermem", "nvidia"]


def test_proc_modules_gives_the_names_in_order() -> None:
    assert proc_modules(PROC_MODULES) == ["nvidia_uvm", "nvidia"]
    assert proc_modules("") == [] and proc_modules(None) == []


@pytest.mark.parametrize(("after", "lost"), [
    # the unload stopped at nvidia (a client held it): nvidia_uvm went
    ("".join(line + "\n" for line in PROC_MODULES.splitlines() if line.startswith("nvidia ")), ["nvidia_uvm"]),
    # the unload finished and the load failed: both went, nvidia is loaded first
    ("", ["nvidia", "nvidia_uvm"]),
    # nothing went (the first module was in use)
    (PROC_MODULES, []),
])
def test_modules_lost_are_those_the_unload_took_in_load_order(after: str, lost: list) -> None:
    assert modules_lost(PROC_MODULES, after, UNLOAD_ORDER) == lost


def test_modules_lost_ignores_modules_not_the_drivers() -> None:
    before = PROC_MODULES + "overlay 151552 0 - Live 0x0\n"
    assert modules_lost(before, "", UNLOAD_ORDER) == ["nvidia", "nvidia_uvm"]


# A real apt run in a lab node whose nvidia-modprobe postinst failed (the lab mirror's SIMULATED fault package), and
# dpkg --audit afterwards.
FAILED_APT = {"msg": "'/usr/bin/apt-get -y ... install ...' failed: debconf: delaying package configuration",
              "stdout": (FILES / "apt-install-postinst-failure.stdout").read_text(),
              "stderr": (FILES / "apt-install-postinst-failure.stderr").read_text()}


def test_apt_failure_keeps_dpkgs_error_with_the_scripts_message_and_apts_error() -> None:
    assert apt_failure(FAILED_APT) == (
        "gpufleet test lab: SIMULATED failure of nvidia-modprobe's postinst (configure) "
        "dpkg: error processing package nvidia-modprobe (--configure): "
        "installed nvidia-modprobe package post-installation script subprocess returned error exit status 1 "
        "E: Sub-process /usr/bin/dpkg returned an error code (1)")


@pytest.mark.parametrize(("result", "said"), [
    ({"msg": "Failed to fetch file:/srv/x.deb"}, "Failed to fetch file:/srv/x.deb"),
    ({"stderr": "E: Unable to locate package nvidia-smi\n", "msg": "failed"}, "E: Unable to locate package nvidia-smi"),
    ({}, "no message"),
])
def test_apt_failure_falls_back_to_the_message(result: dict, said: str) -> None:
    assert apt_failure(result) == said


def test_dpkg_audit_lists_the_packages_not_fully_installed() -> None:
    assert dpkg_audit((FILES / "dpkg-audit-half-configured.txt").read_text()) == ["nvidia-modprobe"]
    assert dpkg_audit("") == [] and dpkg_audit(None) == []


def test_dirs_in_place_name_the_directories_as_wanted() -> None:
    stats = {"dropin_dir": DROPINS, "config_dir": dict(DROPINS, mode="0700"), "checker_dir": dict(DROPINS, path="/usr/local/libexec/gpufleet"),
             "missing": {"path": "/x", "exists": False}}
    assert dirs_in_place(stats) == ["dropin_dir", "checker_dir"]
    assert dirs_in_place(None) == []
