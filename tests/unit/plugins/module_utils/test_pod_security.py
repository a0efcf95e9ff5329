"""The baseline level of the Pod Security Standards, checked on a pod spec (module_utils/_pod_security.py)."""
from __future__ import annotations

import copy

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils._pod_security import baseline_problems

# The least a pod says: the default configuration, which baseline allows.
MINIMAL = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


def _with(change):
    pod = copy.deepcopy(MINIMAL)
    change(pod)
    return pod


def _container_context(**context):
    return lambda pod: pod["spec"]["containers"][0].update(securityContext=context)


def _pod_context(**context):
    return lambda pod: pod["spec"].update(securityContext=context)


def test_the_default_pod_and_a_hardened_one_need_no_more_than_baseline():
    hardened = _with(lambda pod: (
        pod["spec"].update(securityContext={"seccompProfile": {"type": "RuntimeDefault"},
                                            "sysctls": [{"name": "net.ipv4.ping_group_range", "value": "0 1"}],
                                            "seLinuxOptions": {"type": "container_t", "level": "s0:c1"}}),
        pod["spec"]["containers"][0].update(securityContext={
            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "privileged": False,
            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
            "appArmorProfile": {"type": "RuntimeDefault"}, "procMount": "Default"}),
        pod["spec"]["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 0}]),
        pod["spec"].update(volumes=[{"name": "scratch", "emptyDir": {}}], hostNetwork=False),
        pod["metadata"].update(annotations={"container.apparmor.security.beta.kubernetes.io/c": "runtime/default"}),
    ))
    assert baseline_problems(MINIMAL) == []
    assert baseline_problems(hardened) == []


@pytest.mark.parametrize("change, problem", [
    (lambda pod: pod["spec"].update(hostNetwork=True), "spec.hostNetwork is true"),
    (lambda pod: pod["spec"].update(hostPID=True), "spec.hostPID is true"),
    (lambda pod: pod["spec"].update(hostIPC=True), "spec.hostIPC is true"),
    (lambda pod: pod["spec"].update(volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
     "spec.volumes[0] (root) is a hostPath volume"),
    (_container_context(privileged=True), "spec.containers[0].securityContext.privileged is true"),
    (_container_context(capabilities={"add": ["SYS_ADMIN", "CHOWN", "NET_ADMIN"]}),
     "spec.containers[0].securityContext.capabilities.add has NET_ADMIN, SYS_ADMIN"),
    (_container_context(procMount="Unmasked"), "spec.containers[0].securityContext.procMount is Unmasked"),
    (_container_context(seccompProfile={"type": "Unconfined"}),
     "spec.containers[0].securityContext.seccompProfile.type is Unconfined"),
    (_pod_context(seccompProfile={"type": "Unconfined"}), "spec.securityContext.seccompProfile.type is Unconfined"),
    (_container_context(appArmorProfile={"type": "Unconfined"}),
     "spec.containers[0].securityContext.appArmorProfile.type is Unconfined"),
    (lambda pod: pod["metadata"].update(annotations={"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}),
     "metadata.annotations[container.apparmor.security.beta.kubernetes.io/c] is unconfined"),
    (_pod_context(seLinuxOptions={"type": "spc_t"}), "spec.securityContext.seLinuxOptions.type is spc_t"),
    (_container_context(seLinuxOptions={"user": "system_u"}),
     "spec.containers[0].securityContext.seLinuxOptions.user is set"),
    (_pod_context(windowsOptions={"hostProcess": True}), "spec.securityContext.windowsOptions.hostProcess is true"),
    (_pod_context(sysctls=[{"name": "kernel.msgmax", "value": "1"}]), "spec.securityContext.sysctls has kernel.msgmax"),
    (lambda pod: pod["spec"]["containers"][0].update(ports=[{"containerPort": 53, "hostPort": 53}]),
     "spec.containers[0].ports[0].hostPort is 53"),
    (lambda pod: pod["spec"].update(initContainers=[{"name": "init", "securityContext": {"privileged": True}}]),
     "spec.initContainers[0].securityContext.privileged is true"),
    (lambda pod: pod["spec"].update(ephemeralContainers=[{"name": "debug", "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}}]),
     "spec.ephemeralContainers[0].securityContext.capabilities.add has SYS_PTRACE"),
])
def test_each_baseline_control_names_the_field_that_breaks_it(change, problem):
    assert baseline_problems(_with(change)) == [problem]


def test_a_pod_template_is_checked_as_a_pod():
    template = {"metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}],
                         "volumes": [{"name": "device-plugins", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}]}}
    assert baseline_problems(template) == [
        "spec.volumes[0] (device-plugins) is a hostPath volume",
        "spec.containers[0].securityContext.capabilities.add has SYS_ADMIN"]
