"""nvidia_driver's decisions about its packages (module_utils/_nvidia_driver.py): what moves, what apt installs, which
holds to release, the upgrade's plan, and whether each package is installed, held and pinned as asked."""
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.node.plugins.filter.nvidia_driver import FilterModule
from ansible_collections.gpufleet.node.plugins.module_utils import _nvidia_driver as driver

WANTED = {"nvidia-smi": "535.261.03-1", "libnvidia-ml1": "535.261.03-1", "nvidia-kernel-dkms": ""}
OLD = {"nvidia-smi": "535.216.03-1", "libnvidia-ml1": "535.216.03-1", "nvidia-kernel-dkms": "535.216.03-1"}
CURRENT = {**OLD, "nvidia-smi": "535.261.03-1", "libnvidia-ml1": "535.261.03-1"}
CATALOGUE = ["nvidia-smi", "libnvidia-ml1", "nvidia-kernel-dkms", "nvidia-kernel-open-dkms"]


@pytest.mark.parametrize("installed, moving", [
    ({}, ["nvidia-smi", "libnvidia-ml1", "nvidia-kernel-dkms"]),
    (OLD, ["nvidia-smi", "libnvidia-ml1"]),
    (CURRENT, []),
])
def test_the_packages_that_move(installed: dict, moving: list) -> None:
    assert driver.packages_moving(WANTED, installed) == moving


def test_install_specs_pin_exact_versions() -> None:
    assert driver.install_specs(WANTED) == ["nvidia-smi=535.261.03-1", "libnvidia-ml1=535.261.03-1", "nvidia-kernel-dkms"]


def test_holds_released_are_of_moving_packages_and_of_packages_no_longer_installed() -> None:
    held = ["nvidia-smi", "nvidia-kernel-dkms", "nvidia-kernel-open-dkms", "containerd"]
    assert driver.packages_to_unhold(held, WANTED, OLD, CATALOGUE) == ["nvidia-smi", "nvidia-kernel-open-dkms"]
    assert driver.packages_to_unhold(held, WANTED, CURRENT, CATALOGUE) == ["nvidia-kernel-open-dkms"]


OFFERED = {"nvidia-smi": {"versions": ["535.261.03-1", "535.216.03-1"], "candidate": "535.261.03-1"},
           "libnvidia-ml1": {"versions": ["535.216.03-1"], "candidate": "535.216.03-1"}}


def test_the_plan_of_an_upgrade() -> None:
    plan = driver.driver_plan(WANTED, {**OLD, "nvidia-smi": "1:535.216.03-1"}, OFFERED, False, "535.261.03", "nvidia-smi")
    assert plan == {"target": "535.261.03",
                    "packages": {"nvidia-smi": {"installed": "1:535.216.03-1", "wanted": "535.261.03-1"},
                                 "libnvidia-ml1": {"installed": "535.216.03-1", "wanted": "535.261.03-1"},
                                 "nvidia-kernel-dkms": {"installed": "535.216.03-1", "wanted": ""}},
                    "changes": ["nvidia-smi", "libnvidia-ml1"], "unavailable": ["libnvidia-ml1=535.261.03-1"],
                    "source_changes": False, "installed_version": "535.216.03"}


def test_nothing_is_unavailable_while_the_source_changes() -> None:
    plan = driver.driver_plan(WANTED, {}, {}, True, 535.261, "nvidia-smi")
    assert (plan["unavailable"], plan["changes"], plan["installed_version"], plan["target"]) == (
        [], list(WANTED), "", "535.261")


HOST = {"installed": CURRENT, "held": list(CURRENT), "candidates": {name: {"candidate": "535.261.03-1"} for name in CURRENT}}
AS_READ = {"check_mode": False, "moving": [], "pin_to_write": False}


def test_packages_installed_held_and_pinned() -> None:
    states = driver.package_states(WANTED, HOST, AS_READ)
    assert [state["ok"] for state in states] == [True, True, True]
    assert states[2] == {"name": "nvidia-kernel-dkms", "installed": "535.216.03-1", "wanted": "", "held": True,
                         "candidate": "535.261.03-1", "ok": True}


@pytest.mark.parametrize("host, bad", [
    ({**HOST, "held": ["nvidia-smi", "nvidia-kernel-dkms"]}, {"name": "libnvidia-ml1", "held": False}),
    ({**HOST, "installed": OLD}, {"name": "nvidia-smi", "installed": "535.216.03-1"}),
    ({**HOST, "candidates": {"nvidia-smi": {"candidate": "535.309.01-1"}}}, {"name": "nvidia-smi", "candidate": "535.309.01-1"}),
    ({**HOST, "candidates": {}}, {"name": "nvidia-smi", "candidate": "(none)"}),
    ({**HOST, "installed": {}}, {"name": "nvidia-smi", "installed": "(not installed)"}),
])
def test_a_package_not_as_asked(host: dict, bad: dict) -> None:
    state = next(state for state in driver.package_states(WANTED, host, AS_READ) if state["name"] == bad["name"])
    assert not state["ok"] and all(state[key] == value for key, value in bad.items())


def test_check_mode_judges_what_the_run_would_leave() -> None:
    """Nothing was installed, held or pinned: the packages that move count at their versions, every package as held,
    and apt's candidate as the pinned version where the preferences file is to be written."""
    host = {"installed": OLD, "held": [], "candidates": {}}
    predicted = {"check_mode": True, "moving": ["nvidia-smi", "libnvidia-ml1"], "pin_to_write": True}
    states = driver.package_states(WANTED, host, predicted)
    assert [(state["installed"], state["held"], state["candidate"], state["ok"]) for state in states] == [
        ("535.261.03-1", True, "535.261.03-1", True), ("535.261.03-1", True, "535.261.03-1", True),
        ("535.216.03-1", True, "(none)", True)]
    unpinned = driver.package_states(WANTED, host, {**predicted, "pin_to_write": False})
    assert [state["ok"] for state in unpinned] == [False, False, True]


def test_the_filters() -> None:
    assert set(FilterModule().filters()) == {"driver_packages_moving", "driver_install_specs", "driver_packages_to_unhold",
                                             "driver_plan", "driver_package_states", "nvidia_driver_found"}


SOURCE = "Types: deb\nURIs: https://mirror.example/cuda\n"
MODULES_LOAD = "nvidia\nnvidia_uvm\n"
BLACKLIST = "blacklist nouveau\n"
WANTED_FILES = {"repository": True, "keyring": "", "key_fingerprints": [""], "key_content": "", "source": SOURCE,
                "modules_load": MODULES_LOAD, "blacklist": BLACKLIST, "blacklist_nouveau": True, "dkms_signs": False}


def _file(content: str | None, mode: str = "0644") -> dict:
    if content is None:
        return {"exists": False}
    return {"exists": True, "content": content, "mode": mode, "owner": "root", "group": "root"}


def _read(**files: dict) -> dict:
    base = {"source": _file(SOURCE), "modules_load": _file(MODULES_LOAD), "blacklist": _file(BLACKLIST),
            "dkms_signing": _file(None), "keyring_asc": _file(None), "keyring_gpg": _file(None),
            "loaded_module": _file("535.261.03\n", "0444")}
    return {"files": {**base, **files},
            "commands": {"apt_lists": {"stdout": "lock\npartial\n"},
                         "services": {"stdout": "Id=nvidia-persistenced.service\nUnitFileState=enabled\nActiveState=active\n"}}}


def test_a_host_with_everything_in_place_has_nothing_to_write() -> None:
    found = driver.host_found(_read(), WANTED_FILES)
    assert (found["source_to_write"], found["boot_files_to_write"]) == (False, False)
    assert found["loaded_module_version"] == "535.261.03"
    assert found["persistenced"]["UnitFileState"] == "enabled" and found["apt_lists_read"] is True


@pytest.mark.parametrize(("files", "wanted", "source_to_write"), [
    ({"source": _file(SOURCE, "0600")}, {}, True),                            # mode differs
    ({"source": _file(None)}, {}, True),                                      # missing
    ({}, {"keyring": "/etc/apt/keyrings/x.asc", "key_fingerprints": ["AB" * 20]}, True),  # keyring missing
    ({}, {"keyring": "/etc/apt/keyrings/x.gpg", "key_fingerprints": ["AB" * 20]}, True),  # binary: judged on the host
    ({"source": _file(None)}, {"repository": False}, False),                  # no repository, no file of the role
    ({"keyring_gpg": _file("\x99")}, {"repository": False}, True),           # a key left behind is removed
])
def test_the_package_source_is_written_when_it_or_its_key_is_not_in_place(files: dict, wanted: dict,
                                                                          source_to_write: bool) -> None:
    assert driver.host_found(_read(**files), {**WANTED_FILES, **wanted})["source_to_write"] is source_to_write


@pytest.mark.parametrize(("files", "wanted", "to_write"), [
    ({"modules_load": _file("nvidia\n")}, {}, True),
    ({"blacklist": _file(None)}, {}, True),
    ({"blacklist": _file(None)}, {"blacklist_nouveau": False}, False),
    ({}, {"blacklist_nouveau": False}, True),                                 # the blacklist is to remove
    ({}, {"dkms_signs": True}, True),                                         # written each run
    ({"dkms_signing": _file("x")}, {}, True),                                 # a signing file left behind
    ({"dkms_signing": {}}, {}, True),                                         # not read: not known to be absent
])
def test_the_boot_files_are_written_when_one_is_not_as_wanted(files: dict, wanted: dict, to_write: bool) -> None:
    assert driver.host_found(_read(**files), {**WANTED_FILES, **wanted})["boot_files_to_write"] is to_write


def test_an_empty_read_finds_nothing_in_place() -> None:
    found = driver.host_found({}, WANTED_FILES)
    assert found["source_to_write"] and found["boot_files_to_write"]
    assert (found["loaded_module_version"], found["persistenced"], found["apt_lists_read"]) == ("", {}, True)


def test_emptied_apt_lists_are_told_apart_from_unread_ones() -> None:
    read = _read()
    read["commands"]["apt_lists"] = {"stdout": ""}
    assert driver.host_found(read, WANTED_FILES)["apt_lists_read"] is False
