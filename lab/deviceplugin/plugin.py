"""SIMULATED NVIDIA device plugin for the gpufleet.node lab (kubelet device-plugin API v1beta1).

It speaks the real kubelet API (Registration.Register, ListAndWatch, Allocate, ...) over the
kubelet's unix sockets, but its GPUs come from the node's simulated GPU profile, not from NVML.
Like the real plugin it finds ``kubelet.sock`` only in the directory it is given (the pod's
``/var/lib/kubelet/device-plugins``, a hostPath of ``<kubelet root dir>/device-plugins``): with
a wrong hostPath there is no kubelet socket, so it never registers and the node shows no
``nvidia.com/gpu``. When the kubelet restarts (its socket is recreated and ours removed), it
serves and registers again.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from concurrent import futures
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402  Debian python3-grpcio
import api_pb2  # noqa: E402  generated from the kubelet's api.proto at image build
import api_pb2_grpc  # noqa: E402
import simdevices  # noqa: E402

API_VERSION = "v1beta1"
LOG = logging.getLogger("gpusim-device-plugin")
CONTAINER_GPU_ROOT = "/run/gpusim"


class SimulatedNvidiaPlugin(api_pb2_grpc.DevicePluginServicer):
    """DevicePlugin service over the simulated GPUs."""

    def __init__(self, gpus: list[simdevices.Gpu], sharing: simdevices.Sharing,
                 mounts: list[tuple[str, str]], stop: threading.Event) -> None:
        self.gpus = gpus
        self.sharing = sharing
        self.ids = simdevices.device_ids(gpus, sharing.replicas)
        self.mounts = mounts
        self.stop = stop

    def GetDevicePluginOptions(self, request, context):  # noqa: N802 - gRPC names
        return api_pb2.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=False)

    def ListAndWatch(self, request, context):  # noqa: N802
        devices = [api_pb2.Device(ID=device_id, health="Healthy") for device_id in self.ids]
        LOG.info("ListAndWatch: advertising %d %s devices", len(devices), self.sharing.resource_name)
        yield api_pb2.ListAndWatchResponse(devices=devices)
        while context.is_active() and not self.stop.wait(1.0):
            pass

    def GetPreferredAllocation(self, request, context):  # noqa: N802
        responses = []
        for req in request.container_requests:
            chosen = list(req.must_include_deviceIDs)
            for device_id in req.available_deviceIDs:
                if len(chosen) >= req.allocation_size:
                    break
                if device_id not in chosen:
                    chosen.append(device_id)
            responses.append(api_pb2.ContainerPreferredAllocationResponse(deviceIDs=chosen))
        return api_pb2.PreferredAllocationResponse(container_responses=responses)

    def Allocate(self, request, context):  # noqa: N802
        responses = []
        for req in request.container_requests:
            try:
                value = simdevices.visible_devices(self.gpus, list(req.devicesIDs))
            except simdevices.SimPluginError as error:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
            LOG.info("Allocate %s -> NVIDIA_VISIBLE_DEVICES=%s", list(req.devicesIDs), value)
            responses.append(api_pb2.ContainerAllocateResponse(
                envs={"NVIDIA_VISIBLE_DEVICES": value},
                mounts=[api_pb2.Mount(container_path=c, host_path=h, read_only=True) for h, c in self.mounts],
            ))
        return api_pb2.AllocateResponse(container_responses=responses)

    def PreStartContainer(self, request, context):  # noqa: N802
        return api_pb2.PreStartContainerResponse()


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def serve_once(args: argparse.Namespace, gpus: list[simdevices.Gpu], sharing: simdevices.Sharing,
               mounts: list[tuple[str, str]], shutdown: threading.Event) -> None:
    """Serve and register once; return when the kubelet restarted or on shutdown."""
    plugin_dir = Path(args.device_plugin_dir)
    kubelet_sock = plugin_dir / "kubelet.sock"
    own_sock = plugin_dir / args.socket_name
    if own_sock.exists():
        own_sock.unlink()
    stop = threading.Event()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    api_pb2_grpc.add_DevicePluginServicer_to_server(SimulatedNvidiaPlugin(gpus, sharing, mounts, stop), server)
    server.add_insecure_port(f"unix://{own_sock}")
    server.start()
    kubelet_inode = _inode(kubelet_sock)
    try:
        with grpc.insecure_channel(f"unix://{kubelet_sock}") as channel:
            grpc.channel_ready_future(channel).result(timeout=10)
            api_pb2_grpc.RegistrationStub(channel).Register(api_pb2.RegisterRequest(
                version=API_VERSION, endpoint=args.socket_name, resource_name=sharing.resource_name,
                options=api_pb2.DevicePluginOptions(pre_start_required=False)), timeout=10)
        LOG.info("registered %s with the kubelet at %s (%d devices)", sharing.resource_name, kubelet_sock,
                 len(simdevices.device_ids(gpus, sharing.replicas)))
        while not shutdown.wait(1.0):
            if not own_sock.exists() or _inode(kubelet_sock) != kubelet_inode:
                LOG.info("kubelet restarted (socket recreated): serving and registering again")
                break
    finally:
        stop.set()
        server.stop(grace=1).wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device-plugin-dir", default="/var/lib/kubelet/device-plugins",
                        help="directory holding the kubelet's kubelet.sock")
    parser.add_argument("--host-root", default=os.environ.get("GPUSIM_HOST_ROOT", "/opt/gpusim/root"),
                        help="simulated host tree (proc/driver/nvidia/gpus/*/information)")
    parser.add_argument("--gpu-profile", default=os.environ.get("GPUSIM_PROFILE", "/opt/gpusim/profile.json"),
                        help="simulated GPU profile data file (YAML or JSON)")
    parser.add_argument("--config-file", default=os.environ.get("CONFIG_FILE", "/etc/nvidia-device-plugin/config.yaml"),
                        help="NVIDIA device plugin config (version: v1; sharing.timeSlicing)")
    parser.add_argument("--socket-name", default="gpusim-nvidia.sock")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)

    host_root = Path(args.host_root)
    profile = Path(args.gpu_profile)
    gpus = simdevices.load_gpus(host_root, profile)
    sharing = simdevices.load_config(Path(args.config_file))
    mounts: list[tuple[str, str]] = []
    if simdevices.gpus_from_host_root(host_root):
        gpu_dir = host_root / "proc" / "driver" / "nvidia" / "gpus"
        mounts.append((str(gpu_dir), f"{CONTAINER_GPU_ROOT}/root/proc/driver/nvidia/gpus"))
    if profile.is_file():
        mounts.append((str(profile), f"{CONTAINER_GPU_ROOT}/profile{profile.suffix}"))
    LOG.info("SIMULATED GPUs: %s; %s replicas per GPU: %d",
             ", ".join(f"{g.index}:{g.name}:{g.uuid}" for g in gpus), sharing.resource_name, sharing.replicas)

    shutdown = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: shutdown.set())
    signal.signal(signal.SIGINT, lambda *_: shutdown.set())
    kubelet_sock = Path(args.device_plugin_dir) / "kubelet.sock"
    waited = False
    while not shutdown.is_set():
        if not kubelet_sock.exists():
            if not waited:
                LOG.warning("no kubelet socket at %s: is the hostPath the kubelet's root dir? waiting", kubelet_sock)
                waited = True
            shutdown.wait(2.0)
            continue
        waited = False
        try:
            serve_once(args, gpus, sharing, mounts, shutdown)
        except (grpc.RpcError, grpc.FutureTimeoutError) as error:
            LOG.warning("registration failed (%s); retrying", error)
            shutdown.wait(2.0)
    LOG.info("shutting down")
    return 0


if __name__ == "__main__":
    time.tzset()
    sys.exit(main())
