"""Failure handling with real processes: stopping the master releases (or keeps) every machine and
says which; a provisioner that hangs never holds up dispatch; a paused worker's stale result is
not counted twice.
"""

from __future__ import annotations

import json
import random
import re
import signal
from pathlib import Path

import psutil
from helpers import faults
from helpers.faults import MasterRun, audit, wait_for


def _stop_with(tmp_path: Path, signals: int, extra: tuple[str, ...] = ()) -> tuple[MasterRun, list[psutil.Process]]:
    run = MasterRun(tmp_path / "s", n_tasks=6, task="sleep 30")
    run.prepare()
    run.start(extra=extra)
    try:
        workers = wait_for(lambda: len(run.workers_now()) == 2 and run.workers_now(), 30, "two workers")
        wait_for(lambda: run.started_tasks() >= 2, 30, "both workers busy")
        for _ in range(signals):
            run.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        assert run.wait(timeout=60) == 1, run.output()
    finally:
        run.kill()
    return run, workers


def _machine_ids(text: str) -> set[str]:
    return set(re.findall(r"\bc-s1-\d+\b", text))


def test_sigterm_releases_every_machine_and_names_them(tmp_path):
    run, workers = _stop_with(tmp_path, 1)
    out = run.output()
    released = [line for line in out.splitlines() if "released 2 machine(s)" in line]
    assert len(released) == 1, out
    assert _machine_ids(released[0]) == {"c-s1-1", "c-s1-2"}
    assert all(str(w.pid) in released[0] for w in workers)  # with the back end's own ids
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)
    report = json.loads((run.state / "report.json").read_text())
    assert report["status"] == "incomplete" and report["tasks"]["not_run"] == 6


def test_a_second_sigterm_stops_at_once_and_still_releases(tmp_path):
    run, workers = _stop_with(tmp_path, 2)
    out = run.output()
    assert "Traceback" not in out
    assert any("released 2 machine(s)" in line for line in out.splitlines()), out
    assert (run.state / "report.json").exists()


def test_keep_machines_leaves_them_and_says_so(tmp_path):
    run, _workers = _stop_with(tmp_path, 1, ("--keep-machines",))
    out = run.output()
    kept = [line for line in out.splitlines() if "kept 2 machine(s) running" in line]
    assert len(kept) == 1 and _machine_ids(kept[0]) == {"c-s1-1", "c-s1-2"}, out
    assert "released" not in out


def test_a_hanging_provisioner_never_blocks_dispatch(tmp_path):
    # every status query hangs for a minute (far past its 0.5 s timeout): the bag still runs at
    # full speed, and the machines are still released at the end
    run = MasterRun(tmp_path / "s", n_tasks=30, task="sleep 0.1", provisioner="flaky",
                    config_extra='fail_rate = 1\nfail_calls = ["status"]\nhang = "60s"\ncall_timeout = "0.5s"\n')
    run.prepare()
    run.start(extra=("-v",))
    try:
        assert run.wait(timeout=60) == 0, run.output()
    finally:
        run.kill()
    out = run.output()
    assert "status query failed: no answer within 0.5s" in out
    assert "released 2 machine(s)" in out
    result = audit(run.state)
    assert result.ok and result.machines == 2, result


def test_paused_worker_is_not_counted_twice(tmp_path):
    """SIGSTOP past the liveness limit, SIGCONT after the master gave up on the worker: its result
    arrives (the release takes effect late, as a cloud's does) and is dropped, not counted again."""
    result = faults.pause_worker(tmp_path / "s", random.Random(1))
    assert result.ok and result.double == 0 and result.lost == 0, result

