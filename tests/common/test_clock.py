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


# the resumed master's time.time() is stepped by STEP from its start (an NTP step, or `date -s`,
# between a crash and the --resume)
_STEPPED_FROM_START = """
import runpy, sys, time
real, step = time.time, float(sys.argv.pop(1))
time.time = lambda: real() + step
sys.argv[0] = "bats-master"
runpy.run_module("bats.master.cli", run_name="__main__")
"""


@pytest.mark.parametrize("step", [3600.0, -3600.0])
def test_a_wall_clock_step_between_a_crash_and_resume_leaves_the_makespan_alone(tmp_path, step):
    import json
    import signal
    import subprocess
    import sys
    import time

    from helpers.runs import MASTER, wait_for, write_bag

    bag = write_bag(tmp_path / "tasks.txt", ["sleep 0.2"] * 30)
    state = tmp_path / "run"
    started = time.monotonic()
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--state-dir", str(state), "--workers", "2"],
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mark = state / "journal.sqlite-mark"
    try:
        wait_for(lambda: mark.exists() and int(mark.read_text()) >= 5, 60, "a few results")
    finally:
        master.send_signal(signal.SIGKILL)
        master.wait()
    resumed = subprocess.run([sys.executable, "-c", _STEPPED_FROM_START, str(step), "--quiet", "--resume",
                              "--state-dir", str(state)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - started
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads((state / "report.json").read_text())
    assert report["tasks"]["done"] == 30
    # the makespan first: it is the harm (3,631 s or 0.0 for 33 s of work on the code before), the
    # log line below only says the master saw the step
    assert 1.0 < report["makespan_s"] <= elapsed + 1.0, (report["makespan_s"], elapsed)
    assert "the wall clock moved" in resumed.stderr
