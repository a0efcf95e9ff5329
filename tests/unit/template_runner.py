"""Renders one template of the collection for each of several hosts with ansible-playbook, as a role would."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import yaml

import artifact as artifact_tool  # tools/artifact.py (pytest.ini puts tools/ on the path)

PLAYBOOK = """
- name: Render the template for every case
  hosts: all
  gather_facts: false
  tasks:
    - name: Write what it rendered
      ansible.builtin.copy:
        content: "{{ lookup('ansible.builtin.template', template) }}"
        dest: "{{ out_dir }}/{{ inventory_hostname }}.txt"
        mode: "0644"
"""


def render_per_host(work: Path, template: Path, hosts: dict[str, dict]) -> dict[str, str]:
    """{host: the template rendered with that host's variables} (each host a local connection)."""
    (work / "playbook.yml").write_text(PLAYBOOK)
    out = work / "out"
    out.mkdir()
    inventory = {name: {"ansible_connection": "local", **variables} for name, variables in hosts.items()}
    (work / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": inventory}}))
    env = dict(os.environ, ANSIBLE_GATHERING="explicit", ANSIBLE_RETRY_FILES_ENABLED="false", ANSIBLE_FORKS="8",
               ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER=shutil.which("python3") or "python3")
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run(
        [artifact_tool.tool("ansible-playbook"), "-i", str(work / "inventory.yml"), str(work / "playbook.yml"), "-e",
         json.dumps({"out_dir": str(out), "template": str(template)})],
        cwd=work, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    return {name: (out / f"{name}.txt").read_text() for name in hosts}
