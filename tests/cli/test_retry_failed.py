"""``--resume --retry-failed``: the failed tasks of a run (nonzero exit, timeout) run again, the ones
that succeeded do not, and each task keeps one result (as GNU parallel's --resume-failed)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers.runs import MASTER, results, write_bag


def _master(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MASTER, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_retry_failed_runs_only_the_failed_tasks_and_counts_each_task_once(tmp_path: Path):
    # each task leaves a mark per run; task 2 fails until fixed exists, task 4 times out until then
    bag = write_bag(tmp_path / "tasks.txt", [
        "echo 1 >> runs.log",
        "echo 2 >> runs.log; test -f fixed",
        "echo 3 >> runs.log",
        "echo 4 >> runs.log; test -f fixed || sleep 30",
    ])
    first = _master(tmp_path, "--bag", str(bag), "--workers", "2", "--task-timeout", "2s")
    assert first.returncode == 1, first.stderr
    assert "failed    task(s) 2, 4" in first.stdout
    assert sorted((tmp_path / "runs.log").read_text().split()) == ["1", "2", "3", "4"]

    (tmp_path / "fixed").write_text("")
    again = _master(tmp_path, "--resume", "--retry-failed")
    assert again.returncode == 0, again.stderr
    assert "retrying 2 failed task(s)" in again.stderr
    assert "4 done, 0 failed, 0 not run, of 4" in again.stdout
    # the tasks that had succeeded did not run again
    assert sorted((tmp_path / "runs.log").read_text().split()) == ["1", "2", "2", "3", "4", "4"]
    rows = results(tmp_path / "bats-run")
    assert [row["id"] for row in rows] == [1, 2, 3, 4]  # one result per task, its latest
    assert all(row["status"] == "done" for row in rows)
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    assert report["tasks"] == {"total": 4, "done": 4, "failed": 0, "not_run": 0}

    # nothing failed now: said so, nothing runs, the run stays done
    third = _master(tmp_path, "--resume", "--retry-failed")
    assert third.returncode == 0, third.stderr
    assert "no task of this run failed: nothing to retry" in third.stderr
    assert len((tmp_path / "runs.log").read_text().split()) == 6


def test_retry_failed_without_resume_is_bad_input(tmp_path: Path):
    bag = write_bag(tmp_path / "tasks.txt", ["true"])
    proc = _master(tmp_path, "--bag", str(bag), "--retry-failed")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == ("bats-master: error: --retry-failed goes with --resume (it re-runs the failed "
                                   "tasks of the run in --state-dir)")
    assert not (tmp_path / "bats-run").exists()
