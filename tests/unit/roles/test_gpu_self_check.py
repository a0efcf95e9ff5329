"""gpu-self-check (roles/gpu_self_check/files): the Node patch of its verdict, and the kubeconfig it reads.

The program runs on the node with the kubelet's credentials; its end-to-end test against the lab's API server
(NodeRestriction on) is in extensions/molecule/onboard_fleet/fleet_check.yml.
"""
from __future__ import annotations

import base64
import importlib.util
import json
from pathlib import Path

import pytest

PROGRAM = Path(__file__).resolve().parents[3] / "roles" / "gpu_self_check" / "files" / "gpu-self-check.py"
SPEC = importlib.util.spec_from_file_location("gpu_self_check", PROGRAM)
gsc = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(gsc)


def _node(labels=None, annotations=None, unschedulable=False) -> dict:
    return {"metadata": {"labels": labels or {}, "annotations": annotations or {}},
            "spec": {"unschedulable": True} if unschedulable else {}}


MARKED = {"labels": {gsc.HEALTH_LABEL: "unhealthy"},
          "annotations": {gsc.FAILED_ANNOTATION: "uvm_module_loaded", gsc.CORDONED_ANNOTATION: "true"}}


def test_a_failed_check_labels_annotates_and_cordons() -> None:
    patch = gsc.node_patch(_node({"gpu-tier": "high"}), ["uvm_module_loaded", "device_nodes_present"], cordon=True)
    assert patch == {"metadata": {"labels": {gsc.HEALTH_LABEL: "unhealthy"},
                                  "annotations": {gsc.FAILED_ANNOTATION: "uvm_module_loaded,device_nodes_present",
                                                  gsc.CORDONED_ANNOTATION: "true"}},
                     "spec": {"unschedulable": True}}


def test_the_patch_never_touches_taints() -> None:
    """NodeRestriction refuses a kubelet any change of its own taints; the NoSchedule taint comes with the cordon."""
    assert "taints" not in json.dumps(gsc.node_patch(_node(), ["uvm_module_loaded"], cordon=True))


def test_a_node_already_cordoned_by_someone_else_is_not_claimed() -> None:
    patch = gsc.node_patch(_node(unschedulable=True), ["uvm_module_loaded"], cordon=True)
    assert "spec" not in patch and gsc.CORDONED_ANNOTATION not in patch["metadata"]["annotations"]


def test_without_cordon_it_only_labels_and_annotates() -> None:
    assert "spec" not in gsc.node_patch(_node(), ["uvm_module_loaded"], cordon=False)


def test_a_node_already_showing_the_verdict_needs_no_patch() -> None:
    assert gsc.node_patch(_node(MARKED["labels"], MARKED["annotations"], unschedulable=True),
                          ["uvm_module_loaded"], cordon=True) is None
    assert gsc.node_patch(_node({"gpu-tier": "high"}), [], cordon=True) is None


def test_healthy_again_removes_the_marks_and_the_cordon_it_set() -> None:
    patch = gsc.node_patch(_node(MARKED["labels"], MARKED["annotations"], unschedulable=True), [], cordon=True)
    assert patch == {"metadata": {"labels": {gsc.HEALTH_LABEL: None},
                                  "annotations": {gsc.FAILED_ANNOTATION: None, gsc.CORDONED_ANNOTATION: None}},
                     "spec": {"unschedulable": None}}


def test_healthy_again_leaves_a_cordon_it_did_not_set() -> None:
    patch = gsc.node_patch(_node(MARKED["labels"], {gsc.FAILED_ANNOTATION: "x"}, unschedulable=True), [], cordon=True)
    assert "spec" not in patch


def test_a_changed_list_of_failed_checks_is_updated() -> None:
    patch = gsc.node_patch(_node(MARKED["labels"], MARKED["annotations"], unschedulable=True),
                           ["critical_xids_absent"], cordon=True)
    assert patch == {"metadata": {"annotations": {gsc.FAILED_ANNOTATION: "critical_xids_absent"}}}


def _kubeconfig(tmp_path: Path, user: dict, as_yaml: bool) -> Path:
    cluster = {"server": "https://10.0.0.1:6443/", "certificate-authority": str(tmp_path / "ca.crt")}
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "node",
              "clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": user}],
              "contexts": [{"name": "node", "context": {"cluster": "c", "user": "u"}}]}
    path = tmp_path / "kubelet.conf"
    if as_yaml:
        yaml = pytest.importorskip("yaml")
        path.write_text(yaml.safe_dump(config))
    else:
        path.write_text(json.dumps(config))
    return path


@pytest.fixture()
def no_tls(monkeypatch: pytest.MonkeyPatch) -> list:
    """ssl context creation without real certificates: records what the program loads."""
    loaded: list = []

    class Context:
        def load_cert_chain(self, certificate, key):
            loaded.append((Path(certificate).read_bytes(), Path(key).read_bytes()))

    monkeypatch.setattr(gsc.ssl, "create_default_context", lambda cafile=None: loaded.append(cafile) or Context())
    return loaded


@pytest.mark.parametrize("as_yaml", [False, True], ids=["json", "yaml"])
def test_embedded_client_certificates_go_to_private_files_that_are_removed(tmp_path, no_tls, as_yaml) -> None:
    user = {"client-certificate-data": base64.b64encode(b"CERT").decode(), "client-key-data": base64.b64encode(b"KEY").decode()}
    api = gsc.Api(str(_kubeconfig(tmp_path, user, as_yaml)))
    assert api.server == "https://10.0.0.1:6443"
    assert no_tls == [str(tmp_path / "ca.crt"), (b"CERT", b"KEY")]
    assert all((Path(api._tmp) / name).stat().st_mode & 0o777 == 0o600 for name in ("client-certificate", "client-key"))
    api.close()
    assert not Path(api._tmp).exists()


def test_rotated_kubelet_certificates_are_read_from_their_file(tmp_path, no_tls) -> None:
    """The kubelet's rotating client certificate: one PEM file with certificate and key."""
    pem = tmp_path / "kubelet-client-current.pem"
    pem.write_bytes(b"CERT+KEY")
    gsc.Api(str(_kubeconfig(tmp_path, {"client-certificate": str(pem), "client-key": str(pem)}, as_yaml=False))).close()
    assert no_tls[1] == (b"CERT+KEY", b"CERT+KEY")
