"""What an operator sees while a bag runs, and the example files the repository ships."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers.runs import MASTER
from helpers.terminal import run_on_terminal

from bats import provisioners
from bats.common.config import load_config
from bats.master.state.bag import load_bag

ROOT = Path(__file__).resolve().parents[2]


def test_without_a_terminal_progress_is_a_log_line_every_few_seconds(tmp_path):
    bag = tmp_path / "tasks.txt"
    bag.write_text("sleep 6\ntrue\n")
    proc = subprocess.run([*MASTER, "--bag", str(bag), "--workers", "2"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "progress:" in line]
    assert lines and "1/2 tasks finished" in lines[0] and "machines up" in lines[0]


def test_on_a_terminal_progress_is_a_live_bar(tmp_path):
    bag = tmp_path / "tasks.txt"
    bag.write_text("sleep 1.5\n" * 4)
    code, text = run_on_terminal([*MASTER, "--bag", str(bag), "--workers", "2"], tmp_path, timeout=60)
    assert code == 0, text
    assert "bats" in text and "/4" in text and "tasks/s" in text  # the live bar
    assert "DONE" in text


def test_shipped_example_bag_and_configs_are_valid():
    assert len(load_bag(ROOT / "examples" / "tasks.txt")) >= 10
    config = load_config(ROOT / "deploy" / "clusters.emulated.toml", provisioners.options_of)
    assert set(config.clusters) == {"cluster1", "cluster2"}
    assert config.clusters["cluster1"].options["slowdown"] == 4.0


def test_the_example_configs_load_with_every_provisioner_check():
    from bats.master.cli.args import load_cluster_config

    local = load_cluster_config(str(ROOT / "examples" / "local-clouds.toml"), None)
    assert set(local.clusters) == {"fast", "medium", "slow"}
    assert len({cl.price for cl in local.clusters.values()}) == 3  # three prices, three speeds
    assert len({cl.options.get("slowdown", 1.0) for cl in local.clusters.values()}) == 3
    cloud = load_cluster_config(str(ROOT / "examples" / "cloud-and-ssh.toml"), None)
    assert {cl.provisioner for cl in cloud.clusters.values()} == {"ssh", "ec2"}
    assert cloud.clusters["spot"].market == "spot"


def test_the_demo_bag_leaves_work_to_plan_and_its_options_are_offered():
    """What `make demo-bats` shows, without running it: the dry run of the demo bag on the three
    emulated clouds samples part of the bag and offers options for the rest, with a choice that
    --schedule budget:30 makes."""
    makefile = (ROOT / "Makefile").read_text()
    assert "demo-bats:" in makefile and "examples/local-clouds.toml" in makefile
    assert "make demo-bats" in (ROOT / "README.md").read_text()
    bag = load_bag(ROOT / "examples" / "demo-tasks.txt")
    proc = subprocess.run([*MASTER, "--dry-run", "--bag", str(ROOT / "examples" / "demo-tasks.txt"), "--config",
                           str(ROOT / "examples" / "local-clouds.toml"), "--guess-runtime", "1s", "--schedule",
                           "budget:30"], capture_output=True, text=True, timeout=120, cwd=ROOT / "examples")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"sampling n_s = 24 task(s) of {len(bag)}" in out
    assert f"options for the {len(bag) - 24} task(s) left" in out
    rows = [line.split() for line in out.splitlines() if line[:3].strip().isdigit()]
    assert len(rows) >= 5 and rows[0][1] == "cheapest" and rows[-1][1] == "fastest"
    costs = [float(row[-5]) for row in rows]  # ... cost budget cushion P50/P90 P50/P99
    assert costs == sorted(costs) and costs[0] < 30 < costs[-1]  # the budget picks an option in between
    assert "--schedule budget:30 would run option" in out
