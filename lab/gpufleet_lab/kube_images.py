"""Images of the Kubernetes lab, built locally (no registry) and cached by content.

- ``gpufleet-lab/kube-node``: the node base image plus Debian's containerd, iptables and
  containernetworking-plugins (the kubelet binary is bind-mounted from the build cache).
- ``gpufleet-lab/pause:3.4``: ``pause`` compiled from the Kubernetes source (build step).
- ``gpufleet-lab/device-plugin-sim:0.1.0``: the simulated NVIDIA device plugin (lab/deviceplugin), with
  the real plugin image's ``NVIDIA_VISIBLE_DEVICES=all`` so that the NVIDIA runtime injects its GPUs, run under
  the real plugin's process name, and NVIDIA's own ``config-manager`` (v0.20.0, ``make nvidia-builds``) beside it
  for the collection's named configurations.
- ``gpufleet-lab/gpu-smoke:0.1.0``: that image with ``sh -c`` as entrypoint, for smoke-test pods. It has no
  ``nvidia-smi`` of its own: a pod sees one only when the NVIDIA runtime injected GPUs.

The last three are saved together (``docker save``, docker-archive format that
``ctr images import`` reads) and imported into every node's containerd.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import uuid
from pathlib import Path
from typing import Iterable, Sequence

from gpufleet_lab import binaries
from gpufleet_lab.common import REPO_ROOT, LabSettings
from gpufleet_lab.proc import LabError, log, run, succeeds

IMAGE_CACHE = Path("/var/cache/gpufleet/kubelab-images")
NODE_REPOSITORY = "gpufleet-lab/kube-node"
NODE_PACKAGES: tuple[str, ...] = ("containerd", "iptables", "containernetworking-plugins", "procps", "openssh-server")
# sshd stays off, without host keys, until `labctl kube node ssh` turns it on with the node's own key (ssh.py).
NODE_SSH_OFF = "; rm -f /etc/ssh/ssh_host_*; systemctl disable -q ssh.service"
PAUSE_IMAGE = "gpufleet-lab/pause:3.4"
DEVICE_PLUGIN_IMAGE = "gpufleet-lab/device-plugin-sim:0.1.0"
SMOKE_IMAGE = "gpufleet-lab/gpu-smoke:0.1.0"
NVIDIA_PLUGIN_REPOSITORY = "gpufleet-lab/k8s-device-plugin"
# The device plugin the lab's nodes run under the reference the lab inventory gives gpu_node_join: NVIDIA's, the
# collection's default version (the SIMULATED plugin on nodes NVIDIA's code cannot serve: node.py).
LAB_PLUGIN_VERSION = "0.20.0"
LAB_PLUGIN_IMAGE = f"{NVIDIA_PLUGIN_REPOSITORY}:v{LAB_PLUGIN_VERSION}"
NVIDIA_PLUGIN_PROGRAMS = ("nvidia-device-plugin", "config-manager")
# As NVIDIA's deployments/container/Dockerfile (v0.17.1 and v0.20.0) sets them.
NVIDIA_PLUGIN_CHANGES = ['ENV NVIDIA_DISABLE_REQUIRE=true', 'ENV NVIDIA_VISIBLE_DEVICES=all',
                         'ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility', 'ENTRYPOINT ["nvidia-device-plugin"]', 'CMD []']
PLUGIN_PACKAGES: tuple[str, ...] = (
    "python3-grpcio", "python3-protobuf", "python3-grpc-tools", "python3-pkg-resources", "python3-yaml",
)
PLUGIN_DIR = "/opt/gpusim-device-plugin"
# NVIDIA's config-manager signals the process whose argv[0] is nvidia-device-plugin (cmd/config-manager).
PLUGIN_LAUNCHER = ("#!/bin/bash\n# The SIMULATED device plugin under the real plugin's process name.\n"
                   f'exec -a nvidia-device-plugin python3 {PLUGIN_DIR}/plugin.py "$@"\n')
SIM_CONFIG_MANAGER_VERSION = "0.20.0"
DEVICE_PLUGIN_SRC = REPO_ROOT / "lab" / "deviceplugin"
# As NVIDIA's plugin image (deployments/container/Dockerfile): the runtime gives the plugin every GPU.
PLUGIN_ENV: tuple[str, ...] = (
    "NVIDIA_DISABLE_REQUIRE=true", "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
)
SMOKE_COMMAND = 'echo "NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES"; nvidia-smi -L'
LABEL = "gpufleet.lab.kube.key"


def content_key(parts: Iterable[bytes | str]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()[:12]


def strip_gogo(proto: str) -> str:
    """The kubelet's api.proto without gogoproto (Go-only code-generation options).

    Removes the gogo import, file options ``option (gogoproto.*)`` and field options
    ``[(gogoproto.*) = ...]``; the wire format (messages, fields, services) is unchanged.
    """
    out: list[str] = []
    for line in proto.splitlines():
        if re.match(r'^\s*import\s+"github.com/gogo/protobuf/gogoproto/gogo.proto";', line):
            continue
        if re.match(r"^\s*option\s+\(gogoproto\.[^)]*\)\s*=", line):
            continue
        line = re.sub(r"\s*\[\s*\(gogoproto\.[^\]]*\]", "", line)
        out.append(line)
    return "\n".join(out) + "\n"


def _image_id(ref: str) -> str | None:
    result = run(["docker", "image", "inspect", "-f", "{{.Id}}", ref], check=False, quiet=True)
    return result.stdout.strip() if result.returncode == 0 else None


def _has_key(ref: str, key: str) -> bool:
    result = run(["docker", "image", "inspect", "-f", "{{index .Config.Labels \"" + LABEL + "\"}}", ref],
                 check=False, quiet=True)
    return result.returncode == 0 and result.stdout.strip() == key


def _build_by_commit(
    base: str, ref: str, key: str, script: str, files: dict[str, bytes], changes: Sequence[str],
) -> None:
    """Run ``script`` in a container of ``base`` (after copying ``files`` in), commit as ``ref``."""
    name = f"gpufleet-lab-build-{uuid.uuid4().hex[:8]}"
    entrypoint = run(["docker", "image", "inspect", "-f", "{{json .Config.Entrypoint}}", base], quiet=True).stdout
    if entrypoint.strip() in ("null", "[]", ""):
        run(["docker", "run", "-d", "--name", name, base, "/bin/sleep", "infinity"])
    else:  # the committed image gets its own ENTRYPOINT from ``changes``
        run(["docker", "run", "-d", "--name", name, "--entrypoint", "/bin/sleep", base, "infinity"])
    try:
        if files:
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w") as archive:
                for path, data in files.items():
                    info = tarfile.TarInfo(path.lstrip("/"))
                    info.size = len(data)
                    info.mode = 0o755 if data.startswith(b"#!") else 0o644
                    archive.addfile(info, io.BytesIO(data))
            run(["docker", "cp", "-", f"{name}:/"], input_bytes=buffer.getvalue())
        run(["docker", "exec", name, "sh", "-ec", script])
        argv = ["docker", "commit"]
        for change in [*changes, f"LABEL {LABEL}={key}"]:
            argv += ["--change", change]
        run([*argv, name, ref])
    finally:
        run(["docker", "rm", "-f", name], check=False, quiet=True)


APT_SCRIPT = (
    "export DEBIAN_FRONTEND=noninteractive; apt-get update -q; "
    "apt-get install -y -q --no-install-recommends {packages}; apt-get clean"
)


def ensure_node_image(settings: LabSettings) -> str:
    base_id = _image_id(settings.base_image)
    if base_id is None:
        raise LabError(f"base image {settings.base_image} is missing: build it first (make images)")
    script = APT_SCRIPT.format(packages=" ".join(NODE_PACKAGES)) + NODE_SSH_OFF
    key = content_key([base_id, script, "node-3"])
    ref = f"{NODE_REPOSITORY}:bookworm-{key}"
    if not _has_key(ref, key):
        log(f"building {ref}")
        _build_by_commit(settings.base_image, ref, key, script, {}, ['CMD ["/lib/systemd/systemd"]'])
    return ref


def _pause_image(bin_dir: Path) -> str:
    pause = (bin_dir / binaries.PAUSE).read_bytes()
    key = content_key([pause])
    if not _has_key(PAUSE_IMAGE, key):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            info = tarfile.TarInfo("pause")
            info.size = len(pause)
            info.mode = 0o755
            archive.addfile(info, io.BytesIO(pause))
        run(["docker", "import", "--change", 'ENTRYPOINT ["/pause"]', "--change", f"LABEL {LABEL}={key}",
             "-", PAUSE_IMAGE], input_bytes=buffer.getvalue())
    return key


def _source_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())
            if p.is_file() and p.suffix in (".py", ".sh", "") and not p.name.startswith(".")}


def _plugin_image(settings: LabSettings, bin_dir: Path) -> str:
    proto_path = binaries.source_dir(bin_dir) / binaries.DEVICE_PLUGIN_PROTO
    if not proto_path.is_file():
        raise LabError(f"{proto_path} is missing: the binaries build unpacks the source tree")
    proto = strip_gogo(proto_path.read_text())
    sources = _source_files(DEVICE_PLUGIN_SRC)
    config_manager = nvidia_program(SIM_CONFIG_MANAGER_VERSION, "config-manager")
    base_id = _image_id(settings.base_image) or ""
    key = content_key([base_id, proto, " ".join(PLUGIN_PACKAGES), *PLUGIN_ENV, *sources.keys(), *sources.values(),
                       PLUGIN_LAUNCHER, config_manager])
    if not _has_key(DEVICE_PLUGIN_IMAGE, key):
        log(f"building {DEVICE_PLUGIN_IMAGE}")
        files = {f"{PLUGIN_DIR}/{name}": data for name, data in sources.items()}
        files[f"{PLUGIN_DIR}/api.proto"] = proto.encode()
        files["/usr/bin/nvidia-device-plugin"] = PLUGIN_LAUNCHER.encode()
        files["/usr/bin/config-manager"] = config_manager
        script = APT_SCRIPT.format(packages=" ".join(PLUGIN_PACKAGES)) + (
            f"; cd {PLUGIN_DIR} && python3 -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. api.proto"
            f" && python3 -c 'import sys; sys.path.insert(0, \"{PLUGIN_DIR}\"); import api_pb2, api_pb2_grpc'"
            " && chmod 0755 /usr/bin/nvidia-device-plugin /usr/bin/config-manager"
        )
        _build_by_commit(settings.base_image, DEVICE_PLUGIN_IMAGE, key, script, files, [
            'ENTRYPOINT ["nvidia-device-plugin"]', "CMD []", f"WORKDIR {PLUGIN_DIR}",
            *(f"ENV {variable}" for variable in PLUGIN_ENV),
        ])
    return key


def nvidia_program(version: str, name: str) -> bytes:
    """A program of NVIDIA's device plugin ``version``, as ``make nvidia-builds`` built it from NVIDIA's source."""
    path = REPO_ROOT / ".build" / "nvidia" / f"device-plugin-{version}" / "bin" / name
    if not path.is_file():
        raise LabError(f"NVIDIA's device plugin {version} is not built ({path} is missing): run make nvidia-builds")
    return path.read_bytes()


def nvidia_plugin_image(settings: LabSettings, version: str) -> str:
    """NVIDIA's device plugin ``version`` (built from its source by ``make nvidia-builds``) as an image laid out as
    NVIDIA's own: its programs in /usr/bin, NVIDIA's environment and entrypoint, on the lab's Debian base instead of
    NVIDIA's distroless one (both give the programs glibc; the driver's libraries come from the container runtime)."""
    programs = {f"/usr/bin/{name}": nvidia_program(version, name) for name in NVIDIA_PLUGIN_PROGRAMS}
    ref = f"{NVIDIA_PLUGIN_REPOSITORY}:v{version}"
    key = content_key([_image_id(settings.base_image) or "", *NVIDIA_PLUGIN_CHANGES, *programs, *programs.values()])
    if not _has_key(ref, key):
        log(f"building {ref}")
        _build_by_commit(settings.base_image, ref, key, "chmod 0755 " + " ".join(programs), programs,
                         NVIDIA_PLUGIN_CHANGES)
    return ref


def nvidia_plugin_archive(settings: LabSettings, version: str) -> Path:
    """NVIDIA's device plugin image ``version`` saved for ``ctr images import``, once per image."""
    ref = nvidia_plugin_image(settings, version)
    image_id = (_image_id(ref) or "").split(":")[-1]
    archive = IMAGE_CACHE / f"nvidia-device-plugin-{version}-{image_id[:12]}.tar"
    if not archive.is_file():
        IMAGE_CACHE.mkdir(parents=True, exist_ok=True)
        for old in IMAGE_CACHE.glob(f"nvidia-device-plugin-{version}-*.tar"):
            old.unlink()
        partial = archive.with_suffix(".partial")
        run(["docker", "save", "-o", str(partial), ref])
        partial.rename(archive)
    return archive


def smoke_image_changes() -> list[str]:
    """``sh -c`` with a default command listing what the runtime injected (pods may give their own)."""
    return ['ENTRYPOINT ["/bin/sh", "-c"]', f"CMD {json.dumps([SMOKE_COMMAND])}", "WORKDIR /"]


def _smoke_image(plugin_key: str) -> str:
    changes = smoke_image_changes()
    key = content_key([plugin_key, *changes])
    if not _has_key(SMOKE_IMAGE, key):
        log(f"building {SMOKE_IMAGE}")
        script = "if command -v nvidia-smi; then echo 'the smoke image must have no nvidia-smi of its own' >&2; exit 1; fi"
        _build_by_commit(DEVICE_PLUGIN_IMAGE, SMOKE_IMAGE, key, script, {}, changes)
    return key


def ensure_pod_images(settings: LabSettings) -> Path:
    """Build (or reuse) pause, plugin and smoke images; return the saved archive to import."""
    bin_dir = binaries.cached_bin_dir()
    keys = [_pause_image(bin_dir)]
    plugin_key = _plugin_image(settings, bin_dir)
    keys += [plugin_key, _smoke_image(plugin_key)]
    archive = IMAGE_CACHE / f"pod-images-{content_key(keys)}.tar"
    if not archive.is_file():
        IMAGE_CACHE.mkdir(parents=True, exist_ok=True)
        for old in IMAGE_CACHE.glob("pod-images-*.tar"):
            old.unlink()
        partial = archive.with_suffix(".partial")
        run(["docker", "save", "-o", str(partial), PAUSE_IMAGE, DEVICE_PLUGIN_IMAGE, SMOKE_IMAGE])
        partial.rename(archive)
    return archive


def image_exists(ref: str) -> bool:
    return succeeds(["docker", "image", "inspect", ref])
