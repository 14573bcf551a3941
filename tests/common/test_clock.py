"""The master's clock never steps: a wall-clock jump during a run changes neither its bill nor its
edges (the clock is anchored once, then follows the monotonic clock)."""

from __future__ import annotations

import pytest
from helpers import hostile

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


@pytest.mark.parametrize("step", [3600.0, -3600.0])
def test_a_wall_clock_step_during_a_run_changes_neither_bill_nor_edges(tmp_path, step):
    run = hostile.clock_step_run(tmp_path, step)
    assert run["code"] == 0, run["stderr"]
    assert run["done"] == run["tasks"]
    assert run["cost"] is not None and run["cost"] <= run["budget"]
    assert 0 < run["max_uptime_s"] < 600  # no machine's uptime holds the hour the wall clock jumped
