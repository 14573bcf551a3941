"""A task that kills its own machine (as an out-of-memory kill of the worker would) takes down at
most ``--max-machine-losses`` machines: then it is quarantined, named in the log and the report,
and the rest of the bag runs. The real master, real local workers."""

from __future__ import annotations

import json

from helpers.runs import results, run_master, write_bag


def test_a_task_that_kills_its_machine_is_quarantined_after_two_losses(tmp_path):
    commands = [f"echo {i}" for i in range(1, 9)]
    # task 4 grows for a second, then its machine dies (its shell's parent is the worker)
    commands[3] = "sleep 1; kill -9 $PPID; sleep 5"
    bag = write_bag(tmp_path / "tasks.txt", commands)
    run = run_master(["--bag", str(bag), "--workers", "2", "--state-dir", str(tmp_path / "run")], tmp_path)
    assert run.returncode == 1, run.stderr  # the bag is incomplete: one task failed
    assert "task 4 was running on 2 machines that were lost" in run.stderr
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["tasks"]["quarantined_ids"] == [4] and report["tasks"]["done"] == 7
    lost = [m for m in report["machines"] if m["release_reason"] and "exited" in m["release_reason"]]
    assert len(lost) <= 2, report["machines"]
    rows = {r["id"]: r for r in results(tmp_path / "run")}
    assert rows[4]["status"] == "failed" and sorted(rows) == list(range(1, 9))
