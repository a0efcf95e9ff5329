"""The lab's known week of dcgm-exporter metrics (gpufleet_lab/gpu_usage.py): its figures, computed here from the
generated OpenMetrics itself, are those the report scenario asserts (SCENARIO_FIGURES)."""
from __future__ import annotations

import re
from collections import defaultdict

from gpufleet_lab import gpu_usage

END = 1_800_000_000 - 1_800_000_000 % 3600
SAMPLE = re.compile(r'^(\w+)\{(.*)\} (\S+) (\d+)$')


def _series() -> dict:
    series = defaultdict(list)
    for line in gpu_usage.openmetrics(END, {"h100": "n1", "a100": "n2"}).splitlines():
        match = SAMPLE.match(line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
            series[(match.group(1), labels["UUID"], labels.get("pod", ""))].append((int(match.group(4)), float(match.group(3))))
    return series


def test_the_week_ends_with_the_window_and_every_hour_holds_a_minute_of_samples() -> None:
    text = gpu_usage.openmetrics(END, {"h100": "n1", "a100": "n2"})
    assert text.endswith("# EOF\n")
    for samples in _series().values():
        times = [time for time, _value in samples]
        assert len(times) == 7 * 24 * 60 and times[0] == END - 7 * 24 * 3600 + 30 and times[-1] == END - 30


def test_the_scenarios_figures_follow_from_its_samples() -> None:
    series = _series()
    for pod, figures in gpu_usage.SCENARIO_FIGURES.items():
        util = [values for (metric, _uuid, owner), values in series.items() if metric == "DCGM_FI_DEV_GPU_UTIL" and owner == pod]
        used = [values for (metric, _uuid, owner), values in series.items() if metric == "DCGM_FI_DEV_FB_USED" and owner == pod]
        free = [values for (metric, _uuid, owner), values in series.items() if metric == "DCGM_FI_DEV_FB_FREE" and owner == pod]
        samples = [value for values in util for _time, value in values]
        assert round(sum(samples) / len(samples), 1) == figures["util_mean"]
        assert max(samples) == figures["util_p95"]           # the top 5 % are all the busiest value
        assert len(util) * 168 == figures["gpu_hours"] and figures["cost"] == figures["gpu_hours"] * 2.5
        memory = used[0][0][1] / (used[0][0][1] + free[0][0][1]) * 100
        assert round(memory, 1) == figures["mem_mean"]
