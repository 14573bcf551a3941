"""What an operator sees while a bag runs, and the example files the repository ships."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from terminal import run_on_terminal

from bats import provisioners
from bats.common.config import load_config
from bats.master.state.bag import load_bag

ROOT = Path(__file__).resolve().parents[1]
MASTER = [sys.executable, "-m", "bats.master.cli"]


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
