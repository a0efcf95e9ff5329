"""The SIMULATED GPU host kit (lab/gpusim): profiles, builder, nvidia-smi stand-in, and
nvidia_gpu_check run for real (no mocks) against every profile."""
from __future__ import annotations

import filecmp
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.node.plugins.module_utils import _nvidia_parsers as parsers
from ansible_collections.gpufleet.node.plugins.modules import nvidia_gpu_check

from gpusim_helpers import FIXTURES, KIT, PROFILES, REPO, build_profile, gpusim, profile_data, requires_mknod

SCENARIO_VARS = yaml.safe_load((REPO / "molecule" / "gpu_check" / "vars" / "expectations.yml").read_text())


def test_profiles_exist_and_are_machine_readable():
    assert {"h100x8", "a100x4-mig", "rtx8000x10-version-mismatch", "h100x8-uvm-missing", "h100x8-uvm-nodes-missing"} <= set(PROFILES)
    for name in PROFILES:
        data = gpusim.load_profile(str(KIT / "profiles" / f"{name}.json"))
        assert data["name"] == name and data["simulated"] is True
        assert data["gpu_count"] == len(data["gpus"])
        assert [gpu["index"] for gpu in data["gpus"]] == list(range(len(data["gpus"])))
        assert len({gpu["uuid"] for gpu in data["gpus"]}) == len(data["gpus"])
        assert sorted(gpu["minor"] for gpu in data["gpus"]) == list(range(len(data["gpus"])))
        assert data["sources"]["recorded"] and data["sources"]["rendered"]


def test_recordings_are_the_project_fixtures():
    for path in sorted((KIT / "recordings").iterdir()):
        assert filecmp.cmp(path, FIXTURES / path.name, shallow=False), path.name


def test_h100_profile_matches_its_recorded_table():
    table = (KIT / "recordings" / "smi-table_8xH100-80GB-HBM3_driver-565.57.01.txt").read_text()
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
    # --reset starts over, as does another profile
    changed, actions = gpusim.build(profile, str(prefix), reset=True)
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
    assert smi(tmp_path / "a100", "-L").stdout == (KIT / "recordings" / "smi-L_4xA100-SXM4-80GB_MIG-on-GPU0-4x1g.20gb.txt").read_text()
    build_profile("h100x8", tmp_path / "h100")
    assert smi(tmp_path / "h100").stdout == (KIT / "recordings" / "smi-table_8xH100-80GB-HBM3_driver-565.57.01.txt").read_text()
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
        started = time.perf_counter()
        with pytest.raises(SystemExit):
            nvidia_gpu_check.main()
        results["_wall_s"] = time.perf_counter() - started
    return results


@pytest.mark.parametrize("case", SCENARIO_VARS["gpu_check_profiles"], ids=lambda case: case["name"])
def test_module_on_simulated_hosts_matches_the_scenario_expectations(tmp_path, case):
    """The same expectations molecule/gpu_check asserts in a container, here on the local file system."""
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
    # one call of the module, nvidia-smi stand-in included, stays well under a second
    assert result["_wall_s"] < 1.0, result["_wall_s"]
    print("%s: module wall time %.3f s" % (case["name"], result["_wall_s"]))
