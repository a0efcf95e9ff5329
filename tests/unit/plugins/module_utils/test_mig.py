"""MIG layouts (module_utils/_mig.py): NVIDIA's profile table, mig-parted configurations, whether a GPU model holds a
layout, nvidia-smi's MIG listings (real captures) and the commands that apply a layout."""
from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils import _mig

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "nvidia"
A100_80 = "NVIDIA A100-SXM4-80GB"


def config(**layouts: object) -> dict:
    return {"version": "v1", "mig-configs": layouts}


# ----------------------------------------------------------------------------------------------------- the table

@pytest.mark.parametrize(("name", "model"), [
    ("NVIDIA A100-SXM4-40GB", "A100 40GB"), ("NVIDIA A100-PCIE-40GB", "A100 40GB"),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB"), ("NVIDIA A100 80GB PCIe", "A100 80GB"),
    ("NVIDIA H100 80GB HBM3", "H100 80GB"), ("NVIDIA H100 PCIe", "H100 80GB"),
    ("NVIDIA H200", "H200 141GB"), ("NVIDIA H200 NVL", "H200 141GB"),
    ("NVIDIA H100 NVL", None), ("NVIDIA GH200 480GB", None), ("Tesla T4", None), ("NVIDIA A30", None),
])
def test_the_model_of_a_gpu_name(name: str, model: str | None) -> None:
    assert _mig.model_of(name)[0] == model


def test_every_model_names_each_profile_of_the_geometry_once() -> None:
    for _model, _pattern, names in _mig.MODELS:
        assert sorted(names) == sorted(_mig.GEOMETRY)
        assert len(set(names.values())) == len(names)
    assert _mig.TABLE_SOURCE.startswith("NVIDIA Multi-Instance GPU User Guide")


@pytest.mark.parametrize(("devices", "starts"), [
    ({"7g.80gb": 1}, [("7g.80gb", 0)]),
    ({"1g.10gb": 7}, [("1g.10gb", start) for start in (6, 5, 4, 3, 2, 1, 0)]),
    ({"3g.40gb": 2}, [("3g.40gb", 4), ("3g.40gb", 0)]),                       # the guide: the first one at 4:4
    # 3g first (NVIDIA: on A100 3g.20gb must come first in a list); 2g cannot sit at 6, so the 3g takes 4
    ({"2g.20gb": 2, "3g.40gb": 1}, [("3g.40gb", 4), ("2g.20gb", 2), ("2g.20gb", 0)]),
    ({"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}, [("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)]),
    # the layout of the DCGM capture: 3g at 4:4, 2g at 0:2, two 1g at 2 and 3
    ({"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}, [("3g.40gb", 4), ("2g.20gb", 2), ("1g.10gb", 1), ("1g.10gb", 0)]),
])
def test_placements_put_the_largest_first_where_every_instance_fits(devices: dict, starts: list) -> None:
    _model, names = _mig.model_of(A100_80)
    assert [(name, start) for name, _id, start, _size in _mig.placements(names, devices)] == starts


@pytest.mark.parametrize(("devices", "message"), [
    ({"3g.40gb": 2, "1g.10gb": 1}, "needs 7 of 7 compute slices and 9 of 8 memory slices"),
    ({"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1}, "needs 8 of 7 compute slices"),
    ({"1g.20gb": 4, "2g.20gb": 1}, "needs 6 of 7 compute slices and 10 of 8 memory slices"),
    ({"1g.10gb": 8}, "holds fewer instances: 8 x 1g.10gb (at most 7)"),
    ({"1g.10gb+me": 2}, "holds fewer instances: 2 x 1g.10gb+me (at most 1)"),
    ({"1g.5gb": 7}, "A100 80GB has no MIG profile 1g.5gb (its profiles: 7g.80gb, 4g.40gb, 3g.40gb, 2g.20gb, 1g.20gb, "
                    "1g.10gb, 1g.10gb+me)"),
])
def test_a_layout_the_model_cannot_hold_is_refused_with_the_reason(devices: dict, message: str) -> None:
    problems = _mig.fit_problems(A100_80, devices, "gpu-1: GPU 0")
    assert len(problems) == 1 and problems[0].startswith("gpu-1: GPU 0: ")
    assert message in problems[0]


def test_a_gpu_model_outside_the_table_is_refused_naming_the_table() -> None:
    [problem] = _mig.fit_problems("NVIDIA A30", {"1g.6gb": 4}, "gpu-1: GPU 0")
    assert "NVIDIA A30 is not a GPU model of the MIG profile table (A100 40GB, A100 80GB, H100 80GB, H200 141GB" in problem


@pytest.mark.parametrize("name", ["NVIDIA A100-SXM4-40GB", "NVIDIA H200"])
def test_each_models_full_layouts_fit(name: str) -> None:
    _model, names = _mig.model_of(name)
    for profile_id, profile in names.items():
        assert _mig.fit_problems(name, {profile: _mig.GEOMETRY[profile_id][3]}, "n") == [], profile


# ------------------------------------------------------------------------------------- mig-parted configurations

GOOD = config(
    **{"all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
       "all-disabled": [{"devices": "all", "mig-enabled": False}],
       "balanced": [{"device-filter": ["0x20B210DE", "0x233010DE"], "devices": [0, 1], "mig-enabled": True,
                     "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
                    {"devices": [2, 3], "mig-enabled": False}]})


def test_a_mig_parted_configuration_passes() -> None:
    assert _mig.config_problems(GOOD, "gpufleet_mig_configs") == []


@pytest.mark.parametrize(("document", "message"), [
    ([], "gpufleet_mig_configs is []: expected a mig-parted configuration"),
    ({"version": "v2", "mig-configs": {"a": [{"devices": "all", "mig-enabled": False}]}},
     "gpufleet_mig_configs.version is 'v2': the mig-parted configuration format this collection reads is v1"),
    ({"version": "v1", "mig-configs": {}}, "gpufleet_mig_configs.mig-configs is {}: expected a mapping"),
    (config(a=[{"devices": "all", "mig-enabled": "yes", "mig-devices": {}}]),
     "gpufleet_mig_configs.mig-configs.a[0].mig-enabled is 'yes': expected true or false"),
    (config(a=[{"devices": "0,1", "mig-enabled": False}]),
     "gpufleet_mig_configs.mig-configs.a[0].devices is '0,1': expected all, or a list of distinct GPU indexes"),
    (config(a=[{"devices": "all", "mig-enabled": True}]), "has mig-enabled true without mig-devices"),
    (config(a=[{"devices": "all", "mig-enabled": False, "mig-devices": {"1g.10gb": 7}}]),
     "has mig-devices with mig-enabled false"),
    (config(a=[{"devices": "all", "mig-enabled": True, "mig-devices": {"1c.3g.40gb": 2}}]),
     "compute instances that share a GPU instance are not supported"),
    (config(a=[{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": "7"}}]),
     "gpufleet_mig_configs.mig-configs.a[0].mig-devices.1g.10gb is '7': expected a count"),
    (config(a=[{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": True}}]), "expected a count"),
    (config(a=[{"devices": "all", "mig-enabled": False, "device-filter": "20B2"}]),
     "device-filter is '20B2': expected PCI device IDs such as 0x20B210DE"),
    (config(a=[{"devices": "all", "mig-enabled": False, "gpus": 2}]),
     "gpufleet_mig_configs.mig-configs.a[0] has gpus: the keys of a mig-parted entry are"),
])
def test_a_bad_configuration_is_refused_naming_the_place(document: object, message: str) -> None:
    assert any(message in problem for problem in _mig.config_problems(document, "gpufleet_mig_configs"))


def test_a_selected_layout_must_be_one_of_the_configuration() -> None:
    names = ("gpufleet_mig_configs", "gpufleet_mig_config")
    assert _mig.selection_problems(GOOD, "balanced", names) == []
    assert _mig.selection_problems(GOOD, "", names) == []
    assert _mig.selection_problems(GOOD, "all-1g.5gb", names) == [
        "gpufleet_mig_config is 'all-1g.5gb': gpufleet_mig_configs defines no such layout (all-1g.10gb, all-disabled, balanced)"]


GPUS = [{"index": index, "name": A100_80, "pci_device_id": "0x20B210DE"} for index in range(4)]


def test_the_wanted_layout_per_gpu_follows_devices_and_device_filter() -> None:
    wanted, problems = _mig.wanted_layout(GOOD, "balanced", GPUS, "gpu-1 (gpufleet_mig_config balanced)")
    assert problems == []
    assert wanted == {0: {"mig_enabled": True, "devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
                      1: {"mig_enabled": True, "devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
                      2: {"mig_enabled": False, "devices": {}}, 3: {"mig_enabled": False, "devices": {}}}
    other = [dict(gpu, pci_device_id="0x20B010DE") for gpu in GPUS]
    assert sorted(_mig.wanted_layout(GOOD, "balanced", other, "n")[0]) == [2, 3], "the filter leaves GPUs 0 and 1 alone"


def test_a_gpu_named_twice_or_missing_and_a_model_that_cannot_hold_it_are_problems() -> None:
    document = config(twice=[{"devices": "all", "mig-enabled": False}, {"devices": [1, 7], "mig-enabled": False}],
                      big=[{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 3}}])
    _wanted, problems = _mig.wanted_layout(document, "twice", GPUS, "gpu-1")
    assert problems == ["gpu-1: entry 1 names GPU 7, which the node does not have (GPUs 0, 1, 2, 3)",
                        "gpu-1: GPU 1 is named by entries 0 and 1; name each GPU once"]
    _wanted, problems = _mig.wanted_layout(document, "big", GPUS[:1], "gpu-1")
    assert problems == ["gpu-1: GPU 0: A100 80GB holds fewer instances: 3 x 3g.40gb (at most 2)"]


# ----------------------------------------------------------------------------------------- nvidia-smi's listings

def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_the_gpu_instances_of_a_real_listing() -> None:
    instances = _mig.parse_gpu_instances(read("mig-lgi_80GB-class_2-GPUs-trimmed_mixed-profiles.txt"))
    assert len(instances) == 8
    assert instances[0] == {"gpu": 0, "profile": "1g.10gb", "profile_id": 19, "instance_id": 9, "start": 2, "size": 1}
    assert instances[3] == {"gpu": 0, "profile": "3g.40gb", "profile_id": 9, "instance_id": 2, "start": 4, "size": 4}
    guide = _mig.parse_gpu_instances(read("mig-lgi_A100-40GB_2x3g.20gb_mig-user-guide.txt"))
    assert [(gi["profile"], gi["instance_id"], gi["start"]) for gi in guide] == [("3g.20gb", 1, 4), ("3g.20gb", 2, 0)]


def test_the_compute_instances_of_a_listing_without_the_placement_column() -> None:
    [instance] = _mig.parse_compute_instances(read("mig-lci_A100-40GB_1c.3g.20gb_no-placement-column_mig-user-guide.txt"))
    assert instance == {"gpu": 0, "gpu_instance_id": 1, "profile": "1c.3g.20gb", "profile_id": 0, "instance_id": 0,
                        "start": None, "size": None}


def test_no_mig_enabled_gpu_lists_nothing_and_an_error_is_not_a_listing() -> None:
    assert _mig.parse_gpu_instances(read("mig-lgip_no-MIG-enabled-devices_T4_530.30.02.txt")) == []
    with pytest.raises(_mig.MigListingError, match="Insufficient Permissions"):
        _mig.parse_compute_instances(read("mig-lci_error_insufficient-permissions.txt"))


def test_the_observed_layout_of_the_real_listing() -> None:
    gis = _mig.parse_gpu_instances(read("mig-lgi_80GB-class_2-GPUs-trimmed_mixed-profiles.txt"))
    whole = [{"gpu": gi["gpu"], "gpu_instance_id": gi["instance_id"], "profile": gi["profile"]} for gi in gis]
    gpus = [{"index": 0, "mig_mode": "Enabled", "mig_mode_pending": "Enabled"}, {"index": 1, "mig_mode": "Enabled"}]
    observed = _mig.observed_layout(gpus, gis, whole)
    assert observed[0] == {"mig_enabled": True, "pending": True, "whole": True, "compute_instances": 4,
                           "devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}
    partial = [dict(ci, profile="1c.3g.40gb") if ci["profile"] == "3g.40gb" else ci for ci in whole]
    assert _mig.observed_layout(gpus, gis, partial)[1]["whole"] is False
    assert _mig.summary(_mig.observed_layout(gpus, gis, partial)[1]) == (
        "MIG on: 1 x 3g.40gb, 1 x 2g.20gb, 2 x 1g.10gb (compute instances that do not span their GPU instance)")


# ---------------------------------------------------------------------------------------------------- the plan

def layout(enabled: bool, **devices: int) -> dict:
    devices = {k.replace("_", "."): v for k, v in devices.items()}
    return {"mig_enabled": enabled, "pending": enabled, "devices": devices, "whole": True,
            "compute_instances": sum(devices.values())}


def test_a_gpu_that_holds_its_layout_needs_nothing() -> None:
    assert _mig.gpu_steps(0, A100_80, layout(True, **{"1g_10gb": 7}), layout(True, **{"1g_10gb": 7})) == []
    assert _mig.gpu_steps(0, A100_80, layout(False), layout(False)) == []


def test_the_steps_destroy_set_the_mode_and_create_largest_first() -> None:
    steps = _mig.gpu_steps(1, A100_80, layout(True, **{"1g_10gb": 2, "2g_20gb": 1, "3g_40gb": 1}),
                           layout(True, **{"1g_10gb": 7}), "/usr/bin/nvidia-smi")
    assert steps == [["/usr/bin/nvidia-smi", "mig", "-i", "1", "-dci"], ["/usr/bin/nvidia-smi", "mig", "-i", "1", "-dgi"],
                     ["/usr/bin/nvidia-smi", "mig", "-i", "1", "-cgi", "9,14,19,19", "-C"]]
    assert _mig.gpu_steps(0, A100_80, layout(True, **{"7g_80gb": 1}), layout(False)) == [
        ["nvidia-smi", "-i", "0", "-mig", "1"], ["nvidia-smi", "mig", "-i", "0", "-cgi", "0", "-C"]]
    assert _mig.gpu_steps(0, A100_80, layout(False), layout(True, **{"7g_80gb": 1})) == [
        ["nvidia-smi", "mig", "-i", "0", "-dci"], ["nvidia-smi", "mig", "-i", "0", "-dgi"], ["nvidia-smi", "-i", "0", "-mig", "0"]]


def test_a_gpu_whose_mode_waits_for_a_reset_is_set_again() -> None:
    waiting = dict(layout(False), pending=True)
    assert _mig.gpu_steps(0, A100_80, layout(False), waiting) == [["nvidia-smi", "-i", "0", "-mig", "0"]]


def test_the_node_plan_from_nvidia_smis_outputs() -> None:
    reads = {"gpus": "0, NVIDIA A100-SXM4-80GB, 0x20B210DE, Enabled, Enabled\n1, NVIDIA A100-SXM4-80GB, 0x20B210DE, Disabled, Disabled\n",
             "gpu_instances": read("mig-lgi_80GB-class_2-GPUs-trimmed_mixed-profiles.txt"),
             "compute_instances": "No compute instances found.\n"}
    document = config(mine=[{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
                            {"devices": [1], "mig-enabled": False}])
    plan = _mig.node_plan(reads, document, "mine", "gpu-1")
    assert plan["problems"] == [] and plan["pending"] == []
    assert plan["observed"] == {"0": "MIG on: 1 x 3g.40gb, 1 x 2g.20gb, 2 x 1g.10gb (compute instances that do not span their "
                                     "GPU instance)", "1": "MIG off"}
    assert plan["wanted"] == {"0": "MIG on: 7 x 1g.10gb", "1": "MIG off"}
    assert plan["plan"][0]["steps"] == [  # GPU instances without compute instances: nothing for -dci to destroy
        ["nvidia-smi", "mig", "-i", "0", "-dgi"], ["nvidia-smi", "mig", "-i", "0", "-cgi", "19,19,19,19,19,19,19", "-C"]]
    assert [step["gpu"] for step in plan["plan"]] == [0]
    assert plan["script"] == ("set -e\necho '+ nvidia-smi mig -i 0 -dgi'\n'nvidia-smi' 'mig' '-i' '0' '-dgi'\n"
                              "echo '+ nvidia-smi mig -i 0 -cgi 19,19,19,19,19,19,19 -C'\n"
                              "'nvidia-smi' 'mig' '-i' '0' '-cgi' '19,19,19,19,19,19,19' '-C'\n")
    broken = dict(reads, compute_instances=read("mig-lci_error_insufficient-permissions.txt"))
    assert _mig.node_plan(broken, document, "mine", "gpu-1")["problems"] == [
        "gpu-1: nvidia-smi mig -lci printed 'Failed to display compute instances: Insufficient Permissions'"]


@pytest.mark.parametrize(("strategy", "wanted", "refused"), [
    ("none", {0: layout(True, **{"1g_10gb": 7})}, "MIG strategy none"),
    ("single", {0: layout(True, **{"1g_10gb": 7}), 1: layout(False)}, "MIG strategy single"),
    ("single", {0: layout(True, **{"1g_10gb": 7}), 1: layout(True, **{"7g_80gb": 1})}, "MIG strategy single"),
    ("single", {0: layout(True, **{"1g_10gb": 7}), 1: layout(True, **{"1g_10gb": 7})}, ""),
    ("mixed", {0: layout(True, **{"1g_10gb": 7}), 1: layout(False)}, ""),
    ("none", {0: layout(False)}, ""),
])
def test_the_device_plugins_strategy_must_serve_the_layout(strategy: str, wanted: dict, refused: str) -> None:
    problems = _mig.strategy_problems(strategy, wanted, "gpu-1")
    assert (refused in problems[0]) if refused else problems == []


def test_the_script_stops_at_the_first_refusal_and_quotes_every_argument(tmp_path: Path) -> None:
    import subprocess
    log = tmp_path / "ran"
    smi = tmp_path / "smi it's"
    smi.write_text('#!/bin/sh\necho "$*" >> "%s"\n[ "$3" != 1 ]\n' % log)
    smi.chmod(0o755)
    plan = [{"steps": [[str(smi), "mig", "-i", "0", "-dgi"]]},
            {"steps": [[str(smi), "mig", "-i", "1", "-dgi"], [str(smi), "-i", "1", "-mig", "1"]]}]
    done = subprocess.run(["/bin/sh", "-c", _mig.apply_script(plan)], capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert log.read_text().splitlines() == ["mig -i 0 -dgi", "mig -i 1 -dgi"]
    assert done.stdout.splitlines()[-1] == "+ %s mig -i 1 -dgi" % smi


@pytest.mark.parametrize(("replicas", "selected", "refused"), [
    (4, "all-1g.10gb", True), ("2", "balanced", True), (0, "all-1g.10gb", False), (4, "all-disabled", False),
    (4, "", False), (4, "unknown", False),
])
def test_a_node_in_a_time_slicing_pool_and_a_mig_pool_is_refused(replicas: object, selected: str, refused: bool) -> None:
    problems = _mig.pool_problems(replicas, GOOD, selected, "gpu-1")
    assert bool(problems) == refused
    if refused:
        assert problems[0].startswith("gpu-1 is in a time-slicing pool (gpu_node_join_time_slicing_replicas=%s) and in a MIG "
                                      "pool (its layout '%s' turns MIG on)" % (replicas, selected))


def listing(gpus: str, lgi: str = "No MIG-enabled devices found.\n", lci: str = "No MIG-enabled devices found.\n") -> dict:
    return {"mig_gpus": {"rc": 0, "stdout": gpus, "stderr": ""}, "mig_gpu_instances": {"rc": 6, "stdout": lgi, "stderr": ""},
            "mig_compute_instances": {"rc": 6, "stdout": lci, "stderr": ""}}


TWO_OFF = "0, NVIDIA A100-SXM4-80GB, 0x20B210DE, Disabled, Disabled\n1, NVIDIA A100-SXM4-80GB, 0x20B210DE, Disabled, Disabled\n"


def test_the_host_check_passes_when_every_gpu_holds_its_layout_and_skips_without_one() -> None:
    check = _mig.host_check(listing(TWO_OFF), GOOD, "all-disabled", "gpu-1")
    assert check == {"id": "mig_layout_held", "layer": "gpu", "status": "pass", "remedy": "",
                     "message": "every GPU holds layout 'all-disabled': GPU 0 MIG off; GPU 1 MIG off"}
    assert _mig.host_check({}, GOOD, "", "gpu-1")["status"] == "skip"


def test_the_host_check_fails_a_gpu_that_holds_another_layout_or_waits_for_a_reset() -> None:
    check = _mig.host_check(listing(TWO_OFF), GOOD, "all-1g.10gb", "gpu-1")
    assert check["status"] == "fail" and check["remedy"].startswith("run upgrade_driver.yml on the node")
    assert check["message"] == ("the GPUs do not hold layout 'all-1g.10gb': GPU 0 holds MIG off, its layout is MIG on: "
                                "7 x 1g.10gb; GPU 1 holds MIG off, its layout is MIG on: 7 x 1g.10gb")
    waiting = TWO_OFF.replace("0x20B210DE, Disabled, Disabled\n1", "0x20B210DE, Disabled, Enabled\n1")
    check = _mig.host_check(listing(waiting), GOOD, "all-1g.10gb", "gpu-1")
    assert check["message"].startswith("the GPUs do not hold layout 'all-1g.10gb': GPU 0 holds MIG off (MIG on once the GPU "
                                       "is reset), its layout is MIG on: 7 x 1g.10gb; GPU 1 holds MIG off")
    assert check["remedy"].startswith("for GPU 0, stop the processes that hold the GPU and reset it")
    assert check["remedy"].endswith("; run upgrade_driver.yml on the node: it gives the GPUs their layout out of service "
                                    "(cordon, GPU pods evicted, device plugin paused)")
    # an enable waiting for a reset, where the layout wants MIG off: the next layout change sets it back
    check = _mig.host_check(listing(waiting), GOOD, "all-disabled", "gpu-1")
    assert check["message"] == ("the GPUs do not hold layout 'all-disabled': GPU 0 holds MIG off (MIG on once the GPU is "
                                "reset), its layout is MIG off")
    assert check["remedy"].startswith("run upgrade_driver.yml")


def test_the_host_check_fails_an_unreadable_node_and_a_layout_the_model_cannot_hold() -> None:
    unread = {"mig_gpus": {"rc": 9, "stdout": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
                           "stderr": ""}}
    assert _mig.host_check(unread, GOOD, "all-disabled", "gpu-1")["remedy"] == "fix nvidia_smi_runs first"
    big = config(big=[{"devices": "all", "mig-enabled": True, "mig-devices": {"7g.80gb": 2}}])
    check = _mig.host_check(listing(TWO_OFF), big, "big", "gpu-1")
    assert check["status"] == "fail" and "A100 80GB holds fewer instances: 2 x 7g.80gb (at most 1)" in check["message"]
