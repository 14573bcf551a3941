"""bats.master.server.calls: provisioner calls off the dispatch path, with timeouts, retries and backoff.

A fake clock decides every timeout and backoff; threads are synchronised with events, so nothing
here depends on how fast the machine is.
"""

from __future__ import annotations

import threading

import pytest

from bats.master.server.calls import Calls, CallTimeout


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def settle(calls: Calls, clock: Clock, steps: int = 200):
    """Poll until something settles (threads finish on their own; the clock stands still)."""
    for _ in range(steps):
        got = calls.poll()
        if got:
            return got
        threading.Event().wait(0.01)
    raise AssertionError("nothing settled")


def failing_at(clock: Clock, tries: list[float], message: str):
    """A call that always raises ``message``, noting the clock's time of each attempt in ``tries``."""
    def failing():
        tries.append(clock.now)
        raise RuntimeError(message)

    return failing


def poll_until(calls: Calls, done) -> None:
    """Poll (the threads finish on their own; the clock stands still) until ``done()``."""
    for _ in range(200):
        calls.poll()
        if done():
            return
        threading.Event().wait(0.01)
    raise AssertionError("timed out polling")


def test_success_is_reported_once_with_its_value():
    clock = Clock()
    calls = Calls(clock)
    calls.submit("acquire", "a", lambda: ["m1"], context=1)
    assert calls.busy("acquire", "a") and not calls.busy("release", "a")
    (outcome,) = settle(calls, clock)
    assert outcome.ok and outcome.value == ["m1"] and outcome.context == 1 and outcome.attempts == 1
    assert calls.poll() == [] and not calls.busy("acquire", "a")


def test_failures_are_retried_with_doubling_backoff_then_reported():
    clock = Clock()
    calls = Calls(clock)
    tries: list[float] = []
    calls.submit("acquire", "a", failing_at(clock, tries, "boom"), attempts=3, backoff_s=1.0)
    for _ in range(200):  # first attempt fails: a retry is due at t=1
        if calls.poll() == [] and not calls._calls[0].current:
            break
        threading.Event().wait(0.01)
    assert calls._calls[0].retry_at == 1.0
    clock.now = 0.5
    assert calls.poll() == [] and len(tries) == 1  # not due yet
    clock.now = 1.0
    calls.poll()  # starts attempt 2
    poll_until(calls, lambda: calls._calls and calls._calls[0].retry_at is not None)
    assert calls._calls[0].retry_at == 3.0  # 1.0 + 2 s
    clock.now = 3.0
    (outcome,) = settle(calls, clock)
    assert not outcome.ok and "boom" in str(outcome.error) and outcome.attempts == 3
    assert tries == [0.0, 1.0, 3.0]


def test_a_hung_call_times_out_and_its_late_answer_goes_to_the_late_callback():
    clock = Clock()
    calls = Calls(clock)
    release = threading.Event()
    started = threading.Event()
    late = []

    def hangs():
        started.set()
        release.wait()
        return ["late-machine"]

    calls.submit("acquire", "a", hangs, attempts=1, timeout_s=10.0, late=late.append)
    started.wait()
    calls.poll()
    clock.now = 10.0
    (outcome,) = calls.poll()
    assert isinstance(outcome.error, CallTimeout)
    assert calls.busy("acquire", "a")  # the hung attempt still runs: the back end is not asked again
    assert calls.late_pending()
    release.set()
    poll_until(calls, lambda: late)
    assert late == [["late-machine"]] and not calls.busy("acquire", "a")


def test_quiet_comes_once_the_call_is_settled_and_no_timed_out_attempt_can_answer():
    """An acquisition's intent may be forgotten only when nothing it started can still bring a
    machine: a success with no attempt left behind is quiet at once; a call whose first attempt
    hung is quiet only after that attempt answered (late), even though a retry succeeded."""
    clock = Clock()
    calls = Calls(clock)
    quiet = []
    calls.submit("acquire", "a", lambda: ["m1"], quiet=lambda: quiet.append("a"))
    settle(calls, clock)
    assert quiet == ["a"]

    release, started = threading.Event(), threading.Event()
    answers = iter([None, ["m3"]])

    def first_hangs():
        if next(answers) is None:
            started.set()
            release.wait()
            return ["m2-late"]
        return ["m3"]

    late = []
    calls.submit("acquire", "b", first_hangs, attempts=2, timeout_s=5.0, backoff_s=1.0, late=late.append,
                 quiet=lambda: quiet.append("b"))
    started.wait()
    calls.poll()
    clock.now = 5.0
    assert calls.poll() == []  # attempt 1 timed out; a retry is due at t=6
    clock.now = 6.0
    calls.poll()
    (outcome,) = settle(calls, clock)
    assert outcome.ok and outcome.value == ["m3"]
    assert quiet == ["a"]  # settled, but the hung attempt may still launch machines
    release.set()
    poll_until(calls, lambda: late)
    assert late == [["m2-late"]] and quiet == ["a", "b"]


def test_a_call_cut_short_by_wait_is_not_quiet_while_its_attempt_runs():
    clock = Clock()
    calls = Calls(clock)
    release = threading.Event()
    quiet = []
    calls.submit("acquire", "a", lambda: release.wait() and ["m1"], quiet=lambda: quiet.append(1),
                 late=lambda _value: None)
    clock.now = 100.0  # the master's patience at exit is over at once
    (outcome,) = calls.wait(deadline=100.0, sleep_s=0.0)
    assert not outcome.ok and quiet == [] and calls.late_pending()
    release.set()
    poll_until(calls, lambda: quiet)
    assert quiet == [1]


def test_the_timeout_counts_from_when_the_lock_is_held():
    clock = Clock()
    calls = Calls(clock)
    lock = threading.Lock()
    lock.acquire()
    calls.submit("status", "a", lambda: {}, timeout_s=1.0, lock=lock)
    clock.now = 5.0
    assert calls.poll() == []  # still waiting for the lock: not timed out
    lock.release()
    (outcome,) = settle(calls, clock)
    assert outcome.ok


def test_wait_gives_up_at_the_deadline_and_reports_what_is_open():
    clock = Clock()
    calls = Calls(clock)
    calls.submit("release", "a", lambda: (_ for _ in ()).throw(RuntimeError("no")), attempts=None)
    clock.now = 100.0  # the deadline is already past: wait returns at once
    outcomes = calls.wait(deadline=50.0)
    assert len(outcomes) == 1 and not outcomes[0].ok and calls.pending == 0


@pytest.mark.parametrize("attempts", [1, 2])
def test_unlimited_attempts_only_when_asked(attempts):
    clock = Clock()
    calls = Calls(clock)
    calls.submit("release", "a", lambda: (_ for _ in ()).throw(RuntimeError("no")), attempts=attempts,
                 backoff_s=0.0)
    got = []
    for _ in range(400):
        got = calls.poll()
        if got:
            break
        threading.Event().wait(0.01)
    assert got and got[0].attempts == attempts


def test_cancel_waiting_settles_retries_without_trying_again():
    clock = Clock()
    calls = Calls(clock)
    tries: list[float] = []
    quiet = []
    calls.submit("acquire", "a", failing_at(clock, tries, "no capacity"), attempts=5, quiet=lambda: quiet.append(1))
    calls.submit("status", "a", lambda: {}, attempts=5)
    poll_until(calls, lambda: calls._calls[0].retry_at is not None)
    (outcome,) = calls.cancel_waiting("acquire")
    assert not outcome.ok and "no capacity" in str(outcome.error) and quiet == [1]
    clock.now = 100.0
    calls.poll()
    assert tries == [0.0] and not calls.busy("acquire", "a")
