"""``bats-master results``: export a run's task results from its state directory.

How it works: the journal (``STATE_DIR/journal.sqlite``) holds one result row per finished task
and the state dir keeps the copy of the bag the run was started with (``STATE_DIR/bag.txt``);
a task's id is its line number in that bag, so the command text is looked up there. Rows are
streamed in task-id order, never all held in memory, as JSON lines or CSV with a header. In CSV, a
text cell that a spreadsheet would take for a formula (it starts with ``=``, ``+``, ``-``, ``@``, a
tab or a carriage return) gets a leading ``'``, so opening the export never runs a task's output. The
journal is only read, so this works while the master is still running (WAL readers never block
the writer); rows the master has not flushed yet are simply not exported.
"""

from __future__ import annotations

import csv
import datetime
import json
import logging
from pathlib import Path
from typing import Any, TextIO

from .bag import BagError, load_bag
from .journal import JOURNAL_NAME, Journal, JournalError

log = logging.getLogger(__name__)

BAG_COPY_NAME = "bag.txt"
FORMATS = ("jsonl", "csv")
COLUMNS = (
    "id",
    "command",
    "status",
    "exit_code",
    "runtime_s",
    "machine",
    "attempts",
    "timed_out",
    "finished_at",
    "stdout",
    "stderr",
)


def _readable(row: dict[str, Any]) -> dict[str, Any]:
    """A result as people and programs read it: the runtime to the millisecond, the finish time as
    ISO 8601 in UTC (``2026-11-25T02:15:35.537Z``)."""
    out = dict(row)
    if isinstance(out.get("runtime_s"), float):
        out["runtime_s"] = round(out["runtime_s"], 3)
    finished = out.get("finished_at")
    if isinstance(finished, (int, float)):
        stamp = datetime.datetime.fromtimestamp(finished, tz=datetime.UTC)
        out["finished_at"] = stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return out


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _csv_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value  # a spreadsheet would run it as a formula (task output is anyone's text)
    return value  # None becomes an empty field


def export_results(state_dir: str | Path, out: TextIO, failed_only: bool = False, fmt: str = "jsonl") -> int:
    """Write one row per task with a result (only failed ones if ``failed_only``) to ``out``.

    ``fmt`` is ``jsonl`` (one JSON object per line) or ``csv`` (with a header). Returns the number
    of rows written. A missing state dir, journal or bag copy raises :class:`JournalError`.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown results format {fmt!r}: use one of {', '.join(FORMATS)}")
    directory = Path(state_dir)
    if not directory.is_dir():
        raise JournalError(f"{directory}: no such state dir")
    if not (directory / JOURNAL_NAME).is_file():
        raise JournalError(f"{directory}: not a BaTS state dir ({JOURNAL_NAME} is missing)")
    bag_path = directory / BAG_COPY_NAME
    if not bag_path.is_file():
        raise JournalError(f"{directory}: the run's copy of the bag ({BAG_COPY_NAME}) is missing")
    try:
        bag = load_bag(bag_path)
    except BagError as exc:
        raise JournalError(f"cannot read the run's bag copy: {exc}") from None

    with Journal.open(directory) as journal:
        recorded_sha = journal.meta.get("bag_sha256")
        if isinstance(recorded_sha, str) and recorded_sha != bag.sha256:
            log.warning("%s differs from the bag the run started with; commands may not match", bag_path)

        def command(task_id: int) -> str:
            if 1 <= task_id <= len(bag.lines):
                return bag.command(task_id)
            log.warning("task %d is not a line of %s", task_id, bag_path)
            return ""

        written = 0
        if fmt == "csv":
            writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
            writer.writeheader()
            for row in map(_readable, journal.results(failed_only=failed_only)):
                record = {key: _csv_value(row[key]) for key in COLUMNS if key != "command"}
                record["command"] = _csv_value(command(row["id"]))
                writer.writerow(record)
                written += 1
        else:
            for row in map(_readable, journal.results(failed_only=failed_only)):
                record = {key: row[key] for key in COLUMNS if key != "command"}
                record["command"] = command(row["id"])
                ordered = {key: record[key] for key in COLUMNS}
                out.write(json.dumps(ordered, ensure_ascii=False) + "\n")
                written += 1
    log.info("exported %d results from %s", written, directory)
    return written
