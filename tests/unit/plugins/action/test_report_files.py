"""gpufleet.node.report_files, run by ansible-playbook on the controller (it is an action plugin: no module run)."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]


def play(tmp_path, files, check=False, dest=None):
    playbook = tmp_path / "write.yml"
    playbook.write_text(json.dumps([{
        "hosts": "localhost", "gather_facts": False,
        "tasks": [{"name": "write", "gpufleet.node.report_files": {"dest": str(dest or tmp_path / "reports"), "files": files},
                   "register": "written"},
                  {"name": "show", "ansible.builtin.debug": {"var": "written"}}],
    }]))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=str(REPO / ".build" / "collections"))
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook)]
    completed = subprocess.run(argv + (["--check"] if check else []), cwd=REPO, env=env, capture_output=True, text=True, check=False)
    output = json.loads(completed.stdout)
    return output["plays"][0]["tasks"][0]["hosts"]["localhost"], output["stats"]["localhost"]


def test_it_writes_each_file_with_its_mode_and_a_rerun_changes_nothing(tmp_path):
    files = {"report.json": '{"a": 1}\n', "report.md": "# Report\n"}
    result, stats = play(tmp_path, files)
    reports = tmp_path / "reports"
    assert result["changed"] is True and stats["changed"] == 1
    assert (reports / "report.json").read_text() == '{"a": 1}\n' and (reports / "report.md").read_text() == "# Report\n"
    assert stat.S_IMODE((reports / "report.md").stat().st_mode) == 0o640
    assert stat.S_IMODE(reports.stat().st_mode) == 0o750
    again, stats = play(tmp_path, files)
    assert again["changed"] is False and again["changed_files"] == [] and stats["changed"] == 0
    changed = play(tmp_path, dict(files, **{"report.md": "# Report 2\n"}))[0]
    assert changed["changed_files"] == ["report.md"] and (reports / "report.md").read_text() == "# Report 2\n"


def test_check_mode_writes_nothing(tmp_path):
    result = play(tmp_path, {"report.md": "x\n"}, check=True)[0]
    assert result["changed"] is True and result["changed_files"] == ["report.md"]
    assert not (tmp_path / "reports").exists()


def test_a_file_name_with_a_directory_is_refused(tmp_path):
    result, stats = play(tmp_path, {"../escape.md": "x\n", "ok.md": "y\n"})
    assert result["failed"] is True and stats["failures"] == 1
    assert result["msg"] == "files: ../escape.md must be plain file names inside dest"
    assert not (tmp_path / "escape.md").exists() and not (tmp_path / "reports").exists()
