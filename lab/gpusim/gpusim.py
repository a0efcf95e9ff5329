"""SIMULATED GPU host for the gpufleet.node lab (there is no GPU and no NVIDIA driver in the lab).

Two roles, standard library only (it runs on the lab's node containers with Debian's python3):

``gpusim.py build --profile PROFILE.json --prefix DIR [--check] [--reset]``
    Lays out a fake host tree for one profile under ``DIR/root`` (``proc/``, ``sys/``, ``dev/``,
    the NVML library file) and installs the ``nvidia-smi`` stand-in as ``DIR/bin/nvidia-smi``.
    It only creates or corrects what the profile describes and never removes anything else, so a
    node fixed by ``nvidia_gpu_check fix_device_nodes=true`` stays fixed on the next build;
    ``--reset`` (or a different profile) rebuilds the tree from scratch. Prints one JSON object:
    ``{"changed": bool, "actions": [...]}``. Device nodes are real character devices (mknod), so
    it must run as root.

``DIR/bin/nvidia-smi ARGS`` (the stand-in, which calls ``gpusim.py nvidia-smi --prefix DIR ARGS``)
    Answers the nvidia-smi calls the collection makes: ``--query-gpu=...`` with
    ``--format=csv[,noheader][,nounits]`` (rendered from the profile), ``-L`` and the plain table
    (replayed verbatim from recordings when the profile names one, else rendered), and a profile's
    recorded error (printed for every call, with the profile's exit status).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import sys

KIT_DIR = os.path.dirname(os.path.abspath(__file__))
NV_MAJOR = 195
NV_CTL_MINOR = 255
NV_MODESET_MINOR = 254
SECURE_BOOT_VAR = "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
MODULE_SIZES = {  # sizes of a real `lsmod` (lsmod-grep-nvidia_desktop_uvm-drm-modeset_595.71.05.txt); nvidia_peermem rendered
    "nvidia": 16297984, "nvidia_uvm": 2461696, "nvidia_modeset": 2187264, "nvidia_drm": 147456, "nvidia_peermem": 16384,
}
# /proc/devices of a Debian 12 machine without NVIDIA hardware (tests/fixtures/nvidia/proc-devices_debian12-vm_no-nvidia.txt)
BASE_CHAR_DEVICES = [(1, "mem"), (4, "/dev/vc/0"), (4, "tty"), (4, "ttyS"), (5, "/dev/tty"), (5, "/dev/console"), (5, "/dev/ptmx"),
                     (7, "vcs"), (10, "misc"), (13, "input"), (128, "ptm"), (136, "pts")]
BASE_BLOCK_DEVICES = [(7, "loop"), (259, "blkext")]
QUERY_FIELDS = {
    # field: (header, unit)
    "index": ("index", None),
    "name": ("name", None),
    "gpu_name": ("name", None),
    "uuid": ("uuid", None),
    "gpu_uuid": ("uuid", None),
    "pci.bus_id": ("pci.bus_id", None),
    "gpu_bus_id": ("pci.bus_id", None),
    "memory.total": ("memory.total", "MiB"),
    "persistence_mode": ("persistence_mode", None),
    "mig.mode.current": ("mig.mode.current", None),
    "driver_version": ("driver_version", None),
    "count": ("count", None),
}


class GpusimError(Exception):
    """A bad profile or an impossible request; the message says what and where."""


# --------------------------------------------------------------------------- profile

REQUIRED_KEYS = ("schema_version", "name", "gpus", "recordings", "driver_version", "kernel_module", "modules", "device_nodes", "kernel", "nvidia_smi")


def load_profile(path):
    try:
        with open(path, encoding="utf-8") as handle:
            profile = json.load(handle)
    except (OSError, ValueError) as error:
        raise GpusimError("%s: cannot read profile: %s" % (path, error)) from None
    missing = [key for key in REQUIRED_KEYS if key not in profile]
    if missing:
        raise GpusimError("%s: profile lacks %s" % (path, ", ".join(missing)))
    if profile["schema_version"] != 1:
        raise GpusimError("%s: schema_version is %r, only 1 is known" % (path, profile["schema_version"]))
    for number, gpu in enumerate(profile["gpus"]):
        for key in ("index", "minor", "name", "uuid", "pci_bus_id", "memory_total_mib"):
            if key not in gpu:
                raise GpusimError("%s: gpus[%d] lacks %s" % (path, number, key))
    used = set(_recordings_of(profile))
    if not used <= set(profile.get("recordings", [])):
        raise GpusimError("%s: recordings must list every recorded file the profile uses; missing %s"
                          % (path, ", ".join(sorted(used - set(profile.get("recordings", []))))))
    if profile.get("gpu_count", len(profile["gpus"])) != len(profile["gpus"]):
        raise GpusimError("%s: gpu_count is %s but %d GPUs are listed" % (path, profile["gpu_count"], len(profile["gpus"])))
    return profile


def recording(directory, name):
    path = os.path.join(directory, name)
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as error:
        raise GpusimError("recording %s: %s" % (path, error.strerror)) from None


# --------------------------------------------------------------------------- rendering


def render_proc_modules(profile):
    lines = []
    used_by = {"nvidia": [m for m in ("nvidia_uvm", "nvidia_modeset", "nvidia_peermem") if m in profile["modules"]],
               "nvidia_modeset": [m for m in ("nvidia_drm",) if m in profile["modules"]]}
    for name in reversed(profile["modules"]):
        users = used_by.get(name, [])
        lines.append("%s %d %d %s Live 0x0000000000000000 (POE)" % (
            name, MODULE_SIZES.get(name, 16384), len(users), "".join(user + "," for user in users) or "-"))
    return "\n".join(lines) + ("\n" if lines else "")


def render_proc_devices(profile):
    char = list(BASE_CHAR_DEVICES)
    if profile["kernel_module"].get("loaded"):
        char += [(NV_MAJOR, "nvidia-frontend")]
    if profile.get("uvm_major") and "nvidia_uvm" in profile["modules"]:
        char.append((profile["uvm_major"], "nvidia-uvm"))
    char.sort(key=lambda item: item[0])
    lines = ["Character devices:"] + ["%3d %s" % item for item in char]
    lines += ["", "Block devices:"] + ["%3d %s" % item for item in BASE_BLOCK_DEVICES]
    return "\n".join(lines) + "\n"


def render_proc_version(profile, recordings):
    module = profile["kernel_module"]
    if module.get("proc_version_recording"):
        return recording(recordings, module["proc_version_recording"])
    return ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  (simulated by gpusim)\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n" % module["version"])


def render_sys_module_version(profile, recordings):
    module = profile["kernel_module"]
    if module.get("sys_module_version_recording"):
        return recording(recordings, module["sys_module_version_recording"])
    return module["version"] + "\n"


def render_gpu_information(gpu):
    return ("Model: \t\t %s\nGPU UUID: \t %s\nBus Location: \t %s\nDevice Minor: \t %d\nGPU Excluded:\t No\n"
            % (gpu["name"], gpu["uuid"], kernel_pci(gpu["pci_bus_id"]), gpu["minor"]))


def kernel_pci(bus_id):
    """'00000000:18:00.0' -> '0000:18:00.0' (the kernel's spelling)."""
    domain, rest = bus_id.split(":", 1)
    return ("%04x:" % int(domain, 16)) + rest.lower()


def render_kernel_log(profile, recordings):
    parts = []
    log = profile.get("kernel_log") or {}
    for name in log.get("recordings", []):
        parts.append(recording(recordings, name).rstrip("\n") + "\n")
    if log.get("lines"):
        parts.append("\n".join(log["lines"]) + "\n")
    return "".join(parts)


def desired_tree(profile, recordings):
    """{relative path: ('file', text) | ('bytes', data) | ('char', major, minor, mode) | ('link', target) | ('dir',)}"""
    tree = {}
    module = profile["kernel_module"]
    kernel = profile["kernel"]
    tree["proc/sys/kernel/osrelease"] = ("file", kernel["release"] + "\n")
    tree["proc/cmdline"] = ("file", kernel["cmdline"] + "\n")
    tree["proc/modules"] = ("file", render_proc_modules(profile))
    tree["proc/devices"] = ("file", render_proc_devices(profile))
    tree["dev/kmsg"] = ("file", render_kernel_log(profile, recordings))
    tree["dev/char"] = ("dir",)
    if kernel.get("efi"):
        tree["sys/firmware/efi/efivars"] = ("dir",)
        if kernel.get("secure_boot") is not None:
            tree[SECURE_BOOT_VAR] = ("bytes", b"\x06\x00\x00\x00" + (b"\x01" if kernel["secure_boot"] else b"\x00"))
    library_dir = profile.get("library_dir", "usr/lib/x86_64-linux-gnu")
    tree["%s/libnvidia-ml.so.%s" % (library_dir, profile["driver_version"])] = ("file", "")
    tree["%s/libnvidia-ml.so.1" % library_dir] = ("link", "libnvidia-ml.so.%s" % profile["driver_version"])
    if module.get("loaded"):
        tree["proc/driver/nvidia/version"] = ("file", render_proc_version(profile, recordings))
        tree["sys/module/nvidia/version"] = ("file", render_sys_module_version(profile, recordings))
        for gpu in profile["gpus"]:
            tree["proc/driver/nvidia/gpus/%s/information" % kernel_pci(gpu["pci_bus_id"])] = ("file", render_gpu_information(gpu))
    for name in profile["modules"]:
        tree["sys/module/%s" % name] = ("dir",)
    nodes = profile["device_nodes"]
    wanted = []
    if nodes.get("gpu_nodes"):
        wanted.append(("nvidiactl", NV_MAJOR, NV_CTL_MINOR))
        wanted += [("nvidia%d" % gpu["minor"], NV_MAJOR, gpu["minor"]) for gpu in profile["gpus"]]
        if "nvidia_modeset" in profile["modules"]:
            wanted.append(("nvidia-modeset", NV_MAJOR, NV_MODESET_MINOR))
    if nodes.get("uvm_nodes"):
        if not profile.get("uvm_major"):
            raise GpusimError("profile %s: device_nodes.uvm_nodes needs uvm_major" % profile["name"])
        wanted += [("nvidia-uvm", profile["uvm_major"], 0), ("nvidia-uvm-tools", profile["uvm_major"], 1)]
    for name, major, minor in wanted:
        tree["dev/" + name] = ("char", major, minor, 0o666)
        if nodes.get("char_links"):
            tree["dev/char/%d:%d" % (major, minor)] = ("link", "../" + name)
    return tree


# --------------------------------------------------------------------------- build


def _current(path):
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISDIR(info.st_mode):
        return ("dir",)
    if stat.S_ISCHR(info.st_mode):
        return ("char", os.major(info.st_rdev), os.minor(info.st_rdev), stat.S_IMODE(info.st_mode))
    if stat.S_ISREG(info.st_mode):
        with open(path, "rb") as handle:
            return ("bytes", handle.read())
    return ("other",)


def _matches(current, wanted):
    if current is None:
        return False
    if wanted[0] == "file":
        return current[0] == "bytes" and current[1] == wanted[1].encode("utf-8")
    return current == wanted


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def _make(path, wanted):
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    kind = wanted[0]
    if kind == "dir":
        os.makedirs(path, exist_ok=True)
    elif kind in ("file", "bytes"):
        data = wanted[1].encode("utf-8") if kind == "file" else wanted[1]
        with open(path, "wb") as handle:
            handle.write(data)
    elif kind == "link":
        os.symlink(wanted[1], path)
    elif kind == "char":
        try:
            os.mknod(path, stat.S_IFCHR | wanted[3], os.makedev(wanted[1], wanted[2]))
        except PermissionError:
            raise GpusimError("mknod %s c %d %d: permission denied (the simulated host tree needs root with CAP_MKNOD)"
                              % (path, wanted[1], wanted[2])) from None
        os.chmod(path, wanted[3])


def stand_in_script():
    return ('#!/usr/bin/python3\n'
            '"""SIMULATED nvidia-smi of the gpufleet.node lab (gpusim): replays recorded outputs of real machines."""\n'
            'import os\nimport sys\n\n'
            'PREFIX = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))\n'
            'sys.path.insert(0, os.path.join(PREFIX, "lib"))\n'
            'import gpusim  # noqa: E402\n\n'
            'sys.exit(gpusim.nvidia_smi(PREFIX, sys.argv[1:]))\n')


def build(profile_path, prefix, check=False, reset=False, recordings=None):
    """Build (or check) the tree of one profile under prefix; return (changed, actions)."""
    profile = load_profile(profile_path)
    recordings = recordings or os.path.join(os.path.dirname(os.path.abspath(profile_path)), os.pardir, "recordings")
    recordings = os.path.normpath(recordings)
    root = os.path.join(prefix, "root")
    actions = []
    installed = os.path.join(prefix, "profile.json")
    previous = None
    if os.path.exists(installed):
        try:
            with open(installed, encoding="utf-8") as handle:
                previous = json.load(handle).get("name")
        except (OSError, ValueError):
            previous = "?"
    if os.path.exists(root) and (reset or previous != profile["name"]):
        actions.append("remove %s (%s)" % (root, "reset" if reset else "profile was %s" % previous))
        if not check:
            shutil.rmtree(root)
    wanted = {}
    for relative, spec in desired_tree(profile, recordings).items():
        wanted[os.path.join(root, relative)] = spec
    with open(profile_path, "rb") as handle:
        profile_bytes = handle.read()
    wanted[installed] = ("bytes", profile_bytes)
    wanted[os.path.join(prefix, "lib", "gpusim.py")] = ("bytes", open(os.path.abspath(__file__), "rb").read())
    wanted[os.path.join(prefix, "bin", "nvidia-smi")] = ("file", stand_in_script())
    for name in profile["recordings"]:
        wanted[os.path.join(prefix, "recordings", name)] = ("file", recording(recordings, name))
    fresh = bool(actions)
    for path in sorted(wanted, key=lambda item: (item.count(os.sep), item)):
        spec = wanted[path]
        current = None if fresh else _current(path)
        if _matches(current, spec):
            continue
        actions.append("%s %s" % ("create" if current is None else "replace", path))
        if check:
            continue
        if current is not None:
            _remove(path)
        _make(path, spec)
    if not check:
        os.chmod(os.path.join(prefix, "bin", "nvidia-smi"), 0o755)
    return bool(actions), actions


def _recordings_of(profile):
    module = profile["kernel_module"]
    smi = profile["nvidia_smi"]
    names = [module.get("proc_version_recording"), module.get("sys_module_version_recording")]
    names += list((smi.get("replay") or {}).values())
    if smi.get("error"):
        names.append(smi["error"]["recording"])
    names += (profile.get("kernel_log") or {}).get("recordings", [])
    return [name for name in names if name]


# --------------------------------------------------------------------------- nvidia-smi stand-in


def _out(text):
    sys.stdout.write(text)
    sys.stdout.flush()


def render_list(profile):
    lines = []
    for gpu in profile["gpus"]:
        lines.append("GPU %d: %s (UUID: %s)" % (gpu["index"], gpu["name"], gpu["uuid"]))
        for mig in gpu.get("mig_devices") or []:
            lines.append("  MIG %-12s Device %2d: (UUID: %s)" % (mig["profile"], mig["index"], mig["uuid"]))
    return "\n".join(lines) + "\n"


def _value(profile, gpu, field, units):
    if field == "index":
        return str(gpu["index"])
    if field in ("name", "gpu_name"):
        return gpu["name"]
    if field in ("uuid", "gpu_uuid"):
        return gpu["uuid"]
    if field in ("pci.bus_id", "gpu_bus_id"):
        return gpu["pci_bus_id"]
    if field == "memory.total":
        return "%d%s" % (gpu["memory_total_mib"], " MiB" if units else "")
    if field == "persistence_mode":
        return gpu.get("persistence_mode") or "[N/A]"
    if field == "mig.mode.current":
        return gpu.get("mig_mode") or "[N/A]"
    if field == "driver_version":
        return profile["driver_version"]
    if field == "count":
        return str(len(profile["gpus"]))
    raise KeyError(field)


def render_query(profile, fields, header, units, indices=None):
    gpus = [gpu for gpu in profile["gpus"] if indices is None or str(gpu["index"]) in indices]
    lines = []
    if header:
        columns = []
        for field in fields:
            name, unit = QUERY_FIELDS[field]
            columns.append("%s [%s]" % (name, unit) if unit and units else name)
        lines.append(", ".join(columns))
    for gpu in gpus:
        lines.append(", ".join(_value(profile, gpu, field, units) for field in fields))
    return "\n".join(lines) + "\n"


def nvidia_smi(prefix, argv):
    try:
        profile = load_profile(os.path.join(prefix, "profile.json"))
    except GpusimError as error:
        sys.stderr.write("gpusim nvidia-smi: %s\n" % error)
        return 255
    recordings = os.path.join(prefix, "recordings")
    smi = profile["nvidia_smi"]
    if smi.get("error"):
        _out(recording(recordings, smi["error"]["recording"]))
        return int(smi["error"].get("rc", 255))
    parser = argparse.ArgumentParser(prog="nvidia-smi", add_help=False)
    parser.add_argument("-L", "--list-gpus", action="store_true")
    parser.add_argument("--query-gpu")
    parser.add_argument("--format")
    parser.add_argument("-i", "--id")
    try:
        args, unknown = parser.parse_known_args(argv)
    except SystemExit:
        return 2
    if unknown:
        sys.stderr.write("gpusim nvidia-smi: arguments not simulated: %s\n" % " ".join(unknown))
        return 2
    replay = smi.get("replay") or {}
    if args.list_gpus:
        _out(recording(recordings, replay["list"]) if replay.get("list") else render_list(profile))
        return 0
    if args.query_gpu:
        fields = [field.strip() for field in args.query_gpu.split(",") if field.strip()]
        for field in fields:
            if field not in QUERY_FIELDS:
                _out('Field "%s" is not a valid field to query.\n\n' % field)
                return 2
        formats = [item.strip() for item in (args.format or "").split(",")]
        if "csv" not in formats:
            sys.stderr.write("gpusim nvidia-smi: only --format=csv[,noheader][,nounits] is simulated\n")
            return 2
        indices = set(args.id.split(",")) if args.id is not None else None
        if indices is not None and not any(str(gpu["index"]) in indices for gpu in profile["gpus"]):
            _out("No devices were found\n")
            return 6
        _out(render_query(profile, fields, "noheader" not in formats, "nounits" not in formats, indices))
        return 0
    if not argv:
        if replay.get("table"):
            _out(recording(recordings, replay["table"]))
            return 0
        sys.stderr.write("gpusim nvidia-smi: no recorded table for profile %s; use -L or --query-gpu\n" % profile["name"])
        return 3
    sys.stderr.write("gpusim nvidia-smi: arguments not simulated: %s\n" % " ".join(argv))
    return 2


# --------------------------------------------------------------------------- CLI


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["nvidia-smi"]:
        parser = argparse.ArgumentParser(prog="gpusim.py nvidia-smi")
        parser.add_argument("--prefix", required=True)
        known, rest = parser.parse_known_args(argv[1:])
        return nvidia_smi(known.prefix, rest)
    parser = argparse.ArgumentParser(prog="gpusim.py", description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build_parser = sub.add_parser("build", help="lay out the simulated host tree of a profile")
    build_parser.add_argument("--profile", required=True, help="profile JSON file")
    build_parser.add_argument("--prefix", required=True, help="directory to install into (tree in PREFIX/root)")
    build_parser.add_argument("--recordings", help="directory of recorded outputs (default: ../recordings next to the profile)")
    build_parser.add_argument("--check", action="store_true", help="report what would change, change nothing")
    build_parser.add_argument("--reset", action="store_true", help="rebuild the tree from scratch")
    args = parser.parse_args(argv)
    try:
        changed, actions = build(args.profile, args.prefix, check=args.check, reset=args.reset, recordings=args.recordings)
    except GpusimError as error:
        sys.stderr.write("gpusim: %s\n" % error)
        return 1
    print(json.dumps({"changed": changed, "actions": actions}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
