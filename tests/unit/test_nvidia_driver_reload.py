"""The modprobe command line of nvidia_driver's reload (tasks/reload.yml), rendered by ansible-playbook.

The expressions are taken as they stand in reload.yml and rendered by Ansible itself (how a YAML string reaches Jinja
is part of what is tested), against real /proc/modules captures. The lab's nodes run the same commands against the
SIMULATED modprobe (lab/gpusim).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

import artifact as artifact_tool  # tools/artifact.py (pytest.ini puts tools/ on the path)

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "nvidia_driver"
FIXTURES = REPO / "tests" / "fixtures" / "nvidia"


def _unload_task() -> dict:
    tasks = yaml.safe_load((ROLE / "tasks" / "reload.yml").read_text())
    inner = [task for entry in tasks for task in entry.get("block", [entry])]
    return next(task for task in inner if task["name"] == "Unload the NVIDIA modules, users first")


def _render_argv(proc_modules: str, tmp_path: Path) -> list[str]:
    task = _unload_task()
    unload_order = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__nvidia_driver_unload_order"]
    out = tmp_path / "argv.json"
    playbook = [{
        "name": "Render the unload command", "hosts": "localhost", "gather_facts": False,
        "tasks": [{
            "name": "Write the argv",
            "ansible.builtin.copy": {"content": "{{ argv | to_json }}", "dest": str(out), "mode": "0644"},
            "vars": dict(task["vars"], argv=task["ansible.builtin.command"]["argv"],
                         __nvidia_driver_unload_order=unload_order,
                         __nvidia_driver_loaded_module={"files": {"modules": {"content": proc_modules}}}),
        }],
    }]
    (tmp_path / "playbook.yml").write_text(yaml.safe_dump(playbook))
    ansible_playbook = artifact_tool.tool("ansible-playbook")  # the ansible-core under test
    env = dict(os.environ, ANSIBLE_GATHERING="explicit", ANSIBLE_RETRY_FILES_ENABLED="false", ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run([str(ansible_playbook), str(tmp_path / "playbook.yml")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize(("proc_modules", "expected"), [
    # A real H200 host's /proc/modules (grep -i nvidia): nvidia_uvm uses nvidia, so it goes first.
    ((FIXTURES / "proc-modules_nvidia_no-module-unload_open-kmod-580.159.04_H200.txt").read_text(),
     ["modprobe", "-r", "nvidia_uvm", "nvidia"]),
    # Every module the role knows, in /proc/modules' order (newest first), among others: users first, nvidia last.
    ("nvidia_drm 147456 3 - Live 0x0000000000000000 (POE)\n"
     "nvidia_modeset 2187264 3 nvidia_drm, Live 0x0000000000000000 (POE)\n"
     "ecc 49152 2 ecdh_generic,nvidia, Live 0x0000000000000000\n"
     "nvidia_uvm 2461696 0 - Live 0x0000000000000000 (POE)\n"
     "nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)\n"
     "nvidia 16297984 39 nvidia_uvm,nvidia_modeset,nvidia_peermem, Live 0x0000000000000000 (POE)\n",
     ["modprobe", "-r", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia_peermem", "nvidia"]),
])
def test_the_unload_names_every_loaded_nvidia_module_users_first(proc_modules: str, expected: list[str],
                                                                 tmp_path: Path) -> None:
    assert _render_argv(proc_modules, tmp_path) == expected
