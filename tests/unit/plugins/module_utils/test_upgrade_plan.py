"""The plan upgrade_driver.yml prints before its first change (module_utils/_upgrade_plan.py)."""
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.node.plugins.filter.upgrade_plan import FilterModule
from ansible_collections.gpufleet.node.plugins.module_utils._upgrade_plan import upgrade_plan

NO_WINDOW = {"configured": False, "open": True, "fits": True, "now": "2026-12-05T22:30:00+00:00", "closes_at": "", "next_open": ""}
OPEN = dict(NO_WINDOW, configured=True, closes_at="2026-12-06T03:00:00+00:00", next_open="2026-12-11T21:00:00+00:00")
CLOSED = dict(OPEN, open=False, fits=False, closes_at="", next_open="2026-12-06T01:00:00+00:00")
WINDOW = {"start": "22:00", "end": "04:00", "days": ["fri", "sat"], "timezone": "Europe/Berlin"}
OLD = {"running": "535.216.03", "userspace": "535.216.03", "installed": "535.216.03", "gpus": 8, "state": "", "unschedulable": False,
       "registered": True, "in_pool": True}
NEW = dict(OLD, running="535.261.03", userspace="535.261.03", installed="535.261.03", state="upgrade-done")


def plan(**changes: object) -> dict:
    base = {"targets": ["535.261.03", "535.261.03"], "nodes": {"n1": OLD, "n2": OLD}, "batches": [["n1"], ["n2"]], "up_to_date": [],
            "window": {}, "window_state": NO_WINDOW, "ignore_window": False, "node_seconds": 900, "check_mode": False}
    return {**base, **changes}


@pytest.mark.parametrize("changes, lines", [
    ({}, ["PLAN: NVIDIA driver 535.261.03 on 2 node(s)",
          "Batch 1: n1 (runs 535.216.03, installed 535.216.03)",
          "Batch 2: n2 (runs 535.216.03, installed 535.216.03)"]),
    ({"check_mode": True, "batches": [["n1", "n2"]]},
     ["PLAN: NVIDIA driver 535.261.03 on 2 node(s) (check mode: nothing will be changed)",
      "Batch 1: n1 (runs 535.216.03, installed 535.216.03), n2 (runs 535.216.03, installed 535.216.03)"]),
    ({"window": WINDOW, "window_state": OPEN, "batches": [["n1"]], "up_to_date": ["n2"]},
     ["PLAN: NVIDIA driver 535.261.03 on 2 node(s)",
      'Window {"start": "22:00", "end": "04:00", "days": ["fri", "sat"], "timezone": "Europe/Berlin"}: open, closes at '
      "2026-12-06T03:00:00+00:00; a batch needs up to 900 s",
      "Batch 1: n1 (runs 535.216.03, installed 535.216.03)",
      "Up to date, skipped (no cordon, no drain): n2"]),
    ({"window": {"start": "01:00", "end": "03:00"}, "window_state": CLOSED, "node_seconds": "1200", "batches": [["n1"]]},
     ["PLAN: NVIDIA driver 535.261.03 on 2 node(s)",
      'Window {"start": "01:00", "end": "03:00"}: closed, opens at 2026-12-06T01:00:00+00:00; a batch needs up to 1200 s',
      "Batch 1: n1 (runs 535.216.03, installed 535.216.03)"]),
    ({"window": WINDOW, "window_state": CLOSED, "ignore_window": True, "batches": [["n1"]]},
     ["PLAN: NVIDIA driver 535.261.03 on 2 node(s)",
      'Window {"start": "22:00", "end": "04:00", "days": ["fri", "sat"], "timezone": "Europe/Berlin"}: closed, opens at '
      "2026-12-06T01:00:00+00:00 (ignored: upgrade_driver_ignore_window); a batch needs up to 900 s",
      "Batch 1: n1 (runs 535.216.03, installed 535.216.03)"]),
    ({"nodes": {"n1": NEW, "n2": NEW}, "batches": [], "up_to_date": ["n1", "n2"]},
     ["PLAN: NVIDIA driver 535.261.03 on 2 node(s)",
      "No node needs the change.",
      "Up to date, skipped (no cordon, no drain): n1, n2"]),
], ids=["no window", "check mode, one batch", "window open, a node up to date", "window closed", "window closed, ignored",
        "nothing to change"])
def test_the_plan(changes: dict, lines: list) -> None:
    assert upgrade_plan(plan(**changes)).split("\n") == lines


@pytest.mark.parametrize("start, shown", [
    (dict(OLD, unschedulable=True), "n1 (runs 535.216.03, installed 535.216.03, cordoned before)"),
    (dict(OLD, running="", installed=""), "n1 (runs no driver, installed none)"),
    (dict(OLD, state="drain-required", unschedulable=True), "n1 (runs 535.216.03, installed 535.216.03, cordoned before, resumes after state "
                                                            "drain-required)"),
    (dict(OLD, state="upgrade-failed"), "n1 (runs 535.216.03, installed 535.216.03, resumes after state upgrade-failed)"),
    (dict(OLD, state="upgrade-required"), "n1 (runs 535.216.03, installed 535.216.03)"),
    (dict(OLD, state="upgrade-done", running=None), "n1 (runs no driver, installed 535.216.03)"),
    (dict(OLD, mig_changes=["GPU 0 holds MIG on: 4 x 1g.20gb, its layout is MIG off", "MIG mode of GPU 1 pending"]),
     "n1 (runs 535.216.03, installed 535.216.03; GPU 0 holds MIG on: 4 x 1g.20gb, its layout is MIG off; "
     "MIG mode of GPU 1 pending)"),
], ids=["cordoned", "no driver", "resumed and cordoned", "resumed after a failure", "required", "done", "MIG layout"])
def test_a_node_of_a_batch(start: dict, shown: str) -> None:
    assert upgrade_plan(plan(nodes={"n1": start}, batches=[["n1"]])).split("\n")[1] == "Batch 1: " + shown


@pytest.mark.parametrize("targets, named", [
    (["550.54.15", "535.261.03", "550.54.15"], "550.54.15, 535.261.03"),
    (["550.54.15a", "550.54.15A"], "550.54.15a"),
    (["", "535.261.03"], ", 535.261.03"),
], ids=["each once, in order", "case ignored", "an empty target"])
def test_the_targets_are_named_once_each(targets: list, named: str) -> None:
    assert upgrade_plan(plan(targets=targets)).splitlines()[0] == "PLAN: NVIDIA driver %s on 2 node(s)" % named


def test_the_filter() -> None:
    assert FilterModule().filters() == {"driver_upgrade_plan": upgrade_plan}
