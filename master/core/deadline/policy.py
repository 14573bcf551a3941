"""``--deadline``: BaTS's sampling, then the cheapest time-varying plan that meets the deadline.

How this works (seed ``004_a72da6d749083844.txt`` §V-A, eqs. 18-25; sampling from seed 000 §2).
:class:`DeadlineCore` is :class:`bats.master.core.bats.policy.BatsCore` with another answer to "what now?"
once the sample is complete (the ``_plan_after_sampling`` hook), so it is the same I/O-free state
machine: time comes in on the events, randomness from the seeded RNG.

1. **Sampling** is BaTS's, unchanged (replicated tasks on every cluster, the regression, each
   cluster's mean runtime T_j). The deadline counts from the start of the run, sampling included.
2. **Planning.** The ILP of :mod:`bats.master.core.deadline.ilp` is solved for the tasks left and the time
   left: per interval and cluster a machine count, counts never growing, billing per ATU or per
   minute, the boot delay measured on the sampling machines (up - acquired; machines already up
   count as booted), free clusters used next to paid ones. The plan is shown to the operator
   (:class:`Notify`, and the report's ``deadline.plans``). An infeasible deadline stops the run with
   one line naming the earliest feasible deadline, found by binary search over the same program
   (:func:`~bats.master.core.deadline.ilp.earliest_deadline`); ``--plan-only`` stops after the plan.
3. **Execution.** The plan's first counts are acquired (sampling machines count towards them).
   Machines of a cluster take the plan's slots in acquisition order; a slot that ends before the
   plan's estimated finish releases its machine at the first edge of the machine's own ATUs at or
   after the slot's end, a release margin early (the ILP paid that ATU in full: eq. 23), so the
   machine is marked at once and takes no task it is not expected to finish by then. Every
   monitoring interval the core compares the tasks left with what the plan's remaining machine
   time can still do at the current mean runtimes (a running task counts the part it has done, a
   machine slot loses ``tail`` tasks at its end as in the ILP). When the plan falls behind it
   re-plans with the same ILP on the tasks and time left (machines up need no boot) and moves to
   the new plan; when the deadline can no longer be met it plans for the earliest finish instead
   and says so. A cluster whose machines are lost is refilled to the plan's current count.
   Falling behind again right after a re-plan (a long-tailed task that runs on and on keeps the
   count below the tasks left) re-plans after twice the wait of the last time, up to the ILP's
   interval: each re-plan is one ILP, or a binary search of them when the deadline is lost, and
   re-planning every monitoring interval would cost more than it can change. Being on track again
   resets the wait; a price change, or no machine left, re-plans at once. Once the deadline is
   lost (the plan is for the earliest finish), a machine whose slot ends while it runs a task keeps
   it until the next edge of its own ATUs: starting the task over elsewhere cannot finish sooner,
   and a task longer than any slot (a heavy tail) would otherwise be started over forever.

The budget of BaTS does not apply (``budget`` is None): the deadline plan is the commitment, its
estimated cost is reported next to what the run really spent.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bats.common.config import ClusterConfig
from bats.common.durations import format_duration

from ... import core as c
from .. import billing
from ..actions import Notify, WakeAt
from ..bats.policy import EXECUTING, BatsCore, BatsSettings
from ..billing import EPS as _EPS
from ..planning.monitor import Billing
from ..view import CoreView
from .ilp import (
    DEFAULT_INTERVAL_S,
    DeadlineCluster,
    DeadlinePlan,
    cheapest_plan,
    earliest_deadline,
    proven_infeasible,
)

log = logging.getLogger(__name__)
STOPPED_BY_PLAN = "the deadline plan stops it at the end of its ATU"


@dataclass(frozen=True)
class DeadlineSettings:
    deadline_s: float  # from the start of the run
    interval_s: float = DEFAULT_INTERVAL_S
    plan_only: bool = False
    tail_tasks: float = 1.0  # tasks a machine slot may lose at its end (whole tasks, see deadline.py)


def rounded_up(seconds: float) -> float:
    """A duration an operator can type back: whole minutes above ten minutes, whole seconds below."""
    return math.ceil(seconds / 60.0 - _EPS) * 60.0 if seconds > 600 else float(math.ceil(seconds - _EPS))


class DeadlineCore(BatsCore):
    """Sampling, then seed 004's cheapest plan for a deadline; see the module docstring."""

    name = "deadline"
    lets_idle_go_per_second = False  # the plan decides when each slot ends

    def view(self) -> CoreView:
        return dataclasses.replace(super().view(), deadline_s=self.deadline.deadline_s, plan=self.plan)

    def __init__(self, task_ids: Iterable[int], clusters: dict[str, ClusterConfig], rng: random.Random,
                 settings: BatsSettings, deadline: DeadlineSettings, **kwargs: Any) -> None:
        super().__init__(task_ids, clusters, rng, settings, **kwargs)
        self.deadline = deadline
        self.plan: DeadlinePlan | None = None
        self.plan_start = 0.0
        self.plans: list[dict[str, Any]] = []  # every plan adopted: {at_s, reason, met, plan}
        self.earliest_s: float | None = None  # the earliest feasible deadline, when it was needed
        self.proven = True  # the deadline was proven infeasible (not a solver time limit) when not met
        self._replan_wait_s = settings.monitor_interval_s  # after falling behind: see the docstring, 3.
        self._replan_at = -math.inf  # no re-plan for falling behind before this time

    # ------------------------------------------------------------ the program's inputs
    def _elapsed(self, now: float) -> float:
        return now - (self.started_at if self.started_at is not None else now)

    def _program(self, now: float) -> list[DeadlineCluster]:
        out = []
        boots = self._boot_times()  # acquisition to hello, measured on this run's machines (else startup)
        for name in self.estimates:
            cl = self.clusters[name]
            usable = name in self._active and not (cl.bid is not None and self.prices[name] > cl.bid)
            mean = max(1e-6, self._stats(name, now).mean_s)
            live = len(self.live_machines(name))
            out.append(DeadlineCluster(name, mean, self.prices[name], cl.atu_s, cl.max if usable else 0,
                                       cl.min_charge_s, boots[name], min(live, cl.max if usable else 0),
                                       self.cluster_slots[name]))
        return out

    def _solve(self, now: float) -> tuple[DeadlinePlan | None, bool]:
        """(plan, meets the deadline): the cheapest plan for the time left, else the plan for the
        earliest finish (``earliest_s`` set), else (None, False)."""
        clusters = self._program(now)
        left = self.deadline.deadline_s - self._elapsed(now)
        kw: dict[str, Any] = {"interval_s": self.deadline.interval_s, "max_machines": self.max_machines,
                              "tail_tasks": self.deadline.tail_tasks}
        n = max(1, self.remaining)
        log.debug("deadline ILP: %d tasks, %.0fs left, clusters %s", n, left, clusters)
        if left > 1.0:
            plan = cheapest_plan(clusters, n, left, **kw)
            if plan is not None:
                return plan, True
        # searched upwards from one interval: a small program at every step, so no step is read
        # as infeasible because the solver ran out of time on a long horizon
        earliest = earliest_deadline(clusters, n, start_s=self.deadline.interval_s, **kw)
        if earliest is None:
            return None, False
        if left > 1.0 and earliest <= left:
            # feasibility only grows with the horizon: the deadline can be met, and the solver only
            # ran out of time on the long horizon's larger program. The cheapest plan found on a
            # shorter one (halving towards the earliest finish) meets it too.
            horizon = left / 2.0
            while horizon > earliest:
                plan = cheapest_plan(clusters, n, horizon, **kw)
                if plan is not None:
                    log.info("deadline ILP: no plan found within the solver's time limit for %.0fs; "
                             "planned within %.0fs instead", left, horizon)
                    return plan, True
                horizon /= 2.0
            plan = cheapest_plan(clusters, n, earliest, **kw)
            if plan is not None:
                return plan, True
        self.earliest_s = self._elapsed(now) + earliest
        self.proven = left <= 1.0 or proven_infeasible(clusters, n, left, **kw)
        return cheapest_plan(clusters, n, earliest, **kw), False

    # ------------------------------------------------------------ after sampling
    def _plan_after_sampling(self, now: float) -> list[c.Action]:
        self.plan_estimates = {name: (s.mean_s, s.sd_s) for name, s in ((n, self._stats(n, now)) for n in self.estimates)}
        plan, met = self._solve(now)
        deadline = format_duration(self.deadline.deadline_s)
        if plan is None:
            return self._give_up(now, f"deadline {deadline}: no machines can run the remaining tasks")
        if not met and not self.proven:
            assert self.earliest_s is not None
            return self._give_up(now, (
                f"deadline {deadline}: the solver found no plan for it within its time limit and could not "
                f"prove there is none; the earliest finish it found is about "
                f"{format_duration(rounded_up(self.earliest_s))} ({self.remaining} tasks left after sampling; "
                f"--deadline {int(rounded_up(self.earliest_s))}s or more is planned)"))
        if not met:
            assert self.earliest_s is not None
            return self._give_up(now, (
                f"deadline {deadline} cannot be met: the earliest feasible deadline is about "
                f"{format_duration(rounded_up(self.earliest_s))} ({self.remaining} tasks left after "
                f"sampling; --deadline {int(rounded_up(self.earliest_s))}s or more)"))
        actions: list[c.Action] = [Notify(self._plan_text(plan, now))]
        if self.deadline.plan_only:
            self.plans.append(self._plan_record(plan, now, "after sampling", True))
            self.plan = plan
            return actions + self._give_up(now, "stopped after the plan (--plan-only)")
        self._enter(EXECUTING)
        return actions + self._adopt(plan, now, "after sampling", True)

    def _plan_text(self, plan: DeadlinePlan, now: float) -> str:
        finish = self._elapsed(now) + plan.finish_s
        return (f"deadline plan from now ({len(plan.bounds) - 1} intervals of {format_duration(self.deadline.interval_s)}, "
                f"{self.remaining} tasks): {plan.describe()}; estimated cost {plan.cost:g}, "
                f"done about {format_duration(finish)} after the start (deadline "
                f"{format_duration(self.deadline.deadline_s)})")

    def _plan_record(self, plan: DeadlinePlan, now: float, reason: str, met: bool) -> dict[str, Any]:
        return {"at_s": self._elapsed(now), "reason": reason, "meets_deadline": met, "tasks": self.remaining,
                **plan.record()}

    def _give_up(self, now: float, reason: str) -> list[c.Action]:
        """Release every machine and finish incomplete with ``reason`` (one line)."""
        actions: list[c.Action] = []
        gone = self.live_machines()
        for m in gone:
            actions.append(c.Release(m.id, reason))
            self._retire(m, now, reason)
        for m in gone:
            self._requeue_held(m)
        self.finished = c.Finish("incomplete", reason)
        actions.append(self.finished)
        return actions

    # ------------------------------------------------------------ execution
    def _adopt(self, plan: DeadlinePlan, now: float, reason: str, met: bool) -> list[c.Action]:
        self.plan = plan
        self.plan_start = now
        self.plans.append(self._plan_record(plan, now, reason, met))
        if len(self.plans) > 1:
            self.reconfigurations.append({"at_s": self._elapsed(now), "reason": reason,
                                          "machines": plan.initial()})
        self.execution.last_monitor = now
        return self._apply_plan(now) + [WakeAt(now + self.settings.monitor_interval_s)]

    def _apply_plan(self, now: float) -> list[c.Action]:
        """Acquire what the plan has now and is missing; mark each machine for the end of its slot."""
        plan = self.plan
        if plan is None:
            return []
        t = now - self.plan_start
        actions: list[c.Action] = []
        for cl in plan.clusters:
            name = cl.name
            want = plan.count_at(name, t) if t < plan.horizon_s else len(self.live_machines(name))
            self.config[name] = want
            live = sorted(self.live_machines(name), key=lambda m: (m.acquired_at, m.id))
            kept = [m for m in live if m.release_at is None or m.release_reason == STOPPED_BY_PLAN]
            have = len(kept) + self._requested[name]
            if have < want:
                for m in sorted((m for m in live if m not in kept), key=lambda m: -(m.release_at or 0.0)):
                    if have >= want:
                        break
                    self.execution.unmark(m)
                    kept.append(m)
                    have += 1
                # a slot with no more than the release margin left is not worth a new machine (its
                # boot alone is longer); billed by the second, one would be let go as it came and
                # asked for again at once, forever. Ranks kept to the end of the work are never marked
                margin = self.settings.release_margin_s + _EPS
                useful = sum(1 for rank in range(have + 1, want + 1)
                             if (end := plan.slot_end(name, rank)) >= plan.finish_s - _EPS or end - t > margin)
                if useful > 0:
                    actions.extend(self.execution.acquire(name, useful, now))
            for rank, m in enumerate(sorted(kept, key=lambda m: (m.acquired_at, m.id)), start=1):
                end = plan.slot_end(name, rank)
                if end >= plan.finish_s - _EPS:  # the slot runs until the work is done: kept to the end
                    if m.release_at is not None:
                        self.execution.unmark(m)
                        actions.extend(self._feed(m))
                    continue
                actions.extend(self._mark_at(m, self._edge_after(m, self.plan_start + end), now))
        return actions

    def _edge_after(self, m: c.Machine, t: float) -> float:
        """The first end of one of ``m``'s ATUs at or after ``t`` (its minimum charge counted)."""
        cl = self.clusters[m.cluster]
        units = billing.atus_begun(t - m.acquired_at, cl.atu_s, cl.min_charge_s)
        return m.acquired_at + units * cl.atu_s

    def _mark_at(self, m: c.Machine, edge: float, now: float) -> list[c.Action]:
        at = max(now, edge - self.settings.release_margin_s)
        if m.release_at is not None and abs(m.release_at - at) <= _EPS:
            return []
        m.release_at = at
        m.release_reason = STOPPED_BY_PLAN
        self.execution.marked[m.id] = m
        if at <= now + _EPS:
            self.execution.due_now.add(m.id)
        return [WakeAt(at)]

    def capacity(self, now: float) -> float:
        """Tasks the plan's machine time left can still do at the current means (see the docstring)."""
        plan = self.plan
        if plan is None:
            return 0.0
        t = now - self.plan_start
        total = 0.0
        for cl in plan.clusters:
            name = cl.name
            mean = max(1e-6, self._stats(name, now).mean_s)
            live = self.live_machines(name)
            actual = len(live) + self._requested[name]
            slots = 0
            for i, n in enumerate(plan.counts[name]):
                start, end = max(t, plan.bounds[i]), plan.bounds[i + 1]
                if end > start:
                    n = min(n, actual)
                    total += n * (end - start) / mean
                    if plan.bounds[i] <= t < end:
                        slots = n
            total -= plan.tail_tasks * slots
            total += sum(min(1.0, (now - m.running_since) / mean) for m in live
                         if m.held and m.running_since is not None)
        return total

    def _monitor(self, now: float) -> list[c.Action]:
        """Every monitoring interval: re-plan with the ILP when the plan falls behind."""
        self.execution.last_monitor = now
        actions: list[c.Action] = []
        can = self.capacity(now)
        behind = self.plan is None or can < self.remaining - _EPS
        if not behind:
            self._replan_wait_s = self.settings.monitor_interval_s
        elif self.plan is None or now >= self._replan_at or not self._live:
            self._replan_at = now + self._replan_wait_s
            self._replan_wait_s = min(2 * self._replan_wait_s,
                                      max(self.settings.monitor_interval_s, self.deadline.interval_s))
            plan, met = self._solve(now)
            if plan is not None:
                reason = f"behind the plan: {self.remaining} tasks left, the plan can do {can:.1f}"
                text = self._plan_text(plan, now)
                if not met:
                    text = (f"the deadline can no longer be met; planned for the earliest finish, about "
                            f"{format_duration(self.earliest_s or 0.0)}: " + text)
                actions.append(Notify(f"re-planned ({reason}): {text}"))
                return actions + self._adopt(plan, now, reason, met)
        actions.extend(self._apply_plan(now))
        actions.append(WakeAt(now + self.settings.monitor_interval_s))
        return actions

    def _release_marked(self, now: float, *, idle_too: bool = False,
                        only: set[str] | None = None) -> list[c.Action]:
        wake: list[c.Action] = []
        if self.plans and not self.plans[-1]["meets_deadline"]:  # see the docstring, 3.
            for m in self.execution.marked.values():
                if (only is None or m.id in only) and m.held and m.release_reason == STOPPED_BY_PLAN \
                        and m.state is not c.MachineState.GONE and m.release_at is not None \
                        and now >= m.release_at - _EPS:
                    margin = self.settings.release_margin_s
                    edge = self._edge_after(m, now + margin)
                    while edge - margin <= now + _EPS:  # that edge is now (or the margin is long): a later one
                        edge += self.clusters[m.cluster].atu_s
                    m.release_at = edge - margin
                    wake.append(WakeAt(m.release_at))
        return super()._release_marked(now, idle_too=idle_too, only=only) + wake

    def _on_machine_acquired(self, ev: c.MachineAcquired) -> list[c.Action]:
        """A machine the plan asked for: its slot's end is known now (per-second billing cannot wait)."""
        actions = super()._on_machine_acquired(ev)
        if self.phase == EXECUTING and self.plan is not None:
            actions.extend(self._apply_plan(ev.now))
        return actions

    def _on_price_changed(self, ev: c.PriceChanged) -> list[c.Action]:
        """A spot price moved: new ATUs cost the new price, so the cheapest plan may be another one."""
        old = self.prices[ev.cluster]
        c.Core._on_price_changed(self, ev)
        cl = self.clusters[ev.cluster]
        self.execution.billings[ev.cluster] = Billing(cl.atu_s, ev.price, cl.min_charge_s)
        if self.phase != EXECUTING or self.remaining == 0 or ev.price == old:
            return []
        plan, met = self._solve(ev.now)
        if plan is None:
            return []
        reason = f"price of {ev.cluster} {old:g} -> {ev.price:g}"
        return [Notify(f"re-planned ({reason}): {self._plan_text(plan, ev.now)}"),
                *self._adopt(plan, ev.now, reason, met)]

    def _replace_lost(self, machine: c.Machine, now: float) -> list[c.Action]:
        """Executing: refill the cluster to the plan's current count (machines the plan stops later count)."""
        name = machine.cluster
        if self.phase != EXECUTING:
            return super()._replace_lost(machine, now)
        if self.remaining <= 0 or self._lost_in_a_row[name] >= c.GIVE_UP_AFTER:
            return []
        have = sum(1 for m in self.live_machines(name)
                   if m.release_at is None or m.release_reason == STOPPED_BY_PLAN) + self._requested[name]
        want = self.config.get(name, 0)
        return self.execution.acquire(name, want - have, now) if have < want else []

    def _finish_if_stranded(self, now: float) -> list[c.Action]:
        """The plan let every machine go with tasks left: plan again rather than give up."""
        if (self.phase == EXECUTING and self.remaining > 0 and not self._live and not any(self._requested.values())
                and self.finished is None and self._active):
            actions = self._monitor(now)
            if any(isinstance(a, c.Acquire) for a in actions):
                return actions
        return super()._finish_if_stranded(now)

    # ------------------------------------------------------------ report
    def report(self, now: float) -> dict:
        figures = super().report(now)
        figures["policy"] = "deadline"
        figures["deadline"] = {
            "deadline_s": self.deadline.deadline_s,
            "interval_s": self.deadline.interval_s,
            "earliest_feasible_s": self.earliest_s,
            "met": (None if self.remaining or self.last_finish_at is None or self.started_at is None
                    else self.last_finish_at - self.started_at <= self.deadline.deadline_s + _EPS),
            "plans": list(self.plans),
        }
        return figures

