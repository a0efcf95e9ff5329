"""Simulated GPU profiles for lab nodes (the GPU + driver boundary is SIMULATED).

Profiles are data files of the simulated GPU host kit, ``lab/gpusim/profiles/<name>.{yml,yaml,json}``
(``GPUFLEET_LAB_GPU_PROFILES`` may name another directory). A node gets its profile twice:

- the kit's own install task file (``lab/gpusim/install.yml``, run with ansible-playbook over the
  docker connection) lays the fake host tree under ``/opt/gpusim/root`` and the ``nvidia-smi``
  stand-in, exactly as molecule scenarios do;
- ``/opt/gpusim/profile.json``: the profile itself, installed by the kit; the ``nvidia-smi``
  stand-in and the simulated device plugin both read it (without the kit, the lab writes only
  the profile's GPU list there).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet_lab import nvidia_builds
from gpufleet_lab.common import REPO_ROOT, put_file
from gpufleet_lab.proc import LabError, log, run

sys.path.insert(0, str(REPO_ROOT / "lab" / "deviceplugin"))
sys.path.insert(0, str(REPO_ROOT / "lab" / "gpusim"))
import gpusim  # noqa: E402
import simdevices  # noqa: E402

GPUSIM_DIR = REPO_ROOT / "lab" / "gpusim"
NODE_PROFILE_PATH = "/opt/gpusim/profile.json"
SUFFIXES = (".yml", ".yaml", ".json")


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    gpus: tuple[simdevices.Gpu, ...]


def profiles_dir() -> Path:
    return Path(os.environ.get("GPUFLEET_LAB_GPU_PROFILES", str(GPUSIM_DIR / "profiles")))


def available_profiles(directory: Path | None = None) -> list[str]:
    directory = profiles_dir() if directory is None else directory
    if not directory.is_dir():
        return []
    return sorted({p.stem for p in directory.iterdir() if p.suffix in SUFFIXES})


def load_data(path: Path) -> Any:
    text = path.read_text()
    if path.suffix == ".json":
        return json.loads(text)
    import yaml

    return yaml.safe_load(text)


def find_profile(name: str, directory: Path | None = None) -> Profile:
    directory = profiles_dir() if directory is None else directory
    for suffix in SUFFIXES:
        path = directory / f"{name}{suffix}"
        if path.is_file():
            try:
                gpus = simdevices.gpus_from_profile_data(load_data(path), str(path))
            except simdevices.SimPluginError as error:
                raise LabError(str(error)) from None
            return Profile(name, path, tuple(gpus))
    choices = ", ".join(available_profiles(directory)) or f"none found in {directory}"
    raise LabError(f"gpu_profile={name!r} is not a simulated GPU profile: choose one of {choices}")


def nvidia_refusal(profile: Profile, userspace: str) -> str | None:
    """None where NVIDIA's software can run on the node's SIMULATED GPUs (NVIDIA's mock NVML in the driver library's
    place): its toolkit's runtime and its device plugin. Otherwise why the node keeps the stand-ins."""
    if userspace != "host":
        return "the node's user space is the profile's recordings, not the driver packages"
    return gpusim.mock_profile_refusal(load_data(profile.path))


def install_playbook(profile: str, task_file: Path, userspace: str = "host") -> str:
    """A one-play playbook running the kit's install task file for ``profile``."""
    play = [{
        "name": "Install the simulated GPU host",
        "hosts": "all",
        "gather_facts": False,
        "tasks": [{
            "name": "Lay the simulated GPU host tree",
            "ansible.builtin.include_tasks": str(task_file),
            # host: the simulated host's user space is the node's real driver packages (none until installed)
            "vars": {"gpusim_profile": profile, "gpusim_userspace": userspace},
        }],
    }]
    return "---\n" + json.dumps(play, indent=2) + "\n"


def _ansible_playbook() -> str:
    venv = REPO_ROOT / ".venv" / "bin" / "ansible-playbook"
    if venv.is_file():
        return str(venv)
    found = shutil.which("ansible-playbook")
    if not found:
        raise LabError("ansible-playbook not found: create the virtualenv (.venv) first")
    return found


def install(container: str, profile: Profile, userspace: str = "host") -> None:
    """Install the simulated GPU host of ``profile`` into the node container."""
    task_file = GPUSIM_DIR / "install.yml"
    if userspace == "host":
        nvidia_builds.ensure_mock_nvml()  # the host user space's real nvidia-smi runs on it
    if task_file.is_file():
        with tempfile.TemporaryDirectory(prefix="gpufleet-lab-gpusim-") as tmp:
            playbook = Path(tmp) / "gpusim.yml"
            playbook.write_text(install_playbook(profile.name, task_file, userspace))
            env = dict(os.environ, MOLECULE_PROJECT_DIRECTORY=str(REPO_ROOT), ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"))
            argv = [_ansible_playbook(), "-i", f"{container},", "-e", "ansible_connection=docker",
                    "-e", "ansible_python_interpreter=/usr/bin/python3", str(playbook)]
            result = run(argv, env=env, check=False)
            if result.returncode != 0:
                raise LabError(f"installing simulated GPU profile {profile.name} into {container} failed:\n"
                               f"{result.stdout[-3000:]}\n{result.stderr[-2000:]}")
    else:
        log(f"{task_file} not found: writing only the GPU list of profile {profile.name}")
        put_file(container, NODE_PROFILE_PATH, simdevices.gpus_to_json(profile.gpus) + "\n", 0o644)
    # The kit installs the whole profile at the same path (nvidia-smi stand-in and plugin read it).
    run(["docker", "exec", container, "test", "-s", NODE_PROFILE_PATH], quiet=True)
