"""Tests of the containerd configuration checker shipped by the containerd_nvidia role.

A fake `containerd` prints a recorded-shape `config dump` so every branch of the checker runs
without containerd; the molecule scenarios run the checker against the real containerd 1.6 and 2.1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CHECKER = Path(__file__).resolve().parents[2] / "roles" / "containerd_nvidia" / "files" / "containerd-config-check.py"

DUMP_V2 = """version = 2
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "{default}"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
          privileged_without_host_devices = false
          runtime_type = "io.containerd.runc.v2"
          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
            BinaryName = "/usr/bin/nvidia-container-runtime"
            SystemdCgroup = {cgroup}
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
          runtime_type = "io.containerd.runc.v2"
"""

DUMP_V3 = """version = 3
[plugins]
  [plugins.'io.containerd.cri.v1.runtime']
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = '{default}'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes]
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]
          runtime_type = 'io.containerd.runc.v2'
          [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia.options]
            BinaryName = '/usr/bin/nvidia-container-runtime'
            SystemdCgroup = {cgroup}
"""


def fake_containerd(tmp_path: Path, dump: str, rc: int = 0) -> Path:
    """Write a fake containerd that prints `dump` for `config dump` and exits with `rc`."""
    (tmp_path / "dump.toml").write_text(dump)
    script = tmp_path / "containerd"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$3 $4" != "config dump" ]; then echo "unexpected: $*" >&2; exit 9; fi\n'
        f'if [ {rc} -ne 0 ]; then echo "containerd: (3, 1): Can\'t convert yes(string) to bool" >&2; exit {rc}; fi\n'
        f'cat "{tmp_path / "dump.toml"}"\n'
    )
    script.chmod(0o755)
    return script


def run(containerd: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [sys.executable, str(CHECKER), "--containerd", str(containerd), "--config", "/candidate.toml",
            "--runtime-name", "nvidia", "--binary-name", "/usr/bin/nvidia-container-runtime", *extra]
    return subprocess.run(args, check=False, capture_output=True, text=True)


@pytest.mark.parametrize(("dump", "version"), [(DUMP_V2, 2), (DUMP_V3, 3)])
def test_accepts_nvidia_default_runtime(tmp_path, dump, version):
    result = run(fake_containerd(tmp_path, dump.format(default="nvidia", cgroup="true")),
                 "--default-runtime", "nvidia", "--systemd-cgroup", "true", "--config-version", str(version))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["config_version"] == version
    assert summary["runtimes"]["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"


def test_rejects_wrong_default_runtime(tmp_path):
    result = run(fake_containerd(tmp_path, DUMP_V2.format(default="runc", cgroup="true")), "--default-runtime", "nvidia")
    assert result.returncode == 1
    assert "default_runtime_name is 'runc', expected 'nvidia'" in result.stderr


def test_rejects_lost_systemd_cgroup(tmp_path):
    result = run(fake_containerd(tmp_path, DUMP_V3.format(default="runc", cgroup="false")),
                 "--default-runtime", "runc", "--systemd-cgroup", "true")
    assert result.returncode == 1
    assert "SystemdCgroup False, expected True" in result.stderr


def test_rejects_v2_layout_on_containerd_2(tmp_path):
    # a version-2 style section in a version-3 dump: the runtime is not where containerd 2.x looks
    dump = DUMP_V2.format(default="nvidia", cgroup="true").replace("version = 2", "version = 3")
    result = run(fake_containerd(tmp_path, dump), "--default-runtime", "nvidia", "--config-version", "3")
    assert result.returncode == 1
    assert "no runtime 'nvidia' in plugins.'io.containerd.cri.v1.runtime'" in result.stderr


def test_reports_containerd_load_failure(tmp_path):
    result = run(fake_containerd(tmp_path, "", rc=1), "--default-runtime", "nvidia")
    assert result.returncode == 2
    assert "containerd could not load /candidate.toml" in result.stderr
    assert "Can't convert yes(string) to bool" in result.stderr


def test_rejects_bad_boolean_argument(tmp_path):
    result = run(fake_containerd(tmp_path, DUMP_V2), "--default-runtime", "nvidia", "--systemd-cgroup", "maybe")
    assert result.returncode == 2
    assert "expected true or false" in result.stderr
