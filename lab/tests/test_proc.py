"""proc.exclusive and proc.host_apt: one holder at a time, as `make test`'s lanes need for the shared cache and apt."""
from __future__ import annotations

import fcntl
import threading
from pathlib import Path

from gpufleet_lab import proc
from gpufleet_lab.proc import exclusive


def test_a_second_holder_waits_for_the_first(tmp_path: Path) -> None:
    lock = tmp_path / "cache" / ".lock"
    acquired = threading.Event()

    def second() -> None:
        with exclusive(lock):
            acquired.set()

    with exclusive(lock):
        waiter = threading.Thread(target=second)
        waiter.start()
        assert not acquired.wait(0.3)
    assert acquired.wait(5)
    waiter.join(5)


def test_host_apt_runs_apt_get_under_the_host_apt_lock(tmp_path: Path, monkeypatch) -> None:
    lock = tmp_path / "host-apt.lock"
    monkeypatch.setattr(proc, "HOST_APT_LOCK", lock)
    seen = []

    def fake_run(argv, **kwargs):
        with lock.open("a") as handle:  # held by host_apt while apt-get runs: a second taker cannot have it
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen.append("lock was free")
            except BlockingIOError:
                seen.append("lock held")
        seen.append((argv, kwargs["env"]["DEBIAN_FRONTEND"], kwargs["capture"]))
        return "done"

    monkeypatch.setattr(proc, "run", fake_run)
    assert proc.host_apt("install", "-y", "golang-go", capture=False) == "done"
    assert seen == ["lock held", (["apt-get", "install", "-y", "golang-go"], "noninteractive", False)]
