"""A real Prometheus server (Debian's `prometheus` package) loaded with a known week of dcgm-exporter metrics, for the
GPU utilisation report (playbooks/report.yml).

The week is SIMULATED data of a known scenario: the samples are written as OpenMetrics and turned into TSDB blocks by
promtool (`tsdb create-blocks-from openmetrics`); Prometheus then serves them through its real query API. The
scenario's figures are known exactly, so the report's numbers are checked against them (SCENARIO_FIGURES).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from gpufleet_lab import promtool
from gpufleet_lab.proc import LabError, run

STEP = 60            # seconds between samples, as dcgm-exporter scraped every minute
WEEK = 7 * 24 * 3600
BLOCK = 12 * 3600    # train-0 alternates its load every 12 hours
H100_MIB, A100_MIB = 81559, 81920
# name (with {h100}/{a100} for the lab's node names), UUID, GPU model, memory, namespace, pod, compute of the even and
# odd 12-hour blocks, memory used (MiB)
GPUS = (
    ("{h100}", "GPU-5c1f0000-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3", H100_MIB, "team-a", "train-0", 60, 100, 60000),
    ("{h100}", "GPU-5c1f0000-0000-0000-0000-000000000001", "NVIDIA H100 80GB HBM3", H100_MIB, "team-a", "train-0", 60, 100, 60000),
    ("{h100}", "GPU-5c1f0000-0000-0000-0000-000000000002", "NVIDIA H100 80GB HBM3", H100_MIB, "team-b", "notebook-0", 12, 12, 8000),
    ("{h100}", "GPU-5c1f0000-0000-0000-0000-000000000003", "NVIDIA H100 80GB HBM3", H100_MIB, "", "", 0, 0, 0),
    ("{a100}", "GPU-a1000000-0000-0000-0000-000000000000", "NVIDIA A100-SXM4-80GB", A100_MIB, "team-c", "idle-0", 2, 2, 40960),
)
# What the report must say of this week at 2.5 per GPU-hour (the pods also hold GPUs in the API: SCENARIO_PODS).
SCENARIO_FIGURES = {
    "train-0": {"gpu_hours": 336, "util_mean": 80.0, "util_p95": 100.0, "mem_mean": 73.6, "cost": 840.0},
    "notebook-0": {"gpu_hours": 168, "util_mean": 12.0, "util_p95": 12.0, "mem_mean": 9.8, "cost": 420.0},
    "idle-0": {"gpu_hours": 168, "util_mean": 2.0, "util_p95": 2.0, "mem_mean": 50.0, "cost": 420.0},
}
METRICS = (
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda gpu, busy: busy),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", lambda gpu, busy: gpu[8]),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", lambda gpu, busy: gpu[3] - gpu[8]),
)


def _labels(gpu: tuple, index: int, nodes: dict) -> str:
    labels = [("gpu", str(index)), ("UUID", gpu[1]), ("device", f"nvidia{index}"), ("modelName", gpu[2]),
              ("Hostname", gpu[0].format(**nodes))]
    if gpu[5]:
        labels += [("container", "main"), ("namespace", gpu[4]), ("pod", gpu[5])]
    return ",".join(f'{name}="{value}"' for name, value in labels)


def openmetrics(end: int, nodes: dict) -> str:
    """The week before ``end`` (a Unix time on the hour) as OpenMetrics: one sample a minute per GPU and metric, the
    first 30 s after the week began, so that each of the week's 168 hours holds 60 samples of every GPU."""
    start = end - WEEK + STEP // 2
    lines = []
    for metric, text, value in METRICS:
        lines += [f"# HELP {metric} {text}", f"# TYPE {metric} gauge"]
        for index, gpu in enumerate(GPUS):
            labels = _labels(gpu, index % 4, nodes)
            for sample in range(WEEK // STEP):
                busy = gpu[6] if (sample * STEP // BLOCK) % 2 == 0 else gpu[7]
                lines.append(f"{metric}{{{labels}}} {value(gpu, busy)} {start + sample * STEP}")
    return "\n".join(lines + ["# EOF", ""])


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def start(workdir: Path, port: int, end: int, nodes: dict) -> None:
    """Load the week into a new TSDB under ``workdir`` and serve it on 127.0.0.1:``port`` until stop()."""
    stop(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "week.om"
    source.write_text(openmetrics(end, nodes))
    data = workdir / "data"
    shutil.rmtree(data, ignore_errors=True)
    run([str(promtool.ensure("promtool")), "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=24h",
         str(source), str(data)], quiet=True)
    config = workdir / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1h\n")
    log = (workdir / "prometheus.log").open("w")
    server = subprocess.Popen([str(promtool.ensure("prometheus")), f"--config.file={config}", f"--storage.tsdb.path={data}",
                               f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=3650d"],
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    (workdir / "prometheus.pid").write_text(str(server.pid))
    for _attempt in range(60):
        if _ready(port):
            return
        if server.poll() is not None:
            raise LabError(f"prometheus exited with {server.returncode}: {(workdir / 'prometheus.log').read_text()[-2000:]}")
        time.sleep(1)
    raise LabError(f"prometheus did not become ready on 127.0.0.1:{port} within 60 s")


def stop(workdir: Path) -> None:
    pidfile = workdir / "prometheus.pid"
    if not pidfile.is_file():
        return
    try:
        os.killpg(int(pidfile.read_text()), signal.SIGTERM)
    except (ProcessLookupError, ValueError):
        pass
    pidfile.unlink()
