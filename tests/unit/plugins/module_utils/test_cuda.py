"""The CUDA gate (module_utils/_cuda.py): NVIDIA's table of the driver each CUDA release needs, the refusal of a pinned
driver too old for the fleet's images, and the host check of the CUDA version nvidia-smi prints."""
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.node.plugins.filter.cuda import FilterModule
from ansible_collections.gpufleet.node.plugins.module_utils import _cuda

NAMES = ("nvidia_driver_version", "gpufleet_cuda_versions", "gpufleet_cuda_forward_compat")


def test_the_table_covers_11_8_to_13_x_with_its_source_and_date() -> None:
    releases = _cuda.known_releases()
    assert releases[0] == "11.8" and releases[-1].startswith("13.")
    assert "12.7" not in releases                # no CUDA 12.7 toolkit was released (branch 565 reports it)
    assert _cuda.TABLE_SOURCE.startswith("NVIDIA CUDA Toolkit release notes, https://docs.nvidia.com/")
    assert _cuda.TABLE_CHECKED == "2026-12-06"
    minimums = [_cuda._numbers(_cuda.MINIMUM_DRIVER[release]) for release in releases]
    assert minimums == sorted(minimums), "a newer CUDA never needs an older driver"


@pytest.mark.parametrize(("driver", "runs"), [
    ("535.261.03", "12.2"), ("535.54.03", "12.2"), ("535.54.02", "12.1"), ("550.163.01", "12.4"),
    ("565.57.01", "12.6"), ("580.159.04", "13.0"), ("610.43.02", "13.3"), ("515.65.01", ""),
])
def test_the_highest_cuda_a_driver_runs(driver: str, runs: str) -> None:
    assert _cuda.highest_run_by(driver) == runs


def test_the_highest_release_compares_numbers_not_text() -> None:
    assert _cuda.highest(["12.9", "12.10", "11.8"]) == "12.10"
    assert _cuda.highest([]) == ""


@pytest.mark.parametrize(("driver", "cuda", "forward_compat", "refused"), [
    ("535.261.03", ["12.2"], False, False),
    ("535.261.03", ["12.4"], False, True),
    ("535.261.03", ["12.4"], True, False),
    ("595.45.04", ["13.2", "12.8"], False, False),
    ("605.10.01", ["13.3"], False, True),       # 13.3 needs branch 610
    ("535.261.03", [], False, False),
])
def test_the_gate(driver: str, cuda: list, forward_compat: bool, refused: bool) -> None:
    assert bool(_cuda.driver_problems(driver, cuda, forward_compat, NAMES)) is refused


def test_the_gates_message_names_both_versions_the_minimum_and_the_way_out() -> None:
    [message] = _cuda.driver_problems("550.163.01", ["13.0", "12.4"], False, NAMES)
    assert message.startswith("nvidia_driver_version is 550.163.01, which runs CUDA up to 12.4, but gpufleet_cuda_versions "
                              "needs CUDA 13.0: CUDA 13.0 needs driver 580.65.06 or later")
    assert "branch 580 or later" in message and "gpufleet_cuda_forward_compat=true" in message
    assert _cuda.TABLE_CHECKED in message


@pytest.mark.parametrize(("values", "words"), [
    ("12.4", "expected a list"),
    ([12.4], "a number"),
    ([13], "a number"),
    (["v12.4"], "major.minor"),
    (["13.5"], "not a CUDA release NVIDIA's table names"),
])
def test_release_problems(values, words: str) -> None:
    [message] = _cuda.release_problems(values, "gpufleet_cuda_versions")
    assert message.startswith("gpufleet_cuda_versions ") and words in message, message


@pytest.mark.parametrize(("observed", "needed", "forward_compat", "gpus", "status", "words"), [
    ("12.2", [], False, [], "pass", "runs CUDA up to 12.2 (nvidia-smi)"),
    ("12.4", ["12.4", "12.2"], False, [], "pass", "the fleet needs 12.4"),
    ("12.7", ["12.6"], False, [], "pass", "the fleet needs 12.6"),
    ("12.2", ["12.4"], False, [], "fail", "insufficient for CUDA runtime version"),
    ("12.2", ["12.4"], True, ["NVIDIA H100 80GB HBM3"], "warn", "cuda-compat"),
    ("12.2", ["12.4"], True, ["NVIDIA GeForce RTX 4090"], "fail", "not available on NVIDIA GeForce RTX 4090"),
    (None, [], False, [], "skip", "not read"),
    (None, ["12.4"], False, [], "fail", "could not be read"),
])
def test_the_host_check(observed, needed, forward_compat, gpus, status, words) -> None:
    found_status, message, remedy = _cuda.host_check(observed, needed, forward_compat, gpus)
    assert found_status == status and words in message, message
    if status == "fail" and observed:
        assert "upgrade the driver to 550.54.14 or later" in remedy


def test_the_host_check_of_a_release_newer_than_the_table_still_compares() -> None:
    status, _message, remedy = _cuda.host_check("13.0", ["13.5"], False, [])
    assert status == "fail" and remedy == "upgrade the driver to one that runs CUDA 13.5"


def test_the_filter() -> None:
    assert FilterModule().filters()["cuda_release_problems"]([12.4], "x")[0].startswith("x has 12.4, a number")
