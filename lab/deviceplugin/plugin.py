"""SIMULATED NVIDIA device plugin for the gpufleet.node lab (kubelet device-plugin API v1beta1).

It speaks the real kubelet API (Registration.Register, ListAndWatch, GetPreferredAllocation,
Allocate) over the kubelet's unix sockets and behaves as NVIDIA's k8s-device-plugin v0.17.1
(logic in simdevices.py). Its NVML is SIMULATED: the GPUs are what the NVIDIA runtime injected into
this container (``/run/gpusim/visible.json``); with nothing injected it fails at "NVML init" as the
real plugin does. One gRPC server and registration per resource (``nvidia-gpu.sock``,
``nvidia-mig-1g.10gb.sock``, ...). Like the real plugin it finds ``kubelet.sock`` only in the
directory it is given (the pod's ``/var/lib/kubelet/device-plugins``, a hostPath of
``<kubelet root dir>/device-plugins``): with a wrong hostPath there is no kubelet socket, so it
never registers. When the kubelet restarts (its socket is recreated and ours removed), it serves
and registers again.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
import uuid
from concurrent import futures
from pathlib import Path
from typing import Mapping

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402  Debian python3-grpcio
import api_pb2  # noqa: E402  generated from the kubelet's api.proto at image build
import api_pb2_grpc  # noqa: E402
import simdevices  # noqa: E402
from simdevices import SimPluginError  # noqa: E402

API_VERSION = "v1beta1"
VISIBLE_PATH = "/run/gpusim/visible.json"
VERSION = "0.17.1-gpusim"
LOG = simdevices.LOG


class KlogFormatter(logging.Formatter):
    """klog's header (``I0102 15:04:05.000000     1 file.go:12] msg``), our file and line."""

    def format(self, record: logging.LogRecord) -> str:
        level = {"WARNING": "W", "ERROR": "E", "CRITICAL": "F"}.get(record.levelname, "I")
        stamp = time.strftime("%m%d %H:%M:%S", time.localtime(record.created))
        micros = int((record.created % 1) * 1_000_000)
        return f"{level}{stamp}.{micros:06d} {record.process:7d} {record.filename}:{record.lineno}] {record.getMessage()}"


class ResourcePlugin(api_pb2_grpc.DevicePluginServicer):
    """The DevicePlugin service of one resource (internal/plugin/server.go)."""

    def __init__(self, resource: simdevices.Resource, config: simdevices.Config, stop: threading.Event) -> None:
        self.resource = resource
        self.config = config
        self.stop = stop

    def GetDevicePluginOptions(self, request, context):  # noqa: N802 - gRPC names
        return api_pb2.DevicePluginOptions(get_preferred_allocation_available=True)

    def ListAndWatch(self, request, context):  # noqa: N802
        devices = [api_pb2.Device(ID=device_id, health="Healthy") for device_id in self.resource.ids]
        LOG.info("ListAndWatch: advertising %d %s devices", len(devices), self.resource.name)
        yield api_pb2.ListAndWatchResponse(devices=devices)
        while context.is_active() and not self.stop.wait(1.0):
            pass

    def GetPreferredAllocation(self, request, context):  # noqa: N802
        responses = []
        for req in request.container_requests:
            try:
                chosen = simdevices.preferred_allocation(self.resource, list(req.available_deviceIDs),
                                                         list(req.must_include_deviceIDs), req.allocation_size)
            except SimPluginError as error:
                context.abort(grpc.StatusCode.UNKNOWN, str(error))
            responses.append(api_pb2.ContainerPreferredAllocationResponse(deviceIDs=chosen))
        return api_pb2.PreferredAllocationResponse(container_responses=responses)

    def Allocate(self, request, context):  # noqa: N802
        responses = []
        for req in request.container_requests:
            ids = list(req.devicesIDs)
            try:
                allocation = simdevices.allocate(self.resource, self.config, ids, str(uuid.uuid4()))
            except SimPluginError as error:
                LOG.error("Allocate %s: %s", ids, error)
                context.abort(grpc.StatusCode.UNKNOWN, str(error))  # a Go error reaches the kubelet as code Unknown
            LOG.info("Allocate %s %s -> envs=%s mounts=%s annotations=%s", self.resource.name, ids,
                     allocation.envs, allocation.mounts, allocation.annotations)
            responses.append(api_pb2.ContainerAllocateResponse(
                envs=allocation.envs,
                mounts=[api_pb2.Mount(container_path=c, host_path=h, read_only=False) for c, h in allocation.mounts],
                annotations=allocation.annotations,
            ))
        return api_pb2.AllocateResponse(container_responses=responses)

    def PreStartContainer(self, request, context):  # noqa: N802
        return api_pb2.PreStartContainerResponse()


class ResourceServer:
    """One resource's gRPC server on ``<plugin dir>/nvidia-<name>.sock`` and its registration."""

    def __init__(self, resource: simdevices.Resource, config: simdevices.Config, plugin_dir: Path) -> None:
        self.resource = resource
        self.socket = plugin_dir / resource.socket_name
        self.stop_event = threading.Event()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        api_pb2_grpc.add_DevicePluginServicer_to_server(ResourcePlugin(resource, config, self.stop_event), self.server)

    def start(self) -> None:
        if self.socket.exists():
            self.socket.unlink()
        self.server.add_insecure_port(f"unix://{self.socket}")
        self.server.start()
        LOG.info("Starting to serve '%s' on %s", self.resource.name, self.socket)

    def register(self, kubelet_sock: Path) -> None:
        with grpc.insecure_channel(f"unix://{kubelet_sock}") as channel:
            grpc.channel_ready_future(channel).result(timeout=10)
            api_pb2_grpc.RegistrationStub(channel).Register(api_pb2.RegisterRequest(
                version=API_VERSION, endpoint=self.socket.name, resource_name=self.resource.name,
                options=api_pb2.DevicePluginOptions(get_preferred_allocation_available=True)), timeout=10)
        LOG.info("Registered device plugin for '%s' with Kubelet", self.resource.name)
        LOG.info("registered %s with the kubelet at %s (%d devices)", self.resource.name, kubelet_sock, len(self.resource.devices))

    def stop(self) -> None:
        LOG.info("Stopping to serve '%s' on %s", self.resource.name, self.socket)
        self.stop_event.set()
        self.server.stop(grace=1).wait()
        if self.socket.exists():
            self.socket.unlink()


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def serve_once(plugin_dir: Path, resources: list[simdevices.Resource], config: simdevices.Config,
               shutdown: threading.Event) -> None:
    """Serve and register every resource once; return when the kubelet restarted or on shutdown."""
    kubelet_sock = plugin_dir / "kubelet.sock"
    servers = [ResourceServer(resource, config, plugin_dir) for resource in resources]
    try:
        for server in servers:
            server.start()
        kubelet_inode = _inode(kubelet_sock)
        for server in servers:
            server.register(kubelet_sock)
        while not shutdown.wait(1.0):
            if _inode(kubelet_sock) != kubelet_inode or not all(server.socket.exists() for server in servers):
                LOG.info("kubelet restarted (socket recreated): serving and registering again")
                break
    finally:
        for server in servers:
            server.stop()


def serve(plugin_dir: Path, resources: list[simdevices.Resource], config: simdevices.Config,
          shutdown: threading.Event) -> None:
    kubelet_sock = plugin_dir / "kubelet.sock"
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
            serve_once(plugin_dir, resources, config, shutdown)
        except (grpc.RpcError, grpc.FutureTimeoutError) as error:
            LOG.error("Failed to start plugin: %s", error)
            LOG.info("Failed to start one or more plugins. Retrying in 2s...")
            shutdown.wait(2.0)


def write_cdi_spec(directory: Path, spec: dict) -> None:
    """internal/cdi: the spec of the advertised devices, where the runtime resolves the annotations (hostPath /var/run/cdi)."""
    path = directory / simdevices.CDI_SPEC_FILE
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(spec, indent=2) + "\n")
    partial.replace(path)
    LOG.info("Generated CDI spec for %d devices at %s", len(spec["devices"]), path)


def start_plugins(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[simdevices.Config, list[simdevices.Resource]]:
    """cmd/nvidia-device-plugin/main.go startPlugins up to the plugins to serve; SimPluginError: exit 1."""
    LOG.info("Loading configuration.")
    cli = {spec.attr: getattr(args, spec.attr) for spec in simdevices.FLAG_SPECS}
    config = simdevices.load_config(args.config_file, env, cli)
    for warning in config.warnings:
        LOG.warning("%s", warning)
    visible = Path(env.get("GPUSIM_VISIBLE", VISIBLE_PATH))
    gpus = simdevices.load_visible(visible)
    simdevices.validate_flags(config, has_nvml=gpus is not None)
    LOG.info("Updating config with default resource matching patterns.")
    for warning in [] if gpus is not None else simdevices.no_nvml_warnings(config):
        LOG.warning("%s", warning)
    LOG.info("\nRunning with config:\n%s", config.to_json())
    LOG.info("Retrieving plugins.")
    if gpus is not None:
        LOG.info("SIMULATED NVML (%s): %s", visible, simdevices.describe_gpus(gpus))
        resources = simdevices.build_resources(gpus, config)
        if any(strategy.startswith("cdi-") for strategy in config.device_list_strategy):
            write_cdi_spec(Path(env.get("CDI_SPEC_DIR", simdevices.CDI_SPEC_DIR)), simdevices.cdi_spec(gpus, resources, config))
        return config, resources
    LOG.info("SIMULATED NVML: %s is absent: the NVIDIA runtime injected no GPU into this container", visible)
    failure = simdevices.nvml_init_failure(config)
    for line in failure.errors:
        LOG.error("%s", line)
    if failure.fatal:
        raise SimPluginError(failure.fatal)
    if failure.warning:
        LOG.warning("%s", failure.warning)
    return config, []


def parse_args(argv: list[str] | None, env: Mapping[str, str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device-plugin-dir", default="/var/lib/kubelet/device-plugins",
                        help="directory holding the kubelet's kubelet.sock (the real plugin's fixed path)")
    parser.add_argument("--config-file", default=env.get("CONFIG_FILE"),
                        help="the real plugin's v1 config file (env CONFIG_FILE); none by default")
    parser.add_argument("--mig-strategy", dest="mig_strategy", help="none | single | mixed (env MIG_STRATEGY)")
    parser.add_argument("--fail-on-init-error", dest="fail_on_init_error", nargs="?", const="true",
                        help="true | false (env FAIL_ON_INIT_ERROR)")
    parser.add_argument("--device-list-strategy", dest="device_list_strategy", action="append",
                        help="envvar | volume-mounts | cdi-annotations, repeatable or comma-separated (env DEVICE_LIST_STRATEGY)")
    parser.add_argument("--device-id-strategy", dest="device_id_strategy", help="uuid | index (env DEVICE_ID_STRATEGY)")
    parser.add_argument("--device-discovery-strategy", dest="device_discovery_strategy",
                        help="auto | nvml (env DEVICE_DISCOVERY_STRATEGY)")
    parser.add_argument("--cdi-annotation-prefix", dest="cdi_annotation_prefix", help="env CDI_ANNOTATION_PREFIX")
    args = parser.parse_args(argv)
    if args.device_list_strategy:
        args.device_list_strategy = ",".join(args.device_list_strategy)
    return args


def run_once(argv: list[str] | None, shutdown: threading.Event) -> int:
    """Read the configuration, find the GPUs, serve until ``shutdown``."""
    env = dict(os.environ)
    args = parse_args(argv, env)
    try:
        config, resources = start_plugins(args, env)
    except SimPluginError as error:
        LOG.error("%s", error)
        return 1
    if resources:
        serve(Path(args.device_plugin_dir), resources, config, shutdown)
    else:
        LOG.info("No devices found. Waiting indefinitely.")
        while not shutdown.wait(60.0):
            pass
    return 0


def main(argv: list[str] | None = None) -> int:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(KlogFormatter())
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    LOG.info("Starting NVIDIA Device Plugin (SIMULATED) version=%s", VERSION)
    shutdown, restart = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: shutdown.set())
    signal.signal(signal.SIGINT, lambda *_: shutdown.set())
    # As the real plugin: SIGHUP (NVIDIA's config-manager, after it linked another configuration) starts over,
    # reading the configuration file again.
    signal.signal(signal.SIGHUP, lambda *_: (restart.set(), shutdown.set()))
    while True:
        code = run_once(argv, shutdown)
        if not restart.is_set():
            break
        LOG.info("Received SIGHUP, restarting.")
        restart.clear()
        shutdown.clear()
    LOG.info("shutting down")
    return code


if __name__ == "__main__":
    time.tzset()
    sys.exit(main())
