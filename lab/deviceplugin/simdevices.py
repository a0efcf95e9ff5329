"""Pure logic of the SIMULATED NVIDIA device plugin (no gRPC here; unit-tested).

The plugin behaves as NVIDIA's k8s-device-plugin v0.17.1 (the version gpu_node_join pins), ported
from its sources (github.com/NVIDIA/k8s-device-plugin, paths cited per function), with one
simulated boundary: NVML. Its GPUs are only those the (stand-in) NVIDIA runtime injected into the
plugin's own container, read from ``/run/gpusim/visible.json`` (``GPUSIM_VISIBLE`` overrides). No
file there is the real plugin's "libnvidia-ml.so.1 not found": it fails at NVML init.

Configuration: the real v1 config file (``CONFIG_FILE`` / ``--config-file``), overridden by the
real plugin's environment variables, overridden by its command-line flags.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

LOG = logging.getLogger("gpusim-device-plugin")

RESOURCE_PREFIX = "nvidia.com/"
GPU_RESOURCE = "nvidia.com/gpu"
REPLICA_SEPARATOR = "::"
VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
VOLUME_MOUNT_HOST_PATH = "/dev/null"
VOLUME_MOUNT_ROOT = "/var/run/nvidia-container-devices"
DEFAULT_CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"
CDI_ANNOTATION_PLUGIN = "nvidia-device-plugin"
# The real plugin (cmd/nvidia-device-plugin/plugin-manager.go cdi.WithVendor, internal/cdi) names its devices
# k8s.device-plugin.nvidia.com/gpu=<id> and, with a CDI strategy, writes its own CDI spec for them to
# /var/run/cdi, which the runtime (cdi mode) resolves the annotations against.
CDI_VENDOR = "k8s.device-plugin.nvidia.com"
CDI_KIND = f"{CDI_VENDOR}/gpu"
CDI_SPEC_DIR = "/var/run/cdi"
CDI_SPEC_FILE = f"{CDI_VENDOR}-gpu.json"

MIG_STRATEGIES = ("none", "single", "mixed")
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
DEVICE_ID_STRATEGIES = ("uuid", "index")
DISCOVERY_STRATEGIES = ("auto", "nvml", "tegra")

# Error chains as cmd/nvidia-device-plugin/main.go start() -> startPlugins() log them before exit 1.
START = "error starting plugins: "
CONFIG_FILE_ERROR = START + "unable to load config: unable to finalize config: unable to parse config file: "
UNMARSHAL_ERROR = CONFIG_FILE_ERROR + "error parsing config file: unmarshal error: error unmarshaling JSON: while decoding JSON: "
VALIDATE_ERROR = START + "unable to validate flags: "
PLUGINS_ERROR = START + "error getting plugins: unable to create plugins: failed to construct resource managers: "
DEVICE_MAP_ERROR = PLUGINS_ERROR + "error building device map: error building device map from config.resources: "
# go-nvlib devicelib.VisitMigDevices wraps a visitor's error five times.
VISIT_MIG_ERROR = ("error visiting devices: error visiting device: error visiting device: "
                   "error visiting MIG device: error visiting MIG device: ")

NVML_LIBRARY_MISSING = "libnvidia-ml.so.1: cannot open shared object file: No such file or directory"
INIT_HINTS = (
    "You can check the prerequisites at: https://github.com/NVIDIA/k8s-device-plugin#prerequisites",
    "You can learn how to set the runtime at: https://github.com/NVIDIA/k8s-device-plugin#quick-start",
    "If this is not a GPU node, you should set up a toleration or nodeSelector to only deploy this plugin on GPU nodes",
)


class SimPluginError(ValueError):
    """A failure the plugin logs (the real plugin's text where it has one) before it exits 1."""


# --------------------------------------------------------------------------- GPUs


@dataclass(frozen=True)
class MigDevice:
    index: int
    profile: str
    uuid: str


@dataclass(frozen=True)
class Gpu:
    index: int  # NVML's index inside the plugin's container (0..n-1 in host order)
    name: str
    uuid: str
    host_index: int | None = None
    mig_enabled: bool = False
    mig_devices: tuple[MigDevice, ...] = ()
    minor: int | None = None  # the device node /dev/nvidia<minor>


def _load_structured(path: Path) -> Any:
    """JSON or YAML (sigs.k8s.io/yaml reads both); raises ValueError with the parser's message."""
    text = path.read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    import yaml  # Debian's python3-yaml in the image

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(f"error converting YAML to JSON: {error}") from None


def _mig_devices(row: Mapping[str, Any], source: str) -> tuple[MigDevice, ...]:
    items = row.get("mig_devices") or []
    try:
        return tuple(MigDevice(int(m["index"]), str(m["profile"]), str(m["uuid"])) for m in items)
    except (KeyError, TypeError, ValueError):
        raise SimPluginError(f"{source}: GPU {row.get('uuid')}: each MIG device needs index, profile and uuid") from None


def gpus_from_visible(data: Any, source: str = "visible.json") -> list[Gpu]:
    """The GPUs a container's NVML sees, from the runtime's payload (host indices renumbered 0..n-1)."""
    rows = data.get("gpus") if isinstance(data, Mapping) else None
    if not isinstance(rows, list) or not all(isinstance(row, Mapping) for row in rows):
        raise SimPluginError(f"{source}: not the SIMULATED runtime's NVML view (no 'gpus' list of mappings)")
    try:
        ordered = sorted(rows, key=lambda row: int(row["index"]))
        return [Gpu(position, str(row["name"]), str(row["uuid"]), int(row["index"]),
                    row.get("mig_mode") == "Enabled",
                    _mig_devices(row, source) if row.get("mig_mode") == "Enabled" else (),
                    int(row["minor"]) if row.get("minor") is not None else None)
                for position, row in enumerate(ordered)]
    except (KeyError, TypeError, ValueError) as error:
        raise SimPluginError(f"{source}: each GPU needs index, name and uuid ({error!r})") from None


def load_visible(path: Path) -> list[Gpu] | None:
    """The injected GPUs, or None when nothing was injected (the real plugin's missing libnvidia-ml)."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise SimPluginError(f"{path}: unreadable SIMULATED NVML view: {error}") from None
    return gpus_from_visible(data, str(path))


def describe_gpus(gpus: Sequence[Gpu]) -> str:
    parts = []
    for gpu in gpus:
        mig = f", MIG {len(gpu.mig_devices)}x {'/'.join(sorted({m.profile for m in gpu.mig_devices}))}" if gpu.mig_enabled else ""
        parts.append(f"GPU {gpu.index}: {gpu.name} (UUID: {gpu.uuid}{mig})")
    return "; ".join(parts) or "no GPUs"


def gpus_from_profile_data(data: Any, source: str = "profile") -> list[Gpu]:
    """GPUs (index, name, uuid) of a gpusim profile mapping: a ``gpus`` list or ``gpu_count`` + ``name``.

    Used by the lab (gpufleet_lab.gpuprofiles) to size nodes; the plugin itself never reads profiles.
    """
    if not isinstance(data, Mapping):
        raise SimPluginError(f"{source}: expected a mapping, got {type(data).__name__}")
    items = data.get("gpus")
    if isinstance(items, Sequence) and not isinstance(items, str):
        gpus: list[Gpu] = []
        for position, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise SimPluginError(f"{source}: gpus[{position}] must be a mapping, got {item!r}")
            index = item.get("index", item.get("minor", position))
            if not isinstance(index, int) or index < 0:
                raise SimPluginError(f"{source}: gpus[{position}].index={index!r}: use an integer >= 0")
            gpus.append(Gpu(index, str(item.get("name", item.get("model", "NVIDIA GPU"))), str(item.get("uuid", f"GPU-sim-{index}"))))
        indices = [gpu.index for gpu in gpus]
        if len(set(indices)) != len(indices):
            raise SimPluginError(f"{source}: GPU indices repeat: {indices}")
        return sorted(gpus, key=lambda gpu: gpu.index)
    count = data.get("gpu_count")
    if isinstance(count, int) and count >= 0:
        name = str(data.get("name", "NVIDIA GPU"))
        return [Gpu(i, name, f"GPU-sim-{i}") for i in range(count)]
    raise SimPluginError(f"{source}: no 'gpus' list and no 'gpu_count' integer")


def gpus_to_json(gpus: Sequence[Gpu]) -> str:
    return json.dumps({"gpus": [{"index": g.index, "name": g.name, "uuid": g.uuid} for g in gpus]}, indent=2)


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class ReplicatedResource:
    name: str
    replicas: int
    rename: str = ""


@dataclass(frozen=True)
class TimeSlicing:
    resources: tuple[ReplicatedResource, ...]
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = False


@dataclass(frozen=True)
class Config:
    mig_strategy: str = "none"
    fail_on_init_error: bool = True
    device_discovery_strategy: str = "auto"
    device_list_strategy: tuple[str, ...] = ("envvar",)
    device_id_strategy: str = "uuid"
    cdi_annotation_prefix: str = DEFAULT_CDI_ANNOTATION_PREFIX
    time_slicing: TimeSlicing | None = None
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def to_json(self) -> str:
        """The effective config, shaped like the real plugin's "Running with config" dump."""
        flags = {"migStrategy": self.mig_strategy, "failOnInitError": self.fail_on_init_error,
                 "deviceDiscoveryStrategy": self.device_discovery_strategy,
                 "plugin": {"deviceListStrategy": list(self.device_list_strategy), "deviceIDStrategy": self.device_id_strategy,
                            "cdiAnnotationPrefix": self.cdi_annotation_prefix}}
        sharing = {}
        if self.time_slicing:
            sharing["timeSlicing"] = {
                "renameByDefault": self.time_slicing.rename_by_default,
                "failRequestsGreaterThanOne": self.time_slicing.fail_requests_greater_than_one,
                "resources": [{"name": r.name, "rename": r.rename, "devices": "all", "replicas": r.replicas}
                              for r in self.time_slicing.resources]}
        return json.dumps({"version": "v1", "flags": flags, "sharing": sharing}, indent=2)


@dataclass(frozen=True)
class FlagSpec:
    """One flag of cmd/nvidia-device-plugin/main.go: Config attribute, config-file path, env var, CLI name."""
    attr: str
    path: tuple[str, ...]
    env: str
    cli: str
    kind: str  # "string", "bool" or "list"


FLAG_SPECS = (
    FlagSpec("mig_strategy", ("migStrategy",), "MIG_STRATEGY", "mig-strategy", "string"),
    FlagSpec("fail_on_init_error", ("failOnInitError",), "FAIL_ON_INIT_ERROR", "fail-on-init-error", "bool"),
    FlagSpec("device_discovery_strategy", ("deviceDiscoveryStrategy",), "DEVICE_DISCOVERY_STRATEGY",
             "device-discovery-strategy", "string"),
    FlagSpec("device_list_strategy", ("plugin", "deviceListStrategy"), "DEVICE_LIST_STRATEGY", "device-list-strategy", "list"),
    FlagSpec("device_id_strategy", ("plugin", "deviceIDStrategy"), "DEVICE_ID_STRATEGY", "device-id-strategy", "string"),
    FlagSpec("cdi_annotation_prefix", ("plugin", "cdiAnnotationPrefix"), "CDI_ANNOTATION_PREFIX", "cdi-annotation-prefix", "string"),
)
# Real flags the simulation does not model: set to a non-default value, they are named in a warning.
UNSIMULATED_FLAGS = {("plugin", "passDeviceSpecs"): False, ("gdsEnabled",): False, ("mofedEnabled",): False,
                     ("useNodeFeatureAPI",): False}
GO_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
            "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


def _type_error(value: Any, path: Sequence[str], go_type: str) -> SimPluginError:
    return SimPluginError(UNMARSHAL_ERROR + f"json: cannot unmarshal {_json_type(value)} into Go struct field "
                          f"Config.{'.'.join(('flags', *path))} of type {go_type}")


def _file_flag(spec: FlagSpec, value: Any) -> Any:
    """A config-file value, type-checked as Go's JSON decoding of api/config/v1/flags.go does."""
    if spec.kind == "list":  # deviceListStrategyFlag.UnmarshalJSON: a string or a list of strings
        if isinstance(value, str):
            return (value,)
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return tuple(value)
        raise SimPluginError(UNMARSHAL_ERROR + f"invalid deviceListStrategy: {json.dumps(value, separators=(',', ':'))}")
    if not isinstance(value, bool if spec.kind == "bool" else str):
        raise _type_error(value, spec.path, "bool" if spec.kind == "bool" else "string")
    return value


def _text_flag(spec: FlagSpec, text: str, source: str) -> Any:
    """An env var or CLI value, parsed as urfave/cli v2 does (bool: strconv.ParseBool; list: comma-separated)."""
    if spec.kind == "bool":
        if text == "":  # urfave/cli: a defined but empty variable means false
            return False
        if text not in GO_BOOLS:
            raise SimPluginError(f'could not parse "{text}" as bool value from {source} for flag {spec.cli}: '
                                 f'strconv.ParseBool: parsing "{text}": invalid syntax')
        return GO_BOOLS[text]
    if spec.kind == "list":
        return tuple(part.strip() for part in text.split(","))
    return text


def _dig(data: Mapping[str, Any], path: Sequence[str]) -> tuple[bool, Any]:
    for key in path[:-1]:
        data = data.get(key) if isinstance(data.get(key), Mapping) else {}
    return (path[-1] in data and data[path[-1]] is not None), data.get(path[-1])


DEFAULTS = Config()


def resolve_flags(file_flags: Mapping[str, Any], env: Mapping[str, str], cli: Mapping[str, str | None]) -> dict[str, Any]:
    """Flag values by the real precedence (api/config/v1/config.go NewConfig): CLI flag, env var, config file, default."""
    values: dict[str, Any] = {}
    for spec in FLAG_SPECS:
        if cli.get(spec.attr) is not None:
            values[spec.attr] = _text_flag(spec, str(cli[spec.attr]), f"flag --{spec.cli}")
        elif spec.env in env:
            values[spec.attr] = _text_flag(spec, env[spec.env], f'environment variable "{spec.env}"')
        elif spec.attr in file_flags:
            values[spec.attr] = file_flags[spec.attr]
        else:
            values[spec.attr] = getattr(DEFAULTS, spec.attr)
    return values


def _resource_name(raw: Any, where: str) -> str:
    """api/config/v1/resources.go NewResourceName: nvidia.com/ prefix added, <= 63 characters, DNS-1123 subdomain."""
    if not isinstance(raw, str):
        raise SimPluginError(UNMARSHAL_ERROR + f"json: cannot unmarshal {_json_type(raw)} into Go struct field {where} of type string")
    name = raw if raw.startswith(RESOURCE_PREFIX) else RESOURCE_PREFIX + raw
    if len(name) > 63:
        raise SimPluginError(UNMARSHAL_ERROR + f"fully-qualified resource name must be 63 characters or less: {name}")
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", name.split("/", 1)[1]):
        raise SimPluginError(UNMARSHAL_ERROR + f"incorrect format for resource name '{name}': [a lowercase RFC 1123 subdomain "
                             "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
                             "alphanumeric character]")
    return name


def _replicated_resource(item: Any, rename_by_default: bool, warnings: list[str]) -> ReplicatedResource:
    """api/config/v1/replicas.go ReplicatedResource.UnmarshalJSON, then config.go DisableResourceNamingInConfig."""
    if not isinstance(item, Mapping) or "name" not in item:
        raise SimPluginError(UNMARSHAL_ERROR + "no resource name specified")
    name = _resource_name(item["name"], "ReplicatedResource.name")
    devices = item.get("devices", "all")
    if isinstance(devices, str) and devices != "all":
        raise SimPluginError(UNMARSHAL_ERROR + f"devices set as '{devices}' but the only valid string input is 'all'")
    if "replicas" not in item:
        raise SimPluginError(UNMARSHAL_ERROR + "no replicas specified")
    replicas = item["replicas"]
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        raise SimPluginError(UNMARSHAL_ERROR + f"json: cannot unmarshal {_json_type(replicas)} into Go value of type int")
    if replicas < 2:
        raise SimPluginError(UNMARSHAL_ERROR + "number of replicas must be >= 2")
    rename = _resource_name(item["rename"], "ReplicatedResource.rename") if item.get("rename") else ""
    if rename and not rename_by_default:
        warnings.append("Setting the 'rename' field in sharing.timeSlicing.resources is not yet supported in the config. Ignoring...")
    if devices != "all":
        warnings.append("Customizing the 'devices' field in sharing.timeSlicing.resources is not yet supported in the config. Ignoring...")
    return ReplicatedResource(name, replicas, name + ".shared" if rename_by_default else "")


def _time_slicing(data: Any, warnings: list[str]) -> TimeSlicing:
    """api/config/v1/replicas.go ReplicatedResources.UnmarshalJSON."""
    if not isinstance(data, Mapping) or not data.get("resources"):
        raise SimPluginError(UNMARSHAL_ERROR + "no resources specified")
    flags = {}
    for key in ("renameByDefault", "failRequestsGreaterThanOne"):
        flags[key] = data.get(key, False)
        if not isinstance(flags[key], bool):
            raise SimPluginError(UNMARSHAL_ERROR + f"json: cannot unmarshal {_json_type(flags[key])} into Go value of type bool")
    items = data["resources"]
    if not isinstance(items, list):
        raise SimPluginError(UNMARSHAL_ERROR + f"json: cannot unmarshal {_json_type(items)} into Go value of type []v1.ReplicatedResource")
    resources = tuple(_replicated_resource(item, flags["renameByDefault"], warnings) for item in items)
    return TimeSlicing(resources, flags["renameByDefault"], flags["failRequestsGreaterThanOne"])


def parse_config_data(data: Any) -> tuple[dict[str, Any], TimeSlicing | None, list[str]]:
    """A config file's flags (only those it sets), its time-slicing and the real plugin's warnings about it."""
    data = {} if data is None else data
    if not isinstance(data, Mapping):
        raise SimPluginError(UNMARSHAL_ERROR + f"json: cannot unmarshal {_json_type(data)} into Go value of type v1.Config")
    version = data.get("version") or "v1"
    if version != "v1":
        raise SimPluginError(CONFIG_FILE_ERROR + f"error parsing config file: unknown version: {version}")
    flags = data.get("flags") or {}
    if not isinstance(flags, Mapping):
        raise SimPluginError(UNMARSHAL_ERROR + f"json: cannot unmarshal {_json_type(flags)} into Go struct field Config.flags of type v1.Flags")
    file_flags: dict[str, Any] = {}
    for spec in FLAG_SPECS:
        present, value = _dig(flags, spec.path)
        if present:
            file_flags[spec.attr] = _file_flag(spec, value)
    warnings = []
    for path, default in UNSIMULATED_FLAGS.items():
        present, value = _dig(flags, path)
        if present and value != default:
            warnings.append(f"flags.{'.'.join(path)}={value!r} is not simulated: ignored")
    if data.get("resources"):
        warnings.append("Customizing the 'resources' field is not yet supported in the config. Ignoring...")
    sharing = data.get("sharing") or {}
    if not isinstance(sharing, Mapping):
        raise SimPluginError(UNMARSHAL_ERROR + f"json: cannot unmarshal {_json_type(sharing)} into Go struct field Config.sharing of type v1.Sharing")
    if sharing.get("mps") is not None:
        raise SimPluginError(START + "sharing.mps is not simulated (it needs NVIDIA's MPS control daemon): use sharing.timeSlicing")
    time_slicing = _time_slicing(sharing["timeSlicing"], warnings) if "timeSlicing" in sharing else None
    return file_flags, time_slicing, warnings


def load_config(path: str | None, env: Mapping[str, str], cli: Mapping[str, str | None]) -> Config:
    """The effective config: file (when a path is given, as the real --config-file/CONFIG_FILE), env, CLI."""
    file_flags: dict[str, Any] = {}
    time_slicing, warnings = None, []
    if path:
        try:
            data = _load_structured(Path(path))
        except FileNotFoundError:
            raise SimPluginError(CONFIG_FILE_ERROR + f"error opening config file: open {path}: no such file or directory") from None
        except ValueError as error:
            raise SimPluginError(CONFIG_FILE_ERROR + f"error parsing config file: unmarshal error: {error}") from None
        file_flags, time_slicing, warnings = parse_config_data(data)
    values = resolve_flags(file_flags, env, cli)
    return Config(time_slicing=time_slicing, warnings=tuple(warnings), **values)


def validate_flags(config: Config, has_nvml: bool) -> None:
    """cmd/nvidia-device-plugin/main.go validateFlags, in its order, plus the lab's refusals."""
    for strategy in config.device_list_strategy:
        if strategy not in DEVICE_LIST_STRATEGIES:
            raise SimPluginError(VALIDATE_ERROR + f"invalid --device-list-strategy option: invalid strategy: {strategy}")
    if "cdi-cri" in config.device_list_strategy:
        raise SimPluginError(VALIDATE_ERROR + "invalid --device-list-strategy option: cdi-cri is not supported by the SIMULATED "
                             "plugin: it answers through the kubelet's CDIDevices field (device-plugin API of Kubernetes >= 1.28), "
                             "which the lab's kubelet 1.20 does not have, so containers would get no GPU; use cdi-annotations, "
                             "envvar or volume-mounts")
    if any(s.startswith("cdi-") for s in config.device_list_strategy) and not has_nvml:
        raise SimPluginError(VALIDATE_ERROR + "CDI --device-list-strategy options are only supported on NVML-based systems")
    if config.device_id_strategy not in DEVICE_ID_STRATEGIES:
        raise SimPluginError(VALIDATE_ERROR + f"invalid --device-id-strategy option: {config.device_id_strategy}")
    if config.device_discovery_strategy not in DISCOVERY_STRATEGIES:
        raise SimPluginError(VALIDATE_ERROR + f"invalid --device-discovery-strategy option {config.device_discovery_strategy}")
    if config.device_discovery_strategy == "tegra":
        raise SimPluginError(VALIDATE_ERROR + "--device-discovery-strategy tegra is not simulated (the lab simulates NVML GPUs)")
    if config.mig_strategy not in MIG_STRATEGIES:
        raise SimPluginError(VALIDATE_ERROR + f"unknown MIG strategy: {config.mig_strategy}")


def no_nvml_warnings(config: Config) -> list[str]:
    """internal/rm/rm.go AddDefaultResourcesToConfig: mixed needs NVML."""
    if config.mig_strategy != "mixed":
        return []
    return ['mig-strategy="mixed" is only supported with NVML',
            f"NVML not detected: could not load NVML library: {NVML_LIBRARY_MISSING}"]


@dataclass(frozen=True)
class InitFailure:
    errors: tuple[str, ...]
    warning: str | None
    fatal: str | None


def nvml_init_failure(config: Config) -> InitFailure:
    """internal/plugin/factory.go getResourceManagers when libnvidia-ml.so.1 cannot be loaded.

    auto: go-nvlib resolves no platform, so the strategy stays "auto" ("Incompatible strategy");
    nvml: NVML init itself fails with ERROR_LIBRARY_NOT_FOUND.
    """
    if config.device_discovery_strategy == "nvml":
        errors = ("Failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND.",
                  "If this is a GPU node, did you set the docker default runtime to `nvidia`?", *INIT_HINTS)
        failure = "nvml init failed: ERROR_LIBRARY_NOT_FOUND"
        if config.fail_on_init_error:
            return InitFailure(errors, None, PLUGINS_ERROR + failure)
        return InitFailure(errors, failure, None)
    errors = (f"Incompatible strategy detected {config.device_discovery_strategy}",
              "If this is a GPU node, did you configure the NVIDIA Container Toolkit?", *INIT_HINTS)
    return InitFailure(errors, None, PLUGINS_ERROR + "invalid device discovery strategy" if config.fail_on_init_error else None)


# --------------------------------------------------------------------------- resources


@dataclass(frozen=True)
class Device:
    id: str  # what the kubelet sees: the UUID, "<uuid>::<n>" for a time-slicing replica
    index: str  # "0", or "<gpu>:<mig>" for a MIG device
    replicas: int = 0

    @property
    def uuid(self) -> str:
        return strip_replica(self.id)


@dataclass(frozen=True)
class Resource:
    name: str
    devices: tuple[Device, ...]

    @property
    def socket_name(self) -> str:
        """internal/plugin/server.go getPluginSocketPath: nvidia-<name after the slash>.sock."""
        return f"nvidia-{self.name.split('/', 1)[1]}.sock"

    @property
    def ids(self) -> list[str]:
        return [device.id for device in self.devices]


def strip_replica(device_id: str) -> str:
    return device_id.split(REPLICA_SEPARATOR, 1)[0]


def mixed_resource_name(profile: str) -> str | None:
    """internal/rm/rm.go: nvidia.com/mig-<profile> with '+' as '.'; none for compute-instance profiles.

    Only profiles with as many compute as GPU slices get a resource; NVML names the others "<c>c.<g>g.<mem>".
    """
    if re.match(r"\d+c\.", profile):
        return None
    return RESOURCE_PREFIX + ("mig-" + profile).replace("+", ".")


def _mig_device_map(gpus: Sequence[Gpu], strategy: str) -> dict[str, list[Device]]:
    devices: dict[str, list[Device]] = {}
    for gpu in gpus:
        for mig in gpu.mig_devices if gpu.mig_enabled else ():
            name = GPU_RESOURCE if strategy == "single" else mixed_resource_name(mig.profile)
            if name is None:
                raise SimPluginError(DEVICE_MAP_ERROR + "error building MIG device map: " + VISIT_MIG_ERROR
                                     + f"MIG profile '{mig.profile}' does not match any resource patterns")
            devices.setdefault(name, []).append(Device(mig.uuid, f"{gpu.index}:{mig.index}"))
    return devices


def _assert_mig_devices_valid(gpus: Sequence[Gpu], uniform: bool) -> None:
    """internal/rm/device_map.go assertAllMigDevicesAreValid."""
    for gpu in gpus:
        if gpu.mig_enabled and not gpu.mig_devices:
            if uniform:
                raise SimPluginError(DEVICE_MAP_ERROR + "invalid MIG configuration: at least one device with migEnabled=true "
                                     f"was not configured correctly: error visiting device: device {gpu.index} has no MIG devices configured")
            LOG.warning("device %s has no MIG devices configured", gpu.index)
    profiles = {mig.profile for gpu in gpus if gpu.mig_enabled for mig in gpu.mig_devices}
    if uniform and len(profiles) > 1:
        raise SimPluginError(DEVICE_MAP_ERROR + "invalid MIG configuration: " + VISIT_MIG_ERROR
                             + "more than one MIG device type present on node")


def device_map(gpus: Sequence[Gpu], mig_strategy: str) -> dict[str, list[Device]]:
    """internal/rm/device_map.go buildDeviceMapFromConfigResources."""
    devices: dict[str, list[Device]] = {}
    for gpu in gpus:
        if not (gpu.mig_enabled and mig_strategy != "none"):
            devices.setdefault(GPU_RESOURCE, []).append(Device(gpu.uuid, str(gpu.index)))
    if mig_strategy == "none":
        return devices
    migs = _mig_device_map(gpus, mig_strategy)
    _assert_mig_devices_valid(gpus, uniform=mig_strategy == "single")
    if mig_strategy == "single" and devices and migs:
        raise SimPluginError(DEVICE_MAP_ERROR + "all devices on the node must be configured with the same migEnabled value")
    for name, more in migs.items():
        devices.setdefault(name, []).extend(more)
    return devices


def with_replicas(devices: Mapping[str, list[Device]], time_slicing: TimeSlicing | None) -> dict[str, list[Device]]:
    """internal/rm/device_map.go updateDeviceMapWithReplicas (devices: all, as the real config forces)."""
    if time_slicing is None:
        return dict(devices)
    shared = {r.name for r in time_slicing.resources}
    result = {name: list(found) for name, found in devices.items() if name not in shared}
    for resource in time_slicing.resources:
        for device in devices.get(resource.name, []):
            result.setdefault(resource.rename or resource.name, []).extend(
                Device(f"{device.id}{REPLICA_SEPARATOR}{n}", device.index, resource.replicas) for n in range(resource.replicas))
    return result


def build_resources(gpus: Sequence[Gpu], config: Config) -> list[Resource]:
    """One resource (one gRPC server and registration) per extended-resource name that has devices."""
    devices = with_replicas(device_map(gpus, config.mig_strategy), config.time_slicing)
    return [Resource(name, tuple(found)) for name, found in sorted(devices.items()) if found]


# --------------------------------------------------------------------------- allocation


@dataclass(frozen=True)
class Allocation:
    """A ContainerAllocateResponse: envs, mounts (container path, host path), annotations."""
    envs: dict[str, str]
    mounts: list[tuple[str, str]]
    annotations: dict[str, str]


def validate_request(resource: Resource, config: Config, ids: Sequence[str]) -> None:
    """internal/rm/rm.go ValidateRequest, with internal/plugin/server.go Allocate's wrapping."""
    known = set(resource.ids)
    for device_id in ids:
        if device_id not in known:
            raise SimPluginError(f'invalid allocation request for "{resource.name}": invalid request: unknown device: {device_id}')
    ts = config.time_slicing
    if ts and ts.fail_requests_greater_than_one and len(ids) > 1 and any(REPLICA_SEPARATOR in i for i in ids):
        raise SimPluginError(f'invalid allocation request for "{resource.name}": invalid request: '
                             f"maximum request size for shared resources is 1; found {len(ids)}")


def runtime_ids(resource: Resource, config: Config, ids: Sequence[str]) -> list[str]:
    """server.go deviceIDsFromAnnotatedDeviceIDs (v0.17.1): replica suffix stripped, no de-duplication."""
    if config.device_id_strategy == "index":
        index_of = {device.id: device.index for device in resource.devices}
        return [index_of[i] for i in ids if i in index_of]
    return [strip_replica(i) for i in ids]


def cdi_spec(gpus: Sequence[Gpu], resources: Sequence[Resource], config: Config) -> dict[str, Any]:
    """The CDI spec the plugin writes at start: one device per ID the runtime will be given, with its GPU's node."""
    minor_of: dict[str, int] = {}
    for gpu in gpus:
        minor = gpu.minor if gpu.minor is not None else gpu.index
        minor_of[gpu.uuid] = minor
        minor_of.update((mig.uuid, minor) for mig in gpu.mig_devices)
    devices: dict[str, int] = {}
    for resource in resources:
        for device in resource.devices:
            name = runtime_ids(resource, config, [device.id])[0]
            devices[name] = minor_of.get(device.uuid, 0)
    return {
        "cdiVersion": "0.5.0",
        "kind": CDI_KIND,
        "devices": [{"name": name, "containerEdits": {"deviceNodes": [{"path": f"/dev/nvidia{minor}"}]}}
                    for name, minor in sorted(devices.items())],
        "containerEdits": {"deviceNodes": [{"path": path} for path in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")]},
    }


def cdi_annotations(prefix: str, response_id: str, ids: Sequence[str]) -> dict[str, str]:
    """CDI's UpdateAnnotations(plugin "nvidia-device-plugin", a fresh response UUID) with the configured prefix."""
    key = f"{prefix}{CDI_ANNOTATION_PLUGIN}_{response_id.replace('/', '_')}"
    return {key: ",".join(f"{CDI_KIND}={device_id}" for device_id in ids)}


def allocate(resource: Resource, config: Config, ids: Sequence[str], response_id: str) -> Allocation:
    """internal/plugin/server.go getAllocateResponse for one container request."""
    validate_request(resource, config, ids)
    chosen = runtime_ids(resource, config, ids)
    strategies = set(config.device_list_strategy)
    envs: dict[str, str] = {}
    mounts: list[tuple[str, str]] = []
    annotations: dict[str, str] = {}
    if "cdi-annotations" in strategies and chosen:
        annotations = cdi_annotations(config.cdi_annotation_prefix, response_id, chosen)
    if all(s.startswith("cdi-") for s in strategies):
        return Allocation(envs, mounts, annotations)
    if "envvar" in strategies:
        envs[VISIBLE_DEVICES_ENV] = ",".join(chosen)
    if "volume-mounts" in strategies:
        envs[VISIBLE_DEVICES_ENV] = VOLUME_MOUNT_ROOT
        mounts = [(f"{VOLUME_MOUNT_ROOT}/{device_id}", VOLUME_MOUNT_HOST_PATH) for device_id in chosen]
    return Allocation(envs, mounts, annotations)


def preferred_allocation(resource: Resource, available: Sequence[str], required: Sequence[str], size: int) -> list[str]:
    """internal/rm/allocate.go distributedAlloc: spread replicas over GPUs, least-used first.

    The real plugin uses it for replicas and MIG devices; for whole GPUs it asks go-gpuallocator for
    an NVLink-aligned set, which has no meaning without real links: they take this path too.
    """
    known = set(resource.ids)
    required_known = {i for i in required if i in known}
    candidates = [i for i in available if i in known and i not in required_known]
    needed = size - len(required)
    if len(candidates) < needed:
        raise SimPluginError("error getting list of preferred allocation devices: not enough available devices to satisfy allocation")
    free = Counter(strip_replica(i) for i in candidates)
    total = Counter(strip_replica(i) for i in resource.ids if strip_replica(i) in free)

    def used(device_id: str) -> int:
        return total[strip_replica(device_id)] - free[strip_replica(device_id)]

    chosen: list[str] = []
    for _step in range(max(needed, 0)):
        candidates.sort(key=used)
        pick = candidates.pop(0)
        free[strip_replica(pick)] -= 1
        chosen.append(pick)
    return [*required, *chosen]
