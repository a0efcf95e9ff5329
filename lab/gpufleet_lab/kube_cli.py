"""The Kubernetes lab's commands, ``labctl kube <command>``."""

from __future__ import annotations

import argparse
import json
import os
import time

from gpufleet_lab import binaries, controlplane, inventory, kube, kube_images, node, ssh, standins
from gpufleet_lab.common import LabSettings
from gpufleet_lab.proc import log, run


def add_commands(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register the lab's subcommands on ``commands`` (labctl's CLI calls this too)."""
    build = commands.add_parser("build-binaries", help="build (or reuse) the Kubernetes binaries")
    build.add_argument("--force", action="store_true", help="rebuild even when cached binaries answer")
    commands.add_parser("images", help="build (or reuse) the lab node image and the pod images (before labs run in parallel)")
    commands.add_parser("up", help="start the control plane (idempotent)")
    commands.add_parser("down", help="remove nodes, control plane, network and state")
    commands.add_parser("stop-api-server", help="a fault for tests: stop kube-apiserver alone (up starts it again)")
    commands.add_parser("status", help="print the lab's nodes and control-plane state as JSON")
    node_cmd = commands.add_parser("node", help="add or remove a lab node")
    node_sub = node_cmd.add_subparsers(dest="node_command", required=True)
    add = node_sub.add_parser("add", help="add a node with a simulated GPU profile; wait until Ready")
    add.add_argument("name")
    add.add_argument("--gpu-profile", required=True)
    add.add_argument("--kubelet-root-dir", default=None)
    add.add_argument("--gpu-userspace", choices=("host", "profile"), default="host",
                     help="host: the simulated GPU host's user space is the driver packages installed on the node "
                          "(none until the driver role ran); profile: the profile's own, for tests of the upper layers")
    ssh = node_sub.add_parser("ssh", help="turn on a node's sshd (its own host key, the lab's key authorised); print "
                                          "the Ansible variables that reach it over SSH, host key checked, as JSON")
    ssh.add_argument("name")
    rm = node_sub.add_parser("rm", help="remove a node")
    rm.add_argument("name")
    kubectl = commands.add_parser("kubectl", help="run the lab's kubectl with the admin kubeconfig")
    kubectl.add_argument("kubectl_args", nargs=argparse.REMAINDER, help="kubectl's arguments")
    inv = commands.add_parser("inventory", help="write the lab's Ansible inventory")
    inv.add_argument("--path", default=None, help=f"directory (default: {inventory.DEFAULT_DIR})")


def dispatch(args: argparse.Namespace, command_attr: str = "command") -> int:
    """Run the parsed subcommand; ``command_attr`` names the attribute holding it (for a parent CLI)."""
    started = time.monotonic()
    if command_attr != "command":
        args.command = getattr(args, command_attr)
    if args.command == "build-binaries":
        print(binaries.build_binaries(force=args.force))
    elif args.command == "images":
        settings = LabSettings.from_env()
        print(kube_images.ensure_node_image(settings))
        print(kube_images.ensure_pod_images(settings))
        print(kube_images.nvidia_plugin_archive(settings, kube_images.LAB_PLUGIN_VERSION))
        print(standins.ensure_repository())
    elif args.command == "up":
        settings = kube.up()
        print(settings.admin_kubeconfig)
    elif args.command == "down":
        kube.down()
    elif args.command == "stop-api-server":
        controlplane.stop_api_server(LabSettings.from_env())
    elif args.command == "status":
        settings = LabSettings.from_env()
        ready = (settings.pki_dir / "tokens.csv").is_file() and controlplane.api_ready(settings)
        nodes = [dict(vars(s), ready=ready and node.node_ready(settings, s.name)) for s in node.load_specs(settings)]
        try:
            kubectl: str | None = str(binaries.cached_bin_dir() / "kubectl")
        except binaries.BuildError:
            kubectl = None
        print(json.dumps({"api": settings.api_url if ready else None, "kubeconfig": str(settings.admin_kubeconfig),
                          "kubectl": kubectl, "nodes": nodes, "memory_mib": kube.memory_report()}, indent=2))
    elif args.command == "kubectl":
        settings = LabSettings.from_env()
        passed = args.kubectl_args[1:] if args.kubectl_args[:1] == ["--"] else args.kubectl_args
        argv = [str(binaries.cached_bin_dir() / "kubectl"), "--kubeconfig", str(settings.admin_kubeconfig), *passed]
        return run(argv, check=False, capture=False, quiet=True).returncode
    elif args.command == "node" and args.node_command == "add":
        node.node_add(args.name, args.gpu_profile, args.kubelet_root_dir, userspace=args.gpu_userspace)
        inventory.write_inventory()
    elif args.command == "node" and args.node_command == "ssh":
        print(json.dumps(ssh.enable(args.name), indent=2))
    elif args.command == "node" and args.node_command == "rm":
        node.node_rm(args.name)
        inventory.write_inventory()
    elif args.command == "inventory":
        print(inventory.write_inventory(args.path))
    if os.environ.get("GPUFLEET_LAB_TIMING"):
        log(f"kube {args.command} took {time.monotonic() - started:.1f} s")
    return 0
