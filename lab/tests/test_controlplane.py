"""Kubernetes lab control plane: settings, component flags, launch and sysctl bookkeeping."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet_lab import controlplane, kube, sysctl
from gpufleet_lab.common import LabSettings
from gpufleet_lab.proc import LabError


def test_settings_addresses() -> None:
    settings = LabSettings(subnet="172.28.240.0/24")
    assert settings.gateway == "172.28.240.1"
    assert settings.control_plane_ip == "172.28.240.2"
    assert settings.node_ip_range == "172.28.240.128/25"
    assert settings.kubernetes_service_ip == "10.96.0.1"
    assert settings.api_url == "https://127.0.0.1:6443"


@pytest.mark.parametrize(("env", "message"), [
    ({"GPUFLEET_LAB_API_PORT": "http"}, "GPUFLEET_LAB_API_PORT='http'"),
    ({"GPUFLEET_LAB_SUBNET": "nonsense"}, "GPUFLEET_LAB_SUBNET='nonsense'"),
    ({"GPUFLEET_LAB_SUBNET": "10.0.0.0/30"}, "/28 or larger"),
    ({"GPUFLEET_LAB_NAME": "Lab 2"}, "GPUFLEET_LAB_NAME='Lab 2'"),
])
def test_bad_settings(env: dict[str, str], message: str) -> None:
    with pytest.raises(LabError, match=message):
        LabSettings.from_env(env)


def test_default_lab_keeps_its_names() -> None:
    settings = LabSettings.from_env({})
    assert (settings.name, settings.control_plane_name, settings.network, settings.label) == (
        "kube", "gpufleet-lab-control-plane", "gpufleet-lab-kube", "gpufleet.lab=kube")


def test_a_second_lab_has_its_own_container_network_state_and_label() -> None:
    settings = LabSettings.from_env({"GPUFLEET_LAB_NAME": "lane2", "GPUFLEET_LAB_SUBNET": "172.28.241.0/24",
                                     "GPUFLEET_LAB_API_PORT": "6444"})
    assert settings.control_plane_name == "gpufleet-lab-lane2-control-plane"
    assert settings.network == "gpufleet-lab-lane2"
    assert settings.state_dir == Path("/var/lib/gpufleet-lab/lane2")
    assert settings.label == "gpufleet.lab=lane2"
    assert (settings.control_plane_ip, settings.api_url) == ("172.28.241.2", "https://127.0.0.1:6444")


def test_apiserver_flags() -> None:
    flags = controlplane.apiserver_argv(LabSettings())
    assert "--kubelet-preferred-address-types=InternalIP" in flags
    assert "--advertise-address=172.28.240.2" in flags
    assert "--authorization-mode=Node,RBAC" in flags
    assert any(f.startswith("--token-auth-file=") for f in flags)
    assert any(f.startswith("--service-account-key-file=") for f in flags)


def test_controller_manager_flags() -> None:
    flags = controlplane.controller_manager_argv(LabSettings())
    assert "--controllers=*,-nodeipam" in flags
    assert any(f.startswith("--service-account-private-key-file=") for f in flags)
    assert any(f.startswith("--root-ca-file=") for f in flags)


def test_launch_script_records_the_pid_of_the_component() -> None:
    script = controlplane.launch_script(controlplane.Component("etcd", ("/opt/etcd", "--name=it's")))
    assert "echo $$ > /var/lib/kubelab/run/etcd.pid" in script
    assert "exec '/opt/etcd' '--name=it'\\''s' >>/var/lib/kubelab/log/etcd.log 2>&1" in script


def test_components_start_in_order() -> None:
    assert [c.name for c in controlplane.components(LabSettings())] == list(controlplane.COMPONENTS)


def _fake_proc(tmp_path: Path, values: dict[str, str]) -> Path:
    for name, value in values.items():
        path = sysctl.sysctl_path(name, tmp_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
    return tmp_path


def test_sysctls_are_recorded_once_and_restored(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path / "proc", {"kernel.panic": "1", "kernel.panic_on_oops": "0",
                                          "vm.overcommit_memory": "0"})
    state = tmp_path / "state"
    state.mkdir()
    assert sysctl.record(state, proc) == {"kernel.panic": "1", "kernel.panic_on_oops": "0",
                                          "vm.overcommit_memory": "0"}
    _fake_proc(proc, {"kernel.panic": "10", "kernel.panic_on_oops": "1"})  # what a kubelet does
    assert sysctl.record(state, proc)["kernel.panic"] == "1"  # a second `up` keeps the first record
    recorded = json.loads((state / sysctl.RECORD_NAME).read_text())
    assert sysctl.restore(state, proc) == {"kernel.panic": ("10", "1"), "kernel.panic_on_oops": ("1", "0")}
    assert sysctl.read(proc) == recorded
    assert not (state / sysctl.RECORD_NAME).exists(), "the last lab down removes the machine's record"
    assert sysctl.restore(state, proc) == {}


def test_sysctl_record_dir_is_made(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path / "proc", {"kernel.panic": "1", "kernel.panic_on_oops": "0",
                                          "vm.overcommit_memory": "0"})
    assert sysctl.record(tmp_path / "new" / "dir", proc)["vm.overcommit_memory"] == "0"
    assert sysctl.record_path(tmp_path / "new" / "dir").is_file()


def test_down_leaves_the_kernel_parameters_to_a_lab_still_up(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path / "proc", {"kernel.panic": "1", "kernel.panic_on_oops": "0",
                                          "vm.overcommit_memory": "0"})
    sysctl.record(tmp_path, proc)
    _fake_proc(proc, {"kernel.panic": "10"})  # a kubelet of either lab
    assert kube.restore_kernel_parameters({"kube2"}, tmp_path, proc) == {}
    assert sysctl.read(proc)["kernel.panic"] == "10" and sysctl.record_path(tmp_path).is_file()
    assert kube.restore_kernel_parameters(set(), tmp_path, proc) == {"kernel.panic": ("10", "1")}
    assert not sysctl.record_path(tmp_path).exists()
