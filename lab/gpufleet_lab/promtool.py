"""promtool, Prometheus's rule checker and block builder, and the Prometheus server, from Debian's `prometheus`
package, cached by the package's version.

Only the binaries are unpacked (`dpkg-deb -x`): installing the package would start a Prometheus server as a service.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from gpufleet_lab.proc import LabError, host_apt, run

CACHE_DIR = Path("/var/cache/gpufleet/promtool")
PACKAGE = "prometheus"


def _apt(*args: str, cwd: Path | None = None) -> str:
    return host_apt(*args, cwd=cwd, quiet=True).stdout


def candidate_version() -> str:
    """The version of `prometheus` apt would install; the lists are refreshed once when they know none."""
    for attempt in range(2):
        policy = run(["apt-cache", "policy", PACKAGE], check=False, quiet=True).stdout
        candidate = next((line.split(":", 1)[1].strip() for line in policy.splitlines()
                          if line.strip().startswith("Candidate:")), "(none)")
        if candidate != "(none)":
            return candidate
        if attempt == 0:
            _apt("update", "-qq")
    raise LabError(f"apt offers no version of {PACKAGE} (Debian's main archive carries it)")


BINARIES = ("promtool", "prometheus")


def ensure(name: str = "promtool") -> Path:
    """The path of a cached binary of the package's candidate version (promtool or prometheus), both unpacked first
    when one is missing."""
    version = candidate_version()
    directory = CACHE_DIR / version.replace(":", "_")
    if all((directory / binary).is_file() for binary in BINARIES):
        return directory / name
    with tempfile.TemporaryDirectory() as workdir:
        work = Path(workdir)
        _apt("download", f"{PACKAGE}={version}", cwd=work)
        (deb,) = work.glob(f"{PACKAGE}_*.deb")
        run(["dpkg-deb", "-x", str(deb), str(work / "root")], quiet=True)
        directory.mkdir(parents=True, exist_ok=True)
        for binary in BINARIES:
            shutil.copy2(work / "root" / "usr" / "bin" / binary, directory / binary)
    return directory / name
