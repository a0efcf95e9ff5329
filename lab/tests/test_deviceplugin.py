"""SIMULATED device plugin logic (lab/deviceplugin/simdevices.py): NVIDIA k8s-device-plugin v0.17.1's rules."""
from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "lab" / "deviceplugin"))
import simdevices  # noqa: E402
from simdevices import Config, SimPluginError  # noqa: E402

from gpufleet_lab import kube_images  # noqa: E402

PROFILES = REPO / "lab" / "gpusim" / "profiles"
DEVICE_MAP_CHAIN = ("error starting plugins: error getting plugins: unable to create plugins: failed to construct resource "
                    "managers: error building device map: error building device map from config.resources: ")


def visible(profile: str) -> dict[str, Any]:
    """What the runtime stand-in writes to /run/gpusim/visible.json for NVIDIA_VISIBLE_DEVICES=all."""
    data = json.loads((PROFILES / f"{profile}.json").read_text())
    keys = ("index", "minor", "name", "uuid", "pci_bus_id", "memory_total_mib", "mig_mode", "mig_devices")
    return {"simulated": True, "driver_version": data["driver_version"], "gpus": [{k: g.get(k) for k in keys} for g in data["gpus"]]}


def gpus_of(profile: str) -> list[simdevices.Gpu]:
    return simdevices.gpus_from_visible(visible(profile))


def resources(gpus: list[simdevices.Gpu], **config: Any) -> dict[str, list[str]]:
    return {r.name: r.ids for r in simdevices.build_resources(gpus, Config(**config))}


def gpu(index: int, mig: tuple[str, ...] | None = None) -> simdevices.Gpu:
    migs = tuple(simdevices.MigDevice(j, profile, f"MIG-{index}-{j}") for j, profile in enumerate(mig or ()))
    return simdevices.Gpu(index, "NVIDIA A100", f"GPU-{index}", index, mig is not None, migs)


def uuid(n: int, kind: str = "GPU") -> str:
    return f"{kind}-00000000-0000-0000-0000-{n:012d}"


# --------------------------------------------------------------------------- what the runtime injected


def test_visible_gpus_are_renumbered_in_host_order_and_keep_mig_only_when_enabled() -> None:
    payload = {"gpus": [
        {"index": 3, "name": "A100", "uuid": "GPU-3", "mig_mode": "Disabled", "mig_devices": [{"index": 0, "profile": "1g.10gb", "uuid": "MIG-x"}]},
        {"index": 1, "name": "A100", "uuid": "GPU-1", "mig_mode": "Enabled", "mig_devices": [{"index": 2, "profile": "1g.10gb", "uuid": "MIG-y"}]},
    ]}
    first, second = simdevices.gpus_from_visible(payload)
    assert (first.index, first.host_index, first.uuid, first.mig_devices) == (0, 1, "GPU-1", (simdevices.MigDevice(2, "1g.10gb", "MIG-y"),))
    assert (second.index, second.host_index, second.mig_enabled, second.mig_devices) == (1, 3, False, ())


def test_nothing_injected_is_none_and_a_broken_view_is_an_error(tmp_path: Path) -> None:
    assert simdevices.load_visible(tmp_path / "visible.json") is None
    (tmp_path / "visible.json").write_text("{")
    with pytest.raises(SimPluginError, match="unreadable SIMULATED NVML view"):
        simdevices.load_visible(tmp_path / "visible.json")
    with pytest.raises(SimPluginError, match="no 'gpus' list"):
        simdevices.gpus_from_visible({"gpu": []})
    (tmp_path / "visible.json").write_text(json.dumps(visible("h100x8")))
    assert [g.index for g in simdevices.load_visible(tmp_path / "visible.json") or []] == list(range(8))


# --------------------------------------------------------------------------- resources per MIG strategy


def test_a100x4_mig_with_strategy_none_advertises_every_gpu_whole() -> None:
    assert resources(gpus_of("a100x4-mig")) == {"nvidia.com/gpu": [uuid(n) for n in range(4)]}


def test_a100x4_mig_with_strategy_mixed_splits_mig_devices_and_whole_gpus() -> None:
    found = simdevices.build_resources(gpus_of("a100x4-mig"), Config(mig_strategy="mixed"))
    assert [(r.name, r.socket_name) for r in found] == [("nvidia.com/gpu", "nvidia-gpu.sock"),
                                                        ("nvidia.com/mig-1g.20gb", "nvidia-mig-1g.20gb.sock")]
    assert found[0].ids == [uuid(1), uuid(2), uuid(3)]
    assert [(d.id, d.index) for d in found[1].devices] == [(uuid(n, "MIG"), f"0:{n}") for n in range(4)]


def test_a100x4_mig_with_strategy_single_fails_as_the_real_plugin() -> None:
    with pytest.raises(SimPluginError) as error:
        simdevices.build_resources(gpus_of("a100x4-mig"), Config(mig_strategy="single"))
    assert str(error.value) == DEVICE_MAP_CHAIN + "all devices on the node must be configured with the same migEnabled value"


@pytest.mark.parametrize(("strategy", "expected"), [
    ("none", {"nvidia.com/gpu": 2}),
    ("single", {"nvidia.com/gpu": 14}),
    ("mixed", {"nvidia.com/mig-1g.10gb": 14}),
])
def test_two_gpus_with_seven_1g10gb_each(strategy: str, expected: dict[str, int]) -> None:
    found = simdevices.build_resources(gpus_of("a100x2-mig-1g10gb"), Config(mig_strategy=strategy))
    assert {r.name: len(r.devices) for r in found} == expected
    if strategy != "none":
        assert found[0].devices[-1].index == "1:6" and found[0].devices[-1].id.startswith("MIG-")


def test_single_without_mig_advertises_whole_gpus() -> None:
    assert len(resources(gpus_of("h100x8"), mig_strategy="single")["nvidia.com/gpu"]) == 8


def test_single_refuses_several_mig_profiles() -> None:
    with pytest.raises(SimPluginError) as error:
        resources([gpu(0, ("1g.10gb",)), gpu(1, ("3g.40gb",))], mig_strategy="single")
    assert str(error.value) == DEVICE_MAP_CHAIN + (
        "invalid MIG configuration: error visiting devices: error visiting device: error visiting device: "
        "error visiting MIG device: error visiting MIG device: more than one MIG device type present on node")


def test_mig_enabled_without_mig_devices_fails_single_and_warns_mixed(caplog: pytest.LogCaptureFixture) -> None:
    gpus = [gpu(0, ("1g.10gb",)), gpu(1, ())]
    with pytest.raises(SimPluginError, match="at least one device with migEnabled=true was not configured correctly: "
                                             "error visiting device: device 1 has no MIG devices configured$"):
        resources(gpus, mig_strategy="single")
    with caplog.at_level(logging.WARNING):
        assert resources(gpus, mig_strategy="mixed") == {"nvidia.com/mig-1g.10gb": ["MIG-0-0"]}
    assert "device 1 has no MIG devices configured" in caplog.text


def test_mixed_names_mig_resources_as_the_real_plugin() -> None:
    assert simdevices.mixed_resource_name("3g.40gb") == "nvidia.com/mig-3g.40gb"
    assert simdevices.mixed_resource_name("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"
    assert simdevices.mixed_resource_name("1c.2g.20gb") is None
    with pytest.raises(SimPluginError, match="error building MIG device map: .*MIG profile '1c.2g.20gb' does not match any resource patterns$"):
        resources([gpu(0, ("1c.2g.20gb",))], mig_strategy="mixed")


# --------------------------------------------------------------------------- time-slicing


def sharing(*items: dict[str, Any], **flags: Any) -> Config:
    _flags, time_slicing, _warnings = simdevices.parse_config_data({"version": "v1", "sharing": {"timeSlicing": {"resources": list(items), **flags}}})
    return Config(mig_strategy="mixed", time_slicing=time_slicing)


def test_time_slicing_replicates_devices_with_the_real_ids() -> None:
    config = sharing({"name": "nvidia.com/gpu", "replicas": 2})
    found = {r.name: r.ids for r in simdevices.build_resources([gpu(0), gpu(1, ("1g.10gb",))], config)}
    assert found == {"nvidia.com/gpu": ["GPU-0::0", "GPU-0::1"], "nvidia.com/mig-1g.10gb": ["MIG-1-0"]}


def test_time_slicing_a_mig_resource_and_rename_by_default() -> None:
    config = sharing({"name": "mig-1g.10gb", "replicas": 3}, renameByDefault=True)
    found = simdevices.build_resources([gpu(0), gpu(1, ("1g.10gb",))], config)
    assert [(r.name, r.socket_name, len(r.devices)) for r in found] == [
        ("nvidia.com/gpu", "nvidia-gpu.sock", 1), ("nvidia.com/mig-1g.10gb.shared", "nvidia-mig-1g.10gb.shared.sock", 3)]


def test_time_slicing_of_an_absent_resource_changes_nothing() -> None:
    config = sharing({"name": "nvidia.com/mig-7g.80gb", "replicas": 2})
    assert {r.name: r.ids for r in simdevices.build_resources([gpu(0)], config)} == {"nvidia.com/gpu": ["GPU-0"]}


# --------------------------------------------------------------------------- configuration


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return str(path)


def test_defaults_are_the_real_plugins() -> None:
    config = simdevices.load_config(None, {}, {})
    assert config == Config("none", True, "auto", ("envvar",), "uuid", "cdi.k8s.io/", None)


def test_config_file_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "version: v1\nflags:\n  migStrategy: mixed\n  failOnInitError: false\n  plugin:\n"
                           "    deviceListStrategy: [volume-mounts, cdi-annotations]\n    deviceIDStrategy: index\n")
    config = simdevices.load_config(path, {}, {})
    assert (config.mig_strategy, config.fail_on_init_error, config.device_list_strategy, config.device_id_strategy) == (
        "mixed", False, ("volume-mounts", "cdi-annotations"), "index")
    assert simdevices.load_config(write(tmp_path, "flags: {plugin: {deviceListStrategy: volume-mounts}}"), {}, {}).device_list_strategy == ("volume-mounts",)


def test_env_overrides_the_file_and_the_command_line_overrides_env(tmp_path: Path) -> None:
    path = write(tmp_path, "version: v1\nflags:\n  migStrategy: mixed\n  failOnInitError: true\n  plugin: {deviceIDStrategy: index}\n")
    env = {"MIG_STRATEGY": "single", "FAIL_ON_INIT_ERROR": "false", "DEVICE_LIST_STRATEGY": "envvar, cdi-annotations"}
    config = simdevices.load_config(path, env, {})
    assert (config.mig_strategy, config.fail_on_init_error, config.device_list_strategy, config.device_id_strategy) == (
        "single", False, ("envvar", "cdi-annotations"), "index")
    config = simdevices.load_config(path, env, {"mig_strategy": "none", "device_id_strategy": "uuid"})
    assert (config.mig_strategy, config.device_id_strategy) == ("none", "uuid")


@pytest.mark.parametrize(("value", "expected"), [("", False), ("0", False), ("True", True), ("t", True)])
def test_fail_on_init_error_env_is_parsed_as_go_does(value: str, expected: bool) -> None:
    assert simdevices.load_config(None, {"FAIL_ON_INIT_ERROR": value}, {}).fail_on_init_error is expected


def test_a_bad_boolean_env_var_is_refused() -> None:
    with pytest.raises(SimPluginError, match='could not parse "yes" as bool value from environment variable "FAIL_ON_INIT_ERROR" '
                                             "for flag fail-on-init-error"):
        simdevices.load_config(None, {"FAIL_ON_INIT_ERROR": "yes"}, {})


@pytest.mark.parametrize(("text", "message"), [
    ("version: v2\n", r"error parsing config file: unknown version: v2$"),
    ("flags: {plugin: {deviceListStrategy: 5}}\n", r"while decoding JSON: invalid deviceListStrategy: 5$"),
    ("flags: {migStrategy: 3}\n", r"cannot unmarshal number into Go struct field Config.flags.migStrategy of type string$"),
    ("sharing: {timeSlicing: {}}\n", r"no resources specified$"),
    ("sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu}]}}\n", r"no replicas specified$"),
    ("sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 1}]}}\n", r"number of replicas must be >= 2$"),
    ("sharing: {timeSlicing: {resources: [{name: Bad_Name, replicas: 2}]}}\n", r"incorrect format for resource name 'nvidia.com/Bad_Name'"),
    ("sharing: {mps: {resources: [{name: nvidia.com/gpu, replicas: 2}]}}\n", r"sharing.mps is not simulated"),
    ("flags: [\n", r"error converting YAML to JSON"),
])
def test_bad_config_files(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SimPluginError, match=message) as error:
        simdevices.load_config(write(tmp_path, text), {}, {})
    assert str(error.value).startswith("error starting plugins: ")


def test_a_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SimPluginError, match=r"unable to parse config file: error opening config file: open .*/nope.yaml: no such file or directory"):
        simdevices.load_config(str(tmp_path / "nope.yaml"), {}, {})


def test_unsupported_customizations_are_ignored_with_the_real_warnings(tmp_path: Path) -> None:
    path = write(tmp_path, "resources: {gpus: [{pattern: '*', name: gpu}]}\nflags: {plugin: {passDeviceSpecs: true}}\n"
                           "sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, rename: gpu.mine, devices: [0], replicas: 2}\n")
    config = simdevices.load_config(path, {}, {})
    assert config.time_slicing and config.time_slicing.resources == (simdevices.ReplicatedResource("nvidia.com/gpu", 2, ""),)
    assert config.warnings == (
        "flags.plugin.passDeviceSpecs=True is not simulated: ignored",
        "Customizing the 'resources' field is not yet supported in the config. Ignoring...",
        "Setting the 'rename' field in sharing.timeSlicing.resources is not yet supported in the config. Ignoring...",
        "Customizing the 'devices' field in sharing.timeSlicing.resources is not yet supported in the config. Ignoring...",
    )


def test_config_dump_has_the_real_shape() -> None:
    dumped = json.loads(sharing({"name": "gpu", "replicas": 2}).to_json())
    assert dumped["flags"]["plugin"]["deviceListStrategy"] == ["envvar"]
    assert dumped["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "rename": "", "devices": "all", "replicas": 2}]


@pytest.mark.parametrize(("config", "has_nvml", "message"), [
    (Config(device_list_strategy=("envvar", "bogus")), True, "invalid --device-list-strategy option: invalid strategy: bogus$"),
    (Config(device_list_strategy=("cdi-cri",)), True, "cdi-cri is not supported by the SIMULATED plugin: .*kubelet 1.20"),
    (Config(device_list_strategy=("cdi-annotations",)), False, "CDI --device-list-strategy options are only supported on NVML-based systems$"),
    (Config(device_id_strategy="serial"), True, "invalid --device-id-strategy option: serial$"),
    (Config(device_discovery_strategy="magic"), True, "invalid --device-discovery-strategy option magic$"),
    (Config(device_discovery_strategy="tegra"), True, "tegra is not simulated"),
    (Config(mig_strategy="all"), True, "unknown MIG strategy: all$"),
])
def test_flag_validation(config: Config, has_nvml: bool, message: str) -> None:
    with pytest.raises(SimPluginError, match=message) as error:
        simdevices.validate_flags(config, has_nvml)
    assert str(error.value).startswith("error starting plugins: unable to validate flags: ")


def test_valid_flags_pass() -> None:
    simdevices.validate_flags(Config(device_list_strategy=("envvar", "cdi-annotations"), mig_strategy="mixed"), True)
    simdevices.validate_flags(Config(), False)


# --------------------------------------------------------------------------- NVML init failure (nothing injected)

HINTS = ("You can check the prerequisites at: https://github.com/NVIDIA/k8s-device-plugin#prerequisites",
         "You can learn how to set the runtime at: https://github.com/NVIDIA/k8s-device-plugin#quick-start",
         "If this is not a GPU node, you should set up a toleration or nodeSelector to only deploy this plugin on GPU nodes")
PLUGINS_CHAIN = "error starting plugins: error getting plugins: unable to create plugins: failed to construct resource managers: "


def test_init_failure_with_auto_discovery_is_fatal_by_default() -> None:
    failure = simdevices.nvml_init_failure(Config())
    assert failure.errors == ("Incompatible strategy detected auto", "If this is a GPU node, did you configure the NVIDIA Container Toolkit?", *HINTS)
    assert failure.fatal == PLUGINS_CHAIN + "invalid device discovery strategy"


def test_init_failure_with_nvml_discovery_names_the_missing_library() -> None:
    failure = simdevices.nvml_init_failure(Config(device_discovery_strategy="nvml"))
    assert failure.errors == ("Failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND.",
                              "If this is a GPU node, did you set the docker default runtime to `nvidia`?", *HINTS)
    assert failure.fatal == PLUGINS_CHAIN + "nvml init failed: ERROR_LIBRARY_NOT_FOUND"


def test_init_failure_without_fail_on_init_error_only_logs() -> None:
    assert simdevices.nvml_init_failure(Config(fail_on_init_error=False)).fatal is None
    failure = simdevices.nvml_init_failure(Config(fail_on_init_error=False, device_discovery_strategy="nvml"))
    assert (failure.fatal, failure.warning) == (None, "nvml init failed: ERROR_LIBRARY_NOT_FOUND")


def test_mixed_without_nvml_warns() -> None:
    assert simdevices.no_nvml_warnings(Config()) == []
    assert simdevices.no_nvml_warnings(Config(mig_strategy="mixed"))[0] == 'mig-strategy="mixed" is only supported with NVML'


# --------------------------------------------------------------------------- Allocate


def resource_of(profile: str, name: str, **config: Any) -> simdevices.Resource:
    return next(r for r in simdevices.build_resources(gpus_of(profile), Config(**config)) if r.name == name)


GPUS = resource_of("h100x8", "nvidia.com/gpu")
H100 = GPUS.ids
MIGS = resource_of("a100x4-mig", "nvidia.com/mig-1g.20gb", mig_strategy="mixed")


def allocate(resource: simdevices.Resource, ids: list[str], **config: Any) -> simdevices.Allocation:
    return simdevices.allocate(resource, Config(**config), ids, "7f8c1d52-0000-4000-8000-000000000001")


def test_allocate_envvar_with_uuids() -> None:
    result = allocate(GPUS, [H100[3], H100[1]])
    assert result == simdevices.Allocation({"NVIDIA_VISIBLE_DEVICES": f"{H100[3]},{H100[1]}"}, [], {})


def test_allocate_envvar_with_indices_names_mig_devices_gpu_colon_mig() -> None:
    assert allocate(MIGS, [uuid(2, "MIG"), uuid(0, "MIG")], device_id_strategy="index").envs == {"NVIDIA_VISIBLE_DEVICES": "0:2,0:0"}
    assert allocate(GPUS, [H100[5]], device_id_strategy="index").envs == {"NVIDIA_VISIBLE_DEVICES": "5"}


def test_allocate_volume_mounts() -> None:
    result = allocate(GPUS, [H100[0], H100[7]], device_list_strategy=("volume-mounts",))
    assert result.envs == {"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices"}
    assert result.mounts == [(f"/var/run/nvidia-container-devices/{H100[0]}", "/dev/null"),
                             (f"/var/run/nvidia-container-devices/{H100[7]}", "/dev/null")]
    both = allocate(GPUS, [H100[0]], device_list_strategy=("envvar", "volume-mounts"))
    assert both.envs == {"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices"} and len(both.mounts) == 1


def test_allocate_cdi_annotations_only_sets_no_env() -> None:
    result = allocate(MIGS, [uuid(1, "MIG")], device_list_strategy=("cdi-annotations",), device_id_strategy="index")
    assert result == simdevices.Allocation({}, [], {
        "cdi.k8s.io/nvidia-device-plugin_7f8c1d52-0000-4000-8000-000000000001": "k8s.device-plugin.nvidia.com/gpu=0:1"})


def test_allocate_cdi_annotations_with_envvar_and_a_custom_prefix() -> None:
    result = allocate(GPUS, [H100[0], H100[1]], device_list_strategy=("cdi-annotations", "envvar"), cdi_annotation_prefix="nvidia.cdi.k8s.io/")
    assert result.envs == {"NVIDIA_VISIBLE_DEVICES": f"{H100[0]},{H100[1]}"}
    assert result.annotations == {"nvidia.cdi.k8s.io/nvidia-device-plugin_7f8c1d52-0000-4000-8000-000000000001":
                                  f"k8s.device-plugin.nvidia.com/gpu={H100[0]},k8s.device-plugin.nvidia.com/gpu={H100[1]}"}


def test_allocate_replicas_strips_the_suffix_and_keeps_repeats_as_v0_17() -> None:
    config = sharing({"name": "nvidia.com/gpu", "replicas": 2})
    shared = simdevices.build_resources([gpu(0), gpu(1)], config)[0]
    assert simdevices.allocate(shared, config, ["GPU-1::0", "GPU-1::1"], "x").envs == {"NVIDIA_VISIBLE_DEVICES": "GPU-1,GPU-1"}
    indexed = Config(time_slicing=config.time_slicing, device_id_strategy="index")
    assert simdevices.allocate(shared, indexed, ["GPU-1::1", "GPU-0::0"], "x").envs == {"NVIDIA_VISIBLE_DEVICES": "1,0"}


def test_allocate_refuses_unknown_devices_and_oversized_shared_requests() -> None:
    with pytest.raises(SimPluginError, match='^invalid allocation request for "nvidia.com/gpu": invalid request: unknown device: GPU-x$'):
        allocate(GPUS, ["GPU-x"])
    config = sharing({"name": "nvidia.com/gpu", "replicas": 2}, failRequestsGreaterThanOne=True)
    shared = simdevices.build_resources([gpu(0)], config)[0]
    with pytest.raises(SimPluginError, match="maximum request size for shared resources is 1; found 2$"):
        simdevices.allocate(shared, config, ["GPU-0::0", "GPU-0::1"], "x")
    assert simdevices.allocate(shared, config, ["GPU-0::1"], "x").envs == {"NVIDIA_VISIBLE_DEVICES": "GPU-0"}


def test_preferred_allocation_prefers_the_least_used_gpu() -> None:
    config = sharing({"name": "nvidia.com/gpu", "replicas": 3})
    shared = simdevices.build_resources([gpu(0), gpu(1)], config)[0]
    available = ["GPU-0::2", "GPU-1::0", "GPU-1::1", "GPU-1::2"]  # GPU-0::0 and ::1 are in use
    assert simdevices.preferred_allocation(shared, available, [], 2) == ["GPU-1::0", "GPU-1::1"]
    assert simdevices.preferred_allocation(shared, available, ["GPU-0::2"], 2) == ["GPU-0::2", "GPU-1::0"]
    with pytest.raises(SimPluginError, match="not enough available devices to satisfy allocation"):
        simdevices.preferred_allocation(shared, available[:1], [], 2)


# --------------------------------------------------------------------------- profiles (lab sizing) and images


def test_gpus_from_profile_list() -> None:
    data = {"gpus": [{"index": 1, "name": "T4", "uuid": "GPU-2"}, {"minor": 0, "name": "T4", "uuid": "GPU-1"}]}
    assert simdevices.gpus_from_profile_data(data) == [simdevices.Gpu(0, "T4", "GPU-1"), simdevices.Gpu(1, "T4", "GPU-2")]
    assert [g.index for g in simdevices.gpus_from_profile_data({"gpu_count": 3, "name": "X"})] == [0, 1, 2]


@pytest.mark.parametrize(("data", "message"), [
    ([], "expected a mapping"),
    ({"gpus": [{"index": -1}]}, r"gpus\[0\].index=-1"),
    ({"gpus": [{"index": 0}, {"index": 0}]}, "repeat"),
    ({"something": 1}, "no 'gpus' list"),
])
def test_bad_profiles(data: object, message: str) -> None:
    with pytest.raises(SimPluginError, match=message):
        simdevices.gpus_from_profile_data(data, "p.yml")


def test_plugin_image_gets_gpus_like_nvidias_and_the_smoke_image_has_no_nvidia_smi() -> None:
    assert "NVIDIA_VISIBLE_DEVICES=all" in kube_images.PLUGIN_ENV
    assert kube_images.smoke_image_changes()[0] == 'ENTRYPOINT ["/bin/sh", "-c"]'
    assert not (REPO / "lab" / "smoke").exists()


def test_proto_without_gogo_keeps_the_api() -> None:
    proto = ('syntax = "proto3";\npackage v1beta1;\nimport "github.com/gogo/protobuf/gogoproto/gogo.proto";\n'
             "option (gogoproto.sizer_all) = true;\n"
             "message Device {\n\tstring ID = 1 [(gogoproto.customname) = \"ID\"];\n}\n")
    stripped = kube_images.strip_gogo(proto)
    assert "gogo" not in stripped
    assert "\tstring ID = 1;" in stripped and 'package v1beta1;' in stripped


def test_cdi_spec_names_every_advertised_id_with_its_gpus_device_node() -> None:
    gpus = gpus_of("a100x4-mig")
    config = Config(mig_strategy="mixed", device_id_strategy="index")
    spec = simdevices.cdi_spec(gpus, simdevices.build_resources(gpus, config), config)
    assert spec["kind"] == "k8s.device-plugin.nvidia.com/gpu"
    names = [device["name"] for device in spec["devices"]]
    assert names == ["0:0", "0:1", "0:2", "0:3", "1", "2", "3"]
    nodes = {device["name"]: device["containerEdits"]["deviceNodes"][0]["path"] for device in spec["devices"]}
    assert nodes["0:1"] == f"/dev/nvidia{gpus[0].minor if gpus[0].minor is not None else 0}"
    assert [node["path"] for node in spec["containerEdits"]["deviceNodes"]] == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]


def test_the_plugin_runs_under_the_name_nvidias_config_manager_signals(tmp_path: Path) -> None:
    """config-manager sends SIGHUP to the process whose argv[0] is nvidia-device-plugin (cmd/config-manager)."""
    (tmp_path / "plugin.py").write_text("import sys\nprint(open('/proc/self/cmdline').read().split('\\0')[0], sys.argv[1:])\n")
    launcher = tmp_path / "nvidia-device-plugin"
    launcher.write_text(kube_images.PLUGIN_LAUNCHER.replace(kube_images.PLUGIN_DIR, str(tmp_path)))
    launcher.chmod(0o755)
    # the image's python3 is Debian's, not a shim that would exec another program
    out = subprocess.run([str(launcher), "--mig-strategy=none"], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin"}).stdout
    assert out == "nvidia-device-plugin ['--mig-strategy=none']\n"
