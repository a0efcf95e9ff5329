"""The lab's one command line, labctl (`lab/labctl` or `python -m gpufleet_lab`; see `--help`)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpufleet_lab import (bench, controller, docker_daemon, gpu_usage, images, kube_cli, nvidia_builds, package_mirror,
                          promtool)
from gpufleet_lab.proc import LabError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="labctl", description="The gpufleet.node test lab.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("docker", help="install and start the Docker daemon when it does not answer")
    build = commands.add_parser("images", help="build (or reuse) the node base images")
    build.add_argument("releases", nargs="*", default=["bookworm"], choices=sorted(images.RELEASES),
                       help="Debian releases (default: bookworm)")
    commands.add_parser("package-mirror", help="build (or reuse) the signed local mirror of the packages the tests pin")
    commands.add_parser("nvidia-builds", help="build (or reuse) NVIDIA's own code for the lab from pinned sources "
                        "(the mock NVML)")
    other = commands.add_parser("controller", help="run a command under another ansible-core and Python, in a "
                                "controller container (tests/controllers/NAME.txt)")
    other.add_argument("name", help="the controller: a requirements file's name in tests/controllers (newest)")
    other.add_argument("argv", nargs=argparse.REMAINDER, help="the command and its arguments, after --")
    commands.add_parser("bench", help="measure the collection on the Kubernetes lab (docs/benchmarks.md)")
    commands.add_parser("promtool", help="print the path of promtool (from Debian's prometheus package, cached)")
    prometheus = commands.add_parser("prometheus", help="a Prometheus server with a known week of dcgm-exporter metrics "
                                     "(SIMULATED data) for the GPU utilisation report")
    prometheus.add_argument("action", choices=["start", "stop", "figures"])
    prometheus.add_argument("--dir", type=Path, default=Path(".build/lab/prometheus"))
    prometheus.add_argument("--port", type=int, default=19090)
    prometheus.add_argument("--end", type=int, help="the week's end, a Unix time on the hour")
    prometheus.add_argument("--h100", default="gpu-h100", help="the node name of the H100 GPUs")
    prometheus.add_argument("--a100", default="gpu-a100", help="the node name of the A100 GPU")
    kube = commands.add_parser("kube", help="the Kubernetes lab: control plane and simulated GPU nodes")
    kube_cli.add_commands(kube.add_subparsers(dest="kube_command", required=True))
    return parser


def _prometheus(args: argparse.Namespace) -> None:
    if args.action == "start":
        if not args.end or args.end % 3600:
            raise LabError("prometheus start needs --end, a Unix time on the hour")
        gpu_usage.start(args.dir, args.port, args.end, {"h100": args.h100, "a100": args.a100})
        print(f"http://127.0.0.1:{args.port}")
    elif args.action == "stop":
        gpu_usage.stop(args.dir)
    else:
        print(json.dumps(gpu_usage.SCENARIO_FIGURES))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:2] == ["kube", "kubectl"]:  # kubectl's own options pass through untouched
        argv = ["kube", "kubectl", "--", *argv[2:]]
    args = _parser().parse_args(argv)
    try:
        if args.command == "docker":
            docker_daemon.ensure()
        elif args.command == "images":
            images.ensure_all(args.releases)
        elif args.command == "package-mirror":
            package_mirror.ensure()
        elif args.command == "nvidia-builds":
            nvidia_builds.ensure_all()
        elif args.command == "controller":
            return controller.run_command(args.name, args.argv[1:] if args.argv[:1] == ["--"] else args.argv)
        elif args.command == "bench":
            return bench.main()
        elif args.command == "promtool":
            print(promtool.ensure())
        elif args.command == "prometheus":
            _prometheus(args)
        elif args.command == "kube":
            return kube_cli.dispatch(args, command_attr="kube_command")
    except LabError as error:
        print(f"labctl: {error}", file=sys.stderr)
        return 1
    return 0
