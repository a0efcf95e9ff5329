"""Kubernetes lab inventory: groups, connection and overrides only."""
from __future__ import annotations

import yaml

from gpufleet_lab import inventory
from gpufleet_lab.common import LabSettings
from gpufleet_lab.node import NodeSpec

SPECS = [NodeSpec("gflab-a", "a100x4", "/var/lib/kubelet", 1, "172.28.240.130"),
         NodeSpec("gflab-b", "t4x2", "/data/kubelet", 2, "172.28.240.131")]


def test_hosts_groups_and_connection() -> None:
    data = yaml.safe_load(inventory.dump(inventory.render_hosts(SPECS, new=["gflab-b"])))
    fleet = data["all"]["children"]["gpu_nodes"]
    assert set(fleet["hosts"]) == {"gflab-a", "gflab-b"}
    assert fleet["hosts"]["gflab-b"] == {"ansible_connection": "docker", "ansible_host": "gflab-b",
                                         "gpu_node_join_kubelet_root_dir": "/data/kubelet", "gpusim_profile": "t4x2"}
    assert fleet["children"]["gpu_new"]["hosts"] == {"gflab-b": None}


def test_all_nodes_are_new_by_default() -> None:
    data = inventory.render_hosts(SPECS)
    assert set(data["all"]["children"]["gpu_nodes"]["children"]["gpu_new"]["hosts"]) == {"gflab-a", "gflab-b"}


VERSIONS = {
    "driver": {"previous": "535.216.03", "current": "535.261.03", "newest": "535.309.01"},
    "driver_packages": {"535.261.03": {"package_version": "535.261.03-1", "package_versions": {}}},
    "containerd": {"version": "1.6.20~ds1-1+deb12u3"},
    "mirror": {"url": "file:///srv/gpufleet-package-mirror", "suite": "gpufleet-lab", "containerd_suite": "gpufleet-lab-containerd",
               "component": "main"},
}


def test_group_vars_are_lab_overrides(monkeypatch) -> None:
    monkeypatch.setattr(inventory.standins, "public_key", lambda: "-----BEGIN PGP PUBLIC KEY BLOCK-----\n...\n")
    monkeypatch.setattr(inventory.package_mirror, "public_key", lambda: "-----BEGIN PGP PUBLIC KEY BLOCK-----\nm\n")
    monkeypatch.setattr(inventory.package_mirror, "load_versions", lambda: VERSIONS)
    monkeypatch.setattr(inventory.standins, "public_key_fingerprint", lambda: "A" * 40)
    monkeypatch.setattr(inventory.package_mirror, "public_key_fingerprint", lambda: "B" * 40)
    text = inventory.dump(inventory.render_group_vars(LabSettings()))
    assert text.splitlines()[2] == "---"
    data = yaml.safe_load(text)
    image = "{gpu_node_join_device_plugin_registry}/{gpu_node_join_device_plugin_image}:{gpu_node_join_device_plugin_version}"
    # NVIDIA's plugin and toolkit at the collection's defaults (node.py puts them on the nodes NVIDIA's code serves)
    assert image.format(**data) == "docker.io/gpufleet-lab/k8s-device-plugin:v0.20.0"
    assert data["container_toolkit_version"] == "1.20.0-1"
    # the playbooks run as the restricted identity of playbooks/access.yml; the tests' own API calls as the admin
    assert data["gpu_node_join_kubeconfig"] == str(LabSettings().node_kubeconfig)
    assert data["gpu_node_join_kubeconfig"].endswith("/gpufleet-node.kubeconfig")
    assert data["gpufleet_lab_admin_kubeconfig"].endswith("/admin.kubeconfig")
    assert data["nvidia_driver_kernel_module"] == "none"
    assert data["container_toolkit_repo_url"].startswith("file:/")
    assert "BEGIN PGP PUBLIC KEY BLOCK" in data["container_toolkit_repo_key_content"]
    assert data["containerd_nvidia_cri_settings"]["restrict_oom_score_adj"] is True
    # the driver and containerd come from the package mirror, at the versions its versions.yml chose
    assert data["nvidia_driver_version"] == "535.261.03"
    assert data["nvidia_driver_source"] == "mirror"
    assert data["nvidia_driver_mirror_url"] == data["containerd_nvidia_repo_url"] == "file:///srv/gpufleet-package-mirror"
    assert data["nvidia_driver_mirror_signing_key"] == data["containerd_nvidia_repo_key_content"]
    # each key's fingerprint as gpg read it when the lab made the key
    assert data["container_toolkit_repo_key_fingerprint"] == "A" * 40
    assert data["nvidia_driver_mirror_signing_key_fingerprint"] == data["containerd_nvidia_repo_key_fingerprint"] == "B" * 40
    # apt refuses one URI and suite with two Signed-By values: the roles' sources differ in suite
    assert data["nvidia_driver_mirror_suites"] == ["gpufleet-lab"]
    assert data["containerd_nvidia_repo_suite"] == "gpufleet-lab-containerd"
    assert data["containerd_nvidia_version"] == "1.6.20~ds1-1+deb12u3"
    assert "nvidia_driver_version" in data["nvidia_driver_package_version"]  # follows a play's version
