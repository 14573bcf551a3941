"""What a resumed run says about the sessions before it: every task run counted on the machine that
ran it, machines of a killed master marked gone with why, and a finished run left as it was."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from helpers.runs import MASTER, kill_all, run_master, wait_for, workers_of, write_bag

from bats.master.state.journal import Journal

CONFIG = '[clusters.local]\nprovisioner = "local"\nmax = 2\n'


def test_a_run_resumed_after_kill_9_counts_every_task_run_on_its_machine(tmp_path: Path):
    (tmp_path / "clusters.toml").write_text(CONFIG)
    marks = tmp_path / "marks"
    bag = write_bag(tmp_path / "tasks.txt", [f"echo {i} >> {marks}; sleep 0.1" for i in range(1, 61)])
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", "clusters.toml"], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: marks.exists() and len(marks.read_text().split()) >= 25, 60, "25 tasks to start")
        workers = workers_of(master.pid)
        master.send_signal(signal.SIGKILL)
        master.wait(timeout=10)
        kill_all(workers)
    finally:
        master.kill()
    resumed = run_master(["--resume"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    first = [m for m in report["machines"] if m["session"] == 1]
    assert first and all(m["release_reason"] not in ("", "gone", "master stopped") for m in first), first
    with Journal.open(tmp_path / "bats-run") as journal:
        runs = journal.runs_by_machine()
        rows = journal.machines()
    assert sum(n for n, _ in runs.values()) == 60
    for row in rows:  # each machine's count holds at least the results it delivered
        assert row["nt"] >= runs.get(row["machine_id"], (0, 0.0))[0], row
        if row["session"] == 1:
            assert row["state"] == "gone" and row["released_at"] is not None and row["reason"], row


def test_resuming_a_finished_run_changes_nothing(tmp_path: Path):
    (tmp_path / "clusters.toml").write_text(CONFIG)
    bag = write_bag(tmp_path / "tasks.txt", ["sleep 0.1"] * 6)
    assert run_master(["--bag", str(bag), "--config", "clusters.toml"], tmp_path).returncode == 0
    report = tmp_path / "bats-run" / "report.json"
    before = report.read_bytes()
    with Journal.open(tmp_path / "bats-run") as journal:
        sessions = journal.sessions()
    again = run_master(["--resume"], tmp_path)
    assert again.returncode == 0, again.stderr
    assert "6 done" in again.stdout
    assert report.read_bytes() == before  # its makespan is still the run's, not run-to-now
    with Journal.open(tmp_path / "bats-run") as journal:
        assert journal.sessions() == sessions


def test_a_run_resumed_after_plan_only_plans_from_its_sample_instead_of_sampling_again(tmp_path: Path):
    from helpers.configs import watched_clouds

    (tmp_path / "clusters.toml").write_text(watched_clouds(2))  # 30 s ATUs: the plan has room
    bag = write_bag(tmp_path / "tasks.txt", ["sleep 0.3"] * 60)
    first = run_master(["--bag", str(bag), "--config", "clusters.toml", "--plan-only", "--seed", "3"], tmp_path)
    assert first.returncode == 0, first.stderr
    with Journal.open(tmp_path / "bats-run") as journal:
        sampled = journal.meta["sample"]
        done_first = len(journal.finished_tasks())
    assert sampled["session"] == 1 and sampled["sets"] and done_first > 0
    second = subprocess.run([*MASTER, "--resume", "--schedule", "fastest", "--cushion", "yes"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=240)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "planning with the sample an earlier session" in second.stderr + second.stdout
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    first_cost = sum(m["cost"] for m in report["machines"] if m["session"] == 1)
    assert report["cost"]["sampling"] == first_cost  # the second session's money is all execution
    assert report["cost"]["execution"] == sum(m["cost"] for m in report["machines"] if m["session"] == 2)
    with Journal.open(tmp_path / "bats-run") as journal:
        assert sorted(journal.finished_tasks()) == list(range(1, 61))
        # no replicated copies in the second session: its machines ran only tasks left after the first
        second_runs = sum(n for machine, (n, _) in journal.runs_by_machine().items() if "-s2-" in machine)
    assert second_runs == 60 - done_first


def test_a_killed_masters_machine_is_up_until_its_last_result_and_pays_every_atu_begun(tmp_path: Path):
    """The machine rows of a killed master are written every few seconds, its results at once: a
    machine's row may miss its last tasks. Settled on --resume, its uptime reaches its last result
    (busy never shows more than uptime) and the ATUs begun until then are charged."""
    from bats.common.config import load_config
    from bats.master.state.leftovers import settle_earlier_sessions
    from bats.provisioners import options_of

    (tmp_path / "c.toml").write_text('[clusters.c]\nprovisioner = "local"\nmax = 1\nprice = 2.0\natu = "10s"\n')
    config = load_config(tmp_path / "c.toml", options_of)
    with Journal.create(tmp_path / "run", "r", {}) as journal:
        journal.add_session(1000.0)
        journal.record_machine("c-s1-1", "c", 1, 1000.0, 1001.0, None, 2, 8.0, 9.0, 1, 2.0, "up")
        for task, end in ((1, 1005.0), (2, 1009.0), (3, 1024.0)):  # the third after the row's last write
            journal.record_result(task, "done", 0, 4.0, "c-s1-1", 1, False, b"", b"", end)
        journal.flush()
        assert settle_earlier_sessions(journal, 2, {"c"}, config) == 1
        row = journal.machines()[0]
    assert (row["nt"], row["rt_s"], row["uptime_s"]) == (3, 12.0, 24.0)
    assert (row["atus"], row["cost"]) == (3, 6.0)
    assert row["rt_s"] <= row["uptime_s"] and row["state"] == "gone"
