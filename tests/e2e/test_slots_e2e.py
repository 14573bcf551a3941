"""Machines with several slots through the real master and real local workers."""

from __future__ import annotations

import datetime as dt
import json
import subprocess

import pytest
from helpers.configs import CONFIG
from helpers.runs import MASTER, results, wait_for, write_bag
from rich.console import Console

from bats.master.views.live import one_line, rich_view

ONE_FOUR_SLOT_MACHINE = """
[master]
heartbeat = "0.5s"

[clusters.big]
provisioner = "local"
max = 1
slots = 4
"""


def most_at_once(rows: list[dict], jitter_s: float = 0.1) -> int:
    """The most tasks that ran at the same moment, from each result's runtime and end (when the
    master had the result: a few ms after the task ended, not always the same few, so each span is
    narrowed by ``jitter_s`` at both ends: a slot handed on is not two tasks at once)."""
    moments = []
    for row in rows:
        end = dt.datetime.fromisoformat(row["finished_at"]).timestamp()
        moments += [(end - row["runtime_s"] + jitter_s, 1), (end - jitter_s, -1)]
    running = most = 0
    for _at, step in sorted(moments):
        running += step
        most = max(most, running)
    return most


def test_one_local_machine_with_four_slots_runs_forty_one_second_tasks_four_at_a_time(tmp_path):
    config = tmp_path / "big.toml"
    config.write_text(ONE_FOUR_SLOT_MACHINE)
    bag = write_bag(tmp_path / "tasks.txt", ["sleep 1"] * 40)
    proc = subprocess.run([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--policy", "self"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    (machine,) = report["machines"]
    assert machine["nt"] == 40 and machine["rt_s"] >= 40.0  # rt in slot-seconds
    assert 9.5 < report["makespan_s"] < 25.0  # about 10 s: 40 tasks of 1 s, 4 at a time (one slot: 40 s)
    rows = results(tmp_path / "bats-run")
    assert sorted(r["id"] for r in rows) == list(range(1, 41))
    assert most_at_once(rows) == 4


def test_a_bats_run_on_emulated_clouds_with_several_slots_finishes_within_budget(tmp_path):
    text = CONFIG.replace('atu = "4s"\nslowdown = 3.0', 'atu = "4s"\nslowdown = 3.0\nslots = 2')
    text = text.replace('price = 2.0\natu = "4s"', 'price = 2.0\natu = "4s"\nslots = 3')
    assert text.count("slots =") == 2
    config = tmp_path / "clusters.toml"
    config.write_text(text)
    bag = write_bag(tmp_path / "tasks.txt", [f"sleep 0.2; echo task {i}" for i in range(1, 121)])
    proc = subprocess.run([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--schedule", "fastest",
                           "--seed", "3"], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    cost = report["cost"]
    assert cost["execution"] <= report["budget"] + report["cushion"] + 1e-9
    prices = {name: cl["price"] for name, cl in report["clusters"].items()}
    assert cost["total"] == pytest.approx(sum(m["atus"] * prices[m["cluster"]] for m in report["machines"]))
    rows = results(tmp_path / "bats-run")
    assert len({r["id"] for r in rows}) == len(rows)  # nothing doubled
    if proc.returncode == 0:
        assert report["status"] == "done" and len(rows) == 120
    else:  # a busy test machine can make the plan's money short; the ceiling held and nothing is lost
        assert report["status"] == "incomplete" and "budget" in report["reason"], proc.stderr
    assert {report["clusters"][n]["slots"] for n in ("slow", "fast")} == {2, 3}
    assert max(m["nt"] for m in report["machines"]) > 0


def test_status_shows_a_clusters_slots_and_how_many_are_busy(tmp_path):
    config = tmp_path / "big.toml"
    config.write_text(ONE_FOUR_SLOT_MACHINE)
    go = tmp_path / "go"
    bag = write_bag(tmp_path / "tasks.txt", [f"while [ ! -e {go} ]; do sleep 0.05; done"] * 6)
    state = tmp_path / "run"
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--policy", "self",
                               "--state-dir", str(state)], cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        def busy() -> dict | None:
            answer = subprocess.run([*MASTER, "status", "--state-dir", str(state), "--json"], capture_output=True,
                                    text=True, timeout=60)
            figures = json.loads(answer.stdout) if answer.returncode == 0 else None
            return figures if figures and figures["tasks"]["running"] == 4 else None

        figures = wait_for(busy, 60, "four busy slots")
        big = figures["clusters"]["big"]
        assert (big["slots"], big["busy_slots"]) == (4, 4)
        assert big["machines"][0]["busy"] == 4 and big["machines"][0]["slots"] == 4
        text = subprocess.run([*MASTER, "status", "--state-dir", str(state)], capture_output=True, text=True,
                              timeout=60).stdout
        assert "4 of 4 slots busy (max 1 x 4 slots" in text and "4/4 slots busy" in text
        assert ", 4/4 slots busy," in one_line(figures)  # the log line without a terminal
        console = Console(width=120, record=True)
        console.print(rich_view(figures))
        drawn = console.export_text()
        assert "busy slots" in drawn and "big x4" in drawn and " 4/4 " in drawn
        go.touch()
        _out, err = master.communicate(timeout=60)
        assert master.returncode == 0, err
    finally:
        master.kill()


def test_a_machine_of_1024_slots_runs_its_bag(tmp_path):
    """More tasks go to one machine at once than one frame may carry (the protocol's
    ``MAX_MESSAGES_PER_FRAME``): the master splits its burst, the worker its results, and every task
    runs once."""
    config = tmp_path / "huge.toml"
    config.write_text(ONE_FOUR_SLOT_MACHINE.replace("slots = 4", "slots = 1024"))
    bag = write_bag(tmp_path / "tasks.txt", ["true"] * 600)
    proc = subprocess.run([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--policy", "self"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    (machine,) = report["machines"]
    assert (machine["slots"], machine["nt"]) == (1024, 600)
    assert sorted(r["id"] for r in results(tmp_path / "bats-run")) == list(range(1, 601))
