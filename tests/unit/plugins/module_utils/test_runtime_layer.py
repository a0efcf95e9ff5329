"""The runtime layer's checks of container_toolkit and containerd_nvidia (module_utils/_runtime_layer.py), from what
check.yml reads on a node: the toolkit's packages and config.toml, containerd's nvidia handler and version."""
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.node.plugins.filter.runtime_layer import container_toolkit_checks, containerd_nvidia_checks

PATH = "/etc/nvidia-container-runtime/config.toml"
VERSION = "1.17.8-1"
PACKAGES = ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1"]
TOOLKIT = {"version": VERSION, "packages": PACKAGES, "config_path": PATH, "accept_envvar_when_unprivileged": False,
           "accept_devices_as_volume_mounts": True, "runtime_mode": "legacy"}
SECURE = """accept-nvidia-visible-devices-as-volume-mounts = true
accept-nvidia-visible-devices-envvar-when-unprivileged = false

[nvidia-container-runtime]
mode = "legacy"
"""
REMEDY = f"run gpufleet.node.container_toolkit (container_toolkit_version={VERSION})"


def _read(content: str | None = SECURE, **packages: dict) -> dict:
    found = {name: {"status": "installed", "version": VERSION, "want": "hold"} for name in PACKAGES}
    found.update({name.replace("_", "-"): entry for name, entry in packages.items()})
    config = {"exists": content is not None, **({"content": content} if content is not None else {})}
    return {"packages": found, "files": {"container_toolkit_config": config}}


def test_a_toolkit_as_the_role_set_it() -> None:
    assert container_toolkit_checks(_read(), TOOLKIT) == [
        {"id": "toolkit_packages", "layer": "runtime", "part": "container_toolkit", "status": "pass",
         "message": f"the toolkit packages are {VERSION}, held", "remedy": ""},
        {"id": "toolkit_config", "layer": "runtime", "part": "container_toolkit", "status": "pass",
         "message": f"{PATH}: mode legacy, envvar when unprivileged false, devices as volume mounts true", "remedy": ""}]


@pytest.mark.parametrize("packages, message", [
    ({"nvidia_container_toolkit": {"status": "not-installed"}}, "nvidia-container-toolkit is not installed"),
    ({"libnvidia_container1": {"status": "half-configured", "version": VERSION, "want": "hold"}}, "libnvidia-container1 is not installed"),
    ({"nvidia_container_toolkit_base": {"status": "installed", "version": "1.17.7-1", "want": "hold"}},
     "nvidia-container-toolkit-base is 1.17.7-1"),
    ({"nvidia_container_toolkit": {"status": "installed", "version": VERSION, "want": "install"},
      "libnvidia_container_tools": {"status": "installed", "version": VERSION, "want": "install"}},
     f"nvidia-container-toolkit {VERSION} is not held; libnvidia-container-tools {VERSION} is not held"),
])
def test_toolkit_packages_not_as_pinned(packages: dict, message: str) -> None:
    check = container_toolkit_checks(_read(**packages), TOOLKIT)[0]
    assert (check["status"], check["message"], check["remedy"]) == ("fail", f"{message}, expected {VERSION} held", REMEDY)


def test_a_missing_toolkit_config() -> None:
    check = container_toolkit_checks(_read(content=None), TOOLKIT)[1]
    assert (check["status"], check["message"], check["remedy"]) == (
        "fail", f"{PATH} is missing: the nvidia runtime cannot start containers", REMEDY)


@pytest.mark.parametrize("content, differ", [
    ("", 'accept-nvidia-visible-devices-envvar-when-unprivileged = true (intended false), '
         'accept-nvidia-visible-devices-as-volume-mounts = false (intended true), '
         'nvidia-container-runtime.mode = "auto" (intended "legacy")'),
    (SECURE.replace('"legacy"', '"cdi"'), 'nvidia-container-runtime.mode = "cdi" (intended "legacy")'),
    # a key of another table is not the top-level key
    ('[nvidia-container-cli]\naccept-nvidia-visible-devices-envvar-when-unprivileged = false\n'
     'accept-nvidia-visible-devices-as-volume-mounts = true\n[nvidia-container-runtime]\nmode = "legacy"\n',
     'accept-nvidia-visible-devices-envvar-when-unprivileged = true (intended false), '
     'accept-nvidia-visible-devices-as-volume-mounts = false (intended true)'),
])
def test_a_toolkit_config_other_than_the_roles(content: str, differ: str) -> None:
    check = container_toolkit_checks(_read(content=content), TOOLKIT)[1]
    assert (check["status"], check["message"], check["remedy"]) == ("fail", f"{PATH} differs from the role settings: {differ}", REMEDY)


CONTAINERD = {"mode": "runtimeclass", "version": "1.7.24~ds1-6+b2", "upstream": "1.7.24", "config_path": "/etc/containerd/config.toml",
              "runtime_name": "nvidia", "runtime_binary": "/usr/bin/nvidia-container-runtime", "default_runtime": "runc"}
CTR_VERSION = "Client:\n  Version:  1.7.24~ds1\n  Revision: \n  Go version: go1.23\n\nServer:\n  Version:  1.7.24~ds1\n  Revision: \n  UUID: x\n"
CD_REMEDY = "run gpufleet.node.containerd_nvidia (containerd_nvidia_mode=runtimeclass)"


def _containerd(rc: int = 0, stdout: str = "", stderr: str = "", version: dict | None = None, **read) -> dict:
    return {"containerd_check": {"rc": rc, "stdout": stdout, "stderr": stderr},
            "commands": {"containerd_version": {"rc": 0, "stdout": CTR_VERSION, "stderr": ""} if version is None else version},
            **read}


def test_containerd_as_the_role_set_it() -> None:
    checks = containerd_nvidia_checks(_containerd(kubelet={"cgroup_driver": "systemd"}), CONTAINERD)
    assert checks == [
        {"id": "containerd_nvidia_handler", "layer": "runtime", "part": "containerd_nvidia", "status": "pass",
         "message": "containerd loads /etc/containerd/config.toml with the nvidia handler (/usr/bin/nvidia-container-runtime), "
                    "default runtime runc, SystemdCgroup matching the kubelet's cgroup driver systemd", "remedy": ""},
        {"id": "containerd_version", "layer": "runtime", "part": "containerd_nvidia", "status": "pass",
         "message": "containerd 1.7.24~ds1 answers", "remedy": ""}]


def test_the_handler_without_a_kubelet() -> None:
    assert containerd_nvidia_checks(_containerd(), CONTAINERD)[0]["message"].endswith("default runtime runc")


@pytest.mark.parametrize("run, message, remedy", [
    ({"rc": 1, "stderr": "no runtime nvidia in /etc/containerd/config.toml\n"}, "no runtime nvidia in /etc/containerd/config.toml", CD_REMEDY),
    ({"rc": 1, "stdout": " said on stdout "}, "said on stdout", CD_REMEDY),
    ({"rc": 2, "stderr": "toml: line 3: expected '='"},
     "containerd cannot load /etc/containerd/config.toml with its nvidia runtime check: toml: line 3: expected '='",
     CD_REMEDY + "; `containerd config dump` shows what containerd makes of the file"),
])
def test_a_handler_containerd_does_not_load(run: dict, message: str, remedy: str) -> None:
    check = containerd_nvidia_checks({**_containerd(), "containerd_check": run}, CONTAINERD)[0]
    assert (check["status"], check["message"], check["remedy"]) == ("fail", message, remedy)


def test_no_check_ran() -> None:
    check = containerd_nvidia_checks({"msg": "the read failed"}, CONTAINERD)[0]
    assert (check["status"], check["message"]) == ("fail", "containerd cannot load /etc/containerd/config.toml with its nvidia "
                                                           "runtime check: ")


@pytest.mark.parametrize("version, read, message, remedy", [
    ({"stdout": CTR_VERSION.replace("1.7.24~ds1", "v2.1.4")}, {}, "containerd 2.1.4 answers, expected 1.7.24 (containerd_nvidia_version "
     "1.7.24~ds1-6+b2)", CD_REMEDY),
    ({"stdout": "Client:\n  Version: 1.7.24\n", "stderr": " cannot connect to containerd.sock "}, {},
     "containerd does not answer: cannot connect to containerd.sock, expected 1.7.24 (containerd_nvidia_version 1.7.24~ds1-6+b2)",
     "start containerd; `systemctl status containerd` and its journal say why it is not running"),
    ({}, {"msg": "ctr not found"}, "containerd does not answer: ctr not found, expected 1.7.24 (containerd_nvidia_version "
     "1.7.24~ds1-6+b2)", "start containerd; `systemctl status containerd` and its journal say why it is not running"),
])
def test_containerd_not_at_the_pinned_version(version: dict, read: dict, message: str, remedy: str) -> None:
    check = containerd_nvidia_checks({**_containerd(version=version), **read}, CONTAINERD)[1]
    assert (check["status"], check["message"], check["remedy"]) == ("fail", message, remedy)
