"""gpu_check_layers and gpu_fleet_drift: a node's checks from the host up, and the fleet's versions side by side."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.node.plugins.filter.from_toml import from_toml
from ansible_collections.gpufleet.node.plugins.filter.gpu_check import check_report_nodes, gpu_check_layers, gpu_fleet_drift


def _check(check_id: str, status: str, layer: str = "", remedy: str = "") -> dict:
    return {"id": check_id, "layer": layer, "status": status, "message": check_id + " said", "remedy": remedy}


HEALTHY_HOST = [_check("driver_module_loaded", "pass", "kernel"), _check("uvm_module_loaded", "pass", "kernel"),
                _check("xid_events", "skip", "gpu")]
UVM_MISSING = [_check("driver_module_loaded", "pass", "kernel"),
               _check("uvm_module_loaded", "fail", "kernel", "run `nvidia-modprobe -u -c=0`")]


def test_a_healthy_node_passes_every_layer() -> None:
    verdict = gpu_check_layers(HEALTHY_HOST, [_check("toolkit_config", "pass")], [_check("allocatable_gpus", "pass")])
    assert verdict["status"] == "pass"
    assert [(layer["name"], layer["status"]) for layer in verdict["layers"]] == [
        ("host", "pass"), ("runtime", "pass"), ("kubernetes", "pass")]
    assert (verdict["first_failing_layer"], verdict["start_here"], verdict["failed_checks"]) == (None, [], [])


def test_the_lowest_failing_layer_is_where_to_start() -> None:
    """The host's failure explains the Kubernetes one above it: start at the host, with its remedy."""
    verdict = gpu_check_layers(UVM_MISSING, [_check("toolkit_config", "warn")],
                               [_check("allocatable_gpus", "fail", remedy="fix the layer below")])
    assert verdict["status"] == "fail"
    assert verdict["first_failing_layer"] == "host"
    assert verdict["start_here"] == [{"id": "uvm_module_loaded", "message": "uvm_module_loaded said",
                                      "remedy": "run `nvidia-modprobe -u -c=0`"}]
    assert verdict["failed_checks"] == ["uvm_module_loaded", "allocatable_gpus"]
    assert [layer["status"] for layer in verdict["layers"]] == ["fail", "warn", "fail"]


def test_the_module_layer_is_kept_as_the_part() -> None:
    verdict = gpu_check_layers(UVM_MISSING, [], [])
    assert {(check["layer"], check["part"]) for check in verdict["layers"][0]["checks"]} == {("host", "kernel")}
    assert verdict["layers"][1]["status"] == "pass"  # a layer without checks fails nothing


def test_warnings_alone_do_not_name_a_layer_to_start_at() -> None:
    verdict = gpu_check_layers([_check("xid_events", "warn")], [], [])
    assert (verdict["status"], verdict["first_failing_layer"]) == ("warn", None)


@pytest.mark.parametrize(("host", "message"), [
    ([{"id": "x", "status": "broken"}], "check 'x' of layer host has status 'broken'"),
    ("not a list", "the host checks must be a list"),
])
def test_bad_checks_are_refused(host: object, message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=message):
        gpu_check_layers(host, [], [])


FIELDS = ["driver_running", "toolkit"]


def _node(host: str, driver: str, toolkit: str = "1.17.8-1", group: str = "gpu_nodes", status: str = "pass") -> dict:
    return {"host": host, "group": group, "status": status, "values": {"driver_running": driver, "toolkit": toolkit}}


def test_identical_nodes_have_no_drift() -> None:
    report = gpu_fleet_drift([_node("a", "535.261.03"), _node("b", "535.261.03")], FIELDS)
    assert report["drift"] == []
    assert all(cell["status"] == "pass" for row in report["rows"] for cell in row["cells"])


def test_the_odd_node_out_is_named_with_the_majority_value() -> None:
    nodes = [_node("a", "535.261.03"), _node("b", "535.216.03"), _node("c", "535.261.03")]
    report = gpu_fleet_drift(nodes, FIELDS)
    assert report["drift"] == [{"group": "gpu_nodes", "field": "driver_running", "majority": "535.261.03",
                                "odd": [{"host": "b", "value": "535.216.03"}]}]
    assert report["rows"][0]["host"] == "b"  # the row with a failed cell comes first
    assert [cell["status"] for cell in report["rows"][0]["cells"]] == ["fail", "pass"]


def test_groups_are_compared_apart() -> None:
    nodes = [_node("a", "535.261.03", group="h100"), _node("b", "550.127.05", group="b200")]
    assert gpu_fleet_drift(nodes, FIELDS)["drift"] == []


def test_a_tie_takes_the_value_sorted_first_and_a_missing_value_counts() -> None:
    report = gpu_fleet_drift([_node("a", "535.261.03"), _node("b", "")], FIELDS)
    assert report["drift"] == [{"group": "gpu_nodes", "field": "driver_running", "majority": "",
                                "odd": [{"host": "a", "value": "535.261.03"}]}]


def test_failed_nodes_come_after_drifting_ones_and_before_healthy_ones() -> None:
    nodes = [_node("a", "1"), _node("b", "1", status="fail"), _node("c", "1"), _node("d", "2")]
    assert [row["host"] for row in gpu_fleet_drift(nodes, FIELDS)["rows"]] == ["d", "b", "a", "c"]


def test_from_toml_parses_and_names_a_bad_document() -> None:
    assert from_toml('[nvidia-container-runtime]\nmode = "cdi"\n') == {"nvidia-container-runtime": {"mode": "cdi"}}
    with pytest.raises(AnsibleFilterError, match="not a TOML document"):
        from_toml("mode = ")


ROLE_CHECKS = {"container_toolkit_checks": [_check("toolkit_packages", "pass")],
               "containerd_nvidia_checks": [_check("containerd_version", "fail", remedy="run containerd_nvidia")],
               "gpu_node_join_runtime_checks": [_check("container_sees_gpus", "skip")],
               "gpu_node_join_checks": [_check("allocatable_gpus", "pass")],
               "gpu_node_join_device_plugin_images": ["nvcr.io/nvidia/k8s-device-plugin:v0.17.1"]}
READ = {"host": {"checks": HEALTHY_HOST,
                 "nvidia_gpu": {"driver": {"kernel_module_version": "535.261.03", "userspace_version": "535.216.03",
                                           "cuda_version": "12.2"},
                                "kernel": {"release": "6.1.0-28-amd64"}}},
        "packages": {"libnvidia-ml1": {"status": "installed", "version": "535.216.03-1"},
                     "containerd": {"status": "installed", "version": "1.7.24~ds1-6+b2"},
                     "nvidia-container-toolkit": {"status": "config-files", "version": "1.17.8-1"}}}


def test_a_node_entry_takes_its_versions_from_the_node_read() -> None:
    [node] = check_report_nodes(["gpu-1"], {"gpu-1": {**ROLE_CHECKS, "check_node_read": READ, "check_drift_group": "h100"}})
    assert node["values"] == {"driver_running": "535.261.03", "driver_userspace": "535.216.03", "driver_cuda": "12.2",
                              "driver_package": "535.216.03-1",
                              "toolkit": "", "containerd": "1.7.24~ds1-6+b2", "kernel": "6.1.0-28-amd64",
                              "device_plugin": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"}
    assert (node["host"], node["group"], node["status"], node["first_failing_layer"]) == ("gpu-1", "h100", "fail", "runtime")
    assert node["failed_checks"] == ["containerd_version"]
    assert [layer["name"] for layer in node["layers"]] == ["host", "runtime", "kubernetes"]


def test_a_node_the_read_could_not_read_fails_its_host_layer() -> None:
    [node] = check_report_nodes(["gpu-1"], {"gpu-1": {**ROLE_CHECKS, "check_node_read": {"failed": True, "msg": "no Python"}}})
    assert node["start_here"] == [{"id": "host_readable", "message": "gpu_node_read could not read the host: no Python",
                                   "remedy": "check that the node answers over Ansible's connection and has Python 3"}]
    assert node["group"] == "gpu_nodes"
    assert set(node["values"].values()) == {"", "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"}


def test_a_node_without_checks_was_not_reached() -> None:
    [node] = check_report_nodes(["gpu-2"], {"gpu-2": {}})
    assert (node["status"], node["failed_checks"], node["layers"]) == ("fail", ["unreachable"], [])
    assert node["start_here"][0]["message"] == "gpu-2 could not be checked"
    assert node["values"]["device_plugin"] == ""


def test_critical_xids_are_named_on_the_node() -> None:
    xid = {"id": "critical_xids_absent", "layer": "gpu", "status": "fail", "message": "Xid 79 on GPU 0", "remedy": "drain"}
    [node] = check_report_nodes(["gpu-1"], {"gpu-1": {**ROLE_CHECKS, "check_node_read": {"host": {"checks": [xid]}}}})
    assert node["critical_xids"] == ["Xid 79 on GPU 0"]


def test_the_mig_layout_check_is_a_check_of_the_host_layer() -> None:
    mig = {"id": "mig_layout_held", "layer": "gpu", "status": "fail", "message": "GPU 0 holds MIG off",
           "remedy": "run upgrade_driver.yml on the node"}
    healthy = {**ROLE_CHECKS, "containerd_nvidia_checks": [_check("containerd_version", "pass")]}
    [node] = check_report_nodes(["gpu-1"], {"gpu-1": {**healthy, "check_node_read": READ, "mig_layout_checks": [mig]}})
    assert (node["first_failing_layer"], node["failed_checks"]) == ("host", ["mig_layout_held"])
    assert node["layers"][0]["checks"][-1] == {**mig, "layer": "host", "part": "gpu"}
