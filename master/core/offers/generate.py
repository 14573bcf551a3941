"""How a pool that does not reveal its load makes offers: seed 002 §III-A (deadline-aware offer
generation, Earliest Deadline First). Pure: time is a number passed in, no I/O, no clock.

How this works. A pool is ``slots`` slots shared by jobs; a job asks for ``slots`` slots for
``runtime_s`` and has a deadline. :class:`EdfPool` is the pool's scheduler as a state machine
advanced to explicit times: whenever a job ends or arrives, the waiting jobs are considered in
Earliest Deadline First order (ties: earlier submission, then earlier arrival in the pool) and each
one that fits in the free slots starts (a wide job that does not fit does not hold back a narrower
one behind it; running jobs are never pre-empted). A job may stand for ``count`` identical tasks,
which start as slots free up: that is how a bag of tasks is one entry however large.

:func:`generate_offers` is §III-A's procedure for one pool: for each size in Δ (100, 75, 50, 25 and
10 % of the bag) a temporary job of that many tasks, with the bag's runtime and deadline, is added
to a copy of the pool's current schedule (the jobs it knows: running and submitted, not those that
will arrive later) and the schedule is run until the temporary job is done. The offer's completion
is the deadline when the job finishes by then, else its finish time. Going from the smallest size
up, an offer with the same completion as the previous one replaces it (the larger size wins), a
later one is added (step 4). The simulator uses the same :class:`EdfPool` to run a pool's
background trace and the machines a run asks of it, so offers and execution follow one model.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..billing import EPS as _EPS
from .compose import Offer

SIZES = (1.0, 0.75, 0.5, 0.25, 0.1)  # Δ, §III-A step 1


@dataclass(frozen=True, slots=True)
class PoolJob:
    """A job of a pool: ``count`` tasks of ``slots`` slots for ``runtime_s`` each (``math.inf``:
    until released), submitted at ``submit_s``, due at ``deadline_s``."""

    submit_s: float
    slots: int
    runtime_s: float
    deadline_s: float
    count: int = 1
    tag: str = ""


def background_job(submit_s: float, slots: int, runtime_s: float) -> PoolJob:
    """A pool user's job from a trace: it is due when it could finish had it started on
    submission (so the pool's own users come first unless a bag's deadline is earlier)."""
    return PoolJob(submit_s, slots, runtime_s, submit_s + runtime_s)


class EdfPool:
    """A pool's EDF schedule, advanced to explicit times; see the module docstring."""

    def __init__(self, slots: int, now: float = 0.0) -> None:
        if slots < 1:
            raise ValueError("a pool has at least one slot")
        self.slots = slots
        self.free = slots
        self.now = now
        self._seq = itertools.count()
        self._arrivals: list[tuple[float, int, PoolJob]] = []  # submitted later than now
        self._waiting: list[list] = []  # [deadline, submit, seq, job, tasks left]
        self._running: list[tuple[float, int, int, str]] = []  # heap of (end, seq, slots, tag)
        self.started: list[tuple[float, str]] = []  # (time, tag) of every task started, in order
        self.last_end: dict[str, float] = {}  # tag -> latest end of its tasks started so far

    # ------------------------------------------------------------ jobs in and out
    def submit(self, job: PoolJob) -> None:
        if job.slots > self.slots:
            raise ValueError(f"a job of {job.slots} slots cannot run on a pool of {self.slots}")
        if job.submit_s > self.now + _EPS:
            heapq.heappush(self._arrivals, (job.submit_s, next(self._seq), job))
        else:
            self._wait(job)
            self._schedule()

    def submit_all(self, jobs: Iterable[PoolJob]) -> None:
        for job in jobs:
            self.submit(job)

    def _wait(self, job: PoolJob) -> None:
        self._waiting.append([job.deadline_s, job.submit_s, next(self._seq), job, job.count])

    def release(self, tag: str) -> bool:
        """End one running task of ``tag`` now (a machine given back), else withdraw one waiting."""
        for k, (_end, _seq, slots, t) in enumerate(self._running):
            if t == tag:
                self._running[k] = self._running[-1]
                self._running.pop()
                heapq.heapify(self._running)
                self.free += slots
                self._schedule()
                return True
        for entry in self._waiting:
            if entry[3].tag == tag and entry[4] > 0:
                entry[4] -= 1
                return True
        return False

    # ------------------------------------------------------------ time
    def next_event(self) -> float | None:
        """When the schedule changes next by itself (an end or an arrival); None: never."""
        times = [self._running[0][0]] if self._running and math.isfinite(self._running[0][0]) else []
        if self._arrivals:
            times.append(self._arrivals[0][0])
        return min(times) if times else None

    def advance(self, t: float) -> None:
        """Run the schedule up to time ``t`` (every end and arrival at or before it)."""
        while True:
            nxt = self.next_event()
            if nxt is None or nxt > t + _EPS:
                break
            self.now = max(self.now, nxt)
            while self._running and self._running[0][0] <= self.now + _EPS:
                _end, _seq, slots, _tag = heapq.heappop(self._running)
                self.free += slots
            while self._arrivals and self._arrivals[0][0] <= self.now + _EPS:
                self._wait(heapq.heappop(self._arrivals)[2])
            self._schedule()
        self.now = max(self.now, t)

    def _schedule(self) -> None:
        if not self._waiting or self.free <= 0:
            return
        self._waiting.sort(key=lambda e: (e[0], e[1], e[2]))
        for entry in self._waiting:
            job: PoolJob = entry[3]
            while entry[4] > 0 and job.slots <= self.free:
                entry[4] -= 1
                self.free -= job.slots
                end = self.now + job.runtime_s
                heapq.heappush(self._running, (end, next(self._seq), job.slots, job.tag))
                self.started.append((self.now, job.tag))
                if math.isfinite(end):
                    self.last_end[job.tag] = max(self.last_end.get(job.tag, end), end)
            if self.free <= 0:
                break
        self._waiting = [e for e in self._waiting if e[4] > 0]

    # ------------------------------------------------------------ what the pool knows
    def waiting(self, tag: str) -> int:
        return sum(e[4] for e in self._waiting if e[3].tag == tag)

    def known(self) -> EdfPool:
        """A copy with only what the pool knows now: the jobs running and waiting, none to come."""
        other = copy.copy(self)
        other._seq = copy.copy(self._seq)
        other._arrivals = []
        other._waiting = [list(e) for e in self._waiting]
        other._running = list(self._running)
        other.started = []
        other.last_end = {}
        return other

    def finish_of(self, job: PoolJob) -> float:
        """When ``job`` (submitted now) would be done, given only the jobs known now."""
        trial = self.known()
        tag = job.tag or "\0trial"
        job = PoolJob(trial.now, job.slots, job.runtime_s, job.deadline_s, job.count, tag)
        trial.submit(job)
        while trial.waiting(tag) > 0:
            nxt = trial.next_event()
            if nxt is None:  # jobs of unknown length hold every slot it needs: it never starts
                return math.inf
            trial.advance(nxt)
        return trial.last_end.get(tag, trial.now)


def pool_at(slots: int, jobs: Sequence[PoolJob], now: float) -> EdfPool:
    """The pool's schedule at ``now`` after running ``jobs`` (a background trace) from time 0."""
    pool = EdfPool(slots, 0.0)
    pool.submit_all(sorted(jobs, key=lambda j: j.submit_s))
    pool.advance(now)
    return pool


def sizes_of(n_tasks: int, fractions: Sequence[float] = SIZES) -> list[int]:
    """Δ: the bag sizes an offer is made for, largest first, distinct, at least one task."""
    return sorted({max(1, min(n_tasks, math.floor(f * n_tasks + _EPS))) for f in fractions}, reverse=True)


def generate_offers(pool: str, state: EdfPool, n_tasks: int, task_runtime_s: float, deadline_s: float,
                    fractions: Sequence[float] = SIZES) -> list[Offer]:
    """§III-A for one pool: offers (tasks, completion), completion in seconds from ``state.now``,
    ``deadline_s`` likewise; largest offer first. Infinite completions (nothing can start) are left out."""
    if n_tasks < 1 or task_runtime_s <= 0:
        raise ValueError("offers need at least one task and a positive task runtime")
    phi: list[Offer] = []
    for k in sorted(sizes_of(n_tasks, fractions)):
        finish = state.finish_of(PoolJob(state.now, 1, task_runtime_s, state.now + deadline_s, k)) - state.now
        if not math.isfinite(finish):
            break
        completion = deadline_s if finish <= deadline_s + _EPS else finish
        if phi and abs(phi[-1].completion - completion) <= _EPS:
            phi[-1] = Offer(pool, k, completion)
        else:
            phi.append(Offer(pool, k, completion))
    return phi[::-1]
