"""--deadline and --policy adaptive through the real master and real local workers (emulated
clouds with an ATU of a few seconds, as tests/test_bats_e2e.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_bats_e2e import CONFIG, results

MASTER = [sys.executable, "-m", "bats.master.cli"]
TASKS = 60
ADAPTIVE = """
[master]
heartbeat = "0.5s"
liveness = "5s"
monitor_interval = "1s"
release_margin = "0.5s"

[policy.adaptive]
creation_ratio = 0.75
increase_ratio = 0.75

[clusters.cloud]
provisioner = "local"
max = 4
price = 1.0
atu = "4s"
"""


def setup(tmp_path: Path, config: str) -> tuple[Path, Path]:
    path = tmp_path / "clusters.toml"
    path.write_text(config)
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f"sleep 0.2; echo task {i}\n" for i in range(1, TASKS + 1)))
    return path, bag


def run(tmp_path: Path, config: str, *flags: str) -> tuple[subprocess.CompletedProcess, dict]:
    path, bag = setup(tmp_path, config)
    proc = subprocess.run([*MASTER, "--quiet", "--bag", str(bag), "--config", str(path), "--seed", "3", *flags],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    return proc, json.loads((tmp_path / "bats-run" / "report.json").read_text())


def test_deadline_run_samples_plans_and_finishes(tmp_path):
    proc, report = run(tmp_path, CONFIG + '\n[policy.deadline]\ninterval = "2s"\n', "--deadline", "40s")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert report["status"] == "done" and report["policy"] == "deadline"
    assert sorted(r["id"] for r in results(tmp_path / "bats-run")) == list(range(1, TASKS + 1))
    plan = report["deadline"]["plans"][0]
    assert plan["meets_deadline"] and plan["intervals_s"][1] == 2.0 and plan["text"] in proc.stdout
    assert report["deadline"]["deadline_s"] == 40.0 and "deadline  40s" in proc.stdout
    assert set(report["estimates"]) == {"slow", "fast"} and report["cost"]["sampling"] > 0


def test_an_infeasible_deadline_is_one_line_with_the_earliest_feasible_one(tmp_path):
    proc, report = run(tmp_path, CONFIG, "--deadline", "2s")
    assert proc.returncode == 1
    assert report["status"] == "incomplete" and "cannot be met: the earliest feasible deadline is about" in report["reason"]
    assert "\n" not in report["reason"] and report["deadline"]["earliest_feasible_s"] > 2.0
    assert all(m["state"] == "gone" for m in report["machines"])


def test_adaptive_run_grows_from_one_host_within_the_cluster_max(tmp_path):
    proc, report = run(tmp_path, ADAPTIVE, "--policy", "adaptive")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert report["status"] == "done" and report["policy"] == "adaptive"
    info = report["adaptive"]
    assert info["creations"] and 1 < info["hosts"] and info["peak_hosts"] <= 4
    assert info["creation_ratio"] == 0.75 and "adaptive  " in proc.stdout
    assert sorted(r["id"] for r in results(tmp_path / "bats-run")) == list(range(1, TASKS + 1))


OFFERS = """
[master]
heartbeat = "0.5s"
liveness = "5s"

[policy.offers]
task_runtime = "0.2s"

[clusters.busy]
provisioner = "local"
max = 3
background_trace = "busy.csv"

[clusters.quiet]
provisioner = "local"
max = 2
"""


def test_offers_run_splits_the_bag_between_two_local_pools(tmp_path):
    """Two local clusters make offers (the local provisioner's EDF hook; "busy" has 2 of its 3
    slots taken by its trace for a minute), the core composes them, each runs only its share."""
    (tmp_path / "busy.csv").write_text("0, 2, 60s\n")
    proc, report = run(tmp_path, OFFERS, "--policy", "offers", "--deadline", "30s")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert report["status"] == "done" and report["policy"] == "offers"
    info = report["offers"]
    assert {o["pool"] for o in info["offers"]} == {"busy", "quiet"}
    assert info["composite"]["policy"] in ("OffersNoLB", "OffersWithPLB")
    assert sum(info["composite"]["assigned"].values()) == TASKS
    assert info["task_runs_by_cluster"] == info["composite"]["assigned"]  # each machine ran its own share
    assert sorted(r["id"] for r in results(tmp_path / "bats-run")) == list(range(1, TASKS + 1))
    assert "offers    " in proc.stdout and all(m["state"] == "gone" for m in report["machines"])
