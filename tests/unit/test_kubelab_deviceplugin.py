"""SIMULATED device plugin logic: GPUs from the profile, time-slicing config, Allocate env."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab" / "deviceplugin"))
import simdevices  # noqa: E402

from kubelab import images  # noqa: E402

GPUS = [simdevices.Gpu(0, "NVIDIA A100", "GPU-a"), simdevices.Gpu(1, "NVIDIA A100", "GPU-b")]


def test_gpus_from_profile_list() -> None:
    data = {"gpus": [{"index": 1, "name": "T4", "uuid": "GPU-2"}, {"minor": 0, "name": "T4", "uuid": "GPU-1"}]}
    assert simdevices.gpus_from_profile_data(data) == [simdevices.Gpu(0, "T4", "GPU-1"), simdevices.Gpu(1, "T4", "GPU-2")]


def test_gpus_from_count() -> None:
    assert [g.index for g in simdevices.gpus_from_profile_data({"gpu_count": 3, "name": "X"})] == [0, 1, 2]


@pytest.mark.parametrize(("data", "message"), [
    ([], "expected a mapping"),
    ({"gpus": [{"index": -1}]}, r"gpus\[0\].index=-1"),
    ({"gpus": [{"index": 0}, {"index": 0}]}, "repeat"),
    ({"something": 1}, "no 'gpus' list"),
])
def test_bad_profiles(data: object, message: str) -> None:
    with pytest.raises(simdevices.SimPluginError, match=message):
        simdevices.gpus_from_profile_data(data, "p.yml")


def test_gpus_from_driver_information_files(tmp_path: Path) -> None:
    for minor, bus in ((1, "0000:00:05.0"), (0, "0000:00:04.0")):
        d = tmp_path / "proc/driver/nvidia/gpus" / bus
        d.mkdir(parents=True)
        (d / "information").write_text(f"Model: \t\t NVIDIA H100\nIRQ: 1\nGPU UUID: \t GPU-{minor}\n"
                                       f"Device Minor: \t {minor}\n")
    assert simdevices.gpus_from_host_root(tmp_path) == [simdevices.Gpu(0, "NVIDIA H100", "GPU-0"),
                                                        simdevices.Gpu(1, "NVIDIA H100", "GPU-1")]


def test_config_without_sharing() -> None:
    assert simdevices.parse_config(None) == simdevices.Sharing("nvidia.com/gpu", 1)
    assert simdevices.parse_config({"version": "v1", "flags": {"migStrategy": "none"}}).replicas == 1


def test_time_slicing_config() -> None:
    config = {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
    assert simdevices.parse_config(config) == simdevices.Sharing("nvidia.com/gpu", 4)
    config["sharing"]["timeSlicing"]["renameByDefault"] = True  # type: ignore[index]
    assert simdevices.parse_config(config).resource_name == "nvidia.com/gpu.shared"


@pytest.mark.parametrize(("config", "message"), [
    ({"version": "v2"}, "version='v2'"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 0}]}}},
     "replicas=0"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/mig-1g.5gb", "replicas": 2}]}}},
     "name='nvidia.com/mig-1g.5gb'"),
])
def test_bad_config(config: object, message: str) -> None:
    with pytest.raises(simdevices.SimPluginError, match=message):
        simdevices.parse_config(config, "config.yaml")


def test_device_ids_with_replicas() -> None:
    assert simdevices.device_ids(GPUS, 1) == ["GPU-a", "GPU-b"]
    assert simdevices.device_ids(GPUS, 2) == ["GPU-a::0", "GPU-a::1", "GPU-b::0", "GPU-b::1"]


def test_visible_devices_are_indices() -> None:
    assert simdevices.visible_devices(GPUS, ["GPU-b"]) == "1"
    assert simdevices.visible_devices(GPUS, ["GPU-b::1", "GPU-a::0", "GPU-b::0"]) == "1,0"
    with pytest.raises(simdevices.SimPluginError, match="unknown device"):
        simdevices.visible_devices(GPUS, ["GPU-z"])


def test_select_visible() -> None:
    assert simdevices.select_visible(GPUS, "all") == GPUS
    assert simdevices.select_visible(GPUS, "1") == [GPUS[1]]
    assert simdevices.select_visible(GPUS, "GPU-a") == [GPUS[0]]
    assert simdevices.select_visible(GPUS, None) == []
    with pytest.raises(simdevices.SimPluginError, match="'7'"):
        simdevices.select_visible(GPUS, "7")


def test_proto_without_gogo_keeps_the_api() -> None:
    proto = ('syntax = "proto3";\npackage v1beta1;\nimport "github.com/gogo/protobuf/gogoproto/gogo.proto";\n'
             "option (gogoproto.sizer_all) = true;\n"
             "message Device {\n\tstring ID = 1 [(gogoproto.customname) = \"ID\"];\n}\n")
    stripped = images.strip_gogo(proto)
    assert "gogo" not in stripped
    assert "\tstring ID = 1;" in stripped and 'package v1beta1;' in stripped
