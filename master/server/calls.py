"""Provisioner calls off the dispatch path: a timeout on each, retries with backoff.

How this works. A provisioner's ``acquire``, ``release`` and ``status`` talk to the outside world
(a cloud API, ``qsub``, ``ssh``) and may fail or hang. The server never calls them on its own
thread: :meth:`Calls.submit` starts each attempt on a daemon thread (a hung call can never keep
the master from exiting) and returns at once. The server's loop calls :meth:`Calls.poll` every
tick, on its own thread, and gets back the calls that are settled: succeeded, or failed on their
last attempt. An attempt that raises, or that has not returned ``timeout_s`` after it started, is
a failure; the call is tried again after a backoff that doubles from ``backoff_s`` up to
``max_backoff_s``, at most ``attempts`` times in all (``None``: until it succeeds, which is what a
release wants, since a machine that is not given back keeps costing money). An attempt that timed
out keeps running on its thread; should it return later, its value goes to the call's ``late``
callback (from :meth:`poll`, on the server's thread), so that machines acquired by an attempt
given up on are released rather than orphaned. A call's ``quiet`` callback runs once the call is
settled and none of its timed-out attempts can still answer: from then on nothing it started can
bring a machine (the server keeps an acquisition's intent in the journal until then).

Nothing here knows about machines or the core: the server maps outcomes to core events.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_ATTEMPTS = 3
DEFAULT_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0


class CallTimeout(TimeoutError):
    """An attempt did not return within its timeout."""


@dataclass
class _Attempt:
    queued: float
    started: float | None = None  # when it got its provisioner's lock and began
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None
    error: BaseException | None = None


@dataclass
class Outcome:
    """A settled call: ``error`` is None when it succeeded (``value`` is what it returned)."""

    kind: str
    cluster: str
    context: Any
    value: Any = None
    error: BaseException | None = None
    attempts: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class _Call:
    kind: str
    cluster: str
    fn: Callable[[], Any]
    context: Any
    timeout_s: float
    attempts_max: int | None
    backoff_s: float
    late: Callable[[Any], None] | None
    lock: threading.Lock | None = None
    quiet: Callable[[], None] | None = None
    settled: bool = False
    abandoned: list[_Attempt] = field(default_factory=list)  # timed-out attempts that may still answer
    attempts: int = 0
    current: _Attempt | None = None
    retry_at: float | None = None  # waiting for a retry from this time on
    last_error: BaseException | None = None


class Calls:
    """Runs provisioner calls on daemon threads; see the module docstring."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, max_backoff_s: float = MAX_BACKOFF_S) -> None:
        self.clock = clock
        self.max_backoff_s = max_backoff_s
        self._calls: list[_Call] = []
        self._abandoned: list[tuple[_Call, _Attempt]] = []  # attempts that timed out and may still return
        self._answered = threading.Event()  # set by every attempt that returns: wakes wait()

    def submit(self, kind: str, cluster: str, fn: Callable[[], Any], *, context: Any = None,
               timeout_s: float = 60.0, attempts: int | None = DEFAULT_ATTEMPTS,
               backoff_s: float = DEFAULT_BACKOFF_S, late: Callable[[Any], None] | None = None,
               lock: threading.Lock | None = None, quiet: Callable[[], None] | None = None) -> None:
        """Start ``fn`` on a thread. With ``lock``, each attempt runs holding it (one call at a time per
        provisioner); its timeout counts from when it got the lock, not while it waits for it.
        ``late`` and ``quiet``: see the module docstring."""
        call = _Call(kind, cluster, fn, context, timeout_s, attempts, backoff_s, late, lock, quiet)
        self._calls.append(call)
        self._start(call)

    def busy(self, kind: str, cluster: str) -> bool:
        """Whether a call of this kind for this cluster is not settled yet, or an attempt of one that
        timed out is still running (a hung back end is not asked again and again meanwhile)."""
        return (any(c.kind == kind and c.cluster == cluster for c in self._calls)
                or any(c.kind == kind and c.cluster == cluster and not a.done.is_set() for c, a in self._abandoned))

    @property
    def pending(self) -> int:
        return len(self._calls)

    def _start(self, call: _Call) -> None:
        call.attempts += 1
        call.retry_at = None
        clock = self.clock
        attempt = _Attempt(clock())
        call.current = attempt
        fn, lock, answered = call.fn, call.lock, self._answered

        def run() -> None:
            try:
                if lock is not None:
                    lock.acquire()
                try:
                    attempt.started = clock()
                    attempt.value = fn()
                finally:
                    if lock is not None:
                        lock.release()
            except BaseException as exc:
                attempt.error = exc
            finally:
                attempt.done.set()
                answered.set()

        threading.Thread(target=run, name=f"bats-{call.kind}-{call.cluster}", daemon=True).start()

    def poll(self) -> list[Outcome]:
        """The calls settled since the last poll; starts the retries that are due."""
        now = self.clock()
        settled: list[Outcome] = []
        keep: list[_Call] = []
        for call in self._calls:
            attempt = call.current
            if attempt is None:  # waiting to retry
                if call.retry_at is not None and now >= call.retry_at:
                    self._start(call)
                keep.append(call)
                continue
            if attempt.done.is_set():
                error = attempt.error
            elif attempt.started is not None and now - attempt.started >= call.timeout_s:
                error = CallTimeout(f"no answer within {call.timeout_s:g}s")
                self._abandoned.append((call, attempt))
                call.abandoned.append(attempt)
            else:
                keep.append(call)
                continue
            if error is None:
                settled.append(self._settle(call, Outcome(call.kind, call.cluster, call.context, attempt.value, None,
                                                          call.attempts)))
                continue
            call.last_error = error
            call.current = None
            if call.attempts_max is not None and call.attempts >= call.attempts_max:
                settled.append(self._settle(call, Outcome(call.kind, call.cluster, call.context, None, error,
                                                          call.attempts)))
                continue
            delay = min(self.max_backoff_s, call.backoff_s * 2 ** (call.attempts - 1))
            log.warning("cluster %s: %s failed (attempt %d: %s); trying again in %.1fs",
                        call.cluster, call.kind, call.attempts, _one_line(error), delay)
            call.retry_at = now + delay
            keep.append(call)
        self._calls = keep
        self._collect_late()
        return settled

    def _settle(self, call: _Call, outcome: Outcome) -> Outcome:
        call.settled = True
        self._quiet_if_done(call)
        return outcome

    def _quiet_if_done(self, call: _Call) -> None:
        if call.settled and call.quiet is not None and all(a.done.is_set() for a in call.abandoned):
            quiet, call.quiet = call.quiet, None
            try:
                quiet()
            except Exception:
                log.exception("handling the end of a provisioner call failed")

    def _collect_late(self) -> None:
        still = []
        for entry in self._abandoned:
            call, attempt = entry
            if not attempt.done.is_set():
                still.append(entry)
                continue
            if attempt.error is None and call.late is not None:
                try:
                    call.late(attempt.value)
                except Exception:
                    log.exception("handling the late answer of a timed-out call failed")
            self._quiet_if_done(call)
        self._abandoned = still

    def hurry(self, max_backoff_s: float = 1.0) -> None:
        """From now on retry sooner (the master is exiting and waits for its releases)."""
        self.max_backoff_s = min(self.max_backoff_s, max_backoff_s)
        for call in self._calls:
            if call.retry_at is not None:
                call.retry_at = min(call.retry_at, self.clock() + self.max_backoff_s)

    def cancel_waiting(self, kind: str) -> list[Outcome]:
        """Settle, as failed, the calls of ``kind`` that wait for a retry, without trying again (the
        master is exiting: an acquisition tried once more would only start a machine to release)."""
        settled: list[Outcome] = []
        keep: list[_Call] = []
        for call in self._calls:
            if call.kind == kind and call.current is None:
                error = call.last_error or CallTimeout("cancelled")
                settled.append(self._settle(call, Outcome(call.kind, call.cluster, call.context, None, error,
                                                          call.attempts)))
            else:
                keep.append(call)
        self._calls = keep
        return settled

    def wait(self, deadline: float, sleep_s: float = 0.05) -> list[Outcome]:
        """Poll until every call is settled or ``deadline`` (the clock's time) passes; returns what
        settled. Calls still open at the deadline are returned as failed. Between polls it waits
        for an attempt to return, ``sleep_s`` at most (a retry may fall due meanwhile): the master's
        exit waits for its releases, not for a fixed sleep after each."""
        settled: list[Outcome] = []
        while True:
            self._answered.clear()  # before the poll: an attempt that returns after it wakes the wait below
            settled.extend(self.poll())
            if not self._calls:
                return settled
            if self.clock() >= deadline:
                for call in self._calls:
                    error = call.last_error or CallTimeout("still running when the master stopped waiting")
                    if call.current is not None:  # its attempt may yet answer
                        call.abandoned.append(call.current)
                        self._abandoned.append((call, call.current))
                    settled.append(self._settle(call, Outcome(call.kind, call.cluster, call.context, None, error,
                                                              call.attempts)))
                self._calls = []
                return settled
            self._answered.wait(sleep_s)

    def late_pending(self) -> bool:
        """Whether some timed-out attempt with a ``late`` callback may still return, or has returned
        and :meth:`poll` has not handed its answer to the callback yet."""
        return any(call.late is not None for call, _attempt in self._abandoned)


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.replace("\n", " ")[:300]
