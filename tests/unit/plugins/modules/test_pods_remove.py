"""gpufleet.node.pods_remove against a local HTTPS stand-in of the API: evictions a PodDisruptionBudget refuses (HTTP
429, with the budget named in the causes as the API server words it), deletions, pods that linger or were replaced."""
from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.node.plugins.modules import pods_remove

from kube_api_stand_in import JsonHandler, serve_https, write_kubeconfig
from module_runner import run_module

TOKEN = "s3cret-token"
POD_PATH = "/api/v1/namespaces/default/pods/"


def _refusal(budget):
    """The API server's answer when a budget allows no disruption (kubernetes/pkg/registry/core/pod/storage/eviction.go)."""
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429, "reason": "TooManyRequests",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "details": {"causes": [{"reason": "DisruptionBudget",
                                    "message": "The disruption budget %s needs 1 healthy pods and has 1 currently" % budget}]}}


class FakeApi(JsonHandler):
    eviction_version = "v1beta1"
    pods: dict = {}        # name -> uid of the pods that exist
    guarded: dict = {}     # name -> [budget, refusals left (None: always)]
    lingering: set = set()  # pods that stay after their eviction (a long grace period)
    broken: set = set()     # pods whose eviction the API answers with 500
    seen: list = []

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length)) if length else None

    def do_GET(self):  # noqa: N802 (http.server's name)
        FakeApi.seen.append(("GET", self.path, None))
        if self.path == "/api/v1":
            return self._answer(200, {"kind": "APIResourceList", "resources": [
                {"name": "pods", "kind": "Pod"},
                {"name": "pods/eviction", "group": "policy", "version": FakeApi.eviction_version, "kind": "Eviction"}]})
        name = self.path[len(POD_PATH):]
        if self.path.startswith(POD_PATH) and name in FakeApi.pods:
            return self._answer(200, {"metadata": {"name": name, "namespace": "default", "uid": FakeApi.pods[name]}})
        return self._answer(404, {"kind": "Status", "message": "not found"})

    def do_POST(self):  # noqa: N802
        body = self._body()
        FakeApi.seen.append(("POST", self.path, body))
        name = self.path[len(POD_PATH):-len("/eviction")]
        if name not in FakeApi.pods:
            return self._answer(404, {"kind": "Status", "message": "pods \"%s\" not found" % name})
        if name in FakeApi.broken:
            return self._answer(500, {"kind": "Status", "message": "This pod has more than one PodDisruptionBudget"})
        uid = ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
        if uid and uid != FakeApi.pods[name]:
            return self._answer(409, {"kind": "Status", "message": "Precondition failed: UID in precondition: %s" % uid})
        guard = FakeApi.guarded.get(name)
        if guard and (guard[1] is None or guard[1] > 0):
            if guard[1] is not None:
                guard[1] -= 1
            return self._answer(429, _refusal(guard[0]))
        self._gone(name)
        return self._answer(201, {"kind": "Status", "status": "Success", "code": 201})

    def do_DELETE(self):  # noqa: N802
        FakeApi.seen.append(("DELETE", self.path, self._body()))
        name = self.path[len(POD_PATH):]
        if name not in FakeApi.pods:
            return self._answer(404, {"kind": "Status", "message": "not found"})
        self._gone(name)
        return self._answer(200, {"metadata": {"name": name}})

    def _gone(self, name):
        if name not in FakeApi.lingering:
            del FakeApi.pods[name]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from serve_https(tmp_path_factory.mktemp("api"), FakeApi)


@pytest.fixture
def api(server, tmp_path):
    """A kubeconfig for the stand-in, whose state starts empty in every test."""
    FakeApi.eviction_version, FakeApi.pods, FakeApi.guarded = "v1beta1", {}, {}
    FakeApi.lingering, FakeApi.broken, FakeApi.seen = set(), set(), []
    return write_kubeconfig(tmp_path / "kubeconfig", server[0], server[1], TOKEN)


def run(kubeconfig, names, **args):
    pods = [{"namespace": "default", "name": name, "uid": FakeApi.pods.get(name, "uid-" + name)} for name in names]
    return run_module(pods_remove.main, dict({"kubeconfig": kubeconfig, "pods": pods, "timeout": 3, "delay": 1}, **args))


def _requests(method):
    return [(path, body) for seen_method, path, body in FakeApi.seen if seen_method == method]


def test_it_evicts_with_the_version_the_server_serves_and_waits_until_the_pods_are_gone(api):
    FakeApi.pods = {"gpu-job": "u1", "trainer": "u2"}
    result = run(api, ["gpu-job", "trainer"])
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True and result["removed"] == ["default/gpu-job", "default/trainer"]
    assert result["eviction_version"] == "policy/v1beta1" and FakeApi.pods == {}
    path, body = _requests("POST")[0]
    assert path == POD_PATH + "gpu-job/eviction"
    assert body == {"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": "gpu-job", "namespace": "default"},
                    "deleteOptions": {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": "u1"}}}


def test_a_server_that_serves_evictions_in_policy_v1_gets_policy_v1(api):
    FakeApi.eviction_version, FakeApi.pods = "v1", {"gpu-job": "u1"}
    result = run(api, ["gpu-job"])
    assert result["eviction_version"] == "policy/v1"
    assert _requests("POST")[0][1]["apiVersion"] == "policy/v1"


def test_a_budget_that_allows_no_disruption_keeps_its_pod_and_fails_naming_the_budget(api):
    FakeApi.pods, FakeApi.guarded = {"gpu-guarded": "u1", "gpu-free": "u2"}, {"gpu-guarded": ["gpu-guard", None]}
    result = run(api, ["gpu-guarded", "gpu-free"])
    assert result["failed"] is True
    assert "PodDisruptionBudget default/gpu-guard refused its eviction" in result["msg"]
    assert "pod default/gpu-guarded" in result["msg"] and "within 3 s" in result["msg"]
    assert result["refused"] == [{"pod": "default/gpu-guarded", "budget": "default/gpu-guard",
                                  "message": "The disruption budget gpu-guard needs 1 healthy pods and has 1 currently"}]
    assert result["removed"] == ["default/gpu-free"] and result["left"] == []
    assert "gpu-guarded" in FakeApi.pods
    # tried again every second until the timeout
    assert len([path for path, _body in _requests("POST") if "gpu-guarded" in path]) >= 3


def test_an_eviction_refused_a_while_goes_through_once_the_budget_allows_it(api):
    FakeApi.pods, FakeApi.guarded = {"gpu-job": "u1"}, {"gpu-job": ["gpu-guard", 1]}
    result = run(api, ["gpu-job"])
    assert not result.get("failed"), result.get("msg")
    assert result["removed"] == ["default/gpu-job"] and result["refused"] == []


def test_delete_removes_the_pod_whatever_its_budget_says(api):
    FakeApi.pods, FakeApi.guarded = {"gpu-guarded": "u1"}, {"gpu-guarded": ["gpu-guard", None]}
    result = run(api, ["gpu-guarded"], method="delete")
    assert not result.get("failed"), result.get("msg")
    assert result["removed"] == ["default/gpu-guarded"] and result["eviction_version"] == ""
    assert _requests("POST") == []
    assert _requests("DELETE") == [(POD_PATH + "gpu-guarded",
                                    {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": "u1"}})]


def test_pods_already_gone_or_replaced_change_nothing(api):
    FakeApi.pods = {"stateful-0": "new-uid"}
    result = run_module(pods_remove.main, {"kubeconfig": api, "timeout": 3, "delay": 1, "pods": [
        {"namespace": "default", "name": "gone", "uid": "u9"},
        {"namespace": "default", "name": "stateful-0", "uid": "old-uid"}]})
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is False and result["removed"] == [] and result["left"] == []
    assert FakeApi.pods == {"stateful-0": "new-uid"}


def test_a_pod_still_there_at_the_timeout_fails(api):
    FakeApi.pods, FakeApi.lingering = {"slow": "u1"}, {"slow"}
    result = run(api, ["slow"], timeout=2)
    assert result["failed"] is True
    assert result["left"] == ["default/slow"] and "pod default/slow: still there" in result["msg"]


def test_an_api_error_fails_at_once_with_the_api_answer(api):
    FakeApi.pods, FakeApi.broken = {"gpu-job": "u1"}, {"gpu-job"}
    result = run(api, ["gpu-job"])
    assert result["failed"] is True
    assert result["msg"] == ("the API answered 500 to the eviction of pod default/gpu-job: "
                             "This pod has more than one PodDisruptionBudget")


def test_check_mode_makes_no_api_call(api):
    FakeApi.pods = {"gpu-job": "u1"}
    result = run(api, ["gpu-job"], _ansible_check_mode=True)
    assert result["changed"] is True and result["removed"] == []
    assert FakeApi.seen == [] and FakeApi.pods == {"gpu-job": "u1"}


@pytest.mark.parametrize("discovery, expected", [
    ({"resources": [{"name": "pods/eviction", "group": "policy", "version": "v1"}]}, "policy/v1"),
    ({"resources": [{"name": "pods/eviction", "group": "policy", "version": "v1beta1"}]}, "policy/v1beta1"),
    ({"resources": [{"name": "pods"}]}, "policy/v1beta1"),
])
def test_the_eviction_version_comes_from_the_discovery_document(discovery, expected):
    assert pods_remove.eviction_version(discovery) == expected


@pytest.mark.parametrize("status, body, expected", [
    (201, {}, "accepted"), (200, {}, "accepted"), (404, {}, "gone"),
    (409, {"message": "Precondition failed: UID in precondition: a, UID in object meta: b"}, "gone"),
    (409, {"message": "Operation cannot be fulfilled"}, "error"),
    (429, _refusal("x"), "refused"), (500, {}, "error"), (403, {}, "error"),
])
def test_what_an_answer_means(status, body, expected):
    assert pods_remove.outcome(status, body) == expected


def test_a_refusal_without_a_named_budget_keeps_the_api_message():
    body = {"code": 429, "message": "Too many requests, please try again later."}
    assert pods_remove.refusal({"namespace": "ns", "name": "p"}, body) == {
        "pod": "ns/p", "budget": "", "message": "Too many requests, please try again later."}
