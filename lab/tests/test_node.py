"""Kubernetes lab nodes: kubelet flags, containerd and CNI configuration, names."""
from __future__ import annotations

import json

import pytest

from gpufleet_lab import node
from gpufleet_lab.common import LabSettings, validate_node_name
from gpufleet_lab.proc import LabError

SPEC = node.NodeSpec(name="gflab-a", gpu_profile="a100x4", kubelet_root_dir="/data/kubelet", index=3,
                     ip="172.28.240.130")


def test_kubelet_flags_follow_the_lab_rules() -> None:
    flags = node.kubelet_flags(SPEC)
    for wanted in ("--fail-swap-on=false", "--cgroups-per-qos=false", "--enforce-node-allocatable=",
                   "--node-ip=172.28.240.130", "--root-dir=/data/kubelet", "--port=10253",
                   "--hostname-override=gflab-a", "--container-runtime=remote",
                   "--node-labels=gpufleet.lab/gpu-profile=a100x4", "--anonymous-auth=false"):
        assert wanted in flags
    assert len(flags) == len(set(f.split("=")[0] for f in flags)), "a flag is given twice"


def test_kubelet_flags_need_the_node_ip() -> None:
    with pytest.raises(LabError, match="node IP"):
        node.kubelet_flags(node.NodeSpec("n", "p", "/var/lib/kubelet", 1))


def test_distinct_ports_bridges_and_subnets_per_node() -> None:
    settings = LabSettings()
    other = node.NodeSpec("gflab-b", "p", "/var/lib/kubelet", 4, "172.28.240.131")
    assert SPEC.kubelet_port != other.kubelet_port
    assert SPEC.bridge != other.bridge and len(SPEC.bridge) <= 15
    assert SPEC.pod_subnet(settings) == "10.244.3.0/24" != other.pod_subnet(settings)
    assert SPEC.root_device_plugin_dir == "/data/kubelet/device-plugins"


def test_device_plugin_dir_candidates() -> None:
    assert node.device_plugin_dir_candidates("/data/kubelet") == ["/data/kubelet/device-plugins",
                                                                  "/var/lib/kubelet/device-plugins"]
    assert node.device_plugin_dir_candidates("/var/lib/kubelet") == ["/var/lib/kubelet/device-plugins"]


def test_unit_runs_the_cached_kubelet() -> None:
    unit = node.kubelet_unit(SPEC)
    assert "ExecStart=/opt/kubelab/bin/kubelet \\\n    --kubeconfig=/etc/kubernetes/kubelet.conf" in unit
    assert "Requires=containerd.service" in unit and "WantedBy=multi-user.target" in unit


def test_containerd_config_is_minimal_and_lab_specific() -> None:
    import tomllib

    config = tomllib.loads(node.containerd_config())
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert config["version"] == 2
    assert cri["restrict_oom_score_adj"] is True
    assert cri["sandbox_image"] == "docker.io/gpufleet-lab/pause:3.4"
    assert cri["cni"]["bin_dir"] == "/usr/lib/cni"


def test_cni_conflist() -> None:
    config = json.loads(node.cni_conflist(SPEC, LabSettings()))
    bridge = config["plugins"][0]
    assert bridge["type"] == "bridge" and bridge["bridge"] == "gflab3"
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.244.3.0/24"}]]


@pytest.mark.parametrize("value", ["relative/dir", "/", "/data/../etc", "/proc"])
def test_bad_kubelet_root_dir(value: str) -> None:
    with pytest.raises(LabError, match=f"kubelet_root_dir={value!r}"):
        node.validate_kubelet_root_dir(value)


def test_default_kubelet_root_dir() -> None:
    assert node.validate_kubelet_root_dir(None) == "/var/lib/kubelet"
    assert node.validate_kubelet_root_dir("/data/kubelet/") == "/data/kubelet"


@pytest.mark.parametrize("name", ["Upper", "-x", "x_y", "a" * 50, ""])
def test_bad_node_names(name: str) -> None:
    with pytest.raises(LabError, match="node name"):
        validate_node_name(name)


def test_next_index() -> None:
    assert node.next_index(set()) == 1
    assert node.next_index({1, 2, 4}) == 3
    with pytest.raises(LabError):
        node.next_index({1, 2}, limit=3)


def test_other_labs_are_kubernetes_labs_other_than_this_one(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def fake_run(argv: list[str], **_kwargs: object) -> object:
        seen.append(argv)
        return type("Done", (), {"stdout": "kube2\nkube\nkube2\n"})()

    monkeypatch.setattr(node, "run", fake_run)
    monkeypatch.delenv("GPUFLEET_LAB_NAME", raising=False)
    assert node.other_labs() == {"kube2"}
    # only containers with a role (node, control plane): molecule's scenario hosts (gpufleet.lab=molecule) run no kubelet
    assert "label=gpufleet.lab.role" in seen[0]


def test_specs_are_written_whole_under_the_nodes_lock(tmp_path) -> None:
    settings = LabSettings(state_dir=tmp_path)
    with node.nodes_lock(settings):
        node._save_spec(settings, node.NodeSpec(name="n1", gpu_profile="h100x8", kubelet_root_dir="/var/lib/kubelet", index=1))
    node._save_spec(settings, node.NodeSpec(name="n1", gpu_profile="h100x8", kubelet_root_dir="/var/lib/kubelet", index=1,
                                            ip="172.28.240.128"))
    assert [spec.ip for spec in node.load_specs(settings)] == ["172.28.240.128"]
    assert sorted(path.name for path in settings.nodes_dir.iterdir()) == ["n1.json"]
    assert (tmp_path / "nodes.lock").is_file()
