"""The end of the bag: the last tasks go where they end first, and idle paid machines race slow ones.

How this works. Seed 000 "BaTS" §6 names an end-game as future work: a plan's makespan is
missed mostly at the end, when the bag has run dry and the last tasks, some on slow machines,
take a whole task length while faster machines that are already paid for sit idle (MapReduce's
speculative execution and Work Queue's fast abort answer the same problem). :class:`EndGame` is
a part that :class:`~.policy.BatsCore` owns and calls, with its own state (the copies running), that
does two things in the execution phase, both from the runtime estimates the plan uses:

1. *Hand-out by expected finish.* When no more tasks are waiting than there are machines, a
   machine that asks gets one only if it is among the machines expected to finish a task first:
   each machine's expected finish is when it is free (now if idle, else the expected end of its
   running task by the sample's tail rule, :class:`~..planning.monitor.TailEstimates`) plus its
   cluster's mean runtime. A fast machine about to be free beats a slow idle one; the slow one
   waits (every tick asks again, with the estimates aged).
2. *Copies.* A machine with nothing to run may start a copy of a task another machine is running
   when the copy is expected to end first: the running task is expected to take tau_e(elapsed) on
   its machine (it is known to be at least that long) and the same task takes that times the
   ratio of the clusters' means here. Only one copy per task, of the running task whose expected
   gain is largest; only when the copy is expected to end within the machine's paid time (its
   edge less the release margin), or, for a machine the plan keeps, within the plan's time for
   its cluster and with its next ATU reserved by the budget. No ATU is begun for a copy otherwise.
   The first result that succeeds counts (the task is recorded once); the other attempt is
   stopped (:class:`~..actions.Cancel`) and its machine asks for work again. A copy that fails
   while the other still runs is dropped, not counted as the task's failure; a machine released or
   lost with a copy leaves the task to the other attempt.

The policy calls :meth:`EndGame.next_task` (the hand-out, around the bag's own) and
:meth:`~EndGame.feed_waiting` (every tick) in the execution phase once there are estimates, and
:meth:`~EndGame.settle` and :meth:`~EndGame.return_task` (a result, a task back from a machine gone,
around the core's own) and :meth:`~EndGame.report` always. Paid time and the budget come from the
:mod:`.execution` part.

Counted for the report (``endgame``): copies started, copies that won, the seconds machines spent
on copies (time already paid: a copy begins no ATU the plan does not pay), and tasks withheld from a
machine because another was expected to finish them first.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ... import core as c
from ..actions import Cancel
from .execution import Execution


class EndGame:
    """See the module docstring."""

    def __init__(self, core: c.Core, execution: Execution, mean_s: Callable[[str], float | None]) -> None:
        self.core = core  # the machines and the bag
        self.execution = execution  # paid time and the budget
        self.mean_s = mean_s  # a cluster's mean runtime (the policy's; None until sampling ends)
        self._copies: dict[int, dict[str, tuple[int, float]]] = {}  # task -> machine -> (attempt, started)
        self._copy_of: dict[str, int] = {}  # machine -> the copied task it runs
        self.copies_started = 0
        self.copies_won = 0  # the copy's result came first
        self.copy_s = 0.0  # seconds machines ran copies (both sides of a race count once: the copy's)
        self.withheld = 0  # a task kept for a machine expected to finish it first

    # ------------------------------------------------------------ hand-out
    def next_task(self, machine: c.Machine, take: Callable[[c.Machine], int | None]) -> int | None:
        """The task ``machine`` gets: ``take``'s (the bag's), unless it is withheld for a machine
        expected to finish first; a copy of a running task when the bag has none for it."""
        waiting = len(self.core._pending) + len(self.core._retry)
        if waiting and waiting < self.core._live and not self._among_first(machine, waiting):
            self.withheld += 1
            return None
        task = take(machine)
        if task is None and not machine.held:
            task = self._copy_for(machine)
        return task

    def _mean_of(self, cluster: str) -> float:
        mean = self.mean_s(cluster)
        return mean if mean is not None else math.inf

    def _free_at(self, m: c.Machine, now: float) -> float:
        """When ``m`` is expected to have a slot free (now if one is)."""
        if m.free_slots:
            return now
        if len(m.held) > m.slots or not m.started:
            return math.inf  # a queued task too: not a candidate for the last ones
        tau_e = self.execution.tau_e()
        return min(started + max(now - started, float(tau_e(m.cluster, max(0.0, now - started))))
                   for started in m.started)

    def _among_first(self, machine: c.Machine, waiting: int) -> bool:
        """Whether ``machine`` is among the ``waiting`` machines expected to finish a task first."""
        now = self.core._now
        means = {name: self._mean_of(name) for name in self.core.clusters}  # once: a pool may hold 1,000 machines
        mine = now + means[machine.cluster]
        better = 0
        for m in self.core.machines.values():
            if m is machine or m.state is not c.MachineState.UP or m.release_at is not None:
                continue
            if means[m.cluster] >= mine - now - 1e-9:
                continue  # free at once or later, it still ends a task no sooner (a slower or equal cluster)
            if self._free_at(m, now) + means[m.cluster] < mine - 1e-9:
                better += 1
                if better >= waiting:
                    return False
        return True

    # ------------------------------------------------------------ copies
    def _copy_for(self, machine: c.Machine) -> int | None:
        """The running task whose copy here is expected to end first by the most, if any may start."""
        now = self.core._now
        mean_here = self._mean_of(machine.cluster)
        if not math.isfinite(mean_here) or machine.state is not c.MachineState.UP or machine.id in self._copy_of:
            return None
        tau_e = self.execution.tau_e()
        # a copy ends first only when it runs on a faster cluster (total * mean_here / there < total - elapsed)
        slower = {name: mean for name in self.core.clusters
                  if math.isfinite(mean := self._mean_of(name)) and mean > mean_here}
        if not slower:
            return None
        best: tuple[float, int, float] | None = None  # (gain, task, copy end)
        for m in self.core.machines.values():
            there = slower.get(m.cluster)
            if there is None or m.state is not c.MachineState.UP or not m.held or m.running_since is None:
                continue
            task = m.held[0][0]
            if task in self._copies or self.core._status[task] != c.RUNNING:
                continue
            elapsed = max(0.0, now - m.running_since)
            total = max(elapsed, float(tau_e(m.cluster, elapsed)))
            ends_there = m.running_since + total
            ends_here = now + total * mean_here / there
            gain = ends_there - ends_here
            if gain > 1e-9 and (best is None or gain > best[0]):
                best = (gain, task, ends_here)
        if best is None or not self._copy_paid(machine, best[2]):
            return None
        _gain, task, _end = best
        holder = next(m for m in self.core.machines.values() if m.held and m.held[0][0] == task and m is not machine)
        self._copies[task] = {holder.id: (holder.held[0][1], holder.running_since or now),
                              machine.id: (self.core._attempts[task] + 1, now)}
        self._copy_of[machine.id] = task
        self.copies_started += 1
        return task

    def _copy_paid(self, machine: c.Machine, ends: float) -> bool:
        """Whether a copy ending at ``ends`` begins no ATU the budget and the plan do not pay."""
        now = self.core._now
        edge = self.execution.edge(machine, now)
        if ends <= edge - self.execution.settings.release_margin_s:
            return True  # within time already paid
        if machine.release_at is not None or ends > self.execution.plan_end.get(machine.cluster, -math.inf):
            return False
        return self.execution.budget is None or self.execution.kept_by_budget(machine.id, now)

    def _drop_copy(self, task: int, machine_id: str, now: float) -> None:
        """One attempt of a copied task is over (won, lost, stopped or its machine gone)."""
        attempts = self._copies.get(task)
        if attempts is None:
            return
        attempt = attempts.pop(machine_id, None)
        if self._copy_of.get(machine_id) == task:
            del self._copy_of[machine_id]
            if attempt is not None:
                self.copy_s += max(0.0, now - attempt[1])
        if len(attempts) <= 1:
            for other in attempts:  # the race is over: the one left is an ordinary attempt
                if self._copy_of.get(other) == task:
                    del self._copy_of[other]
                    self.copy_s += max(0.0, now - attempts[other][1])
            del self._copies[task]

    def settle(self, machine: c.Machine, ev: c.TaskFinished,
               record: Callable[[c.Machine, c.TaskFinished], list[c.Action]]) -> list[c.Action]:
        """A result arrives: ``record`` settles it (records it or retries it) unless it is a copy's
        that loses to the other attempt; the first success stops the other attempt."""
        attempts = self._copies.get(ev.task)
        if attempts is None:
            return record(machine, ev)
        succeeded = ev.exit_code == 0 and not ev.timed_out
        others = [(mid, a) for mid, (a, _t) in attempts.items() if mid != machine.id]
        if not succeeded and others:  # the other attempt still runs: it decides the outcome
            self._drop_copy(ev.task, machine.id, ev.now)
            return []
        if succeeded and self._copy_of.get(machine.id) == ev.task:
            self.copies_won += 1
        self._drop_copy(ev.task, machine.id, ev.now)
        actions = record(machine, ev)
        for mid, attempt in others:
            actions.extend(self._cancel(mid, ev.task, attempt, ev.now))
        return actions

    def _cancel(self, machine_id: str, task: int, attempt: int, now: float) -> list[c.Action]:
        other = self.core.machines.get(machine_id)
        self._drop_copy(task, machine_id, now)
        if other is None or other.state is c.MachineState.GONE or (task, attempt) not in other.held:
            return []
        other.drop(other.held.index((task, attempt)), now)  # a queued task takes the freed slot now
        return [Cancel(machine_id, task, attempt, "another copy of the task ended first")]

    def return_task(self, task: int, attempt: int, machine: c.Machine,
                    give_back: Callable[[int, int, c.Machine], None]) -> None:
        """A task ``machine`` held goes back (``give_back``), unless another attempt of it runs on."""
        attempts = self._copies.get(task)
        if attempts is not None and any(mid != machine.id for mid in attempts):
            self._drop_copy(task, machine.id, self.core._now)  # the other attempt goes on
            return
        give_back(task, attempt, machine)

    def feed_waiting(self) -> list[c.Action]:
        """Estimates age: a task withheld from a machine waiting, or a copy, may fit now."""
        actions: list[c.Action] = []
        for machine_id in list(self.core._hungry):
            m = self.core.machines[machine_id]
            if m.state is c.MachineState.UP and not m.held and m.wanted > 0:
                actions.extend(self.core._feed(m))
        return actions

    def report(self) -> dict:
        return {"copies_started": self.copies_started, "copies_won": self.copies_won,
                "copy_paid_s": round(self.copy_s, 6), "tasks_withheld": self.withheld}
