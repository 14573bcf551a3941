"""Watching a run: ``bats-master status`` from another terminal against a real master and real
local workers, and what it says when no run is active. The tasks wait for a file the test creates,
so the run is certainly going while the status is asked (no timed assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

MASTER = [sys.executable, "-m", "bats.master.cli"]
CONFIG = """
[master]
heartbeat = "0.5s"
liveness = "10s"
monitor_interval = "1s"
release_margin = "0.5s"

[sampling]
initial_workers = 1

[clusters.slow]
provisioner = "local"
max = 2
price = 1.0
atu = "30s"

[clusters.fast]
provisioner = "local"
max = 2
price = 2.0
atu = "30s"
"""


def status(state_dir: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([*MASTER, "status", "--state-dir", str(state_dir), *flags], capture_output=True,
                          text=True, timeout=60)


def wait_for(predicate, what: str, limit_s: float = 90.0):
    """Poll until ``predicate()`` is truthy; the limit only stops a broken run from hanging the suite."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"gave up waiting for {what}")


def test_status_against_a_running_master_then_no_run_active(tmp_path):
    go = tmp_path / "go"
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f"while [ ! -e {go} ]; do sleep 0.05; done; echo {i}\n" for i in range(1, 41)))
    config = tmp_path / "clusters.toml"
    config.write_text(CONFIG)
    state = tmp_path / "run"
    never = status(state)
    assert never.returncode == 1 and "no such state dir" in never.stderr
    master = subprocess.Popen([*MASTER, "--bag", str(bag), "--config", str(config), "--state-dir", str(state),
                               "--schedule", "fastest", "--cushion", "yes"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def running() -> dict | None:
            answer = status(state, "--json")
            if answer.returncode != 0:
                return None
            figures = json.loads(answer.stdout)
            up = sum(c["up"] for c in figures["clusters"].values())
            return figures if up >= 2 and figures["tasks"]["running"] >= 2 else None

        figures = wait_for(running, "the machines to run tasks")
        assert figures["tasks"]["total"] == 40 and figures["tasks"]["done"] == 0
        assert figures["policy"] == "bats" and figures["phase"] == "sampling"
        assert set(figures["clusters"]) == {"slow", "fast"}
        assert figures["money"]["spent"] >= 3.0  # one ATU begun on each sampling machine
        machine = figures["clusters"]["fast"]["machines"][0]
        assert machine["atu"] == 1 and machine["atu_s"] == 30.0
        text = status(state)
        assert text.returncode == 0
        for fragment in ("tasks      0 done", "2 running", "40 left", "money      spent", "slow-s1-1", "ATU 1"):
            assert fragment in text.stdout, text.stdout
        go.touch()  # let the tasks finish
        _out, err = master.communicate(timeout=120)
        assert master.returncode == 0, err
    finally:
        if master.poll() is None:
            master.kill()
            master.wait()
    after = status(state)
    assert after.returncode == 1
    assert "no run is active here" in after.stderr and len(after.stderr.strip().splitlines()) == 1
    assert not (state / "control.json").exists()
