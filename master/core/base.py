"""The scheduling core: events in, actions out, no I/O.

How this works. The master's drivers (the ZeroMQ server and the simulator) turn everything
that happens into a frozen event carrying ``now`` (seconds, from the driver's clock) and feed it to
:meth:`Core.handle`, which updates the bookkeeping and answers with a list of actions for the
driver to carry out. Randomness comes in as a seeded ``random.Random``. Nothing here opens a
socket, reads a clock or starts a process, so the same decisions run in real and virtual time.

What it keeps (seed 000 "BaTS", §3.1 "Monitoring the plan's execution"): for every machine that
took part in the run its cluster, the number of tasks it executed (nt), the time it spent executing
them (rt), and its uptime from acquisition to release; the cost of a machine is the number of
accountable time units (ATUs) begun in that uptime times its cluster's price. The budget-driven
policy of §3 builds on these counters; this module's policy is plain self-scheduling: acquire
every configured machine (never more than there are tasks), replace machines that are lost, and
release everything when the bag is done.

Task hand-out: tasks are handed out randomly chosen, first-come first-served, to workers that
ask. The bag of pending task ids is an array; a dispatch swaps a random element with the last one
and pops it, O(1). A machine runs up to ``slots`` tasks at once (its cluster's ``slots``, told by
the driver when the machine is up; 1 by default) and its worker holds at most ``slots - 1 +
max_held`` tasks: the running ones and the prefetched ones, which wait for a slot. With ``adaptive_prefetch`` it is sent one running and
one prefetched while tasks take 10 ms to 1 s (a moving average of reported runtimes), up to
``max_held`` while they are shorter (then messaging, not the tasks, is the cost, and deeper
queues let one wake-up carry several messages), and none beyond the running one when they take a
second or more: a round trip is then negligible, and a task queued on a slow machine at the end of
the bag would wait while a fast one sits idle.
Near the end of the bag a task is not prefetched to a busy worker while a worker with nothing to do
(up, or still booting) could start it: a short task must not wait behind a long one. That rule
reads one number, the free slots of every machine not gone, which each machine keeps up to date
in a shared :class:`FreeSlots` as its held tasks, its slots and its state change, so a decision
costs the same with a thousand machines as with two. A
machine lost with tasks in flight puts them back into the bag, unless a ``[retry]`` rule for
``cause = "lost"`` fails them, or retries them only while their attempts last. A task that fails (non-zero exit or
timeout) is retried up to ``retries`` times, preferably on another machine, unless the config's
retry rules (:mod:`bats.common.retry`: by exit code and cause) say that failure is final. A task that
``max_machine_losses`` lost machines count against (one that crashes its machine, as an
out-of-memory kill does) is quarantined like a poison message: recorded failed, named in a notice
and in the report's ``quarantined_ids``, and never handed out again. Which losses count, and why a
task that was on a lost machine is never queued behind another afterwards, is :mod:`.losses`.
"""

from __future__ import annotations

import enum
import random
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from bats.common.config import ClusterConfig
from bats.common.retry import RetryRules

from .actions import (
    Acquire,
    Action,
    Dispatch,
    Finish,
    IgnoreResult,
    Notify,
    RecordResult,
    Release,
)
from .billing import atus_begun, charged
from .events import (
    AcquireFailed,
    BudgetRaised,
    Event,
    MachineAcquired,
    MachineCameLate,
    MachineLost,
    MachineUp,
    PriceChanged,
    RunStarted,
    StopRequested,
    TaskFinished,
    Tick,
    WorkerAsked,
)
from .losses import LossLedger
from .view import CoreView

DEFAULT_MAX_HELD = 2  # tasks a worker may hold: the running one plus one prefetched
SHORT_TASK_S = 0.01  # with adaptive prefetch, tasks shorter than this get deeper worker queues
LONG_TASK_S = 1.0  # ... and tasks this long none: the next one is sent when the current one ends
_RUNTIME_SMOOTHING = 0.05  # weight of the newest runtime in the moving average


# ---------------------------------------------------------------- bookkeeping
class MachineState(enum.Enum):
    BOOTING = "booting"
    UP = "up"
    GONE = "gone"


class FreeSlots:
    """The free slots (``slots`` less held tasks, at least 0) of every machine not gone, summed, and
    how many of those machines hold nothing, per cluster. Each machine adds itself when it is made
    and takes itself away when it leaves; between the two, every change to what it holds goes
    through its methods, which move the counts."""

    __slots__ = ("free", "idle")

    def __init__(self) -> None:
        self.free = 0
        self.idle: dict[str, int] = {}  # cluster -> machines not gone that hold no task


@dataclass
class Machine:
    id: str
    cluster: str
    acquired_at: float
    up_at: float | None = None
    released_at: float | None = None
    state: MachineState = MachineState.BOOTING
    nt: int = 0  # tasks executed
    rt: float = 0.0  # seconds spent executing tasks
    wanted: int = 0  # tasks asked for and not yet handed out
    held: list[tuple[int, int]] = field(default_factory=list)  # (task, attempt) in flight, oldest first
    release_reason: str = ""
    running_since: float | None = None  # when its oldest running task (held[0]) started
    slots: int = 1  # tasks it runs at once: held[:slots] run, the rest wait for a slot
    started: list[float] = field(default_factory=list)  # when each running task started, oldest first
    release_at: float | None = None  # marked for release: let go at this time (a budget policy sets it)
    worked_until: float | None = None  # when its last task ended or was stopped (None: none yet)
    first_price: float | None = None  # its first ATU's price: the one the core knew when it came (see machine_cost)
    tally: FreeSlots | None = field(default=None, repr=False, compare=False)  # None once gone

    def join(self, tally: FreeSlots) -> None:
        """Count this machine's free slots in ``tally`` (the core's) from now until it leaves."""
        self.tally = tally
        tally.free += self.free_slots
        tally.idle[self.cluster] = tally.idle.get(self.cluster, 0) + (not self.held)

    def leave(self) -> None:
        """Gone: its free slots no longer count (what it still holds may be dropped after)."""
        if self.tally is not None:
            self.tally.free -= self.free_slots
            self.tally.idle[self.cluster] -= not self.held
            self.tally = None

    def set_slots(self, slots: int) -> None:
        before = self.free_slots
        self.slots = slots
        if self.tally is not None:
            self.tally.free += self.free_slots - before

    def hold(self, task: int, attempt: int, now: float) -> None:
        """A task handed to this machine: it runs now if a slot is free, else waits for one."""
        tally = self.tally
        if tally is not None:
            if len(self.held) < self.slots:
                tally.free -= 1
            if not self.held:
                tally.idle[self.cluster] -= 1
        held = self.held
        held.append((task, attempt))
        started = self.started  # mark_started, inlined: this runs once a result
        missing = min(len(held), self.slots) - len(started)
        if missing > 0:
            started.extend([now] * missing)
        self.running_since = started[0] if started else None

    def drop(self, index: int, now: float) -> None:
        """The task at ``held[index]`` ended or was stopped; a waiting one takes its slot now."""
        del self.held[index]
        self.worked_until = now
        tally = self.tally
        if tally is not None:
            if len(self.held) < self.slots:
                tally.free += 1
            if not self.held:
                tally.idle[self.cluster] += 1
        started = self.started  # mark_ended and mark_started, inlined: this runs once a result
        if index < len(started):
            del started[index]
        missing = min(len(self.held), self.slots) - len(started)  # a waiting task took the freed slot
        if missing > 0:
            started.extend([now] * missing)
        self.running_since = started[0] if started else None

    def drop_all(self) -> None:
        """Everything it holds goes back (a lost or reconnected worker)."""
        if self.tally is not None:
            self.tally.free += self.slots - self.free_slots
            self.tally.idle[self.cluster] += bool(self.held)
        self.held.clear()
        self.started.clear()
        self.running_since = None

    def uptime(self, now: float) -> float:
        end = self.released_at if self.released_at is not None else now
        return max(0.0, end - self.acquired_at)

    @property
    def running(self) -> int:
        """Tasks it is running now (busy slots)."""
        return min(len(self.held), self.slots)

    @property
    def free_slots(self) -> int:
        return max(0, self.slots - len(self.held))

    def rounds_to_end(self) -> int:
        """Task lengths until one more task handed to it ends: it waits for a slot behind the tasks
        it holds (``slots`` of them run at once), then runs. One slot: the held tasks, plus one."""
        ahead = len(self.held) + 1 - self.slots
        return 1 + max(0, -(-ahead // self.slots))

    def mark_started(self, now: float) -> None:
        """Tasks that moved into a free slot start now (the worker starts them when one ends)."""
        started = self.started
        missing = min(len(self.held), self.slots) - len(started)  # running tasks without a start
        if missing > 0:
            started.extend([now] * missing)
        self.running_since = started[0] if started else None

    def mark_ended(self, index: int) -> None:
        """The task at ``held[index]`` (already removed from ``held``) ended or left."""
        if index < len(self.started):
            del self.started[index]


# task status codes, one byte per task id (public: the policies read them)
PENDING, RUNNING, DONE, FAILED = 0, 1, 2, 3
GIVE_UP_AFTER = 3  # consecutive machines of a cluster lost before doing any task
MAX_MACHINE_LOSSES = 2  # lost machines counted against a task before it is quarantined (see .losses)

F = TypeVar("F", bound=Callable[..., Any])


def handles(*events: type) -> Callable[[F], F]:
    """Mark a core method as the handler of ``events`` (event types of :mod:`.events`)."""

    def mark(method: F) -> F:
        method._handles = events  # type: ignore[attr-defined]
        return method

    return mark


def _handler_table(cls: type) -> dict[type, Callable[..., list[Action]]]:
    """Event type -> the function that handles it for ``cls``: the marked methods of its classes,
    a subclass's marks winning, each looked up by name so an override needs no mark of its own."""
    names: dict[type, str] = {}
    for klass in reversed(cls.__mro__):
        for name, member in vars(klass).items():
            for event in getattr(member, "_handles", ()):
                names[event] = name
    return {event: getattr(cls, name) for event, name in names.items()}


class Core:
    """The I/O-free state machine; see the module docstring.

    Each event type has one handler, the method marked ``@handles(EventType)``; :meth:`handle`
    calls it and then :meth:`_after_event`. A policy (``core/bats``, ``core/deadline``,
    ``core/adaptive``, ``core/offers``) subclasses this class, sets ``name`` (its ``--policy`` word,
    see :mod:`..registry`), marks handlers of the events only it knows, and overrides these hooks,
    which are the whole interface between the base and a policy:

    - ``_initial_acquisitions(now)``: the machines asked for when the run starts;
    - ``_next_task(machine)``: the task a machine that asks gets (None: nothing for it now);
    - ``_return_task(task, attempt, machine)``: a task a lost or released machine held goes back;
    - ``_settle(machine, ev)``: a result arrives (records it or retries it);
    - ``_after_result(machine, ev)``: what follows a result (re-planning, the end of a phase);
    - ``_replace_lost(machine, now)``: a machine was lost;
    - ``_retire(machine, now, reason)``: a machine leaves the run (released or lost);
    - ``_finish_if_stranded(now)``: the end when no machine is left or coming;
    - ``_better_left_for_an_idle_machine(machine)``, ``_feed_hungry(now)``, ``_feed(machine)``: the
      hand-out of tasks to machines that asked;
    - the event handlers ``_on_tick``, ``_on_price_changed``, ``_on_acquire_failed``,
      ``_on_machine_acquired`` (override by name: the mark is inherited);
    - ``_after_event(event, actions)``: what every event is followed by (releases due now).
    """

    name = "self"  # the --policy word; each policy sets its own (core/registry.py)
    phase = "running"  # a policy with phases (sampling, offering, executing) keeps its current one here

    def view(self) -> CoreView:
        """What the views and drivers may read of this core (see :mod:`.view`)."""
        return CoreView(policy=self.name, phase=self.phase)

    _handlers: ClassVar[dict[type, Callable[..., list[Action]]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._handlers = _handler_table(cls)

    def __init__(
        self,
        task_ids: Iterable[int],
        clusters: dict[str, ClusterConfig],
        rng: random.Random,
        *,
        retries: int = 0,
        retry_rules: RetryRules | None = None,
        boot_timeout_s: float = 600.0,
        finished: dict[int, str] | None = None,
        max_held: int = DEFAULT_MAX_HELD,
        max_machines: int | None = None,
        adaptive_prefetch: bool = False,
        max_machine_losses: int = MAX_MACHINE_LOSSES,
    ) -> None:
        self.max_held = max_held
        self.max_machine_losses = max_machine_losses
        self._losses = LossLedger(max_machine_losses)  # lost machines counted against tasks
        self._suspects = self._losses.counts  # the same dict: empty (false) until a machine is lost
        self.quarantined: list[int] = []
        self.max_machines = max_machines  # over all clusters (seed 003 §3.1); None: no overall limit
        self.adaptive_prefetch = adaptive_prefetch
        self._recent_runtime: float | None = None  # moving average of reported runtimes
        self.clusters = clusters
        self.rng = rng
        self.retries = retries
        self.retry_rules = retry_rules or RetryRules()  # which failures deserve a retry (common/retry.py)
        self.boot_timeout_s = boot_timeout_s
        ids = array("l", task_ids)
        self.total = len(ids)
        top = max(ids) if ids else 0
        self._status = bytearray(top + 1)
        self._attempts = array("l", [0]) * (top + 1)
        self._failures: dict[int, int] = {}
        self.done = 0
        self.failed = 0
        finished = finished or {}
        pending = array("l")
        for task in ids:
            outcome = finished.get(task)
            if outcome == "done":
                self._status[task] = DONE
                self.done += 1
            elif outcome == "failed":
                self._status[task] = FAILED
                self.failed += 1
            else:
                pending.append(task)
        self._pending = pending
        self._retry: list[tuple[int, str]] = []  # (task, machine it failed on)
        self.machines: dict[str, Machine] = {}
        self._live = 0  # machines not GONE; kept as a count because the hot path reads it
        self._free = FreeSlots()  # their free slots, summed (the end-game rule of _feed reads it)
        self._hungry: dict[str, None] = {}  # machines waiting for work, in asking order
        self._lost_in_a_row: dict[str, int] = {name: 0 for name in clusters}
        self._requested: dict[str, int] = {name: 0 for name in clusters}  # Acquire sent, not yet answered
        # tasks a machine of each cluster runs at once: configured, or the last machine's (``auto``)
        self.cluster_slots: dict[str, int] = {name: cl.slots or 1 for name, cl in clusters.items()}
        self.started_at: float | None = None
        self.last_finish_at: float | None = None
        self.finished: Finish | None = None
        self._now = 0.0  # the time of the event being handled
        self.prices = {name: cl.price for name, cl in clusters.items()}  # per ATU, now
        self._price_log: dict[str, tuple[list[float], list[float]]] = {}  # cluster -> (times, prices) of changes

    # ------------------------------------------------------------ queries
    @property
    def remaining(self) -> int:
        """Tasks without a final outcome (pending, retrying or in flight)."""
        return self.total - self.done - self.failed

    def live_machines(self, cluster: str | None = None) -> list[Machine]:
        return [m for m in self.machines.values()
                if m.state is not MachineState.GONE and (cluster is None or m.cluster == cluster)]

    def machine_cost(self, machine: Machine, now: float) -> tuple[int, float]:
        """ATUs begun and their money; each ATU costs the price when it begins (spot prices move).
        A machine's first ATU costs the price the core knew when the machine came: a price change
        heard at that same instant, after the acquisition its reservation was made for, applies
        from its next ATU (two spikes at one instant re-planned onto the second cluster at its old
        price, and the money reserved for those machines fell short of what they were charged)."""
        cluster = self.clusters[machine.cluster]
        atus = atus_begun(machine.uptime(now), cluster.atu_s, cluster.min_charge_s)
        changes = self._price_log.get(machine.cluster)
        if changes is None:
            return atus, atus * cluster.price
        money = charged(machine.acquired_at, atus, cluster.atu_s, cluster.price, *changes)
        if atus and machine.first_price is not None:
            money += machine.first_price - charged(machine.acquired_at, 1, cluster.atu_s, cluster.price, *changes)
        return atus, money

    def idle_atus(self, machine: Machine, now: float, atus: int) -> int:
        """Of the ``atus`` a machine has paid, those begun after its last task ended: paid for
        nothing (a machine renewed, or kept to an edge, with no task left for it)."""
        if machine.held:  # working until now (or until it was let go)
            last: float | None = machine.released_at if machine.released_at is not None else now
        else:
            last = machine.worked_until
        if last is None:
            return atus
        cluster = self.clusters[machine.cluster]
        return max(0, atus - atus_begun(last - machine.acquired_at, cluster.atu_s, cluster.min_charge_s))

    def report(self, now: float) -> dict:
        """The run's figures as plain data (the driver adds paths and earlier sessions)."""
        machines = []
        total_cost = idle_cost = 0.0
        for m in self.machines.values():
            atus, cost = self.machine_cost(m, now)
            idle = self.idle_atus(m, now, atus)
            total_cost += cost
            idle_cost += cost * idle / atus if atus else 0.0
            machines.append({
                "id": m.id, "cluster": m.cluster, "slots": m.slots, "nt": m.nt, "rt_s": round(m.rt, 6),
                "uptime_s": round(m.uptime(now), 6), "atus": atus, "idle_atus": idle, "cost": cost,
                "state": m.state.value, "release_reason": m.release_reason,
            })
        end = self.last_finish_at if self.remaining == 0 and self.last_finish_at is not None else now
        tasks: dict[str, Any] = {"total": self.total, "done": self.done, "failed": self.failed,
                                 "not_run": self.remaining}
        if self.failed:
            tasks["failed_ids"] = [task for task, status in enumerate(self._status) if status == FAILED]
        if self.quarantined:
            tasks["quarantined_ids"] = sorted(self.quarantined)
        return {
            "tasks": tasks,
            "makespan_s": max(0.0, end - (self.started_at if self.started_at is not None else now)),
            "cost": {"total": total_cost, "idle": round(idle_cost, 9)},
            "machines": machines,
        }

    # ------------------------------------------------------------ the state machine
    def handle(self, event: Event) -> list[Action]:
        """Feed one event; return the actions the driver must carry out, in order."""
        if self.finished is not None:
            if isinstance(event, TaskFinished):
                return [IgnoreResult(event.machine, event.task, "run already finished")]
            if isinstance(event, MachineCameLate):  # money spent after the end is still money spent
                return self._on_machine_came_late(event)
            return []
        self._now = event.now
        handler = self._handlers.get(type(event))
        if handler is None:
            raise TypeError(f"{type(self).__name__} does not handle {type(event).__name__}")
        actions = handler(self, event)
        self._after_event(event, actions)
        return actions

    def _after_event(self, event: Event, actions: list[Action]) -> None:
        """A hook: append what every event must be followed by (the base policy has nothing)."""

    @handles(RunStarted)
    def _on_run_started(self, ev: RunStarted) -> list[Action]:
        self.started_at = ev.now
        if self.remaining == 0:
            return self._finish_if_complete(ev.now)
        return self._initial_acquisitions(ev.now)

    def _initial_acquisitions(self, now: float) -> list[Action]:
        """Self-scheduling: every configured machine, never more than there are tasks."""
        actions: list[Action] = []
        for name, cluster in self.clusters.items():
            n = min(cluster.max, self.remaining, self.machines_allowed())
            if n > 0:
                self._requested[name] += n
                actions.append(Acquire(name, n))
        return actions

    def machines_allowed(self) -> int:
        """How many more machines the overall limit lets the run have now (live and requested count)."""
        if self.max_machines is None:
            return self.total + 1  # more than any cluster is ever given
        return max(0, self.max_machines - self._live - sum(self._requested.values()))

    @handles(MachineAcquired)
    def _on_machine_acquired(self, ev: MachineAcquired) -> list[Action]:
        self._requested[ev.cluster] = max(0, self._requested[ev.cluster] - 1)
        machine = self.machines[ev.machine] = Machine(id=ev.machine, cluster=ev.cluster, acquired_at=ev.now,
                                                      slots=self.cluster_slots[ev.cluster],
                                                      first_price=self.prices[ev.cluster])
        machine.join(self._free)
        self._live += 1
        return []

    @handles(MachineCameLate)
    def _on_machine_came_late(self, ev: MachineCameLate) -> list[Action]:
        if ev.machine in self.machines:
            return []
        reason = "came after its acquisition was given up on"
        self.machines[ev.machine] = Machine(id=ev.machine, cluster=ev.cluster, acquired_at=min(ev.asked_at, ev.now),
                                            released_at=ev.now, state=MachineState.GONE, release_reason=reason)
        return [Release(ev.machine, reason)]

    @handles(AcquireFailed)
    def _on_acquire_failed(self, ev: AcquireFailed) -> list[Action]:
        self._requested[ev.cluster] = max(0, self._requested[ev.cluster] - ev.n)
        return self._finish_if_stranded(ev.now)

    @handles(MachineUp)
    def _on_machine_up(self, ev: MachineUp) -> list[Action]:
        machine = self.machines.get(ev.machine)
        if machine is None or machine.state is MachineState.GONE:
            return []
        if machine.state is MachineState.BOOTING:
            machine.state = MachineState.UP
            machine.up_at = ev.now
            machine.set_slots(max(1, ev.slots))
            self.cluster_slots[machine.cluster] = machine.slots
            return []
        # A known worker said hello again (it reconnected): it may have lost the frames in flight,
        # so its tasks go back into the bag; a late result for one of them is ignored.
        return self._requeue_held(machine)

    @handles(WorkerAsked)
    def _on_worker_asked(self, ev: WorkerAsked) -> list[Action]:
        machine = self.machines.get(ev.machine)
        if machine is None or machine.state is not MachineState.UP:
            return []
        machine.wanted = min(self._capacity(machine) - len(machine.held), machine.wanted + max(0, ev.n))
        return self._feed(machine)

    @handles(TaskFinished)
    def _on_task_finished(self, ev: TaskFinished) -> list[Action]:
        machine = self.machines.get(ev.machine)
        if machine is None or machine.state is not MachineState.UP:
            return [IgnoreResult(ev.machine, ev.task, "machine is not part of the run")]
        try:
            index = machine.held.index((ev.task, ev.attempt))
        except ValueError:
            return [IgnoreResult(ev.machine, ev.task, f"attempt {ev.attempt} is not running there")]
        machine.drop(index, ev.now)  # a prefetched task takes the freed slot now
        machine.nt += 1
        machine.rt += max(0.0, ev.runtime_s)  # slot-seconds on a machine with several slots
        recent = self._recent_runtime
        self._recent_runtime = ev.runtime_s if recent is None else recent + _RUNTIME_SMOOTHING * (ev.runtime_s - recent)
        actions = self._settle(machine, ev)
        self._lost_in_a_row[machine.cluster] = 0
        actions.extend(self._after_result(machine, ev))
        if self.finished is not None:
            return actions
        if self.remaining == 0:
            actions.extend(self._finish_if_complete(ev.now))
            return actions
        if ev.ask:
            machine.wanted = min(self._capacity(machine) - len(machine.held), machine.wanted + 1)
        actions.extend(self._feed(machine))
        return actions

    def _settle(self, machine: Machine, ev: TaskFinished) -> list[Action]:
        """Decide a finished attempt's outcome: record it, or put the task up for a retry."""
        actions: list[Action] = []
        task = ev.task
        attempts = self._attempts[task]
        if ev.exit_code == 0 and not ev.timed_out:
            self._status[task] = DONE
            self.done += 1
            self.last_finish_at = ev.now
            actions.append(RecordResult(task, "done", ev.machine, attempts, ev.exit_code, ev.runtime_s,
                                        False, ev.stdout, ev.stderr))
        else:
            actions.extend(self._attempt_failed(machine, ev))
        return actions

    def _attempt_failed(self, machine: Machine, ev: TaskFinished) -> list[Action]:
        task = ev.task
        failures = self._failures.get(task, 0) + 1
        self._failures[task] = failures
        if failures <= self.retries and self.retry_rules.decide(ev.exit_code, ev.timed_out) == "retry":
            self._status[task] = PENDING
            self._retry.append((task, ev.machine))
            return self._feed_hungry()
        self._status[task] = FAILED
        self.failed += 1
        self.last_finish_at = ev.now
        return [RecordResult(task, "failed", ev.machine, self._attempts[task], ev.exit_code,
                             ev.runtime_s, ev.timed_out, ev.stdout, ev.stderr)]

    def _after_result(self, machine: Machine, ev: TaskFinished) -> list[Action]:
        """A policy's look at each result once it is settled (self-scheduling: nothing to do)."""
        return []

    @handles(MachineLost)
    def _on_machine_lost(self, ev: MachineLost) -> list[Action]:
        machine = self.machines.get(ev.machine)
        if machine is None or machine.state is MachineState.GONE:
            return []
        self._retire(machine, ev.now, ev.reason)  # first: the lost machine's free slots are no place for its tasks
        quarantined = self._count_losses(machine, ev)  # before the rest go back: none is handed out again
        actions = self._requeue_held(machine)
        actions.extend(quarantined)
        if machine.nt == 0:
            self._lost_in_a_row[machine.cluster] += 1
        actions.extend(self._replace_lost(machine, ev.now))
        actions.extend(self._finish_if_stranded(ev.now))
        return actions

    def _count_losses(self, machine: Machine, ev: MachineLost) -> list[Action]:
        """Count the loss against the tasks the lost machine held, where it counts (see
        :mod:`.losses`); record failed those a ``[retry]`` rule for lost machines gives up on, and
        quarantine those at ``max_machine_losses`` that go back into the bag (another copy still
        running goes on). A quarantined task stays in the bag's array and is skipped when it comes
        up (:meth:`_feed`)."""
        actions: list[Action] = []
        quarantine = dict(self._losses.lost(ev.now, machine.id, [task for task, _ in machine.held]))
        for index, (task, attempt) in enumerate(list(machine.held)):
            verdict = self._lost_for_good(task, quarantine.get(task), machine, ev, running=index < machine.slots)
            if verdict is None:
                continue
            note, quarantined = verdict
            machine.drop(machine.held.index((task, attempt)), ev.now)  # gone already: no slot counts move
            self._return_task(task, attempt, machine)
            if self._status[task] != PENDING:
                continue
            self._status[task] = FAILED
            self.failed += 1
            if quarantined:
                self.quarantined.append(task)
            self.last_finish_at = ev.now
            actions.append(Notify(note, warning=True))
            actions.append(RecordResult(task, "failed", machine.id, self._attempts[task], -1, 0.0, False, b"",
                                        note.encode()))
        if actions and self.remaining == 0:
            actions.extend(self._finish_if_complete(ev.now))
        return actions

    def _lost_for_good(self, task: int, losses: int | None, machine: Machine, ev: MachineLost,
                       running: bool) -> tuple[str, bool] | None:
        """Why a task the lost machine held is recorded failed rather than put back in the bag, and
        whether that is the quarantine (None: it goes back): for a task it was running, a ``[retry]``
        rule for ``cause = "lost"`` (``fail``, or ``retry`` with the attempts spent); else the
        quarantine, when the ledger counted ``losses`` (not None) reaching ``max_machine_losses``."""
        if running:
            verdict = self.retry_rules.decide_lost()
            lost = f"task {task} was running on {machine.id} when it was lost ({ev.reason})"
            if verdict == "fail":
                return f"{lost}; [retry] fails a lost machine's task: recorded failed", False
            if verdict == "retry":
                failures = self._failures.get(task, 0) + 1
                self._failures[task] = failures
                if failures > self.retries:
                    return (f"{lost}; its {failures} failed attempt(s) are past the {self.retries} retries: "
                            "recorded failed"), False
        if losses is None:
            return None
        return (f"task {task} was on {losses} machines that were lost (the last, {machine.id}: "
                f"{ev.reason}); quarantined: recorded failed and not run again"), True

    def _replace_lost(self, machine: Machine, now: float) -> list[Action]:
        """Self-scheduling keeps every configured machine busy: replace a lost one while its
        cluster still looks healthy (not several machines in a row lost before doing a task)."""
        cluster = self.clusters[machine.cluster]
        wanted = min(cluster.max, self.remaining)
        have = len(self.live_machines(machine.cluster)) + self._requested[machine.cluster]
        if (self.remaining > 0 and have < wanted and self._lost_in_a_row[machine.cluster] < GIVE_UP_AFTER
                and self.machines_allowed() > 0):
            self._requested[machine.cluster] += 1
            return [Acquire(machine.cluster, 1)]
        return []

    @handles(Tick)
    def _on_tick(self, ev: Tick) -> list[Action]:
        actions: list[Action] = []
        for machine in list(self.machines.values()):
            if machine.state is MachineState.BOOTING and ev.now - machine.acquired_at > self.boot_timeout_s:
                actions.append(Release(machine.id, "boot timeout"))
                actions.extend(self._on_machine_lost(MachineLost(ev.now, machine.id, "boot timeout")))
        return actions

    @handles(PriceChanged)
    def _on_price_changed(self, ev: PriceChanged) -> list[Action]:
        times, prices = self._price_log.setdefault(ev.cluster, ([], []))
        times.append(ev.now)
        prices.append(ev.price)
        self.prices[ev.cluster] = ev.price
        return []

    @handles(BudgetRaised)
    def _on_budget_raised(self, ev: BudgetRaised) -> list[Action]:
        """A policy without a budget has nothing to raise."""
        return []

    @handles(StopRequested)
    def _on_stop_requested(self, ev: StopRequested) -> list[Action]:
        actions: list[Action] = []
        for machine in self.live_machines():
            actions.append(Release(machine.id, ev.reason))
            self._requeue_held(machine)
            self._retire(machine, ev.now, ev.reason)
        self.finished = Finish("incomplete", ev.reason)
        actions.append(self.finished)
        return actions

    # ------------------------------------------------------------ helpers
    def _retire(self, machine: Machine, now: float, reason: str) -> None:
        self._live -= 1
        machine.leave()
        machine.state = MachineState.GONE
        machine.released_at = now
        machine.release_reason = reason
        machine.wanted = 0
        self._hungry.pop(machine.id, None)

    def _requeue_held(self, machine: Machine) -> list[Action]:
        for task, attempt in machine.held:
            self._return_task(task, attempt, machine)
        had_tasks = bool(machine.held)
        if had_tasks:  # its tasks were stopped now: the time up to here was work, not idle (idle_atus)
            machine.worked_until = self._now
        machine.drop_all()
        machine.wanted = 0
        return self._feed_hungry() if had_tasks else []

    def _return_task(self, task: int, attempt: int, machine: Machine) -> None:
        """A task in flight on a machine that is gone goes back into the bag."""
        self._status[task] = PENDING
        self._pending.append(task)

    def _next_task(self, machine: Machine) -> int | None:
        if self._retry:
            alone = self._live <= 1
            for index, (task, failed_on) in enumerate(self._retry):
                if failed_on != machine.id or alone:
                    self._retry.pop(index)
                    return task
        pending = self._pending
        if not pending:
            return None
        index = self.rng.randrange(len(pending))
        task = pending[index]
        pending[index] = pending[-1]
        pending.pop()
        return task

    def queue_depth(self) -> int:
        """How many tasks a worker is sent at most right now (see the module docstring)."""
        if not self.adaptive_prefetch:
            return self.max_held
        recent = self._recent_runtime
        if recent is not None and recent < SHORT_TASK_S:
            return self.max_held
        if recent is not None and recent >= LONG_TASK_S:
            return 1  # a round trip is nothing next to the task; a queued task could wait on a slow machine
        return min(DEFAULT_MAX_HELD, self.max_held)

    def _capacity(self, machine: Machine) -> int:
        """The most tasks a machine's worker holds: one a slot, and ``max_held - 1`` prefetched."""
        return machine.slots - 1 + self.max_held

    def _feed(self, machine: Machine) -> list[Action]:
        actions: list[Action] = []
        depth = machine.slots - 1 + self.queue_depth()
        suspects = self._suspects
        while machine.wanted > 0 and len(machine.held) < depth:
            if len(machine.held) >= machine.slots and self._better_left_for_an_idle_machine(machine):
                self._hungry[machine.id] = None
                return actions
            if suspects and len(machine.held) >= machine.slots and self._holds_suspect(machine):
                return actions  # nothing waits behind a task that was on a lost machine (see .losses)
            task = self._next_task(machine)
            if task is None:
                self._hungry[machine.id] = None
                return actions
            status = self._status[task]
            if status == FAILED:  # quarantined after losing its machines (see _count_losses)
                continue
            if suspects and len(machine.held) >= machine.slots and self._losses.is_suspect(task):
                self._return_task(task, self._attempts[task], machine)  # for a free slot, not a queue
                self._hungry[machine.id] = None
                return actions
            machine.wanted -= 1
            if status == PENDING:  # a replicated task's extra copy keeps its status
                self._status[task] = RUNNING
            attempt = self._attempts[task] + 1
            self._attempts[task] = attempt
            machine.hold(task, attempt, self._now)
            actions.append(Dispatch(machine.id, task, attempt))
        self._hungry.pop(machine.id, None)
        return actions

    def _holds_suspect(self, machine: Machine) -> bool:
        is_suspect = self._losses.is_suspect
        return any(is_suspect(task) for task, _ in machine.held)

    def _better_left_for_an_idle_machine(self, machine: Machine) -> bool:
        """Whether the tasks left are too few to prefetch one to this busy machine, because other
        machines with nothing to run (or still booting) could start them at once."""
        available = len(self._pending) + len(self._retry)
        if available >= self._live * max(self.cluster_slots.values(), default=1):  # plenty left: the common case
            return False
        # the free slots of every machine not gone but this one (which is busy: it has none)
        return available <= self._free.free - (machine.free_slots if machine.tally is not None else 0)

    def _feed_hungry(self) -> list[Action]:
        actions: list[Action] = []
        for machine_id in list(self._hungry):
            if not self._pending and not self._retry:
                break
            actions.extend(self._feed(self.machines[machine_id]))
        return actions

    def _finish_if_complete(self, now: float) -> list[Action]:
        if self.remaining > 0:
            return []
        actions: list[Action] = []
        for machine in self.live_machines():
            actions.append(Release(machine.id, "bag done"))
            self._retire(machine, now, "bag done")
        status = "done" if self.failed == 0 else "failed"
        reason = "every task succeeded" if status == "done" else f"{self.failed} task(s) failed"
        self.finished = Finish(status, reason)
        actions.append(self.finished)
        return actions

    def _finish_if_stranded(self, now: float) -> list[Action]:
        """No machine left or coming, tasks left: the run cannot go on."""
        if self.remaining == 0 or self._live or any(self._requested.values()):
            return []
        self.finished = Finish("incomplete", "no machines left to run the remaining tasks")
        return [self.finished]


Core._handlers = _handler_table(Core)  # the subclasses' tables are built by __init_subclass__
