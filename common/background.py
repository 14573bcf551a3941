"""Background job traces: the load a shared pool's own users put on it (seed 002 §V-A ran pools
with such traces), read for offer generation (:mod:`bats.master.core.offers.generate`).

A trace is a CSV file, one job per row: when it is submitted (an offset from the start of the
run; a duration: a bare number is seconds, or ``90s``, ``15m``, ``2h``), how many slots it takes,
and how long it runs (a duration)::

    # submit, slots, runtime
    0, 6, 2h
    0, 2, 30m
    10m, 4, 1h

Blank lines and lines starting with ``#`` are skipped; rows may come in any order; slots are
whole numbers >= 1, runtimes longer than 0. Every problem is a :class:`BackgroundTraceError`
naming ``FILE:LINE``. A job wider than its cluster's ``max`` (the pool's slots) is refused when the
config is read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from bats.common.durations import parse_duration
from bats.common.textfiles import csv_rows


class BackgroundTraceError(ValueError):
    """An unusable trace; the message reads ``FILE:LINE: reason``."""


@dataclass(frozen=True, slots=True)
class BackgroundJob:
    submit_s: float  # from the start of the run
    slots: int
    runtime_s: float
    line: int  # where it is in the file, for messages


def load_background(path: str | os.PathLike[str]) -> tuple[BackgroundJob, ...]:
    source = str(path)
    jobs: list[BackgroundJob] = []
    for number, fields in csv_rows(path, "submit, slots, runtime", BackgroundTraceError):
        try:
            submit = parse_duration(fields[0])
        except ValueError as exc:
            raise BackgroundTraceError(f"{source}:{number}: submit: {exc}") from None
        try:
            slots = int(fields[1])
        except ValueError:
            raise BackgroundTraceError(f"{source}:{number}: slots: expected a whole number, got {fields[1]!r}") from None
        if slots < 1:
            raise BackgroundTraceError(f"{source}:{number}: slots: must be at least 1, got {slots}")
        try:
            runtime = parse_duration(fields[2])
        except ValueError as exc:
            raise BackgroundTraceError(f"{source}:{number}: runtime: {exc}") from None
        if runtime <= 0:
            raise BackgroundTraceError(f"{source}:{number}: runtime: must be longer than 0 seconds")
        jobs.append(BackgroundJob(submit, slots, runtime, number))
    return tuple(jobs)
