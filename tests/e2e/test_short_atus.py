"""The real master, default settings, short ATUs: local workers emulating two clouds (a dear fast
one and a cheap one four times slower) billed every 6, 15 or 30 seconds. Before the budget ceiling
had its own clock, the 5-minute monitoring interval made every machine reserve 50 ATUs, all were
let go at the choice and the bag ended with tasks left and nothing spent on them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers.runs import MASTER, results

TASKS = 100


def clouds(atu_s: int) -> str:
    return f"""
[clusters.dear]
provisioner = "local"
max = 3
price = 9.0
atu = "{atu_s}s"

[clusters.cheap]
provisioner = "local"
max = 3
price = 3.0
atu = "{atu_s}s"
slowdown = 4.0
"""


@pytest.mark.parametrize("atu_s, schedule", [(6, "fastest"), (15, "cheapest"), (30, "fastest")])
def test_a_short_atu_with_default_settings_finishes_the_bag_within_budget(tmp_path: Path, atu_s, schedule):
    config = tmp_path / "clouds.toml"
    config.write_text(clouds(atu_s))
    bag = tmp_path / "tasks.txt"
    bag.write_text("sleep 1\n" * TASKS)
    proc = subprocess.run([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--schedule", schedule,
                           "--cushion", "yes", "--seed", "1"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=240)
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert report["status"] == "done"
    assert sorted(r["id"] for r in results(tmp_path / "bats-run")) == list(range(1, TASKS + 1))
    cost = report["cost"]
    # the bag is done (above); the execution may owe nothing new when the sampling machines it kept
    # still had paid time enough to finish it, which a 30 s ATU and a loaded machine allow
    assert 0 <= cost["execution"] <= report["budget"] + report["cushion"] + 1e-9


PER_SECOND = """
[clusters.dear]
provisioner = "local"
max = 4
price = 0.9
atu = "1s"
min_charge = "10s"
startup = "2s"

[clusters.cheap]
provisioner = "local"
max = 4
price = 0.3
atu = "1s"
min_charge = "10s"
slowdown = 4.0
startup = "3s"
"""


@pytest.mark.parametrize("schedule", ["cheapest", "fastest"])
def test_per_second_billing_after_a_minimum_with_paid_boots_finishes_within_budget(tmp_path: Path, schedule):
    """Today's clouds scaled down: billed per second after a 10 s minimum, machines that take 2-3 s
    to boot, default settings. Each option's cost is what its machines are billed from the choice
    on, boots included, and the run keeps it (the options once priced the sampling machines'
    minimum twice, 100 times what the execution spent)."""
    config = tmp_path / "clouds.toml"
    config.write_text(PER_SECOND)
    bag = tmp_path / "tasks.txt"
    bag.write_text("sleep 0.2\n" * 120)
    proc = subprocess.run([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--schedule", schedule,
                           "--cushion", "yes", "--seed", "1"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    assert report["status"] == "done"
    assert sorted(r["id"] for r in results(tmp_path / "bats-run")) == list(range(1, 121))
    cost, selected = report["cost"], report["selected"]
    assert 0 <= cost["execution"] <= report["budget"] + report["cushion"] + 1e-9
    assert selected["cost"] <= report["budget"] + 1e-9  # priced from the choice on, not twice
