"""Ansible controllers other than the checkout's virtualenv: another ansible-core on another Python, in a container.

ansible-core 2.20 and later need Python 3.12 or later on the controller. A controller image is the lab's Debian
trixie image (Python 3.13) with a virtualenv at ``/opt/ansible`` of ``tests/controllers/<name>.txt``, built once
per base image and requirements. ``run`` starts it as a second controller beside the host's: host network, the
host's Docker daemon (its socket and its docker CLI) and the checkout at its own path, so that scenarios reach the
lab's node containers and mounts exactly as from the host. ansible-test keeps its virtualenvs (pip installs them from
the package index) in a home directory cached per image.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Sequence

from gpufleet_lab import images
from gpufleet_lab.common import REPO_ROOT
from gpufleet_lab.proc import LabError, log

REPOSITORY = "gpufleet-lab/controller"
RELEASE = "trixie"
REQUIREMENTS_DIR = REPO_ROOT / "tests" / "controllers"
# git: the sanity runner copies the files git tracks; gpgv: a unit test checks the stand-ins' signatures.
PACKAGES = ("python3-venv", "git", "gpgv", "ca-certificates")
VENV = "/opt/ansible"
HOME_CACHE = Path("/var/cache/gpufleet/controller")
# pip in the build container trusts what the host trusts (a site's own CA in front of the package index included).
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
PIP_SETTINGS = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST")


def requirements(name: str) -> Path:
    path = REQUIREMENTS_DIR / f"{name}.txt"
    if not path.is_file():
        known = sorted(candidate.stem for candidate in REQUIREMENTS_DIR.glob("*.txt"))
        raise LabError(f"no controller {name!r}: {path} does not exist (known: {', '.join(known)})")
    return path


def _pip_options() -> list[str]:
    options = [arg for name in PIP_SETTINGS if os.environ.get(name) for arg in ("-e", f"{name}={os.environ[name]}")]
    if HOST_CA_BUNDLE.is_file():
        # Over the container's own bundle, for the pip of ansible-test's virtualenvs too, which gets no PIP_CERT.
        options += ["-v", f"{HOST_CA_BUNDLE}:{HOST_CA_BUNDLE}:ro", "-e", f"PIP_CERT={HOST_CA_BUNDLE}"]
    return options


def ensure(name: str) -> str:
    """The tag of controller ``name``'s image, built when no image has its key."""
    text = requirements(name).read_text()
    script = ("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
              f"{' '.join(PACKAGES)} >/dev/null && apt-get clean && python3 -m venv {VENV} "
              f"&& {VENV}/bin/pip install -q --disable-pip-version-check -r /dev/stdin && rm -rf /root/.cache")
    return images.derived(RELEASE, REPOSITORY, {"packages": PACKAGES, "requirements": text}, script,
                          tag_prefix=f"{name}-", options=("--network", "host", *_pip_options()), input_text=text)


def run_argv(tag: str, name: str, command: Sequence[str], cwd: Path, env: dict[str, str]) -> list[str]:
    """``docker run`` of ``command`` in controller ``tag``: the checkout, the Docker daemon and the host's network
    as the host's own controller has them."""
    docker_cli = shutil.which("docker")
    if docker_cli is None:
        raise LabError("the docker CLI is not on PATH (make docker)")
    home = HOME_CACHE / tag.rsplit(":", 1)[1]
    passed = [arg for key, value in sorted(env.items()) for arg in ("-e", f"{key}={value}")]
    # A run at a lower priority (make test's host lanes) keeps it inside the container too: the niceness of its
    # processes, and the CPU weight the lanes give their containers.
    weight = ["--cpu-shares", env["GPUFLEET_TEST_CPU_SHARES"]] if env.get("GPUFLEET_TEST_CPU_SHARES") else []
    niceness = os.nice(0)
    command = ["nice", "-n", str(niceness), *command] if niceness > 0 else list(command)
    return ["docker", "run", "--rm", "--network", "host", "--name", f"gpufleet-controller-{name}-{os.getpid()}",
            *weight, "-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", f"{docker_cli}:/usr/local/bin/docker:ro",
            "-v", f"{REPO_ROOT}:{REPO_ROOT}", "-v", "/var/cache/gpufleet:/var/cache/gpufleet",
            "-v", f"{home}:/root", "-w", str(cwd),
            "-e", f"PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", *_pip_options(),
            *passed, tag, *command]


PASSED_ENV_PREFIXES = ("ANSIBLE_", "GPUFLEET_", "MOLECULE_")
PASSED_ENV = ("PY_COLORS", "CI")


def passed_env(environ: dict[str, str]) -> dict[str, str]:
    """The settings of the host's run that the controller's commands read too."""
    return {key: value for key, value in environ.items()
            if key.startswith(PASSED_ENV_PREFIXES) or key in PASSED_ENV}


def run_command(name: str, command: Sequence[str]) -> int:
    """Run ``command`` in controller ``name`` (its image built first when needed); its exit status."""
    if not command:
        raise LabError("controller: no command given (labctl controller NAME -- COMMAND ...)")
    tag = ensure(name)
    (HOME_CACHE / tag.rsplit(":", 1)[1]).mkdir(parents=True, exist_ok=True)
    argv = run_argv(tag, name, command, Path.cwd(), passed_env(dict(os.environ)))
    log(f"controller {name} ({tag}): {' '.join(command)}")
    return subprocess.call(argv)
