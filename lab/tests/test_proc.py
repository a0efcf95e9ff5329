"""proc.exclusive: one holder at a time, as `make test`'s lanes need for the shared cache."""
from __future__ import annotations

import threading
from pathlib import Path

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
