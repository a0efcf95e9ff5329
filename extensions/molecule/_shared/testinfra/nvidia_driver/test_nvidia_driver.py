"""The host state nvidia_driver leaves, read on the node (testinfra): the nvidia_driver_upgrade scenario's.

What each scenario expects is in its ``vars/expected_driver.yml``: ``driver`` (previous, current or newest:
one of the driver versions of the lab's package mirror, whose ``versions.yml`` gives its exact package
versions), ``packages`` (the names), ``newer_version_available`` (the mirror carries another version of the
packages, so without the holds and pins apt would move them) and ``gone_drivers`` (driver versions of which
nothing may be left installed or held).
"""
from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
import yaml

EXPECTED = yaml.safe_load(Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"], "vars", "expected_driver.yml").read_text(encoding="utf-8"))
MIRROR = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"], ".build", "package-mirror")
VERSIONS = yaml.safe_load((MIRROR / "versions.yml").read_text(encoding="utf-8"))
DRIVER = VERSIONS["driver_packages"][VERSIONS["driver"][EXPECTED["driver"]]]
PACKAGES: dict[str, str] = {name: DRIVER["package_versions"].get(name, DRIVER["package_version"]) for name in EXPECTED["packages"]}
GONE_VERSIONS = [VERSIONS["driver"][role] for role in EXPECTED.get("gone_drivers", [])]
KEYRING = "/etc/apt/keyrings/gpufleet-nvidia-driver.asc"
ROLE_FILES = ("/etc/apt/preferences.d/gpufleet-nvidia-driver", "/etc/apt/apt.conf.d/51gpufleet-nvidia-driver",
              "/etc/modules-load.d/gpufleet-nvidia.conf", "/etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf")
testinfra_hosts = ["ansible://all"]


def _deb822_fields(text: str) -> dict[str, str]:
    """One deb822 stanza; a continued field's lines joined with newlines (an embedded key)."""
    fields: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith((" ", "\t")) and name:
            fields[name] += "\n" + line.strip()
        elif ":" in line and not line.startswith("#"):
            name, _colon, value = line.partition(":")
            fields[name] = value.strip()
    return fields


def _content_lines(host, path: str) -> list[str]:
    return [line for line in host.file(path).content_string.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _installed(host) -> dict[str, str]:
    out = host.check_output("dpkg-query -W -f='${Package} ${Version}\\n' " + shlex.join(PACKAGES))
    return dict(line.split() for line in out.splitlines())


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_package_installed_at_its_exact_version_and_held(host, name: str) -> None:
    status = host.check_output("dpkg-query -W -f='${Version} ${db:Status-Abbrev}' %s", name)
    assert status.split() == [PACKAGES[name], "hi"]  # h: selection hold, i: installed


def test_exactly_the_driver_packages_are_held(host) -> None:
    selections = host.check_output("dpkg --get-selections").splitlines()
    held = sorted(line.split()[0].split(":")[0] for line in selections if line.split()[-1] == "hold")
    assert held == sorted(PACKAGES)


if GONE_VERSIONS:
    @pytest.mark.parametrize("version", GONE_VERSIONS)
    def test_nothing_of_an_earlier_driver_is_left(host, version: str) -> None:
        listing = host.check_output("dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n'").splitlines()
        assert [line for line in listing if version in line] == []


@pytest.mark.parametrize("path", ROLE_FILES)
def test_role_file_is_roots_and_mode_0644(host, path: str) -> None:
    file = host.file(path)
    assert (file.is_file, file.user, file.mode) == (True, "root", 0o644)


def test_every_package_pinned_at_its_version_with_priority_1001_and_nothing_else(host) -> None:
    text = host.file("/etc/apt/preferences.d/gpufleet-nvidia-driver").content_string
    stanzas = re.findall(r"(?m)^Package: (\S+)\nPin: version (\S+)\nPin-Priority: (\S+)$", text)
    assert {name: version for name, version, _priority in stanzas} == PACKAGES
    assert {priority for _name, _version, priority in stanzas} == {"1001"}
    assert len(re.findall(r"(?m)^Package:", text)) == len(PACKAGES)


def test_source_is_the_mirror_as_deb822_signed_by_the_roles_keyring_of_the_mirror_key(host) -> None:
    fields = _deb822_fields(host.file("/etc/apt/sources.list.d/gpufleet-nvidia-driver.sources").content_string)
    mirror = VERSIONS["mirror"]
    assert {name: fields.get(name) for name in ("Types", "URIs", "Suites", "Components", "Signed-By")} == {
        "Types": "deb", "URIs": mirror["url"], "Suites": mirror["suite"], "Components": mirror["component"],
        "Signed-By": KEYRING}
    keyring = host.file(KEYRING)
    assert (keyring.user, keyring.group, keyring.mode) == ("root", "root", 0o644)
    assert keyring.content_string.strip() == (MIRROR / "gpgkey").read_text(encoding="utf-8").strip()


def test_unattended_upgrades_blacklist_is_exactly_the_driver_packages(host) -> None:
    """As apt's own configuration parser reads it."""
    out = host.check_output(
        "python3 -c \"import apt_pkg; apt_pkg.init_config(); "
        "print('\\n'.join(apt_pkg.config.value_list('Unattended-Upgrade::Package-Blacklist')))\"")
    assert sorted(out.splitlines()) == sorted(f"^{name}$" for name in PACKAGES)


def test_nvidia_and_uvm_load_at_boot_and_nouveau_is_blacklisted(host) -> None:
    assert _content_lines(host, "/etc/modules-load.d/gpufleet-nvidia.conf") == ["nvidia", "nvidia-uvm"]
    assert _content_lines(host, "/etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf") == [
        "blacklist nouveau", "options nouveau modeset=0"]


def test_apt_candidate_is_the_pinned_version(host) -> None:
    policy = host.check_output("apt-cache policy " + shlex.join(PACKAGES))
    candidates = re.findall(r"(?m)^(\S+):\n  Installed: \S+\n  Candidate: (\S+)$", policy)
    assert dict(candidates) == PACKAGES


def test_persistenced_enabled_and_nvidia_smi_is_debians_binary_without_a_kernel_driver(host) -> None:
    assert host.service("nvidia-persistenced").is_enabled
    smi = host.run("nvidia-smi")
    assert smi.rc == 9 and "couldn't communicate with the NVIDIA driver" in smi.stdout


if EXPECTED.get("newer_version_available"):
    def test_without_holds_and_pins_the_driver_would_move(host) -> None:
        """So the real upgrade below can catch drift."""
        plan = host.check_output("apt-get -s --ignore-hold -o Dir::Etc::PreferencesParts=/nonexistent dist-upgrade")
        assert re.search(r"(?m)^Inst nvidia-smi \[%s\]" % re.escape(PACKAGES["nvidia-smi"]), plan), plan


def test_real_upgrade_and_dist_upgrade_move_no_driver_package(host) -> None:
    upgrade = host.run("apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get -y -q upgrade"
                       " && DEBIAN_FRONTEND=noninteractive apt-get -y -q dist-upgrade")
    assert upgrade.rc == 0, upgrade.stdout + upgrade.stderr
    assert _installed(host) == PACKAGES, upgrade.stdout[-2000:]
