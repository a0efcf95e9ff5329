"""cmdline_flag: flags from a NUL-separated /proc/PID/cmdline."""
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.node.plugins.filter.cmdline_flag import FilterModule, cmdline_flag

KUBELET = "\x00".join([
    "/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml", "--root-dir", "/data/kubelet",
    "--cgroup-driver=systemd", "--v=2", "--cgroup-driver", "cgroupfs", ""])


@pytest.mark.parametrize(("name", "value"), [
    ("config", "/var/lib/kubelet/config.yaml"),  # --name=value
    ("root-dir", "/data/kubelet"),               # --name value
    ("cgroup-driver", "cgroupfs"),               # the last one wins
    ("v", "2"),
    ("node-ip", ""),                             # absent
    ("root", ""),                                # a prefix of another flag is not that flag
])
def test_flag_values(name: str, value: str) -> None:
    assert cmdline_flag(KUBELET, name) == value


def test_a_trailing_flag_without_value_is_empty() -> None:
    assert cmdline_flag("kubelet\x00--root-dir", "root-dir") == ""


def test_filter_is_registered() -> None:
    assert FilterModule().filters()["cmdline_flag"] is cmdline_flag


def test_a_list_of_arguments_reads_as_the_nul_separated_line() -> None:
    # gpu_node_read returns the kubelet's command line as a list.
    args = [arg for arg in KUBELET.split("\x00") if arg]
    assert [cmdline_flag(args, name) for name in ("root-dir", "cgroup-driver", "node-ip")] == ["/data/kubelet", "cgroupfs", ""]
