"""The toolkit's host state after install (1.17.8-1) and upgrade (1.20.0-1), read on the node (testinfra).

The packages are NVIDIA's own, built from the tags' packaging/debian; libnvidia-container's two are STAND-INs.
side_effect saved the 1.17.8-1 state in /var/tmp/gf-toolkit-before.json, then moved the driver root (SIMULATED GPUs
and module, NVIDIA's mock NVML) from the mirror's previous driver with two GPUs to its current one with three, and
upgraded the toolkit.
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


@pytest.fixture(scope="module")
def mirror(host) -> dict:
    return yaml.safe_load(host.file("/srv/gpufleet-package-mirror/versions.yml").content_string)


def test_installed_at_1_17_8_and_held_before_the_upgrade(before: dict) -> None:
    assert sorted(line.split(" ", 1) for line in before["packages"]) == sorted(
        [name, "1.17.8-1 hold ok installed"] for name in PACKAGES)


@pytest.mark.parametrize("name", PACKAGES)
def test_upgraded_to_1_20_0_and_held(host, name: str) -> None:
    package = host.package(name)
    assert (package.is_installed, package.version) == (True, "1.20.0-1")
    assert host.check_output("dpkg-query -W -f='${Status}' %s", name) == "hold ok installed"


def test_apt_candidate_is_the_pinned_version(host) -> None:
    policy = host.check_output("apt-cache policy " + shlex.join(PACKAGES))
    assert re.search(r"nvidia-container-toolkit:\s+Installed: 1\.20\.0-1\s+Candidate: 1\.20\.0-1", policy), policy
    assert re.search(r"\*\*\* 1\.20\.0-1 1001", policy), policy
    assert re.search(r"1\.17\.8-1 (500|100)", policy), policy


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


def test_config_is_the_roles_file_after_the_packages_rewrote_it(host) -> None:
    """NVIDIA's packages own no config.toml; their post-installation script rewrites it in place (nvidia-ctk config
    --in-place) on the upgrade, and the role wrote its own file again after it."""
    assert host.run("dpkg -S %s", CONFIG).rc == 1
    assert not host.file(CONFIG + ".dpkg-dist").exists
    assert host.file(CONFIG).content_string.startswith("# Managed by Ansible: changes made here are overwritten.\n")


def test_nvidias_cdi_refresh_is_installed_and_disabled_for_the_roles_spec(host) -> None:
    """1.20's packages install nvidia-cdi-refresh.{path,service}; with the role generating the spec, they are off."""
    for unit in ("nvidia-cdi-refresh.path", "nvidia-cdi-refresh.service"):
        assert host.file(f"/lib/systemd/system/{unit}").exists
        assert host.run("systemctl is-enabled %s", unit).stdout.strip() == "disabled"
        assert host.run("systemctl is-active %s", unit).stdout.strip() == "inactive"
    assert not host.file("/var/run/cdi/nvidia.yaml").exists


@pytest.mark.parametrize(("tool", "version_line"), [
    ("nvidia-ctk", r"(?m)^NVIDIA Container Toolkit CLI version 1\.20\.0\ncommit: 5505e2f94d9aaa08561490db974ba3cd676af209$"),
    ("nvidia-container-runtime", r"(?m)^NVIDIA Container Runtime version 1\.20\.0$"),
    ("nvidia-container-cli", r"cli-version: 1\.20\.0"),
])
def test_installed_tools_are_the_upgraded_version(host, tool: str, version_line: str) -> None:
    # The runtime prints its version, then fails to find runc, which this node does not have.
    assert re.search(version_line, host.run("%s --version", tool).stdout)


def _device_names(spec: dict) -> list[str]:
    return [device["name"] for device in spec["devices"]]


def _library_mounts(spec: dict) -> list[str]:
    return sorted(mount["hostPath"] for mount in spec["containerEdits"]["mounts"] if ".so." in mount["hostPath"])


PROFILE_UUIDS = [f"GPU-5e1a0000-0000-4000-8000-00000000010{index}" for index in range(3)]  # lab/gpusim/profiles/h100x8.json


def test_cdi_spec_regenerated_for_the_new_driver(host, before: dict, mirror: dict) -> None:
    """NVIDIA's nvidia-ctk wrote both specs from the driver root: its devices from NVML (the mock), its mounts from
    the root's libraries; the upgrade and the new driver made the role generate it again."""
    spec_before = yaml.safe_load(before["spec"])
    spec_now = yaml.safe_load(host.file("/etc/cdi/nvidia.yaml").content_string)
    assert spec_before["kind"] == spec_now["kind"] == "nvidia.com/gpu"
    assert _device_names(spec_before) == ["0", "1", *PROFILE_UUIDS[:2], "all"]
    assert _device_names(spec_now) == ["0", "1", "2", *PROFILE_UUIDS, "all"]
    root = "/opt/gf-toolkit-simhost/usr/lib/x86_64-linux-gnu/"
    for spec, release in ((spec_before, "previous"), (spec_now, "current")):
        version = mirror["driver"][release]
        assert _library_mounts(spec) == [f"{root}libcuda.so.{version}", f"{root}libnvidia-ml.so.{version}"]
    stamp = host.file("/var/lib/gpufleet/container_toolkit_cdi.stamp").content_string.strip()
    assert stamp == f"driver={mirror['driver']['current']} toolkit=1.20.0-1 spec=/etc/cdi/nvidia.yaml"


def test_the_driver_roots_nvidia_smi_runs_on_the_mock(host, mirror: dict) -> None:
    """What a container gets through the spec: Debian's nvidia-smi on NVIDIA's mock NVML, which carries the node's
    GPUs in the library file itself (the lab's patch 0002), with no configuration file beside it."""
    root = "/opt/gf-toolkit-simhost"
    assert host.check_output(f"find {root} -name config.yaml") == ""
    listing = host.check_output(f"LD_LIBRARY_PATH={root}/usr/lib/x86_64-linux-gnu {root}/usr/bin/nvidia-smi -L")
    assert listing.splitlines() == [f"GPU {index}: NVIDIA H100 80GB HBM3 (UUID: {uuid})" for index, uuid in enumerate(PROFILE_UUIDS)]
    query = host.check_output(f"LD_LIBRARY_PATH={root}/usr/lib/x86_64-linux-gnu {root}/usr/bin/nvidia-smi "
                              "--query-gpu=driver_version --format=csv,noheader")
    assert query.splitlines() == [mirror["driver"]["current"]] * 3


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
    # NVIDIA's nvidia-ctk 1.20.0 (the installed toolkit), built from NVIDIA's source by `make nvidia-builds`, run on
    # the controller
    nvidia_ctk = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"]) / ".build" / "nvidia" / "toolkit-1.20.0" / "bin" / "nvidia-ctk"
    default = tomllib.loads(subprocess.run([str(nvidia_ctk), "config", "default"], check=True, capture_output=True,
                                           text=True).stdout)
    ours, theirs = _flat(config), _flat(default)
    differing = {key for key in ours.keys() | theirs.keys() if ours.get(key) != theirs.get(key)}
    assert differing == OWN_SETTINGS, {key: (ours.get(key), theirs.get(key)) for key in differing ^ OWN_SETTINGS}
