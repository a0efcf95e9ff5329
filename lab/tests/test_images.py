"""images.ensure_all: every release built at once, each result in the order asked."""
from __future__ import annotations

import threading

from gpufleet_lab import images


def test_every_release_is_built_at_once(monkeypatch) -> None:
    started = threading.Barrier(2, timeout=5)  # both builds must be under way together, or this times out

    def fake_ensure(release: str) -> str:
        started.wait()
        return f"gpufleet-lab/node:{release}"

    monkeypatch.setattr(images, "ensure", fake_ensure)
    assert images.ensure_all(["bookworm", "sid"]) == ["gpufleet-lab/node:bookworm", "gpufleet-lab/node:sid"]


def test_nothing_asked_builds_nothing(monkeypatch) -> None:
    monkeypatch.setattr(images, "ensure", lambda release: 1 / 0)
    assert images.ensure_all([]) == []
