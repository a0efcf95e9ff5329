"""SIMULATED GPU host for the gpufleet.node lab (there is no GPU and no NVIDIA driver in the lab).

Standard library only (it runs on the lab's node containers with Debian's python3). The simulated
host has a KERNEL side (the nvidia module: ``/proc``, ``/sys``, ``/dev``, always simulated) and a
USER SPACE (libnvidia-ml): the profile's (``--userspace profile``, the default) or the node's real
installed driver packages (``--userspace host``: ``root/<library_dir>`` is a symlink to the real
``/<library_dir>``). State that outlives a build lives in ``PREFIX/state/``: ``settings.json`` (the
user-space mode), ``module_version`` (the loaded module after a reload) and ``holders/NAME``.

``gpusim.py build --profile PROFILE.json --prefix DIR [--userspace profile|host] [--check] [--reset]``
    Lays out a fake host tree for one profile under ``DIR/root`` and installs ``DIR/bin/nvidia-smi``
    (host-side stand-in), ``DIR/bin/gpusim`` (this CLI for DIR) and ``DIR/lib/container-nvidia-smi``
    (the stand-in the runtime mounts into containers). It only creates or corrects what the profile
    describes and never removes anything else, so a node fixed by ``nvidia_gpu_check
    fix_device_nodes=true`` stays fixed on the next build, and a reloaded module stays reloaded;
    ``--reset``, a different profile or another user-space mode rebuild the tree from scratch and
    clear the module and holder state. Prints ``{"changed": bool, "actions": [...]}``. Device nodes
    are real character devices (mknod), so it must run as root.

``gpusim.py reload|reboot|hold NAME [--pid PID]|release NAME|holders [--prefix DIR]``
    ``reload`` acts like ``modprobe -r nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe -a
    nvidia nvidia_uvm ...``: the loaded module becomes the installed user space's version (refused with
    modprobe's messages when no driver is installed, or while a holder is alive: then, as with the real
    modprobe, the users of nvidia are unloaded before modprobe stops at nvidia, and nvidia_uvm is gone).
    ``reboot`` drops the holders, then reloads. Holders are simulated driver clients (nvidia-persistenced,
    DCGM), which hold nvidia itself.

``gpusim.py modprobe [-r] [-a] MODULE...`` and ``DIR/bin/modprobe``
    SIMULATED modprobe of the nvidia modules, one module at a time as kmod does: ``-r`` unloads in the order
    given and stops at the first module in use (by a loaded user module or a holder); loading a user module
    loads nvidia first and fails with ``could not insert`` while the loaded nvidia is not the installed
    version (the installed nvidia_uvm does not fit it). State: ``state/modules_unloaded``.

``DIR/bin/nvidia-smi ARGS`` (which calls ``nvidia_smi(DIR, ARGS)``)
    With the host user space and the module loaded, runs the node's real ``/usr/bin/nvidia-smi`` on NVIDIA's mock
    NVML (``DIR/mocknvml``: ``mock_driver_root``, ``exec_real_nvidia_smi``); ``mock_nvml_refusal`` says where the
    mock cannot serve. There, and for the profile's own user space, a stand-in answers the nvidia-smi calls the
    collection makes: ``--query-gpu=...`` with
    ``--format=csv[,noheader][,nounits]`` (rendered from the profile), ``-L`` and the plain table
    (replayed verbatim from recordings when the profile names one, else rendered), NVIDIA's
    failures for a missing user space, an unloaded module and a driver/library version mismatch,
    and a profile's recorded error while the host is in the recorded situation.

``injection(prefix, selectors)`` and ``gpus(prefix)``
    Library API of the STAND-IN nvidia-container-runtime (tests/standins/toolkit): which GPUs and
    device nodes a container asking for ``selectors`` gets, with nvidia-container-cli's errors.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import stat
import subprocess
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
    "mig.mode.pending": ("mig.mode.pending", None),
    "pci.device_id": ("pci.device_id", None),
    "driver_version": ("driver_version", None),
    "count": ("count", None),
}


class GpusimError(Exception):
    """A bad profile or an impossible request; the message says what and where."""


class ModprobeError(GpusimError):
    """A refused module reload; the message is modprobe's own."""


USERSPACE_MODES = ("profile", "host")
NVC_UNKNOWN_DEVICE = "nvidia-container-cli: device error: %s: unknown device"
NVC_NO_LIBRARY = ("nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: "
                  "cannot open shared object file: no such file or directory")
NVC_NOT_LOADED = "nvidia-container-cli: initialization error: nvml error: driver not loaded"
NVC_MISMATCH = "nvidia-container-cli: initialization error: nvml error: driver/library version mismatch"
SMI_NO_LIBRARY = ("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA Display Driver "
                  "is properly installed and present in your system.\nPlease also try adding directory that contains libnvidia-ml.so "
                  "to your system PATH.\n")
SMI_NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA "
                 "driver is installed and running.\n")
SMI_MISMATCH = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: %s\n"
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")
# NVIDIA's mock NVML (k8s-test-infra, built by lab/gpufleet_lab/nvidia_builds.py): PREFIX/mocknvml holds the library
# and NVIDIA's GPU configurations; the real nvidia-smi of the node's driver packages runs on it (see nvidia_smi).
MOCK_NVML_DIR = "mocknvml"
MOCK_NVML_LIBRARY = "libnvidia-ml.so"
MOCK_NVML_MAX_GPUS = 8  # the mock's own limit (engine.MaxDevices)
MOCK_NVML_MODELS = (("H100", "h100"), ("H200", "h100"), ("A100", "a100"), ("L40S", "l40s"), ("T4", "t4"), ("B200", "b200"))
REAL_NVIDIA_SMI = "/usr/bin/nvidia-smi"
# The CUDA version a driver branch's libcuda supports, as nvidia-smi prints it (NVIDIA's CUDA Toolkit release notes,
# table "CUDA Toolkit and Corresponding Driver Versions").
CUDA_OF_BRANCH = {"535": (12, 2), "550": (12, 4), "560": (12, 6), "565": (12, 7), "570": (12, 8), "575": (12, 9),
                  "580": (13, 0)}
# The nvidia modules in the order modprobe -r takes them (users first), the module each one needs, and the inverse.
UNLOAD_ORDER = ("nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia_peermem", "nvidia")
DEPENDS_ON = {"nvidia_uvm": "nvidia", "nvidia_modeset": "nvidia", "nvidia_peermem": "nvidia", "nvidia_drm": "nvidia_modeset"}
USED_BY = {needed: tuple(user for user, its in DEPENDS_ON.items() if its == needed) for needed in set(DEPENDS_ON.values())}


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


# --------------------------------------------------------------------------- node state


def _state(prefix, *parts):
    return os.path.join(prefix, "state", *parts)


def _read_text(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _write_text(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


def userspace_mode(prefix):
    text = _read_text(_state(prefix, "settings.json"))
    return json.loads(text).get("userspace", "profile") if text else "profile"


def stored_module_version(prefix):
    text = _read_text(_state(prefix, "module_version"))
    return (text.strip() or None) if text else None


def unloaded_modules(prefix):
    """The profile's modules that a simulated modprobe -r unloaded (and nothing loaded again since)."""
    return (_read_text(_state(prefix, "modules_unloaded")) or "").split()


def _store_unloaded(prefix, names):
    names = [name for name in UNLOAD_ORDER if name in names]
    if names:
        _write_text(_state(prefix, "modules_unloaded"), "\n".join(names) + "\n")
    elif os.path.exists(_state(prefix, "modules_unloaded")):
        os.remove(_state(prefix, "modules_unloaded"))


def installed_profile(prefix, missing=NVC_NO_LIBRARY):
    """The profile a build installed under prefix; by default no kit at all reads as no driver installed."""
    path = os.path.join(prefix, "profile.json")
    if not os.path.exists(path):
        raise GpusimError(missing)
    return load_profile(path)


def _built(prefix):
    return installed_profile(prefix, missing="%s: no simulated host there (run gpusim.py build first)" % prefix)


def _version_key(version):
    return [int(part) if part.isdigit() else -1 for part in version.split(".")]


def library_version(directory):
    """Highest X of libnvidia-ml.so.X in directory or its nvidia/current (where Debian's libnvidia-ml1 puts it,
    behind an alternatives link), None when no user space is installed."""
    versions = []
    for where in (directory, os.path.join(directory, "nvidia", "current")):
        try:
            names = os.listdir(where)
        except OSError:
            continue
        versions += [name[len("libnvidia-ml.so."):] for name in names if name.startswith("libnvidia-ml.so.")]
    versions = [version for version in versions if version.count(".") >= 1]
    return max(versions, key=_version_key) if versions else None


def node_state(prefix, profile=None):
    """{"userspace": version or None, "module_loaded": bool, "module_version": version or None} of the simulated host now."""
    profile = profile or installed_profile(prefix)
    if userspace_mode(prefix) == "host":
        userspace = library_version(os.path.join(prefix, "root", _library_dir(profile)))
    else:
        userspace = profile["driver_version"]
    state = _versions(profile, userspace, stored_module_version(prefix), unloaded_modules(prefix))
    stored = json.loads(_read_text(_state(prefix, "mig.json")) or "{}")
    state["mig"] = dict((int(index), mig) for index, mig in stored.items())
    return state


def _versions(profile, userspace, reloaded, unloaded=()):
    """The node state of a user space, a reloaded module version (None: the profile's module, as the build left it)
    and the modules unloaded since."""
    loaded = (bool(reloaded) or bool(profile["kernel_module"].get("loaded"))) and "nvidia" not in unloaded
    return {"userspace": userspace, "module_loaded": loaded,
            "module_version": (reloaded or profile["kernel_module"]["version"]) if loaded else None,
            "modules_unloaded": list(unloaded)}


def in_recorded_situation(profile, state):
    """True while versions are the ones the profile's recordings were made with (no reload, same user space)."""
    return state["module_version"] == profile["kernel_module"]["version"] and state["userspace"] == profile["driver_version"]


def effective_profile(profile, state):
    """The profile as the host is now: user-space and module versions from state; version recordings only while they still hold."""
    current = json.loads(json.dumps(profile))
    current["driver_version"] = state["userspace"]
    module = current["kernel_module"]
    if state["module_version"] != module["version"]:
        module.update(proc_version_recording=None, sys_module_version_recording=None)
    module["loaded"] = state["module_loaded"]
    module["version"] = state["module_version"] or module["version"]
    current["modules"] = [name for name in current["modules"] if name not in state.get("modules_unloaded", ())]
    if state.get("mig"):  # the recordings show the partitions the profile was recorded with
        with_mig_state(current, state["mig"])
        current["nvidia_smi"]["replay"] = dict(current["nvidia_smi"].get("replay") or {}, list=None, table=None)
    if not in_recorded_situation(profile, state):
        current["nvidia_smi"] = dict(current["nvidia_smi"], error=None)
        if state["userspace"] != profile["driver_version"]:
            current["nvidia_smi"]["replay"] = dict(current["nvidia_smi"].get("replay") or {}, table=None)
    return current


def _library_dir(profile):
    return profile.get("library_dir", "usr/lib/x86_64-linux-gnu")


# --------------------------------------------------------------------------- holders


def _pid_alive(pid):
    return os.path.exists("/proc/%d" % pid)


def _holder_path(prefix, name):
    if not name or "/" in name or name.startswith("."):
        raise GpusimError("holder name %r: use a plain name such as nvidia-persistenced" % name)
    return _state(prefix, "holders", name)


def hold(prefix, name, pid=None):
    """Record a simulated driver client; with a pid it holds the module only while that process lives. Returns changed."""
    path = _holder_path(prefix, name)
    text = "" if pid is None else "%d\n" % pid
    if _read_text(path) == text:
        return False
    _write_text(path, text)
    return True


def release(prefix, name):
    path = _holder_path(prefix, name)
    if not os.path.exists(path):
        return False
    os.remove(path)
    return True


def holders(prefix):
    """[{"name": ..., "pid": int or None}] of the holders that still hold the module."""
    directory = _state(prefix, "holders")
    alive = []
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        text = (_read_text(os.path.join(directory, name)) or "").strip()
        pid = int(text) if text.isdigit() else None
        if pid is None or _pid_alive(pid):
            alive.append({"name": name, "pid": pid})
    return alive


# --------------------------------------------------------------------------- reload and reboot

MODULE_PATHS = ("proc/driver/nvidia/", "sys/module/", "proc/modules", "proc/devices")


def _loaded(profile, state):
    return [name for name in profile["modules"] if name not in state["modules_unloaded"]] if state["module_loaded"] else []


def _not_found(profile, name):
    return ModprobeError("modprobe: FATAL: Module %s not found in directory /lib/modules/%s" % (name, profile["kernel"]["release"]))


def _unload_one(prefix, profile, name):
    state = node_state(prefix, profile)
    loaded = _loaded(profile, state)
    if name not in loaded:
        raise ModprobeError("modprobe: FATAL: Module %s is not in kernel." % name)
    if any(user in loaded for user in USED_BY.get(name, ())) or (name == "nvidia" and holders(prefix)):
        raise ModprobeError("modprobe: FATAL: Module %s is in use." % name)
    _store_unloaded(prefix, state["modules_unloaded"] + [name])


def _load_one(prefix, profile, name):
    state = node_state(prefix, profile)
    if name not in profile["modules"] or state["userspace"] is None:
        raise _not_found(profile, name)
    if name in _loaded(profile, state):
        return
    if name in DEPENDS_ON:
        _load_one(prefix, profile, DEPENDS_ON[name])
        state = node_state(prefix, profile)
        if state["module_version"] != state["userspace"]:
            # the installed module was built for the installed driver, not for the nvidia still loaded
            raise ModprobeError("modprobe: ERROR: could not insert '%s': Invalid argument" % name)
    else:
        _write_text(_state(prefix, "module_version"), state["userspace"] + "\n")
    _store_unloaded(prefix, [unloaded for unloaded in state["modules_unloaded"] if unloaded != name])


def _render_modules(prefix, profile):
    """Lay out /proc, /sys/module and /proc/driver/nvidia for the modules loaded now; remove what is unloaded."""
    after = effective_profile(profile, node_state(prefix, profile))
    root = os.path.join(prefix, "root")
    tree = desired_tree(after, os.path.join(prefix, "recordings"))
    _apply(prefix, {os.path.join(root, path): spec for path, spec in tree.items() if path.startswith(MODULE_PATHS)})
    gone = ["sys/module/%s" % name for name in profile["modules"] if name not in after["modules"]]
    if not after["kernel_module"]["loaded"]:
        gone += ["proc/driver/nvidia", "sys/module/nvidia/version"]
    for path in (os.path.join(root, relative) for relative in gone):
        if os.path.lexists(path):
            _remove(path)


def modprobe(prefix, argv):
    """SIMULATED ``modprobe [-r] [-a] MODULE...`` of the nvidia modules (names with - or _)."""
    remove = bool({"-r", "--remove"} & set(argv))
    names, dirname, after_d = [], None, False
    for arg in argv:
        if after_d:
            dirname, after_d = arg, False
        elif arg in ("-d", "--dirname"):
            after_d = True
        elif arg.startswith(("-d", "--dirname=")):
            dirname = arg.split("=", 1)[1] if arg.startswith("--") else arg[2:]
        elif not arg.startswith("-"):
            names.append(arg.replace("-", "_"))
    if not remove and not {"-a", "--all"} & set(argv):
        names = names[:1]  # modprobe MODULE [parameters]
    profile = _built(prefix)
    if dirname is not None and os.path.realpath(dirname) != os.path.realpath(os.path.join(prefix, "root")):
        # -d names another root: the simulated host's modules are not there
        raise ModprobeError("modprobe: FATAL: Module %s not found in directory %s/lib/modules/%s"
                            % (names[0] if names else "", dirname.rstrip("/"), profile["kernel"]["release"]))
    try:
        for name in names:
            if name not in UNLOAD_ORDER:
                raise _not_found(profile, name)
            (_unload_one if remove else _load_one)(prefix, profile, name)
    finally:
        _render_modules(prefix, profile)
    if not remove:
        _follow_quietly(prefix)


def _follow_quietly(prefix):
    """follow_exposure, its refusal a warning: what changed the host succeeded, only NVIDIA's view of it lags."""
    try:
        follow_exposure(prefix)
    except GpusimError as error:
        sys.stderr.write("gpusim: NVIDIA's software still reads the previous state: %s\n" % error)


def reload(prefix):
    """modprobe -r the loaded nvidia modules, then load every module of the profile at the installed user space's
    version; returns the CLI's JSON object."""
    profile = _built(prefix)
    before = node_state(prefix, profile)
    if before["userspace"] is None:
        raise _not_found(profile, "nvidia")
    modprobe(prefix, ["-r"] + [name for name in UNLOAD_ORDER if name in _loaded(profile, before)])
    modprobe(prefix, ["-a"] + profile["modules"])
    after = node_state(prefix, profile)
    return {"changed": before["module_version"] != after["module_version"], "module_version_before": before["module_version"],
            "module_version": after["module_version"]}


def reboot(prefix):
    """After a reboot no driver client is left: drop the holders, then load the module of the installed user space;
    a pending MIG mode takes effect (a GPU whose mode changes loses its instances)."""
    _built(prefix)
    shutil.rmtree(_state(prefix, "holders"), ignore_errors=True)
    stored = json.loads(_read_text(_state(prefix, "mig.json")) or "{}")
    for mig in stored.values():
        if mig["pending"] != mig["mode"]:
            mig.update(mode=mig["pending"], instances=[])
    if stored:
        _write_text(_state(prefix, "mig.json"), json.dumps(stored, indent=1) + "\n")
    return reload(prefix)


# --------------------------------------------------------------------------- rendering


def render_proc_modules(profile):
    lines = []
    for name in reversed(profile["modules"]):
        users = [user for user in USED_BY.get(name, ()) if user in profile["modules"]]
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


def desired_tree(profile, recordings, host_library=None):
    """{relative path: ('file', text) | ('bytes', data) | ('char', major, minor, mode) | ('link', target) | ('dir',)}

    host_library: the real library directory the tree's library_dir links to (host user space)."""
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
    library_dir = _library_dir(profile)
    if host_library:
        tree[library_dir] = ("link", host_library)
    else:
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


def _wrapper_script(docstring, call):
    return ('#!/usr/bin/python3\n'
            '"""%s"""\n'
            'import os\nimport sys\n\n'
            'PREFIX = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))\n'
            'sys.path.insert(0, os.path.join(PREFIX, "lib"))\n'
            'import gpusim  # noqa: E402\n\n'
            'sys.exit(%s)\n' % (docstring, call))


def stand_in_script():
    return _wrapper_script("nvidia-smi of the gpufleet.node lab's SIMULATED GPU host (gpusim): NVIDIA's nvidia-smi on NVIDIA's "
                           "mock NVML where the mock serves, else recorded outputs of real machines.",
                           "gpusim.nvidia_smi(PREFIX, sys.argv[1:])")


def modprobe_script():
    return _wrapper_script("SIMULATED modprobe of the nvidia modules of the gpufleet.node lab (gpusim).",
                           "gpusim.main(['modprobe'] + sys.argv[1:], prefix=PREFIX)")


def cli_script():
    return _wrapper_script("SIMULATED GPU host of the gpufleet.node lab (gpusim): reload, reboot, hold, release, holders of this prefix.",
                           "gpusim.main(sys.argv[1:], prefix=PREFIX)")


def _kit_file(name):
    try:
        with open(os.path.join(KIT_DIR, name), "rb") as handle:
            return handle.read()
    except OSError as error:
        raise GpusimError("%s: %s (it belongs next to gpusim.py)" % (os.path.join(KIT_DIR, name), error.strerror)) from None


def _kit_mock_nvml(prefix):
    """NVIDIA's mock NVML of the kit (install.yml copies the lab's build there), wanted under PREFIX/mocknvml."""
    kit = os.path.join(KIT_DIR, MOCK_NVML_DIR)
    wanted = {}
    for directory, _dirs, names in os.walk(kit):
        for name in names:
            relative = os.path.relpath(os.path.join(directory, name), kit)
            with open(os.path.join(kit, relative), "rb") as handle:
                wanted[os.path.join(prefix, MOCK_NVML_DIR, relative)] = ("bytes", handle.read())
    return wanted


def _inside(prefix, path):
    """Guard for the host user-space link: never write through a link into the node's real directories."""
    real_prefix = os.path.realpath(prefix)
    return os.path.commonpath([real_prefix, os.path.realpath(os.path.dirname(path))]) == real_prefix


def _apply(prefix, wanted, fresh=False, check=False):
    """Create or correct every wanted path (shallow first); return the actions."""
    actions = []
    for path in sorted(wanted, key=lambda item: (item.count(os.sep), item)):
        spec = wanted[path]
        current = None if fresh else _current(path)
        if _matches(current, spec):
            continue
        actions.append("%s %s" % ("create" if current is None else "replace", path))
        if check:
            continue
        if not _inside(prefix, path):
            raise GpusimError("%s lies outside %s (through a symbolic link): not touched" % (path, prefix))
        if current is not None:
            _remove(path)
        _make(path, spec)
    return actions


def _previous_build(prefix):
    """(profile name, user-space mode) of the build already under prefix; name None when there is none."""
    try:
        with open(os.path.join(prefix, "profile.json"), encoding="utf-8") as handle:
            name = json.load(handle).get("name")
    except FileNotFoundError:
        name = None
    except (OSError, ValueError):
        name = "?"
    return name, userspace_mode(prefix)


def _rebuild_reason(prefix, profile, mode, reset):
    if not os.path.exists(os.path.join(prefix, "root")):
        return None
    previous, previous_mode = _previous_build(prefix)
    if reset:
        return "reset"
    if previous != profile["name"]:
        return "profile was %s" % previous
    if previous_mode != mode:
        return "user space was %s" % previous_mode
    return None


def default_recordings(profile_path):
    """The recorded outputs: the kit's recordings/ on a node (install.yml copies them there), else, in the
    repository, the project's fixtures of real NVIDIA outputs (tests/fixtures/nvidia), which they are."""
    kit = os.path.join(os.path.dirname(os.path.abspath(profile_path)), os.pardir)
    installed = os.path.join(kit, "recordings")
    return installed if os.path.isdir(installed) else os.path.join(kit, os.pardir, os.pardir, "tests", "fixtures", "nvidia")


def build(profile_path, prefix, check=False, reset=False, recordings=None, userspace=None, host_root="/"):
    """Build (or check) the tree of one profile under prefix; return (changed, actions).

    userspace: "profile" or "host" (None keeps the stored mode); host_root: where the host user space lives (tests)."""
    profile = load_profile(profile_path)
    if userspace not in (None,) + USERSPACE_MODES:
        raise GpusimError("--userspace is %r: one of %s" % (userspace, ", ".join(USERSPACE_MODES)))
    mode = userspace or userspace_mode(prefix)
    recordings = os.path.normpath(recordings or default_recordings(profile_path))
    root = os.path.join(prefix, "root")
    actions = []
    reason = _rebuild_reason(prefix, profile, mode, reset)
    if reason:
        actions.append("remove %s and %s (%s)" % (root, _state(prefix), reason))
        if not check:
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(_state(prefix), ignore_errors=True)
    host_library = os.path.join(host_root, _library_dir(profile)) if mode == "host" else None
    userspace_version = library_version(host_library) if host_library else profile["driver_version"]
    current = effective_profile(profile, _versions(profile, userspace_version, None if reason else stored_module_version(prefix),
                                                   () if reason else unloaded_modules(prefix)))
    wanted = {os.path.join(root, relative): spec for relative, spec in desired_tree(current, recordings, host_library).items()}
    with open(profile_path, "rb") as handle:
        wanted[os.path.join(prefix, "profile.json")] = ("bytes", handle.read())
    wanted[_state(prefix, "settings.json")] = ("file", json.dumps({"userspace": mode}) + "\n")
    wanted[os.path.join(prefix, "lib", "gpusim.py")] = ("bytes", open(os.path.abspath(__file__), "rb").read())
    wanted[os.path.join(prefix, "lib", "container-nvidia-smi")] = ("bytes", b"#!/usr/bin/python3\n" + _kit_file("container_smi.py"))
    wanted[os.path.join(prefix, "bin", "nvidia-smi")] = ("file", stand_in_script())
    wanted[os.path.join(prefix, "bin", "gpusim")] = ("file", cli_script())
    wanted[os.path.join(prefix, "bin", "modprobe")] = ("file", modprobe_script())
    for name in profile["recordings"]:
        wanted[os.path.join(prefix, "recordings", name)] = ("file", recording(recordings, name))
    if mode == "host":
        wanted.update(_kit_mock_nvml(prefix))
    actions += _apply(prefix, wanted, fresh=bool(reason), check=check)
    if not check:
        for executable in ("bin/nvidia-smi", "bin/gpusim", "bin/modprobe", "lib/container-nvidia-smi"):
            os.chmod(os.path.join(prefix, executable), 0o755)
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
            lines.append("  MIG %-11s Device %2d: (UUID: %s)" % (mig["profile"], mig["index"], mig["uuid"]))
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
    if field == "mig.mode.pending":
        return gpu.get("mig_mode_pending") or gpu.get("mig_mode") or "[N/A]"
    if field == "pci.device_id":
        return PCI_DEVICE_IDS.get(gpu["name"], "[N/A]")
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


def _major_minor(version):
    return ".".join(version.split(".")[:2])


def nvidia_smi(prefix, argv):
    try:
        profile = load_profile(os.path.join(prefix, "profile.json"))
    except GpusimError as error:
        sys.stderr.write("gpusim nvidia-smi: %s\n" % error)
        return 255
    recordings = os.path.join(prefix, "recordings")
    state = node_state(prefix, profile)
    profile = effective_profile(profile, state)
    smi = profile["nvidia_smi"]
    if smi.get("error"):
        _out(recording(recordings, smi["error"]["recording"]))
        return int(smi["error"].get("rc", 255))
    if state["userspace"] is None:
        _out(SMI_NO_LIBRARY)
        return 12
    if not state["module_loaded"]:
        _out(SMI_NO_DRIVER)
        return 9
    if mock_nvml_refusal(prefix, profile) is None:
        return exec_real_nvidia_smi(prefix, profile, state, argv)
    if state["userspace"] != state["module_version"]:
        _out(SMI_MISMATCH % _major_minor(state["userspace"]))
        return 18
    mig = mig_command(prefix, profile, argv)
    if mig is not None:
        _out(mig[0])
        return mig[1]
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


# --------------------------------------------------------------------------- MIG partitions (SIMULATED)
# The GPU's own MIG geometry, as the hardware has it (NVIDIA's A100/H100 placements: nvidia-smi mig -lgipp), and the
# nvidia-smi mig commands the collection runs. State: state/mig.json, {GPU index: {"mode", "pending", "instances"}};
# a GPU without an entry holds what its profile describes.

MIG_GEOMETRY = {  # profile ID: (compute slices, memory slices, placement starts)
    0: (7, 8, (0,)), 5: (4, 4, (0,)), 9: (3, 4, (0, 4)), 14: (2, 2, (0, 2, 4)), 15: (1, 2, (0, 2, 4, 6)),
    19: (1, 1, tuple(range(7))), 20: (1, 1, tuple(range(7))),
}
MIG_MEMORY_OF_SLICES = {  # GPU memory class (GB): memory slices -> the size in the profile name
    40: {1: "5gb", 2: "10gb", 4: "20gb", 8: "40gb"},
    80: {1: "10gb", 2: "20gb", 4: "40gb", 8: "80gb"},
}
CI_PROFILE_OF_SLICES = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}
PCI_DEVICE_IDS = {"NVIDIA A100-SXM4-40GB": "0x20B010DE", "NVIDIA A100-SXM4-80GB": "0x20B210DE",
                  "NVIDIA H100 80GB HBM3": "0x233010DE"}


def _mig_names(gpu):
    """{profile ID: name} of the GPU's model, or {} when its memory class is not simulated."""
    sizes = MIG_MEMORY_OF_SLICES.get(int(round(gpu["memory_total_mib"] / 1024.0 / 40.0)) * 40)
    if not sizes:
        return {}
    names = {pid: "%dg.%s" % (compute, sizes[memory]) for pid, (compute, memory, _starts) in MIG_GEOMETRY.items()}
    names[20] += "+me"
    return names


def _mig_place(instances, profile_id):
    """The start of a new GPU instance of profile_id among instances, or None: the highest free placement, as the
    driver put the first 3g.20gb of NVIDIA's example at 4:4."""
    compute, size, starts = MIG_GEOMETRY[profile_id]
    used = set(slot for gi in instances for slot in range(gi["start"], gi["start"] + gi["size"]))
    if sum(MIG_GEOMETRY[gi["profile_id"]][0] for gi in instances) + compute > 7:
        return None
    for start in sorted(starts, reverse=True):
        if not used & set(range(start, start + size)):
            return start
    return None


def _mig_from_profile(gpu):
    """A GPU's MIG state as its profile describes it: its MIG devices as GPU instances, each with its compute instance."""
    names = _mig_names(gpu)
    ids = dict((name, pid) for pid, name in names.items())
    instances = []
    for mig in sorted(gpu.get("mig_devices") or [], key=lambda m: -MIG_GEOMETRY[ids[m["profile"]]][1]):
        pid = ids[mig["profile"]]
        start = _mig_place(instances, pid)
        instances.append({"profile": mig["profile"], "profile_id": pid, "gi": len(instances) + 1, "start": start,
                          "size": MIG_GEOMETRY[pid][1], "ci": True, "uuid": mig["uuid"], "index": mig["index"]})
    mode = "Enabled" if gpu.get("mig_mode") == "Enabled" else "Disabled"
    return {"mode": mode, "pending": mode, "instances": instances}


def mig_state(prefix, profile):
    """{GPU index: {"mode", "pending", "instances"}} of every GPU of the profile now."""
    stored = json.loads(_read_text(_state(prefix, "mig.json")) or "{}")
    return dict((gpu["index"], stored.get(str(gpu["index"])) or _mig_from_profile(gpu)) for gpu in profile["gpus"])


def _store_mig(prefix, state):
    _write_text(_state(prefix, "mig.json"), json.dumps(dict((str(k), v) for k, v in state.items()), indent=1) + "\n")


def _mig_uuid(gpu, gi):
    digest = hashlib.sha256(("%s/%d" % (gpu["uuid"], gi)).encode()).hexdigest()
    return "MIG-%s-%s-%s-%s-%s" % (digest[:8], digest[8:12], digest[12:16], digest[16:20], digest[20:32])


def with_mig_state(profile, state):
    """The profile with each GPU's MIG mode and MIG devices (GPU instances holding a compute instance) as state says."""
    for gpu in profile["gpus"]:
        mig = state.get(gpu["index"])
        if mig is None:
            continue
        gpu["mig_mode"] = mig["mode"]
        gpu["mig_mode_pending"] = mig["pending"]
        held = [gi for gi in sorted(mig["instances"], key=lambda gi: gi["start"]) if gi["ci"]] if mig["mode"] == "Enabled" else []
        gpu["mig_devices"] = [{"index": position, "profile": gi["profile"], "uuid": gi.get("uuid") or _mig_uuid(gpu, gi["gi"])}
                              for position, gi in enumerate(held)]
    return profile


def _bus(gpu):
    return gpu["pci_bus_id"]


def _mig_table(title, header, rows, width):
    rule = "+" + "-" * width + "+"
    lines = [rule, "| %-*s|" % (width - 1, title)] + ["| %-*s|" % (width - 1, line) for line in header]
    lines.append("|" + "=" * width + "|")
    for row in rows:
        lines += ["| %-*s|" % (width - 1, row), rule]
    return "\n".join(lines) + "\n"


def render_gpu_instances(profile, state, indices):
    rows = ["%3d  MIG %-13s %4d %8d %10d:%d" % (gpu["index"], gi["profile"], gi["profile_id"], gi["gi"], gi["start"], gi["size"])
            for gpu in profile["gpus"] if gpu["index"] in indices and state[gpu["index"]]["mode"] == "Enabled"
            for gi in sorted(state[gpu["index"]]["instances"], key=lambda gi: gi["gi"])]
    if not rows:
        return None
    return _mig_table("GPU instances:", ["GPU   Name             Profile  Instance   Placement  ",
                                         "                         ID       ID       Start:Size "], rows, 55)


def render_compute_instances(profile, state, indices):
    rows = ["%3d %6d       MIG %-13s %5d %9d %10d:%d" % (gpu["index"], gi["gi"], gi["profile"],
                                                         CI_PROFILE_OF_SLICES[MIG_GEOMETRY[gi["profile_id"]][0]], 0, 0,
                                                         MIG_GEOMETRY[gi["profile_id"]][0])
            for gpu in profile["gpus"] if gpu["index"] in indices and state[gpu["index"]]["mode"] == "Enabled"
            for gi in sorted(state[gpu["index"]]["instances"], key=lambda gi: gi["gi"]) if gi["ci"]]
    if not rows:
        return None
    return _mig_table("Compute instances:", ["GPU     GPU       Name             Profile   Instance   Placement  ",
                                             "      Instance                       ID        ID       Start:Size ",
                                             "        ID                                                         "], rows, 68)


def _mig_busy(prefix):
    return ", ".join(holder["name"] for holder in holders(prefix))


def _mig_set_mode(prefix, profile, state, index, enable):
    gpu = [g for g in profile["gpus"] if g["index"] == index][0]
    mig = state[index]
    word = "Enabled" if enable else "Disabled"
    if not enable and mig["instances"]:
        return "Unable to disable MIG Mode for GPU %s: In use by another client\n" % _bus(gpu), 19
    busy = _mig_busy(prefix)
    mig["pending"] = word
    if busy:
        _store_mig(prefix, state)
        return ("Warning: MIG mode is in pending %s state for GPU %s:In use by another client\n%s is currently being used by "
                "one or more other processes (e.g. CUDA application or a monitoring application such as another instance "
                "of nvidia-smi). Please first kill all processes using the device and retry the command or reboot the "
                "system to make MIG mode effective.\nAll done.\n" % ("enable" if enable else "disable", _bus(gpu), _bus(gpu))), 0
    mig["mode"] = word
    _store_mig(prefix, state)
    return "%s MIG Mode for GPU %s\nAll done.\n" % (word, _bus(gpu)), 0


def _mig_destroy(prefix, state, index, what):
    mig = state[index]
    busy = _mig_busy(prefix)
    if what == "ci":
        held = [gi for gi in mig["instances"] if gi["ci"]]
        if not held:
            return "No compute instances found.\n", 6
        if busy:
            return "Unable to destroy compute instance ID  0 from GPU %2d GPU instance ID %2d: In use by another client\n" % (
                index, held[0]["gi"]), 19
        for gi in held:
            gi["ci"] = False
        _store_mig(prefix, state)
        return "".join("Successfully destroyed compute instance ID  0 from GPU %2d GPU instance ID %2d\n" % (index, gi["gi"])
                       for gi in held), 0
    if not mig["instances"]:
        return "No GPU instances found.\n", 6
    blocked = [gi for gi in mig["instances"] if gi["ci"]]
    if blocked or busy:
        return "Unable to destroy GPU instance ID %2d from GPU %2d: In use by another client\n" % (
            (blocked or mig["instances"])[0]["gi"], index), 19
    text = "".join("Successfully destroyed GPU instance ID %2d from GPU %2d\n" % (gi["gi"], index) for gi in mig["instances"])
    mig["instances"] = []
    _store_mig(prefix, state)
    return text, 0


def _mig_create(prefix, profile, state, index, requested, with_ci):
    gpu = [g for g in profile["gpus"] if g["index"] == index][0]
    mig = state[index]
    names = _mig_names(gpu)
    out = []
    for item in requested.split(","):
        item = item.strip()
        pid = int(item) if item.isdigit() else dict((name, p) for p, name in names.items()).get(item.replace("MIG ", ""))
        if mig["mode"] != "Enabled" or pid not in names:
            out.append("Unable to create a GPU instance on GPU %2d using profile %s: Not Supported\n"
                       "Failed to create GPU instances: Not Supported\n" % (index, item))
            return "".join(out), 3
        start = _mig_place(mig["instances"], pid)
        if start is None:
            out.append("Unable to create a GPU instance on GPU %2d using profile %s: Insufficient Resources\n"
                       "Failed to create GPU instances: Insufficient Resources\n" % (index, item))
            _store_mig(prefix, state)
            return "".join(out), 3
        gi = {"profile": names[pid], "profile_id": pid, "gi": max([g["gi"] for g in mig["instances"]] + [0]) + 1,
              "start": start, "size": MIG_GEOMETRY[pid][1], "ci": with_ci}
        mig["instances"].append(gi)
        out.append("Successfully created GPU instance ID %2d on GPU %2d using profile MIG %s (ID %2d)\n"
                   % (gi["gi"], index, gi["profile"], pid))
        if with_ci:
            out.append("Successfully created compute instance ID  0 on GPU %2d GPU instance ID %2d using profile MIG %s (ID %2d)\n"
                       % (index, gi["gi"], gi["profile"], CI_PROFILE_OF_SLICES[MIG_GEOMETRY[pid][0]]))
    _store_mig(prefix, state)
    return "".join(out), 0


def mig_command(prefix, profile, argv):
    """(text, rc) of the nvidia-smi MIG calls the collection makes: ``-i N -mig 0|1`` and ``mig [-i N] -lgi | -lci | -dci |
    -dgi | -cgi LIST [-C]``; None when argv is none of them."""
    parser = argparse.ArgumentParser(prog="nvidia-smi", add_help=False)
    parser.add_argument("-i", "--id")
    parser.add_argument("-mig", dest="mode", choices=("0", "1"))
    parser.add_argument("-lgi", action="store_true")
    parser.add_argument("-lci", action="store_true")
    parser.add_argument("-dci", action="store_true")
    parser.add_argument("-dgi", action="store_true")
    parser.add_argument("-cgi")
    parser.add_argument("-C", action="store_true")
    subcommand = argv[:1] == ["mig"]
    if not subcommand and "-mig" not in argv:
        return None
    args, unknown = parser.parse_known_args(argv[1:] if subcommand else argv)
    if unknown:
        return "gpusim nvidia-smi: MIG arguments not simulated: %s\n" % " ".join(unknown), 2
    state = mig_state(prefix, profile)
    indices = [int(args.id)] if args.id is not None else sorted(state)
    if any(index not in state for index in indices):
        return "No devices were found\n", 6
    if args.mode is not None and not subcommand:
        return _mig_set_mode(prefix, profile, state, indices[0], args.mode == "1")
    if args.lgi or args.lci:
        render = render_gpu_instances if args.lgi else render_compute_instances
        if not any(state[index]["mode"] == "Enabled" for index in indices):
            return "No MIG-enabled devices found.\n", 6
        text = render(profile, state, indices)
        return (text, 0) if text else ("No %s instances found.\n" % ("GPU" if args.lgi else "compute"), 6)
    if args.id is None:
        return "gpusim nvidia-smi: the simulated MIG changes need -i N\n", 2
    if args.dci or args.dgi:
        return _mig_destroy(prefix, state, indices[0], "ci" if args.dci else "gi")
    if args.cgi:
        return _mig_create(prefix, profile, state, indices[0], args.cgi, args.C)
    return "gpusim nvidia-smi: MIG arguments not simulated: %s\n" % " ".join(argv), 2


# --------------------------------------------------------------------------- NVIDIA's nvidia-smi on NVIDIA's mock NVML


def _mock_model(profile):
    names = {gpu["name"] for gpu in profile["gpus"]}
    for marker, model in MOCK_NVML_MODELS:
        if names and all(marker in name for name in names):
            return model
    return None


def mock_nvml_refusal(prefix, profile):
    """None when NVIDIA's nvidia-smi on NVIDIA's mock NVML answers for this host; else why the replay stand-in does."""
    if userspace_mode(prefix) != "host":
        return "the profile's user space is its recordings"
    if not os.path.isfile(REAL_NVIDIA_SMI):
        return "no nvidia-smi is installed at %s" % REAL_NVIDIA_SMI
    if not os.path.isfile(os.path.join(prefix, MOCK_NVML_DIR, MOCK_NVML_LIBRARY)):
        return "no mock NVML under %s" % os.path.join(prefix, MOCK_NVML_DIR)
    if os.path.exists(_state(prefix, "mig.json")):
        return "the mock NVML enumerates no MIG devices"
    return mock_profile_refusal(profile)


def mock_profile_refusal(profile):
    """None when NVIDIA's mock NVML can simulate the GPUs of ``profile``; else why not."""
    if any(gpu.get("mig_devices") for gpu in profile["gpus"]):
        return "the mock NVML enumerates no MIG devices"
    if len(profile["gpus"]) > MOCK_NVML_MAX_GPUS:
        return "the mock NVML simulates at most %d GPUs" % MOCK_NVML_MAX_GPUS
    if len({(gpu.get("persistence_mode"), gpu.get("mig_mode")) for gpu in profile["gpus"]}) > 1:
        return "the mock NVML sets persistence and MIG mode for all GPUs alike"
    if _mock_model(profile) is None:
        return "the mock NVML has no configuration for %s" % ", ".join(sorted({gpu["name"] for gpu in profile["gpus"]}))
    return None


def linux_bus_id(bus_id):
    """The canonical sysfs form DDDD:BB:DD.F the mock wants (profiles keep NVML's 8-digit domain)."""
    domain, rest = bus_id.split(":", 1)
    return "%04x:%s" % (int(domain, 16), rest)


def render_mock_config(base, profile, state):
    """NVIDIA's configuration of the profile's GPU model, set to this host: GPUs, the loaded module's version (what
    the kernel side reports), the user space's NVML and CUDA versions."""
    config = json.loads(json.dumps(base))
    system = config.setdefault("system", {})
    system.update(driver_version=state["module_version"], nvml_version="12." + state["userspace"])
    cuda = CUDA_OF_BRANCH.get(state["userspace"].split(".")[0])
    if cuda:
        system.update(cuda_version="%d.%d" % cuda, cuda_version_major=cuda[0], cuda_version_minor=cuda[1])
    gpus = sorted(profile["gpus"], key=lambda gpu: gpu["index"])
    defaults = config.setdefault("device_defaults", {})
    defaults["persistence_mode"] = "enabled" if gpus[0].get("persistence_mode") == "Enabled" else "disabled"
    mig = "enabled" if gpus[0].get("mig_mode") == "Enabled" else "disabled"
    defaults["mig"] = dict(defaults.get("mig") or {}, mode_current=mig, mode_pending=mig)
    reserved = (defaults.get("memory") or {}).get("reserved_bytes", 0)
    config["devices"] = []
    for gpu in gpus:
        total = gpu["memory_total_mib"] * 1024 * 1024
        device = {"index": gpu["index"], "uuid": gpu["uuid"], "minor_number": gpu["minor"], "name": gpu["name"],
                  "pci": {"bus_id": linux_bus_id(gpu["pci_bus_id"])},
                  "memory": {"total_bytes": total, "reserved_bytes": reserved, "free_bytes": total - reserved,
                             "used_bytes": 0}}
        if gpu.get("failure"):
            device["failure"] = gpu["failure"]
        config["devices"].append(device)
    return config


def mock_config(mock_dir, profile, state):
    """The mock's configuration for this host: NVIDIA's configuration of the profile's GPU model (mock_dir/configs)
    rendered by render_mock_config."""
    with open(os.path.join(mock_dir, "configs", _mock_model(profile) + ".json"), encoding="utf-8") as handle:
        return render_mock_config(json.load(handle), profile, state)


def _replace_file(path, data):
    """Write data to path through a rename (a concurrent nvidia-smi reads the old or the new file, never half)."""
    try:
        with open(path, "rb") as handle:
            if handle.read() == data:
                return
    except FileNotFoundError:
        pass
    staged = "%s.%d" % (path, os.getpid())
    with open(staged, "wb") as handle:
        handle.write(data)
    os.replace(staged, path)


def mock_driver_root(prefix, profile, state):
    """PREFIX/mocknvml/driver/<user space version>: the mock under the installed library's file name (its version
    is the file name's, as with the driver's library) and its configuration where the mock looks for it
    (<driver root>/config/config.yaml, two directories above the library). Returns the library directory."""
    mock = os.path.join(prefix, MOCK_NVML_DIR)
    root = os.path.join(mock, "driver", state["userspace"])
    library_dir = os.path.join(root, "usr", "lib64")
    os.makedirs(library_dir, exist_ok=True)
    os.makedirs(os.path.join(root, "config"), exist_ok=True)
    library = os.path.join(library_dir, "libnvidia-ml.so." + state["userspace"])
    source = os.path.join(mock, MOCK_NVML_LIBRARY)
    if not os.path.exists(library) or not os.path.samefile(library, source):
        staged = "%s.%d" % (library, os.getpid())
        os.link(source, staged)  # a hard link: the mock finds its configuration from its own path in /proc/self/maps
        os.replace(staged, library)
    soname = os.path.join(library_dir, "libnvidia-ml.so.1")
    if os.path.islink(soname) and os.readlink(soname) != os.path.basename(library):
        os.unlink(soname)
    if not os.path.islink(soname):
        os.symlink(os.path.basename(library), soname)
    config = mock_config(mock, profile, state)
    _replace_file(os.path.join(root, "config", "config.yaml"), (json.dumps(config, indent=1) + "\n").encode())
    return library_dir


def exec_real_nvidia_smi(prefix, profile, state, argv):
    """Run the node's real nvidia-smi (Debian's package) with NVIDIA's mock NVML in the driver library's place.

    The mock refuses a loaded module of another version than the installed library (the lab's patch), so a
    driver/library mismatch is nvidia-smi's own message too."""
    library_dir = mock_driver_root(prefix, profile, state)
    env = dict(os.environ, LD_LIBRARY_PATH=library_dir)
    env.pop("MOCK_NVML_CONFIG", None)
    sys.stdout.flush()
    os.execve(REAL_NVIDIA_SMI, [REAL_NVIDIA_SMI] + list(argv), env)


MOCK_CONFIG_FOOTER = b"\n#gpusim-mock-nvml-config:"  # lab patch 0002 of the mock (embedded_config.go)


def library_with_config(library, config):
    """The mock library carrying its configuration (the lab's patch 0002): the JSON after the ELF image, then the
    footer and the JSON's length in 10 digits. NVIDIA's toolkit mounts the library into containers, not files beside it."""
    data = (json.dumps(config, indent=1) + "\n").encode()
    return library + data + MOCK_CONFIG_FOOTER + b"%010d\n" % len(data)


def carried_mock_library(mock_dir, profile, state):
    """NVIDIA's mock library (mock_dir) carrying its configuration for this host."""
    with open(os.path.join(mock_dir, MOCK_NVML_LIBRARY), "rb") as handle:
        return library_with_config(handle.read(), mock_config(mock_dir, profile, state))


def installed_library_file(prefix, profile, version):
    """The driver package's own libnvidia-ml.so.<version> on the host (Debian's is in nvidia/current, behind its
    alternatives links), None when it is not installed."""
    directory = os.path.join(prefix, "root", _library_dir(profile))
    for where in (os.path.join(directory, "nvidia", "current"), directory):
        path = os.path.join(where, "libnvidia-ml.so." + version)
        if os.path.isfile(path) and not os.path.islink(path):
            return os.path.realpath(path)
    return None


def expose_to_nvidia_software(prefix, dev_dir="/dev"):
    """What NVIDIA's software on the host reads of the GPU, made from the simulation: NVIDIA's mock NVML in the
    installed driver library's own place (the toolkit looks for libnvidia-ml.so.1 beside libcuda, not in the linker's
    order), carrying the node's configuration (patch 0002), and the device nodes in ``dev_dir``. Returns
    {"changed", "library", "device_nodes"}. Raises GpusimError while the module is unloaded or the mock cannot serve."""
    profile = installed_profile(prefix)
    state = node_state(prefix, profile)
    refusal = mock_nvml_refusal(prefix, profile)
    if refusal:
        raise GpusimError("NVIDIA's mock NVML cannot stand for this host's library: %s" % refusal)
    if not state["module_loaded"]:
        raise GpusimError("the simulated nvidia module is not loaded: the driver's own library stays (gpusim reload)")
    path = installed_library_file(prefix, profile, state["userspace"])
    if path is None:
        raise GpusimError("no libnvidia-ml.so.%s is installed" % state["userspace"])
    wanted = carried_mock_library(os.path.join(prefix, MOCK_NVML_DIR), profile, state)
    with open(path, "rb") as handle:
        changed = handle.read() != wanted
    _replace_file(path, wanted)
    nodes = []
    root_dev = os.path.join(prefix, "root", "dev")
    for name in sorted(os.listdir(root_dev)):
        node = _current(os.path.join(root_dev, name))
        if name.startswith("nvidia") and node and node[0] == "char":
            target = os.path.join(dev_dir, name)
            if not _matches(_current(target), node):
                if os.path.lexists(target):
                    _remove(target)
                _make(target, node)
                changed = True
            nodes.append(target)
    _write_text(_state(prefix, EXPOSED_MARK), "1\n")
    return {"changed": changed, "library": path, "device_nodes": nodes}


EXPOSED_MARK = "exposed"  # state file: this host's GPUs are exposed to NVIDIA's software, and later changes follow


def follow_exposure(prefix, enable=False, dev_dir="/dev"):
    """Expose again on a host whose GPUs are exposed to NVIDIA's software (``enable`` marks it so), after what changes
    what NVIDIA's software reads: a module load (a new version), a dpkg run (a new library file). Returns expose's
    object, or None where the host is not marked, no module is loaded or no library is installed: nothing to stand
    in for yet. A module unload leaves the mock in place (real device nodes and libraries outlive an rmmod too)."""
    if enable:
        _write_text(_state(prefix, EXPOSED_MARK), "1\n")
    if not os.path.exists(_state(prefix, EXPOSED_MARK)):
        return None
    profile = installed_profile(prefix)
    state = node_state(prefix, profile)
    if not state["module_loaded"] or not state["userspace"]:
        return None
    if installed_library_file(prefix, profile, state["userspace"]) is None:
        return None
    return expose_to_nvidia_software(prefix, dev_dir)


DRIVER_ROOT_LIBRARIES = "usr/lib/x86_64-linux-gnu"


def _extract_debs(debs, into):
    for deb in debs:
        run = subprocess.run(["dpkg-deb", "-x", deb, into], capture_output=True, text=True, check=False)
        if run.returncode != 0:
            raise GpusimError("dpkg-deb -x %s: %s" % (deb, run.stderr.strip()))


def lay_driver_root(root, mock_dir, profile, gpu_count, version, debs):
    """A driver root as NVIDIA's driver container lays it for the GPU Operator (``/run/nvidia/driver``): the driver's
    user space from Debian's packages ``debs`` (libcuda, nvidia-smi) with its libraries in ``usr/lib/x86_64-linux-gnu``,
    NVIDIA's mock NVML in ``libnvidia-ml.so.<version>``'s place carrying the profile's first ``gpu_count`` GPUs at
    ``version``, their device nodes and the loaded module's version. SIMULATED: the GPUs, the kernel module and the
    NVML library. A root laid before is replaced whole. Returns the files laid, relative to ``root``."""
    gpus = sorted(profile["gpus"], key=lambda gpu: gpu["index"])[:gpu_count]
    shutil.rmtree(root, ignore_errors=True)
    with_tree = os.path.join(root, ".debs")
    os.makedirs(with_tree)
    _extract_debs(debs, with_tree)
    libraries = os.path.join(root, DRIVER_ROOT_LIBRARIES)
    os.makedirs(libraries)
    os.makedirs(os.path.join(root, "usr", "bin"))
    for directory, _dirs, files in os.walk(with_tree):
        for name in files:
            source = os.path.join(directory, name)
            if name == "nvidia-smi":  # Debian's: usr/lib/nvidia/current/nvidia-smi, linked by its alternatives
                shutil.copy2(source, os.path.join(root, "usr", "bin", name))
            elif name.startswith("libcuda.so.") and name.count(".") > 2 and not os.path.islink(source):
                shutil.copy2(source, os.path.join(libraries, name))
    shutil.rmtree(with_tree)
    with open(os.path.join(libraries, "libnvidia-ml.so." + version), "wb") as handle:
        handle.write(carried_mock_library(mock_dir, dict(profile, gpus=gpus), {"module_version": version, "userspace": version}))
    for name in ("libnvidia-ml.so.", "libcuda.so."):
        if os.path.exists(os.path.join(libraries, name + version)):
            os.symlink(name + version, os.path.join(libraries, name + "1"))
    os.makedirs(os.path.join(root, "sys", "module", "nvidia"))
    with open(os.path.join(root, "sys", "module", "nvidia", "version"), "w", encoding="utf-8") as handle:
        handle.write(version + "\n")
    nodes = [("nvidiactl", NV_MAJOR, 255)] + [("nvidia%d" % gpu["minor"], NV_MAJOR, gpu["minor"]) for gpu in gpus]
    for name, major, minor in nodes:
        _make(os.path.join(root, "dev", name), ("char", major, minor, 0o666))
    return sorted(os.path.relpath(os.path.join(directory, name), root)
                  for directory, dirs, files in os.walk(root) for name in files + [d for d in dirs if os.path.islink(os.path.join(directory, d))])


# --------------------------------------------------------------------------- API of the runtime stand-in


def _nvml_init(prefix):
    """The profile as the host is now, or nvidia-container-cli's initialization error (in the order it meets them)."""
    profile = installed_profile(prefix)
    state = node_state(prefix, profile)
    if state["userspace"] is None:
        raise GpusimError(NVC_NO_LIBRARY)
    if not state["module_loaded"]:
        raise GpusimError(NVC_NOT_LOADED)
    if state["userspace"] != state["module_version"]:
        raise GpusimError(NVC_MISMATCH)
    return effective_profile(profile, state)


def _gpu_view(gpu, mig_devices=None):
    migs = (gpu.get("mig_devices") or []) if mig_devices is None else mig_devices
    return {"index": gpu["index"], "minor": gpu["minor"], "name": gpu["name"], "uuid": gpu["uuid"],
            "pci_bus_id": gpu["pci_bus_id"], "memory_total_mib": gpu["memory_total_mib"],
            "mig_mode": "Enabled" if gpu.get("mig_mode") == "Enabled" else "Disabled",
            "mig_devices": [{"index": mig["index"], "profile": mig["profile"], "uuid": mig["uuid"]} for mig in migs]}


def gpus(prefix):
    """The node's GPUs as NVML sees them now: [{"index", "minor", "name", "uuid", "pci_bus_id", "memory_total_mib",
    "mig_mode", "mig_devices": [{"index", "profile", "uuid"}]}]; raises GpusimError with nvidia-container-cli's init errors."""
    return [_gpu_view(gpu) for gpu in sorted(_nvml_init(prefix)["gpus"], key=lambda gpu: gpu["index"])]


def _find_device(profile, name):
    """(gpu, mig or None) named by an index, "<gpu>:<mig>", a GPU-/MIG- UUID; (None, None) when nothing is."""
    for gpu in profile["gpus"]:
        migs = (gpu.get("mig_devices") or []) if gpu.get("mig_mode") == "Enabled" else []
        if name in (str(gpu["index"]), gpu["uuid"]):
            return gpu, None
        for mig in migs:
            if name in ("%d:%d" % (gpu["index"], mig["index"]), mig["uuid"]):
                return gpu, mig
    return None, None


def _select(profile, selectors):
    """{host index: None (the whole GPU) or [MIG devices]} for the selectors."""
    chosen = {}
    for selector in selectors:
        name = selector.strip()
        if name == "all":
            chosen.update((gpu["index"], None) for gpu in profile["gpus"])
            continue
        gpu, mig = _find_device(profile, name)
        if gpu is None:
            raise GpusimError(NVC_UNKNOWN_DEVICE % name)
        if mig is None:
            chosen[gpu["index"]] = None
        elif chosen.setdefault(gpu["index"], []) is not None and mig not in chosen[gpu["index"]]:
            chosen[gpu["index"]] = sorted(chosen[gpu["index"]] + [mig], key=lambda item: item["index"])
    return chosen


def _device_node(root, name, major, minor):
    return {"path": "/dev/" + name, "host_path": os.path.join(root, "dev", name), "major": major, "minor": minor}


def _control_nodes(root):
    nodes = []
    for name in CONTROL_NODES:
        current = _current(os.path.join(root, "dev", name))
        if current and current[0] == "char":
            nodes.append(_device_node(root, name, current[1], current[2]))
    return nodes


def injection(prefix, selectors):
    """What a container asking for selectors (NVIDIA_VISIBLE_DEVICES / volume-mount / CDI device names) gets:
    {"payload": what its NVML sees (/run/gpusim/visible.json), "device_nodes": [{"path", "host_path", "major", "minor"}]}.
    Raises GpusimError with nvidia-container-cli's message for an unknown device or a driver that cannot initialize."""
    profile = _nvml_init(prefix)
    chosen = _select(profile, selectors)
    selected = sorted((gpu for gpu in profile["gpus"] if gpu["index"] in chosen), key=lambda gpu: gpu["index"])
    payload = {"simulated": True, "driver_version": profile["driver_version"],
               "gpus": [_gpu_view(gpu, chosen[gpu["index"]]) for gpu in selected]}
    root = os.path.join(prefix, "root")
    nodes = _control_nodes(root) + [_device_node(root, "nvidia%d" % gpu["minor"], NV_MAJOR, gpu["minor"]) for gpu in selected]
    return {"payload": payload, "device_nodes": nodes}


# --------------------------------------------------------------------------- CLI


def _state_command(args):
    if args.command == "hold":
        return {"changed": hold(args.prefix, args.name, args.pid)}
    if args.command == "release":
        return {"changed": release(args.prefix, args.name)}
    if args.command == "holders":
        return holders(args.prefix)
    return reload(args.prefix) if args.command == "reload" else reboot(args.prefix)


def _parser(prefix):
    parser = argparse.ArgumentParser(prog="gpusim", description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build_parser = sub.add_parser("build", help="lay out the simulated host tree of a profile")
    build_parser.add_argument("--profile", required=True, help="profile JSON file")
    build_parser.add_argument("--prefix", required=prefix is None, default=prefix, help="directory to install into (tree in PREFIX/root)")
    build_parser.add_argument("--recordings", help="directory of recorded outputs (default: ../recordings next to the profile)")
    build_parser.add_argument("--userspace", choices=USERSPACE_MODES,
                              help="user space (libnvidia-ml): the profile's, or the node's installed driver packages (default: as stored, else profile)")
    build_parser.add_argument("--host-root", default="/", help=argparse.SUPPRESS)
    build_parser.add_argument("--check", action="store_true", help="report what would change, change nothing")
    build_parser.add_argument("--reset", action="store_true", help="rebuild the tree from scratch, clear module and holder state")
    state_help = {"reload": "unload and load the nvidia modules (the installed user space's version)",
                  "reboot": "drop the holders, then reload", "hold": "record a simulated driver client",
                  "release": "forget a simulated driver client", "holders": "list the live driver clients (JSON)"}
    for command, text in state_help.items():
        state_parser = sub.add_parser(command, help=text)
        state_parser.add_argument("--prefix", default=prefix or "/opt/gpusim", help="the simulated host (default %(default)s)")
        if command in ("hold", "release"):
            state_parser.add_argument("name")
        if command == "hold":
            state_parser.add_argument("--pid", type=int, help="the client holds the module only while this process lives")
    return parser


def _driver_root_command(argv):
    parser = argparse.ArgumentParser(prog="gpusim.py driver-root", description=lay_driver_root.__doc__.split(". ", maxsplit=1)[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--mock-dir", required=True, help="NVIDIA's mock NVML build (libnvidia-ml.so, configs/)")
    parser.add_argument("--profile", required=True, help="profile JSON file")
    parser.add_argument("--gpus", type=int, required=True, help="how many of the profile's GPUs")
    parser.add_argument("--version", required=True, help="the driver version (library and loaded module)")
    parser.add_argument("--debs", nargs="+", required=True, help="Debian's driver packages (libcuda1, nvidia-smi)")
    args = parser.parse_args(argv)
    try:
        profile = load_profile(args.profile)
        if _mock_model(profile) is None:
            raise GpusimError("the mock NVML has no configuration for the GPUs of %s" % args.profile)
        laid = lay_driver_root(args.root, args.mock_dir, profile, args.gpus, args.version, args.debs)
    except GpusimError as error:
        sys.stderr.write("gpusim: %s\n" % error)
        return 1
    print(json.dumps({"changed": True, "root": args.root, "files": laid}))
    return 0


def main(argv=None, prefix=None):
    """The CLI; prefix: the default --prefix (the bin/gpusim wrapper passes its own)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["nvidia-smi"]:
        parser = argparse.ArgumentParser(prog="gpusim.py nvidia-smi")
        parser.add_argument("--prefix", required=prefix is None, default=prefix)
        known, rest = parser.parse_known_args(argv[1:])
        return nvidia_smi(known.prefix, rest)
    if argv[:1] == ["expose"]:
        parser = argparse.ArgumentParser(prog="gpusim.py expose", description=expose_to_nvidia_software.__doc__.split(": ", maxsplit=1)[0])
        parser.add_argument("--prefix", required=prefix is None, default=prefix)
        parser.add_argument("--follow", action="store_true",
                            help="only where the host is marked exposed, and only when there is something to expose "
                                 "(after a dpkg run); a refusal is a warning")
        parser.add_argument("--enable", action="store_true",
                            help="mark the host exposed: later module loads and --follow expose again; expose now if possible")
        known = parser.parse_args(argv[1:])
        if known.follow:
            _follow_quietly(known.prefix)
            return 0
        try:
            print(json.dumps(follow_exposure(known.prefix, enable=True) if known.enable
                             else expose_to_nvidia_software(known.prefix)))
        except GpusimError as error:
            sys.stderr.write("gpusim: %s\n" % error)
            return 1
        return 0
    if argv[:1] == ["driver-root"]:
        return _driver_root_command(argv[1:])
    if argv[:1] == ["modprobe"]:
        try:
            modprobe(prefix or "/opt/gpusim", argv[1:])
        except GpusimError as error:
            sys.stderr.write("%s\n" % error)
            return 1
        return 0
    args = _parser(prefix).parse_args(argv)
    try:
        if args.command == "build":
            changed, actions = build(args.profile, args.prefix, check=args.check, reset=args.reset, recordings=args.recordings,
                                     userspace=args.userspace, host_root=args.host_root)
            result = {"changed": changed, "actions": actions}
        else:
            result = _state_command(args)
    except ModprobeError as error:
        sys.stderr.write("%s\n" % error)
        return 1
    except GpusimError as error:
        sys.stderr.write("gpusim: %s\n" % error)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
