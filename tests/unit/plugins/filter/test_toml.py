"""to_toml and from_toml: the roles' configuration files as TOML, and back."""
from __future__ import annotations

import tomllib

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.node.plugins.filter.from_toml import from_toml
from ansible_collections.gpufleet.node.plugins.filter.to_toml import FilterModule, to_toml

TOOLKIT = {
    "accept-nvidia-visible-devices-envvar-when-unprivileged": False,
    "nvidia-container-cli": {"ldconfig": "@/sbin/ldconfig", "environment": []},
    "nvidia-container-runtime": {
        "mode": "auto", "runtimes": ["runc", "crun"],
        "modes": {"cdi": {"spec-dirs": ["/etc/cdi", "/var/run/cdi"]}, "csv": {}}},
}

TOOLKIT_TEXT = """\
accept-nvidia-visible-devices-envvar-when-unprivileged = false

[nvidia-container-cli]
environment = []
ldconfig = "@/sbin/ldconfig"

[nvidia-container-runtime]
mode = "auto"
runtimes = ["runc", "crun"]

[nvidia-container-runtime.modes.cdi]
spec-dirs = ["/etc/cdi", "/var/run/cdi"]

[nvidia-container-runtime.modes.csv]
"""

CONTAINERD_V2 = {
    "version": 2,
    "plugins": {"io.containerd.grpc.v1.cri": {"containerd": {"default_runtime_name": "nvidia", "runtimes": {
        "nvidia": {"options": {"BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True}},
        "runc": {}}}}},
}


def test_a_runtime_configuration_renders_exactly() -> None:
    # Scalars before tables; a table holding only sub-tables (modes) gets no header; an empty one (csv) gets one.
    assert to_toml(TOOLKIT) == TOOLKIT_TEXT


@pytest.mark.parametrize("data", [
    CONTAINERD_V2,
    TOOLKIT,
    {"float": 1.5, "quote": 'a "b" \\ c', "unicode": "é", "key with space": {"x": 1}, "": {"y": 2}},
    {},
])
def test_what_it_writes_reads_back_as_the_same_data(data: dict) -> None:
    assert tomllib.loads(to_toml(data)) == data
    assert from_toml(to_toml(data)) == data


def test_keys_come_in_case_insensitive_order_so_the_same_data_gives_the_same_file() -> None:
    assert to_toml({"b": 1, "A": 2, "c": 3}) == "A = 2\nb = 1\nc = 3\n"
    assert to_toml({"b": 1, "A": 2}) == to_toml({"A": 2, "b": 1})


def test_keys_that_are_not_bare_are_quoted() -> None:
    assert to_toml({"io.containerd.grpc.v1.cri": {"a": 1}}) == '\n["io.containerd.grpc.v1.cri"]\na = 1\n'


@pytest.mark.parametrize(("data", "message"), [
    ({"a": None}, "a is a NoneType"),
    ({"t": {"when": object()}}, "t.when is a object"),
    ({"a": [{"b": 1}]}, "a is a list"),
    (["not", "a", "mapping"], "expects a mapping, got list"),
])
def test_what_has_no_toml_form_is_refused_by_name(data: object, message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=message):
        to_toml(data)


def test_the_filter_is_registered() -> None:
    assert FilterModule().filters() == {"to_toml": to_toml}
