"""The playbooks' Kubernetes identity (playbooks/templates/access_objects.yml.j2) against every API call of the code.

Every task of the roles and playbooks that talks to the API is found here; the calls its module makes (resource, API
group, verb, scope) are worked out from its parameters, and each must be allowed by the ClusterRole or the Role, and
each verb of a rule must be used by some call. A new API task without its rule fails here, and so does a rule no
task needs. docs/access.md's table must list the same rules.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import jinja2
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "playbooks" / "templates" / "access_objects.yml.j2"
DOC = ROOT / "docs" / "access.md"
# run by an admin: to create the identity, and to apply the teams' GPU quotas (the cluster's policy)
ADMIN_PLAYBOOKS = {"playbooks/access.yml", "playbooks/quotas.yml"}
PLUGIN_NS = "plugin-ns"
RUNTIME_CLASS = "runtime-class"
CONFIG_MANAGER = "nvidia-device-plugin-config-manager"
CONFIG_MANAGER_ROLE = f"gpufleet:{PLUGIN_NS}:{CONFIG_MANAGER}"
API_MODULES = ("kubernetes.core.", "gpufleet.node.gpu_cluster_read", "gpufleet.node.pods_remove")

# kind: (API group, resource, namespaced)
KINDS = {
    "Node": ("", "nodes", False),
    "Namespace": ("", "namespaces", False),
    "RuntimeClass": ("node.k8s.io", "runtimeclasses", False),
    "Pod": ("", "pods", True),
    "ConfigMap": ("", "configmaps", True),
    "DaemonSet": ("apps", "daemonsets", True),
    "PodDisruptionBudget": ("policy", "poddisruptionbudgets", True),
    "ServiceAccount": ("", "serviceaccounts", True),
    "ClusterRole": ("rbac.authorization.k8s.io", "clusterroles", False),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io", "clusterrolebindings", False),
}


class Call(NamedTuple):
    group: str
    resource: str
    verb: str
    scope: str  # cluster (a cluster-scoped resource), all (every namespace), plugin (the device plugin's namespace)
    name: str | None = None  # the one object it names, where a rule may name it


def _calls(kind: str, verbs: tuple[str, ...], scope: str | None = None, name: str | None = None) -> list[Call]:
    group, resource, namespaced = KINDS[kind]
    where = scope if namespaced else "cluster"
    assert where, f"{kind} is namespaced: say in which namespace"
    return [Call(group, resource, verb, where, name) for verb in verbs]


# k8s tasks whose objects come from a template (the role's cluster objects, the smoke pod): what they apply.
# The namespace is created by playbooks/access.yml (docs/access.md says why): the role only reads and labels it.
APPLIED = (
    _calls("Namespace", ("get", "patch"), name=PLUGIN_NS)
    + _calls("RuntimeClass", ("get", "patch"), name=RUNTIME_CLASS) + _calls("RuntimeClass", ("create",))
    + _calls("ConfigMap", ("get", "create", "patch"), "plugin")
    + _calls("DaemonSet", ("get", "create", "patch"), "plugin")
    # config-manager's identity (named configurations), created by playbooks/access.yml: the role reads and applies it;
    # RBAC lets an identity write a role, or bind one, only when it holds the role's rules itself
    + _calls("ServiceAccount", ("get", "patch"), "plugin", name=CONFIG_MANAGER)
    + _calls("ClusterRole", ("get", "patch"), name=CONFIG_MANAGER_ROLE)
    + _calls("ClusterRoleBinding", ("get", "patch"), name=CONFIG_MANAGER_ROLE)
    + _calls("Node", ("get", "list", "watch"))
)
TEMPLATED = {
    ("roles/gpu_node_join/tasks/cluster.yml", "Apply the device plugin's namespace, RuntimeClass, configuration and DaemonSets"): APPLIED,
    ("roles/gpu_node_join/tasks/cluster_dry_run.yml", "Find out which objects this run would create or change"): APPLIED,
    ("roles/gpu_node_join/tasks/smoke.yml", "Start a smoke-test pod with one GPU in its limits"): _calls("Pod", ("create",), "plugin"),
}


def _scope(args: dict[str, Any], key: str = "namespace") -> str:
    namespace = args.get(key)
    if namespace is None:
        return "all"
    if re.search(r"\{\{ *(gpu_node_join_device_plugin_namespace|__upgrade\.plugin_namespace) *\}\}", str(namespace)):
        return "plugin"
    raise AssertionError(f"namespace {namespace!r}: not the device plugin's; add its scope to this test and a rule")


def _k8s(args: dict[str, Any]) -> list[Call]:
    kind, state, scope = args.get("kind"), args.get("state", "present"), _scope(args)
    assert kind in KINDS, f"k8s with kind {kind!r}: add its objects to TEMPLATED"
    if state == "patched":
        return _calls(kind, ("get", "patch"), scope)
    if state == "absent":
        return _calls(kind, ("get", "delete") if args.get("name") else ("list", "delete"), scope)
    return _calls(kind, ("get", "create", "patch") if args.get("apply") else ("get", "create"), scope)


def _k8s_info(args: dict[str, Any]) -> list[Call]:
    return _calls(args["kind"], ("get",) if args.get("name") else ("list",), _scope(args))


def _k8s_drain(args: dict[str, Any]) -> list[Call]:
    calls = _calls("Node", ("get", "patch"))
    if args.get("state", "drain") == "drain":
        # lists the node's pods everywhere, evicts them (deletes them with disable_eviction), waits until they are gone
        removal = Call("", "pods", "delete", "all") if args.get("delete_options", {}).get("disable_eviction") \
            else Call("", "pods/eviction", "create", "all")
        calls += [Call("", "pods", "list", "all"), removal, Call("", "pods", "get", "all")]
    return calls


def _k8s_log(args: dict[str, Any]) -> list[Call]:
    scope = _scope(args)
    listing = [] if args.get("name") else [Call("", "pods", "list", scope)]
    return listing + [Call("", "pods/log", "get", scope)]


def _gpu_cluster_read(args: dict[str, Any]) -> list[Call]:
    names = args.get("node_names")
    calls = _calls("Node", ("list",)) if names is None else ([] if names == [] else _calls("Node", ("get",)))
    if args.get("node_label_selector"):
        calls += _calls("Node", ("list",))
    if args.get("namespace_names"):
        assert args["namespace_names"] == ["{{ gpu_node_join_device_plugin_namespace }}"], "another namespace read"
        calls += _calls("Namespace", ("get",), name=PLUGIN_NS)
    if args.get("pod_label_selector"):
        calls += _calls("Pod", ("list",), _scope(args, "pod_namespace"))
    if args.get("daemonsets"):
        calls += _calls("DaemonSet", ("list",), "all")
    return calls


def _pods_remove(_args: dict[str, Any]) -> list[Call]:
    # evicts (method evict) or deletes (method delete) pods of any namespace, then reads each until it is gone
    return [Call("", "pods/eviction", "create", "all"), Call("", "pods", "delete", "all"), Call("", "pods", "get", "all")]


MODULES = {
    "kubernetes.core.k8s": _k8s,
    "kubernetes.core.k8s_info": _k8s_info,
    "kubernetes.core.k8s_taint": lambda _args: _calls("Node", ("get", "patch")),
    "kubernetes.core.k8s_drain": _k8s_drain,
    "kubernetes.core.k8s_log": _k8s_log,
    "gpufleet.node.gpu_cluster_read": _gpu_cluster_read,
    "gpufleet.node.pods_remove": _pods_remove,
}


def _tasks(items: Any) -> Iterator[dict[str, Any]]:
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            yield item
            for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
                yield from _tasks(item.get(key))


@functools.lru_cache(maxsize=None)
def api_tasks() -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
    """(file, task name) -> (module, its arguments) of every task that talks to the API."""
    files = [*ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("roles/*/handlers/*.yml"),
             *ROOT.glob("playbooks/*.yml"), *ROOT.glob("playbooks/tasks/*.yml")]
    found = {}
    for path in sorted(files):
        relative = path.relative_to(ROOT).as_posix()
        if relative in ADMIN_PLAYBOOKS:
            continue
        for task in _tasks(yaml.safe_load(path.read_text())):
            for module in (key for key in task if key.startswith(API_MODULES)):
                found[(relative, task.get("name", ""))] = (module, task[module] or {})
    return found


@functools.lru_cache(maxsize=None)
def all_calls() -> dict[tuple[str, str], list[Call]]:
    calls = {}
    for key, (module, args) in api_tasks().items():
        assert module in MODULES, f"{key}: module {module} talks to the API; add the calls it makes to this test"
        calls[key] = TEMPLATED[key] if key in TEMPLATED else MODULES[module](args)
    return calls


@functools.lru_cache(maxsize=None)
def rendered_objects() -> list[dict[str, Any]]:
    template = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(TEMPLATE.read_text())
    access = {"name": "gpufleet-node", "namespace": PLUGIN_NS, "runtime_class_name": RUNTIME_CLASS,
              "config_manager_account": CONFIG_MANAGER, "config_manager_role": CONFIG_MANAGER_ROLE}
    return yaml.safe_load(template.render(__access=access))


def rules(kind: str) -> list[dict[str, Any]]:
    return next(obj for obj in rendered_objects() if obj["kind"] == kind)["rules"]


def allows(rule: dict[str, Any], call: Call) -> bool:
    return (call.group in rule["apiGroups"] and call.resource in rule["resources"] and call.verb in rule["verbs"]
            and ("resourceNames" not in rule or call.name in rule["resourceNames"]))


def allowed_by_cluster_role(call: Call) -> bool:
    return any(allows(rule, call) for rule in rules("ClusterRole"))


def allowed(call: Call) -> bool:
    return allowed_by_cluster_role(call) or (call.scope == "plugin" and any(allows(rule, call) for rule in rules("Role")))


def test_the_scan_finds_the_api_tasks() -> None:
    found = api_tasks()
    assert len(found) >= 30
    assert ("playbooks/tasks/upgrade_node.yml", "Cordon the node") in found
    assert set(TEMPLATED) <= set(found), "a TEMPLATED task was renamed or removed"


@pytest.mark.parametrize("key", sorted(all_calls()), ids=lambda key: f"{key[0]}:{key[1][:40]}")
def test_every_call_is_allowed(key: tuple[str, str]) -> None:
    missing = [call for call in all_calls()[key] if not allowed(call)]
    assert not missing, f"{key[0]} task {key[1]!r} needs a rule in {TEMPLATE.name} for {missing}"


def test_every_verb_of_a_rule_is_used() -> None:
    calls = [call for task_calls in all_calls().values() for call in task_calls]
    unused = []
    for kind in ("ClusterRole", "Role"):
        for rule in rules(kind):
            for verb in rule["verbs"]:
                used = [call for call in calls if call.verb == verb and allows(rule, call)
                        and (kind == "ClusterRole" or call.scope == "plugin")]
                if not used:
                    unused.append((kind, rule["resources"], verb))
    assert not unused, f"rules no task needs: {unused}"


def test_role_rules_do_not_repeat_the_cluster_role() -> None:
    for rule in rules("Role"):
        for verb in rule["verbs"]:
            for resource in rule["resources"]:
                call = Call(rule["apiGroups"][0], resource, verb, "plugin")
                assert not allowed_by_cluster_role(call), f"Role rule {resource} {verb} is granted cluster-wide already"


def test_removing_a_verb_fails_the_check() -> None:
    """The check has teeth: without nodes/patch, the taint and cordon tasks are reported."""
    patch_nodes = Call("", "nodes", "patch", "cluster")
    assert allowed(patch_nodes)
    rule = next(rule for rule in rules("ClusterRole") if rule["resources"] == ["nodes"])
    assert not allows(dict(rule, verbs=[verb for verb in rule["verbs"] if verb != "patch"]), patch_nodes)


def test_identity_objects_are_bound_to_the_service_account() -> None:
    objects = {obj["kind"]: obj for obj in rendered_objects()}
    assert set(objects) == {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    account = {"kind": "ServiceAccount", "name": "gpufleet-node", "namespace": PLUGIN_NS}
    for binding, role in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        assert objects[binding]["subjects"] == [account]
        assert objects[binding]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role, "name": "gpufleet-node"}
    assert objects["Role"]["metadata"]["namespace"] == PLUGIN_NS


def _doc_rules() -> set[tuple[str, str, str, frozenset[str], str]]:
    rows = set()
    for line in DOC.read_text().splitlines():
        cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0] in ("ClusterRole", "Role"):
            group = "" if cells[1] == "core" else cells[1]
            verbs = frozenset(verb.strip().strip("`") for verb in cells[3].split(","))
            rows.add((cells[0], group, cells[2], verbs, cells[4]))
    return rows


def test_docs_list_the_same_rules() -> None:
    names = {PLUGIN_NS: "the plugin namespace", RUNTIME_CLASS: "the RuntimeClass",
             CONFIG_MANAGER: "config-manager's", CONFIG_MANAGER_ROLE: "config-manager's"}
    expected = {
        (kind, rule["apiGroups"][0], resource, frozenset(rule["verbs"]),
         ", ".join(names[name] for name in rule.get("resourceNames", [])) or "any")
        for kind in ("ClusterRole", "Role") for rule in rules(kind) for resource in rule["resources"]
    }
    assert _doc_rules() == expected
