"""The toolkit's host state after install (1.17.7-1) and upgrade (1.17.8-1), read on the node (testinfra).

side_effect saved the 1.17.7-1 state in /var/tmp/gf-toolkit-before.json, then upgraded on a changed SIMULATED
driver (550.163.01, a third GPU).
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1")
CONFIG = "/etc/nvidia-container-runtime/config.toml"
testinfra_hosts = ["ansible://all"]


@pytest.fixture(scope="module")
def before(host) -> dict:
    return json.loads(host.file("/var/tmp/gf-toolkit-before.json").content_string)


@pytest.fixture(scope="module")
def config(host) -> dict:
    return tomllib.loads(host.file(CONFIG).content_string)


def test_installed_at_1_17_7_and_held_before_the_upgrade(before: dict) -> None:
    assert sorted(line.split(" ", 1) for line in before["packages"]) == sorted(
        [name, "1.17.7-1 hold ok installed"] for name in PACKAGES)


@pytest.mark.parametrize("name", PACKAGES)
def test_upgraded_to_1_17_8_and_held(host, name: str) -> None:
    package = host.package(name)
    assert (package.is_installed, package.version) == (True, "1.17.8-1")
    assert host.check_output("dpkg-query -W -f='${Status}' %s", name) == "hold ok installed"


def test_apt_candidate_is_the_pinned_version(host) -> None:
    policy = host.check_output("apt-cache policy " + shlex.join(PACKAGES))
    assert re.search(r"nvidia-container-toolkit:\s+Installed: 1\.17\.8-1\s+Candidate: 1\.17\.8-1", policy), policy
    assert re.search(r"\*\*\* 1\.17\.8-1 1001", policy), policy
    assert re.search(r"1\.17\.7-1 (500|100)", policy), policy


def test_a_full_upgrade_would_move_no_toolkit_package(host) -> None:
    plan = host.check_output("apt-get -s dist-upgrade")
    assert not re.search(r"(?m)^Inst (nvidia-container|libnvidia-container)", plan), plan


def test_source_is_the_signed_flat_repository(host) -> None:
    source = host.file("/etc/apt/sources.list.d/nvidia-container-toolkit.sources").content_string
    assert re.search(r"(?m)^URIs: file:/srv/gpufleet-standin-toolkit/amd64$", source), source
    assert re.search(r"(?m)^Suites: /$", source), source
    assert re.search(r"(?m)^Signed-By: /etc/apt/keyrings/nvidia-container-toolkit.asc$", source), source


def test_config_holds_the_roles_values(config: dict) -> None:
    assert config["accept-nvidia-visible-devices-envvar-when-unprivileged"] is False
    assert config["accept-nvidia-visible-devices-as-volume-mounts"] is True
    runtime = config["nvidia-container-runtime"]
    assert (runtime["log-level"], runtime["mode"], runtime["runtimes"]) == ("debug", "auto", ["runc"])
    assert runtime["modes"]["cdi"]["spec-dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert config["nvidia-container-cli"]["no-cgroups"] is False
    assert config["nvidia-container-cli"]["ldconfig"] == "@/sbin/ldconfig"


def test_config_survived_the_package_upgrade(host) -> None:
    """dpkg kept the role's file and set the package's new default aside."""
    assert host.file(CONFIG + ".dpkg-dist").exists


@pytest.mark.parametrize(("tool", "version_line"), [
    ("nvidia-ctk", r"(?m)^NVIDIA Container Toolkit CLI version 1\.17\.8$"),
    ("nvidia-container-cli", r"cli-version: 1\.17\.8"),
])
def test_installed_tools_are_the_upgraded_version(host, tool: str, version_line: str) -> None:
    assert re.search(version_line, host.check_output("%s --version", tool))


def test_cdi_spec_regenerated_for_the_new_driver(host, before: dict) -> None:
    spec_before = yaml.safe_load(before["spec"])
    spec_text = host.file("/etc/cdi/nvidia.yaml").content_string
    spec_now = yaml.safe_load(spec_text)
    assert spec_before["kind"] == spec_now["kind"] == "nvidia.com/gpu"
    assert [device["name"] for device in spec_before["devices"]] == ["0", "1", "all"]
    assert [device["name"] for device in spec_now["devices"]] == ["0", "1", "2", "all"]
    assert isinstance(spec_now["cdiVersion"], str)
    assert "driver version of the simulated host: 550.163.01" in spec_text
    stamp = host.file("/var/lib/gpufleet/container_toolkit_cdi.stamp").content_string.strip()
    assert stamp == "driver=550.163.01 toolkit=1.17.8-1 spec=/etc/cdi/nvidia.yaml"


# Where the role's config.toml differs from NVIDIA's `nvidia-ctk config default` of the installed toolkit: the role's
# secure settings (roles/container_toolkit/README.md) and this scenario's own container_toolkit_config. Keys NVIDIA
# leaves commented out are absent from its default, so only the role's side has them.
OWN_SETTINGS = {
    "accept-nvidia-visible-devices-envvar-when-unprivileged",  # the role: false (NVIDIA's commented default: true)
    "accept-nvidia-visible-devices-as-volume-mounts",  # the role: true, for the plugin's volume-mounts strategy
    "nvidia-container-cli.no-cgroups",  # the scenario sets it
    "nvidia-container-runtime.log-level",  # the scenario: debug
    "nvidia-container-runtime.runtimes",  # the scenario: [runc]
}


def _flat(table: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def test_config_is_nvidias_default_of_the_installed_toolkit_but_for_the_settings(config: dict) -> None:
    # NVIDIA's nvidia-ctk 1.17.8, built from NVIDIA's source by `make nvidia-builds`, run on the controller
    nvidia_ctk = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"]) / ".build" / "nvidia" / "toolkit-1.17.8" / "bin" / "nvidia-ctk"
    default = tomllib.loads(subprocess.run([str(nvidia_ctk), "config", "default"], check=True, capture_output=True,
                                           text=True).stdout)
    ours, theirs = _flat(config), _flat(default)
    differing = {key for key in ours.keys() | theirs.keys() if ours.get(key) != theirs.get(key)}
    assert differing == OWN_SETTINGS, {key: (ours.get(key), theirs.get(key)) for key in differing ^ OWN_SETTINGS}
