"""gpufleet.node.gpu_node_read: what it reads and runs, with mocked commands and real files."""
from __future__ import annotations

import grp
import os
import pwd
import socket
from pathlib import Path
from unittest import mock

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils._nvidia_parsers import QUERY_GPU_FIELDS
from ansible_collections.gpufleet.node.plugins.modules import gpu_node_read, nvidia_gpu_check

from gpusim_helpers import build_profile

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "nvidia"
from module_runner import run_module
from test_nvidia_gpu_check import FakeCommands, healthy_answers

DUMP_V2 = """version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "nvidia"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/bin/nvidia-container-runtime"
  SystemdCgroup = true
"""
DUMP_V3 = """version = 3
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/local/bin/nvidia-container-runtime"
"""
DUMP_NO_HANDLER = """version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
"""
IMAGE = "registry.example/cuda-base:12.2"
CONTAINER = {"containerd_config": "/etc/containerd/config.toml", "handler": "nvidia", "image": IMAGE,
             "name": "gpufleet-check-n1", "args": ["--env", "NVIDIA_VISIBLE_DEVICES=0"], "command": ["/usr/bin/nvidia-smi", "-L"]}


def run(args, commands):
    return run_module(gpu_node_read.main, args, commands=commands,
                      get_bin_path=lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name)


def container_answers(dump=DUMP_V2, image_listed=True, run_output="GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"):
    return {
        ("containerd", "--config", "/etc/containerd/config.toml", "config", "dump"): (0, dump, ""),
        ("ctr", "--namespace", "k8s.io", "images", "list", "--quiet", "name==" + IMAGE): (0, IMAGE + "\n" if image_listed else "", ""),
        ("ctr", "--namespace", "k8s.io", "run", "--rm", "--runc-binary", "/usr/bin/nvidia-container-runtime",
         "--env", "NVIDIA_VISIBLE_DEVICES=0", IMAGE, "gpufleet-check-n1", "/usr/bin/nvidia-smi", "-L"): (0, run_output, ""),
    }


def test_packages_come_from_one_dpkg_query_and_unknown_ones_are_absent():
    listing = ("containerd\t1.6.20~ds1-1+deb12u3\thold\tinstalled\n"
               "nvidia-container-toolkit\t1.17.8-1\tinstall\tconfig-files\n")
    commands = FakeCommands({("dpkg-query", "-W", "-f=" + gpu_node_read.DPKG_FORMAT, "containerd", "nvidia-container-toolkit", "missing"):
                             (1, listing, "dpkg-query: no packages found matching missing\n")})
    result = run({"packages": ["containerd", "nvidia-container-toolkit", "missing"]}, commands)
    assert result["changed"] is False
    assert result["packages"] == {
        "containerd": {"version": "1.6.20~ds1-1+deb12u3", "want": "hold", "status": "installed"},
        "nvidia-container-toolkit": {"version": "1.17.8-1", "want": "install", "status": "config-files"},
    }
    assert len(commands.calls) == 1


def test_files_and_stats_report_what_exists(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[nvidia-container-runtime]\nmode = "auto"\n')
    sock_path = tmp_path / "kubelet.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    try:
        result = run({"files": {"toolkit": str(config), "gone": str(tmp_path / "gone.toml")},
                      "stats": {"socket": str(sock_path), "dir": str(tmp_path), "gone": str(tmp_path / "gone.sock")}}, FakeCommands())
    finally:
        server.close()
    toolkit = result["files"]["toolkit"]
    assert {key: toolkit[key] for key in ("path", "exists", "content")} == {
        "path": str(config), "exists": True, "content": '[nvidia-container-runtime]\nmode = "auto"\n'}
    assert toolkit["mode"] == "%04o" % (config.stat().st_mode & 0o7777)
    assert toolkit["owner"] == pwd.getpwuid(config.stat().st_uid)[0] and toolkit["group"] == grp.getgrgid(config.stat().st_gid)[0]
    assert result["files"]["gone"] == {"path": str(tmp_path / "gone.toml"), "exists": False, "content": ""}
    assert result["stats"]["socket"]["type"] == "socket" and result["stats"]["socket"]["exists"] is True
    assert result["stats"]["dir"]["type"] == "directory"
    assert result["stats"]["dir"]["mode"] == "%04o" % (tmp_path.stat().st_mode & 0o7777)
    assert result["stats"]["gone"] == {"path": str(tmp_path / "gone.sock"), "exists": False, "type": ""}


APT_LISTS = ("find", "/var/lib/apt/lists", "-maxdepth", "1", "-name", "*_Packages*", "-print", "-quit")
SHOW_SERVICES = ("systemctl", "show", "--property=Id", "--property=LoadState", "--property=UnitFileState",
                 "--property=ActiveState", "--property=SubState", "--")


def test_each_read_runs_its_own_program_and_keeps_its_result():
    commands = FakeCommands({
        ("ctr", "version"): (0, "Server:\n  Version:  v1.6.20\n", ""),
        ("dpkg", "--print-architecture"): (0, "amd64\n", ""),
        ("nvidia-ctk", "--version"): (1, "", "no\n"),
        APT_LISTS: (0, "", ""),
        ("apt-cache", "policy", "containerd", "nvidia-container-toolkit"): (0, "containerd:\n", ""),
        SHOW_SERVICES + ("containerd", "-x.service"): (0, "Id=containerd.service\n", ""),
        ("containerd", "--config", "/etc/containerd/config.toml", "config", "dump"): (0, "version = 2\n", ""),
    })
    result = run({"reads": ["containerd_version", "nvidia_ctk_version", "dpkg_architecture", "apt_lists"],
                  "apt_policy": ["containerd", "nvidia-container-toolkit"], "services": ["containerd", "-x.service"],
                  "containerd_config_dump": "/etc/containerd/config.toml"}, commands)
    read = result["commands"]
    assert list(read) == ["apt_lists", "dpkg_architecture", "nvidia_ctk_version", "containerd_version", "apt_policy",
                          "services", "containerd_config_dump"]
    assert read["containerd_version"]["rc"] == 0 and "v1.6.20" in read["containerd_version"]["stdout"]
    assert read["nvidia_ctk_version"]["rc"] == 1 and read["nvidia_ctk_version"]["stderr"] == "no\n"
    assert read["dpkg_architecture"]["stdout"] == "amd64\n" and read["apt_lists"]["stdout"] == ""
    assert read["apt_policy"]["stdout"] == "containerd:\n" and read["services"]["stdout"] == "Id=containerd.service\n"
    assert read["containerd_config_dump"]["stdout"] == "version = 2\n"
    assert len(commands.calls) == 7


def test_the_mig_listing_is_what_the_mig_layout_role_reads():
    lgi = (FIXTURES / "mig-lgi_80GB-class_2-GPUs-trimmed_mixed-profiles.txt").read_text()
    commands = FakeCommands({
        ("smi", "--query-gpu=index,name,pci.device_id,mig.mode.current,mig.mode.pending", "--format=csv,noheader"):
            (0, "0, NVIDIA A100-SXM4-80GB, 0x20B210DE, Enabled, Enabled\n", ""),
        ("smi", "mig", "-lgi"): (0, lgi, ""),
        ("smi", "mig", "-lci"): (6, "No compute instances found.\n", ""),
    })
    read = run({"mig_listing": "smi"}, commands)["commands"]
    assert list(read) == ["mig_gpus", "mig_gpu_instances", "mig_compute_instances"]
    assert read["mig_gpu_instances"]["stdout"] == lgi and read["mig_compute_instances"]["rc"] == 6
    assert "mig_gpus" not in run({}, FakeCommands({}))["commands"]


def test_an_empty_config_path_dumps_containerds_default_configuration():
    commands = FakeCommands({("containerd", "config", "dump"): (0, "version = 3\n", "")})
    assert run({"containerd_config_dump": ""}, commands)["commands"]["containerd_config_dump"]["stdout"] == "version = 3\n"


def test_nothing_runs_when_no_read_is_asked_for():
    commands = FakeCommands()
    assert run({}, commands)["commands"] == {} and commands.calls == []


def test_a_read_of_no_fixed_name_is_refused():
    result = run({"reads": ["rm -rf /"]}, FakeCommands())
    assert result["failed"] is True and "reads" in result["msg"] and "apt_lists" in result["msg"]


def test_an_arbitrary_command_is_not_an_option():
    result = run({"commands": {"version": ["ctr", "version"]}}, FakeCommands())
    assert result["failed"] is True and "commands" in result["msg"]


def kubelet_tree(tmp_path, cmdline, config_text=None):
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    if config_text is not None:
        (tmp_path / "kubelet.yaml").write_text(config_text)
    (proc / "4242" / "cmdline").write_bytes(("\0".join(cmdline) + "\0").encode())
    return proc


SHOW_KUBELET = ("systemctl", "show", "--property", "MainPID", "--value", "kubelet")


@pytest.mark.parametrize("flags, config_text, driver, source", [
    (["--cgroup-driver=systemd"], None, "systemd", "--cgroup-driver"),
    (["--cgroup-driver", "cgroupfs"], None, "cgroupfs", "--cgroup-driver"),
    (["--config={config}"], "kind: KubeletConfiguration\ncgroupDriver: systemd\n", "systemd", "cgroupDriver in {config}"),
    (["--config", "{config}"], "kind: KubeletConfiguration\n", "", ""),
    (["--config={config}"], '{"kind": "KubeletConfiguration", "cgroupDriver": "cgroupfs"}', "cgroupfs", "cgroupDriver in {config}"),
    (["--cgroup-driver=cgroupfs", "--cgroup-driver=systemd"], None, "systemd", "--cgroup-driver"),
    ([], None, "", ""),
])
def test_the_kubelet_cgroup_driver_is_its_flag_else_its_config_file(tmp_path, flags, config_text, driver, source):
    config = str(tmp_path / "kubelet.yaml")
    cmdline = ["/usr/bin/kubelet", "--root-dir=/var/lib/kubelet"] + [flag.format(config=config) for flag in flags]
    proc = kubelet_tree(tmp_path, cmdline, config_text)
    with mock.patch.object(gpu_node_read, "PROC_ROOT", str(proc)):
        result = run({"kubelet_service": "kubelet"}, FakeCommands({SHOW_KUBELET: (0, "4242\n", "")}))
    kubelet = result["kubelet"]
    assert kubelet["main_pid"] == 4242 and kubelet["cmdline"] == cmdline
    assert kubelet["cgroup_driver"] == driver
    assert kubelet["cgroup_driver_source"] == source.format(config=config)
    assert kubelet["config"] == (config_text or "")


def test_a_stopped_kubelet_has_no_command_line():
    result = run({"kubelet_service": "kubelet"}, FakeCommands({SHOW_KUBELET: (0, "0\n", "")}))
    assert result["kubelet"]["main_pid"] == 0 and result["kubelet"]["cmdline"] == [] and result["kubelet"]["cgroup_driver"] == ""


CHECKER = {"checker": "/usr/local/libexec/gpufleet/containerd-config-check.py", "config": "/etc/containerd/config.toml",
           "runtime_name": "nvidia", "binary_name": "/usr/bin/nvidia-container-runtime", "default_runtime": "runc",
           "config_version": 2}
CHECKER_ARGV = ["python3", CHECKER["checker"], "--config", "/etc/containerd/config.toml", "--runtime-name", "nvidia",
                "--binary-name", "/usr/bin/nvidia-container-runtime", "--default-runtime", "runc", "--config-version", "2"]


def test_the_containerd_checker_gets_the_kubelet_cgroup_driver(tmp_path):
    proc = kubelet_tree(tmp_path, ["/usr/bin/kubelet", "--cgroup-driver=cgroupfs"])
    answers = {SHOW_KUBELET: (0, "4242\n", ""), tuple(CHECKER_ARGV + ["--systemd-cgroup", "false"]): (0, "{}\n", "")}
    with mock.patch.object(gpu_node_read, "PROC_ROOT", str(proc)):
        result = run({"kubelet_service": "kubelet", "containerd_check": CHECKER}, FakeCommands(answers))
    assert result["containerd_check"]["rc"] == 0 and result["containerd_check"]["systemd_cgroup"] is False


def test_the_containerd_checker_runs_without_a_driver_when_no_kubelet_is_read():
    answers = {tuple(CHECKER_ARGV): (1, "", "containerd loaded it but: no runtime 'nvidia'\n")}
    result = run({"containerd_check": CHECKER}, FakeCommands(answers))
    assert result["containerd_check"]["rc"] == 1 and result["containerd_check"]["systemd_cgroup"] is None
    assert "kubelet" not in result


def test_the_container_runs_through_the_binary_of_the_loaded_handler():
    commands = FakeCommands(container_answers())
    result = run({"container_run": CONTAINER}, commands)["container_run"]
    assert result["binary"] == "/usr/bin/nvidia-container-runtime" and result["image_present"] is True
    assert result["ran"] is True and result["why"] == ""
    assert result["result"]["rc"] == 0 and result["result"]["stdout"].startswith("GPU 0:")


class RunsInTurn(FakeCommands):
    """The container run answers in turn, the last answer for every later call."""

    def __init__(self, answers, run_key, run_answers):
        super().__init__(answers)
        self.run_key, self.run_answers = run_key, list(run_answers)

    def __call__(self, args, environ_update):
        answer = super().__call__(args, environ_update)
        argv = self.calls[-1]
        if tuple([os.path.basename(argv[0])] + argv[1:]) != self.run_key:
            return answer
        return self.run_answers.pop(0) if len(self.run_answers) > 1 else self.run_answers[0]


RUN_KEY = next(key for key in container_answers() if key[1:4] == ("--namespace", "k8s.io", "run"))
LISTED = (0, "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n", "")


@pytest.mark.parametrize("run_answers, attempts, rc, stdout", [
    ([(0, "", "")] + [LISTED], 2, 0, LISTED[1]),
    ([(0, "", "")], 3, 0, ""),
    ([(6, "No devices were found\n", "")], 1, 6, "No devices were found\n"),
    ([(1, "", "ctr: failed to create shim task\n")], 1, 1, ""),
])
def test_a_run_that_printed_nothing_is_run_again(run_answers, attempts, rc, stdout):
    commands = RunsInTurn(container_answers(), RUN_KEY, run_answers)
    result = run({"container_run": CONTAINER}, commands)["container_run"]
    assert (result["attempts"], result["result"]["rc"], result["result"]["stdout"]) == (attempts, rc, stdout)
    assert sum(1 for argv in commands.calls if argv[1:4] == ["--namespace", "k8s.io", "run"]) == attempts


@pytest.mark.parametrize("dump, image_listed, why", [
    (DUMP_V2, False, "image"),
    (DUMP_NO_HANDLER, True, "handler"),
    ("not toml [", True, "handler"),
])
def test_no_container_runs_without_the_image_or_the_handler(dump, image_listed, why):
    commands = FakeCommands(container_answers(dump=dump, image_listed=image_listed))
    result = run({"container_run": CONTAINER}, commands)["container_run"]
    assert result["ran"] is False and result["why"] == why and result["result"] is None
    assert not any("run" in call for call in commands.calls)


@pytest.mark.parametrize("dump, binary", [
    (DUMP_V2, "/usr/bin/nvidia-container-runtime"),
    (DUMP_V3, "/usr/local/bin/nvidia-container-runtime"),
    (DUMP_NO_HANDLER, ""),
    ("", ""),
])
def test_handler_binary_reads_config_versions_2_and_3(dump, binary):
    assert gpu_node_read.handler_binary(dump, "nvidia") == binary


def test_the_host_check_is_the_one_of_nvidia_gpu_check(tmp_path):
    root = build_profile("h100x8", tmp_path / "sim")
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexit 99\n")
    smi.chmod(0o755)
    read = run({"host_check": {"host_root": str(root), "nvidia_smi_path": str(smi)}}, FakeCommands(healthy_answers("h100x8")))
    alone = run_module(nvidia_gpu_check.main, {"host_root": str(root), "nvidia_smi_path": str(smi), "fail_on_error": False},
                       commands=FakeCommands(healthy_answers("h100x8")))
    assert read["host"]["checks"] == alone["checks"]
    assert read["host"]["failed_checks"] == alone["failed_checks"] == []
    assert read["host"]["nvidia_gpu"]["gpus"] == alone["nvidia_gpu"]["gpus"] and len(alone["nvidia_gpu"]["gpus"]) == 8


def test_no_container_runs_when_the_host_check_shows_no_gpu(tmp_path):
    commands = FakeCommands(container_answers())
    missing_root = tmp_path / "empty"
    missing_root.mkdir()
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexit 99\n")
    smi.chmod(0o755)
    commands.answers[("--query-gpu=" + ",".join(QUERY_GPU_FIELDS), "--format=csv,noheader,nounits")] = (
        9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "")
    result = run({"host_check": {"host_root": str(missing_root), "nvidia_smi_path": str(smi)}, "container_run": CONTAINER}, commands)
    assert result["host"]["nvidia_gpu"]["gpus"] == []
    assert result["container_run"]["ran"] is False and result["container_run"]["why"] == "gpus"


def test_a_missing_host_root_is_refused(tmp_path):
    result = run({"host_check": {"host_root": str(tmp_path / "nowhere")}}, FakeCommands())
    assert result["failed"] is True
    assert result["msg"] == "host_check.host_root is %r: it must be an existing directory (/ for this host)" % str(tmp_path / "nowhere")


def test_reading_changes_nothing_in_check_mode(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("x = 1\n")
    before = os.stat(config)
    result = run({"files": {"c": str(config)}, "_ansible_check_mode": True}, FakeCommands())
    assert result["changed"] is False and result["files"]["c"]["exists"] is True
    assert os.stat(config).st_mtime == before.st_mtime
