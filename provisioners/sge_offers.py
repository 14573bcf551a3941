"""Offers of a real SGE queue (seed 002 §III-A), from what ``qstat`` prints: pure functions over
its text (read by :mod:`bats.provisioners.qstat`), for the ``sge`` provisioner's ``offers()`` hook.

How this works. The provisioner runs ``qstat -xml -r -u '*'`` (every user's jobs, with their
resource requests, read by :func:`bats.provisioners.qstat.jobs`) and counts the free slots
(``qstat -g c``, :func:`bats.provisioners.qstat.free_slots_from_gc`), then calls
:func:`offers_from_qstat` with the jobs' text, the free slots and the time now on the queue's clock.
The jobs become an :class:`bats.master.core.offers.generate.EdfPool` of ``free + running`` slots:

- running jobs (``<job_list state="running">``, states ``r``, ``t``, ``R…``, suspended ``s``/``S``)
  hold their ``<slots>`` until ``JAT_start_time + h_rt``; without an ``h_rt`` request until
  ``default_runtime_s`` after their start (at the earliest now);
- pending jobs (``state="pending"``, ``qw``) wait with deadline ``JB_submission_time + h_rt``
  (a pool user wants his job as if it had started on submission); array jobs count their
  ``<tasks>`` (``1-10:2`` is five tasks); held (``h…``) and error (``E…``) jobs are left out, as
  are jobs wider than the pool;

and :func:`bats.master.core.offers.generate.generate_offers` makes the offers by EDF over them (§III-A:
sizes 100/75/50/25/10 %, completion = the deadline when it is met). ``h_rt`` may be seconds or
``[[H:]M:]S``. Timestamps are ISO 8601 as ``qstat -xml`` prints them; ``now`` must be on the same
clock (naive local time for SGE's naive timestamps).
"""

from __future__ import annotations

import math
from datetime import datetime

from bats.master.core.offers.compose import Offer
from bats.master.core.offers.generate import SIZES, EdfPool, PoolJob, generate_offers

from .qstat import QstatError, QstatJob, array_count, jobs, parse_h_rt

DEFAULT_RUNTIME_S = 3600.0


def _time(text: str | None, tag: str, number: str) -> datetime:
    if not text:
        raise QstatError(f"job {number}: no <{tag}>")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise QstatError(f"job {number}: <{tag}>: not a timestamp: {text!r}") from None


def _runtime(job: QstatJob, default_s: float) -> float:
    h_rt = job.request("h_rt", "s_rt")
    return parse_h_rt(h_rt) if h_rt else default_s


def queue_jobs(xml_text: str, now: datetime,
               default_runtime_s: float = DEFAULT_RUNTIME_S) -> tuple[list[PoolJob], list[PoolJob]]:
    """(running, pending) jobs of ``qstat -xml -r`` output, times in seconds from ``now``."""
    running: list[PoolJob] = []
    pending: list[PoolJob] = []
    for job in jobs(xml_text):
        number = job.number or "?"
        state = job.state or ""
        try:
            slots = int(job.slots or "1")
        except ValueError:
            raise QstatError(f"job {number}: <slots>: not a whole number") from None
        runtime = _runtime(job, default_runtime_s)
        if job.listed == "running" or state[:1] in ("r", "t", "R", "s", "S"):
            started = (_time(job.start_time, "JAT_start_time", number) - now).total_seconds()
            left = max(0.0, started + runtime)
            running.append(PoolJob(0.0, max(1, slots), left, left, 1, f"sge-{number}"))
        elif "h" in state or "E" in state:
            continue  # held or in error: it will not take slots before someone acts
        else:
            submitted = (_time(job.submission_time, "JB_submission_time", number) - now).total_seconds()
            pending.append(PoolJob(min(0.0, submitted), max(1, slots), runtime, submitted + runtime,
                                   array_count(job.tasks), f"sge-{number}"))
    return running, pending


def offers_from_qstat(xml_text: str, *, free_slots: int, now: datetime, tasks: int, task_runtime_s: float,
                      deadline_s: float, pool: str = "sge", default_runtime_s: float = DEFAULT_RUNTIME_S,
                      fractions: tuple[float, ...] = SIZES) -> list[Offer]:
    """Seed 002 §III-A offers of an SGE queue: see the module docstring. Completions and
    ``deadline_s`` are seconds from ``now``."""
    if free_slots < 0:
        raise QstatError(f"free slots must be >= 0, got {free_slots}")
    running, pending = queue_jobs(xml_text, now, default_runtime_s)
    slots = free_slots + sum(j.slots for j in running)
    if slots < 1:
        return []
    state = EdfPool(slots, 0.0)
    state.submit_all(running)  # they fit: the slots are theirs plus the free ones
    state.submit_all(j for j in sorted(pending, key=lambda j: (j.deadline_s, j.submit_s)) if j.slots <= slots)
    offers = generate_offers(pool, state, tasks, task_runtime_s, deadline_s, fractions)
    return [o for o in offers if math.isfinite(o.completion)]
