"""The files the install roles write on a node (module_utils/_managed_files.py): the same text for the comparison with
the file read and for the write. The expected texts are those the roles' former templates wrote on the lab's nodes."""
from __future__ import annotations

import tomllib

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.node.plugins.filter.managed_files import FilterModule
from ansible_collections.gpufleet.node.plugins.module_utils import _managed_files as files

DRIVER = {"nvidia-driver": "535.261.03-1~deb12u1", "Libnvidia-ml1": "535.261.03-1~deb12u1", "firmware-nvidia-gsp": "",
          "nvidia-kernel-dkms": "535.261.03-1~deb12u1", "aaa": ""}

DRIVER_PREFERENCES = """\
# Ansible managed
# gpufleet.node.nvidia_driver: NVIDIA driver 535.261.03.
# Every package is pinned to its exact version (priority 1001: apt neither upgrades nor replaces it);
# the packages are also held with dpkg selections.

Package: Libnvidia-ml1
Pin: version 535.261.03-1~deb12u1
Pin-Priority: 1001

Package: nvidia-driver
Pin: version 535.261.03-1~deb12u1
Pin-Priority: 1001

Package: nvidia-kernel-dkms
Pin: version 535.261.03-1~deb12u1
Pin-Priority: 1001

# Held but not pinned (no version of their own to pin): firmware-nvidia-gsp, aaa
"""

HOLD_BLACKLIST = """\
// Ansible managed
// gpufleet.node.nvidia_driver: NVIDIA driver 535.261.03; the packages move only when the role moves them.
// Entries are regular expressions matched against package names ("." and "+" written as classes).
Unattended-Upgrade::Package-Blacklist {
    "^a[.]b[+]c$";
    "^Libnvidia-ml1$";
    "^libstdc[+][+]6$";
    "^nvidia-driver$";
};
"""


def test_apt_preferences_pins_each_versioned_package_in_name_order_and_names_the_unpinned() -> None:
    assert files.apt_preferences(DRIVER, "nvidia_driver", "NVIDIA driver 535.261.03") == DRIVER_PREFERENCES


@pytest.mark.parametrize(("packages", "stanzas", "comment"), [
    ({}, 0, False),
    ({"nvidia-container-toolkit": "1.17.8-1"}, 1, False),
    ({"firmware-nvidia-gsp": ""}, 0, True),
])
def test_apt_preferences_stanzas(packages: dict, stanzas: int, comment: bool) -> None:
    text = files.apt_preferences(packages, "container_toolkit", "toolkit")
    assert text.count("Pin-Priority: 1001") == stanzas
    assert ("# Held but not pinned" in text) is comment
    assert text.endswith("\n") and not text.endswith("\n\n")


def test_unattended_upgrades_blacklist_anchors_each_name_with_dots_and_pluses_as_classes() -> None:
    packages = ["nvidia-driver", "libstdc++6", "Libnvidia-ml1", "a.b+c"]
    assert files.unattended_upgrades_blacklist(packages, "nvidia_driver", "NVIDIA driver 535.261.03") == HOLD_BLACKLIST


def test_unattended_upgrades_blacklist_of_no_package_is_an_empty_list() -> None:
    assert files.unattended_upgrades_blacklist([], "containerd_nvidia", "containerd").endswith(
        "Unattended-Upgrade::Package-Blacklist {\n};\n")


@pytest.mark.parametrize(("modules", "body"), [
    (["nvidia", "nvidia-uvm"], "nvidia\nnvidia-uvm\n"),
    (["nvidia-uvm", "nvidia", "nvidia-modeset"], "nvidia-uvm\nnvidia\nnvidia-modeset\n"),
    ([], ""),
])
def test_modules_load_keeps_the_modules_order(modules: list, body: str) -> None:
    assert files.modules_load(modules) == (
        "# Ansible managed\n"
        "# gpufleet.node.nvidia_driver: NVIDIA modules loaded at boot. nvidia-uvm is what CUDA needs:\n"
        "# without it nvidia-smi works and CUDA programs fail with \"unknown error\".\n" + body)


def test_nouveau_blacklist() -> None:
    assert files.nouveau_blacklist("Managed by site ops") == (
        "# Managed by site ops\n"
        "# gpufleet.node.nvidia_driver: nouveau must not claim the GPUs before the NVIDIA driver.\n"
        "blacklist nouveau\noptions nouveau modeset=0\n")


def test_toml_file_puts_the_comments_above_the_configuration() -> None:
    data = {"version": 3, "plugins": {"io.containerd.cri.v1.runtime": {"containerd": {"default_runtime_name": "nvidia"}}}}
    text = files.toml_file(["Managed by Ansible.", "containerd 2.1"], data)
    assert text == ('# Managed by Ansible.\n# containerd 2.1\nversion = 3\n\n'
                    '[plugins."io.containerd.cri.v1.runtime".containerd]\ndefault_runtime_name = "nvidia"\n')
    assert tomllib.loads(text) == data


def test_filters_default_the_managed_line_when_the_play_sets_none() -> None:
    filters = FilterModule().filters()
    assert filters["nouveau_blacklist_conf"](None).startswith("# Ansible managed\n")
    assert filters["modules_load_conf"](["nvidia"], "Managed by site ops").startswith("# Managed by site ops\n")
    assert filters["apt_preferences"]({}, "nvidia_driver", "x", None).startswith("# Ansible managed\n")
    assert filters["unattended_upgrades_blacklist"]([], "nvidia_driver", "x", "ops").startswith("// ops\n")


def test_toml_file_names_a_value_without_a_toml_form() -> None:
    with pytest.raises(AnsibleFilterError, match=r"toml_file: a\.b is a NoneType"):
        FilterModule().filters()["toml_file"]({"a": {"b": None}}, [])
