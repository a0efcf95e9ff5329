"""Render the nvidia_driver role's package data for platforms the lab cannot run.

Ubuntu's archive and NVIDIA's CUDA repository are unreachable from the lab, so their data (package
names, exact versions, repository definition) is checked here by running the role's own
`tasks/set_vars.yml` and `tasks/resolve.yml` with ansible-playbook against localhost, with the
platform facts of each case injected (no host is touched; nothing is installed). Debian cases are
rendered too and compared with the versions Debian's archive carries (seen with apt-cache madison),
which the molecule scenarios install for real.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import artifact as artifact_tool  # tools/artifact.py (pytest.ini puts tools/ on the path)

REPO = Path(__file__).resolve().parents[2]

# An action plugin that sets the platform facts of a case, as the setup module would on a real host.
FACTS_PLUGIN = '''
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        result["ansible_facts"] = dict(self._task.args["facts"])
        result["changed"] = False
        return result
'''

PLAYBOOK = '''
- name: Render the nvidia_driver data of every case
  hosts: all
  gather_facts: false
  vars:
    ansible_managed: rendered by the tests
  tasks:
    - name: Set the platform facts of the case
      platform_facts:
        facts: "{{ case_facts }}"

    - name: Load the role's platform data
      ansible.builtin.include_role:
        name: gpufleet.node.nvidia_driver
        tasks_from: set_vars
        public: true

    - name: Resolve the package set
      ansible.builtin.include_role:
        name: gpufleet.node.nvidia_driver
        tasks_from: resolve
        public: true

    - name: Write what the role resolved
      ansible.builtin.copy:
        content: "{{ result | to_nice_json }}"
        dest: "{{ out_dir }}/{{ inventory_hostname }}.json"
        mode: "0644"
      vars:
        result:
          packages: "{{ __nvidia_driver_packages }}"
          primary: "{{ __nvidia_driver_primary_package }}"
          repository: "{{ __nvidia_driver_repository }}"
          problems: "{{ __nvidia_driver_resolve_problems }}"
          # How repository_write.yml installs the source's key (gpufleet.node.apt_signing_key), and the source's Signed-By.
          key:
            keyring: "{{ __nvidia_driver_keyring }}"
            content: "{{ __nvidia_driver_key_content | length > 0 }}"
            url: "{{ __nvidia_driver_key_url if __nvidia_driver_keyring | length > 0 else '' }}"
            fingerprint: "{{ __nvidia_driver_key_fingerprint }}"
            setting: "{{ __nvidia_driver_key_setting }}"
            signed_by: "{{ __nvidia_driver_keyring or __nvidia_driver_repository.signed_by | default('') }}"
          # The files the role writes through gpufleet.node.common's pin and hold, with the values it passes.
          preferences: "{{ _common_pin_packages | gpufleet.node.apt_preferences(_common_role, _common_subject, ansible_managed) }}"
          unattended: "{{ _common_hold_packages | gpufleet.node.unattended_upgrades_blacklist(_common_role, _common_subject, ansible_managed) }}"
        _common_role: nvidia_driver
        _common_subject: "NVIDIA driver {{ nvidia_driver_version }}"
        _common_pin_packages: "{{ __nvidia_driver_packages }}"
        _common_hold_packages: "{{ __nvidia_driver_packages.keys() | list }}"
'''


def _facts(distribution: str, version: str, release: str, arch: str = "x86_64",
           kernel: str = "6.8.0-51-generic") -> dict:
    return {
        "distribution": distribution,
        "distribution_version": version,
        "distribution_major_version": version.split(".")[0],
        "distribution_release": release,
        "architecture": arch,
        "kernel": kernel,
    }


JAMMY = _facts("Ubuntu", "22.04", "jammy", kernel="5.15.0-125-generic")
NOBLE = _facts("Ubuntu", "24.04", "noble")
NOBLE_ARM = _facts("Ubuntu", "24.04", "noble", arch="aarch64", kernel="6.8.0-51-generic-64k")
BOOKWORM = _facts("Debian", "12.11", "bookworm", kernel="6.1.0-37-amd64")
TRIXIE = _facts("Debian", "13.1", "trixie", kernel="6.12.48+deb13-amd64")

CASES: dict[str, tuple[dict, dict]] = {
    "jammy_archive_none": (JAMMY, {"nvidia_driver_kernel_module": "none"}),
    "jammy_archive_dkms_fm": (JAMMY, {"nvidia_driver_fabricmanager": True}),
    "jammy_archive_reupload": (JAMMY, {"nvidia_driver_package_version": "535.261.03-0ubuntu0.22.04.2"}),
    "noble_archive_open": (NOBLE, {"nvidia_driver_kernel_module": "open"}),
    "noble_archive_precompiled": (NOBLE, {"nvidia_driver_kernel_module": "precompiled"}),
    "jammy_cuda_dkms": (JAMMY, {"nvidia_driver_source": "cuda", "nvidia_driver_version": "550.127.08"}),
    "noble_arm_cuda_open_fm": (NOBLE_ARM, {"nvidia_driver_source": "cuda", "nvidia_driver_kernel_module": "open",
                                           "nvidia_driver_fabricmanager": True}),
    "noble_cuda_precompiled": (NOBLE, {"nvidia_driver_source": "cuda", "nvidia_driver_kernel_module": "precompiled"}),
    "jammy_mirror_of_cuda": (JAMMY, {"nvidia_driver_source": "mirror", "nvidia_driver_mirror_layout": "cuda",
                                     "nvidia_driver_mirror_url": "https://apt.example.internal/cuda/ubuntu2204/x86_64/",
                                     "nvidia_driver_mirror_suites": ["/"],
                                     "nvidia_driver_mirror_signing_key": "https://apt.example.internal/key.asc"}),
    "bookworm_mirror_key_path": (BOOKWORM, {"nvidia_driver_source": "mirror", "nvidia_driver_mirror_url": "https://apt.example.internal/debian",
                                            "nvidia_driver_mirror_suites": ["bookworm"], "nvidia_driver_mirror_components": ["non-free"],
                                            "nvidia_driver_mirror_signing_key": "/usr/share/keyrings/site-mirror.gpg",
                                            "nvidia_driver_mirror_signing_key_fingerprint": "1649 D3D8 AB5A BE3A 5805  84CE A531 F2DE 5D17 3542"}),
    "bookworm_mirror_key_inline": (BOOKWORM, {"nvidia_driver_source": "mirror", "nvidia_driver_mirror_url": "file:///srv/mirror",
                                              "nvidia_driver_mirror_suites": ["bookworm"], "nvidia_driver_mirror_components": ["non-free"],
                                              "nvidia_driver_mirror_signing_key": (Path(__file__).parent / "plugins" / "filter" / "files"
                                                                                   / "deb822-key.asc").read_text()}),
    "bookworm_backports_none": (BOOKWORM, {"nvidia_driver_version": "535.216.03", "nvidia_driver_kernel_module": "none"}),
    "bookworm_stable_dkms": (BOOKWORM, {}),
    "bookworm_unknown_version": (BOOKWORM, {"nvidia_driver_version": "535.230.02"}),
    "bookworm_backports_open": (BOOKWORM, {"nvidia_driver_version": "535.216.03", "nvidia_driver_kernel_module": "open"}),
    "bookworm_fabricmanager": (BOOKWORM, {"nvidia_driver_fabricmanager": True}),
    "bookworm_bad_override": (BOOKWORM, {"nvidia_driver_package_versions": {"nvidia-settings": "535.261.03-1"}}),
    "trixie_none": (TRIXIE, {"nvidia_driver_version": "550.163.01", "nvidia_driver_kernel_module": "none"}),
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Run the role's resolution once for every case; return each case's result."""
    work = tmp_path_factory.mktemp("nvidia_driver_render")
    (work / "action_plugins").mkdir()
    (work / "action_plugins" / "platform_facts.py").write_text(FACTS_PLUGIN)
    (work / "playbook.yml").write_text(PLAYBOOK)
    out = work / "out"
    out.mkdir()
    collections = work / "collections" / "ansible_collections" / "gpufleet"
    collections.mkdir(parents=True)
    (collections / "node").symlink_to(REPO)
    hosts = {
        name: {"ansible_connection": "local", "ansible_python_interpreter": shutil.which("python3") or "python3",
               "case_facts": facts, **variables}
        for name, (facts, variables) in CASES.items()
    }
    (work / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    ansible_playbook = artifact_tool.tool("ansible-playbook")  # the ansible-core under test
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(work / "collections"), ANSIBLE_GATHERING="explicit",
               ANSIBLE_RETRY_FILES_ENABLED="false", ANSIBLE_FORKS="8", ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run(
        [str(ansible_playbook), "-i", str(work / "inventory.yml"), str(work / "playbook.yml"),
         "-e", json.dumps({"out_dir": str(out)})],
        cwd=work, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    return {name: json.loads((out / f"{name}.json").read_text()) for name in CASES}


def test_jammy_archive_user_space_only(rendered: dict) -> None:
    case = rendered["jammy_archive_none"]
    assert case["problems"] == []
    assert case["primary"] == "nvidia-utils-535-server"
    v = "535.261.03-0ubuntu0.22.04.1"
    assert case["packages"] == {
        "nvidia-utils-535-server": v,
        "libnvidia-compute-535-server": v,
        "libnvidia-cfg1-535-server": v,
        "nvidia-compute-utils-535-server": v,
        "nvidia-kernel-common-535-server": v,
        "nvidia-modprobe": "470.103.01-1",
    }
    # Ubuntu's archive (restricted) is enabled on Ubuntu servers: the role writes no source for it.
    assert case["repository"] == {}


def test_jammy_archive_dkms_with_fabricmanager(rendered: dict) -> None:
    case = rendered["jammy_archive_dkms_fm"]
    assert case["problems"] == []
    v = "535.261.03-0ubuntu0.22.04.1"
    for name in ("nvidia-dkms-535-server", "nvidia-kernel-source-535-server",
                 "nvidia-fabricmanager-535", "libnvidia-nscq-535"):
        assert case["packages"][name] == v
    assert "Package: nvidia-dkms-535-server\nPin: version 535.261.03-0ubuntu0.22.04.1\nPin-Priority: 1001" in case["preferences"]


def test_jammy_archive_reupload_takes_the_given_package_version(rendered: dict) -> None:
    case = rendered["jammy_archive_reupload"]
    assert case["problems"] == []
    assert case["packages"]["nvidia-utils-535-server"] == "535.261.03-0ubuntu0.22.04.2"
    assert case["packages"]["nvidia-dkms-535-server"] == "535.261.03-0ubuntu0.22.04.2"
    # nvidia-modprobe keeps its own version.
    assert case["packages"]["nvidia-modprobe"] == "470.103.01-1"


def test_noble_archive_open_kernel_modules(rendered: dict) -> None:
    case = rendered["noble_archive_open"]
    assert case["problems"] == []
    v = "535.261.03-0ubuntu0.24.04.1"
    assert case["packages"]["nvidia-dkms-535-server-open"] == v
    assert case["packages"]["nvidia-kernel-source-535-server-open"] == v
    assert "nvidia-dkms-535-server" not in case["packages"]
    assert case["packages"]["nvidia-modprobe"] == "535.54.03-1"


def test_noble_archive_precompiled_module_is_held_not_pinned(rendered: dict) -> None:
    case = rendered["noble_archive_precompiled"]
    assert case["problems"] == []
    name = "linux-modules-nvidia-535-server-6.8.0-51-generic"
    assert case["packages"][name] == ""
    assert f"Package: {name}\n" not in case["preferences"]
    assert f"Held but not pinned (no version of their own to pin): {name}" in case["preferences"]
    assert '"^linux-modules-nvidia-535-server-6[.]8[.]0-51-generic$";' in case["unattended"]


def test_jammy_cuda_repository(rendered: dict) -> None:
    case = rendered["jammy_cuda_dkms"]
    assert case["problems"] == []
    assert case["primary"] == "nvidia-utils-550"
    assert case["packages"] == {
        "nvidia-utils-550": "550.127.08-0ubuntu1",
        "libnvidia-compute-550": "550.127.08-0ubuntu1",
        "libnvidia-cfg1-550": "550.127.08-0ubuntu1",
        "nvidia-compute-utils-550": "550.127.08-0ubuntu1",
        "nvidia-kernel-common-550": "550.127.08-0ubuntu1",
        "nvidia-modprobe": "550.127.08-0ubuntu1",
        "nvidia-dkms-550": "550.127.08-0ubuntu1",
        "nvidia-kernel-source-550": "550.127.08-0ubuntu1",
    }
    base = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"
    assert case["repository"] == {"uris": [base], "suites": ["/"], "components": [], "signed_by": base + "3bf863cc.pub"}


def test_noble_arm_cuda_open_with_fabricmanager(rendered: dict) -> None:
    case = rendered["noble_arm_cuda_open_fm"]
    assert case["problems"] == []
    assert case["packages"]["nvidia-dkms-535-open"] == "535.261.03-0ubuntu1"
    assert case["packages"]["nvidia-fabricmanager-535"] == "535.261.03-1"
    assert case["packages"]["libnvidia-nscq-535"] == "535.261.03-1"
    assert case["repository"]["uris"] == ["https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/sbsa/"]


def test_cuda_repository_has_no_precompiled_modules(rendered: dict) -> None:
    problems = " ".join(rendered["noble_cuda_precompiled"]["problems"])
    assert "nvidia_driver_kernel_module is precompiled" in problems
    assert "allowed there: dkms, open, none" in problems


def test_mirror_of_the_cuda_repository(rendered: dict) -> None:
    case = rendered["jammy_mirror_of_cuda"]
    assert case["problems"] == []
    assert case["repository"] == {
        "uris": ["https://apt.example.internal/cuda/ubuntu2204/x86_64/"],
        "suites": ["/"],
        "components": [],
        "signed_by": "https://apt.example.internal/key.asc",
    }
    assert case["packages"]["nvidia-dkms-535"] == "535.261.03-0ubuntu1"


CUDA_KEY_FINGERPRINT = "EB69 3B30 35CD 5710 E231 E123 A4B4 6996 3BF8 63CC"


@pytest.mark.parametrize(("name", "expected"), [
    # NVIDIA's key, downloaded from the repository, checked against the built-in fingerprint of key 3bf863cc
    ("jammy_cuda_dkms", {"keyring": "/etc/apt/keyrings/gpufleet-nvidia-driver.asc", "content": False,
                         "url": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/3bf863cc.pub",
                         "fingerprint": CUDA_KEY_FINGERPRINT, "setting": "nvidia_driver_cuda_signing_key"}),
    # a mirror's key: its fingerprint is the user's (empty here: the module refuses the key then)
    ("jammy_mirror_of_cuda", {"keyring": "/etc/apt/keyrings/gpufleet-nvidia-driver.asc", "content": False,
                              "url": "https://apt.example.internal/key.asc", "fingerprint": "",
                              "setting": "nvidia_driver_mirror_signing_key"}),
    # a path on the host is read as a file:// URL into the role's keyring, binary as the path's name says
    ("bookworm_mirror_key_path", {"keyring": "/etc/apt/keyrings/gpufleet-nvidia-driver.gpg", "content": False,
                                  "url": "file:///usr/share/keyrings/site-mirror.gpg",
                                  "fingerprint": "1649 D3D8 AB5A BE3A 5805  84CE A531 F2DE 5D17 3542",
                                  "setting": "nvidia_driver_mirror_signing_key"}),
    # a key given inline is written to the keyring too, no longer embedded in the source
    ("bookworm_mirror_key_inline", {"keyring": "/etc/apt/keyrings/gpufleet-nvidia-driver.asc", "content": True, "url": "",
                                    "fingerprint": "", "setting": "nvidia_driver_mirror_signing_key"}),
    # the distribution's archive keyring is the distribution's: nothing to check or write
    ("bookworm_stable_dkms", {"keyring": "", "content": False, "url": "", "fingerprint": CUDA_KEY_FINGERPRINT,
                              "setting": "nvidia_driver_cuda_signing_key",
                              "signed_by": "/usr/share/keyrings/debian-archive-keyring.gpg"}),
])
def test_the_sources_key_is_checked_and_written_to_the_roles_keyring(rendered: dict, name: str, expected: dict) -> None:
    key = rendered[name]["key"]
    assert key == dict({"signed_by": expected["keyring"]}, **expected)


def test_bookworm_backports_version_matches_the_archive(rendered: dict) -> None:
    case = rendered["bookworm_backports_none"]
    assert case["problems"] == []
    bpo = "535.216.03-2~bpo12+1"
    assert case["packages"] == {
        "nvidia-smi": bpo,
        "libnvidia-ml1": bpo,
        "libcuda1": bpo,
        "libnvidia-cfg1": bpo,
        "nvidia-persistenced": "535.171.04-1~deb12u1",
        "nvidia-modprobe": "535.161.07-1~deb12u1",
        "nvidia-alternative": bpo,
        "libnvidia-ptxjitcompiler1": bpo,
        "libnvidia-pkcs11-openssl3": bpo,
        "nvidia-legacy-check": bpo,
    }
    assert case["repository"] == {
        "uris": ["http://deb.debian.org/debian"],
        "suites": ["bookworm", "bookworm-backports"],
        "components": ["contrib", "non-free", "non-free-firmware"],
        "signed_by": "/usr/share/keyrings/debian-archive-keyring.gpg",
    }


def test_bookworm_stable_dkms(rendered: dict) -> None:
    case = rendered["bookworm_stable_dkms"]
    assert case["problems"] == []
    assert case["packages"]["nvidia-kernel-dkms"] == "535.261.03-1"
    assert case["packages"]["nvidia-kernel-support"] == "535.261.03-1"
    assert case["packages"]["firmware-nvidia-gsp"] == "535.261.03-1"
    assert case["repository"]["suites"] == ["bookworm"]


@pytest.mark.parametrize(("name", "expected"), [
    ("bookworm_unknown_version", "nvidia_driver_version 535.230.02 is not in the role data for the Debian archive"),
    ("bookworm_backports_open", "does not carry at version 535.216.03: allowed at that version: dkms, none"),
    ("bookworm_fabricmanager", "has no Fabric Manager package"),
    ("bookworm_bad_override", "nvidia_driver_package_versions names nvidia-settings, not part of the package set"),
])
def test_debian_requests_the_archive_cannot_satisfy(rendered: dict, name: str, expected: str) -> None:
    problems = " ".join(rendered[name]["problems"])
    assert expected in problems


def test_trixie(rendered: dict) -> None:
    case = rendered["trixie_none"]
    assert case["problems"] == []
    assert case["packages"]["nvidia-smi"] == "550.163.01-2"
    assert case["packages"]["nvidia-persistenced"] == "550.163.01-1"
    assert case["packages"]["nvidia-modprobe"] == "570.133.07-1"
    assert case["repository"]["suites"] == ["trixie"]
