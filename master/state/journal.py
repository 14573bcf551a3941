"""The run's SQLite journal: ``STATE_DIR/journal.sqlite``.

How it works
------------
One run lives in a state directory; its journal is a single SQLite file in WAL mode with
``synchronous=NORMAL``: a committed transaction survives a ``kill -9`` of the master (only a power
cut may lose the last few). Results arrive at thousands per second, so :meth:`Journal.record_result`,
:meth:`Journal.record_machine` and :meth:`Journal.set_meta` only put the row in an in-memory buffer
(latest row per key wins) and :meth:`Journal.flush` writes the whole buffer in one transaction with
``executemany``. The server flushes every ~0.2 s and at exit; a result that was never committed
simply runs again after ``--resume``. If a flush fails (disk full, I/O error, database locked) the
transaction is rolled back, the buffer is kept intact and :class:`JournalError` is raised, so a
later flush can still write everything. :meth:`Journal.add_session` is the one write committed at
once. Reads (:meth:`Journal.results`, :meth:`Journal.finished_tasks`, :meth:`Journal.machines`)
see the committed rows overlaid with the rows still in the buffer, and never write.

The WAL holds every commit since the last checkpoint, so a WAL deleted after a crash would take
those results with it and a ``--resume`` would silently run their tasks again. After each commit
that adds results, their count is written to ``journal.sqlite-mark`` (replaced whole, not synced:
it only has to survive the master, not the machine); :meth:`Journal.lost_results` compares it with
the rows the journal holds, and ``--resume`` refuses a journal that has lost some.

A file is recognised as a BaTS journal by ``PRAGMA application_id`` (``0x42615453``, "BaTS") and
its schema version by ``PRAGMA user_version`` (also kept as the meta key ``schema_version``).

Schema (version 1)
------------------
``meta(key TEXT PRIMARY KEY, value TEXT)``
    ``value`` is JSON. Always holds ``run_id`` and ``schema_version``, plus whatever the master
    stores: bag path and sha256, settings, started_at, the chosen option, the acquisitions under way
    (``acquiring``: session, cluster, n, asked_at of each; see :mod:`bats.master.state.leftovers`), ...
``sessions(id INTEGER PRIMARY KEY, started_at REAL)``
    One row per master session: the first run is 1, each ``--resume`` adds one.
``results(seq INTEGER PRIMARY KEY, task_id INTEGER, status TEXT, exit_code INTEGER, runtime_s REAL,
machine TEXT, attempts INTEGER, timed_out INTEGER, stdout BLOB, stderr BLOB, finished_at REAL)``
    One row per task's final result, appended in the order results arrive: tasks finish in random
    order, and appending costs a third of inserting at random task ids (about 5 against 15 µs a
    row, measured on the development machine), which matters at thousands of tasks per second.
    The core records a task's final result once; should a task ever appear twice, readers take
    its latest row, as an upsert would have left it. ``--resume --retry-failed`` relies on that: a failed
    task run again appends its new result, which every reader then takes (the failed row stays, and still
    counts as a run of the machine that ran it). ``status`` is ``done`` or ``failed``; the output tails are stored as raw bytes
    and decoded (UTF-8, ``errors="replace"``) when read.
``machines(machine_id TEXT PRIMARY KEY, cluster TEXT, session INTEGER, acquired_at REAL,
ready_at REAL, released_at REAL, nt INTEGER, rt_s REAL, uptime_s REAL, atus INTEGER, cost REAL,
state TEXT)``
    One row per machine ever acquired, in any session, upserted as its counters change.

Times are seconds since the epoch (floats). A :class:`Journal` may be shared between threads: a
lock guards the buffer and the connection.
"""

from __future__ import annotations

import contextlib
import copy
import heapq
import itertools
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Self

log = logging.getLogger(__name__)

JOURNAL_NAME = "journal.sqlite"
MARK_NAME = "journal.sqlite-mark"  # how many result rows the journal has committed
APPLICATION_ID = 0x42615453  # "BaTS"
SCHEMA_VERSION = 2  # 2: machines.reason (why each machine left the run)
RESULT_STATUSES = ("done", "failed")
_BUSY_TIMEOUT_S = 10.0

_SCHEMA = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE sessions (
    id         INTEGER PRIMARY KEY,
    started_at REAL NOT NULL
);
CREATE TABLE results (
    seq         INTEGER PRIMARY KEY,
    task_id     INTEGER NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('done', 'failed')),
    exit_code   INTEGER,
    runtime_s   REAL,
    machine     TEXT NOT NULL,
    attempts    INTEGER NOT NULL,
    timed_out   INTEGER NOT NULL,
    stdout      BLOB NOT NULL,
    stderr      BLOB NOT NULL,
    finished_at REAL NOT NULL
);
CREATE TABLE machines (
    machine_id  TEXT PRIMARY KEY,
    cluster     TEXT NOT NULL,
    session     INTEGER NOT NULL,
    acquired_at REAL NOT NULL,
    ready_at    REAL,
    released_at REAL,
    nt          INTEGER NOT NULL,
    rt_s        REAL NOT NULL,
    uptime_s    REAL NOT NULL,
    atus        INTEGER NOT NULL,
    cost        REAL NOT NULL,
    state       TEXT NOT NULL,
    reason      TEXT NOT NULL DEFAULT ''
);
"""

_RESULT_COLUMNS = "task_id, status, exit_code, runtime_s, machine, attempts, timed_out, stdout, stderr, finished_at"
_MACHINE_COLUMNS = (
    "machine_id, cluster, session, acquired_at, ready_at, released_at, nt, rt_s, uptime_s, atus, cost, state, reason"
)
_MACHINE_KEYS = tuple(name.strip() for name in _MACHINE_COLUMNS.split(","))
_INSERT_RESULT = f"INSERT INTO results ({_RESULT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_INSERT_MACHINE = f"INSERT OR REPLACE INTO machines ({_MACHINE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
# what each older schema needs to become the current one, applied in order when a journal is opened
_MIGRATIONS = {1: "ALTER TABLE machines ADD COLUMN reason TEXT NOT NULL DEFAULT ''"}
_INSERT_META = "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)"

ResultRow = tuple[int, str, int | None, float | None, str, int, int, bytes, bytes, float]
MachineRow = tuple[Any, ...]


# sqlite3 binds int, float and str as they are, but asks every other value (bytes too) whether it
# adapts itself, through two failed attribute lookups whose errors are formatted and thrown away:
# the two output tails of each result row, half its cost in executemany (3.4 -> 1.6 us a row on the
# development machine). Registered, bytes are found in the adapters' table and bound as they are.
sqlite3.register_adapter(bytes, bytes)


class JournalError(RuntimeError):
    """The journal cannot be created, opened, read or written; the message is one line."""


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _is_disk_full(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "full" in str(exc).lower()


def _as_bytes(data: bytes | bytearray | memoryview | str) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8", errors="replace")
    return bytes(data)


def _opt_float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _decode(data: bytes | str | None) -> str:
    if data is None:
        return ""
    if isinstance(data, str):
        return data
    return bytes(data).decode("utf-8", errors="replace")


def _result_dict(row: ResultRow | tuple[Any, ...]) -> dict[str, Any]:
    task_id, status, exit_code, runtime_s, machine, attempts, timed_out, stdout, stderr, finished_at = row
    return {
        "id": task_id,
        "status": status,
        "exit_code": exit_code,
        "runtime_s": runtime_s,
        "machine": machine,
        "attempts": attempts,
        "timed_out": bool(timed_out),
        "stdout": _decode(stdout),
        "stderr": _decode(stderr),
        "finished_at": finished_at,
    }


def _connect(path: Path, *, must_exist: bool) -> sqlite3.Connection:
    if must_exist:
        # mode=rw: never create an empty database where the user pointed at a missing one
        target, uri = path.resolve().as_uri() + "?mode=rw", True
    else:
        target, uri = str(path), False
    return sqlite3.connect(target, uri=uri, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)


def _checkpoint(conn: sqlite3.Connection) -> None:
    """Copy the WAL's committed pages into the main database file (and empty the WAL)."""
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error as exc:  # a reader holding the WAL: the next checkpoint will do it
        log.debug("journal checkpoint postponed: %s", _one_line(exc))


def _use_wal(conn: sqlite3.Connection, path: Path) -> None:
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        log.warning("%s: SQLite refused WAL mode (got %r); a crash may lose more results", path, mode)
    conn.execute("PRAGMA synchronous=NORMAL")


class Journal:
    """One run's journal; build it with :meth:`create` or :meth:`open`, never directly."""

    def __init__(self, path: Path, conn: sqlite3.Connection, meta: dict[str, Any]) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = conn
        self._meta = meta
        self._lock = threading.RLock()
        self._pending_results: dict[int, ResultRow] = {}
        self._pending_machines: dict[str, MachineRow] = {}
        self._pending_meta: dict[str, str] = {}
        self._mark = path.with_name(MARK_NAME)
        self._committed = conn.execute("SELECT count(*) FROM results").fetchone()[0]

    # ------------------------------------------------------------------ opening

    @classmethod
    def create(cls, state_dir: str | Path, run_id: str, meta: dict[str, Any]) -> Journal:
        """Start a new journal in ``state_dir`` (made if needed); refuse if one is already there."""
        directory = Path(state_dir)
        path = directory / JOURNAL_NAME
        reserved = {"run_id", "schema_version"} & meta.keys()
        if reserved:
            raise ValueError(f"meta keys {sorted(reserved)} are reserved by the journal")
        stored = {"run_id": str(run_id), "schema_version": SCHEMA_VERSION, **meta}
        encoded = [(key, json.dumps(value)) for key, value in stored.items()]  # TypeError if not JSON-able
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except FileExistsError:
            raise JournalError(f"{directory}: cannot create the state dir: a file is in the way") from None
        except OSError as exc:
            raise JournalError(f"{directory}: cannot create the state dir: {exc.strerror or exc}") from None
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # the WAL gets the same mode
        except FileExistsError:
            raise JournalError(
                f"{path} already exists: pass --resume to continue that run or choose another --state-dir"
            ) from None
        except OSError as exc:
            raise JournalError(f"{path}: cannot create the journal: {exc.strerror or exc}") from None
        os.close(fd)
        # A WAL left behind by a deleted journal would be replayed into the new, empty one.
        for suffix in ("-wal", "-shm", "-mark"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        conn = None
        try:
            conn = _connect(path, must_exist=False)
            _use_wal(conn, path)
            conn.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.executemany(_INSERT_META, encoded)
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            conn.execute("COMMIT")
            _checkpoint(conn)  # the journal's identity is in the main file from the start, not only in the WAL
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            path.unlink(missing_ok=True)
            if _is_disk_full(exc):
                raise JournalError(f"{path}: cannot create the journal: disk full") from None
            raise JournalError(f"{path}: cannot create the journal: {_one_line(exc)}") from None
        log.info("created journal %s for run %s", path, run_id)
        return cls(path, conn, json.loads(json.dumps(stored)))

    @classmethod
    def open(cls, state_dir: str | Path) -> Journal:
        """Open the journal of an existing run (for ``--resume`` and ``bats-master results``)."""
        directory = Path(state_dir)
        path = directory / JOURNAL_NAME
        if not directory.is_dir():
            raise JournalError(f"{directory}: no such state dir")
        if not path.is_file():
            raise JournalError(f"{directory}: no journal here ({JOURNAL_NAME} is missing)")
        conn = None
        had_wal = Path(str(path) + "-wal").exists()  # opening a WAL-mode file makes one
        try:
            conn = _connect(path, must_exist=True)
            # Check whose file it is before anything (even the WAL switch) writes to it.
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if app_id != APPLICATION_ID:
                if app_id == 0 and version == 0 and path.stat().st_size == 0:
                    raise JournalError(
                        f"{path}: empty journal (a run that died while starting?): delete it or choose "
                        "another --state-dir"
                    )
                if (app_id == 0 and version == 0 and not had_wal
                        and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0):
                    raise JournalError(
                        f"{path}: holds no run, and its write-ahead log ({JOURNAL_NAME}-wal) is missing: the "
                        "records since the last checkpoint were in it and are lost; start a new run")
                raise JournalError(f"{path}: not a BaTS journal (an SQLite file of some other program)")
            if version > SCHEMA_VERSION:
                raise JournalError(
                    f"{path}: journal schema {version} is newer than this BaTS understands ({SCHEMA_VERSION})"
                )
            if version < 1:
                raise JournalError(f"{path}: not a BaTS journal (no schema version)")
            _use_wal(conn, path)
            for old in range(version, SCHEMA_VERSION):  # a journal of an earlier BaTS: brought up to date
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(_MIGRATIONS[old])
                conn.execute(f"PRAGMA user_version={old + 1}")
                conn.execute(_INSERT_META, ("schema_version", json.dumps(old + 1)))
                conn.execute("COMMIT")
            meta = {key: json.loads(value) for key, value in conn.execute("SELECT key, value FROM meta")}
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            if "not a database" in str(exc):
                raise JournalError(f"{path}: not a BaTS journal (not an SQLite file)") from None
            raise JournalError(f"{path}: cannot open the journal: {_one_line(exc)}") from None
        except (json.JSONDecodeError, OSError, JournalError) as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, JournalError):
                raise
            if isinstance(exc, OSError):
                raise JournalError(f"{path}: cannot open the journal: {exc.strerror or exc}") from None
            raise JournalError(f"{path}: damaged journal (a meta value is not JSON)") from None
        if not isinstance(meta.get("run_id"), str):
            conn.close()
            raise JournalError(f"{path}: not a BaTS journal (no run_id)")
        log.info("opened journal %s of run %s", path, meta["run_id"])
        return cls(path, conn, meta)

    # ------------------------------------------------------------------ properties

    @property
    def path(self) -> Path:
        """The journal file."""
        return self._path

    @property
    def run_id(self) -> str:
        return str(self._meta["run_id"])

    @property
    def meta(self) -> dict[str, Any]:
        """A copy of the stored meta, including values set but not yet flushed."""
        with self._lock:
            return copy.deepcopy(self._meta)

    @property
    def closed(self) -> bool:
        return self._conn is None

    @property
    def pending(self) -> int:
        """How many rows wait in the buffer for the next flush."""
        with self._lock:
            return len(self._pending_results) + len(self._pending_machines) + len(self._pending_meta)

    # ------------------------------------------------------------------ writing

    def _require_open(self) -> sqlite3.Connection:
        if self._conn is None:
            raise JournalError(f"{self._path}: the journal is closed")
        return self._conn

    def set_meta(self, key: str, value: Any) -> None:
        """Store a JSON value under ``key``; written with the next flush."""
        if key in ("run_id", "schema_version"):
            raise ValueError(f"meta key {key!r} is reserved by the journal")
        encoded = json.dumps(value)  # TypeError now rather than at flush time
        with self._lock:
            self._require_open()
            self._pending_meta[str(key)] = encoded
            self._meta[str(key)] = json.loads(encoded)

    def add_session(self, started_at: float) -> int:
        """Record a new master session and return its number (1 for the first run); committed now."""
        with self._lock:
            conn = self._require_open()
            try:
                cursor = conn.execute("INSERT INTO sessions (started_at) VALUES (?)", (float(started_at),))
            except sqlite3.Error as exc:
                raise self._write_error(exc, "cannot record the session") from None
            session = cursor.lastrowid
        assert session is not None
        log.info("journal %s: session %d", self._path, session)
        return session

    def record_result(
        self,
        task_id: int,
        status: str,
        exit_code: int | None,
        runtime_s: float | None,
        machine: str,
        attempts: int,
        timed_out: bool,
        stdout: bytes,
        stderr: bytes,
        finished_at: float,
    ) -> None:
        """Buffer a task's result (it replaces any earlier one for that task); see :meth:`flush`."""
        if status not in RESULT_STATUSES:
            raise ValueError(f"result status must be 'done' or 'failed', not {status!r}")
        # Convert now: a value SQLite cannot bind would otherwise make every later flush fail. The
        # server's results already have these exact types (the first branch, on every result).
        row: ResultRow
        if (type(task_id) is int and type(exit_code) is int and type(runtime_s) is float and type(machine) is str
                and type(attempts) is int and type(stdout) is bytes and type(stderr) is bytes
                and type(finished_at) is float):
            row = (task_id, status, exit_code, runtime_s, machine, attempts, 1 if timed_out else 0, stdout, stderr,
                   finished_at)
        else:
            row = (
                int(task_id),
                status,
                None if exit_code is None else int(exit_code),
                _opt_float(runtime_s),
                str(machine),
                int(attempts),
                1 if timed_out else 0,
                _as_bytes(stdout),
                _as_bytes(stderr),
                float(finished_at),
            )
        with self._lock:
            self._require_open()
            self._pending_results[row[0]] = row

    def record_machine(
        self,
        machine_id: str,
        cluster: str,
        session: int,
        acquired_at: float,
        ready_at: float | None,
        released_at: float | None,
        nt: int,
        rt_s: float,
        uptime_s: float,
        atus: int,
        cost: float,
        state: str,
        reason: str = "",
    ) -> None:
        """Buffer the current state of a machine (upsert by ``machine_id``); see :meth:`flush`.
        ``reason`` says why it left the run, once it has."""
        row: MachineRow = (
            str(machine_id),
            str(cluster),
            int(session),
            float(acquired_at),
            _opt_float(ready_at),
            _opt_float(released_at),
            int(nt),
            float(rt_s),
            float(uptime_s),
            int(atus),
            float(cost),
            str(state),
            str(reason),
        )
        with self._lock:
            self._require_open()
            self._pending_machines[row[0]] = row

    def flush(self) -> None:
        """Commit everything buffered in one transaction; on failure keep the buffer and raise."""
        with self._lock:
            conn = self._require_open()
            if not (self._pending_results or self._pending_machines or self._pending_meta):
                return
            started = time.perf_counter()
            try:
                conn.execute("BEGIN IMMEDIATE")
                if self._pending_meta:
                    conn.executemany(_INSERT_META, self._pending_meta.items())
                if self._pending_results:
                    conn.executemany(_INSERT_RESULT, self._pending_results.values())
                if self._pending_machines:
                    conn.executemany(_INSERT_MACHINE, self._pending_machines.values())
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise self._write_error(exc, "cannot write") from None
            if self._pending_results:
                self._committed += len(self._pending_results)
                self._write_mark()
            log.debug(
                "journal flush: %d results, %d machines, %d meta in %.1f ms",
                len(self._pending_results),
                len(self._pending_machines),
                len(self._pending_meta),
                (time.perf_counter() - started) * 1000,
            )
            self._pending_results = {}
            self._pending_machines = {}
            self._pending_meta = {}

    def _write_mark(self) -> None:
        beside = self._mark.with_name(f".{MARK_NAME}.{os.getpid()}")
        try:
            fd = os.open(beside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(f"{self._committed}\n")
            os.replace(beside, self._mark)
        except OSError as exc:  # the results are committed; only the check on --resume is weaker
            log.warning("%s: cannot write: %s", self._mark, exc.strerror or exc)

    def lost_results(self) -> int:
        """How many committed result rows the journal no longer holds (its WAL deleted or damaged
        after a crash); 0 when none, or when no mark was written (a journal of an earlier BaTS)."""
        try:
            marked = int(self._mark.read_text().strip() or 0)
        except (OSError, ValueError):
            return 0
        return max(0, marked - self._committed)

    def _write_error(self, exc: sqlite3.Error, what: str) -> JournalError:
        kept = len(self._pending_results)
        if _is_disk_full(exc):
            message = f"{self._path}: {what}: disk full ({kept} results kept in memory, not yet saved)"
        else:
            message = f"{self._path}: {what}: {_one_line(exc)} ({kept} results kept in memory, not yet saved)"
        return JournalError(message)  # the caller decides whether and how to tell the operator

    # ------------------------------------------------------------------ reading

    def _read_error(self, exc: sqlite3.Error) -> JournalError:
        return JournalError(f"{self._path}: cannot read the journal: {_one_line(exc)}")

    def finished_tasks(self) -> dict[int, str]:
        """Every task with a result, mapped to its status (``done`` or ``failed``)."""
        with self._lock:
            conn = self._require_open()
            try:
                # oldest first, so that a task's latest row is the one that stays
                finished = dict(conn.execute("SELECT task_id, status FROM results ORDER BY seq"))
            except sqlite3.Error as exc:
                raise self._read_error(exc) from None
            for task_id, row in self._pending_results.items():
                finished[task_id] = row[1]
        return finished

    def results(self, failed_only: bool = False) -> Iterator[dict[str, Any]]:
        """Yield one dict per task with a result, ordered by task id (fetched a page at a time).

        Keys: id, status, exit_code, runtime_s, machine, attempts, timed_out, stdout, stderr
        (decoded UTF-8 with ``errors="replace"``), finished_at.
        """
        with self._lock:
            conn = self._require_open()
            buffered = sorted(self._pending_results.values())
            try:
                committed = conn.execute(f"SELECT {_RESULT_COLUMNS} FROM results ORDER BY task_id, seq DESC")
            except sqlite3.Error as exc:
                raise self._read_error(exc) from None
        # Both streams are ordered by task id; for one task a buffered row (rank 0) wins over the
        # committed ones (rank 1), and among committed rows the latest (they come newest first).
        order = itertools.count()
        merged = heapq.merge(((row[0], 0, next(order), row) for row in buffered),
                             ((row[0], 1, next(order), row) for row in committed))
        last = None
        for task_id, _rank, _n, row in merged:
            if task_id == last:
                continue
            last = task_id
            if not failed_only or row[1] == "failed":
                yield _result_dict(row)

    def sessions(self) -> list[tuple[int, float]]:
        """Every master session as (number, started_at), oldest first."""
        with self._lock:
            conn = self._require_open()
            try:
                return [(int(n), float(t)) for n, t in conn.execute("SELECT id, started_at FROM sessions ORDER BY id")]
            except sqlite3.Error as exc:
                raise self._read_error(exc) from None

    def runs_by_machine(self) -> dict[str, tuple[int, float]]:
        """Per machine id, how many results it delivered and their summed runtime (seconds)."""
        with self._lock:
            conn = self._require_open()
            try:
                rows = conn.execute("SELECT machine, count(*), coalesce(sum(runtime_s), 0) FROM results "
                                    "GROUP BY machine").fetchall()
            except sqlite3.Error as exc:
                raise self._read_error(exc) from None
            counts = {machine: (int(n), float(rt)) for machine, n, rt in rows}
            for row in self._pending_results.values():
                n, rt = counts.get(row[4], (0, 0.0))
                counts[row[4]] = (n + 1, rt + (row[3] or 0.0))
        return counts

    def last_result_by_machine(self) -> dict[str, float]:
        """Per machine id, when its last result was recorded (``finished_at``, the master's clock)."""
        with self._lock:
            conn = self._require_open()
            try:
                rows = conn.execute("SELECT machine, max(finished_at) FROM results GROUP BY machine").fetchall()
            except sqlite3.Error as exc:
                raise self._read_error(exc) from None
            last = {machine: float(at) for machine, at in rows if at is not None}
            for row in self._pending_results.values():
                if row[9] is not None:
                    last[row[4]] = max(last.get(row[4], float(row[9])), float(row[9]))
        return last

    def machines(self) -> list[dict[str, Any]]:
        """Every machine of every session, ordered by session, acquisition time and id."""
        with self._lock:
            conn = self._require_open()
            try:
                rows = {row[0]: row for row in conn.execute(f"SELECT {_MACHINE_COLUMNS} FROM machines")}
            except sqlite3.Error as exc:
                raise self._read_error(exc) from None
            rows.update(self._pending_machines)
        ordered = sorted(rows.values(), key=lambda row: (row[2], row[3], row[0]))
        return [dict(zip(_MACHINE_KEYS, row, strict=True)) for row in ordered]

    # ------------------------------------------------------------------ closing

    def checkpoint(self) -> None:
        """Flush, then copy the WAL into the main file (at phase changes: the run's state then
        survives even the loss of the WAL)."""
        with self._lock:
            self.flush()
            _checkpoint(self._require_open())

    def close(self) -> None:
        """Flush, checkpoint, then close; calling it again does nothing.

        If the final flush fails the connection is closed anyway, the error is raised and the
        unsaved results will run again after a resume.
        """
        with self._lock:
            if self._conn is None:
                return
            try:
                self.flush()
                _checkpoint(self._conn)  # at exit the WAL's pages go into the main file
            finally:
                conn, self._conn = self._conn, None
                try:
                    conn.close()
                except sqlite3.Error as exc:
                    log.warning("%s: closing the journal: %s", self._path, _one_line(exc))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"<Journal {self._path} run={self._meta.get('run_id')!r} {state}>"
