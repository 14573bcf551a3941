"""Offers of a real SGE queue (seed 002 §III-A), from what ``qstat`` prints: pure functions over
its text, for the ``sge`` provisioner's ``offers()`` hook.

How this works. The provisioner runs ``qstat -xml -r -u '*'`` (every user's jobs, with their
resource requests) and counts the free slots (e.g. ``qstat -g c``, :func:`free_slots_from_gc`),
then calls :func:`offers_from_qstat` with both texts' numbers and the time now on the queue's clock.
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
import re
import xml.etree.ElementTree as ET
from datetime import datetime

from bats.master.core.offers.compose import Offer
from bats.master.core.offers.generate import SIZES, EdfPool, PoolJob, generate_offers

DEFAULT_RUNTIME_S = 3600.0


class QstatError(ValueError):
    """qstat output that cannot be read; the message says what and where."""


def parse_h_rt(text: str) -> float:
    """``3600`` or ``1:00:00`` (``[[H:]M:]S``) to seconds."""
    parts = text.strip().split(":")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise QstatError(f"h_rt: expected seconds or H:M:S, got {text!r}") from None
    if len(values) > 3 or any(v < 0 for v in values):
        raise QstatError(f"h_rt: expected seconds or H:M:S, got {text!r}")
    seconds = 0.0
    for v in values:
        seconds = seconds * 60 + v
    return seconds


def array_count(text: str | None) -> int:
    """How many tasks an array job's ``<tasks>`` names: ``7``, ``1-10:1``, ``1-10:2``, ``3,5-6``."""
    if not text or not text.strip():
        return 1
    total = 0
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:-(\d+)(?::(\d+))?)?\s*", part)
        if m is None:
            raise QstatError(f"tasks: cannot read {text!r}")
        first, last, step = int(m[1]), int(m[2] or m[1]), int(m[3] or 1)
        total += max(0, (last - first) // max(1, step) + 1)
    return max(1, total)


def _time(job: ET.Element, tag: str, number: str) -> datetime:
    text = job.findtext(tag)
    if not text:
        raise QstatError(f"job {number}: no <{tag}>")
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise QstatError(f"job {number}: <{tag}>: not a timestamp: {text!r}") from None


def _runtime(job: ET.Element, default_s: float) -> float:
    for req in job.iter("hard_request"):
        if req.get("name") in ("h_rt", "s_rt") and req.text:
            return parse_h_rt(req.text)
    return default_s


def queue_jobs(xml_text: str, now: datetime, default_runtime_s: float = DEFAULT_RUNTIME_S) -> tuple[list[PoolJob], list[PoolJob]]:
    """(running, pending) jobs of ``qstat -xml -r`` output, times in seconds from ``now``."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise QstatError(f"qstat -xml: not XML ({exc})") from None
    running: list[PoolJob] = []
    pending: list[PoolJob] = []
    for job in root.iter("job_list"):
        number = (job.findtext("JB_job_number") or "?").strip()
        state = (job.findtext("state") or "").strip()
        try:
            slots = int(job.findtext("slots") or "1")
        except ValueError:
            raise QstatError(f"job {number}: <slots>: not a whole number") from None
        runtime = _runtime(job, default_runtime_s)
        if job.get("state") == "running" or state[:1] in ("r", "t", "R", "s", "S"):
            started = (_time(job, "JAT_start_time", number) - now).total_seconds()
            left = max(0.0, started + runtime)
            running.append(PoolJob(0.0, max(1, slots), left, left, 1, f"sge-{number}"))
        elif "h" in state or "E" in state:
            continue  # held or in error: it will not take slots before someone acts
        else:
            submitted = (_time(job, "JB_submission_time", number) - now).total_seconds()
            pending.append(PoolJob(min(0.0, submitted), max(1, slots), runtime, submitted + runtime,
                                   array_count(job.findtext("tasks")), f"sge-{number}"))
    return running, pending


def free_slots_from_gc(text: str, queue: str | None = None) -> int:
    """The AVAIL column of ``qstat -g c`` (summed over the queues, or of ``queue`` alone)."""
    lines = [line.replace("CLUSTER QUEUE", "CLUSTER_QUEUE").split() for line in text.splitlines()
             if line.strip() and not line.startswith("-")]
    if not lines or "AVAIL" not in lines[0]:
        raise QstatError("qstat -g c: no header with AVAIL")
    col = lines[0].index("AVAIL")
    total = 0
    found = False
    for fields in lines[1:]:
        if len(fields) <= col or (queue is not None and fields[0] != queue):
            continue
        try:
            total += int(fields[col])
        except ValueError:
            raise QstatError(f"qstat -g c: AVAIL of {fields[0]} is not a number: {fields[col]!r}") from None
        found = True
    if queue is not None and not found:
        raise QstatError(f"qstat -g c: no queue {queue!r}")
    return total


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
