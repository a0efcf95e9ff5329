"""plugins/module_utils/_run.py on real commands: what execute returns (also for a file that cannot be executed), and
how CommandRunner runs a command and reports one that is missing or runs past its time limit."""
from __future__ import annotations

import shutil
import stat

from ansible_collections.gpufleet.node.plugins.module_utils import _run


class Module:
    """The one AnsibleModule method CommandRunner uses."""

    @staticmethod
    def get_bin_path(name, required=False):
        return shutil.which(name)


def test_execute_returns_the_exit_status_and_both_streams_as_text():
    rc, stdout, stderr = _run.execute(["sh", "-c", "printf 'out \\342\\234\\223'; printf err >&2; exit 3"], {})
    assert (rc, stdout, stderr) == (3, "out \u2713", "err")


def test_execute_adds_the_environment_to_the_inherited_one(monkeypatch):
    monkeypatch.setenv("GPUFLEET_TEST_INHERITED", "kept")
    assert _run.execute(["sh", "-c", 'echo "$GPUFLEET_TEST_INHERITED $LC_ALL"'], {"LC_ALL": "C"}) == (0, "kept C\n", "")


def test_execute_gives_the_command_no_input():
    # stdin is /dev/null: a command reading it ends at once instead of taking the module's own input
    assert _run.execute(["cat"], {}) == (0, "", "")


def test_execute_gives_the_command_the_data_as_its_input():
    assert _run.execute(["sh", "-c", "cat; echo"], {}, "libcuda1 hold\n") == (0, "libcuda1 hold\n\n", "")


def test_execute_reports_a_file_that_cannot_be_executed(tmp_path):
    script = tmp_path / "not-a-program"
    script.write_bytes(b"\x00\x01\x02")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    rc, stdout, stderr = _run.execute([str(script)], {})
    assert rc == 126 and stdout == "" and str(script) in stderr


def test_runner_reports_a_missing_command_without_running_it():
    result = _run.CommandRunner(Module()).run(["gpufleet-no-such-command", "--version"])
    assert result.not_found and result.rc == 127 and not result.ok
    assert result.argv == ["gpufleet-no-such-command", "--version"]


def test_runner_runs_in_the_c_locale_and_reports_the_real_argv():
    result = _run.CommandRunner(Module()).run(["sh", "-c", "echo $LC_ALL"])
    assert result.ok and result.stdout == "C\n"
    assert result.argv == [shutil.which("sh"), "-c", "echo $LC_ALL"]


def test_runner_stops_a_command_past_its_time_limit():
    result = _run.CommandRunner(Module(), timeout=1).run(["sleep", "30"])
    assert result.timed_out and not result.ok
