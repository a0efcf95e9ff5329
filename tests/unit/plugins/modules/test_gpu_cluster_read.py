"""gpufleet.node.gpu_cluster_read against a local HTTPS stand-in of the two API paths it reads."""
from __future__ import annotations

import subprocess
import pytest

from ansible_collections.gpufleet.node.plugins.modules import gpu_cluster_read

from kube_api_stand_in import JsonHandler, serve_https, write_kubeconfig
from module_runner import run_module

TOKEN = "s3cret-token"
NODES = {"kind": "NodeList", "items": [{"metadata": {"name": "gpu-1", "labels": {"node-role.kubernetes.io/gpu": "true"}}}]}
NAMESPACE = {"kind": "Namespace", "metadata": {"name": "nvidia-device-plugin"}}
PODS = {"kind": "PodList", "items": [{"metadata": {"name": "plugin-x"}, "spec": {"nodeName": "gpu-1"}}]}
HELM_PLUGIN = {
    "metadata": {"namespace": "kube-system", "name": "nvdp-nvidia-device-plugin", "uid": "1", "resourceVersion": "9",
                 "labels": {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/managed-by": "Helm"},
                 "annotations": {"deprecated.daemonset.template.generation": "1"}},
    "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "nvidia-device-plugin"}},
             "template": {"metadata": {"labels": {"app.kubernetes.io/name": "nvidia-device-plugin"}},
                          "spec": {"nodeSelector": {"nvidia.com/gpu.present": "true"},
                                   "containers": [{"name": "nvidia-device-plugin-ctr", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1",
                                                   "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}]}],
                                   "volumes": [{"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}]}}},
    "status": {"numberReady": 3},
}
DAEMONSETS = {"kind": "DaemonSetList", "items": [HELM_PLUGIN]}


class FakeApi(JsonHandler):
    seen = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        FakeApi.seen.append((self.path, self.headers.get("Authorization")))
        if self.headers.get("Authorization") != "Bearer " + TOKEN:
            return self._answer(401, {"kind": "Status", "message": "Unauthorized"})
        if self.path == "/api/v1/nodes":
            return self._answer(200, NODES)
        if self.path == ("/api/v1/namespaces/nvidia-device-plugin/pods?labelSelector=app.kubernetes.io%2Fname%3Dnvidia-device-plugin"
                         "&fieldSelector=spec.nodeName%3Dgpu-1"):
            return self._answer(200, PODS)
        if self.path == "/api/v1/namespaces/nvidia-device-plugin":
            return self._answer(200, NAMESPACE)
        if self.path == "/apis/apps/v1/daemonsets":
            return self._answer(200, DAEMONSETS)
        if self.path == "/api/v1/nodes/gpu-1":
            return self._answer(200, NODES["items"][0])
        if self.path == "/api/v1/namespaces/nvidia-device-plugin/pods?labelSelector=app.kubernetes.io%2Fname%3Dnvidia-device-plugin":
            return self._answer(200, PODS)
        return self._answer(404, {"kind": "Status", "message": "not found"})


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    yield from serve_https(tmp_path_factory.mktemp("api"), FakeApi)


def kubeconfig(tmp_path, server, ca, token=TOKEN):
    return write_kubeconfig(tmp_path / "kubeconfig", server, ca, token)


def run(args):
    return run_module(gpu_cluster_read.main, dict({"pod_namespace": "nvidia-device-plugin",
                                                   "pod_label_selector": "app.kubernetes.io/name=nvidia-device-plugin"}, **args))


def test_it_reads_the_nodes_and_the_selected_pods_as_the_api_serves_them(tmp_path, api):
    server, ca = api
    FakeApi.seen.clear()
    result = run({"kubeconfig": kubeconfig(tmp_path, server, ca)})
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is False
    assert result["nodes"] == NODES["items"] and result["pods"] == PODS["items"]
    assert [seen[0] for seen in FakeApi.seen] == [
        "/api/v1/nodes", "/api/v1/namespaces/nvidia-device-plugin/pods?labelSelector=app.kubernetes.io%2Fname%3Dnvidia-device-plugin"]


def test_it_reads_the_named_nodes_one_by_one_and_leaves_out_those_the_api_does_not_know(tmp_path, api):
    server, ca = api
    FakeApi.seen.clear()
    result = run_module(gpu_cluster_read.main, {"kubeconfig": kubeconfig(tmp_path, server, ca), "node_names": ["gpu-1", "gpu/9"]})
    assert not result.get("failed"), result.get("msg")
    assert result["nodes"] == NODES["items"]
    assert "pods" not in result
    assert [seen[0] for seen in FakeApi.seen] == ["/api/v1/nodes/gpu-1", "/api/v1/nodes/gpu%2F9"]


def test_it_reads_one_nodes_object_and_its_pods_in_one_run(tmp_path, api):
    server, ca = api
    FakeApi.seen.clear()
    result = run({"kubeconfig": kubeconfig(tmp_path, server, ca), "node_names": ["gpu-1"],
                  "pod_field_selector": "spec.nodeName=gpu-1"})
    assert not result.get("failed"), result.get("msg")
    assert result["nodes"] == NODES["items"] and result["pods"] == PODS["items"]
    assert [seen[0] for seen in FakeApi.seen] == [
        "/api/v1/nodes/gpu-1",
        "/api/v1/namespaces/nvidia-device-plugin/pods?labelSelector=app.kubernetes.io%2Fname%3Dnvidia-device-plugin"
        "&fieldSelector=spec.nodeName%3Dgpu-1"]


def test_it_reads_the_named_namespaces_the_api_knows(tmp_path, api):
    server, ca = api
    FakeApi.seen.clear()
    result = run_module(gpu_cluster_read.main, {"kubeconfig": kubeconfig(tmp_path, server, ca), "node_names": [],
                                                "namespace_names": ["nvidia-device-plugin", "absent"]})
    assert not result.get("failed"), result.get("msg")
    assert result["namespaces"] == [NAMESPACE] and result["nodes"] == []
    assert [seen[0] for seen in FakeApi.seen] == ["/api/v1/namespaces/nvidia-device-plugin", "/api/v1/namespaces/absent"]


def test_it_lists_every_daemonset_reduced_to_what_tells_whose_it_is(tmp_path, api):
    server, ca = api
    FakeApi.seen.clear()
    result = run_module(gpu_cluster_read.main, {"kubeconfig": kubeconfig(tmp_path, server, ca), "node_names": [],
                                                "daemonsets": True})
    assert not result.get("failed"), result.get("msg")
    assert result["daemonsets"] == [{
        "metadata": {"namespace": "kube-system", "name": "nvdp-nvidia-device-plugin",
                     "labels": {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/managed-by": "Helm"}},
        "spec": {"template": {"metadata": {"labels": {"app.kubernetes.io/name": "nvidia-device-plugin"}},
                              "spec": {"nodeSelector": {"nvidia.com/gpu.present": "true"},
                                       "containers": [{"name": "nvidia-device-plugin-ctr",
                                                       "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"}]}}},
    }]
    assert [seen[0] for seen in FakeApi.seen] == ["/apis/apps/v1/daemonsets"]


def test_a_pod_namespace_without_a_selector_is_refused(tmp_path, api):
    server, ca = api
    result = run_module(gpu_cluster_read.main, {"kubeconfig": kubeconfig(tmp_path, server, ca), "pod_namespace": "x"})
    assert result["failed"] is True
    assert "pod_namespace" in result["msg"] and "pod_label_selector" in result["msg"]


def test_a_refused_read_fails_with_the_api_answer(tmp_path, api):
    server, ca = api
    result = run({"kubeconfig": kubeconfig(tmp_path, server, ca, token="wrong")})
    assert result["failed"] is True
    assert result["msg"].startswith("the API answered 401 to GET /api/v1/nodes: ")
    assert "Unauthorized" in result["msg"]


def test_an_untrusted_server_is_refused(tmp_path, api):
    server = api[0]
    other_ca = tmp_path / "other.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other",
                    "-keyout", str(tmp_path / "other.key"), "-out", str(other_ca)], check=True, capture_output=True)
    result = run({"kubeconfig": kubeconfig(tmp_path, server, other_ca), "request_timeout": 5})
    assert result["failed"] is True and result["msg"].startswith("the API could not be read: ")


def test_a_missing_kubeconfig_fails_clearly(tmp_path):
    result = run({"kubeconfig": str(tmp_path / "none")})
    assert result["failed"] is True
    assert result["msg"].startswith("the API could not be read: ")
