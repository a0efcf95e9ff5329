"""SIMULATED `nvidia-smi` for the gpufleet.node lab's smoke-test pods.

There is no GPU and no driver in the lab: this stand-in prints the simulated GPUs that
NVIDIA_VISIBLE_DEVICES names, read from what the simulated device plugin mounted into the
container (/run/gpusim/root/proc/driver/nvidia/gpus or /run/gpusim/profile.*). Like the real
tool it fails with "No devices were found" when no GPU is visible.
"""
import glob
import os
import sys
from pathlib import Path

sys.path.insert(0, "/opt/gpusim-device-plugin")
import simdevices  # noqa: E402


def main() -> int:
    value = os.environ.get("NVIDIA_VISIBLE_DEVICES")
    print(f"NVIDIA_VISIBLE_DEVICES={value if value is not None else ''}")
    profiles = sorted(glob.glob("/run/gpusim/profile*"))
    try:
        gpus = simdevices.load_gpus(Path("/run/gpusim/root"), Path(profiles[0]) if profiles else None)
        visible = simdevices.select_visible(gpus, value)
    except simdevices.SimPluginError as error:
        print(f"NVIDIA-SMI (simulated) has failed: {error}", file=sys.stderr)
        return 9
    if not visible:
        print("No devices were found")
        return 6
    for gpu in visible:
        print(f"GPU {gpu.index}: {gpu.name} (UUID: {gpu.uuid})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
