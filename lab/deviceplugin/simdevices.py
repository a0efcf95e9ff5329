"""Pure logic of the SIMULATED NVIDIA device plugin (no gRPC here; unit-tested).

The lab has no GPU: the GPUs come from the node's simulated GPU profile. Two sources are
read, first match wins:

1. a simulated host tree (``--host-root``): ``proc/driver/nvidia/gpus/*/information``, the
   file the real kernel driver writes per GPU (``Model:``, ``GPU UUID:``, ``Device Minor:``);
2. a profile data file (``--gpu-profile``, YAML or JSON) with a list of GPUs under ``gpus``
   (each with ``index``/``minor``, ``name`` and ``uuid``) or ``gpu_count`` + ``name``.

The configuration file uses the real NVIDIA device plugin format (``version: v1``,
``sharing.timeSlicing.resources[].replicas``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

RESOURCE_NAME = "nvidia.com/gpu"
REPLICA_SEPARATOR = "::"


class SimPluginError(ValueError):
    """Bad profile or configuration: the message names the file, the value and what is allowed."""


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    uuid: str


@dataclass(frozen=True)
class Sharing:
    resource_name: str
    replicas: int


def _load_structured(path: Path) -> Any:
    text = path.read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        import yaml  # Debian's python3-yaml in the image
    except ImportError as error:  # pragma: no cover - image always has it
        raise SimPluginError(f"{path}: not JSON and PyYAML is missing to read YAML") from error
    return yaml.safe_load(text)


def gpus_from_host_root(host_root: Path) -> list[Gpu]:
    """GPUs from ``<host_root>/proc/driver/nvidia/gpus/*/information`` (driver format)."""
    base = host_root / "proc" / "driver" / "nvidia" / "gpus"
    found: list[Gpu] = []
    if not base.is_dir():
        return found
    for info in sorted(base.glob("*/information")):
        fields: dict[str, str] = {}
        for line in info.read_text(errors="replace").splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        try:
            minor = int(fields["Device Minor"])
        except (KeyError, ValueError):
            raise SimPluginError(f"{info}: no integer 'Device Minor:' line") from None
        found.append(Gpu(minor, fields.get("Model", "NVIDIA GPU"), fields.get("GPU UUID", f"GPU-sim-{minor}")))
    return sorted(found, key=lambda gpu: gpu.index)


def gpus_from_profile_data(data: Any, source: str = "profile") -> list[Gpu]:
    """GPUs from a profile mapping (see module docstring for the accepted shapes)."""
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
            name = str(item.get("name", item.get("model", "NVIDIA GPU")))
            uuid = str(item.get("uuid", f"GPU-sim-{index}"))
            gpus.append(Gpu(index, name, uuid))
        indices = [gpu.index for gpu in gpus]
        if len(set(indices)) != len(indices):
            raise SimPluginError(f"{source}: GPU indices repeat: {indices}")
        return sorted(gpus, key=lambda gpu: gpu.index)
    count = data.get("gpu_count")
    if isinstance(count, int) and count >= 0:
        name = str(data.get("name", "NVIDIA GPU"))
        return [Gpu(i, name, f"GPU-sim-{i}") for i in range(count)]
    raise SimPluginError(f"{source}: no 'gpus' list and no 'gpu_count' integer")


def load_gpus(host_root: Path | None, profile: Path | None) -> list[Gpu]:
    if host_root is not None:
        gpus = gpus_from_host_root(host_root)
        if gpus:
            if profile is not None and profile.is_file():
                # the driver file gives the device minor; nvidia-smi's index is the profile's
                index_of = {g.uuid: g.index for g in gpus_from_profile_data(_load_structured(profile), str(profile))}
                gpus = sorted((Gpu(index_of.get(g.uuid, g.index), g.name, g.uuid) for g in gpus),
                              key=lambda gpu: gpu.index)
            return gpus
    if profile is not None and profile.is_file():
        return gpus_from_profile_data(_load_structured(profile), str(profile))
    raise SimPluginError(
        f"no simulated GPUs found: host root {host_root} has no proc/driver/nvidia/gpus/*/information "
        f"and profile file {profile} does not exist"
    )


def parse_config(data: Any, source: str = "config") -> Sharing:
    """Read the real NVIDIA device plugin config format; return the nvidia.com/gpu sharing."""
    if data is None:
        return Sharing(RESOURCE_NAME, 1)
    if not isinstance(data, Mapping):
        raise SimPluginError(f"{source}: expected a mapping, got {type(data).__name__}")
    version = data.get("version")
    if version != "v1":
        raise SimPluginError(f"{source}: version={version!r} is not supported: use 'v1'")
    sharing = data.get("sharing") or {}
    slicing = sharing.get("timeSlicing") or {} if isinstance(sharing, Mapping) else {}
    if not isinstance(slicing, Mapping):
        raise SimPluginError(f"{source}: sharing.timeSlicing must be a mapping")
    rename = bool(slicing.get("renameByDefault", False))
    replicas = 1
    resource = RESOURCE_NAME
    for position, item in enumerate(slicing.get("resources") or []):
        if not isinstance(item, Mapping):
            raise SimPluginError(f"{source}: sharing.timeSlicing.resources[{position}] must be a mapping")
        name = item.get("name")
        if name != RESOURCE_NAME:
            raise SimPluginError(
                f"{source}: sharing.timeSlicing.resources[{position}].name={name!r}: "
                f"the simulated plugin shares only {RESOURCE_NAME!r}"
            )
        value = item.get("replicas")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise SimPluginError(
                f"{source}: sharing.timeSlicing.resources[{position}].replicas={value!r}: use an integer >= 1"
            )
        replicas = value
        if rename or item.get("rename"):
            resource = str(item.get("rename") or f"{RESOURCE_NAME}.shared")
    return Sharing(resource, replicas)


def load_config(path: Path | None) -> Sharing:
    if path is None or not path.is_file():
        return Sharing(RESOURCE_NAME, 1)
    return parse_config(_load_structured(path), str(path))


def device_ids(gpus: Sequence[Gpu], replicas: int) -> list[str]:
    """One device per GPU, or ``replicas`` per GPU as ``<uuid>::<n>`` (the real plugin's form)."""
    if replicas <= 1:
        return [gpu.uuid for gpu in gpus]
    return [f"{gpu.uuid}{REPLICA_SEPARATOR}{n}" for gpu in gpus for n in range(replicas)]


def visible_devices(gpus: Sequence[Gpu], ids: Sequence[str]) -> str:
    """``NVIDIA_VISIBLE_DEVICES`` value: the allocated GPUs' indices, in allocation order, once each."""
    by_uuid = {gpu.uuid: gpu for gpu in gpus}
    indices: list[str] = []
    for device_id in ids:
        uuid = device_id.split(REPLICA_SEPARATOR, 1)[0]
        gpu = by_uuid.get(uuid)
        if gpu is None:
            raise SimPluginError(f"kubelet allocated unknown device {device_id!r}")
        if str(gpu.index) not in indices:
            indices.append(str(gpu.index))
    return ",".join(indices)


def select_visible(gpus: Sequence[Gpu], value: str | None) -> list[Gpu]:
    """The GPUs an ``NVIDIA_VISIBLE_DEVICES`` value names (indices or UUIDs, ``all``)."""
    if value is None or value.strip() in ("", "void", "none"):
        return []
    if value.strip() == "all":
        return list(gpus)
    chosen: list[Gpu] = []
    for word in re.split(r"\s*,\s*", value.strip()):
        match = next((g for g in gpus if str(g.index) == word or g.uuid == word), None)
        if match is None:
            raise SimPluginError(f"NVIDIA_VISIBLE_DEVICES names {word!r}, which is not a simulated GPU")
        chosen.append(match)
    return chosen


def gpus_to_json(gpus: Sequence[Gpu]) -> str:
    return json.dumps({"gpus": [{"index": g.index, "name": g.name, "uuid": g.uuid} for g in gpus]}, indent=2)
