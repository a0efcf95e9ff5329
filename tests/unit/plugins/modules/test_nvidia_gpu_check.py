"""Module flow of gpufleet.node.nvidia_gpu_check with mocked commands.

The host files come from the simulated GPU host trees of lab/gpusim (real character devices,
so these tests run as root); nvidia-smi's answers are mocked: recorded real outputs from
tests/fixtures/nvidia (or, for forms no capture exists of, the hand-written texts of its
synthetic/ directory), or the query rendered from the profile where no capture of the module's
exact query exists.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
from unittest import mock

import pytest
from ansible.module_utils import basic

from ansible_collections.gpufleet.node.plugins.module_utils import _nvidia_health as health
from ansible_collections.gpufleet.node.plugins.module_utils import _nvidia_parsers as parsers
from ansible_collections.gpufleet.node.plugins.module_utils._nvidia_parsers import QUERY_GPU_FIELDS
from ansible_collections.gpufleet.node.plugins.modules import nvidia_gpu_check

from gpusim_helpers import build_profile, fixture_text, gpusim, profile_data
from module_runner import run_module

QUERY_ARGS = ["--query-gpu=" + ",".join(QUERY_GPU_FIELDS), "--format=csv,noheader,nounits"]


# Check ids seen failing (or warning, for the warn-only dev_char_symlinks_present) by the tests of this file.
NOT_PASSING = set()


class FakeCommands:
    """Stands in for module_utils/_run.py's execute: answers by argv (without the `timeout` wrapper)."""

    def __init__(self, answers=None):
        self.answers = answers or {}
        self.calls = []
        self.side_effects = {}

    def __call__(self, args, environ_update):
        assert environ_update == {"LC_ALL": "C"}, "commands run in the C locale, so their output parses"
        argv = list(args)
        if argv and os.path.basename(argv[0]) == "timeout":
            argv = argv[3:]
        self.calls.append(argv)
        key = tuple(argv[1:]) if "nvidia-smi" in os.path.basename(argv[0]) else tuple([os.path.basename(argv[0])] + argv[1:])
        if key not in self.answers:
            raise AssertionError("unexpected command %r" % (argv,))
        if key in self.side_effects:
            self.side_effects[key]()
        return self.answers[key]


@pytest.fixture
def smi(tmp_path):
    """A dummy nvidia-smi file (never executed: the commands are mocked)."""
    path = tmp_path / "bin" / "nvidia-smi"
    path.parent.mkdir()
    path.write_text("#!/bin/sh\nexit 99\n")
    path.chmod(0o755)
    return path


def rendered_query(name):
    return gpusim.render_query(profile_data(name), list(QUERY_GPU_FIELDS), header=False, units=False)


def healthy_answers(name):
    answers = {tuple(QUERY_ARGS): (0, rendered_query(name), "")}
    if name == "a100x4-mig":
        answers[("-L",)] = (0, fixture_text("smi-L_4xA100-SXM4-80GB_MIG-on-GPU0-4x1g.20gb.txt"), "")
    return answers


def run(args, commands, check_mode=False):
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    result = run_module(nvidia_gpu_check.main, args, commands=commands)
    for item in result.get("checks", []):
        if item["status"] in ("fail", "warn"):
            NOT_PASSING.add(item["id"])
    return result


def statuses(result):
    return dict((check["id"], check["status"]) for check in result["checks"])


def check(result, check_id):
    return next(item for item in result["checks"] if item["id"] == check_id)


def base_args(root, smi, **options):
    args = {"host_root": str(root), "nvidia_smi_path": str(smi), "fail_on_error": False}
    args.update(options)
    return args


# ----------------------------------------------------------------------------- healthy hosts

# The plain table of the real 8x H100 node (driver 565.57.01, "CUDA Version: 12.7").
H100_TABLE = fixture_text("smi-table_8xH100-80GB-HBM3_driver-565.57.01.txt")


def test_healthy_h100_host_passes_every_check(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    commands = FakeCommands({**healthy_answers("h100x8"), (): (0, H100_TABLE, "")})
    result = run(base_args(root, smi, expected_driver_version="565.57.01", expected_gpu_count=8, expected_mig_mode="disabled",
                           required_modules=["nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm"], fail_on_error=True,
                           cuda_versions=["12.4", "11.8"]), commands)
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is False
    assert result["failed_checks"] == [] and result["failed_layers"] == []
    assert set(statuses(result).values()) == {"pass"}
    assert [item["id"] for item in result["checks"]] == list(health.CHECK_IDS)
    facts = result["nvidia_gpu"]
    assert result["ansible_facts"] == {"nvidia_gpu": facts}
    assert facts["kernel"] == {"release": "6.1.0-28-amd64", "cmdline": profile_data("h100x8")["kernel"]["cmdline"],
                               "iommu": {"intel_iommu": "on", "iommu": "pt"}, "efi": True, "secure_boot": False}
    assert facts["modules"] == {"nvidia": True, "nvidia_uvm": True, "nvidia_modeset": True, "nvidia_drm": True, "nvidia_peermem": False}
    assert facts["driver"]["kernel_module_version"] == "565.57.01"
    assert facts["driver"]["userspace_version_source"] == "nvidia-smi"
    assert facts["driver"]["nvml_library_versions"] == ["565.57.01"]
    assert facts["gpu_count"] == 8
    assert facts["gpus"][7] == {"index": 7, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-5e1a0000-0000-4000-8000-000000000107",
                                "pci_bus_id": "00000000:DB:00.0", "memory_total_mib": 81559, "persistence_mode": "Enabled",
                                "mig_mode": "Disabled", "driver_version": "565.57.01", "mig_devices": []}
    uvm_node = {"path": "/dev/nvidia-uvm", "present": True, "char_device": True, "major": 510, "minor": 0, "mode": "0666", "uid": 0, "gid": 0,
                "char_link": True}
    assert facts["device_nodes"]["nvidia-uvm"] == uvm_node
    assert sorted(facts["device_nodes"]) == sorted(["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"] + ["nvidia%d" % i for i in range(8)])
    # one nvidia-smi call when no GPU has MIG enabled, and the plain table for the CUDA version
    assert commands.calls == [[str(smi)] + QUERY_ARGS, [str(smi)]]
    assert facts["driver"]["cuda_version"] == "12.7"


def test_h200_host_of_a_kernel_without_module_unloading_passes(tmp_path, smi):
    # The kernel files and nvidia-smi answer captured on a real H200 whose kernel cannot unload modules ("- -" in
    # /proc/modules); the device nodes come from the simulated tree (its nvidia-uvm major, its /dev/char links).
    root = build_profile("h100x8", tmp_path / "sim")
    (root / "proc" / "modules").write_text(fixture_text("proc-modules_nvidia_no-module-unload_open-kmod-580.159.04_H200.txt"))
    (root / "proc" / "driver" / "nvidia" / "version").write_text(fixture_text("proc-driver-nvidia-version_open-kmod_580.159.04_H200.txt"))
    (root / "sys" / "module" / "nvidia" / "version").write_text(fixture_text("sys-module-nvidia-version_580.159.04_H200.txt"))
    for index in range(1, 8):
        (root / "dev" / ("nvidia%d" % index)).unlink()
    query = fixture_text("query-gpu-csv-noheader-nounits_module-fields_H200_driver-580.159.04.txt")
    result = run(base_args(root, smi, expected_driver_version="580.159.04", expected_gpu_count=1, expected_mig_mode="disabled",
                           fail_on_error=True), FakeCommands({tuple(QUERY_ARGS): (0, query, "")}))
    assert not result.get("failed"), result.get("msg")
    not_passing = dict((key, value) for key, value in statuses(result).items() if value != "pass")
    assert not_passing == {"required_modules_loaded": "skip", "cuda_supported": "skip"}
    facts = result["nvidia_gpu"]
    assert facts["modules"]["nvidia"] is True and facts["modules"]["nvidia_uvm"] is True
    assert facts["driver"]["kernel_module_version"] == "580.159.04"
    assert facts["driver"]["kernel_module_flavour"] == "open"
    assert [gpu["name"] for gpu in facts["gpus"]] == ["NVIDIA H200"]


def test_mig_host_lists_mig_devices_from_recorded_listing(tmp_path, smi):
    root = build_profile("a100x4-mig", tmp_path / "sim")
    result = run(base_args(root, smi, expected_gpu_count=4), FakeCommands(healthy_answers("a100x4-mig")))
    gpus = result["nvidia_gpu"]["gpus"]
    assert [len(gpu["mig_devices"]) for gpu in gpus] == [4, 0, 0, 0]
    assert gpus[0]["mig_devices"][3] == {"index": 3, "profile": "1g.20gb", "uuid": "MIG-00000000-0000-0000-0000-000000000003"}
    assert result["failed_checks"] == []


# ----------------------------------------------------------------------------- every check fails somewhere

def test_driver_module_not_loaded(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    (root / "proc" / "modules").write_text(fixture_text("lsmod-grep-nvidia_empty_module-not-loaded.txt"))
    answers = {tuple(QUERY_ARGS): (9, fixture_text("error_smi-couldnt-communicate-with-driver.txt"), "")}
    result = run(base_args(root, smi), FakeCommands(answers))
    assert statuses(result)["driver_module_loaded"] == "fail"
    assert "modprobe nvidia" in check(result, "driver_module_loaded")["remedy"]
    assert statuses(result)["nvidia_smi_runs"] == "fail"
    assert result["nvidia_gpu"]["nvidia_smi"]["error_class"] == "cannot_communicate"
    assert result["failed_layers"] == ["kernel", "driver"]


def test_uvm_module_missing_fails_and_only_warns_when_not_required(tmp_path, smi):
    root = build_profile("h100x8-uvm-missing", tmp_path / "sim")
    answers = FakeCommands(healthy_answers("h100x8-uvm-missing"))
    result = run(base_args(root, smi, expected_gpu_count=8), answers)
    assert result["failed_checks"] == ["uvm_module_loaded", "device_nodes_present"]
    uvm = check(result, "uvm_module_loaded")
    assert uvm["layer"] == "kernel"
    assert "nvidia-modprobe -u -c=0" in uvm["remedy"] and "/etc/modules-load.d" in uvm["remedy"]
    assert "/dev/nvidia-uvm is missing" in check(result, "device_nodes_present")["message"]
    relaxed = run(base_args(root, smi, required_modules=["nvidia"]), answers)
    assert statuses(relaxed)["uvm_module_loaded"] == "warn"


def test_lsmod_capture_without_uvm(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    (root / "proc" / "modules").write_text(fixture_text("lsmod-grep-nv_nvidia-only-NO-nvidia_uvm_410.48.txt"))
    result = run(base_args(root, smi), FakeCommands(healthy_answers("h100x8")))
    assert statuses(result)["uvm_module_loaded"] == "fail"
    assert result["nvidia_gpu"]["modules"]["nvidia"] is True


def test_required_modules_missing(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    result = run(base_args(root, smi, required_modules=["nvidia", "nvidia_uvm", "nvidia_peermem"]), FakeCommands(healthy_answers("h100x8")))
    assert result["failed_checks"] == ["required_modules_loaded"]
    assert check(result, "required_modules_loaded")["message"] == "required kernel modules not loaded: nvidia_peermem"
    assert "`modprobe nvidia_peermem`" in check(result, "required_modules_loaded")["remedy"]


def test_device_node_missing_or_wrong(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    (root / "dev" / "nvidia3").unlink()
    (root / "dev" / "nvidiactl").unlink()
    (root / "dev" / "nvidiactl").write_text("")  # a regular file where the device should be
    result = run(base_args(root, smi), FakeCommands(healthy_answers("h100x8")))
    assert result["failed_checks"] == ["device_nodes_present"]
    message = check(result, "device_nodes_present")["message"]
    assert message == "/dev/nvidiactl is not a character device; /dev/nvidia3 is missing"


def test_char_symlinks_missing_warn(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    shutil.rmtree(root / "dev" / "char")
    result = run(base_args(root, smi), FakeCommands(healthy_answers("h100x8")))
    links = check(result, "dev_char_symlinks_present")
    assert links["status"] == "warn"  # warn-only check: never fails the host
    assert "/dev/char/195:255 (for /dev/nvidiactl)" in links["message"]
    assert "nvidia-ctk system create-dev-char-symlinks" in links["remedy"]
    assert result["failed_checks"] == []


@pytest.mark.parametrize(
    "name, rc, error_class",
    [
        ("error_smi-couldnt-communicate-with-driver.txt", 9, "cannot_communicate"),
        ("error_no-devices-were-found.txt", 6, "no_devices"),
        ("error_nvml-driver-library-mismatch_with-nvml-version_570.124.txt", 18, "driver_library_mismatch"),
        ("error_nvml-unknown-error_container-lost-devices.txt", 255, "unknown_error"),
        ("error_gpu-is-lost_reboot-to-recover.txt", 15, "gpu_lost"),
        ("error_unable-to-determine-device-handle_new-format-no-space.txt", 255, "gpu_handle_lost"),
        ("synthetic/error_unable-to-determine-device-handle_unknown-error.txt", 255, "gpu_handle_lost"),
    ],
)
def test_nvidia_smi_failures_are_classified(tmp_path, smi, name, rc, error_class):
    root = build_profile("h100x8", tmp_path / "sim")
    result = run(base_args(root, smi, expected_gpu_count=8), FakeCommands({tuple(QUERY_ARGS): (rc, fixture_text(name), "")}))
    smi_facts = result["nvidia_gpu"]["nvidia_smi"]
    assert (smi_facts["ok"], smi_facts["rc"], smi_facts["error_class"]) == (False, rc, error_class)
    assert smi_facts["error_message"] == fixture_text(name).strip().splitlines()[0].strip()
    assert check(result, "nvidia_smi_runs")["status"] == "fail"
    assert check(result, "nvidia_smi_runs")["layer"] == "driver"
    assert check(result, "gpu_count_expected")["status"] == "fail"
    assert result["nvidia_gpu"]["gpu_count"] is None


def test_one_lost_gpu_among_listed_ones(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    rows = rendered_query("h100x8").splitlines()
    output = "\n".join(rows[:7]) + "\n" + fixture_text("error_gpu-is-lost_reboot-to-recover.txt")
    result = run(base_args(root, smi, expected_gpu_count=8), FakeCommands({tuple(QUERY_ARGS): (15, output, "")}))
    facts = result["nvidia_gpu"]
    assert facts["nvidia_smi"]["error_class"] == "gpu_lost"
    assert facts["nvidia_smi"]["gpu_errors"][0]["pci_bus_id"] == "0000:03:00.0"
    assert facts["gpu_count"] == 7
    assert check(result, "gpu_count_expected")["message"] == "expected 8 GPU(s), nvidia-smi lists 7"


LOST_GPU_ACTIONS = ("drain the node", "`nvidia-smi -r -i <pci>`", "reboot", "`lspci -vvv -s <pci>`", "fallen off")


def assert_lost_gpu_remedy(remedy, pci):
    for action in LOST_GPU_ACTIONS:
        assert action.replace("<pci>", pci) in remedy, action


def test_gpu_that_nvidia_smi_cannot_open(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    (root / "dev" / "kmsg").write_text(fixture_text("synthetic/journal_gpu-fallen-off-bus_no-xid.txt"))
    rows = rendered_query("h100x8").splitlines()
    output = "\n".join(rows[:7]) + "\n" + fixture_text("synthetic/error_unable-to-determine-device-handle_unknown-error.txt")
    result = run(base_args(root, smi, expected_gpu_count=8), FakeCommands({tuple(QUERY_ARGS): (255, output, "")}))
    facts = result["nvidia_gpu"]
    assert facts["nvidia_smi"]["error_class"] == "gpu_handle_lost"
    assert facts["nvidia_smi"]["gpu_errors"] == [{"pci_bus_id": "0000:91:00.0", "reason": "Unknown Error",
                                                  "line": "Unable to determine the device handle for GPU0000:91:00.0: Unknown Error"}]
    assert facts["gpu_count"] == 7
    assert result["failed_checks"] == ["nvidia_smi_runs", "gpu_count_expected", "critical_xids_absent"]
    smi_check = check(result, "nvidia_smi_runs")
    assert smi_check["message"].startswith("nvidia-smi failed (gpu_handle_lost, rc 255): Unable to determine the device handle")
    assert_lost_gpu_remedy(smi_check["remedy"], "0000:91:00.0")
    assert "Xid 79" in smi_check["remedy"]
    assert "Xid 79 GPU has fallen off the bus on 0000:91:00" in check(result, "critical_xids_absent")["message"]


def test_version_mismatch_host(tmp_path, smi):
    root = build_profile("rtx8000x10-version-mismatch", tmp_path / "sim")
    answers = {tuple(QUERY_ARGS): (18, fixture_text("error_nvml-driver-library-mismatch_legacy_10xQuadro-RTX-8000_470.txt"), "")}
    result = run(base_args(root, smi, expected_driver_version="470.63.01", expected_gpu_count=10), FakeCommands(answers))
    assert result["failed_checks"] == ["nvidia_smi_runs", "driver_versions_match", "driver_version_expected", "gpu_count_expected"]
    versions = check(result, "driver_versions_match")
    assert "kernel module 470.103.01 vs library 470.63.01" in versions["message"]
    assert versions["remedy"].startswith("reboot or reload the driver modules: kernel module 470.103.01 vs library 470.63.01")
    assert result["nvidia_gpu"]["driver"]["userspace_version_source"] == "libnvidia-ml"
    assert result["nvidia_gpu"]["kernel_log"]["api_mismatch"] == {
        "client": "470.63.01", "kernel": "470.103.01", "client_name": None, "client_pid": None}
    assert "kernel log: client 470.63.01, kernel module 470.103.01" in versions["message"]
    assert check(result, "driver_version_expected")["message"] == "expected driver 470.63.01: kernel module is 470.103.01"
    # /dev/nvidiaN nodes are still checked from what exists when nvidia-smi cannot count
    assert len([name for name in result["nvidia_gpu"]["device_nodes"] if name[6:].isdigit()]) == 10


@pytest.mark.parametrize("log, mismatch, quoted", [
    ("synthetic/journal_api-mismatch_client-named_no-prefix-continuations.txt",
     {"client": "580.65.06", "kernel": "575.57.08", "client_name": "nvidia-smi", "client_pid": 4242},
     "kernel log: client 'nvidia-smi' (pid 4242) 580.65.06, kernel module 575.57.08"),
    ("synthetic/syslog_api-mismatch_client-named_rsyslog-escaped.txt",
     {"client": "550.163.01", "kernel": "550.144.03", "client_name": "nv-hostengine", "client_pid": 31337},
     "kernel log: client 'nv-hostengine' (pid 31337) 550.163.01, kernel module 550.144.03"),
    ("dmesg-grep-NVRM_api-mismatch_570.148.08-vs-570.148.06.txt",
     {"client": "570.148.08", "kernel": "570.148.06", "client_name": None, "client_pid": None},
     "kernel log: client 570.148.08, kernel module 570.148.06"),
])
def test_api_mismatch_report_of_the_kernel_log_is_quoted(tmp_path, smi, log, mismatch, quoted):
    root = build_profile("rtx8000x10-version-mismatch", tmp_path / "sim")
    (root / "dev" / "kmsg").write_text(fixture_text(log))
    answers = {tuple(QUERY_ARGS): (18, fixture_text("error_nvml-driver-library-mismatch_legacy_10xQuadro-RTX-8000_470.txt"), "")}
    result = run(base_args(root, smi), FakeCommands(answers))
    assert result["nvidia_gpu"]["kernel_log"]["api_mismatch"] == mismatch
    versions = check(result, "driver_versions_match")
    assert versions["status"] == "fail"
    assert quoted in versions["message"]


def test_versions_differ_without_nvidia_smi_error(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    (root / "proc" / "driver" / "nvidia" / "version").write_text(fixture_text("proc-driver-nvidia-version_proprietary_580.173.02_during-mismatch.txt"))
    result = run(base_args(root, smi), FakeCommands(healthy_answers("h100x8")))
    assert result["failed_checks"] == ["driver_versions_match"]
    assert check(result, "driver_versions_match")["message"] == "kernel module 580.173.02 vs user-space 565.57.01 (from nvidia-smi)"


def test_kernel_version_falls_back_to_sys_module(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    (root / "proc" / "driver" / "nvidia" / "version").write_text("garbage\n")
    (root / "sys" / "module" / "nvidia" / "version").write_text(fixture_text("sys-module-nvidia-version_470.63.01_after-fix.txt"))
    result = run(base_args(root, smi), FakeCommands(healthy_answers("h100x8")))
    driver = result["nvidia_gpu"]["driver"]
    assert (driver["kernel_module_version"], driver["kernel_module_version_source"]) == ("470.63.01", "/sys/module/nvidia/version")
    assert any("first line is not" in problem for problem in result["nvidia_gpu"]["read_errors"])
    assert statuses(result)["driver_versions_match"] == "fail"


def test_expected_driver_version_differs(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    result = run(base_args(root, smi, expected_driver_version="535.261.03"), FakeCommands(healthy_answers("h100x8")))
    assert result["failed_checks"] == ["driver_version_expected"]
    assert check(result, "driver_version_expected")["message"] == (
        "expected driver 535.261.03: kernel module is 565.57.01; user-space (nvidia-smi) is 565.57.01")


def test_expected_driver_version_with_nothing_readable(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    shutil.rmtree(root / "proc" / "driver")
    shutil.rmtree(root / "sys" / "module" / "nvidia")
    for library in (root / "usr" / "lib" / "x86_64-linux-gnu").iterdir():
        library.unlink()
    answers = {tuple(QUERY_ARGS): (9, fixture_text("error_smi-couldnt-communicate-with-driver.txt"), "")}
    result = run(base_args(root, smi, expected_driver_version="565.57.01"), FakeCommands(answers))
    assert check(result, "driver_version_expected")["status"] == "fail"
    assert "no driver version could be read" in check(result, "driver_version_expected")["message"]
    assert check(result, "driver_versions_match")["status"] == "skip"


def test_gpu_count_differs(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    result = run(base_args(root, smi, expected_gpu_count=4), FakeCommands(healthy_answers("h100x8")))
    assert result["failed_checks"] == ["gpu_count_expected"]


@pytest.mark.parametrize("profile, expected, message", [
    ("h100x8", "enabled", "GPU 0 MIG mode is Disabled"),
    ("a100x4-mig", "enabled", "GPU 1 MIG mode is Disabled; GPU 2 MIG mode is Disabled; GPU 3 MIG mode is Disabled"),
    ("a100x4-mig", "disabled", "GPU 0 MIG mode is Enabled"),
])
def test_mig_mode_differs(tmp_path, smi, profile, expected, message):
    root = build_profile(profile, tmp_path / "sim")
    result = run(base_args(root, smi, expected_mig_mode=expected), FakeCommands(healthy_answers(profile)))
    assert result["failed_checks"] == ["mig_mode_expected"]
    assert message in check(result, "mig_mode_expected")["message"]


def test_mig_mode_not_supported(tmp_path, smi):
    root = build_profile("rtx8000x10-version-mismatch", tmp_path / "sim")
    data = profile_data("rtx8000x10-version-mismatch")
    query = gpusim.render_query(data, list(QUERY_GPU_FIELDS), header=False, units=False)
    (root / "proc" / "driver" / "nvidia" / "version").write_text(fixture_text("proc-driver-nvidia-version_470.63.01_after-fix_CentOS7.txt"))
    result = run(base_args(root, smi, expected_mig_mode="enabled", expected_gpu_count=10), FakeCommands({tuple(QUERY_ARGS): (0, query, "")}))
    assert result["failed_checks"] == ["mig_mode_expected"]
    assert "GPU 0 (Quadro RTX 8000) does not support MIG" in check(result, "mig_mode_expected")["message"]
    disabled = run(base_args(root, smi, expected_mig_mode="disabled"), FakeCommands({tuple(QUERY_ARGS): (0, query, "")}))
    assert disabled["failed_checks"] == []


@pytest.mark.parametrize("log, critical, status, text", [
    ("xid_48_64_dbe-page-retirement_syslog.txt", None, "fail", "Xid 48 double-bit (uncorrectable) ECC error on 0000:07:00"),
    ("xid_119_gsp-rpc-timeout_dmesg-ctime.txt", None, "fail", "Xid 119 GSP RPC timeout on 0000:9b:00"),
    ("dmesg_gpu-fallen-off-bus_multiline-no-xid_open-kmod-570.158.01.txt", None, "fail", "Xid 79 GPU has fallen off the bus on 0000:b3:00"),
    ("xid_13_109_sm-exception-ctx-switch-timeout_dmesg-ctime.txt", None, "warn", "Xid 13 (graphics engine exception"),
    ("xid_13_109_sm-exception-ctx-switch-timeout_dmesg-ctime.txt", [13], "fail", "Xid 13 graphics engine exception"),
    ("xid_48_64_dbe-page-retirement_syslog.txt", [79], "warn", "Xid 48 (double-bit"),
    ("dmesg-grep-NVRM_api-mismatch_570.148.08-vs-570.148.06.txt", None, "pass", "no Xid events"),
])
def test_xid_events(tmp_path, smi, log, critical, status, text):
    root = build_profile("h100x8", tmp_path / "sim")
    (root / "dev" / "kmsg").write_text(fixture_text(log))
    options = {"critical_xids": critical} if critical is not None else {}
    result = run(base_args(root, smi, **options), FakeCommands(healthy_answers("h100x8")))
    xids = check(result, "critical_xids_absent")
    assert (xids["status"], xids["layer"]) == (status, "gpu")
    assert text in xids["message"]


@pytest.mark.parametrize("critical", [None, [48]], ids=["default-critical-xids", "79-not-critical"])
@pytest.mark.parametrize("log, pci, without_xid_line", [
    ("dmesg_gpu-fallen-off-bus_multiline-no-xid_open-kmod-570.158.01.txt", "0000:b3:00", True),
    ("synthetic/dmesg-T_gpu-fallen-off-bus_no-xid.txt", "0000:91:00", True),
    ("synthetic/journal_gpu-fallen-off-bus_no-xid.txt", "0000:91:00", True),
    ("synthetic/syslog_gpu-fallen-off-bus_with-xid-79.txt", "0000:91:00", False),
])
def test_gpu_fallen_off_the_bus_fails_like_xid_79(tmp_path, smi, log, pci, without_xid_line, critical):
    root = build_profile("h100x8", tmp_path / "sim")
    (root / "dev" / "kmsg").write_text(fixture_text(log))
    options = {"critical_xids": critical} if critical is not None else {}
    result = run(base_args(root, smi, **options), FakeCommands(healthy_answers("h100x8")))
    assert result["nvidia_gpu"]["kernel_log"]["fallen_off_bus"] == [pci]
    assert result["failed_checks"] == ["critical_xids_absent"]
    xids = check(result, "critical_xids_absent")
    assert "Xid 79 GPU has fallen off the bus on %s" % pci in xids["message"]
    assert ("(%s: kernel report without an Xid line)" % pci in xids["message"]) is without_xid_line
    assert xids["remedy"].startswith("GPU(s) %s fell off the bus: " % pci)
    assert_lost_gpu_remedy(xids["remedy"], "<pci>")
    assert "PAGE_RETIREMENT" not in xids["remedy"]


def test_multi_line_report_read_from_kmsg_records(tmp_path, smi):
    """/dev/kmsg, the module's first kernel log, escapes a record's newlines as \\x0a."""
    root = build_profile("h100x8", tmp_path / "sim")
    capture = fixture_text("dmesg_gpu-fallen-off-bus_multiline-no-xid_open-kmod-570.158.01.txt").splitlines()[:3]
    record = "\\x0a".join("NVRM:" + line.split("NVRM:", 1)[1] for line in capture)
    (root / "dev" / "kmsg").write_text("3,812,1843308145,-;%s\n SUBSYSTEM=pci\n DEVICE=+pci:0000:b3:00.0\n" % record)
    result = run(base_args(root, smi), FakeCommands(healthy_answers("h100x8")))
    assert result["nvidia_gpu"]["kernel_log"]["fallen_off_bus"] == ["0000:b3:00"]
    assert "Xid 79 GPU has fallen off the bus on 0000:b3:00" in check(result, "critical_xids_absent")["message"]


def test_fallen_off_bus_next_to_an_ecc_error_gets_both_remedies(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    (root / "dev" / "kmsg").write_text(fixture_text("xid_48_64_dbe-page-retirement_syslog.txt")
                                       + fixture_text("synthetic/syslog_gpu-fallen-off-bus_with-xid-79.txt"))
    result = run(base_args(root, smi), FakeCommands(healthy_answers("h100x8")))
    xids = check(result, "critical_xids_absent")
    assert "Xid 48 double-bit (uncorrectable) ECC error on 0000:07:00" in xids["message"]
    assert "Xid 79 GPU has fallen off the bus on 0000:91:00" in xids["message"]
    assert "without an Xid line" not in xids["message"]
    assert_lost_gpu_remedy(xids["remedy"], "<pci>")
    assert "PAGE_RETIREMENT,ROW_REMAPPER" in xids["remedy"]


def test_xid_event_mapped_to_gpu_index(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    line = fixture_text("xid_43_injected_grace-pci-domain-0009_dmesg.txt").replace("PCI:0009:01:00", "PCI:0000:9a:00")
    (root / "dev" / "kmsg").write_text(line)
    result = run(base_args(root, smi, critical_xids=[43]), FakeCommands(healthy_answers("h100x8")))
    assert result["nvidia_gpu"]["xid_events"][0]["gpu_index"] == 4  # 00000000:9A:00.0
    assert result["failed_checks"] == ["critical_xids_absent"]


def test_kernel_log_unreadable_skips_xid_check(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    (root / "dev" / "kmsg").unlink()
    result = run(base_args(root, smi), FakeCommands(healthy_answers("h100x8")))
    assert check(result, "critical_xids_absent")["status"] == "skip"
    assert "kernel log not readable" in check(result, "critical_xids_absent")["message"]


# ----------------------------------------------------------------------------- malformed output

@pytest.mark.parametrize("output, message", [
    ("", "empty (no GPU rows)"),
    ("0, NVIDIA H100 80GB HBM3, GPU-5e1a0000-0000-4000-8000-000000000100, 00000000:18:00.0, 8155", "row 1 has 5 values, expected 8"),
    ("Segmentation fault\n", "row 1 has 1 values"),
    ("0, NVIDIA H100 80GB HBM3, GPU-5e1a0000-0000-4000-8000-000000000100, 00000000:18:00.0, lots, Enabled, Disabled, 565.57.01",
     "field memory.total is 'lots', expected an integer"),
])
def test_malformed_query_output_is_a_clear_failure(tmp_path, smi, output, message):
    root = build_profile("h100x8", tmp_path / "sim")
    result = run(base_args(root, smi, fail_on_error=True), FakeCommands({tuple(QUERY_ARGS): (0, output, "")}))
    assert result["failed"] is True
    assert result["nvidia_gpu"]["nvidia_smi"]["error_class"] == "malformed_output"
    assert message in check(result, "nvidia_smi_runs")["message"]
    assert "nvidia_smi_runs: nvidia-smi failed (malformed_output" in result["msg"]


def test_truncated_mig_listing_is_a_clear_failure(tmp_path, smi):
    root = build_profile("a100x4-mig", tmp_path / "sim")
    answers = healthy_answers("a100x4-mig")
    answers[("-L",)] = (0, fixture_text("smi-L_4xA100-SXM4-80GB_MIG-on-GPU0-4x1g.20gb.txt")[:120], "")
    result = run(base_args(root, smi), FakeCommands(answers))
    assert result["nvidia_gpu"]["nvidia_smi"]["error_class"] == "malformed_output"
    assert "nvidia-smi -L output: line 2 is not a GPU or MIG line" in check(result, "nvidia_smi_runs")["message"]


@pytest.mark.parametrize("relative, content, problem", [
    ("proc/modules", "nvidia sixteen 37\n", "/proc/modules: line 1"),
    ("proc/devices", "garbage\n", "/proc/devices: line 1"),
    ("proc/driver/nvidia/version", "", "/proc/driver/nvidia/version: empty"),
    ("sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c", "\x06", "SecureBoot EFI variable: expected at least 5 bytes"),
])
def test_malformed_host_files_are_reported(tmp_path, smi, relative, content, problem):
    root = build_profile("h100x8", tmp_path / "sim")
    (root / relative).write_text(content)
    result = run(base_args(root, smi), FakeCommands(healthy_answers("h100x8")))
    assert any(problem in item for item in result["nvidia_gpu"]["read_errors"]), result["nvidia_gpu"]["read_errors"]


def test_empty_host_root(tmp_path, smi):
    """A host_root with nothing in it: every check is evaluated, none raises."""
    answers = {tuple(QUERY_ARGS): (9, fixture_text("error_smi-couldnt-communicate-with-driver.txt"), "")}
    result = run(base_args(tmp_path, smi, expected_driver_version="565.57.01", expected_gpu_count=1, expected_mig_mode="disabled"),
                 FakeCommands(answers))
    assert result["failed_checks"] == ["driver_module_loaded", "uvm_module_loaded", "device_nodes_present", "nvidia_smi_runs",
                                       "driver_version_expected", "gpu_count_expected", "mig_mode_expected"]
    assert result["nvidia_gpu"]["kernel"]["release"] is None


def test_nvidia_smi_not_installed(tmp_path):
    result = run(base_args(tmp_path, tmp_path / "missing" / "nvidia-smi"), FakeCommands({}))
    assert result["nvidia_gpu"]["nvidia_smi"]["error_class"] == "not_found"
    assert "install the driver user-space tools" in check(result, "nvidia_smi_runs")["remedy"]


def test_nvidia_smi_timeout(tmp_path, smi):
    commands = FakeCommands({tuple(QUERY_ARGS): (124, "", "")})
    with mock.patch.object(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name):
        result = run(base_args(tmp_path, smi), commands)
    assert result["nvidia_gpu"]["nvidia_smi"]["error_class"] == "timeout"


# ----------------------------------------------------------------------------- fail_on_error and bad input

def test_fail_on_error_lists_every_failed_check(tmp_path, smi):
    root = build_profile("h100x8-uvm-missing", tmp_path / "sim")
    result = run(base_args(root, smi, fail_on_error=True, expected_gpu_count=4), FakeCommands(healthy_answers("h100x8-uvm-missing")))
    assert result["failed"] is True
    assert result["msg"].startswith("3 of 12 GPU host checks failed: uvm_module_loaded: ")
    for check_id in ("uvm_module_loaded", "device_nodes_present", "gpu_count_expected"):
        assert check_id + ": " in result["msg"]


@pytest.mark.parametrize("options, message", [
    ({"expected_driver_version": "latest"}, "expected_driver_version is 'latest': it must be a driver version such as 535.261.03"),
    ({"expected_gpu_count": -1}, "expected_gpu_count is -1: it must be 0 or more"),
    ({"expected_mig_mode": "on"}, "value of expected_mig_mode must be one of: enabled, disabled, got: on"),
    ({"required_modules": ["nvidia", "nouveau"]}, "value of required_modules must be one or more of"),
    ({"critical_xids": [-5]}, "critical_xids is [-5]: Xid codes are positive integers"),
    ({"host_root": "/nonexistent/host"}, "host_root is '/nonexistent/host': it must be an existing directory"),
])
def test_bad_input_fails_before_anything(tmp_path, smi, options, message):
    commands = FakeCommands({})
    result = run(dict(base_args(tmp_path, smi), **options), commands)
    assert result["failed"] is True
    assert message in result["msg"]
    assert commands.calls == []


# ----------------------------------------------------------------------------- fix_device_nodes

def test_fix_check_mode_changes_nothing(tmp_path, smi):
    root = build_profile("h100x8-uvm-nodes-missing", tmp_path / "sim")
    result = run(base_args(root, smi, fix_device_nodes=True), FakeCommands(healthy_answers("h100x8")), check_mode=True)
    assert result["changed"] is True
    assert result["fix"]["actions"] == ["create /dev/nvidia-uvm c 510 0", "link /dev/char/510:0 -> ../nvidia-uvm",
                                        "create /dev/nvidia-uvm-tools c 510 1", "link /dev/char/510:1 -> ../nvidia-uvm-tools"]
    assert "/dev/nvidia-uvm: absent" in result["diff"]["before"]
    assert not (root / "dev" / "nvidia-uvm").exists()
    assert not os.path.lexists(root / "dev" / "char" / "510:0")
    assert result["failed_checks"] == ["device_nodes_present"]


def test_fix_creates_uvm_nodes_like_nvidia_modprobe_then_reports_no_change(tmp_path, smi):
    root = build_profile("h100x8-uvm-nodes-missing", tmp_path / "sim")
    first = run(base_args(root, smi, fix_device_nodes=True, fail_on_error=True), FakeCommands(healthy_answers("h100x8")))
    assert first["changed"] is True and not first.get("failed"), first.get("msg")
    assert first["failed_checks"] == []
    assert first["diff"]["after"] == ("/dev/nvidia-uvm: character device 510:0 mode 0666 root:root\n/dev/char/510:0: -> ../nvidia-uvm\n"
                                      "/dev/nvidia-uvm-tools: character device 510:1 mode 0666 root:root\n"
                                      "/dev/char/510:1: -> ../nvidia-uvm-tools\n")
    for name, minor in (("nvidia-uvm", 0), ("nvidia-uvm-tools", 1)):
        info = os.stat(root / "dev" / name)
        assert stat.S_ISCHR(info.st_mode) and os.major(info.st_rdev) == 510 and os.minor(info.st_rdev) == minor
        assert stat.S_IMODE(info.st_mode) == 0o666 and (info.st_uid, info.st_gid) == (0, 0)
        assert os.readlink(root / "dev" / "char" / ("510:%d" % minor)) == "../" + name
    second = run(base_args(root, smi, fix_device_nodes=True), FakeCommands(healthy_answers("h100x8")))
    assert second["changed"] is False and second["fix"]["actions"] == [] and "diff" not in second


def test_fix_replaces_a_wrong_file_and_mode(tmp_path, smi):
    root = build_profile("h100x8", tmp_path / "sim")
    (root / "dev" / "nvidia-uvm").unlink()
    (root / "dev" / "nvidia-uvm").write_text("not a device")
    os.chmod(root / "dev" / "nvidia-uvm-tools", 0o600)
    result = run(base_args(root, smi, fix_device_nodes=True), FakeCommands(healthy_answers("h100x8")))
    assert result["fix"]["actions"] == ["replace /dev/nvidia-uvm (not a character device)", "set mode 0666 and owner root:root on /dev/nvidia-uvm-tools"]
    assert stat.S_ISCHR(os.stat(root / "dev" / "nvidia-uvm").st_mode)
    assert stat.S_IMODE(os.stat(root / "dev" / "nvidia-uvm-tools").st_mode) == 0o666


def test_fix_loads_nvidia_uvm_with_modprobe_below_host_root(tmp_path, smi):
    root = build_profile("h100x8-uvm-missing", tmp_path / "sim")
    commands = FakeCommands(healthy_answers("h100x8"))
    modprobe = ("modprobe", "-d", str(root), "nvidia_uvm")
    commands.answers[modprobe] = (0, "", "")

    def load():  # what a successful modprobe does to /proc
        loaded = build_profile("h100x8-uvm-nodes-missing", tmp_path / "loaded")
        for name in ("modules", "devices"):
            (root / "proc" / name).write_text((loaded / "proc" / name).read_text())

    commands.side_effects[modprobe] = load
    with mock.patch.object(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: "/sbin/" + name):
        result = run(base_args(root, smi, fix_device_nodes=True, fail_on_error=True), commands)
    assert not result.get("failed"), result.get("msg")
    assert result["fix"]["actions"][:2] == ["load kernel module nvidia_uvm", "create /dev/nvidia-uvm c 510 0"]
    assert result["nvidia_gpu"]["modules"]["nvidia_uvm"] is True
    assert ["/sbin/modprobe", "-d", str(root), "nvidia_uvm"] in commands.calls


def test_fix_reports_modprobe_failure(tmp_path, smi):
    root = build_profile("h100x8-uvm-missing", tmp_path / "sim")
    commands = FakeCommands(healthy_answers("h100x8"))
    commands.answers[("modprobe", "-d", str(root), "nvidia_uvm")] = (1, "", "modprobe: FATAL: Module nvidia_uvm not found in directory x")
    with mock.patch.object(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: "/sbin/" + name):
        result = run(base_args(root, smi, fix_device_nodes=True), commands)
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"] == "fix_device_nodes failed: modprobe nvidia_uvm failed (rc 1): modprobe: FATAL: Module nvidia_uvm not found in directory x"
    assert not (root / "dev" / "nvidia-uvm").exists()


def test_fix_in_check_mode_with_uvm_missing(tmp_path, smi):
    root = build_profile("h100x8-uvm-missing", tmp_path / "sim")
    commands = FakeCommands(healthy_answers("h100x8"))
    result = run(base_args(root, smi, fix_device_nodes=True), commands, check_mode=True)
    assert result["changed"] is True
    assert result["fix"]["actions"][0] == "load kernel module nvidia_uvm"
    assert not any("modprobe" in call[0] for call in commands.calls)


# ----------------------------------------------------------------------------- the CUDA the driver runs

def _cuda_run(tmp_path, smi, table=(0, None, ""), **options):
    root = tmp_path / "sim" / "root"
    if not root.exists():
        root = build_profile("h100x8", tmp_path / "sim")
    answer = (table[0], H100_TABLE if table[1] is None else table[1], table[2])
    commands = FakeCommands({**healthy_answers("h100x8"), (): answer})
    return run(base_args(root, smi, **options), commands), commands


def test_the_cuda_version_is_read_only_when_asked(tmp_path, smi):
    result, commands = _cuda_run(tmp_path, smi)
    assert [call[1:] for call in commands.calls] == [QUERY_ARGS]
    assert check(result, "cuda_supported")["status"] == "skip"
    assert result["nvidia_gpu"]["driver"]["cuda_version"] is None
    result, _commands = _cuda_run(tmp_path, smi, read_cuda_version=True)
    assert check(result, "cuda_supported") == {"id": "cuda_supported", "layer": "driver", "status": "pass",
                                               "message": "the driver runs CUDA up to 12.7 (nvidia-smi)", "remedy": ""}
    assert (result["nvidia_gpu"]["driver"]["cuda_version"], result["nvidia_gpu"]["driver"]["cuda_version_source"]) == (
        "12.7", "nvidia-smi")


def test_a_driver_older_than_the_fleets_cuda_fails_with_the_driver_it_needs(tmp_path, smi):
    result, _commands = _cuda_run(tmp_path, smi, cuda_versions=["12.4", "13.0"])
    found = check(result, "cuda_supported")
    assert found["status"] == "fail" and result["failed_layers"] == ["driver"]
    assert "runs CUDA up to 12.7, but the fleet's images need CUDA 13.0" in found["message"]
    assert "580.65.06 or later" in found["remedy"]


def test_forward_compatibility_warns_instead_of_passing(tmp_path, smi):
    result, _commands = _cuda_run(tmp_path, smi, cuda_versions=["13.0"], cuda_forward_compat=True)
    found = check(result, "cuda_supported")
    assert found["status"] == "warn" and "cuda-compat" in found["message"]


def test_a_cuda_version_that_cannot_be_read_fails_only_when_the_fleet_needs_one(tmp_path, smi):
    broken = (0, fixture_text("smi-L_H200_driver-580.159.04.txt"), "")
    result, _commands = _cuda_run(tmp_path, smi, table=broken, cuda_versions=["12.4"])
    found = check(result, "cuda_supported")
    assert found["status"] == "fail" and "could not be read: nvidia-smi output: no" in found["message"]
    result, _commands = _cuda_run(tmp_path, smi, table=(3, "", "no table"), read_cuda_version=True)
    assert check(result, "cuda_supported")["status"] == "skip"
    assert "exited with 3" in result["nvidia_gpu"]["driver"]["cuda_version_error"]


def test_cuda_versions_are_major_minor(tmp_path, smi):
    result, _commands = _cuda_run(tmp_path, smi, cuda_versions=["12"])
    assert result["failed"] and result["msg"] == "cuda_versions has '12': expected CUDA releases as major.minor, such as 12.4"


def test_documentation_lists_every_option_and_check():
    import yaml

    doc = yaml.safe_load(nvidia_gpu_check.DOCUMENTATION)
    assert set(doc["options"]) == {"expected_driver_version", "expected_gpu_count", "expected_mig_mode", "required_modules", "critical_xids",
                                   "fix_device_nodes", "fail_on_error", "nvidia_smi_path", "host_root", "read_cuda_version",
                                   "cuda_versions", "cuda_forward_compat"}
    assert set(doc["attributes"]) == {"action_group", "check_mode", "diff_mode", "idempotent"}
    assert doc["attributes"]["action_group"]["membership"] == ["gpufleet.node.gpu"]
    for check_id in health.CHECK_IDS:
        assert check_id in " ".join(doc["description"])
    assert doc["options"]["critical_xids"]["default"] == health.DEFAULT_CRITICAL_XIDS
    assert 48 in health.DEFAULT_CRITICAL_XIDS and 79 in health.DEFAULT_CRITICAL_XIDS
    returned = yaml.safe_load(nvidia_gpu_check.RETURN)
    json.dumps(returned)
    facts = returned["nvidia_gpu"]["contains"]
    classes = set(name for name, dummy in parsers._SMI_ERROR_PATTERNS)
    assert classes <= set(health._SMI_REMEDIES)
    documented = " ".join(facts["nvidia_smi"]["contains"]["error_class"]["description"])
    for error_class in health._SMI_REMEDIES:
        assert "C(%s)" % error_class in documented, error_class
    assert set(facts["kernel_log"]["contains"]["api_mismatch"]["contains"]) == {"client", "kernel", "client_name", "client_pid"}


def test_zz_every_check_id_was_made_to_fail_above():
    """Runs last (file order): every check id failed in at least one test of this file
    (dev_char_symlinks_present can only warn)."""
    assert sorted(set(health.CHECK_IDS) - NOT_PASSING) == []
    assert "dev_char_symlinks_present" in NOT_PASSING
