"""SIMULATED nvidia-smi inside a container of the gpufleet.node lab (gpusim; there is no GPU in the lab).

The STAND-IN nvidia-container-runtime (tests/standins/toolkit) bind-mounts this file at
/usr/bin/nvidia-smi in a container that got GPUs, next to /run/gpusim/visible.json: what the
container's NVML would see (gpusim.injection's payload). Standard library only; it must work alone.

Answers ``-L`` (also for no arguments) and ``--query-gpu=FIELDS --format=csv[,noheader][,nounits]``.
As the real nvidia-smi in a container, GPUs are numbered 0..n-1 in host-index order, and MIG devices
0..k-1 per GPU.
"""
import json
import os
import sys

VISIBLE = "/run/gpusim/visible.json"
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA "
             "driver is installed and running.\n")
# What nvidia-smi prints (exit 6) when NVML shows it no device: never an empty list.
NO_DEVICES = "No devices were found\n"
FIELDS = {
    # field: (header, unit)
    "index": ("index", None), "name": ("name", None), "gpu_name": ("name", None), "uuid": ("uuid", None),
    "gpu_uuid": ("uuid", None), "pci.bus_id": ("pci.bus_id", None), "gpu_bus_id": ("pci.bus_id", None),
    "driver_version": ("driver_version", None), "memory.total": ("memory.total", "MiB"),
    "mig.mode.current": ("mig.mode.current", None), "count": ("count", None),
}


def load(path):
    """The container's GPUs renumbered as its NVML would; None when nothing was injected."""
    try:
        with open(path, encoding="utf-8") as handle:
            visible = json.load(handle)
    except (OSError, ValueError):
        return None
    gpus = sorted(visible.get("gpus", []), key=lambda gpu: gpu["index"])
    for number, gpu in enumerate(gpus):
        gpu["index"] = number
        for mig_number, mig in enumerate(gpu.get("mig_devices") or []):
            mig["index"] = mig_number
    return {"driver_version": visible.get("driver_version", ""), "gpus": gpus}


def render_list(visible):
    lines = []
    for gpu in visible["gpus"]:
        lines.append("GPU %d: %s (UUID: %s)" % (gpu["index"], gpu["name"], gpu["uuid"]))
        for mig in gpu.get("mig_devices") or []:
            lines.append("  MIG %-11s Device %2d: (UUID: %s)" % (mig["profile"], mig["index"], mig["uuid"]))
    return "".join(line + "\n" for line in lines)


def value(visible, gpu, field, units):
    if field == "memory.total":
        return "%d%s" % (gpu["memory_total_mib"], " MiB" if units else "")
    if field == "driver_version":
        return visible["driver_version"]
    if field == "count":
        return str(len(visible["gpus"]))
    if field == "mig.mode.current":
        return gpu.get("mig_mode") or "[N/A]"
    return str(gpu[{"gpu_name": "name", "gpu_uuid": "uuid", "pci.bus_id": "pci_bus_id", "gpu_bus_id": "pci_bus_id"}.get(field, field)])


def render_query(visible, fields, formats):
    units = "nounits" not in formats
    lines = []
    if "noheader" not in formats:
        headers = [FIELDS[field] for field in fields]
        lines.append(", ".join("%s [%s]" % (name, unit) if unit and units else name for name, unit in headers))
    for gpu in visible["gpus"]:
        lines.append(", ".join(value(visible, gpu, field, units) for field in fields))
    return "".join(line + "\n" for line in lines)


def option(argv, name):
    """Value of --name=VALUE or --name VALUE; None when absent."""
    for number, arg in enumerate(argv):
        if arg.startswith(name + "="):
            return arg[len(name) + 1:]
        if arg == name and number + 1 < len(argv):
            return argv[number + 1]
    return None


def main(argv):
    visible = load(os.environ.get("GPUSIM_VISIBLE", VISIBLE))
    if visible is None:
        sys.stdout.write(NO_DRIVER)
        return 9
    listing = not argv or argv in (["-L"], ["--list-gpus"])
    if listing and visible["gpus"]:
        sys.stdout.write(render_list(visible))
        return 0
    if listing:
        sys.stdout.write(NO_DEVICES)
        return 6
    query = option(argv, "--query-gpu")
    if query is None:
        sys.stderr.write("gpusim container nvidia-smi: arguments not simulated: %s\n" % " ".join(argv))
        return 2
    fields = [field.strip() for field in query.split(",") if field.strip()]
    for field in fields:
        if field not in FIELDS:
            sys.stdout.write('Field "%s" is not a valid field to query.\n\n' % field)
            return 2
    formats = [item.strip() for item in (option(argv, "--format") or "").split(",")]
    if "csv" not in formats:
        sys.stderr.write("gpusim container nvidia-smi: only --format=csv[,noheader][,nounits] is simulated\n")
        return 2
    if not visible["gpus"]:
        sys.stdout.write(NO_DEVICES)
        return 6
    sys.stdout.write(render_query(visible, fields, formats))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
