"""Parsers of plugins/module_utils/_nvidia_parsers.py on the recorded real outputs in tests/fixtures/nvidia,
and on the hand-written synthetic texts of tests/fixtures/nvidia/synthetic for forms no capture exists of."""
from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils import _nvidia_parsers as p

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "nvidia"
SYNTHETIC = FIXTURES / "synthetic"
MOCK = FIXTURES / "mocknvml"


def fixture(name: str) -> str:
    """A fixture's text; names starting with 'synthetic/' are the hand-written texts, with 'mocknvml/' the lab's
    captures of NVIDIA's nvidia-smi on NVIDIA's mock NVML."""
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_every_fixture_has_provenance():
    sources = (FIXTURES / "SOURCES.md").read_text(encoding="utf-8")
    files = sorted(path.name for path in FIXTURES.glob("*.txt"))
    assert len(files) >= 40
    for name in files:
        assert f"`{name}`" in sources, name
    assert "synthetic/README.md" in sources and "mocknvml/README.md" in sources


@pytest.mark.parametrize("folder, at_least", [(SYNTHETIC, 5), (MOCK, 6)])
def test_every_text_that_is_not_a_hardware_capture_is_described_and_kept_apart(folder, at_least):
    # synthetic/: hand-written texts; mocknvml/: NVIDIA's nvidia-smi on NVIDIA's mock NVML in the lab (no GPU)
    readme = (folder / "README.md").read_text(encoding="utf-8")
    files = sorted(path.name for path in folder.glob("*.txt"))
    assert len(files) >= at_least
    for name in files:
        assert f"`{name}`" in readme, name
        assert not (FIXTURES / name).exists(), name


# ----------------------------------------------------------------------------- --query-gpu

RTX2080_FIELDS = (
    "power.limit,power.min_limit,power.max_limit,memory.total,vbios_version,driver_version,name,gpu_uuid,power.draw,"
    "temperature.gpu,temperature.memory,clocks.current.graphics,clocks.sm,clocks.mem,utilization.gpu,utilization.memory,"
    "fan.speed,pcie.link.width.current,pstate"
).split(",")


def test_query_noheader_nounits_rtx2080():
    rows = p.parse_query_gpu_csv(fixture("query-gpu-csv-noheader-nounits_RTX-2080_driver-440.64.txt"), RTX2080_FIELDS)
    assert len(rows) == 1
    row = rows[0]
    assert row["name"] == "GeForce RTX 2080"
    assert row["driver_version"] == "440.64"
    assert row["memory.total"] == "7979"
    assert row["gpu_uuid"] == "GPU-00000000-0000-0000-0000-000000000000"
    assert row["temperature.memory"] is None  # unbracketed N/A


@pytest.mark.parametrize(
    "name, count, checks",
    [
        ("query-gpu-csv_all-fields_H100-80GB-HBM3_MIG-enabled_driver-590.48.01.txt", 1,
         {"index": "0", "name": "NVIDIA H100 80GB HBM3", "pci.bus_id": "00000000:00:09.0", "memory.total": "81559",
          "persistence_mode": "Enabled", "mig.mode.current": "Enabled", "driver_version": "590.48.01",
          "vgpu_driver_capability.heterogenous_multivGPU": None, "display_mode": None}),
        ("query-gpu-csv_name-busid-driver-util-mem-temp-clocks_RTX-2060_460.91.03.txt", 1,
         {"name": "GeForce RTX 2060", "pci.bus_id": "00000000:09:00.0", "driver_version": "460.91.03", "memory.total": "5934",
          "utilization.gpu": "20", "clocks.max.graphics": "2160"}),
        ("query-gpu-csv_name-pcibus-index-uuid_5-GPU-mixed-GeForce.txt", 5,
         {"name": "GeForce GTX 1060 6GB", "pci.bus": "0x01", "index": "0", "uuid": "GPU-00000000-0000-0000-0000-000000000000"}),
        ("query-gpu-csv_pcibusid-mig-mode_H100_MIG-enabled.txt", 1, {"pci.bus_id": "00000000:01:00.0", "mig.mode.current": "Enabled"}),
        ("query-gpu-csv_module-fields_H200_driver-580.159.04.txt", 1,
         {"index": "0", "name": "NVIDIA H200", "pci.bus_id": "00000000:00:06.0", "memory.total": "143771",
          "persistence_mode": "Enabled", "mig.mode.current": "Disabled", "driver_version": "580.159.04"}),
        ("query-gpu-csv_T4_index-name-mem-fabric-state_530.30.02.txt", 1,
         {"index": "0", "name": "Tesla T4", "memory.total": "15360", "memory.used": "31", "fabric.state": "state  N/A"}),
    ],
)
def test_query_with_header(name, count, checks):
    rows = p.parse_query_gpu_csv(fixture(name))
    assert len(rows) == count
    for key, value in checks.items():
        assert rows[0][key] == value, key


def test_query_with_header_all_rows_of_5_gpu_rig():
    rows = p.parse_query_gpu_csv(fixture("query-gpu-csv_name-pcibus-index-uuid_5-GPU-mixed-GeForce.txt"))
    assert [row["index"] for row in rows] == ["0", "1", "2", "3", "4"]
    assert rows[1]["name"] == "GeForce GTX 1080 Ti"


def test_gpus_from_query_of_h100_capture():
    rows = p.parse_query_gpu_csv(fixture("query-gpu-csv_all-fields_H100-80GB-HBM3_MIG-enabled_driver-590.48.01.txt"))
    module_rows = [dict((field, row[field]) for field in p.QUERY_GPU_FIELDS) for row in rows]
    gpus = p.gpus_from_query(module_rows)
    assert gpus == [{
        "index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-00000000-0000-0000-0000-000000000000",
        "pci_bus_id": "00000000:00:09.0", "memory_total_mib": 81559, "persistence_mode": "Enabled", "mig_mode": "Enabled",
        "driver_version": "590.48.01", "mig_devices": [],
    }]


def test_gpus_from_module_query_of_h200_capture():
    # The module's own query (its fields, --format=csv,noheader,nounits) captured on a real H200.
    rows = p.parse_query_gpu_csv(fixture("query-gpu-csv-noheader-nounits_module-fields_H200_driver-580.159.04.txt"), p.QUERY_GPU_FIELDS)
    assert p.gpus_from_query(rows) == [{
        "index": 0, "name": "NVIDIA H200", "uuid": "GPU-00000000-0000-0000-0000-000000000000",
        "pci_bus_id": "00000000:00:06.0", "memory_total_mib": 143771, "persistence_mode": "Enabled", "mig_mode": "Disabled",
        "driver_version": "580.159.04", "mig_devices": [],
    }]


GOOD_ROW = "0, NVIDIA H100 80GB HBM3, GPU-00000000-0000-0000-0000-000000000000, 00000000:18:00.0, 81559, Enabled, Disabled, 565.57.01"


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        ("\n\n", "empty"),
        (None, "no output"),
        (GOOD_ROW.rsplit(",", 3)[0], "row 1 has 5 values, expected 8"),
        (GOOD_ROW + "\n0, NVIDIA H100 80GB HB", "row 2 has 2 values"),
        (GOOD_ROW + ", extra", "row 1 has 9 values"),
    ],
)
def test_query_malformed(text, message):
    with pytest.raises(p.NvidiaParseError, match=message):
        p.parse_query_gpu_csv(text, p.QUERY_GPU_FIELDS)


@pytest.mark.parametrize(
    "row, message",
    [
        (GOOD_ROW.replace("0, NVIDIA", "x, NVIDIA", 1), "field index is 'x', expected an integer"),
        (GOOD_ROW.replace("81559", "81559 MiB"), "field memory.total is '81559 MiB'"),
        (GOOD_ROW.replace("GPU-0000", "0000", 1), "does not start with GPU-"),
        (GOOD_ROW.replace("565.57.01", "garbage"), "driver_version 'garbage' is not a version"),
        (GOOD_ROW.replace("NVIDIA H100 80GB HBM3", "[N/A]"), "no value for name"),
    ],
)
def test_gpus_from_query_bad_values(row, message):
    rows = p.parse_query_gpu_csv(row, p.QUERY_GPU_FIELDS)
    with pytest.raises(p.NvidiaParseError, match=message):
        p.gpus_from_query(rows)


def test_query_header_only():
    with pytest.raises(p.NvidiaParseError, match="header only"):
        p.parse_query_gpu_csv(fixture("query-gpu-csv_pcibusid-mig-mode_H100_MIG-enabled.txt").splitlines()[0])


# ----------------------------------------------------------------------------- -L

@pytest.mark.parametrize(
    "name, expected",
    [
        ("smi-L_2xQuadro-RTX-4000_driver-535.129.03.txt", [("Quadro RTX 4000", []), ("Quadro RTX 4000", [])]),
        ("smi-L_4xA100-SXM4-80GB_MIG-on-GPU0-4x1g.20gb.txt",
         [("NVIDIA A100-SXM4-80GB", ["1g.20gb"] * 4)] + [("NVIDIA A100-SXM4-80GB", [])] * 3),
        ("smi-L_A100-80GB-PCIe_MIG-2x3g.40gb_driver-530.30.02.txt", [("NVIDIA A100 80GB PCIe", ["3g.40gb", "3g.40gb"])]),
        ("smi-L_A100-SXM4-80GB_MIG-7x1g.10gb_driver-535.216.01.txt", [("NVIDIA A100-SXM4-80GB", ["1g.10gb"] * 7)]),
        ("smi-L_H100-80GB-HBM3_MIG-4-devices_driver-590.48.01.txt",
         [("NVIDIA H100 80GB HBM3", ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"])]),
        ("smi-L_H200_driver-580.159.04.txt", [("NVIDIA H200", [])]),
    ],
)
def test_smi_list(name, expected):
    gpus = p.parse_smi_list(fixture(name))
    assert [(gpu["name"], [mig["profile"] for mig in gpu["mig_devices"]]) for gpu in gpus] == expected
    assert [gpu["index"] for gpu in gpus] == list(range(len(expected)))
    for gpu in gpus:
        assert gpu["uuid"].startswith("GPU-")
        assert [mig["index"] for mig in gpu["mig_devices"]] == list(range(len(gpu["mig_devices"])))
        assert all(mig["uuid"].startswith("MIG-") for mig in gpu["mig_devices"])


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "no GPU lines"),
        ("  MIG 1g.10gb     Device  0: (UUID: MIG-00000000-0000-0000-0000-000000000000)", "MIG device before any GPU"),
        ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-0000", "line 1 is not a GPU or MIG line"),
        (fixture("error_smi-couldnt-communicate-with-driver.txt"), "line 1 is not a GPU or MIG line"),
    ],
)
def test_smi_list_malformed(text, message):
    with pytest.raises(p.NvidiaParseError, match=message):
        p.parse_smi_list(text)


# ----------------------------------------------------------------------------- error classification

@pytest.mark.parametrize(
    "name, rc, error_class, pci, nvml",
    [
        ("error_smi-couldnt-communicate-with-driver.txt", 9, "cannot_communicate", None, None),
        ("error_no-devices-were-found.txt", 6, "no_devices", None, None),
        ("error_no-devices-were-found_invalid-index-i-1_T4.txt", 6, "no_devices", None, None),
        ("error_nvml-driver-library-mismatch_legacy-no-version-line.txt", 18, "driver_library_mismatch", None, None),
        ("error_nvml-driver-library-mismatch_legacy_10xQuadro-RTX-8000_470.txt", 18, "driver_library_mismatch", None, None),
        ("error_nvml-driver-library-mismatch_with-nvml-version_570.124.txt", 18, "driver_library_mismatch", None, "570.124"),
        ("error_nvml-unknown-error_container-lost-devices.txt", 255, "unknown_error", None, None),
        ("error_gpu-is-lost_reboot-to-recover.txt", 15, "gpu_lost", "0000:03:00.0", None),
        ("error_unable-to-determine-device-handle_new-format-no-space.txt", 255, "gpu_handle_lost", "0000:07:00.0", None),
        ("error_unable-to-determine-device-handle_old-format-with-space.txt", 255, "gpu_handle_lost", "0000:0B:00.0", None),
        ("synthetic/error_unable-to-determine-device-handle_unknown-error.txt", 255, "gpu_handle_lost", "0000:91:00.0", None),
        ("mig-lci_error_insufficient-permissions.txt", 4, "insufficient_permissions", None, None),
    ],
)
def test_classify_real_errors(name, rc, error_class, pci, nvml):
    text = fixture(name)
    result = p.classify_smi_output(text, rc)
    assert result["error_class"] == error_class
    assert result["pci_bus_id"] == pci
    assert result["nvml_version"] == nvml
    assert result["message"] == text.strip().splitlines()[0].strip()
    # the text alone classifies the same way (exit status unknown)
    assert p.classify_smi_output(text, 0)["error_class"] == error_class


@pytest.mark.parametrize("name", ["smi-L_2xQuadro-RTX-4000_driver-535.129.03.txt",
                                  "query-gpu-csv-noheader-nounits_RTX-2080_driver-440.64.txt",
                                  "smi-table_8xH100-80GB-HBM3_driver-565.57.01.txt",
                                  "smi-table_H200_driver-580.159.04.txt"])
def test_classify_healthy_output_is_none(name):
    assert p.classify_smi_output(fixture(name), 0) is None


def test_classify_unknown_failure_and_empty():
    assert p.classify_smi_output("", 3) == {"error_class": "failed", "message": "nvidia-smi exited with status 3 and printed nothing",
                                            "pci_bus_id": None, "nvml_version": None}
    assert p.classify_smi_output("Segmentation fault", 139)["message"] == "Segmentation fault"


@pytest.mark.parametrize("reason, error_class", [
    ("Unknown Error", "gpu_handle_lost"),
    ("GPU requires reset", "gpu_handle_lost"),
    ("GPU is lost.  Reboot the system to recover this GPU", "gpu_lost"),
    ("Insufficient Permissions", "insufficient_permissions"),
])
def test_device_handle_error_classes(reason, error_class):
    line = "Unable to determine the device handle for GPU0000:91:00.0: " + reason
    assert p.classify_smi_output(GOOD_ROW + "\n" + line, 255)["error_class"] == error_class
    # "Unknown Error" without a device handle line stays the container's lost-cgroup case
    assert p.classify_smi_output(fixture("error_nvml-unknown-error_container-lost-devices.txt"), 255)["error_class"] == "unknown_error"


def test_device_handle_errors_next_to_rows():
    text = GOOD_ROW + "\n" + fixture("error_gpu-is-lost_reboot-to-recover.txt")
    errors = p.device_handle_errors(text)
    assert errors == [{"pci_bus_id": "0000:03:00.0", "reason": "GPU is lost.  Reboot the system to recover this GPU",
                       "line": fixture("error_gpu-is-lost_reboot-to-recover.txt").strip()}]
    assert len(p.parse_query_gpu_csv(text, p.QUERY_GPU_FIELDS)) == 1


# ----------------------------------------------------------------------------- driver versions

@pytest.mark.parametrize(
    "name, version, flavour, arch",
    [
        ("proc-driver-nvidia-version_470.103.01_stale-module-during-mismatch.txt", "470.103.01", "proprietary", "x86_64"),
        ("proc-driver-nvidia-version_470.63.01_after-fix_CentOS7.txt", "470.63.01", "proprietary", "x86_64"),
        ("proc-driver-nvidia-version_jetson-aarch64_35.3.1.txt", "35.3.1", "open", "aarch64"),
        ("proc-driver-nvidia-version_proprietary_384.98.txt", "384.98", "proprietary", "x86_64"),
        ("proc-driver-nvidia-version_proprietary_580.173.02_during-mismatch.txt", "580.173.02", "proprietary", "x86_64"),
        ("proc-driver-nvidia-version_open-kmod_580.159.04_H200.txt", "580.159.04", "open", "x86_64"),
    ],
)
def test_proc_driver_version(name, version, flavour, arch):
    parsed = p.parse_proc_driver_version(fixture(name))
    assert (parsed["version"], parsed["flavour"], parsed["arch"]) == (version, flavour, arch)
    assert parsed["gcc"].startswith("gcc version")


def test_proc_driver_version_open_module_from_dmesg_banner():
    # The open module's banner (dmesg) has the same shape as its /proc/driver/nvidia/version line.
    banner = fixture("xid_31_mmu-fault_open-kmod-595.71.05_dmesg.txt").splitlines()[0].split("] NVRM: loading ", 1)[1]
    parsed = p.parse_proc_driver_version("NVRM version: " + banner)
    assert (parsed["version"], parsed["flavour"], parsed["arch"]) == ("595.71.05", "open", "x86_64")


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module", "first line is not"),
    ("GCC version:  gcc version 4.8.5", "first line is not"),
    (None, "no output"),
])
def test_proc_driver_version_malformed(text, message):
    with pytest.raises(p.NvidiaParseError, match=message):
        p.parse_proc_driver_version(text)


@pytest.mark.parametrize("name, version", [
    ("sys-module-nvidia-version_470.103.01_stale-module-during-mismatch.txt", "470.103.01"),
    ("sys-module-nvidia-version_470.63.01_after-fix.txt", "470.63.01"),
    ("sys-module-nvidia-version_580.159.04_H200.txt", "580.159.04"),
])
def test_sys_module_version(name, version):
    assert p.parse_module_version(fixture(name)) == version


@pytest.mark.parametrize("text", ["", "470.", "abc", "470.63.01 extra"])
def test_sys_module_version_malformed(text):
    with pytest.raises(p.NvidiaParseError, match="is not a version"):
        p.parse_module_version(text)


@pytest.mark.parametrize("filename, version", [
    ("libnvidia-ml.so.535.261.03", "535.261.03"), ("libnvidia-ml.so.570.124", "570.124"),
    ("libnvidia-ml.so.1", None), ("libnvidia-ml.so", None), ("libcuda.so.535.261.03", None),
])
def test_version_from_library_name(filename, version):
    assert p.version_from_library_name(filename) == version


# ----------------------------------------------------------------------------- kernel files

@pytest.mark.parametrize(
    "name, loaded, not_loaded",
    [
        ("lsmod-grep-nv_nvidia-only-NO-nvidia_uvm_410.48.txt", ["nvidia"], ["nvidia_uvm", "nvidia_drm", "nvidia_modeset"]),
        ("lsmod-grep-nvidia_desktop_uvm-drm-modeset_595.71.05.txt", ["nvidia", "nvidia_uvm", "nvidia_drm", "nvidia_modeset"],
         ["nvidia_peermem"]),
        ("lsmod-grep-nvidia_empty_module-not-loaded.txt", [], ["nvidia", "nvidia_uvm"]),
    ],
)
def test_modules(name, loaded, not_loaded):
    modules = p.parse_proc_modules(fixture(name))
    for module in loaded:
        assert module in modules
    for module in not_loaded:
        assert module not in modules


def test_modules_fields_and_proc_modules_format():
    modules = p.parse_proc_modules(fixture("lsmod-grep-nvidia_desktop_uvm-drm-modeset_595.71.05.txt"))
    assert modules["nvidia"] == {"size": 16297984, "refcount": 39, "used_by": ["nvidia_uvm", "nvidia_modeset"], "state": None}
    # /proc/modules layout (trailing comma in the used-by list, "-" for none, state and address columns)
    text = "nvidia_uvm 2461696 0 - Live 0x0000000000000000 (POE)\nnvidia_modeset 2187264 3 nvidia_drm, Live 0x0000000000000000 (POE)\n"
    modules = p.parse_proc_modules(text)
    assert modules["nvidia_uvm"] == {"size": 2461696, "refcount": 0, "used_by": [], "state": "Live"}
    assert modules["nvidia_modeset"]["used_by"] == ["nvidia_drm"]


def test_modules_of_a_kernel_without_module_unloading():
    # A real H200 host whose kernel is built without CONFIG_MODULE_UNLOAD: "- -" for the use count and the users.
    modules = p.parse_proc_modules(fixture("proc-modules_nvidia_no-module-unload_open-kmod-580.159.04_H200.txt"))
    assert modules == {
        "nvidia_uvm": {"size": 1875968, "refcount": None, "used_by": [], "state": "Live"},
        "nvidia": {"size": 14299136, "refcount": None, "used_by": [], "state": "Live"},
    }


@pytest.mark.parametrize("text", ["nvidia", "nvidia sixteen 37", "nvidia 16797696", "nvidia 16797696 x -", "nvidia 16797696 -- -"])
def test_modules_malformed(text):
    with pytest.raises(p.NvidiaParseError, match="is not \"name size refcount"):
        p.parse_proc_modules(text)


def test_proc_devices_of_an_h200_host():
    devices = p.parse_proc_devices(fixture("proc-devices_H200-vm_nvidia-580.159.04.txt"))["character"]
    # nvidia and nvidiactl share major 195; nvidia-uvm has its own dynamic major
    assert (devices["nvidia"], devices["nvidiactl"], devices["nvidia-uvm"], devices["nvidia-caps"]) == (195, 195, 238, 241)


def test_proc_devices_real_capture():
    devices = p.parse_proc_devices(fixture("proc-devices_debian12-vm_no-nvidia.txt"))
    assert devices["character"]["mem"] == 1
    assert devices["character"]["pts"] == 136
    assert devices["block"]["loop"] == 7
    assert "nvidia-uvm" not in devices["character"]


@pytest.mark.parametrize("text, message", [
    ("", "no \"Character devices:\" section"),
    ("  1 mem\n", "not \"major name\" inside a section"),
    ("Character devices:\nmem 1\n", "not \"major name\""),
])
def test_proc_devices_malformed(text, message):
    with pytest.raises(p.NvidiaParseError, match=message):
        p.parse_proc_devices(text)


@pytest.mark.parametrize("text, iommu", [
    ("BOOT_IMAGE=/vmlinuz-6.1.0 root=UUID=x ro quiet intel_iommu=on iommu=pt", {"intel_iommu": "on", "iommu": "pt"}),
    ("root=/dev/sda1 amd_iommu=off iommu.passthrough=1 iommu.strict=0", {"amd_iommu": "off", "iommu.passthrough": "1", "iommu.strict": "0"}),
    ("console=ttyS0 quiet panic=1 -- iommu=pt", {}),
    ("", {}),
])
def test_cmdline(text, iommu):
    assert p.parse_cmdline(text) == {"raw": text, "iommu": iommu}


@pytest.mark.parametrize("data, value", [(b"\x06\x00\x00\x00\x01", True), (b"\x06\x00\x00\x00\x00", False)])
def test_secure_boot(data, value):
    assert p.parse_secure_boot_efivar(data) is value


@pytest.mark.parametrize("data, message", [(b"", "got 0"), (b"\x06\x00\x00", "got 3"), (b"\x06\x00\x00\x00\x07", "value byte is 7")])
def test_secure_boot_malformed(data, message):
    with pytest.raises(p.NvidiaParseError, match=message):
        p.parse_secure_boot_efivar(data)


# ----------------------------------------------------------------------------- kernel log

@pytest.mark.parametrize(
    "name, codes, pci, first",
    [
        ("xid_119_gsp-rpc-timeout_dmesg-ctime.txt", [119] * 5, "0000:9b:00",
         {"pid": 2024380, "process": "nvidia-smi", "timestamp": "[Sun Feb 23 16:24:18 2025]"}),
        ("xid_13_109_sm-exception-ctx-switch-timeout_dmesg-ctime.txt", [13, 13, 13, 109], "0000:cb:00",
         {"pid": None, "process": None, "message": "Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"}),
        ("xid_13_43_sm-warp-exception_dmesg-decode-iso.txt", [13] * 16 + [43], "0000:38:00",
         {"timestamp": "kern  :warn  : 2025-01-21T04:41:44,283302+00:00"}),
        ("xid_31_109_mmu-fault-ctx-switch-timeout_dmesg-ctime.txt", [31, 109], "0000:cb:00", {"pid": 626486, "process": "pt_main_thread"}),
        ("xid_31_mmu-fault_open-kmod-595.71.05_dmesg.txt", [31], "0000:01:00", {"pid": 13705, "process": "UnrealEditor"}),
        ("xid_43_injected_grace-pci-domain-0009_dmesg.txt", [43], "0009:01:00", {"process": "trigger_xid", "message": "channel 0x0b00000a"}),
        ("xid_48_64_dbe-page-retirement_syslog.txt", [48, 64], "0000:07:00",
         {"pid": None, "timestamp": "Dec  2 11:38:47 worker4 kernel: [  219.470994]"}),
        ("synthetic/syslog_gpu-fallen-off-bus_with-xid-79.txt", [79], "0000:91:00",
         {"pid": None, "process": None, "message": "GPU has fallen off the bus.",
          "timestamp": "Jan  2 03:04:05 gpu-node-07 kernel: [ 4711.081522]"}),
    ],
)
def test_xid_events(name, codes, pci, first):
    events = p.parse_xid_events(fixture(name))
    assert [event["code"] for event in events] == codes
    assert {event["pci"] for event in events} == {pci}
    for key, value in first.items():
        assert events[0][key] == value, key


@pytest.mark.parametrize("name", [
    "dmesg-grep-NVRM_api-mismatch_570.148.08-vs-570.148.06.txt",
    "dmesg_gpu-fallen-off-bus_multiline-no-xid_open-kmod-570.158.01.txt",
    "dmesg_no-nvidia-adapter-probed_nouveau-conflict_3-GPU.txt",
    "syslog_no-devices-found_rminitadapter-failed_RTX5090.txt",
    "lsmod-grep-nvidia_empty_module-not-loaded.txt",
    "dmesg-grep-nvidia_open-kmod-580.159.04_H200_no-xid.txt",
    "synthetic/dmesg-T_gpu-fallen-off-bus_no-xid.txt",
    "synthetic/journal_gpu-fallen-off-bus_no-xid.txt",
    "synthetic/journal_api-mismatch_client-named_no-prefix-continuations.txt",
])
def test_no_xid_events(name):
    assert p.parse_xid_events(fixture(name)) == []


def test_xid_in_kmsg_records():
    line = fixture("xid_43_injected_grace-pci-domain-0009_dmesg.txt").split("] ", 1)[1].strip()
    records = "4,1024,1231741378609,-;%s\n SUBSYSTEM=pci\n DEVICE=+pci:0009:01:00.0\n" % line
    events = p.parse_xid_events(records)
    assert [(event["code"], event["pci"], event["timestamp"]) for event in events] == [(43, "0009:01:00", None)]


@pytest.mark.parametrize("name, client, kernel, client_name, client_pid", [
    ("dmesg-grep-NVRM_api-mismatch_570.148.08-vs-570.148.06.txt", "570.148.08", "570.148.06", None, None),
    ("dmesg_api-mismatch_570.153.02-vs-570.144_with-rminitadapter-failed.txt", "570.153.02", "570.144", None, None),
    ("syslog_api-mismatch_rsyslog-escaped_535.54.03-vs-530.30.02.txt", "535.54.03", "530.30.02", None, None),
    ("synthetic/dmesg_api-mismatch_client-named_570.148.08-vs-570.148.06.txt", "570.148.08", "570.148.06", "nvidia-smi", 1234),
    ("synthetic/dmesg-T_api-mismatch_client-named_no-prefix-continuations.txt", "575.57.08", "570.158.01", "dcgm-exporter", 2718),
    ("synthetic/journal_api-mismatch_client-named_no-prefix-continuations.txt", "580.65.06", "575.57.08", "nvidia-smi", 4242),
    ("synthetic/syslog_api-mismatch_client-named_rsyslog-escaped.txt", "550.163.01", "550.144.03", "nv-hostengine", 31337),
])
def test_api_mismatch(name, client, kernel, client_name, client_pid):
    # client: the version of the client (user space); kernel: the loaded kernel module's
    assert p.parse_api_mismatch(fixture(name)) == {"client": client, "kernel": kernel, "client_name": client_name, "client_pid": client_pid}


@pytest.mark.parametrize("name", ["xid_48_64_dbe-page-retirement_syslog.txt", "dmesg_no-nvidia-adapter-probed_nouveau-conflict_3-GPU.txt",
                                  "synthetic/syslog_gpu-fallen-off-bus_with-xid-79.txt", ""])
def test_no_api_mismatch(name):
    assert p.parse_api_mismatch(fixture(name) if name else "") is None


@pytest.mark.parametrize("name, addresses", [
    ("dmesg_gpu-fallen-off-bus_multiline-no-xid_open-kmod-570.158.01.txt", ["0000:b3:00"]),
    ("synthetic/dmesg-T_gpu-fallen-off-bus_no-xid.txt", ["0000:91:00"]),
    ("synthetic/journal_gpu-fallen-off-bus_no-xid.txt", ["0000:91:00"]),
    ("synthetic/syslog_gpu-fallen-off-bus_with-xid-79.txt", ["0000:91:00"]),
    ("xid_48_64_dbe-page-retirement_syslog.txt", []),
    ("xid_119_gsp-rpc-timeout_dmesg-ctime.txt", []),
    ("synthetic/dmesg_api-mismatch_client-named_570.148.08-vs-570.148.06.txt", []),
])
def test_fallen_off_bus(name, addresses):
    assert p.parse_fallen_off_bus(fixture(name)) == addresses


# ----------------------------------------------------------------------------- kernel log formats
# The message lines of one kernel record (from a real capture or a synthetic text) rendered in every log
# format the module may be given, between messages of another subsystem: a multi-line report must be read
# whatever the format, its continued lines with or without 'NVRM:'.

def _message_lines(name, count):
    """The first count message lines of a dmesg fixture, without the timestamp or indentation."""
    return ["NVRM:" + line.split("NVRM:", 1)[1] for line in fixture(name).splitlines()[:count]]


OLD_MISMATCH = _message_lines("dmesg_api-mismatch_570.153.02-vs-570.144_with-rminitadapter-failed.txt", 4)
NEW_MISMATCH = _message_lines("synthetic/dmesg_api-mismatch_client-named_570.148.08-vs-570.148.06.txt", 6)[1:]
OLD_FALLEN_OFF = _message_lines("dmesg_gpu-fallen-off-bus_multiline-no-xid_open-kmod-570.158.01.txt", 3)
NEW_FALLEN_OFF = _message_lines("synthetic/dmesg-T_gpu-fallen-off-bus_no-xid.txt", 1)
UNRELATED = "nvidia-uvm: Loaded the UVM driver, major device number 510."


def _without_nvrm(lines):
    """The record's continued lines without their 'NVRM:' prefix (some log formats and drivers)."""
    return lines[:1] + [line.split("NVRM:", 1)[1].strip() for line in lines[1:]]


DMESG, DMESG_T = "[ 4711.081516] ", "[Thu Jan  2 03:04:05 2025] "
JOURNAL, SYSLOG = "Jan 02 03:04:05 gpu-node-07 kernel: ", "Jan  2 03:04:05 gpu-node-07 kernel: [ 4711.081516] "
KMSG = "3,1024,4711081516,-;"
RSYSLOG_NEWLINE, KMSG_NEWLINE = "#012#011", "\\x0a"
# log format: (prefix of a record's first line, prefix of its continued lines or the escape that joins them
# into one line, prefix of the other subsystem's messages around it)
LOG_FORMATS = {
    "dmesg": (DMESG, " " * len(DMESG), "[ 4711.081600] "),
    "dmesg -T": (DMESG_T, " " * len(DMESG_T), "[Thu Jan  2 03:04:06 2025] "),
    "dmesg, indentation lost": (DMESG, "", "[ 4711.081600] "),
    "dmesg, timestamp on every line": (DMESG, DMESG, "[ 4711.081600] "),
    "no timestamps (dmesg -t, journalctl -o cat)": ("", "", ""),
    "journal, prefix on every line": (JOURNAL, JOURNAL, "Jan 02 03:04:06 gpu-node-07 kernel: "),
    "journal, continued lines indented": (JOURNAL, " " * len(JOURNAL), "Jan 02 03:04:06 gpu-node-07 kernel: "),
    "syslog, prefix on every line": (SYSLOG, SYSLOG, "Jan  2 03:04:06 gpu-node-07 kernel: [ 4711.081600] "),
    "rsyslog escapes": (SYSLOG, RSYSLOG_NEWLINE, "Jan  2 03:04:06 gpu-node-07 kernel: [ 4711.081600] "),
    "/dev/kmsg records": (KMSG, KMSG_NEWLINE, "6,1025,4711081600,-;"),
}


def _record(lines, prefix, continued):
    """One kernel record (its message lines) as a log format prints it."""
    if continued == RSYSLOG_NEWLINE:
        return prefix + continued.join(lines) + "\n"
    if continued == KMSG_NEWLINE:
        return prefix + continued.join(lines) + "\n SUBSYSTEM=pci\n DEVICE=+pci:0000:91:00.0\n"
    return "".join((prefix if number == 0 else continued) + line + "\n" for number, line in enumerate(lines))


def render(lines, log_format):
    """The record between two messages of another subsystem, as log_format prints them."""
    prefix, continued, other = LOG_FORMATS[log_format]
    unrelated = _record([UNRELATED], other, continued)
    return unrelated + _record(lines, prefix, continued) + unrelated


@pytest.mark.parametrize("log_format", sorted(LOG_FORMATS))
@pytest.mark.parametrize("lines, expected", [
    (OLD_MISMATCH, {"client": "570.153.02", "kernel": "570.144", "client_name": None, "client_pid": None}),
    (_without_nvrm(OLD_MISMATCH), {"client": "570.153.02", "kernel": "570.144", "client_name": None, "client_pid": None}),
    (NEW_MISMATCH, {"client": "570.148.08", "kernel": "570.148.06", "client_name": "nvidia-smi", "client_pid": 1234}),
    (_without_nvrm(NEW_MISMATCH), {"client": "570.148.08", "kernel": "570.148.06", "client_name": "nvidia-smi", "client_pid": 1234}),
], ids=["old", "old-no-prefix", "client-named", "client-named-no-prefix"])
def test_api_mismatch_in_every_log_format(lines, expected, log_format):
    assert p.parse_api_mismatch(render(lines, log_format)) == expected


@pytest.mark.parametrize("log_format", sorted(LOG_FORMATS))
@pytest.mark.parametrize("lines, expected", [
    (OLD_FALLEN_OFF, ["0000:b3:00"]),
    (_without_nvrm(OLD_FALLEN_OFF), ["0000:b3:00"]),
    (NEW_FALLEN_OFF, ["0000:91:00"]),
], ids=["probe-time", "probe-time-no-prefix", "gpu-line"])
def test_fallen_off_bus_in_every_log_format(lines, expected, log_format):
    assert p.parse_fallen_off_bus(render(lines, log_format)) == expected


@pytest.mark.parametrize("log_format", [name for name in sorted(LOG_FORMATS) if LOG_FORMATS[name][0] != KMSG and LOG_FORMATS[name][2]])
def test_a_report_cut_by_other_messages_is_not_read(log_format):
    """Messages of another subsystem between two halves of a report: the halves are not read as one report."""
    cut = render(OLD_MISMATCH[:1], log_format) + render(_without_nvrm(OLD_MISMATCH)[1:], log_format)
    assert p.parse_api_mismatch(cut) is None


# Without log prefixes a line without 'NVRM:' after a report can only be taken as its continuation.
PREFIXED_FORMATS = [name for name in sorted(LOG_FORMATS) if LOG_FORMATS[name][2]]


@pytest.mark.parametrize("log_format", PREFIXED_FORMATS)
def test_a_report_interleaved_with_another_message_is_read(log_format):
    """A message of another subsystem between the lines of a report (each line with 'NVRM:') is left out."""
    prefix, continued, other = LOG_FORMATS[log_format]
    text = _record(OLD_MISMATCH[:1], prefix, continued) + _record([UNRELATED], other, continued) + _record(OLD_MISMATCH[1:], prefix, continued)
    assert p.parse_api_mismatch(text) == {"client": "570.153.02", "kernel": "570.144", "client_name": None, "client_pid": None}


@pytest.mark.parametrize("log_format", PREFIXED_FORMATS)
def test_a_message_with_its_own_log_prefix_is_not_a_continuation(log_format):
    """The second half of a report as a message of its own (another record, another time): not read as continued."""
    prefix, continued, other = LOG_FORMATS[log_format]
    halves = _record(OLD_MISMATCH[:1], prefix, continued) + _record(_without_nvrm(OLD_MISMATCH)[1:], other, continued)
    assert p.parse_api_mismatch(halves) is None


@pytest.mark.parametrize("log_format", sorted(LOG_FORMATS))
def test_xid_line_in_every_log_format(log_format):
    line = fixture("synthetic/syslog_gpu-fallen-off-bus_with-xid-79.txt").splitlines()[2].split("] ", 1)[1]
    timestamp = None if log_format == "/dev/kmsg records" else LOG_FORMATS[log_format][0].strip() or None
    events = p.parse_xid_events(render([line], log_format))
    assert [(event["code"], event["pci"], event["timestamp"]) for event in events] == [(79, "0000:91:00", timestamp)]


@pytest.mark.parametrize("address, normalized", [
    ("00000000:18:00.0", "0000:18:00"), ("PCI:0000:9b:00", "0000:9b:00"), ("0009:01:00", "0009:01:00"),
    ("0000:0B:00.0", "0000:0b:00"), ("garbage", None), ("", None), (None, None),
])
def test_normalize_pci(address, normalized):
    assert p.normalize_pci(address) == normalized


# ----------------------------------------------------------------------------- NVIDIA's nvidia-smi on NVIDIA's mock NVML

def test_module_query_on_the_mock_reads_the_profile_gpus():
    rows = p.parse_query_gpu_csv(
        fixture("mocknvml/query-gpu-csv-noheader-nounits_module-fields_8xH100_mock-nvml_real-nvidia-smi-535.261.03.txt"),
        p.QUERY_GPU_FIELDS)
    gpus = p.gpus_from_query(rows)
    assert [gpu["index"] for gpu in gpus] == list(range(8))
    assert {gpu["name"] for gpu in gpus} == {"NVIDIA H100 80GB HBM3"}
    assert {gpu["driver_version"] for gpu in gpus} == {"535.261.03"}
    assert {gpu["memory_total_mib"] for gpu in gpus} == {81559}
    assert gpus[0]["uuid"] == "GPU-5e1a0000-0000-4000-8000-000000000100"
    # the mock's sysfs form of the bus id normalises to the same address as real NVML's 8-digit domain
    assert p.normalize_pci(gpus[0]["pci_bus_id"]) == p.normalize_pci("00000000:18:00.0")


def test_query_with_header_on_the_mock():
    rows = p.parse_query_gpu_csv(fixture("mocknvml/query-gpu-csv_module-fields_8xH100_mock-nvml_real-nvidia-smi-535.261.03.txt"))
    assert len(rows) == 8
    assert rows[7]["uuid"] == "GPU-5e1a0000-0000-4000-8000-000000000107"


def test_list_on_the_mock():
    gpus = p.parse_smi_list(fixture("mocknvml/smi-L_8xH100_mock-nvml_real-nvidia-smi-535.261.03.txt"))
    assert [(gpu["index"], gpu["name"], gpu["mig_devices"]) for gpu in gpus] == [
        (index, "NVIDIA H100 80GB HBM3", []) for index in range(8)]


@pytest.mark.parametrize(
    "name, rc, error_class, nvml",
    [
        ("error_nvml-driver-library-mismatch_mock-nvml_real-nvidia-smi-535.309.01_module-535.261.03.txt", 18,
         "driver_library_mismatch", "535.309"),
        ("query-gpu-csv-noheader-nounits_module-fields_GPUs-2-5-lost_mock-nvml_real-nvidia-smi-535.309.01.txt", 0,
         "gpu_lost", None),
    ],
)
def test_classify_nvidia_smi_on_the_mock(name, rc, error_class, nvml):
    result = p.classify_smi_output(fixture("mocknvml/" + name), rc)
    assert result["error_class"] == error_class
    assert result["nvml_version"] == nvml


@pytest.mark.parametrize("name", ["smi-L_8xH100_mock-nvml_real-nvidia-smi-535.261.03.txt",
                                  "query-gpu-csv-noheader-nounits_module-fields_8xH100_mock-nvml_real-nvidia-smi-535.261.03.txt",
                                  "smi-table_8xH100_mock-nvml_real-nvidia-smi-535.261.03.txt"])
def test_classify_healthy_output_of_the_mock_is_none(name):
    assert p.classify_smi_output(fixture("mocknvml/" + name), 0) is None


@pytest.mark.parametrize(("name", "driver", "cuda"), [
    ("smi-table_8xH100-80GB-HBM3_driver-565.57.01.txt", "565.57.01", "12.7"),
    ("smi-table_H200_driver-580.159.04.txt", "580.159.04", "13.0"),
    ("mocknvml/smi-table_8xH100_mock-nvml_real-nvidia-smi-535.261.03.txt", "535.261.03", "12.2"),
])
def test_the_table_header_gives_the_driver_and_the_highest_cuda_it_runs(name, driver, cuda):
    header = p.parse_smi_header(fixture(name))
    assert (header["driver_version"], header["cuda_version"]) == (driver, cuda)
    assert header["nvidia_smi_version"] == driver


def test_a_header_without_cuda_says_none_and_other_output_is_refused():
    line = "| NVIDIA-SMI 535.261.03             Driver Version: 535.261.03   CUDA Version: N/A      |"
    assert p.parse_smi_header(line)["cuda_version"] is None
    with pytest.raises(p.NvidiaParseError, match="no .NVIDIA-SMI"):
        p.parse_smi_header(fixture("error_nvml-driver-library-mismatch_with-nvml-version_570.124.txt"))
    with pytest.raises(p.NvidiaParseError, match="no .NVIDIA-SMI"):
        p.parse_smi_header(fixture("smi-L_H200_driver-580.159.04.txt"))
