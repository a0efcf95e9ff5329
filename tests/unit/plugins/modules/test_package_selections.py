"""gpufleet.node.package_selections: one read of the selections, one write of those that differ."""
from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gpufleet.node.plugins.modules import package_selections

from module_runner import run_module

# `dpkg --get-selections` on a lab node after onboarding (tab-separated, with architecture suffixes).
SELECTIONS = (Path(__file__).parent / "files" / "dpkg-get-selections.txt").read_text()


def run(args, check_mode=False, diff=False, set_selections=(0, "", "")):
    """The module's result, and the data each `dpkg --set-selections` was given (--get-selections answers SELECTIONS,
    --set-selections answers set_selections)."""
    writes = []

    def commands(argv, environ_update, data=None):
        if argv[1:] == ["--get-selections"]:
            assert data is None
            return 0, SELECTIONS, ""
        assert argv[1:] == ["--set-selections"], argv
        writes.append(data)
        return set_selections

    result = run_module(package_selections.main, dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff),
                        commands=commands, get_bin_path=lambda module, name, required=False: "/usr/bin/" + name)
    return result, writes


@pytest.mark.parametrize("line, expected", [
    ("containerd\t\t\t\t\thold", {"containerd": "hold"}),
    ("libcuda1:amd64\t\t\t\t\thold", {"libcuda1": "hold"}),
    ("gcc-12-base:amd64\t\t\t\tinstall", {"gcc-12-base": "install"}),
    ("", {}),
])
def test_parse_drops_the_architecture(line, expected):
    assert package_selections.parse_selections(line) == expected


def test_the_fixture_has_held_and_installed_packages():
    parsed = package_selections.parse_selections(SELECTIONS)
    assert parsed["libcuda1"] == "hold" and parsed["nvidia-support"] == "install" and parsed["containerd"] == "hold"


def test_only_packages_whose_selection_differs_are_set_in_one_write():
    result, writes = run({"names": ["containerd", "nvidia-support", "glx-alternative-nvidia"], "selection": "hold"})
    assert result["changed"] is True
    assert result["changed_names"] == ["glx-alternative-nvidia", "nvidia-support"]
    assert writes == ["glx-alternative-nvidia hold\nnvidia-support hold\n"]
    assert result["before"]["containerd"] == "hold"


def test_all_in_place_changes_nothing():
    result, writes = run({"names": ["containerd", "libcuda1"], "selection": "hold"})
    assert result["changed"] is False and result["changed_names"] == [] and writes == []


def test_release_a_hold():
    result, writes = run({"names": ["libcuda1"], "selection": "install"})
    assert result["changed_names"] == ["libcuda1"] and writes == ["libcuda1 install\n"]


def test_check_mode_reports_and_writes_nothing_and_an_unknown_package_is_a_change():
    result, writes = run({"names": ["nvidia-driver", "containerd"], "selection": "hold"}, check_mode=True, diff=True)
    assert result["changed"] is True and result["changed_names"] == ["nvidia-driver"] and writes == []
    assert result["before"]["nvidia-driver"] == "not present"
    assert result["diff"] == {"before": "nvidia-driver not present\n", "after": "nvidia-driver hold\n"}


def test_a_bad_selection_is_refused():
    result, writes = run({"names": ["containerd"], "selection": "frozen"})
    assert writes == [] and result["failed"] and "selection" in result["msg"] and "frozen" in result["msg"]


def test_a_failing_dpkg_fails_the_module_naming_the_command_and_its_error():
    result, writes = run({"names": ["libcuda1-535"], "selection": "hold"},
                         set_selections=(2, "", "dpkg: error: unexpected end of file in package name\n"))
    assert len(writes) == 1 and result["failed"] and result["rc"] == 2
    assert result["msg"] == ("/usr/bin/dpkg --set-selections failed (rc 2): "
                             "dpkg: error: unexpected end of file in package name")
