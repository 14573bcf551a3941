"""The master's clock never steps: a wall-clock jump during a run changes neither its bill nor its
edges (the clock is anchored once, then follows the monotonic clock)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers.configs import CONFIG
from helpers.runs import write_bag

from bats.common.clock import SteadyClock


def test_a_steady_clock_follows_the_monotonic_clock_not_the_wall():
    wall, mono = [1_000.0], [5.0]
    clock = SteadyClock(lambda: wall[0], lambda: mono[0])
    assert clock() == 1_000.0
    mono[0] += 2.0
    wall[0] += 3600.0  # an NTP step
    assert clock() == 1_002.0
    wall[0] -= 7200.0
    mono[0] += 1.0
    assert clock() == 1_003.0


# The master with time.time() stepped by STEP seconds two seconds into the run, as NTP or `date -s`
# would; imported before anything of bats, so every module sees the stepped clock.
_STEPPED = """
import runpy, sys, time
real, start, step = time.time, time.time(), float(sys.argv.pop(1))
time.time = lambda: real() + (step if real() - start > 2.0 else 0.0)
sys.argv[0] = "bats-master"
runpy.run_module("bats.master.cli", run_name="__main__")
"""


@pytest.mark.parametrize("step", [3600.0, -3600.0])
def test_a_wall_clock_step_during_a_run_changes_neither_bill_nor_edges(tmp_path, step):
    (tmp_path / "clusters.toml").write_text(CONFIG)
    bag = write_bag(tmp_path / "tasks.txt", ["sleep 0.3"] * 30)
    run = subprocess.run([sys.executable, "-c", _STEPPED, str(step), "--quiet", "--bag", str(bag),
                          "--config", "clusters.toml", "--budget", "40",
                          "--cushion", "yes"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    spent = report["cost"]["total"] if isinstance(report.get("cost"), dict) else None
    assert spent is not None and spent <= 40.0, report.get("cost")
    for machine in report["machines"]:  # no machine's uptime holds the hour the wall clock jumped
        assert 0 <= machine["uptime_s"] < 600, machine
