"""A task that kills its own machine (as an out-of-memory kill of the worker would) takes down at
most ``--max-machine-losses`` machines: then it is quarantined, named in the log and the report,
and the rest of the bag runs; machines lost together (a mass spot interruption) quarantine no task.
The real master, real local workers (``bats.master.core.losses`` says which losses count)."""

from __future__ import annotations

import json
import subprocess

from helpers.runs import MASTER, kill_all, results, run_master, wait_for, workers_of, write_bag


def test_a_task_that_kills_its_machine_is_quarantined_after_two_losses(tmp_path):
    commands = [f"echo {i}" for i in range(1, 9)]
    # task 4 grows for a second, then its machine dies (its shell's parent is the worker)
    commands[3] = "sleep 1; kill -9 $PPID; sleep 5"
    bag = write_bag(tmp_path / "tasks.txt", commands)
    run = run_master(["--bag", str(bag), "--workers", "2", "--state-dir", str(tmp_path / "run")], tmp_path)
    assert run.returncode == 1, run.stderr  # the bag is incomplete: one task failed
    assert "task 4 was on 2 machines that were lost" in run.stderr
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["tasks"]["quarantined_ids"] == [4] and report["tasks"]["done"] == 7
    lost = [m for m in report["machines"] if m["release_reason"] and "exited" in m["release_reason"]]
    assert len(lost) <= 2, report["machines"]
    rows = {r["id"]: r for r in results(tmp_path / "run")}
    assert rows[4]["status"] == "failed" and sorted(rows) == list(range(1, 9))


def test_tasks_that_kill_their_worker_at_once_are_quarantined_and_take_down_two_machines_each(tmp_path):
    # a kill within milliseconds of the start (as an out-of-memory crash of a greedy start-up): the
    # worker may die before the result of the task it ran just before has left, so the master cannot
    # tell which of the two it held did it; both are suspects, and a suspect is never queued again,
    # so its next machine is its own
    commands = ["true"] * 200
    commands[39] = commands[149] = "kill -9 $PPID"
    bag = write_bag(tmp_path / "tasks.txt", commands)
    run = run_master(["--bag", str(bag), "--workers", "2", "--state-dir", str(tmp_path / "run")], tmp_path)
    assert run.returncode == 1, run.stderr
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["tasks"]["quarantined_ids"] == [40, 150] and report["tasks"]["done"] == 198
    lost = [m for m in report["machines"] if m["release_reason"] not in ("bag done", "")
            and "given up on" not in m["release_reason"]]
    assert len(lost) <= 4, [m["release_reason"] for m in report["machines"]]


def _machine(proc) -> str:
    argv = proc.cmdline()
    return argv[argv.index("--machine") + 1]


def _kill_once_each_did_a_task(state, procs) -> None:
    """Kill ``procs`` at once, when each one's machine has a result in the journal (a cluster whose
    machines are lost before doing any task looks broken, and is not given new ones)."""
    wanted = {_machine(p) for p in procs}
    wait_for(lambda: wanted <= {r["machine"] for r in results(state)}, 60, f"a result from each of {wanted}")
    kill_all(procs)


def test_machines_lost_together_twice_quarantine_no_task(tmp_path):
    # 3 of 4 workers killed at once, twice (a mass spot interruption), the second time the 3 that
    # replaced them and run what the first ones held: every task is done, none quarantined
    bag = write_bag(tmp_path / "tasks.txt", ["sleep 1"] * 24)
    state = tmp_path / "run"
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--workers", "4", "--state-dir", str(state)],
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        first = wait_for(lambda: len(workers_of(master.pid)) == 4 and workers_of(master.pid), 60, "4 workers")
        _kill_once_each_did_a_task(state, sorted(first, key=lambda p: p.create_time())[1:])
        old = {p.pid for p in first}
        fresh = wait_for(lambda: len([p for p in workers_of(master.pid) if p.pid not in old]) >= 3
                         and [p for p in workers_of(master.pid) if p.pid not in old], 60, "3 new workers")
        _kill_once_each_did_a_task(state, fresh[:3])
        _out, err = master.communicate(timeout=120)
    finally:
        master.kill()
    assert master.returncode == 0, err
    report = json.loads((state / "report.json").read_text())
    assert report["tasks"]["done"] == 24 and "quarantined_ids" not in report["tasks"], report["tasks"]
