"""gpu_node_join's judgement of a device plugin pod (roles/gpu_node_join/templates/plugin_pod_current.j2), rendered
by Ansible: a pod counts when it runs the current image and configuration and has been Ready long enough that a
plugin dying at start (Ready for a moment at each restart) does not."""
from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import artifact as artifact_tool  # tools/artifact.py (pytest.ini puts tools/ on the path)

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "roles/gpu_node_join/templates/plugin_pod_current.j2"
SETTLE = yaml.safe_load((REPO / "roles/gpu_node_join/vars/main.yml").read_text())["__gpu_node_join_plugin_settle_seconds"]
IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.4"
SHA = "4700d1d89eb4"

PLAYBOOK = """
- name: Judge every case's pods
  hosts: all
  gather_facts: false
  vars:
    __gpu_node_join_image: "%s"
    __gpu_node_join_label_prefix: gpufleet.io
    __gpu_node_join_config_sha256: "%s"
    __gpu_node_join_plugin_settle_seconds: %d
  tasks:
    - name: Write the verdict
      ansible.builtin.copy:
        content: "{{ lookup('ansible.builtin.template', template) | trim }}"
        dest: "{{ out_dir }}/{{ inventory_hostname }}.txt"
        mode: "0644"
""" % (IMAGE, SHA, SETTLE)


def _pod(ready_for: float | None = 120.0, image: str = IMAGE, sha: str = SHA, deleting: bool = False,
         transition: bool = True) -> dict:
    condition = {"type": "Ready", "status": "True" if ready_for is not None else "False"}
    if transition and ready_for is not None:
        since = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=ready_for)
        condition["lastTransitionTime"] = since.strftime("%Y-%m-%dT%H:%M:%SZ")
    metadata = {"name": "plugin", "annotations": {"gpufleet.io/config-sha256": sha}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata, "spec": {"containers": [{"image": image}]}, "status": {"conditions": [condition]}}


CASES: dict[str, tuple[list[dict], bool]] = {
    "ready_long_enough": ([_pod()], True),
    "ready_a_moment": ([_pod(ready_for=2)], False),
    "ready_without_transition_time": ([_pod(transition=False)], True),
    "not_ready": ([_pod(ready_for=None)], False),
    "other_configuration": ([_pod(sha="0000")], False),
    "other_image": ([_pod(image="nvcr.io/nvidia/k8s-device-plugin:v0.16.0")], False),
    "deleting": ([_pod(deleting=True)], False),
    "an_old_pod_and_a_settled_current_one": ([_pod(sha="0000"), _pod()], True),
    "no_pod": ([], False),
}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    work = tmp_path_factory.mktemp("plugin_pod_current")
    (work / "playbook.yml").write_text(PLAYBOOK)
    out = work / "out"
    out.mkdir()
    hosts = {name: {"ansible_connection": "local", "__pods": pods} for name, (pods, _) in CASES.items()}
    (work / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    env = dict(os.environ, ANSIBLE_GATHERING="explicit", ANSIBLE_RETRY_FILES_ENABLED="false", ANSIBLE_FORKS="8",
               ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER=shutil.which("python3") or "python3")
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run(
        [artifact_tool.tool("ansible-playbook"), "-i", str(work / "inventory.yml"), str(work / "playbook.yml"), "-e",
         json.dumps({"out_dir": str(out), "template": str(TEMPLATE)})],
        cwd=work, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    return {name: (out / f"{name}.txt").read_text() for name in CASES}


@pytest.mark.parametrize("case", sorted(CASES))
def test_verdict(verdicts: dict[str, str], case: str) -> None:
    assert verdicts[case] == str(CASES[case][1])


def test_the_settling_time_outlasts_the_kubelets_status_period() -> None:
    assert SETTLE > 10
