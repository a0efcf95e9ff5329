"""The lab's one process helper: run commands with clear errors, wait for conditions and for each other, log steps."""
from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence, TypeVar

T = TypeVar("T")


class LabError(RuntimeError):
    """A lab step failed; the message says which and why."""


def log(message: str) -> None:
    print(f"labctl: {message}", file=sys.stderr, flush=True)


def run(
    argv: Sequence[str],
    *,
    check: bool = True,
    capture: bool = True,
    input_text: str | None = None,
    input_bytes: bytes | None = None,
    quiet: bool = False,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command without a shell and raise LabError naming it when it fails.

    With ``capture`` (the default) its output is returned as text; without, it goes to the terminal
    (long builds show their progress)."""
    if not quiet:
        log("+ " + " ".join(argv))
    data: bytes | None = input_bytes if input_bytes is not None else (
        input_text.encode() if input_text is not None else None
    )
    raw = subprocess.run(list(argv), input=data, capture_output=capture, check=False, timeout=timeout,
                         env=None if env is None else dict(env), cwd=cwd)
    stdout = raw.stdout.decode(errors="replace") if capture else ""
    stderr = raw.stderr.decode(errors="replace") if capture else ""
    result = subprocess.CompletedProcess(raw.args, raw.returncode, stdout, stderr)
    if check and result.returncode != 0:
        detail = (stderr.strip() or stdout.strip())[-3000:]
        raise LabError(f"command failed (exit {result.returncode}): {' '.join(argv)}\n{detail}".rstrip())
    return result


def apt_env() -> dict[str, str]:
    """The environment of a non-interactive apt-get."""
    return dict(os.environ, DEBIAN_FRONTEND="noninteractive")


# The lock of every apt-get the lab runs on this machine (not in its containers).
HOST_APT_LOCK = Path("/var/cache/gpufleet/host-apt.lock")


def host_apt(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    """``apt-get`` on this machine, one lab process at a time.

    `make test` builds the Kubernetes binaries while the images and the package mirror are built, and a second
    apt-get fails at once on the lock of dpkg or of the package lists instead of waiting for the first."""
    with exclusive(HOST_APT_LOCK):
        return run(["apt-get", *args], env=apt_env(), **kwargs)


def succeeds(argv: Sequence[str]) -> bool:
    return subprocess.run(list(argv), capture_output=True, check=False).returncode == 0


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, interval: float = 1.0) -> T:
    """Call ``probe`` until it returns something other than None/False; raise after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise LabError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


@contextlib.contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Hold ``lock`` (a file, created if missing) against every other lab process: `make test`'s lanes build
    the same cache entries at once when the cache is cold."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
