"""Run `ansible-test sanity` on the checkout without network access beyond the package index.

ansible-test needs the collection under a path ending in ansible_collections/gpufleet/node (it resolves
symbolic links), and it bootstraps pip in its own virtualenvs with a script it would download from
a host that this lab cannot reach. This runner copies the checkout's files (those git tracks or
would track) into such a path in a temporary tree and provides the bootstrap script locally: it installs pip with ensurepip and then runs `pip install` with the
arguments ansible-test gives it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

from ansible_test._internal.python_requirements import get_venv_packages

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import artifact  # noqa: E402  tools/artifact.py: the checkout's files, as git sees them
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"

BOOTSTRAP = '''\
"""Local stand-in for get-pip.py used by ansible-test: ensurepip, then pip install ARGS."""
import ensurepip
import os
import shutil
import subprocess
import sys

ensurepip.bootstrap(upgrade=True)
# ensurepip leaves PIP_CONFIG_FILE=/dev/null behind, which would hide the machine's pip configuration.
os.environ.pop("PIP_CONFIG_FILE", None)
args = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *args]))
'''


def install_bootstrap_script() -> None:
    pip_version = get_venv_packages(SimpleNamespace(version=PYTHON))["pip"]
    path = Path.home() / ".ansible/test/cache" / f"get_pip_{pip_version.replace('.', '_')}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != BOOTSTRAP:
        path.write_text(BOOTSTRAP)


def main(argv: list[str]) -> int:
    install_bootstrap_script()
    with tempfile.TemporaryDirectory(prefix="gpufleet-sanity-") as tmp:
        collection = Path(tmp) / "ansible_collections/gpufleet/node"
        artifact.snapshot(REPO, collection)
        env = dict(os.environ, PWD=str(collection))
        ansible_test = Path(sys.executable).with_name("ansible-test")
        cmd = [str(ansible_test), "sanity", "--requirements", "--python", PYTHON, "--color", "no", *argv]
        print("+ " + " ".join(cmd), flush=True)
        return subprocess.call(cmd, cwd=collection, env=env)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
