"""The render lookup renders as ansible.builtin.template does, without deep-copying the variables it is given."""
from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess

import pytest
import yaml
from ansible.plugins.lookup import template as builtin_template
from ansible.plugins.lookup.template import LookupModule as BuiltinTemplate

from pathlib import Path

import artifact as artifact_tool  # tools/artifact.py (pytest.ini puts tools/ on the path)
from ansible_collections.gpufleet.node.plugins.lookup import render

REPO = Path(__file__).resolve().parents[4]

TEMPLATES = {
    # ansible_managed and template_path come from the lookup, not from the variables.
    "managed.j2": "# {{ ansible_managed }}\n# {{ template_path }}\n{% for name in names %}\n{{ name }}={{ versions[name] }}\n{% endfor %}\n",
    "extra.j2": "{{ greeting }}, {{ who }}{# a comment #}\n",
    "delimiters.j2": "[% greeting %] {{ literally }}\n",
    # A nested lookup and a variable that is itself a template (rendered lazily).
    "nested.j2": "[{{ lookup('gpufleet.node.render', 'extra.j2') | trim }}] {{ shout }} {{ hostvars[inventory_hostname].fact }}\n",
}

# Each case renders with both lookups; the output must be the same.
CASES = {
    "managed": ("managed.j2", {}),
    "managed_no_trim": ("managed.j2", {"trim_blocks": False}),
    "extra": ("extra.j2", {}),
    "template_vars": ("extra.j2", {"template_vars": {"who": "GPU node"}}),
    "delimiters": ("delimiters.j2", {"variable_start_string": "[%", "variable_end_string": "%]"}),
    "nested": ("nested.j2", {}),
}

PLAYBOOK = """
- name: Render every case with both lookups
  hosts: localhost
  gather_facts: false
  vars:
    names: [a, b]
    versions: {a: "1.0", b: "2.0"}
    greeting: hello
    who: world
    shout: "{{ greeting | upper }}"
  tasks:
    - name: Set a fact, found through hostvars
      ansible.builtin.set_fact:
        fact: "{{ who }}"

    - name: Write what each lookup rendered
      ansible.builtin.copy:
        content: >-
          {{ {'builtin': lookup('ansible.builtin.template', item.value.0, **item.value.1),
              'render': lookup('gpufleet.node.render', item.value.0, **item.value.1)} | to_json }}
        dest: "{{ out_dir }}/{{ item.key }}.json"
        mode: "0644"
      loop: "{{ cases | dict2items }}"
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    work = tmp_path_factory.mktemp("render")
    (work / "templates").mkdir()
    for name, text in TEMPLATES.items():
        (work / "templates" / name).write_text(text)
    (work / "playbook.yml").write_text(PLAYBOOK)
    out = work / "out"
    out.mkdir()
    env = dict(os.environ, ANSIBLE_RETRY_FILES_ENABLED="false", ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_COLLECTIONS_PATH=str(REPO / ".build/collections"),
               ANSIBLE_PYTHON_INTERPRETER=shutil.which("python3") or "python3")
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run(
        [artifact_tool.tool("ansible-playbook"), "-i", "localhost,", "-c", "local", str(work / "playbook.yml"),
         "-e", json.dumps({"out_dir": str(out), "cases": CASES})],
        cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    return {name: json.loads((out / f"{name}.json").read_text()) for name in CASES}


@pytest.mark.parametrize("case", sorted(CASES))
def test_renders_as_the_builtin_lookup(rendered: dict, case: str) -> None:
    assert rendered[case]["render"] == rendered[case]["builtin"]


def test_the_cases_render_what_they_ask_for(rendered: dict) -> None:
    managed = rendered["managed"]["render"].splitlines()
    assert managed[2:] == ["a=1.0", "b=2.0"] and managed[1] == "# managed.j2"
    assert rendered["template_vars"]["render"] == "hello, GPU node\n"
    assert rendered["delimiters"]["render"] == "hello {{ literally }}\n"
    assert rendered["nested"]["render"] == "[hello, world] HELLO world\n"


class RefusesDeepCopy:
    """A variable value that must never be copied."""

    def __deepcopy__(self, memo):
        raise AssertionError("deep-copied")


def test_the_builtin_lookups_copy_of_the_variables_is_shallow(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    def builtin_run(self, terms, variables=None, **kwargs):
        seen["copy"] = copy.deepcopy(variables)  # what the builtin lookup does with them
        return []

    monkeypatch.setattr(BuiltinTemplate, "run", builtin_run)
    value = RefusesDeepCopy()
    variables = {"ansible_search_path": [], "value": value}
    render.LookupModule.run(object.__new__(render.LookupModule), ["t.j2"], variables=variables)
    assert seen["copy"] == variables and seen["copy"] is not variables
    assert seen["copy"]["value"] is value
    seen["copy"]["added"] = True  # the builtin lookup adds the template_* variables to its copy
    assert "added" not in variables


def test_the_options_are_the_builtin_lookups() -> None:
    ours = yaml.safe_load(render.DOCUMENTATION)["options"]
    theirs = yaml.safe_load(builtin_template.DOCUMENTATION)["options"]
    still_used = {name for name, spec in theirs.items() if "deprecated" not in spec}
    assert set(ours) == still_used
    for name in still_used - {"_terms"}:
        assert ours[name].get("default") == theirs[name].get("default"), name
