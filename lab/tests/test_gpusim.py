"""The SIMULATED GPU host kit (lab/gpusim): profiles, builder, nvidia-smi stand-in, and
nvidia_gpu_check run for real (no mocks) against every profile."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.node.plugins.module_utils import _nvidia_parsers as parsers
from ansible_collections.gpufleet.node.plugins.modules import nvidia_gpu_check

from gpusim_helpers import FIXTURES, KIT, PROFILES, REPO, build_profile, gpusim, install_host_userspace, profile_data, requires_mknod

SCENARIO_VARS = yaml.safe_load((REPO / "extensions" / "molecule" / "nvidia_gpu_check_hosts" / "vars" / "expectations.yml").read_text())


def test_profiles_exist_and_are_machine_readable():
    assert {"h100x8", "a100x4-mig", "a100x2-mig-1g10gb", "rtx8000x10-version-mismatch", "h100x8-uvm-missing",
            "h100x8-uvm-nodes-missing"} <= set(PROFILES)
    for name in PROFILES:
        data = gpusim.load_profile(str(KIT / "profiles" / f"{name}.json"))
        assert data["name"] == name and data["simulated"] is True
        assert data["gpu_count"] == len(data["gpus"])
        assert [gpu["index"] for gpu in data["gpus"]] == list(range(len(data["gpus"])))
        assert len({gpu["uuid"] for gpu in data["gpus"]}) == len(data["gpus"])
        assert sorted(gpu["minor"] for gpu in data["gpus"]) == list(range(len(data["gpus"])))
        assert data["sources"]["recorded"] and data["sources"]["rendered"]
        mig_uuids = [mig["uuid"] for gpu in data["gpus"] for mig in gpu["mig_devices"]]
        assert len(set(mig_uuids)) == len(mig_uuids)


def test_every_recording_a_profile_replays_is_a_project_fixture():
    # The kit has no copies: install.yml and gpusim.build take the recordings from tests/fixtures/nvidia.
    assert not (KIT / "recordings").exists()
    for name in PROFILES:
        for recording in gpusim.load_profile(str(KIT / "profiles" / f"{name}.json"))["recordings"]:
            assert (FIXTURES / recording).is_file(), f"{name}: {recording}"


def test_the_builder_finds_the_fixtures_from_the_repository():
    assert Path(gpusim.default_recordings(str(KIT / "profiles" / "h100x8.json"))).resolve() == FIXTURES.resolve()


def test_h100_profile_matches_its_recorded_table():
    table = (FIXTURES / "smi-table_8xH100-80GB-HBM3_driver-565.57.01.txt").read_text()
    data = profile_data("h100x8")
    assert f"Driver Version: {data['driver_version']}" in table
    for gpu in data["gpus"]:
        assert f"{gpu['index']}  {gpu['name']}" in table
        assert gpu["pci_bus_id"] in table
        assert f"{gpu['memory_total_mib']}MiB" in table


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("gpus"), "profile lacks gpus"),
    (lambda d: d.update(schema_version=2), "schema_version is 2"),
    (lambda d: d["gpus"][0].pop("uuid"), "gpus[0] lacks uuid"),
    (lambda d: d.update(gpu_count=3), "gpu_count is 3 but 8 GPUs are listed"),
    (lambda d: d.update(recordings=[]), "recordings must list every recorded file"),
])
def test_bad_profiles_are_refused(tmp_path, change, message):
    data = profile_data("h100x8")
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(gpusim.GpusimError, match=message.replace("[", r"\[").replace("]", r"\]")):
        gpusim.load_profile(str(path))


def test_build_is_idempotent_keeps_fixes_and_honours_check_and_reset(tmp_path):
    requires_mknod()
    profile = str(KIT / "profiles" / "h100x8-uvm-nodes-missing.json")
    prefix = tmp_path / "sim"
    check_changed, check_actions = gpusim.build(profile, str(prefix), check=True)
    assert check_changed and not prefix.exists()
    assert gpusim.build(profile, str(prefix))[0] is True
    assert gpusim.build(profile, str(prefix)) == (False, [])
    # a node created later (by the module's fix) is kept
    os.mknod(prefix / "root" / "dev" / "nvidia-uvm", stat.S_IFCHR | 0o666, os.makedev(510, 0))
    assert gpusim.build(profile, str(prefix)) == (False, [])
    # a damaged file is corrected
    (prefix / "root" / "proc" / "modules").write_text("")
    changed, actions = gpusim.build(profile, str(prefix))
    assert changed and actions == ["replace %s" % (prefix / "root" / "proc" / "modules")]
    # --reset starts over (module state included), as does another profile
    gpusim.reload(str(prefix))
    changed, actions = gpusim.build(profile, str(prefix), reset=True)
    assert not (prefix / "state" / "module_version").exists()
    assert actions[0].endswith("(reset)") and not (prefix / "root" / "dev" / "nvidia-uvm").exists()
    changed, actions = gpusim.build(str(KIT / "profiles" / "h100x8.json"), str(prefix))
    assert actions[0].endswith("(profile was h100x8-uvm-nodes-missing)")
    assert (prefix / "root" / "dev" / "nvidia-uvm").exists()


def test_build_cli_prints_json_and_fails_clearly(tmp_path):
    requires_mknod()
    script = str(KIT / "gpusim.py")
    out = subprocess.run([sys.executable, script, "build", "--profile", str(KIT / "profiles" / "a100x4-mig.json"), "--prefix", str(tmp_path / "p")],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["changed"] is True
    bad = subprocess.run([sys.executable, script, "build", "--profile", str(tmp_path / "nope.json"), "--prefix", str(tmp_path / "q")],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 1 and "cannot read profile" in bad.stderr


def test_tree_layout(tmp_path):
    root = build_profile("a100x4-mig", tmp_path / "sim")
    info = (root / "proc" / "driver" / "nvidia" / "gpus" / "0000:01:00.0" / "information").read_text()
    assert "Device Minor: \t 1" in info and "GPU UUID: \t GPU-00000000-0000-0000-0000-000000000000" in info
    node = os.stat(root / "dev" / "nvidia1")
    assert stat.S_ISCHR(node.st_mode) and os.minor(node.st_rdev) == 1
    assert os.readlink(root / "dev" / "char" / "511:1") == "../nvidia-uvm-tools"
    assert parsers.parse_proc_modules((root / "proc" / "modules").read_text())["nvidia"]["used_by"] == ["nvidia_uvm", "nvidia_modeset"]
    assert parsers.parse_proc_devices((root / "proc" / "devices").read_text())["character"]["nvidia-uvm"] == 511
    assert parsers.parse_proc_driver_version((root / "proc" / "driver" / "nvidia" / "version").read_text())["version"] == "535.54.03"
    assert os.readlink(root / "usr" / "lib" / "x86_64-linux-gnu" / "libnvidia-ml.so.1") == "libnvidia-ml.so.535.54.03"


# ----------------------------------------------------------------------------- the stand-in


def smi(prefix: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(prefix / "bin" / "nvidia-smi"), *args], capture_output=True, text=True, check=False)


def test_stand_in_replays_recordings_verbatim(tmp_path):
    build_profile("a100x4-mig", tmp_path / "a100")
    assert smi(tmp_path / "a100", "-L").stdout == (FIXTURES / "smi-L_4xA100-SXM4-80GB_MIG-on-GPU0-4x1g.20gb.txt").read_text()
    build_profile("h100x8", tmp_path / "h100")
    assert smi(tmp_path / "h100").stdout == (FIXTURES / "smi-table_8xH100-80GB-HBM3_driver-565.57.01.txt").read_text()
    build_profile("rtx8000x10-version-mismatch", tmp_path / "rtx")
    for args in ((), ("-L",), ("--query-gpu=index", "--format=csv")):
        result = smi(tmp_path / "rtx", *args)
        assert (result.returncode, result.stdout) == (18, "Failed to initialize NVML: Driver/library version mismatch\n")


def test_stand_in_renders_what_the_module_parses(tmp_path):
    build_profile("h100x8", tmp_path / "h100")
    query = "--query-gpu=" + ",".join(parsers.QUERY_GPU_FIELDS)
    gpus = parsers.gpus_from_query(parsers.parse_query_gpu_csv(smi(tmp_path / "h100", query, "--format=csv,noheader,nounits").stdout,
                                                               parsers.QUERY_GPU_FIELDS))
    data = profile_data("h100x8")
    assert [(gpu["uuid"], gpu["pci_bus_id"], gpu["memory_total_mib"]) for gpu in gpus] == [
        (gpu["uuid"], gpu["pci_bus_id"], gpu["memory_total_mib"]) for gpu in data["gpus"]]
    with_header = parsers.parse_query_gpu_csv(smi(tmp_path / "h100", query, "--format=csv").stdout)
    assert with_header[0]["memory.total"] == "81559" and len(with_header) == 8
    assert smi(tmp_path / "h100", query, "--format=csv").stdout.splitlines()[0].startswith("index, name, uuid, pci.bus_id, memory.total [MiB]")
    listed = parsers.parse_smi_list(smi(tmp_path / "h100", "-L").stdout)
    assert [gpu["uuid"] for gpu in listed] == [gpu["uuid"] for gpu in data["gpus"]]
    assert smi(tmp_path / "h100", "--query-gpu=index", "--format=csv,noheader", "-i", "3").stdout == "3\n"
    missing = smi(tmp_path / "h100", "--query-gpu=index", "--format=csv", "-i", "9")
    assert (missing.returncode, missing.stdout) == (6, "No devices were found\n")
    invalid = smi(tmp_path / "h100", "--query-gpu=bogus", "--format=csv")
    assert invalid.returncode == 2 and 'Field "bogus" is not a valid field to query.' in invalid.stdout
    unsupported = smi(tmp_path / "h100", "-q")
    assert unsupported.returncode == 2 and "not simulated" in unsupported.stderr


# ----------------------------------------------------------------------------- the module, for real

def run_module(args):
    results = {}

    def exit_json(self, **kwargs):
        results.update(kwargs)
        raise SystemExit(0)

    def fail_json(self, msg, **kwargs):
        results.update(kwargs, msg=msg, failed=True)
        raise SystemExit(1)

    with patch_module_args(args), mock.patch.object(basic.AnsibleModule, "exit_json", exit_json), \
            mock.patch.object(basic.AnsibleModule, "fail_json", fail_json):
        with pytest.raises(SystemExit):
            nvidia_gpu_check.main()
    return results


@pytest.mark.parametrize("case", SCENARIO_VARS["gpu_check_profiles"], ids=lambda case: case["name"])
def test_module_on_simulated_hosts_matches_the_scenario_expectations(tmp_path, case):
    """The same expectations extensions/molecule/nvidia_gpu_check_hosts asserts in a container, here on the local file system."""
    root = build_profile(case["name"], tmp_path / "sim")
    result = run_module(dict(case["options"], host_root=str(root), nvidia_smi_path=str(tmp_path / "sim" / "bin" / "nvidia-smi"),
                             fail_on_error=False))
    assert result["failed_checks"] == case["failed_checks"]
    data = profile_data(case["name"])
    facts = result["nvidia_gpu"]
    if facts["nvidia_smi"]["ok"]:
        assert [(gpu["name"], gpu["uuid"], gpu["mig_mode"]) for gpu in facts["gpus"]] == [
            (gpu["name"], gpu["uuid"], gpu["mig_mode"]) for gpu in data["gpus"]]
        assert [gpu["mig_devices"] for gpu in facts["gpus"]] == [gpu["mig_devices"] for gpu in data["gpus"]]
    assert facts["driver"]["kernel_module_version"] == data["kernel_module"]["version"]
    assert facts["driver"]["userspace_version"] == data["driver_version"]


# ----------------------------------------------------------------------------- MIG profile, user space, reload, holders

def test_a100x2_mig_profile_renders_the_recorded_layout_of_one_gpu(tmp_path):
    build_profile("a100x2-mig-1g10gb", tmp_path / "sim")
    listed = smi(tmp_path / "sim", "-L").stdout.splitlines(keepends=True)
    assert len(listed) == 2 + 14
    assert "".join(listed[:8]) == (FIXTURES / "smi-L_A100-SXM4-80GB_MIG-7x1g.10gb_driver-535.216.01.txt").read_text()
    assert listed[8] == "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-00000000-0000-0000-0000-000000000001)\n"
    parsed = parsers.parse_smi_list("".join(listed))
    assert [len(gpu["mig_devices"]) for gpu in parsed] == [7, 7]
    query = smi(tmp_path / "sim", "--query-gpu=index,mig.mode.current,driver_version", "--format=csv,noheader").stdout
    assert query == "0, Enabled, 535.216.01\n1, Enabled, 535.216.01\n"


def test_mig_lines_of_rendered_list_match_every_recording():
    """The rendered `-L` layout (no replay) is the real one: checked against all MIG recordings."""
    for path in FIXTURES.glob("smi-L_*MIG*.txt"):
        gpus = parsers.parse_smi_list(path.read_text())
        profile = {"gpus": [dict(gpu, index=number) for number, gpu in enumerate(gpus)]}
        assert gpusim.render_list(profile) == path.read_text(), path.name


def test_host_userspace_links_the_real_library_directory_and_stays_across_builds(tmp_path):
    host = tmp_path / "host"
    library = install_host_userspace(host, "535.261.03")
    (library / "libnvidia-ml.so.535.54.03").write_bytes(b"")  # an older one left behind: the highest counts
    root = build_profile("h100x8", tmp_path / "sim", userspace="host", host_root=str(host))
    assert os.readlink(root / "usr" / "lib" / "x86_64-linux-gnu") == str(library)
    assert json.loads((tmp_path / "sim" / "state" / "settings.json").read_text()) == {"userspace": "host"}
    assert gpusim.node_state(str(tmp_path / "sim")) == {
        "userspace": "535.261.03", "module_loaded": True, "module_version": "565.57.01", "modules_unloaded": [], "mig": {}}
    # a build without --userspace keeps the stored mode and changes nothing
    assert gpusim.build(str(KIT / "profiles" / "h100x8.json"), str(tmp_path / "sim"), host_root=str(host)) == (False, [])


def test_host_userspace_newer_than_the_module_is_a_version_mismatch_until_reload(tmp_path):
    install_host_userspace(tmp_path / "host", "535.261.03")
    prefix = tmp_path / "sim"
    root = build_profile("h100x8", prefix, userspace="host", host_root=str(tmp_path / "host"))
    for args in ((), ("-L",), ("--query-gpu=index", "--format=csv")):
        result = smi(prefix, *args)
        assert (result.returncode, result.stdout) == (18, "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 535.261\n")
    assert smi(prefix).stdout.splitlines() == fixture_lines("error_nvml-driver-library-mismatch_with-nvml-version_570.124.txt", "570.124", "535.261")
    error = parsers.classify_smi_output(smi(prefix).stdout, 18)
    assert (error["error_class"], error["nvml_version"]) == ("driver_library_mismatch", "535.261")
    with pytest.raises(gpusim.GpusimError, match="^nvidia-container-cli: initialization error: nvml error: driver/library version mismatch$"):
        gpusim.injection(str(prefix), ["0"])

    reloaded = run_cli(prefix, "reload")
    assert (reloaded.returncode, json.loads(reloaded.stdout)) == (0, {"changed": True, "module_version_before": "565.57.01",
                                                                      "module_version": "535.261.03"})
    assert (prefix / "state" / "module_version").read_text() == "535.261.03\n"
    assert parsers.parse_proc_driver_version((root / "proc" / "driver" / "nvidia" / "version").read_text())["version"] == "535.261.03"
    assert (root / "sys" / "module" / "nvidia" / "version").read_text() == "535.261.03\n"
    assert smi(prefix, "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0").stdout == "535.261.03\n"
    # the recorded table shows 565.57.01: not replayed for another user space
    assert smi(prefix).returncode == 3
    assert gpusim.injection(str(prefix), ["0"])["payload"]["driver_version"] == "535.261.03"
    # an idempotent re-build keeps the reloaded module; a second reload changes nothing
    assert gpusim.build(str(KIT / "profiles" / "h100x8.json"), str(prefix), host_root=str(tmp_path / "host")) == (False, [])
    assert json.loads(run_cli(prefix, "reload").stdout)["changed"] is False


def test_host_without_a_driver_installed(tmp_path):
    install_host_userspace(tmp_path / "host", None)
    prefix = tmp_path / "sim"
    build_profile("h100x8", prefix, userspace="host", host_root=str(tmp_path / "host"))
    result = smi(prefix, "-L")
    assert result.returncode == 12
    assert result.stdout.startswith("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system.")
    assert parsers.classify_smi_output(result.stdout, 12)["error_class"] == "nvml_not_found"
    with pytest.raises(gpusim.GpusimError) as raised:
        gpusim.injection(str(prefix), ["all"])
    assert str(raised.value) == ("nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: "
                                 "cannot open shared object file: no such file or directory")
    refused = run_cli(prefix, "reload")
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        1, "", "modprobe: FATAL: Module nvidia not found in directory /lib/modules/6.1.0-28-amd64\n")
    assert not (prefix / "state" / "module_version").exists()
    # the driver gets installed: the next reload loads it
    install_host_userspace(tmp_path / "host", "535.261.03")
    assert json.loads(run_cli(prefix, "reload").stdout)["module_version"] == "535.261.03"
    assert smi(prefix, "-L").returncode == 0


def test_switching_user_space_rebuilds_and_never_writes_into_the_host_directory(tmp_path):
    library = install_host_userspace(tmp_path / "host", "535.261.03")
    prefix = tmp_path / "sim"
    build_profile("h100x8", prefix, userspace="host", host_root=str(tmp_path / "host"))
    changed, actions = gpusim.build(str(KIT / "profiles" / "h100x8.json"), str(prefix), userspace="profile")
    assert changed and actions[0].endswith("(user space was host)")
    assert sorted(path.name for path in library.iterdir()) == ["libnvidia-ml.so.1", "libnvidia-ml.so.535.261.03"]
    assert os.readlink(prefix / "root" / "usr" / "lib" / "x86_64-linux-gnu" / "libnvidia-ml.so.1") == "libnvidia-ml.so.565.57.01"


def test_recorded_mismatch_replays_until_the_module_is_reloaded(tmp_path):
    prefix = tmp_path / "rtx"
    root = build_profile("rtx8000x10-version-mismatch", prefix)
    with pytest.raises(gpusim.GpusimError, match="driver/library version mismatch"):
        gpusim.gpus(str(prefix))
    assert json.loads(run_cli(prefix, "reload").stdout)["module_version"] == "470.63.01"
    assert smi(prefix, "--query-gpu=index,driver_version", "--format=csv,noheader", "-i", "9").stdout == "9, 470.63.01\n"
    assert parsers.parse_proc_driver_version((root / "proc" / "driver" / "nvidia" / "version").read_text())["version"] == "470.63.01"
    assert len(gpusim.gpus(str(prefix))) == 10


def test_unloaded_module(tmp_path):
    requires_mknod()
    data = profile_data("h100x8")
    data["kernel_module"]["loaded"] = False
    profile = tmp_path / "unloaded.json"
    profile.write_text(json.dumps(data))
    prefix = tmp_path / "sim"
    gpusim.build(str(profile), str(prefix), recordings=str(FIXTURES))
    result = smi(prefix)
    assert (result.returncode, result.stdout) == (9, (FIXTURES / "error_smi-couldnt-communicate-with-driver.txt").read_text())
    with pytest.raises(gpusim.GpusimError, match="^nvidia-container-cli: initialization error: nvml error: driver not loaded$"):
        gpusim.injection(str(prefix), ["0"])
    assert gpusim.reload(str(prefix)) == {"changed": True, "module_version_before": None, "module_version": "565.57.01"}
    assert (prefix / "root" / "proc" / "driver" / "nvidia" / "version").exists()
    assert smi(prefix).returncode == 0


def loaded_modules(prefix):
    """The module names of the simulated /proc/modules, in the profile's order."""
    return [line.split()[0] for line in (prefix / "root" / "proc" / "modules").read_text().splitlines()][::-1]


def modprobe(prefix, *args):
    return subprocess.run([str(prefix / "bin" / "modprobe"), *args], capture_output=True, text=True, check=False)


def test_modprobe_unloads_in_order_and_stops_at_a_module_in_use(tmp_path):
    prefix = tmp_path / "sim"
    build_profile("h100x8", prefix)
    in_use = modprobe(prefix, "-r", "nvidia")
    assert (in_use.returncode, in_use.stderr) == (1, "modprobe: FATAL: Module nvidia is in use.\n")
    assert modprobe(prefix, "-r", "nvidia-uvm").returncode == 0
    assert loaded_modules(prefix) == ["nvidia", "nvidia_modeset", "nvidia_drm"]
    gone = modprobe(prefix, "-r", "nvidia_uvm")
    assert (gone.returncode, gone.stderr) == (1, "modprobe: FATAL: Module nvidia_uvm is not in kernel.\n")
    assert modprobe(prefix, "-a", "nvidia", "nvidia-uvm").returncode == 0
    assert loaded_modules(prefix) == ["nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm"]
    unknown = modprobe(prefix, "-r", "nvidia_foo")
    assert unknown.returncode == 1 and "Module nvidia_foo not found in directory /lib/modules/" in unknown.stderr


def test_modprobe_with_the_simulated_root_as_its_module_directory(tmp_path):
    # nvidia_gpu_check(fix_device_nodes, host_root=PREFIX/root) runs `modprobe -d PREFIX/root nvidia_uvm`
    prefix = tmp_path / "sim"
    build_profile("h100x8", prefix)
    assert modprobe(prefix, "-r", "nvidia_uvm").returncode == 0
    assert modprobe(prefix, "-d", str(prefix / "root"), "nvidia_uvm").returncode == 0
    assert "nvidia_uvm" in loaded_modules(prefix)
    assert modprobe(prefix, "-r", f"--dirname={prefix / 'root'}", "nvidia_uvm").returncode == 0
    elsewhere = modprobe(prefix, "-d", "/mnt/host", "nvidia_uvm")
    assert (elsewhere.returncode, elsewhere.stderr) == (
        1, "modprobe: FATAL: Module nvidia_uvm not found in directory /mnt/host/lib/modules/6.1.0-28-amd64\n")
    assert "nvidia_uvm" not in loaded_modules(prefix)


def test_a_module_unloaded_to_nothing_takes_the_driver_with_it(tmp_path):
    prefix = tmp_path / "sim"
    build_profile("h100x8", prefix)
    assert modprobe(prefix, "-r", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia").returncode == 0
    assert loaded_modules(prefix) == []
    assert not (prefix / "root" / "proc" / "driver" / "nvidia").exists()
    assert smi(prefix).returncode == 9
    # modprobe nvidia_uvm loads nvidia first
    assert modprobe(prefix, "nvidia_uvm").returncode == 0
    assert loaded_modules(prefix) == ["nvidia", "nvidia_uvm"]
    assert smi(prefix).returncode == 0


def test_the_installed_nvidia_uvm_does_not_fit_an_older_nvidia_still_loaded(tmp_path):
    """A partial unload during a driver change: nvidia (old) stays, its users went, the user space is the new one."""
    host = tmp_path / "host"
    install_host_userspace(host, "535.261.03")
    build_profile("h100x8", tmp_path / "sim", userspace="host", host_root=str(host))
    prefix = tmp_path / "sim"
    run_cli(prefix, "hold", "dcgm")
    assert run_cli(prefix, "reload").returncode == 1
    assert loaded_modules(prefix) == ["nvidia"]
    refused = modprobe(prefix, "-a", "nvidia", "nvidia_uvm")
    assert (refused.returncode, refused.stderr) == (1, "modprobe: ERROR: could not insert 'nvidia_uvm': Invalid argument\n")
    assert loaded_modules(prefix) == ["nvidia"]
    assert gpusim.node_state(str(prefix))["module_version"] == "565.57.01"
    # the holder gone, a reload brings the installed version with every module
    run_cli(prefix, "release", "dcgm")
    assert json.loads(run_cli(prefix, "reload").stdout)["module_version"] == "535.261.03"
    assert loaded_modules(prefix) == ["nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm"]


def test_holders_block_reload_until_released_or_rebooted(tmp_path):
    prefix = tmp_path / "sim"
    build_profile("h100x8", prefix)
    assert json.loads(run_cli(prefix, "holders").stdout) == []
    assert json.loads(run_cli(prefix, "hold", "nvidia-persistenced").stdout) == {"changed": True}
    assert json.loads(run_cli(prefix, "hold", "nvidia-persistenced").stdout) == {"changed": False}
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        run_cli(prefix, "hold", "dcgm", "--pid", str(sleeper.pid))
        assert json.loads(run_cli(prefix, "holders").stdout) == [{"name": "dcgm", "pid": sleeper.pid},
                                                                 {"name": "nvidia-persistenced", "pid": None}]
        refused = run_cli(prefix, "reload")
        assert (refused.returncode, refused.stdout, refused.stderr) == (1, "", "modprobe: FATAL: Module nvidia is in use.\n")
        # as with the real modprobe -r, the users of nvidia went before it stopped at nvidia
        assert loaded_modules(prefix) == ["nvidia"]
        assert not (prefix / "root" / "sys" / "module" / "nvidia_uvm").exists()
        assert (prefix / "root" / "sys" / "module" / "nvidia" / "version").read_text() == "565.57.01\n"
        assert json.loads(run_cli(prefix, "release", "nvidia-persistenced").stdout) == {"changed": True}
        assert json.loads(run_cli(prefix, "release", "nvidia-persistenced").stdout) == {"changed": False}
        assert run_cli(prefix, "reload").returncode == 1
    finally:
        sleeper.kill()
        sleeper.wait()
    # a holder whose process is gone no longer holds the module
    assert json.loads(run_cli(prefix, "holders").stdout) == []
    assert run_cli(prefix, "reload").returncode == 0
    assert loaded_modules(prefix) == ["nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm"]
    assert (prefix / "root" / "sys" / "module" / "nvidia_uvm").is_dir()
    run_cli(prefix, "hold", "nvidia-persistenced")
    rebooted = run_cli(prefix, "reboot")
    assert json.loads(rebooted.stdout) == {"changed": False, "module_version_before": "565.57.01", "module_version": "565.57.01"}
    assert json.loads(run_cli(prefix, "holders").stdout) == []
    bad = run_cli(prefix, "hold", "../x")
    assert bad.returncode == 1 and "use a plain name" in bad.stderr


# ----------------------------------------------------------------------------- API of the runtime stand-in

def test_gpus_is_the_nodes_gpu_list(tmp_path):
    build_profile("a100x4-mig", tmp_path / "sim")
    listed = gpusim.gpus(str(tmp_path / "sim"))
    assert [(gpu["index"], gpu["minor"], gpu["mig_mode"], len(gpu["mig_devices"])) for gpu in listed] == [
        (0, 1, "Enabled", 4), (1, 0, "Disabled", 0), (2, 2, "Disabled", 0), (3, 3, "Disabled", 0)]
    assert set(listed[0]) == {"index", "minor", "name", "uuid", "pci_bus_id", "memory_total_mib", "mig_mode", "mig_devices"}
    assert listed[0]["mig_devices"][2] == {"index": 2, "profile": "1g.20gb", "uuid": "MIG-00000000-0000-0000-0000-000000000002"}
    with pytest.raises(gpusim.GpusimError, match="load library failed"):
        gpusim.gpus(str(tmp_path / "no-kit"))


@pytest.mark.parametrize("selectors, expected", [
    (["all"], {0: [0, 1, 2, 3], 1: [], 2: [], 3: []}),
    (["1"], {1: []}),
    (["GPU-00000000-0000-0000-0000-000000000003", "1"], {1: [], 3: []}),
    (["0:2"], {0: [2]}),
    (["MIG-00000000-0000-0000-0000-000000000003", "0:1", "0:3"], {0: [1, 3]}),
    (["0:1", "0"], {0: [0, 1, 2, 3]}),
    ([" 2 "], {2: []}),
    ([], {}),
], ids=["all", "index", "uuids", "mig-index", "mig-uuid-and-index", "whole-gpu-wins", "spaces", "nothing"])
def test_injection_selects_gpus_and_mig_devices(tmp_path, selectors, expected):
    build_profile("a100x4-mig", tmp_path / "sim")
    result = gpusim.injection(str(tmp_path / "sim"), selectors)
    payload = result["payload"]
    assert payload["simulated"] is True and payload["driver_version"] == "535.54.03"
    assert {gpu["index"]: [mig["index"] for mig in gpu["mig_devices"]] for gpu in payload["gpus"]} == expected
    assert [gpu["index"] for gpu in payload["gpus"]] == sorted(expected)
    minors = {0: 1, 1: 0, 2: 2, 3: 3}
    root = tmp_path / "sim" / "root"
    assert result["device_nodes"] == [
        {"path": "/dev/nvidiactl", "host_path": str(root / "dev" / "nvidiactl"), "major": 195, "minor": 255},
        {"path": "/dev/nvidia-uvm", "host_path": str(root / "dev" / "nvidia-uvm"), "major": 511, "minor": 0},
        {"path": "/dev/nvidia-uvm-tools", "host_path": str(root / "dev" / "nvidia-uvm-tools"), "major": 511, "minor": 1},
    ] + [{"path": "/dev/nvidia%d" % minors[index], "host_path": str(root / "dev" / ("nvidia%d" % minors[index])), "major": 195,
          "minor": minors[index]} for index in sorted(expected)]


@pytest.mark.parametrize("selector", ["4", "1:0", "0:9", "GPU-00000000-0000-0000-0000-00000000000f", "MIG-nope", "none", ""])
def test_injection_refuses_unknown_devices(tmp_path, selector):
    build_profile("a100x4-mig", tmp_path / "sim")
    with pytest.raises(gpusim.GpusimError) as raised:
        gpusim.injection(str(tmp_path / "sim"), ["0", selector])
    assert str(raised.value) == "nvidia-container-cli: device error: %s: unknown device" % selector


def test_injection_offers_only_the_control_nodes_present(tmp_path):
    build_profile("h100x8-uvm-nodes-missing", tmp_path / "sim")
    nodes = gpusim.injection(str(tmp_path / "sim"), ["7"])["device_nodes"]
    assert [node["path"] for node in nodes] == ["/dev/nvidiactl", "/dev/nvidia7"]


# ----------------------------------------------------------------------------- the container-side nvidia-smi

def container_smi(visible: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(KIT / "container_smi.py"), *args], capture_output=True, text=True, check=False,
                          env=dict(os.environ, GPUSIM_VISIBLE=str(visible)))


def test_container_smi_is_installed_executable(tmp_path):
    build_profile("h100x8", tmp_path / "sim")
    installed = tmp_path / "sim" / "lib" / "container-nvidia-smi"
    assert installed.read_bytes() == b"#!/usr/bin/python3\n" + (KIT / "container_smi.py").read_bytes()
    assert stat.S_IMODE(installed.stat().st_mode) == 0o755
    assert installed.read_text().startswith("#!/usr/bin/python3\n")


def test_container_smi_renumbers_what_the_runtime_injected(tmp_path):
    build_profile("a100x2-mig-1g10gb", tmp_path / "sim")
    visible = tmp_path / "visible.json"
    visible.write_text(json.dumps(gpusim.injection(str(tmp_path / "sim"), ["1:5", "1:2"])["payload"]))
    expected = ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-00000000-0000-0000-0000-000000000001)\n"
                "  MIG 1g.10gb     Device  0: (UUID: MIG-00000000-0000-0000-0000-000000000009)\n"
                "  MIG 1g.10gb     Device  1: (UUID: MIG-00000000-0000-0000-0000-000000000012)\n")
    for args in (("-L",), ()):
        assert container_smi(visible, *args).stdout == expected
    assert [gpu["uuid"] for gpu in parsers.parse_smi_list(expected)] == ["GPU-00000000-0000-0000-0000-000000000001"]


def test_container_smi_query(tmp_path):
    build_profile("h100x8", tmp_path / "sim")
    visible = tmp_path / "visible.json"
    visible.write_text(json.dumps(gpusim.injection(str(tmp_path / "sim"), ["GPU-5e1a0000-0000-4000-8000-000000000105", "3"])["payload"]))
    fields = "--query-gpu=index,name,uuid,driver_version,memory.total"
    assert container_smi(visible, fields, "--format=csv").stdout == (
        "index, name, uuid, driver_version, memory.total [MiB]\n"
        "0, NVIDIA H100 80GB HBM3, GPU-5e1a0000-0000-4000-8000-000000000103, 565.57.01, 81559 MiB\n"
        "1, NVIDIA H100 80GB HBM3, GPU-5e1a0000-0000-4000-8000-000000000105, 565.57.01, 81559 MiB\n")
    assert container_smi(visible, fields, "--format=csv,noheader,nounits").stdout.splitlines()[1] == (
        "1, NVIDIA H100 80GB HBM3, GPU-5e1a0000-0000-4000-8000-000000000105, 565.57.01, 81559")
    assert container_smi(visible, "--query-gpu", "index", "--format", "csv,noheader").stdout == "0\n1\n"
    invalid = container_smi(visible, "--query-gpu=bogus", "--format=csv")
    assert (invalid.returncode, invalid.stdout) == (2, 'Field "bogus" is not a valid field to query.\n\n')
    assert container_smi(visible, "-q").returncode == 2


@pytest.mark.parametrize("args", [("-L",), (), ("--query-gpu=index", "--format=csv")])
def test_container_smi_with_no_gpu_says_so(tmp_path, args):
    visible = tmp_path / "visible.json"
    visible.write_text(json.dumps({"simulated": True, "driver_version": "535.261.03", "gpus": []}))
    result = container_smi(visible, *args)
    assert (result.returncode, result.stdout) == (6, (FIXTURES / "error_no-devices-were-found.txt").read_text())


def test_container_smi_without_injection(tmp_path):
    result = container_smi(tmp_path / "absent.json", "-L")
    assert (result.returncode, result.stdout) == (9, (FIXTURES / "error_smi-couldnt-communicate-with-driver.txt").read_text())
    assert parsers.classify_smi_output(result.stdout, 9)["error_class"] == "cannot_communicate"


# ----------------------------------------------------------------------------- helpers

def run_cli(prefix: Path, *args: str) -> subprocess.CompletedProcess:
    """The installed prefix/bin/gpusim wrapper (it takes its prefix from its own location)."""
    return subprocess.run([str(prefix / "bin" / "gpusim"), *args], capture_output=True, text=True, check=False)


def fixture_lines(name: str, old: str, new: str) -> list:
    return (FIXTURES / name).read_text().replace(old, new).splitlines()


def test_module_sees_the_installed_user_space_and_the_reload(tmp_path):
    """nvidia_gpu_check on a host-mode node: the driver role installed 535.261.03 while 565.57.01 stays loaded, then a reload."""
    install_host_userspace(tmp_path / "host", "535.261.03")
    prefix = tmp_path / "sim"
    root = build_profile("h100x8", prefix, userspace="host", host_root=str(tmp_path / "host"))
    options = dict(host_root=str(root), nvidia_smi_path=str(prefix / "bin" / "nvidia-smi"), fail_on_error=False,
                   expected_driver_version="535.261.03")
    before = run_module(options)
    assert "driver_versions_match" in before["failed_checks"]
    assert before["nvidia_gpu"]["driver"]["userspace_version"] == "535.261.03"
    assert before["nvidia_gpu"]["driver"]["kernel_module_version"] == "565.57.01"
    gpusim.reload(str(prefix))
    after = run_module(options)
    assert after["failed_checks"] == []
    assert len(after["nvidia_gpu"]["gpus"]) == 8


def test_state_commands_need_a_built_host(tmp_path):
    script = [sys.executable, str(KIT / "gpusim.py")]
    result = subprocess.run(script + ["reload", "--prefix", str(tmp_path / "none")], capture_output=True, text=True, check=False)
    assert (result.returncode, result.stderr) == (1, "gpusim: %s: no simulated host there (run gpusim.py build first)\n" % (tmp_path / "none"))


def test_host_userspace_is_found_where_debian_installs_it(tmp_path: Path) -> None:
    # Debian's libnvidia-ml1 puts the library under nvidia/current, reached through an alternatives link
    library_dir = tmp_path / "usr/lib/x86_64-linux-gnu"
    current = library_dir / "nvidia" / "current"
    current.mkdir(parents=True)
    (current / "libnvidia-ml.so.535.261.03").write_bytes(b"")
    (library_dir / "libnvidia-ml.so.1").symlink_to(tmp_path / "etc/alternatives/nvidia--libnvidia-ml.so.1-x86_64-linux-gnu")
    assert gpusim.library_version(str(library_dir)) == "535.261.03"
    assert gpusim.library_version(str(tmp_path / "nothing")) is None


# --------------------------------------------------------------------------- NVIDIA's nvidia-smi on NVIDIA's mock NVML

MOCK_BASE = {
    "version": "1.0",
    "system": {"driver_version": "550.163.01", "nvml_version": "12.550.163.01"},
    "device_defaults": {"name": "NVIDIA H100 80GB HBM3",
                        "memory": {"total_bytes": 85899345920, "reserved_bytes": 1073741824},
                        "mig": {"mode_current": "disabled", "max_gpu_instances": 7}},
}


def _with_mock(prefix: Path) -> None:
    """The kit's copy of the mock under the prefix, as install.yml and build() leave it (one byte of library will do)."""
    (prefix / "mocknvml" / "configs").mkdir(parents=True, exist_ok=True)
    (prefix / "mocknvml" / "libnvidia-ml.so").write_bytes(b"\x7fELF")
    (prefix / "mocknvml" / "configs" / "h100.json").write_text(json.dumps(MOCK_BASE))


@pytest.fixture
def real_smi(tmp_path, monkeypatch):
    path = tmp_path / "usr-bin-nvidia-smi"
    path.write_text("#!/bin/sh\n")
    monkeypatch.setattr(gpusim, "REAL_NVIDIA_SMI", str(path))
    return path


@pytest.mark.parametrize("bus_id, linux", [("00000000:18:00.0", "0000:18:00.0"), ("0000:DB:00.0", "0000:DB:00.0"),
                                           ("00000001:2A:00.0", "0001:2A:00.0")])
def test_bus_ids_take_the_form_the_mock_accepts(bus_id, linux):
    assert gpusim.linux_bus_id(bus_id) == linux


def test_the_mock_configuration_is_the_profile_at_the_loaded_module_and_installed_user_space():
    profile = profile_data("h100x8")
    state = {"userspace": "535.309.01", "module_loaded": True, "module_version": "535.261.03", "modules_unloaded": []}
    config = gpusim.render_mock_config(MOCK_BASE, profile, state)
    assert config["system"]["driver_version"] == "535.261.03"  # what the kernel side reports
    assert config["system"]["nvml_version"] == "12.535.309.01"  # the library's own
    assert (config["system"]["cuda_version"], config["system"]["cuda_version_major"]) == ("12.2", 12)
    assert config["device_defaults"]["persistence_mode"] == "enabled"
    assert config["device_defaults"]["mig"] == {"mode_current": "disabled", "mode_pending": "disabled", "max_gpu_instances": 7}
    assert [device["uuid"] for device in config["devices"]] == [gpu["uuid"] for gpu in profile["gpus"]]
    first = config["devices"][0]
    assert first["pci"] == {"bus_id": "0000:18:00.0"}
    assert first["memory"] == {"total_bytes": 81559 * 2**20, "reserved_bytes": 2**30,
                               "free_bytes": 81559 * 2**20 - 2**30, "used_bytes": 0}
    assert "failure" not in first
    assert MOCK_BASE["system"]["driver_version"] == "550.163.01"  # the base is not changed
    profile["gpus"][2]["failure"] = {"mode": "lost"}
    assert gpusim.render_mock_config(MOCK_BASE, profile, state)["devices"][2]["failure"] == {"mode": "lost"}


def test_which_hosts_the_mock_serves(tmp_path, real_smi):
    install_host_userspace(tmp_path / "host", "535.261.03")
    prefix = tmp_path / "sim"
    build_profile("h100x8", prefix, userspace="host", host_root=str(tmp_path / "host"))
    profile = profile_data("h100x8")
    assert gpusim.mock_nvml_refusal(str(prefix), profile) == "no mock NVML under %s/mocknvml" % prefix
    _with_mock(prefix)
    assert gpusim.mock_nvml_refusal(str(prefix), profile) is None
    assert gpusim.mock_nvml_refusal(str(prefix), profile_data("a100x4-mig")) == "the mock NVML enumerates no MIG devices"
    assert gpusim.mock_nvml_refusal(str(prefix), profile_data("rtx8000x10-version-mismatch")) in (
        "the mock NVML simulates at most 8 GPUs", "the mock NVML enumerates no MIG devices")
    real_smi.unlink()
    assert gpusim.mock_nvml_refusal(str(prefix), profile) == "no nvidia-smi is installed at %s" % real_smi
    recorded = tmp_path / "recorded"
    build_profile("h100x8", recorded, userspace="profile")
    assert gpusim.mock_nvml_refusal(str(recorded), profile) == "the profile's user space is its recordings"


@pytest.mark.parametrize("profile, userspace, refusal", [
    ("h100x8", "host", None),
    ("h100x8-uvm-missing", "host", None),
    ("h100x8", "profile", "the node's user space is the profile's recordings, not the driver packages"),
    ("a100x4-mig", "host", "the mock NVML enumerates no MIG devices"),
    ("a100x2-mig-1g10gb", "host", "the mock NVML enumerates no MIG devices"),
    ("rtx8000x10-version-mismatch", "host", "the mock NVML simulates at most 8 GPUs"),
])
def test_which_lab_nodes_run_nvidias_toolkit_and_plugin(profile, userspace, refusal):
    from gpufleet_lab import gpuprofiles

    assert gpuprofiles.nvidia_refusal(gpuprofiles.find_profile(profile), userspace) == refusal


def test_the_mock_takes_the_installed_library_name_and_follows_the_user_space(tmp_path):
    prefix = tmp_path / "sim"
    _with_mock(prefix)
    profile = profile_data("h100x8")
    state = {"userspace": "535.261.03", "module_loaded": True, "module_version": "535.261.03", "modules_unloaded": []}
    library_dir = Path(gpusim.mock_driver_root(str(prefix), profile, state))
    library = library_dir / "libnvidia-ml.so.535.261.03"
    assert library_dir == prefix / "mocknvml" / "driver" / "535.261.03" / "usr" / "lib64"
    assert library.samefile(prefix / "mocknvml" / "libnvidia-ml.so")  # a hard link: the mock reads its own path
    assert os.readlink(library_dir / "libnvidia-ml.so.1") == "libnvidia-ml.so.535.261.03"
    config_path = library_dir.parents[1] / "config" / "config.yaml"  # where the mock looks: two directories up
    assert json.loads(config_path.read_text())["system"]["driver_version"] == "535.261.03"
    written = config_path.stat().st_mtime_ns
    gpusim.mock_driver_root(str(prefix), profile, state)
    assert config_path.stat().st_mtime_ns == written
    upgraded = dict(state, userspace="535.309.01")
    library_dir = Path(gpusim.mock_driver_root(str(prefix), profile, upgraded))
    assert (library_dir / "libnvidia-ml.so.535.309.01").samefile(prefix / "mocknvml" / "libnvidia-ml.so")
    assert json.loads((library_dir.parents[1] / "config" / "config.yaml").read_text())["system"] == {
        "driver_version": "535.261.03", "nvml_version": "12.535.309.01", "cuda_version": "12.2",
        "cuda_version_major": 12, "cuda_version_minor": 2}


def test_nvidia_smi_runs_the_real_binary_on_the_mock_while_the_module_is_loaded(tmp_path, real_smi, monkeypatch):
    install_host_userspace(tmp_path / "host", "535.261.03")
    prefix = tmp_path / "sim"
    build_profile("h100x8", prefix, userspace="host", host_root=str(tmp_path / "host"))
    _with_mock(prefix)
    monkeypatch.setattr(gpusim, "node_state", lambda *_args: {
        "userspace": "535.261.03", "module_loaded": True, "module_version": "565.57.01", "modules_unloaded": [], "mig": {}})
    calls = []
    monkeypatch.setattr(os, "execve", lambda path, argv, env: calls.append((path, argv, env)))
    monkeypatch.setenv("MOCK_NVML_CONFIG", "/elsewhere.yaml")
    gpusim.nvidia_smi(str(prefix), ["-L"])
    [(path, argv, env)] = calls
    assert (path, argv) == (str(real_smi), [str(real_smi), "-L"])
    assert env["LD_LIBRARY_PATH"] == str(prefix / "mocknvml" / "driver" / "535.261.03" / "usr" / "lib64")
    assert "MOCK_NVML_CONFIG" not in env  # the mock finds its configuration beside itself, as in a container
    # the mismatch (565.57.01 loaded) is the patched mock's to report: the configuration carries the kernel's version
    config = prefix / "mocknvml" / "driver" / "535.261.03" / "config" / "config.yaml"
    assert json.loads(config.read_text())["system"]["driver_version"] == "565.57.01"
    # an unloaded module: gpusim's recorded message (the real library fails otherwise without a kernel driver)
    monkeypatch.setattr(gpusim, "node_state", lambda *_args: {
        "userspace": "535.261.03", "module_loaded": False, "module_version": None, "modules_unloaded": ["nvidia"]})
    assert gpusim.nvidia_smi(str(prefix), ["-L"]) == 9
    assert len(calls) == 1


def _parse_carried_config(data: bytes) -> dict:
    """What the lab's patch 0002 of the mock reads back (embedded_config.go): the footer, then the JSON before it."""
    mark = gpusim.MOCK_CONFIG_FOOTER
    footer = data[-(len(mark) + 11):]
    assert footer.startswith(mark) and footer.endswith(b"\n")
    length = int(footer[len(mark):-1])
    return json.loads(data[-(len(mark) + 11) - length:-(len(mark) + 11)])


def test_the_mock_library_carries_its_configuration_after_the_elf_image():
    carried = gpusim.library_with_config(b"\x7fELF-image", {"version": "1.0", "devices": [{"index": 0}]})
    assert carried.startswith(b"\x7fELF-image")
    assert _parse_carried_config(carried) == {"version": "1.0", "devices": [{"index": 0}]}
    patch = next((REPO / "lab" / "nvidia" / "patches" / "k8s-test-infra").glob("0002-*.patch")).read_text()
    assert '+const configFooterMark = "\\n#gpusim-mock-nvml-config:"' in patch  # the mark the Go side reads
    assert gpusim.MOCK_CONFIG_FOOTER == b"\n#gpusim-mock-nvml-config:"


def _debian_package(directory: Path, name: str, files: dict[str, str]) -> Path:
    root = directory / name
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(f"Package: {name}\nVersion: 1\nArchitecture: amd64\nMaintainer: x <x@x>\n"
                                             f"Description: {name}\n")
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    deb = directory / f"{name}.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(deb)], check=True, stdout=subprocess.DEVNULL)
    return deb


def test_a_driver_root_as_nvidias_driver_container_lays_it(tmp_path):
    requires_mknod()
    _with_mock(tmp_path / "kit")
    debs = [_debian_package(tmp_path, "libcuda1", {"usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.535.261.03": "cuda"}),
            _debian_package(tmp_path, "nvidia-smi", {"usr/lib/nvidia/current/nvidia-smi": "smi"})]
    root = tmp_path / "root"
    (root / "stale").mkdir(parents=True)
    laid = gpusim.lay_driver_root(str(root), str(tmp_path / "kit" / "mocknvml"), profile_data("h100x8"), 3, "535.261.03",
                                  [str(deb) for deb in debs])
    libraries = "usr/lib/x86_64-linux-gnu/"
    assert laid == sorted(["dev/nvidia0", "dev/nvidia1", "dev/nvidia2", "dev/nvidiactl", "sys/module/nvidia/version",
                           "usr/bin/nvidia-smi", libraries + "libcuda.so.1", libraries + "libcuda.so.535.261.03",
                           libraries + "libnvidia-ml.so.1", libraries + "libnvidia-ml.so.535.261.03"])
    config = _parse_carried_config((root / libraries / "libnvidia-ml.so.535.261.03").read_bytes())
    assert config["system"]["driver_version"] == "535.261.03"
    assert [device["uuid"] for device in config["devices"]] == [gpu["uuid"] for gpu in profile_data("h100x8")["gpus"][:3]]
    assert os.readlink(root / libraries / "libnvidia-ml.so.1") == "libnvidia-ml.so.535.261.03"
    node = (root / "dev" / "nvidia2").stat()
    assert stat.S_ISCHR(node.st_mode) and (os.major(node.st_rdev), os.minor(node.st_rdev)) == (195, 2)
    assert stat.S_IMODE(node.st_mode) == 0o666
    assert (root / "sys" / "module" / "nvidia" / "version").read_text() == "535.261.03\n"
    assert not (root / "stale").exists()  # laid again whole


def test_the_mock_takes_the_installed_librarys_own_place_with_the_device_nodes(tmp_path, real_smi, monkeypatch):
    requires_mknod()
    library_dir = install_host_userspace(tmp_path / "host", "535.261.03")
    prefix = tmp_path / "sim"
    build_profile("h100x8", prefix, userspace="host", host_root=str(tmp_path / "host"))
    _with_mock(prefix)
    state = {"userspace": "535.261.03", "module_loaded": True, "module_version": "535.261.03", "modules_unloaded": []}
    monkeypatch.setattr(gpusim, "node_state", lambda *_args: state)
    dev = tmp_path / "dev"
    dev.mkdir()
    exposed = gpusim.expose_to_nvidia_software(str(prefix), str(dev))
    library = library_dir / "libnvidia-ml.so.535.261.03"
    assert exposed["changed"] and exposed["library"] == str(library.resolve())
    carried = library.read_bytes()
    assert carried.startswith(b"\x7fELF")
    config = _parse_carried_config(carried)
    assert config["system"]["driver_version"] == "535.261.03"
    assert [device["uuid"] for device in config["devices"]] == [gpu["uuid"] for gpu in profile_data("h100x8")["gpus"]]
    assert sorted(Path(path).name for path in exposed["device_nodes"]) == sorted(
        name for name in os.listdir(prefix / "root" / "dev") if name.startswith("nvidia"))
    node = (dev / "nvidia3").stat()
    assert stat.S_ISCHR(node.st_mode) and (os.major(node.st_rdev), os.minor(node.st_rdev)) == (195, 3)
    assert gpusim.expose_to_nvidia_software(str(prefix), str(dev))["changed"] is False
    state["module_loaded"] = False
    with pytest.raises(gpusim.GpusimError, match="module is not loaded: the driver's own library stays"):
        gpusim.expose_to_nvidia_software(str(prefix), str(dev))


def test_a_host_exposed_once_follows_its_module_loads_and_dpkg_runs(tmp_path, real_smi, monkeypatch):
    requires_mknod()
    library = install_host_userspace(tmp_path / "host", "535.261.03") / "libnvidia-ml.so.535.261.03"
    prefix = tmp_path / "sim"
    build_profile("h100x8", prefix, userspace="host", host_root=str(tmp_path / "host"))
    _with_mock(prefix)
    state = {"userspace": "535.261.03", "module_loaded": False, "module_version": None, "modules_unloaded": []}
    monkeypatch.setattr(gpusim, "node_state", lambda *_args: state)
    dev = tmp_path / "dev"
    dev.mkdir()
    drivers_own = library.read_bytes()
    state["module_loaded"] = True
    assert gpusim.follow_exposure(str(prefix), dev_dir=str(dev)) is None  # not marked: the driver's library stays
    assert library.read_bytes() == drivers_own and not os.listdir(dev)
    state["module_loaded"] = False
    assert gpusim.follow_exposure(str(prefix), enable=True, dev_dir=str(dev)) is None  # marked; nothing loaded yet
    assert library.read_bytes() == drivers_own
    state.update(module_loaded=True, module_version="535.261.03")
    assert gpusim.follow_exposure(str(prefix), dev_dir=str(dev))["changed"]
    assert _parse_carried_config(library.read_bytes())["system"]["driver_version"] == "535.261.03"
    assert "nvidia0" in os.listdir(dev)
    state["userspace"] = "535.309.01"  # a dpkg run removed this version's library and installed none
    assert gpusim.follow_exposure(str(prefix), dev_dir=str(dev)) is None


# ----------------------------------------------------------------------------- MIG partitions (SIMULATED)

def test_mig_listings_show_the_profiles_partitions_and_the_collection_parses_them(tmp_path):
    from ansible_collections.gpufleet.node.plugins.module_utils import _mig
    build_profile("a100x4-mig", tmp_path / "sim")
    lgi = smi(tmp_path / "sim", "mig", "-lgi")
    assert lgi.returncode == 0
    instances = _mig.parse_gpu_instances(lgi.stdout)
    assert [(gi["gpu"], gi["profile"], gi["profile_id"], gi["start"], gi["size"]) for gi in instances] == [
        (0, "1g.20gb", 15, 6, 2), (0, "1g.20gb", 15, 4, 2), (0, "1g.20gb", 15, 2, 2), (0, "1g.20gb", 15, 0, 2)]
    cis = _mig.parse_compute_instances(smi(tmp_path / "sim", "mig", "-lci").stdout)
    assert [(ci["gpu_instance_id"], ci["profile"], ci["size"]) for ci in cis] == [(1, "1g.20gb", 1), (2, "1g.20gb", 1),
                                                                                  (3, "1g.20gb", 1), (4, "1g.20gb", 1)]
    query = smi(tmp_path / "sim", "--query-gpu=index,name,pci.device_id,mig.mode.current,mig.mode.pending", "--format=csv,noheader")
    assert query.stdout.splitlines()[:2] == ["0, NVIDIA A100-SXM4-80GB, 0x20B210DE, Enabled, Enabled",
                                             "1, NVIDIA A100-SXM4-80GB, 0x20B210DE, Disabled, Disabled"]
    assert smi(tmp_path / "sim", "mig", "-lgi", "-i", "1").stdout == "No MIG-enabled devices found.\n"


def test_a_layout_applied_with_nvidia_smi_is_what_nvml_then_shows(tmp_path):
    sim = tmp_path / "sim"
    build_profile("a100x4-mig", sim)
    assert smi(sim, "mig", "-i", "0", "-dgi").stdout.startswith("Unable to destroy GPU instance ID")  # compute instances first
    assert smi(sim, "mig", "-i", "0", "-dci").stdout.count("Successfully destroyed compute instance") == 4
    assert smi(sim, "mig", "-i", "0", "-dgi").stdout.count("Successfully destroyed GPU instance") == 4
    created = smi(sim, "mig", "-i", "0", "-cgi", "9,14,19,19", "-C")
    assert created.returncode == 0 and created.stdout.splitlines()[:2] == [
        "Successfully created GPU instance ID  1 on GPU  0 using profile MIG 3g.40gb (ID  9)",
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  1 using profile MIG 3g.40gb (ID  2)"]
    assert smi(sim, "-i", "1", "-mig", "1").stdout == "Enabled MIG Mode for GPU 00000000:41:00.0\nAll done.\n"
    full = smi(sim, "mig", "-i", "1", "-cgi", "0,19", "-C")
    assert full.returncode != 0 and "Insufficient Resources" in full.stdout
    listed = {gpu["index"]: sorted(mig["profile"] for mig in gpu["mig_devices"]) for gpu in gpusim.gpus(str(sim))}
    assert listed == {0: ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"], 1: ["7g.80gb"], 2: [], 3: []}
    assert "MIG 3g.40gb     Device  3" in smi(sim, "-L").stdout  # placements order the devices: 1g at 0 and 1, 2g at 2


def test_a_driver_client_keeps_the_partitions_and_the_mode_waits_for_a_reboot(tmp_path):
    sim = tmp_path / "sim"
    build_profile("a100x4-mig", sim)
    assert run_cli(sim, "hold", "dcgm").returncode == 0
    refused = smi(sim, "mig", "-i", "0", "-dci")
    assert refused.returncode != 0 and "In use by another client" in refused.stdout
    pending = smi(sim, "-i", "2", "-mig", "1")
    assert "MIG mode is in pending enable state" in pending.stdout
    assert smi(sim, "--query-gpu=mig.mode.current,mig.mode.pending", "--format=csv,noheader", "-i", "2").stdout == "Disabled, Enabled\n"
    assert run_cli(sim, "reboot").returncode == 0
    assert smi(sim, "--query-gpu=mig.mode.current,mig.mode.pending", "--format=csv,noheader", "-i", "2").stdout == "Enabled, Enabled\n"
