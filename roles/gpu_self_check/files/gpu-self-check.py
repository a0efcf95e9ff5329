"""gpufleet GPU self-check: the host checks of gpufleet.node.nvidia_gpu_check, marked on the node's own Node object.

Installed by the gpufleet.node.gpu_self_check role with its settings in /etc/gpufleet/gpu-self-check.json and the
collection's check code (module_utils) beside it. Runs at boot (after the driver, before the kubelet) and from a
timer. On a failed check it labels the Node gpufleet.io/gpu-health=unhealthy, lists the failed check ids in the
annotation gpufleet.io/gpu-health-failed-checks and cordons it (the node lifecycle controller then adds the
node.kubernetes.io/unschedulable:NoSchedule taint); when every check passes again it removes the label and the
annotation, and uncordons the node only if the self-check cordoned it. It talks to the API with the kubelet's own
credentials: NodeRestriction lets a kubelet change its own Node's labels (outside kubernetes.io and k8s.io),
annotations and spec.unschedulable, but never its taints after registration.

Exit codes: 0 healthy, 1 a check failed, 2 the API could not be reached or refused the change.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import ssl
import sys
import tempfile
import time
import urllib.error
import urllib.request

CONFIG = "/etc/gpufleet/gpu-self-check.json"
PREFIX = "gpufleet.io/"
HEALTH_LABEL = PREFIX + "gpu-health"
FAILED_ANNOTATION = PREFIX + "gpu-health-failed-checks"
CORDONED_ANNOTATION = PREFIX + "gpu-health-cordoned"


class Host:
    """What the check code's CommandRunner needs of an AnsibleModule: finding commands (it runs them itself)."""

    @staticmethod
    def get_bin_path(name, required=False):
        return shutil.which(name)


def run_checks(config):
    """The module's checks of this host, as nvidia_gpu_check returns them."""
    sys.path.insert(0, config["library"])
    from ansible_collections.gpufleet.node.plugins.module_utils._nvidia_health import (  # pylint: disable=import-outside-toplevel
        DEFAULT_CRITICAL_XIDS, DEFAULT_REQUIRED_MODULES, Gatherer, evaluate)
    from ansible_collections.gpufleet.node.plugins.module_utils._run import CommandRunner  # pylint: disable=import-outside-toplevel

    facts = Gatherer(CommandRunner(Host()), host_root=config.get("host_root") or "/",
                     nvidia_smi_path=config.get("nvidia_smi_path") or None).gather()
    params = {
        "expected_driver_version": config.get("expected_driver_version") or None,
        "expected_gpu_count": config.get("expected_gpu_count") or None,
        "expected_mig_mode": None,
        "required_modules": config.get("required_modules") or list(DEFAULT_REQUIRED_MODULES),
        "critical_xids": config.get("critical_xids") or list(DEFAULT_CRITICAL_XIDS),
    }
    return evaluate(facts, params)


def node_patch(node, failed, cordon):
    """The JSON merge patch that brings the Node to the self-check's verdict; None when it already shows it."""
    metadata = node.get("metadata", {})
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
    want_labels, want_annotations, want_spec = {}, {}, {}
    if failed:
        want_labels[HEALTH_LABEL] = "unhealthy"
        want_annotations[FAILED_ANNOTATION] = ",".join(failed)
        if cordon and not unschedulable:
            want_spec["unschedulable"] = True
            want_annotations[CORDONED_ANNOTATION] = "true"
    else:
        want_labels[HEALTH_LABEL] = None
        want_annotations[FAILED_ANNOTATION] = None
        if annotations.get(CORDONED_ANNOTATION) == "true":
            want_annotations[CORDONED_ANNOTATION] = None
            if unschedulable:
                want_spec["unschedulable"] = None
    labels_patch = {key: value for key, value in want_labels.items() if labels.get(key) != value}
    annotations_patch = {key: value for key, value in want_annotations.items() if annotations.get(key) != value}
    patch = {}
    if labels_patch or annotations_patch:
        patch["metadata"] = {name: part for name, part in (("labels", labels_patch), ("annotations", annotations_patch)) if part}
    if want_spec:
        patch["spec"] = want_spec
    return patch or None


class Api:
    """The API server, reached with a kubeconfig's first cluster and user (client certificate, or token)."""

    def __init__(self, kubeconfig_path):
        with open(kubeconfig_path, encoding="utf-8") as handle:
            text = handle.read()
        kubeconfig = _load_kubeconfig(text)
        context_name = kubeconfig.get("current-context")
        contexts = {entry["name"]: entry["context"] for entry in kubeconfig.get("contexts") or []}
        context = contexts.get(context_name) or next(iter(contexts.values()), {})
        cluster = _named(kubeconfig.get("clusters"), context.get("cluster"), "cluster")
        user = _named(kubeconfig.get("users"), context.get("user"), "user")
        self.server = cluster["server"].rstrip("/")
        self._tmp = tempfile.mkdtemp(prefix="gpu-self-check-")
        self.context = ssl.create_default_context(cafile=self._file(cluster, "certificate-authority"))
        certificate, key = self._file(user, "client-certificate"), self._file(user, "client-key")
        if certificate:
            self.context.load_cert_chain(certificate, key or certificate)
        self.token = user.get("token")

    def _file(self, section, name):
        """The path of a kubeconfig file field, or of its *-data twin written to a private temporary file."""
        if section.get(name + "-data"):
            path = os.path.join(self._tmp, name)
            with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as handle:
                handle.write(base64.b64decode(section[name + "-data"]))
            return path
        return section.get(name)

    def close(self):
        shutil.rmtree(self._tmp, ignore_errors=True)

    def request(self, method, path, body=None, content_type="application/json"):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.server + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        if self.token:
            request.add_header("Authorization", "Bearer " + self.token)
        with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
            return json.loads(response.read() or b"{}")


def _load_kubeconfig(text):
    try:
        return json.loads(text)
    except ValueError:
        # python3-yaml, which the role installs: kubeconfigs are YAML unless written as JSON
        import yaml  # pylint: disable=import-outside-toplevel
        return yaml.safe_load(text)


def _named(entries, name, kind):
    for entry in entries or []:
        if entry.get("name") == name or name is None:
            return entry[kind]
    raise SystemExit("gpu-self-check: the kubeconfig has no %s %r" % (kind, name))


def write_state(path, state):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=2, sort_keys=True)
    os.replace(partial, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=CONFIG)
    args = parser.parse_args(argv)
    with open(args.config, encoding="utf-8") as handle:
        config = json.load(handle)
    checks = run_checks(config)
    failed = [check["id"] for check in checks if check["status"] == "fail"]
    state = {"time": int(time.time()), "node": config["node_name"], "failed_checks": failed, "checks": checks}
    for check in checks:
        if check["status"] == "fail":
            print("FAIL %s: %s. Remedy: %s" % (check["id"], check["message"], check["remedy"]))
    api = Api(config["kubeconfig"])
    path = "/api/v1/nodes/" + config["node_name"]
    try:
        node = api.request("GET", path)
        patch = node_patch(node, failed, config.get("cordon", True))
        if patch:
            api.request("PATCH", path, patch, content_type="application/merge-patch+json")
        state["node_patch"] = patch
        verdict = "unhealthy (%s)" % ", ".join(failed) if failed else "healthy"
        outcome = "updated: %s" % json.dumps(patch, sort_keys=True) if patch else "unchanged"
        print("%s: %s; Node %s" % (config["node_name"], verdict, outcome))
    except urllib.error.HTTPError as error:
        if error.code == 404:
            state["node_patch"] = None
            print("%s: %s; the Node is not registered yet" % (config["node_name"], "unhealthy" if failed else "healthy"))
        else:
            state["api_error"] = "%s %s" % (error.code, error.read().decode("utf-8", "replace")[:1000])
            print("gpu-self-check: the API refused: %s" % state["api_error"], file=sys.stderr)
            write_state(config["state_file"], state)
            return 2
    except (urllib.error.URLError, OSError) as error:
        state["api_error"] = str(error)
        print("gpu-self-check: the API is not reachable: %s" % error, file=sys.stderr)
        write_state(config["state_file"], state)
        return 2
    finally:
        api.close()
    write_state(config["state_file"], state)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
