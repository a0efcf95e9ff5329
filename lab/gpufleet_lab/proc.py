"""Thin helpers to run commands with clear errors."""
from __future__ import annotations

import subprocess
import sys
from typing import Sequence


class LabError(RuntimeError):
    """A lab step failed; the message says which and why."""


def run(cmd: Sequence[str], *, check: bool = True, capture: bool = False, input_bytes: bytes | None = None,
        quiet: bool = False) -> subprocess.CompletedProcess:
    if not quiet:
        print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    result = subprocess.run(list(cmd), input=input_bytes, capture_output=capture, check=False)
    if check and result.returncode != 0:
        detail = result.stderr.decode(errors="replace").strip()[-2000:] if capture else ""
        raise LabError(f"command failed (exit {result.returncode}): {' '.join(cmd)}\n{detail}".rstrip())
    return result


def succeeds(cmd: Sequence[str]) -> bool:
    return subprocess.run(list(cmd), capture_output=True, check=False).returncode == 0
