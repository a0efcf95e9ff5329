"""Kubernetes lab inventory: groups, connection and overrides only."""
from __future__ import annotations

import yaml

from kubelab import inventory
from kubelab.common import LabSettings
from kubelab.node import NodeSpec

SPECS = [NodeSpec("gflab-a", "a100x4", "/var/lib/kubelet", 1, "172.28.240.130"),
         NodeSpec("gflab-b", "t4x2", "/data/kubelet", 2, "172.28.240.131")]


def test_hosts_groups_and_connection() -> None:
    data = yaml.safe_load(inventory.dump(inventory.render_hosts(SPECS, new=["gflab-b"])))
    fleet = data["all"]["children"]["gpu_nodes"]
    assert set(fleet["hosts"]) == {"gflab-a", "gflab-b"}
    assert fleet["hosts"]["gflab-b"] == {"ansible_connection": "community.docker.docker", "ansible_host": "gflab-b",
                                         "gpu_node_join_kubelet_root_dir": "/data/kubelet", "gpusim_profile": "t4x2"}
    assert fleet["children"]["gpu_new"]["hosts"] == {"gflab-b": None}


def test_all_nodes_are_new_by_default() -> None:
    data = inventory.render_hosts(SPECS)
    assert set(data["all"]["children"]["gpu_nodes"]["children"]["gpu_new"]["hosts"]) == {"gflab-a", "gflab-b"}


def test_group_vars_are_lab_overrides() -> None:
    text = inventory.dump(inventory.render_group_vars(LabSettings()))
    assert text.splitlines()[2] == "---"
    data = yaml.safe_load(text)
    assert data["gpu_node_join_device_plugin_image"] == "docker.io/gpufleet-lab/device-plugin-sim:0.1.0"
    assert data["gpu_node_join_kubeconfig"].endswith("/admin.kubeconfig")
