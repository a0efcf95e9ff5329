"""Run `make test`'s stages in order, stop at the first failure, and end with a table of wall times.

Each stage is a make target (each molecule scenario its own stage), so the budget of every part is
visible in every CI log. The last line counts the stages: "stages: N passed, N failed".
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIRST_STAGES = ["venv", "collection", "images", "kube-binaries", "lint", "sanity", "units", "kubelab-test"]


def molecule_scenarios() -> list[str]:
    return sorted(path.parent.name for path in (REPO / "molecule").glob("*/molecule.yml"))


def run_stage(name: str, argv: list[str]) -> tuple[str, float, bool]:
    print(f"\n=== stage {name}: {' '.join(argv)}", flush=True)
    started = time.monotonic()
    ok = subprocess.run(argv, cwd=REPO, check=False).returncode == 0
    return name, time.monotonic() - started, ok


def table(results: list[tuple[str, float, bool]], skipped: list[str]) -> str:
    lines = ["", "| stage | result | wall time |", "|---|---|---|"]
    lines += [f"| {name} | {'passed' if ok else 'FAILED'} | {seconds / 60:.0f} min {seconds % 60:02.0f} s |"
              for name, seconds, ok in results]
    lines += [f"| {name} | not run | |" for name in skipped]
    total = sum(seconds for _name, seconds, _ok in results)
    lines.append(f"| total | | {total / 60:.0f} min {total % 60:02.0f} s |")
    return "\n".join(lines)


def main() -> int:
    stages = [(name, ["make", name]) for name in FIRST_STAGES]
    stages += [(f"molecule {s}", ["make", "molecule", f"SCENARIO={s}"]) for s in molecule_scenarios()]
    results: list[tuple[str, float, bool]] = []
    for position, (name, argv) in enumerate(stages):
        results.append(run_stage(name, argv))
        if not results[-1][2]:
            print(table(results, [n for n, _argv in stages[position + 1:]]))
            print(f"stages: {len(results) - 1} passed, 1 failed")
            return 1
    print(table(results, []))
    print(f"stages: {len(results)} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
