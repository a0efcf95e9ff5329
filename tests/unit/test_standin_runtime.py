"""The STAND-IN nvidia-container-runtime (tests/standins/toolkit): NVIDIA's rules (toolkit v1.17.8),
run for real in a subprocess against a temporary OCI bundle, a SIMULATED GPU host built with gpusim
and a fake runc on PATH that records the arguments it was exec'd with."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpusim_helpers import FIXTURES, build_profile, install_host_userspace, profile_data, requires_mknod

STANDINS = Path(__file__).resolve().parents[2] / "tests" / "standins"
VERSION = "1.17.8-1"
A100 = profile_data("a100x2-mig-1g10gb")
GPU0, GPU1 = A100["gpus"]
DEFAULT_CAPS = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID",
                "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"]
IGNORED_WARNING = ("Ignoring devices specified in NVIDIA_VISIBLE_DEVICES (privileged=false, "
                   "accept-nvidia-visible-devices-envvar-when-unprivileged=false) ")
HOOK_FAILED = ("runc create failed: unable to start container process: error during container init: "
               "error running hook #0: error running hook: exit status 1, stdout: , stderr: ")
FAKE_RUNC = """#!/bin/sh
printf '%s\\n' "$@" > "$RUNC_ARGV_FILE"
if [ "$1" = "--version" ]; then echo "runc version 1.1.5 (fake)"; fi
exit 0
"""


def _load(name: str, path: Path):
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


repo_builder = _load("standins_build_toolkit_repo_b", STANDINS / "build_toolkit_repo.py")
runtime = _load("standin_runtime", STANDINS / "toolkit" / "nvidia-container-runtime")


def _render(tmp: Path, name: str) -> Path:
    path = tmp / name
    path.write_text(repo_builder.render_source(name, VERSION))
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("standin-programs")
    return {name: _render(tmp, name) for name in ("nvidia-container-runtime", "nvidia-ctk")}


@pytest.fixture(scope="module")
def a100(tmp_path_factory) -> Path:
    """A healthy 2x A100 host, both GPUs MIG-enabled with 7x 1g.10gb."""
    prefix = tmp_path_factory.mktemp("a100") / "gpusim"
    build_profile("a100x2-mig-1g10gb", prefix)
    return prefix


class Node:
    """One create: a bundle, config.toml, a fake runc on PATH, the simulated host's prefix."""

    def __init__(self, tmp: Path, program: Path, prefix: Path):
        self.tmp, self.program, self.prefix = tmp, program, prefix
        self.bundle = tmp / "bundle"
        self.bundle.mkdir()
        (tmp / "bin").mkdir()
        (tmp / "bin" / "runc").write_text(FAKE_RUNC)
        (tmp / "bin" / "runc").chmod(0o755)
        self.config_file = tmp / "config.toml"
        self.log_file = tmp / "shim" / "log.json"
        self.config()
        self.container()

    def config(self, text: str = "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n"
                                 "accept-nvidia-visible-devices-as-volume-mounts = true\n"):
        self.config_file.write_text(text)

    def container(self, env=(), privileged=False, mounts=(), annotations=None, hooks=None):
        bounding = DEFAULT_CAPS + (["CAP_SYS_ADMIN"] if privileged else [])
        spec = {"ociVersion": "1.1.0",
                "process": {"user": {"uid": 0, "gid": 0}, "args": ["sh"], "env": ["PATH=/usr/bin:/bin", *env],
                            "capabilities": {"bounding": bounding, "effective": bounding, "permitted": bounding}},
                "root": {"path": "rootfs"},
                "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}, *mounts],
                "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]}, "namespaces": [{"type": "pid"}]}}
        if annotations:
            spec["annotations"] = annotations
        if hooks:
            spec["hooks"] = hooks
        (self.bundle / "config.json").write_text(json.dumps(spec))

    def create(self, *argv: str, **kwargs) -> subprocess.CompletedProcess:
        args = ["--root", "/run/containerd/runc/k8s.io", "--log", str(self.log_file), "--log-format", "json",
                "create", "--bundle", str(self.bundle), "--pid-file", str(self.tmp / "pid"), *argv, "container-1"]
        return self.run(*args, **kwargs)

    def run(self, *args: str, cwd=None, env=None) -> subprocess.CompletedProcess:
        environ = {"PATH": f"{self.tmp / 'bin'}:/usr/bin:/bin", "RUNC_ARGV_FILE": str(self.tmp / "runc.argv"),
                   "NVIDIA_CTK_CONFIG_FILE_PATH": str(self.config_file), "GPUSIM_PREFIX": str(self.prefix), **(env or {})}
        return subprocess.run([str(self.program), *args], capture_output=True, text=True, check=False, cwd=cwd, env=environ)

    @property
    def spec(self) -> dict:
        return json.loads((self.bundle / "config.json").read_text())

    @property
    def runc_argv(self) -> list[str] | None:
        path = self.tmp / "runc.argv"
        return path.read_text().splitlines() if path.exists() else None

    @property
    def log(self) -> list[dict]:
        return [json.loads(line) for line in self.log_file.read_text().splitlines()] if self.log_file.exists() else []

    def messages(self, level: str) -> list[str]:
        return [entry["msg"] for entry in self.log if entry["level"] == level]

    @property
    def device_paths(self) -> list[str]:
        return [device["path"] for device in self.spec["linux"].get("devices", [])]

    @property
    def visible(self) -> dict | None:
        mount = next((m for m in self.spec["mounts"] if m["destination"] == "/run/gpusim/visible.json"), None)
        return json.loads(Path(mount["source"]).read_text()) if mount else None


@pytest.fixture
def node(tmp_path, programs, a100) -> Node:
    return Node(tmp_path, programs["nvidia-container-runtime"], a100)


def _mount_request(device: str) -> dict:
    return {"destination": f"/var/run/nvidia-container-devices/{device}", "type": "bind", "source": "/dev/null", "options": ["rbind", "ro"]}


def _gpu_uuids(visible: dict | None) -> list[str]:
    return [gpu["uuid"] for gpu in (visible or {}).get("gpus", [])]


# --------------------------------------------------------------------------- who may ask for GPUs


@pytest.mark.parametrize("privileged, accept, granted", [(True, False, True), (False, False, False), (True, True, True), (False, True, True)])
def test_envvar_requests_need_privilege_unless_accepted(node: Node, privileged, accept, granted):
    node.config(f"accept-nvidia-visible-devices-envvar-when-unprivileged = {str(accept).lower()}\n")
    node.container(env=["NVIDIA_VISIBLE_DEVICES=1"], privileged=privileged)
    result = node.create()
    assert result.returncode == 0, result.stderr
    assert node.runc_argv[node.runc_argv.index("create") - 1] == "json"
    if granted:
        assert _gpu_uuids(node.visible) == [GPU1["uuid"]]
        assert "/dev/nvidia1" in node.device_paths and "/dev/nvidia0" not in node.device_paths
        assert {"allow": True, "type": "c", "major": 195, "minor": 1, "access": "rwm"} in node.spec["linux"]["resources"]["devices"]
        assert IGNORED_WARNING not in node.messages("warning")
    else:
        assert node.visible is None and node.device_paths == []
        assert node.messages("warning") == [IGNORED_WARNING]


def test_nvidias_default_accepts_unprivileged_envvar_requests(node: Node):
    node.config_file.unlink()
    node.container(env=["NVIDIA_VISIBLE_DEVICES=0"])
    assert node.create().returncode == 0
    assert _gpu_uuids(node.visible) == [GPU0["uuid"]]


def test_volume_mount_requests_are_honoured_when_accepted(node: Node):
    node.container(env=["NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices"], mounts=[_mount_request(GPU1["uuid"])])
    assert node.create().returncode == 0
    assert _gpu_uuids(node.visible) == [GPU1["uuid"]]
    assert node.messages("warning") == []


def test_volume_mount_requests_are_ignored_when_not_accepted(node: Node):
    node.config("accept-nvidia-visible-devices-as-volume-mounts = false\naccept-nvidia-visible-devices-envvar-when-unprivileged = false\n")
    node.container(env=["NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices"], mounts=[_mount_request("0")])
    assert node.create().returncode == 0
    assert node.visible is None
    assert node.messages("warning") == [IGNORED_WARNING]


def test_refused_mounts_fall_back_to_the_envvar_whose_value_is_no_device(node: Node):
    node.config("accept-nvidia-visible-devices-as-volume-mounts = false\n")
    node.container(env=["NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices"], mounts=[_mount_request("0")])
    result = node.create()
    assert result.returncode == 1 and node.runc_argv is None
    assert HOOK_FAILED + "nvidia-container-cli: device error: /var/run/nvidia-container-devices: unknown device" in result.stderr


def test_volume_mounts_take_precedence_over_the_envvar(node: Node):
    node.container(env=["NVIDIA_VISIBLE_DEVICES=all"], privileged=True, mounts=[_mount_request("0"), _mount_request("0")])
    assert node.create().returncode == 0
    assert _gpu_uuids(node.visible) == [GPU0["uuid"]]


@pytest.mark.parametrize("env, uuids, gets_driver", [
    (["NVIDIA_VISIBLE_DEVICES=all"], [GPU0["uuid"], GPU1["uuid"]], True),
    (["NVIDIA_VISIBLE_DEVICES=1,all"], [GPU0["uuid"], GPU1["uuid"]], True),
    (["NVIDIA_VISIBLE_DEVICES=none"], [], True),
    (["NVIDIA_VISIBLE_DEVICES=void"], [], False),
    (["NVIDIA_VISIBLE_DEVICES=0,void"], [], False),
    (["NVIDIA_VISIBLE_DEVICES="], [], False),
    ([], [], False),
    (["CUDA_VERSION=12.2.0"], [GPU0["uuid"], GPU1["uuid"]], True),
    (["CUDA_VERSION=12.2.0", "NVIDIA_REQUIRE_CUDA=cuda>=12.2"], [], False),
    (["CUDA_VERSION=12.2.0", "NVIDIA_VISIBLE_DEVICES="], [], False),
])
def test_all_none_void_unset_and_legacy_cuda_images(node: Node, env, uuids, gets_driver):
    node.container(env=env, privileged=True)
    assert node.create().returncode == 0
    assert _gpu_uuids(node.visible) == uuids
    assert ("/dev/nvidiactl" in node.device_paths) is gets_driver
    assert (node.visible is not None) is gets_driver
    assert node.spec["hooks"]["prestart"] == [{"path": "/usr/bin/nvidia-container-runtime-hook",
                                               "args": ["nvidia-container-runtime-hook", "prestart"]}]


def test_mig_devices_by_index_and_uuid(node: Node):
    node.container(env=[f"NVIDIA_VISIBLE_DEVICES=0:3,{GPU1['mig_devices'][0]['uuid']}"], privileged=True)
    assert node.create().returncode == 0
    visible = node.visible
    assert [[mig["uuid"] for mig in gpu["mig_devices"]] for gpu in visible["gpus"]] == [
        [GPU0["mig_devices"][3]["uuid"]], [GPU1["mig_devices"][0]["uuid"]]]
    assert node.device_paths == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0", "/dev/nvidia1"]


@pytest.mark.parametrize("envvar, label", [("NVIDIA_MIG_MONITOR_DEVICES", "MIG_MONITOR_DEVICES"), ("NVIDIA_MIG_CONFIG_DEVICES", "MIG_CONFIG_DEVICES")])
def test_unprivileged_mig_monitor_or_config_requests_fail_create(node: Node, envvar, label):
    node.config("accept-nvidia-visible-devices-envvar-when-unprivileged = true\n")
    node.container(env=["NVIDIA_VISIBLE_DEVICES=0", f"{envvar}=all"])
    before = (node.bundle / "config.json").read_text()
    result = node.create()
    message = HOOK_FAILED + f"cannot set {label} in non privileged container"
    assert result.returncode == 1 and node.runc_argv is None
    assert message in result.stderr and node.messages("error") == [message]
    assert (node.bundle / "config.json").read_text() == before
    node.container(env=["NVIDIA_VISIBLE_DEVICES=0", f"{envvar}=all"], privileged=True)
    assert node.create().returncode == 0


def test_existing_nvidia_hook_is_kept(node: Node):
    hook = {"path": "/usr/local/bin/nvidia-container-toolkit", "args": ["nvidia-container-toolkit", "prestart"]}
    node.container(hooks={"prestart": [hook]})
    assert node.create().returncode == 0
    assert node.spec["hooks"]["prestart"] == [hook]
    assert "Existing nvidia prestart hook (/usr/local/bin/nvidia-container-toolkit) found in OCI spec" in node.messages("info")


# --------------------------------------------------------------------------- the simulated driver's errors


def _not_loaded_profile(tmp: Path) -> Path:
    data = profile_data("h100x8")
    data["name"] = "h100x8-not-loaded"
    data["kernel_module"]["loaded"] = False
    path = tmp / "h100x8-not-loaded.json"
    path.write_text(json.dumps(data))
    return path


def _host(kind: str, tmp: Path) -> Path:
    """A simulated host whose driver cannot initialize, or no kit at all."""
    prefix = tmp / f"host-{kind}"
    if kind == "mismatch":
        build_profile("rtx8000x10-version-mismatch", prefix)
    elif kind == "not-loaded":
        requires_mknod()
        from gpusim_helpers import gpusim
        gpusim.build(str(_not_loaded_profile(tmp)), str(prefix), recordings=str(FIXTURES))
    elif kind == "no-userspace":
        install_host_userspace(tmp / "host-root", None)
        build_profile("h100x8", prefix, userspace="host", host_root=str(tmp / "host-root"))
    return prefix


@pytest.mark.parametrize("kind, message", [
    ("mismatch", "nvidia-container-cli: initialization error: nvml error: driver/library version mismatch"),
    ("not-loaded", "nvidia-container-cli: initialization error: nvml error: driver not loaded"),
    ("no-userspace", "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: "
                     "cannot open shared object file: no such file or directory"),
    ("no-kit", "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: "
               "cannot open shared object file: no such file or directory"),
])
def test_driver_errors_fail_create_like_the_hook(tmp_path, programs, kind, message):
    node = Node(tmp_path, programs["nvidia-container-runtime"], _host(kind, tmp_path))
    node.container(env=["NVIDIA_VISIBLE_DEVICES=all"], privileged=True)
    result = node.create()
    assert result.returncode == 1 and node.runc_argv is None
    assert node.messages("error") == [HOOK_FAILED + message]
    assert "level=error" in result.stderr and HOOK_FAILED + message in result.stderr
    node.container(env=["NVIDIA_VISIBLE_DEVICES=void"], privileged=True)
    assert node.create().returncode == 0, "a container without GPUs does not touch the driver"


def test_unknown_device_fails_create(node: Node):
    node.container(env=["NVIDIA_VISIBLE_DEVICES=7"], privileged=True)
    result = node.create()
    assert result.returncode == 1
    assert node.messages("error") == [HOOK_FAILED + "nvidia-container-cli: device error: 7: unknown device"]


# --------------------------------------------------------------------------- cdi mode and the mode choice


def _cdi_config(node: Node, mode: str = "cdi", top: str = "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n"):
    node.config(f'{top}[nvidia-container-runtime]\nmode = "{mode}"\n'
                f'[nvidia-container-runtime.modes.cdi]\nspec-dirs = ["{node.tmp / "none"}", "{node.tmp / "cdi"}"]\n')


@pytest.fixture
def cdi_node(node: Node, programs) -> Node:
    subprocess.run([str(programs["nvidia-ctk"]), "cdi", "generate", "--output", str(node.tmp / "cdi" / "nvidia.yaml")],
                   check=True, capture_output=True, env={"GPUSIM_PREFIX": str(node.prefix), "PATH": "/usr/bin:/bin"})
    _cdi_config(node)
    return node


@pytest.mark.parametrize("name", ["1", GPU1["uuid"]])
def test_cdi_annotation_is_resolved_against_the_spec_dirs(cdi_node: Node, name):
    cdi_node.container(annotations={"cdi.k8s.io/nvidia-device-plugin_abc": f"nvidia.com/gpu={name}"},
                       hooks={"prestart": [{"path": "/usr/bin/nvidia-container-runtime-hook", "args": ["x", "prestart"]}]})
    result = cdi_node.create()
    assert result.returncode == 0, result.stderr
    spec = cdi_node.spec
    assert "Using requested mode 'cdi'" in cdi_node.messages("info")
    assert cdi_node.device_paths == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia1"]
    assert "NVIDIA_VISIBLE_DEVICES=void" in spec["process"]["env"]
    assert spec["hooks"]["prestart"] == []
    assert _gpu_uuids(cdi_node.visible) == [GPU1["uuid"]]


def test_unknown_cdi_device_fails_create(cdi_node: Node):
    cdi_node.container(annotations={"cdi.k8s.io/x": "nvidia.com/gpu=9,nvidia.com/gpu=0"})
    result = cdi_node.create()
    message = ("could not apply required modification to OCI specification: error modifying OCI spec: "
               "failed to inject CDI devices: unresolvable CDI devices nvidia.com/gpu=9")
    assert result.returncode == 1 and cdi_node.runc_argv is None
    assert cdi_node.messages("error") == [message] and message in result.stderr
    assert cdi_node.messages("warning") == ["could not resolve CDI devices: [nvidia.com/gpu=9]"]


def test_unqualified_cdi_annotation_fails_create(cdi_node: Node):
    cdi_node.container(annotations={"cdi.k8s.io/x": "0"})
    result = cdi_node.create()
    assert result.returncode == 1
    assert cdi_node.messages("error") == [
        "failed to create NVIDIA Container Runtime: failed to construct OCI spec modifier: failed to get required devices from "
        'OCI specification: failed to parse container annotations: invalid device name "0" in annotation "cdi.k8s.io/x"']


def test_cdi_mode_envvar_gets_the_default_kind_and_the_privilege_rule(cdi_node: Node):
    cdi_node.container(env=["NVIDIA_VISIBLE_DEVICES=0:2"])
    assert cdi_node.create().returncode == 0
    assert cdi_node.messages("warning") == ["Ignoring devices specified in NVIDIA_VISIBLE_DEVICES: [nvidia.com/gpu=0:2]"]
    assert cdi_node.visible is None
    cdi_node.container(env=["NVIDIA_VISIBLE_DEVICES=0:2"], privileged=True)
    assert cdi_node.create().returncode == 0
    assert [mig["uuid"] for mig in cdi_node.visible["gpus"][0]["mig_devices"]] == [GPU0["mig_devices"][2]["uuid"]]


def test_cdi_mode_with_a_broken_driver_creates_the_container_without_simulated_gpus(cdi_node: Node, tmp_path):
    cdi_node.prefix = _host("mismatch", tmp_path)
    cdi_node.container(annotations={"cdi.k8s.io/x": "nvidia.com/gpu=all"})
    result = cdi_node.create()
    assert result.returncode == 0, result.stderr
    assert cdi_node.visible is None and "/dev/nvidia1" in cdi_node.device_paths
    assert any(m["destination"] == "/usr/bin/nvidia-smi" for m in cdi_node.spec["mounts"])
    assert "driver/library version mismatch" in cdi_node.messages("warning")[0]


@pytest.mark.parametrize("env, annotations, mode, rc", [
    (["NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=1"], None, "cdi", 0),
    (["NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=1,0"], None, "legacy", 1),
    (["NVIDIA_VISIBLE_DEVICES=all"], None, "legacy", 0),
    ([], None, "legacy", 0),
    # v1.17.8's auto mode does not look at CDI annotations (1.18 does): legacy, and no GPU.
    ([], {"cdi.k8s.io/x": "nvidia.com/gpu=1"}, "legacy", 0),
])
def test_auto_mode_selection(cdi_node: Node, env, annotations, mode, rc):
    _cdi_config(cdi_node, mode="auto")
    cdi_node.container(env=env, annotations=annotations, privileged=True)
    result = cdi_node.create()
    assert result.returncode == rc
    assert f"Auto-detected mode as '{mode}'" in cdi_node.messages("info")
    if mode == "cdi":
        assert _gpu_uuids(cdi_node.visible) == [GPU1["uuid"]]
    if annotations:
        assert cdi_node.visible is None
    if rc:
        assert "nvidia-container-cli: device error: nvidia.com/gpu=1: unknown device" in result.stderr


def test_auto_mode_with_a_cdi_device_mount(cdi_node: Node):
    _cdi_config(cdi_node, mode="auto", top="accept-nvidia-visible-devices-as-volume-mounts = true\n")
    cdi_node.container(mounts=[_mount_request("cdi/nvidia.com/gpu/0")])
    assert cdi_node.create().returncode == 0
    assert "Auto-detected mode as 'cdi'" in cdi_node.messages("info")
    assert _gpu_uuids(cdi_node.visible) == [GPU0["uuid"]]


# --------------------------------------------------------------------------- argv, exec and logging


@pytest.mark.parametrize("args", [["state", "c1"], ["start", "c1"], ["delete", "--force", "c1"], ["kill", "c1", "9"],
                                  ["--bundle", "create", "start", "c1"]])
def test_other_subcommands_pass_through_untouched(node: Node, args):
    node.container(env=["NVIDIA_VISIBLE_DEVICES=all"], privileged=True)
    before = (node.bundle / "config.json").read_text()
    argv = ["--root", "/run/runc", "--log", str(node.log_file), "--log-format", "json", *args]
    result = node.run(*argv)
    assert result.returncode == 0
    assert node.runc_argv == argv
    assert (node.bundle / "config.json").read_text() == before
    assert node.messages("info") == []


@pytest.mark.parametrize("form", ["--bundle X", "--bundle=X", "-b X", "-bundle X", "cwd"])
def test_bundle_flag_forms(node: Node, form):
    node.container(env=["NVIDIA_VISIBLE_DEVICES=0"], privileged=True)
    bundle_args = [] if form == "cwd" else form.replace("X", str(node.bundle)).split()
    argv = ["--log", str(node.log_file), "--log-format=json", "create", *bundle_args, "c1"]
    result = node.run(*argv, cwd=node.bundle)
    assert result.returncode == 0, result.stderr
    assert node.runc_argv == argv
    assert _gpu_uuids(node.visible) == [GPU0["uuid"]]
    path = "config.json" if form == "cwd" else f"{node.bundle}/config.json"
    assert f"Using OCI specification file path: {path}" in node.messages("info")


def test_bundle_flag_without_value_fails(node: Node):
    result = node.run("create", "c1", "--bundle")
    assert result.returncode == 1
    assert "error getting bundle dir from args: bundle option requires an argument" in result.stderr


def test_version_prints_ours_then_runcs(node: Node):
    result = node.run("--version")
    assert result.returncode == 0
    assert result.stdout.splitlines()[0] == "NVIDIA Container Runtime version 1.17.8"
    assert "STAND-IN" in result.stdout and result.stdout.rstrip().endswith("runc version 1.1.5 (fake)")
    assert node.runc_argv == ["--version"]


def test_missing_low_level_runtime_fails(node: Node):
    node.config('[nvidia-container-runtime]\nruntimes = ["no-such-runc", "crun-missing"]\n')
    result = node.run("state", "c1")
    assert result.returncode == 1
    assert ("failed to create NVIDIA Container Runtime: error constructing low-level runtime: error locating runtime: "
            "no runtime binary found from candidate list: [no-such-runc crun-missing]") in result.stderr


def test_log_lines_go_to_the_shim_log_and_the_debug_file(node: Node):
    debug_file = node.tmp / "var" / "log" / "nvidia-container-runtime.log"
    node.config(f'accept-nvidia-visible-devices-envvar-when-unprivileged = false\n[nvidia-container-runtime]\ndebug = "{debug_file}"\nlog-level = "debug"\n')
    node.container(env=["NVIDIA_VISIBLE_DEVICES=all"])
    assert node.create().returncode == 0
    entries = node.log
    assert all(sorted(entry) == ["level", "msg", "time"] for entry in entries)
    assert {"level": "warning", "msg": IGNORED_WARNING} in [{k: e[k] for k in ("level", "msg")} for e in entries]
    assert "Forwarding command to runtime %s" % (node.tmp / "bin" / "runc") in node.messages("debug")
    assert entries[0]["time"].endswith("Z") or entries[0]["time"][-6] in "+-"
    assert [json.loads(line)["msg"] for line in debug_file.read_text().splitlines()] == [entry["msg"] for entry in entries]
    text = node.run("state", "c1", env={})
    assert text.returncode == 0
    plain = debug_file.read_text().splitlines()[-1]
    assert plain.startswith('time="') and 'level=debug msg="Forwarding command to runtime' in plain


def test_info_level_hides_debug_lines(node: Node):
    node.container()
    assert node.create().returncode == 0
    assert node.messages("debug") == []
    assert node.messages("info")[:2] == [f"Using OCI specification file path: {node.bundle}/config.json", "Auto-detected mode as 'legacy'"]


def test_bad_config_fails_with_the_loader_error(node: Node):
    node.config("mode = [\n")
    result = node.run("state", "c1")
    assert result.returncode == 1 and node.runc_argv is None
    assert "error loading config:" in result.stderr


# --------------------------------------------------------------------------- pure rules


@pytest.mark.parametrize("value, expected", [
    ("all", ["all"]), ("0,all", ["all"]), ("none", [""]), ("none,0", [""]), ("void", []), ("", []), (" , ", []),
    ("0, 1 ,GPU-x", ["0", "1", "GPU-x"]), ("0,0", ["0"]), ("0:1,MIG-y", ["0:1", "MIG-y"]),
])
def test_visible_devices_values(value, expected):
    assert runtime.devices_from_envvars({"NVIDIA_VISIBLE_DEVICES": value}, ["NVIDIA_VISIBLE_DEVICES"]) == expected


@pytest.mark.parametrize("name, qualified", [
    ("nvidia.com/gpu=0", True), ("nvidia.com/gpu=0:1", True), ("nvidia.com/gpu=GPU-1a2b", True), ("nvidia.com/gpu=all", True),
    ("nvidia.com/gpu=", False), ("nvidia.com=0", False), ("0", False), ("/dev/nvidia0", False), ("1vendor.com/gpu=0", False),
    ("nvidia.com/gpu=-0", False), ("nvidia.com/gpu=0-", False), ("nvidia.com/gp u=0", False),
])
def test_qualified_cdi_names(name, qualified):
    assert runtime.is_qualified_name(name) is qualified


def test_swarm_resource_envvars_win():
    config = runtime.merged(runtime.default_config(), {"swarm-resource": "DOCKER_RESOURCE_GPU, OTHER"})
    env = {"NVIDIA_VISIBLE_DEVICES": "all", "DOCKER_RESOURCE_GPU": "1"}
    assert runtime.envvar_devices(config, env) == ["1"]
    assert runtime.envvar_devices(config, {"NVIDIA_VISIBLE_DEVICES": "all"}) == ["all"]


def test_config_defaults_fill_missing_keys(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[nvidia-container-runtime]\nmode = "cdi"\n[nvidia-container-runtime.modes.cdi]\nspec-dirs = ["/x"]\n')
    config = runtime.load_config(str(path))
    assert config["accept-nvidia-visible-devices-envvar-when-unprivileged"] is True
    assert config["accept-nvidia-visible-devices-as-volume-mounts"] is False
    cdi = config["nvidia-container-runtime"]["modes"]["cdi"]
    assert cdi == {"default-kind": "nvidia.com/gpu", "annotation-prefixes": ["cdi.k8s.io/"], "spec-dirs": ["/x"]}
    assert config["nvidia-container-runtime"]["runtimes"] == ["docker-runc", "runc", "crun"]
    assert runtime.load_config(str(tmp_path / "missing.toml")) == runtime.default_config()
    assert runtime.config_path({}) == "/etc/nvidia-container-runtime/config.toml"
    assert runtime.config_path({"XDG_CONFIG_HOME": "/cfg"}) == "/cfg/nvidia-container-runtime/config.toml"


def test_has_create_subcommand():
    assert runtime.has_create_subcommand(["runc", "--root", "/r", "create", "--bundle", "/b", "id"])
    assert not runtime.has_create_subcommand(["runc", "--bundle", "create", "start", "id"])
    assert not runtime.has_create_subcommand(["runc", "start", "id"])


def test_the_program_runs_on_the_nodes_python():
    """Debian bookworm's python3 is 3.11: the stand-in must not need more (tomllib is 3.11)."""
    assert sys.version_info >= (3, 11)
    assert repo_builder.render_source("nvidia-container-runtime", VERSION).startswith("#!/usr/bin/python3\n")
    assert os.access(STANDINS / "toolkit" / "nvidia-container-runtime", os.R_OK)
