"""bench/emulate.py and bench/scale_bench.py: emulated machines join a real master over CurveZMQ,
run its bag (no-op and timed tasks) and report what the scale benchmark tabulates."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.bench_scripts import load_bench_script

pytestmark = pytest.mark.e2e  # the bench script it loads starts a real master and emulated machines
BATS_MASTER = Path(sys.executable).parent / "bats-master"


@pytest.fixture(scope="module")
def scale():
    return load_bench_script("scale_bench")


@pytest.mark.parametrize(("machines", "task_s", "tasks"), [(30, 0.0, 3000), (12, 0.2, 120)])
def test_emulated_machines_run_a_real_masters_bag_with_no_false_loss(scale, tmp_path, machines, task_s, tasks):
    row = scale.run_fleet(tmp_path, BATS_MASTER, machines, task_s, tasks)
    assert "error" not in row, row
    assert (row["exit"], row["status"], row["done"]) == (0, "done", tasks)
    # each machine takes a seat with its own key (on a loaded machine a short bag may be over before
    # the last ones are in)
    assert 1 < row["welcomed"] <= machines, row
    assert row["false_losses"] == 0 and row["silences"] == 0
    assert row["tps"] > 0 and row["cpu_us"] > 0 and row["rss_mib"] > 0
