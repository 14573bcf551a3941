"""BaTS: sampling, options and budget-controlled execution on top of the self-scheduling core.

How this works (seed 000 "BaTS", §2-§3, Figs. 3 and 4). :class:`BatsCore` is the same I/O-free
state machine as :class:`bats.master.core.base.Core` (time comes in on the events, randomness from the
seeded RNG) with three phases:

1. **Sampling** (Fig. 3, §2.1-2.2). The sample size n_s comes from the bag size, confidence and
   error level (:func:`bats.master.core.planning.estimate.sample_size`). ``initial_workers`` machines are
   acquired per cluster (the cluster's own ``initial_workers`` where it sets one; never more than its
   ``max``). n_lr = 7 randomly chosen tasks are *replicated*: every cluster runs a copy, so each
   yields one regression point per cluster; a machine always takes a copy its cluster has not run
   yet before anything else. The next n_s - n_lr tasks handed out are the *sample* tasks,
   self-scheduled on any cluster. Once all of them have finished, the regression
   t_k = beta0 + beta1 * t_base translates every sample runtime to every cluster
   (:func:`~bats.master.core.planning.estimate.complete_samples`) and each cluster's mean T_i is
   the modified moving average of §2.1, a running task counted by the tail of the sample
   distribution. Machines keep taking ordinary tasks while the sample completes: every
   task that runs is real work and is never run again (the extra copies of a replicated task
   only measure; the first copy that succeeds is the task's result). Those other tasks count in
   T_i too, the ones that ended by their runtime: the tasks still running when the sample
   completes are mostly long ones, and counting them without the short ones that ended beside
   them put a skewed bag's mean a median 7.5 % (Lévy) to 37 % (bimodal) above the bag's.
2. **Offering** (§2.3, §4.3). The planner (:mod:`bats.master.core.planning.planner`) turns the estimates into
   options for the tasks left, each cluster's mean taken a little above T_i, at the one-sided
   ``plan_confidence`` (0.6) bound T_i + z sd / sqrt(n): a sample of a few dozen tasks
   underestimates a heavy-tailed mean more often than it overestimates it, and the runs whose
   plan is low end late by as much, while a normal bag's bound is about its mean. The cushion
   that pays for the estimate's own error prices each cluster at the higher of two upper
   bounds, that of T_i and that of §2.1's own average over the sample and the tasks running: a
   sample that missed a bag's long tasks then still leaves the money to finish. The core
   answers with :class:`OfferOptions` and waits for a :class:`ScheduleChosen` event. The
   sampling machines are marked for release at the end of their current ATU (a configurable
   margin before the edge) and keep working until then; the money of every ATU begun so far is
   the *sampling cost*, reported apart.
3. **Execution** (Fig. 4, §3.1). The chosen configuration is acquired (live sampling machines
   of a cluster count towards it and are kept). Every monitoring interval the core computes N_e
   and N_p (:func:`bats.master.core.planning.monitor.check`); when N_e > N_p (+ dN with an accepted cushion) it
   re-plans with the bounded-knapsack solver on the tasks and the money left and moves to the
   new configuration: acquires what it adds, marks what it drops for release at the end of the
   ATU they are in. When the config does not set the monitoring interval, the execution shortens
   it to a sixth of the chosen option's makespan (never above §3.1's 5 minutes), so that short
   ATUs still re-plan several times per run.

The budget ceiling (the money checked on its own clock, machines let go before an edge the money
left does not pay) and how paid work is kept are described in :mod:`.execution`, the part that
keeps them.

With a budget given up front (``BatsSettings.budget``) the operator has chosen already: the
sample is taken inside the execution phase (Fig. 4 lines 4-6, "implicit sampling"), the budget
covers the sampling machines too (each with every ATU it begins before the first check), and the
configuration is the fastest that the money left pays; any cushion the plan wants comes out of
that budget (the total never exceeds it).

A machine marked for release is not handed a task it is not expected to finish (the cluster's
mean runtime) before it is let go; an idle one that cannot fit a task is let go at once, and so
is one marked when its edge is already within the margin (before the event's actions return:
waiting for a Tick would begin another ATU). A marked machine that a new plan keeps after all is
unmarked and handed tasks at once.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterable
from typing import Any

import numpy as np

from bats.common.config import ClusterConfig

from ... import core as c
from ..actions import Notify, OfferOptions, WakeAt, WarnShort
from ..base import handles
from ..events import BudgetRaised, ScheduleChosen
from ..option import Odds
from ..planning.clusters import SHORT_ATU_S
from ..planning.estimate import (
    REPLICATED_TASKS,
    RuntimeEstimate,
    RuntimeStats,
    SharedEstimate,
    one_sided_z,
    sample_size,
    sorted_quantiles,
    z_value,
)
from ..planning.ga import ga_front
from ..planning.monitor import (
    Billing,
    TailEstimates,
)
from ..planning.odds import MONITOR_REPLAYS, RuntimeModel, chance_within, fleet_of, option_odds, replay
from ..planning.paid_time import with_machines_up
from ..planning.planner import (
    LABELLED,
    NO_CUSHION,
    ClusterPlan,
    Option,
    Planner,
    shown,
    spread,
    with_estimate_cushion,
)
from ..view import CoreView
from .endgame import EndGame
from .execution import Execution, _affordable, _machines_text
from .sampling import MIN_SEEN, SAMPLING_BOUND, Sample, execution_floor, lower_mean, sampling_machines
from .settings import EXECUTING, OFFERING, SAMPLING, BatsSettings, Choice, option_record

__all__ = [
    "EXECUTING",
    "OFFERING",
    "SAMPLING",
    "BatsCore",
    "BatsSettings",
    "Choice",
    "option_record",
]

MIN_MEAN_S = 1e-6  # a cluster whose tasks take no measurable time still needs a mean > 0 to plan
REARM = 0.05  # a warned run warns again only after its chance has come back this far above the threshold
DECISIVE_SDS = 4.5  # a check's first half of replays this many standard deviations below the threshold: short
SHAPE_POINTS = 1000  # a cluster's runtimes the end-of-bag allowance reads, at most (quantiles beyond)
ODDS_ALL = 40  # up to this many options all get their odds; beyond, the ones a table shows (spread)
ODDS_DECIDE = frozenset({"fastest"})  # every machine, tied by the whole-task model with fewer: the odds decide
NOTHING_LEFT = "nothing left to run: billed by the second, it would pay for waiting"
NOTHING_LEFT_PAID = "nothing left to run: released at the end of its paid time"




def _configuration(machines: dict[str, int]) -> tuple[tuple[str, int], ...]:
    """A configuration without its clusters of no machine, to compare two."""
    return tuple(sorted((name, n) for name, n in machines.items() if n))


def _priced(option: Option, odds: Odds) -> Option:
    """``option`` with its odds, its cushion at least the P99 cost above its budget (never less than
    the cushion it had: Theorem 1's rounding and the room of the upper means)."""
    return dataclasses.replace(option, odds=odds, cushion=max(option.cushion, odds.cost_p99 - option.budget, 0.0))


class BatsCore(c.Core):
    """The BaTS policy; see the module docstring. Its parts: :attr:`sample` (sampling's state),
    :attr:`execution` (the money, the plan and its checks) and :attr:`endgame` (the end of the bag)."""

    name = "bats"
    # billed by the second, an idle machine with nothing to take is let go at once (see _next_task)
    lets_idle_go_per_second = True

    def view(self) -> CoreView:
        return CoreView(policy=self.name, phase=self.phase, options=self.options, tasks_at_plan=self.tasks_at_plan,
                        plan_estimates=self.plan_estimates, selected=self.selected, budget=self.budget,
                        cushion=self.cushion, cushion_accepted=self.cushion_accepted,
                        sampling_cost=self.sampling_cost, budget_up_front=self.settings.budget is not None,
                        reconfigurations=self.reconfigurations, plan_end=self.execution.plan_end,
                        monitor_interval_s=self.settings.monitor_interval_s,
                        short=self.warnings[-1] if self.short_warned and self.warnings else None)

    def __init__(self, task_ids: Iterable[int], clusters: dict[str, ClusterConfig], rng: random.Random,
                 settings: BatsSettings, **kwargs: Any) -> None:
        super().__init__(task_ids, clusters, rng, **kwargs)
        self.settings = settings
        self._enter(SAMPLING)
        self.sample_size = sample_size(self.remaining, settings.sampling.confidence, settings.sampling.error)
        self._active = dict.fromkeys(clusters)  # clusters that can still take part, in config order
        self._sampling_workers = {
            name: min(sampling_machines(cl.atu_s, self.sample_size, len(clusters),
                                        cl.initial_workers or settings.sampling.initial_workers), cl.max)
            for name, cl in clusters.items()}
        self.sample = Sample(list(clusters))  # the replicated tasks, the rest of the sample, their runtimes
        self._unsampled: dict[str, list[float]] = {name: [] for name in clusters}  # other tasks done meanwhile
        self._unsampled_s: dict[str, float] = {}  # ... and their sum (the money bound reads it at every result)
        self._sample_estimates: dict[str, RuntimeEstimate] = {}  # §2.1's T_i without them, for the cushion
        self._late_requests: dict[str, int] = {}  # machines sampling asked for, not acquired at the plan
        self._late_machines: list[str] = []  # ... and acquired since: their ATUs before the execution are sampling's
        # billed by the second or minute on every cluster, sampling's money is bounded by the execution's
        # low estimate (see .sampling); the wake-up asked for when the money may reach it, and what it was
        self._bounded = all(cl.atu_s <= SHORT_ATU_S for cl in clusters.values())
        self._bound_wake: float | None = None
        self.sampling_bound: dict[str, float] | None = None  # {"spent", "execution_floor"} at a close
        self.sampling_work = 0.0  # what sampling paid for the results it recorded: the bag's work
        self._cut_censored: dict[str, list[float]] = {}  # per cluster, "> t" of the copies the close stopped
        # the plan
        self.estimates: dict[str, RuntimeEstimate] = {}  # each cluster's own (its sample, the tasks it ran)
        self.shared: SharedEstimate | None = None  # the means planned with: one average over every cluster
        self.options: list[Option] = []
        self.tasks_at_plan: int | None = None
        self.plan_estimates: dict[str, tuple[float, float]] = {}  # (mean_s, sd_s) the options used
        self.sampling_cost: float | None = None
        self.execution = Execution(self, self, settings)  # the money, the plan and the budget ceiling
        self.endgame = EndGame(self, self.execution, self.mean_s)  # the end of the bag
        self._extra: list[c.Action] = []  # actions decided while handing out a task
        self.killed = 0  # running tasks cut off by a release
        self.killed_paid_s = 0.0  # the paid seconds they had run
        # the odds' randomness: seeded from the run's RNG state without drawing from it, so the
        # run's own choices (replicated tasks, the GA) do not depend on how often odds are asked
        self.odds_rng = np.random.default_rng(list(rng.getstate()[1]))
        self.warnings: list[dict[str, float]] = []  # every early warning (WarnShort), for the report
        self.short_warned = False  # the last check found the chance below the threshold
        self.raised = 0.0  # money the operator added to the budget after a warning

    def _enter(self, phase: str) -> None:
        """The one place the phase changes: sampling, then offering, then executing."""
        self.phase = phase

    # the execution's figures that the views, reports and drivers read
    @property
    def budget(self) -> float | None:
        return self.execution.budget

    @property
    def cushion(self) -> float:
        return self.execution.cushion

    @property
    def cushion_accepted(self) -> bool:
        return self.execution.cushion_accepted

    @property
    def selected(self) -> Option | None:
        return self.execution.selected

    @property
    def config(self) -> dict[str, int]:
        return self.execution.config

    @property
    def reconfigurations(self) -> list[dict[str, Any]]:
        return self.execution.reconfigurations

    @property
    def execution_started_at(self) -> float | None:
        return self.execution.execution_started_at

    # ------------------------------------------------------------ money
    def spent(self, now: float) -> float:
        """Every ATU begun so far, on every machine of the run."""
        return sum(self.machine_cost(m, now)[1] for m in self.machines.values())

    def _spent_under_budget(self, now: float) -> float:
        """What the budget has paid: everything with an up-front budget, else what the execution
        phase began (the sampling cost is the operator's price of the estimates, apart)."""
        return self.spent(now) - self._sampling_not_budgeted()

    def _sampling_not_budgeted(self) -> float:
        """The sampling cost when it is outside the budget (the operator chose after sampling)."""
        return self._sampling_cost_now() if self.settings.budget is None else 0.0

    def _sampling_cost_now(self) -> float:
        """Every ATU begun when the sample completed, and those begun before the execution by the
        machines sampling asked for that came later (a replacement for one that failed to boot)."""
        if self.sampling_cost is None:
            return 0.0
        until = self._now if self.execution_started_at is None else min(self._now, self.execution_started_at)
        return self.sampling_cost + sum(self.machine_cost(self.machines[m], until)[1] for m in self._late_machines)

    def _money_left(self, now: float) -> float:
        if self.budget is None:
            return math.inf
        return self.budget + self.cushion - self._spent_under_budget(now)

    # ------------------------------------------------------------ phase 1: sampling
    def _initial_acquisitions(self, now: float) -> list[c.Action]:
        prior = {name: list(values) for name, values in (self.settings.prior_sample or {}).items()
                 if name in self.clusters and values}
        if prior:  # an earlier session sampled (and maybe chose: its budget left is up front now)
            note = Notify("planning with the sample an earlier session of this run measured (" + ", ".join(
                f"{len(values)} on {name}" for name, values in prior.items()) + "); no new sampling")
            return [note, *self._plan_from(prior, now)]
        counts = dict(self._sampling_workers)
        actions: list[c.Action] = []
        if self.budget is not None:  # implicit sampling: the ATUs begun before the first check must fit
            counts = _affordable(counts, {name: self.execution.reserve_new(name) for name in counts}, self.budget)
            self.execution.last_monitor = self.execution.last_ceiling = now
            actions.append(WakeAt(self.execution.next_check(now)))
        if self.max_machines is not None:  # the overall limit, shared round-robin so every cluster is sampled
            counts = _affordable(counts, dict.fromkeys(counts, 1.0), float(self.max_machines))
        n_lr = min(REPLICATED_TASKS, self.remaining)
        pending = self._pending
        for _ in range(n_lr):  # the replicated tasks, drawn at random like every other task
            index = self.rng.randrange(len(pending))
            task = pending[index]
            pending[index] = pending[-1]
            pending.pop()
            self._status[task] = c.RUNNING
            self.sample.replicate(task)
        self.sample.target = max(0, self.sample_size - n_lr)
        for name, n in counts.items():
            if n <= 0:
                self._deactivate(name)
                continue
            self.sample.give_copies_to(name)
            self._requested[name] += n
            actions.append(c.Acquire(name, n))
        if not any(isinstance(a, c.Acquire) for a in actions):
            cheapest = min(self.execution.reserve_new(name) for name in counts) if counts else 0.0
            self.finished = c.Finish("incomplete", f"the budget ({self.budget:g}) does not pay one machine up to "
                                     f"the first budget check ({cheapest:g} at least)")
            return [self.finished]
        return actions

    def _next_task(self, machine: c.Machine) -> int | None:
        if machine.release_at is None and self.phase == EXECUTING:
            self._extra.extend(self.execution.decide_renewal(machine))
        if machine.release_at is not None and not self.execution.fits_before_release(machine):
            if self._now >= machine.release_at - 1e-9:
                self.execution.due_now.add(machine.id)  # let it go in this event (unless a task in paid time runs on)
            return None
        if self.phase == SAMPLING:
            todo = self.sample.todo.get(machine.cluster)
            if todo:
                return todo.pop()
            task = self._take(machine)
            if task is not None and self.sample.still_wanted():
                self.sample.running.add(task)
            return task
        task = self._take(machine)
        if task is None and self.phase == EXECUTING and not machine.held and machine.release_at is None \
                and self.lets_idle_go_per_second:
            if self.execution.billings[machine.cluster].is_fine():
                # billed by the second, an idle machine pays for every second it waits: with nothing
                # it can take now, it goes (the ceiling acquires again if a task comes back)
                self._extra.extend(self.execution.mark(machine, self._now, NOTHING_LEFT))
            elif not self._pending and not self._retry:
                # the bag has no task left to hand out and no copy is worth starting here: the
                # machine goes at the end of the time it has paid, whatever the money left (with
                # the cushion) would renew; it may still take a task that comes back before then
                self._extra.extend(self.execution.mark(machine, self._now, NOTHING_LEFT_PAID))
        return task

    def _take(self, machine: c.Machine) -> int | None:
        """The bag's next task for ``machine``; in the execution, the end game's say first."""
        if self.phase != EXECUTING or not self.estimates:
            return super()._next_task(machine)
        return self.endgame.next_task(machine, super()._next_task)

    def _return_task(self, task: int, attempt: int, machine: c.Machine) -> None:
        if task in self.sample.replicas:  # a copy: its cluster runs it again, on another machine
            if machine.cluster in self._active and self.phase == SAMPLING:
                self.sample.todo[machine.cluster].append(task)
            else:
                self._close_copy(task)
            return
        self.sample.running.discard(task)
        self.endgame.return_task(task, attempt, machine, super()._return_task)

    def _close_copy(self, task: int) -> None:
        """One copy of a replicated task will not run; with none left and no success, the task
        goes back into the bag as an ordinary one."""
        if self.sample.close_copy(task):
            if self._status[task] == c.RUNNING:
                self._status[task] = c.PENDING
                self._pending.append(task)

    def _settle(self, machine: c.Machine, ev: c.TaskFinished) -> list[c.Action]:
        actions = self._settle_result(machine, ev)
        if self.phase == SAMPLING:  # a result recorded while sampling is the bag's work, paid by sampling
            for a in actions:
                if isinstance(a, c.RecordResult) and a.task == ev.task and a.status == "done":
                    cl = self.clusters[machine.cluster]
                    self.sampling_work += max(0.0, ev.runtime_s) * self.prices[machine.cluster] / cl.atu_s \
                        / self.cluster_slots[machine.cluster]
        return actions

    def _settle_result(self, machine: c.Machine, ev: c.TaskFinished) -> list[c.Action]:
        task, runtime = ev.task, max(0.0, ev.runtime_s)
        estimate = self.estimates.get(machine.cluster)
        if estimate is not None:
            estimate.add_finished(runtime)
        if self.shared is not None:
            self.shared.add_finished(machine.cluster, runtime)
        if task in self.sample.replicas:
            self.sample.replica_runtime[task][machine.cluster] = runtime
            last = self.sample.close_copy(task)
            if self._status[task] == c.RUNNING:
                if ev.exit_code == 0 and not ev.timed_out:
                    return self.endgame.settle(machine, ev, super()._settle)  # the first copy that succeeds is the result
                if last:  # no copy succeeded: an ordinary failure (retried if retries allow)
                    return self._attempt_failed(machine, ev)
            return []
        if task in self.sample.running:
            self.sample.record(task, machine.cluster, runtime)
        elif self.phase == SAMPLING:
            self._unsampled[machine.cluster].append(runtime)
            self._unsampled_s[machine.cluster] = self._unsampled_s.get(machine.cluster, 0.0) + runtime
        return self.endgame.settle(machine, ev, super()._settle)

    def _after_result(self, machine: c.Machine, ev: c.TaskFinished) -> list[c.Action]:
        if self.phase == SAMPLING and self.remaining > 0:
            return self._end_sampling_if_complete(ev.now)
        return []

    def _sampling_complete(self) -> bool:
        return self.sample.complete(self._active, bag_empty=not (self._pending or self._retry))

    def _end_sampling_if_complete(self, now: float) -> list[c.Action]:
        notes: list[c.Action] = []
        if not self._sampling_complete():
            over = self._over_bound(now)
            if over is None:
                return self._wake_for_bound(now)
            notes = self._close_sample(now, *over)
        samples = self._complete_samples()
        if not samples:
            return [*notes, self._stop("no cluster produced a runtime to plan with")]
        return [*notes, *self._plan_from(samples, now)]

    def _bound_figures(self, now: float) -> tuple[float, float, float] | None:
        """(money that only measured: spent past the machines' boots and first charges, less the bag's
        work; the execution's low estimate; money per second the machines up spend) while sampling
        under the bound; None where it does not apply or a cluster has not shown enough."""
        if not self._bounded or self.sample.closed or not self._active:
            return None
        if self.sample.still_wanted() and (self._pending or self._retry):
            return None  # the sample's n_s tasks are not all handed out: it would be a smaller sample
        per_cluster = {}
        for name in self._active:
            ended = self.sample.ended_on(name)
            others = self._unsampled.get(name, [])
            if len(ended) + len(others) < MIN_SEEN:
                return None
            total = sum(ended) + self._unsampled_s.get(name, 0.0)
            rate = self.prices[name] / self.clusters[name].atu_s
            per_cluster[name] = (lower_mean(total, len(ended) + len(others), self._running_for(name, now)),
                                 rate / self.cluster_slots[name])
        floor = execution_floor(self.remaining, per_cluster)
        if floor is None:
            return None
        # the money each machine spends past its boot and its first ATU or minimum charge (paid at once,
        # whether the sample closes or not), second by second, less what ran the bag's own results:
        # the money that only measured, which waiting longer adds to
        spent = burn = 0.0
        for m in self.machines.values():
            if m.up_at is None:
                continue
            cl = self.clusters[m.cluster]
            rate = self.prices[m.cluster] / cl.atu_s
            end = m.released_at if m.released_at is not None else now
            spent += rate * max(0.0, end - max(m.up_at, m.acquired_at + max(cl.atu_s, cl.min_charge_s)))
            burn += rate if m.released_at is None else 0.0
        return max(0.0, spent - self.sampling_work), floor, burn

    def _over_bound(self, now: float) -> tuple[float, float] | None:
        """(spent, the execution's low estimate) when sampling's money has reached its bound."""
        figures = self._bound_figures(now)
        if figures is None:
            return None
        spent, floor, _burn = figures
        return (spent, floor) if spent >= SAMPLING_BOUND * floor - 1e-12 else None

    def _wake_for_bound(self, now: float) -> list[c.Action]:
        """A wake-up when the money spent may reach the bound (the estimate only grows while tasks
        run, so the money's own pace gives the earliest moment), unless one is asked for already."""
        figures = self._bound_figures(now)
        if figures is None:
            return []
        spent, floor, burn = figures
        if burn <= 0:
            return []
        at = now + max(1.0, (SAMPLING_BOUND * floor - spent) / burn)
        if self._bound_wake is not None and now < self._bound_wake <= at + 1e-9:
            return []
        self._bound_wake = at
        return [WakeAt(at)]

    def _close_sample(self, now: float, spent: float, floor: float) -> list[c.Action]:
        """The bound closes the sample: the tasks running are censored, the copies not begun dropped."""
        running = {name: self._running_for(name, now) for name in self._active}
        for tasks in self.sample.close(running).values():
            for task in tasks:
                self._close_copy(task)
        self.sampling_bound = {"spent": spent, "execution_floor": floor}
        censored = sum(len(v) for v in self.sample.censored.values())
        # a copy of a task whose result is in only measures: it stops here, its "> t" kept for the
        # estimates and the odds (the copies of tasks without a result run on as the bag's work)
        stops: list[c.Action] = []
        for m in self.live_machines():
            for task, attempt in list(m.held):
                if task not in self.sample.replicas or self._status[task] == c.RUNNING:
                    continue
                index = m.held.index((task, attempt))
                if index < len(m.started):
                    self._cut_censored.setdefault(m.cluster, []).append(max(0.0, now - m.started[index]))
                m.drop(index, now)
                self.sample.close_copy(task)
                stops.append(c.Cancel(m.id, task, attempt, "sampling closed at its money bound: the copy only measured"))
        return [Notify(f"sampling closed at its money bound: {spent:g} spent only to measure, the execution it informs is "
                       f"estimated at {floor:g} at least; {censored} sampled task(s) still running count as "
                       "lasting longer than they have run (each runs on as the bag's work while its machine is kept, "
                       "a copy that only measured stops)"), *stops]

    def _plan_from(self, samples: dict[str, list[float]], now: float) -> list[c.Action]:
        """The estimates from every cluster's complete sample set, then the options (§2.3)."""
        self._sample_estimates = {name: RuntimeEstimate(values) for name, values in samples.items()}
        for name, values in samples.items():
            self.estimates[name] = RuntimeEstimate(values)
            # the other tasks that ended on the cluster meanwhile count as done too: the mean then
            # covers every task begun on it, the running ones by the sample's tail (without them
            # the long tasks still running weighed in and the short ones already done did not)
            for runtime in self._unsampled.get(name, ()):
                self.estimates[name].add_finished(runtime)
        if any(samples.values()):  # else nothing was measured, and the plan that follows says so
            self.shared = SharedEstimate(samples)
            for name, runtimes in self._unsampled.items():
                for runtime in runtimes:
                    self.shared.add_finished(name, runtime)
        self.execution.tail = TailEstimates.from_samples(samples)
        self.sampling_cost = self.spent(now)
        self._late_requests = {name: n for name, n in self._requested.items() if n}
        self.tasks_at_plan = self.remaining
        return self._plan_after_sampling(now)

    def _plan_after_sampling(self, now: float) -> list[c.Action]:  # the hook other policies override
        planner = self._plan_planner(self.remaining)
        self.plan_estimates = {p.name: (p.mean_s, self._stats(p.name, now).sd_s) for p in planner.clusters}
        try:
            self.options = self._plan_options(planner)
        except ValueError as exc:
            return [self._stop(f"planning failed: {exc}")]
        if not self.options:
            return [self._stop("no cluster can run the remaining tasks")]
        self._enter(OFFERING)
        if self.settings.budget is not None:  # implicit sampling: the operator chose already
            option = self._within(planner, max(0.0, self._money_left(now)))
            if option is None:
                return [Notify("the budget left cannot pay for the remaining tasks on any configuration; "
                               "running what it pays for"),
                        *self._start_execution(now, self._cheapest_option(planner), self.cushion_accepted,
                                               keep_budget=True)]
            return self._start_execution(now, option, self.cushion_accepted, keep_budget=True)
        actions: list[c.Action] = []
        for machine in self.live_machines():
            actions.extend(self.execution.mark(machine, now, "sampling done: released at the end of its ATU",
                                      wait_for_choice=True))
        actions.append(OfferOptions(tuple(self.options), self.remaining, dict(self.plan_estimates),
                                    {name: tuple(e.sample) for name, e in self.estimates.items()}))
        return actions

    def _complete_samples(self) -> dict[str, list[float]]:
        """Every active cluster's complete sample set (§2.2), regression through the base cluster."""
        return self.sample.complete_sets(self._active)

    def _stats(self, cluster: str, now: float) -> RuntimeStats:
        """``cluster``'s T_i and spread now: the shared average's (see :class:`SharedEstimate`), every
        cluster's tasks running counted; a cluster outside it, its own."""
        shared = self.shared
        if shared is None or cluster not in shared.ratio:
            return self.estimates[cluster].stats(self._seen_running(cluster, now))
        return shared.stats(cluster, {name: self._seen_running(name, now) for name in shared.ratio})

    def mean_s(self, cluster: str) -> float | None:
        """``cluster``'s T_i of the tasks done (the hand-out asks it per task: no running task
        counted), None before there are estimates."""
        shared = self.shared
        if shared is not None and cluster in shared.ratio:
            return shared.mean_s(cluster)
        estimate = self.estimates.get(cluster)
        return estimate.mean_s if estimate is not None else None

    def _seen_running(self, cluster: str, now: float) -> list[float]:
        """What the estimates and the odds count as lasting at least so long: the tasks running on the
        cluster, and the copies the sample's money bound stopped (censored at their elapsed time)."""
        return self._running_for(cluster, now) + self._cut_censored.get(cluster, [])

    def _running_for(self, cluster: str, now: float) -> list[float]:
        """How long each task running on the cluster has run."""
        return [now - started for m in self.live_machines(cluster) for started in m.started]

    def _planner(self, n_tasks: int, means: dict[str, float] | None = None) -> Planner:
        """The planner at today's prices, with the current runtime estimates or ``means``."""
        plans = []
        boots = self._boot_times()
        for name in self.estimates:
            cl = self.clusters[name]
            mean = max(MIN_MEAN_S, means[name] if means is not None else self._stats(name, self._now).mean_s)
            available = name in self._active and not (cl.bid is not None and self.prices[name] > cl.bid)
            plans.append(ClusterPlan(name, mean, self.prices[name], cl.atu_s, cl.max if available else 0,
                                     cl.min_charge_s, self.cluster_slots[name], boots.get(name, 0.0),
                                     self.execution.unworked_s(name)))
        return Planner(plans, max(1, n_tasks), self.max_machines)

    def _plan_options(self, planner: Planner) -> list[Option]:
        """The options: the four schedules and the Pareto set, exact or seed 003's GA (ValueError
        when the planner cannot plan)."""
        front = None
        if self.settings.planner == "ga":  # seed 003's approximation, seeded from the core's RNG
            front = ga_front(planner.clusters, planner.n_tasks, self.rng.getrandbits(64),
                             max_machines=self.max_machines)
        options = planner.options(self.settings.max_raise, front=front)
        upper = self._upper_planner(planner.n_tasks)  # built once: every option is costed with it
        paid, boot, longest, shapes = self._paid_left(self._now), self._boot_times(), self._longest(), self._shapes()
        made = shown([with_machines_up(with_estimate_cushion(o, upper), planner.clusters, planner.n_tasks, paid, boot,
                                       longest, shapes) for o in options], apart=ODDS_DECIDE)
        for option in list(made):  # what each option runs with its cushion declined is a row of its own
            row = self._declined(option, planner)
            if row is None:
                continue
            same = next((k for k, o in enumerate(made) if _configuration(o.machines) == _configuration(row.machines)), None)
            if same is None:
                made.append(row)
                continue
            twin = made[same]  # already a row: it takes the label, and the tighter budget of the two
            budget = min(twin.budget, row.budget)
            made[same] = dataclasses.replace(twin, also=(*twin.also, row.label), budget=budget,
                                             cushion=max(0.0, twin.budget + twin.cushion - budget))
        # the odds of every row (the ids numbered first): its cushion at least the P99 cost above its
        # budget, never less than the room of the upper means (a P99 alone left heavy-tailed runs short)
        # the rows marked again by their odds, twins merged only then
        return shown(self._with_odds(shown(made, apart=ODDS_DECIDE), planner))

    def _declined(self, option: Option, planner: Planner) -> Option | None:
        """The row ``option`` runs when the operator declines its cushion, None when it runs as shown.
        A budget raised for the rounding problem (case a) is the cushion: without it the budget pays
        the fastest configuration whose whole tasks fit in the ATUs it pays (the fastest it pays at
        all when none does), with that configuration's own makespan and cost."""
        if option.rounding != "a" or option.cushion <= 0:
            return None
        config = planner.fastest_fitting(option.budget) or planner.fastest_within(option.budget)
        if config is None or _configuration(config) == _configuration(option.machines):
            return None
        est = planner.estimate(config)
        row = Option(0, option.label + NO_CUSHION, est.machines, est.makespan_s, est.makespan_atu, est.cost, 0.0,
                     option.budget, est.delta_n, "", False)
        return with_machines_up(row, planner.clusters, planner.n_tasks, self._paid_left(self._now),
                                self._boot_times(), self._longest(), self._shapes())

    def declined_row(self, option: Option) -> Option | None:
        """The row the execution runs for ``option`` with its cushion declined (the options
        table's, with its id and label, when it shows it); None when the option runs as shown."""
        planner = self._plan_planner(self.tasks_at_plan or self.remaining)
        row = self._declined(option, planner)
        if row is None:
            return None
        key = _configuration(row.machines)
        return next((o for o in self.options if _configuration(o.machines) == key), row)

    def odds_model(self, now: float) -> tuple[RuntimeModel, dict[str, float]] | None:
        """What the odds resample (:mod:`..planning.odds`): every runtime seen, on the shared
        average's scale (:class:`SharedEstimate`), and the tasks running as lower bounds."""
        shared = self.shared
        if shared is None:
            return None
        ratio = {name: shared.scale(name) for name in shared.ratio}
        seen = shared.seen()
        censored = [np.asarray(self._seen_running(name, now), dtype=float) / r for name, r in ratio.items()]
        try:
            return RuntimeModel.of(seen, np.concatenate(censored), presorted=True), ratio
        except ValueError:
            return None

    def _with_odds(self, options: list[Option], planner: Planner) -> list[Option]:
        """The options with their odds (all of them up to ODDS_ALL, else the ones a table shows),
        each replayed on the same random draws: the rows then differ by their machines, not by
        their luck (two rows the whole-task model ties, such as every machine and fewer, part on
        the odds, and noise alone must not decide which one `fastest` names)."""
        fitted = self.odds_model(self._now)
        if fitted is None or not options:
            return options
        model, ratio = fitted
        wanted = {o.id for o in (options if len(options) <= ODDS_ALL else spread(options))}
        paid, boot = self._paid_left(self._now), self._boot_times()
        running, busy = self._running_up(self._now, ratio)
        fresh = max(0, planner.n_tasks - busy)  # the tasks running end on their machines first
        seed = int(self.odds_rng.integers(2**63))
        return [_priced(o, option_odds(o, planner.clusters, fresh, model, ratio, np.random.default_rng(seed),
                                       paid_left=paid, boot_s=boot, running=running))
                if o.id in wanted else o for o in options]

    def _fastest_keeping(self, planner: Planner, money: float) -> Option | None:
        """The fastest configuration whose P99 cost fits ``money`` (and whose expected cost, the
        planner's, which the budget ceiling keeps to), as a "budget" option of that budget (no
        cushion: the P99 fits), with its odds; None when none fits or there are no odds.
        The Pareto configurations are tried by a bisection over their makespans (a faster one
        costs more), each replayed on the same random draws so that they compare alike."""
        fitted = self.odds_model(self._now)
        if fitted is None or money <= 0:
            return None
        model, ratio = fitted
        paid, boot, longest, shapes = self._paid_left(self._now), self._boot_times(), self._longest(), self._shapes()
        running, busy = self._running_up(self._now, ratio)
        fresh = max(0, planner.n_tasks - busy)
        candidates = []
        for estimate in planner.pareto():
            if estimate.cost > money + 1e-9:  # the ceiling keeps to the planner's figures: it must fit too
                continue
            option = Option(0, "budget", estimate.machines, estimate.makespan_s, estimate.makespan_atu, estimate.cost,
                            0.0, money, estimate.delta_n, "", True)
            candidates.append(with_machines_up(option, planner.clusters, planner.n_tasks, paid, boot, longest, shapes))
        candidates.sort(key=lambda o: (o.makespan_s, o.cost))
        seed = int(self.odds_rng.integers(2**63))
        tried: dict[int, Option] = {}

        def priced(i: int) -> Option:
            if i not in tried:
                tried[i] = dataclasses.replace(candidates[i], odds=option_odds(
                    candidates[i], planner.clusters, fresh, model, ratio, np.random.default_rng(seed),
                    paid_left=paid, boot_s=boot, running=running))
            return tried[i]

        def fits(i: int) -> bool:
            odds = priced(i).odds
            return odds is not None and odds.cost_p99 <= money + 1e-9

        lo, hi = 0, len(candidates)  # the first index that fits lies in [lo, hi)
        while lo < hi:
            mid = (lo + hi) // 2
            if fits(mid):
                hi = mid
            else:
                lo = mid + 1
        if lo >= len(candidates) or not fits(lo):
            return None
        return priced(lo)

    def _within(self, planner: Planner, money: float) -> Option | None:
        """A budget's option: the fastest configuration whose P99 cost fits ``money``; when none
        does, the fastest whose expected cost fits (dN refined), its cushion the P99 above it."""
        option = self._fastest_keeping(planner, money)
        if option is not None:
            return option
        option = planner.schedule_within(money, label="budget", max_raise=self.settings.max_raise)
        if option is None:
            return None
        option = with_machines_up(option, planner.clusters, planner.n_tasks, self._paid_left(self._now),
                                  self._boot_times(), self._longest(), self._shapes())
        return self._with_odds([option], planner)[0]

    def _longest(self) -> dict[str, float]:
        """Each cluster's longest sampled runtime (its complete sample set's)."""
        return {name: e.sample[-1] for name, e in self.estimates.items() if e.sample}

    def _shapes(self) -> dict[str, np.ndarray]:
        """Each cluster's runtimes as its mean counts them, whose spread the options' makespans
        count at the end of the bag (:func:`~..planning.paid_time.tail_allowance`): its sample,
        the other tasks done on it, and each task running by the sample's tail rule (counted
        without them, the long tasks still running went missing from the spread). Sorted; a
        long run's in SHAPE_POINTS quantiles."""
        shapes: dict[str, np.ndarray] = {}
        for name, estimate in self.estimates.items():
            running = [max(elapsed, estimate.tail_estimate(elapsed)) for elapsed in self._running_for(name, self._now)]
            values = np.concatenate([np.asarray(estimate.sample, dtype=float), estimate.finished_sorted(),
                                     np.asarray(running, dtype=float)])
            if not len(values):
                continue
            values.sort(kind="stable")
            if len(values) > SHAPE_POINTS:
                values = sorted_quantiles(values, (np.arange(SHAPE_POINTS) + 0.5) / SHAPE_POINTS)
            shapes[name] = values
        return shapes

    def _machines_up(self, now: float) -> list[tuple[c.Machine, float]]:
        """The machines up the options may keep, each with the seconds it has left to run tasks in
        the ATU it has paid (until its release, or its edge less the release margin)."""
        up: list[tuple[c.Machine, float]] = []
        for m in self.live_machines():
            held = m.id in self.execution.held_for_choice
            if held or (self.phase != EXECUTING and m.release_at is None
                        and self.clusters[m.cluster].atu_s <= SHORT_ATU_S):
                # billed by the second or minute, a sampling machine is held while the operator
                # chooses (or kept at once by an up-front budget): kept, it has only its paid ATU
                # (the hold is billed), and let go at the choice it runs nothing more
                left = self.execution.edge(m, now) - self.settings.release_margin_s - now
                if left <= 1e-9 and not held and self.execution.choice_hold(m, now) is None:
                    continue  # its ATU ends now and no hold saves a boot: let go at the offer, no option keeps it
                up.append((m, max(0.0, left)))
                continue
            until = m.release_at if m.release_at is not None else self.execution.edge(m, now) - self.settings.release_margin_s
            if until <= now + 1e-9 and self.phase != EXECUTING:
                continue  # let go in this very event (its edge is within the margin): no option keeps it
            up.append((m, max(0.0, until - now)))
        return up

    def _paid_left(self, now: float, up: list[tuple[c.Machine, float]] | None = None) -> dict[str, list[float]]:
        """Per cluster, the paid seconds left of each machine of :meth:`_machines_up`: what the
        options credit. ``up``: that list when the caller has it already (it walks every machine)."""
        left: dict[str, list[float]] = {}
        for m, seconds in self._machines_up(now) if up is None else up:
            left.setdefault(m.cluster, []).append(seconds)
        return left

    def _ready_in(self, now: float, up: list[tuple[c.Machine, float]] | None = None) -> dict[str, list[float]]:
        """Per cluster, for each machine of :meth:`_paid_left` (same order), the seconds until it
        works: 0 for one up, the rest of its cluster's boot time for one booting (0 once that is
        over: it is up any moment). A machine just acquired does not end tasks from now. ``up``:
        :meth:`_machines_up`'s list when the caller has it already."""
        boots = self._boot_times()
        ready: dict[str, list[float]] = {}
        for m, _ in self._machines_up(now) if up is None else up:
            wait = 0.0
            if m.state is c.MachineState.BOOTING:
                wait = max(0.0, m.acquired_at + boots.get(m.cluster, 0.0) - now)
            ready.setdefault(m.cluster, []).append(wait)
        return ready

    def _running_up(self, now: float, ratio: dict[str, float]) -> tuple[dict[str, list[list[float]]], int]:
        """Per cluster, for each machine of :meth:`_paid_left` (same order), the elapsed times of the
        tasks it runs on the odds' scale; and how many tasks run in all."""
        running: dict[str, list[list[float]]] = {}
        count = 0
        for m, _ in self._machines_up(now):
            elapsed = [(now - t) / ratio.get(m.cluster, 1.0) for t in m.started]
            running.setdefault(m.cluster, []).append(elapsed)
            count += len(elapsed)
        return running, count

    def _plan_planner(self, n_tasks: int) -> Planner:
        """The planner the options come from: each mean at its one-sided ``plan_confidence`` bound."""
        return self._planner(n_tasks, self._bound_means(self._now, one_sided_z(self.settings.plan_confidence)))

    def _upper_planner(self, n_tasks: int) -> Planner:
        """The planner with every cluster's mean at the upper end of its ``cushion_confidence``
        interval: what the options cost if the tasks take longer than the sample said. Until the
        execution, the same bound of §2.1's average counts when higher (see the module docstring)."""
        z = z_value(self.settings.cushion_confidence)
        means = self._bound_means(self._now, z)
        if self.phase != EXECUTING:
            for name, estimate in self._sample_estimates.items():
                means[name] = max(means.get(name, MIN_MEAN_S), estimate.stats(self._seen_running(name, self._now)).bound(z, MIN_MEAN_S))
        return self._planner(n_tasks, means)

    def _upper_means(self, now: float) -> dict[str, float]:
        """Each cluster's mean at the upper end of its ``error_confidence`` interval, mean + z sd /
        sqrt(n), n the runtimes seen on it (the sample's among them)."""
        return self._bound_means(now, z_value(self.settings.error_confidence))

    def _bound_means(self, now: float, z: float) -> dict[str, float]:
        """Each cluster's mean + z sd / sqrt(n), n the runtimes seen on it."""
        return {name: self._stats(name, now).bound(z, MIN_MEAN_S) for name in self.estimates}

    def _cheapest_option(self, planner: Planner) -> Option:
        """One machine of the cluster that runs the tasks left for the least money (B_min1's)."""
        n = planner.n_tasks
        best = min((p for p in planner.clusters if p.max > 0), key=lambda p: (p.price * p.units(n * p.mean_s), p.mean_s))
        estimate = planner.estimate({best.name: 1})
        return Option(0, "budget", estimate.machines, estimate.makespan_s, estimate.makespan_atu,
                      estimate.cost, 0.0, self.budget or 0.0, estimate.delta_n, "", False)

    # ------------------------------------------------------------ phase 2: the choice
    def choose(self, spec: str) -> Option:
        """The option ``spec`` names: ``cheapest``, ``fastest``, an option id, or a budget amount
        (``$12.5`` or ``budget:12.5``: the fastest configuration within it). ValueError if none."""
        if not self.options:
            raise ValueError("there are no options yet")
        text = spec.strip().lower()
        if text in ("cheapest", "fastest"):
            labelled = [o for o in self.options if o.label == text or text in o.also]
            if labelled:
                return labelled[0]
            if text == "cheapest":
                return min(self.options, key=lambda o: (o.cost, o.makespan_s))
            return min(self.options, key=lambda o: (o.makespan_s, o.cost))
        if text.isdigit():
            for option in self.options:
                if option.id == int(text):
                    return option
            raise ValueError(f"no option {text} (options are 1 to {len(self.options)})")
        amount_text = text.removeprefix("budget:").removeprefix("$")
        try:
            amount = float(amount_text)
        except ValueError:
            raise ValueError(f"{spec!r}: expected cheapest, fastest, an option id or a budget such as $25") from None
        if not (math.isfinite(amount) and amount > 0):
            raise ValueError(f"{spec!r}: a budget must be a positive amount")
        return self.option_within(amount)

    def option_within(self, budget: float) -> Option:
        """The fastest configuration for the tasks planned whose cost fits ``budget`` (dN refined)."""
        assert self.tasks_at_plan is not None
        planner = self._plan_planner(self.tasks_at_plan)
        option = self._within(planner, budget)
        if option is None:
            cheapest = min(o.budget for o in self.options)
            raise ValueError(f"a budget of {budget:g} pays for no configuration (the cheapest needs {cheapest:g})")
        return option

    def _on_price_changed(self, ev: c.PriceChanged) -> list[c.Action]:
        """A spot price moved (seed 003 §3): new ATUs cost the new price. While executing, move
        to the fastest configuration the money left pays at the new prices; the types it drops go
        at the end of their paid ATU, the ones it adds are acquired now."""
        old = self.prices[ev.cluster]
        super()._on_price_changed(ev)
        cl = self.clusters[ev.cluster]
        self.execution.billings[ev.cluster] = Billing(cl.atu_s, ev.price, cl.min_charge_s)
        if self.phase == OFFERING and ev.price != old:
            return self._reoffer(ev, old)
        if self.phase == SAMPLING and self.budget is not None and ev.price != old:
            return self.execution.enforce_budget(ev.now)  # an up-front budget pays the sampling: reserve at the new price
        if self.phase != EXECUTING or self.remaining == 0 or ev.price == old:
            return []
        now = ev.now
        money = self._money_left(now)
        new = self._planner(self.remaining).fastest_within(max(0.0, money)) if money > 0 else None
        actions: list[c.Action] = []
        if new is not None and new != self.config:
            reason = f"price of {ev.cluster} {old:g} -> {ev.price:g}"
            self.reconfigurations.append({"at_s": now - (self.started_at or 0.0), "reason": reason,
                                          "machines": dict(new)})
            actions.append(Notify(f"re-planned ({reason}): {_machines_text(new)}"))
            actions.extend(self.execution.move_to(new, now))
        actions.extend(self.execution.enforce_budget(now))
        return actions

    def _reoffer(self, ev: c.PriceChanged, old: float) -> list[c.Action]:
        """While the operator chooses, the options are re-planned at the new prices and offered
        again (same estimates and tasks; ids may change, a choice names the new ones)."""
        assert self.tasks_at_plan is not None
        try:
            means = {name: mean for name, (mean, _sd) in self.plan_estimates.items()}
            options = self._plan_options(self._planner(self.tasks_at_plan, means))
        except ValueError as exc:
            return [Notify(f"price of {ev.cluster} {old:g} -> {ev.price:g}: re-planning failed ({exc}); "
                           "the options shown still stand")]
        if not options:
            return [Notify(f"price of {ev.cluster} {old:g} -> {ev.price:g}: no configuration is left; "
                           "the options shown still stand")]
        self.options = options
        return [Notify(f"price of {ev.cluster} {old:g} -> {ev.price:g}: the options were re-planned"),
                OfferOptions(tuple(self.options), self.tasks_at_plan, dict(self.plan_estimates))]

    @handles(ScheduleChosen)
    def _on_schedule_chosen(self, ev: ScheduleChosen) -> list[c.Action]:
        if self.phase != OFFERING:
            return []
        option, notes = self._refresh_choice(ev.option)
        return notes + self._start_execution(ev.now, option, ev.cushion_accepted, keep_budget=False)

    def _refresh_choice(self, option: Option) -> tuple[Option, list[c.Action]]:
        """The sampling machines kept working while the operator chose, so the options were
        planned for more tasks than are left at the answer. They are planned again for the tasks
        left (with the estimates as they are now), and the choice keeps its meaning there: the same
        schedule (cheapest, +20%, fastest-20%, fastest), the fastest configuration within the same
        budget, or the same configuration priced again. Unchanged when no task ended meanwhile."""
        before = self.tasks_at_plan
        if before is None or self.remaining >= before or self.remaining <= 0:
            return option, []
        planner = self._plan_planner(self.remaining)
        try:
            options = self._plan_options(planner)
        except ValueError:
            return option, []
        schedules = {option.label, *option.also} & set(LABELLED)
        new: Option | None
        if schedules:
            new = next((o for o in options if schedules & {o.label, *o.also}), None)
        elif option.label == "budget":
            new = self._within(planner, option.budget)
        else:
            new = next((o for o in options if o.machines == option.machines), None)
            if new is None:
                est = planner.estimate(option.machines)
                new = with_machines_up(with_estimate_cushion(dataclasses.replace(
                    option, machines=est.machines, makespan_s=est.makespan_s, makespan_atu=est.makespan_atu,
                    cost=est.cost, budget=est.cost, cushion=0.0, delta_n=est.delta_n, rounding=""),
                    self._upper_planner(self.remaining)), planner.clusters, planner.n_tasks,
                    self._paid_left(self._now), self._boot_times(), self._longest(), self._shapes())
        if new is None:
            return option, []
        if new.odds is None:
            new = self._with_odds([new], planner)[0]
        self.options, self.tasks_at_plan = options, self.remaining
        self.plan_estimates = {p.name: (p.mean_s, self._stats(p.name, self._now).sd_s) for p in planner.clusters}
        label = option.label if option.id == 0 else f"option {option.id} ({option.label})"
        return new, [Notify(f"{before - self.remaining} task(s) ended while the options were shown: "
                            f"{label} planned again for the {self.remaining} left: "
                            f"{_machines_text(new.machines)}, {new.makespan_s:.0f} s, budget {new.budget:g}"
                            + (f" + cushion {new.cushion:g}" if new.cushion else "")
                            + f" (offered: {_machines_text(option.machines)}, {option.makespan_s:.0f} s, "
                            f"budget {option.budget:g})")]

    # ------------------------------------------------------------ phase 3: the execution
    def _start_execution(self, now: float, option: Option, cushion_accepted: bool, *,
                         keep_budget: bool) -> list[c.Action]:
        self._enter(EXECUTING)
        actions = self.execution.start(now, option, cushion_accepted, keep_budget=keep_budget)
        if self.finished is None:
            # the odds checked at once, not one monitoring interval later: a budget that no option's
            # P99 cost fits (an up-front or budget:X amount below it) is said before its money goes
            actions.extend(self.check_odds(now))
        return actions

    def _monitor(self, now: float) -> list[c.Action]:
        """The plan's check every monitoring interval (a policy of its own overrides it), then the
        early warning's."""
        actions = self.execution.monitor(now)
        if self.finished is None:
            actions.extend(self.check_odds(now))
        return actions

    def chance_of_finishing(self, now: float, replays: int = MONITOR_REPLAYS) -> tuple[float, float, float] | None:
        """(chance, needed, money left): the share of replays of the tasks not started yet, on the
        machines the run keeps (their running tasks, their paid time) and those it waits for, that
        end within the money left, and the money that would bring that share to the threshold.
        ``replays`` at most: half of them when those settle whether the chance is below the
        threshold (see below). None without a budget or estimates."""
        if self.budget is None or not self.estimates:
            return None
        fitted = self.odds_model(now)
        if fitted is None:
            return None
        model, ratio = fitted
        money = self._money_left(now)
        counts: dict[str, int] = {}
        paid: dict[str, list[float]] = {}
        running: dict[str, list[list[float]]] = {}
        # the machines kept first, then those marked for release: they take the tasks whose mean
        # ends before it, and pay nothing more
        machines = sorted(self.live_machines(), key=lambda m: m.release_at is not None)
        for m in machines:
            if m.release_at is None:
                counts[m.cluster] = counts.get(m.cluster, 0) + 1
                left = self.execution.edge(m, now) - now
            else:
                left = m.release_at - now
            paid.setdefault(m.cluster, []).append(max(0.0, left))
            running.setdefault(m.cluster, []).append([(now - t) / ratio.get(m.cluster, 1.0) for t in m.started])
        for name, n in self._requested.items():
            if n > 0 and name in ratio:
                counts[name] = counts.get(name, 0) + n
        clusters = self._planner(max(1, self.remaining)).clusters
        fleet = fleet_of(counts, clusters, ratio, paid, self._boot_times(), running, keep_first=True)
        left = self.execution._tasks_not_started()
        threshold = self.settings.short_threshold
        # half the replays first, kept when they settle the answer: all of them within the money (a
        # chance at or below the threshold shows that at most 0.5 % of the time, at 90 % and 50
        # replays), or, in a run already warned (the money it would take is said), so few that the
        # chance is DECISIVE_SDS deviations below it. Otherwise all the replays from the same draws
        # (the same figures as without the first look)
        state = self.odds_rng.bit_generator.state
        half = replays // 2
        _makespan, cost = replay(fleet, left, model, self.odds_rng, max(1, half))
        within = int(np.sum(cost <= money + 1e-9))
        p = min(1.0, max(0.0, threshold))
        short = self.short_warned and within < half * p - DECISIVE_SDS * math.sqrt(half * p * (1.0 - p))
        if half < 1 or not (within == half or short):
            self.odds_rng.bit_generator.state = state
            _makespan, cost = replay(fleet, left, model, self.odds_rng, replays)
        chance = chance_within(cost, money)
        needed = max(0.0, float(np.quantile(cost, min(1.0, threshold), method="higher")) - money)
        return chance, needed, money

    def check_odds(self, now: float) -> list[c.Action]:
        """The early warning (see :class:`BatsSettings.short_threshold`): once per fall below the
        threshold, a :class:`WarnShort` with the money that would bring the chance back."""
        threshold = self.settings.short_threshold
        if threshold <= 0 or self.phase != EXECUTING or self.remaining <= 0:
            return []
        found = self.chance_of_finishing(now)
        if found is None:
            return []
        chance, needed, money = found
        if chance >= threshold:
            if chance >= min(1.0, threshold + REARM):  # recovered for good, not by a replay's noise
                self.short_warned = False
            return []
        if self.short_warned:
            return []
        self.short_warned = True
        assert self.budget is not None
        spent = self._spent_under_budget(now)
        total = self.budget + self.cushion
        self.warnings.append({"at_s": round(now - (self.started_at or 0.0), 3), "chance": round(chance, 4),
                              "threshold": threshold, "needed": round(needed, 9), "spent": round(spent, 9),
                              "money": round(total, 9)})
        message = (f"the run may fall short of money: {100 * chance:.0f} % chance to end within the "
                   f"{total:g}" + (" (budget + cushion)" if self.cushion else " budget")
                   + f" ({spent:g} spent, {self.remaining} task(s) left); another {needed:g} would bring it "
                   f"to {100 * threshold:.0f} %")
        return [WarnShort(chance, threshold, needed, spent, total, message)]

    @handles(BudgetRaised)
    def _on_budget_raised(self, ev: BudgetRaised) -> list[c.Action]:
        if self.budget is None or not (math.isfinite(ev.amount) and ev.amount > 0):
            return []
        self.execution.budget = self.budget + ev.amount
        self.raised += ev.amount
        self.short_warned = False  # the next check says whether it is enough
        return [Notify(f"budget raised by {ev.amount:g} to {self.budget:g}"), *self.execution.enforce_budget(ev.now)]

    def _boot_times(self) -> dict[str, float]:
        """Each cluster's boot time: the median of its machines' (up - acquired) so far, or its
        configured ``startup`` before any came up (0 when neither says)."""
        boots: dict[str, float] = {}
        for name, cl in self.clusters.items():
            seen = [m.up_at - m.acquired_at for m in self.machines.values()
                    if m.cluster == name and m.up_at is not None]
            boots[name] = max(0.0, float(np.median(seen))) if seen else \
                float(cl.options.get("startup", 0.0) or 0.0)
        return boots


    def _retire(self, machine: c.Machine, now: float, reason: str) -> None:
        self.execution.forget(machine)
        super()._retire(machine, now, reason)

    # ------------------------------------------------------------ time
    def _on_tick(self, ev: c.Tick) -> list[c.Action]:
        now = ev.now
        actions = super()._on_tick(ev)
        if self.phase == EXECUTING and self.finished is None and self.estimates:
            actions.extend(self.endgame.feed_waiting())
        if self.finished is not None:
            return actions
        if self.phase == SAMPLING:
            self._drop_stranded_clusters()
            actions.extend(self._end_sampling_if_complete(now))
        actions.extend(self._release_marked(now, idle_too=True))
        interval_over = now - self.execution.last_monitor >= self.execution.monitor_s - 1e-9
        ceiling_due = now >= self.execution.ceiling_at - 1e-9
        if self.phase == EXECUTING and self.remaining > 0 and (interval_over or not self._live):
            actions.extend(self._monitor(now))
        elif self.phase == EXECUTING and self.remaining > 0 and ceiling_due:
            actions.extend(self.execution.enforce_budget(now))  # the ceiling between two plan checks
            actions.append(WakeAt(self.execution.next_check(now)))
        elif self.phase == SAMPLING and self.budget is not None and (ceiling_due or interval_over):
            self.execution.last_monitor = now  # implicit sampling spends the budget too
            actions.extend(self.execution.enforce_budget(now))
            actions.append(WakeAt(self.execution.next_check(now)))
        actions.extend(self._release_marked(now))  # the checks may have marked machines due now
        actions.extend(self._replan_if_stranded(now))
        actions.extend(self._finish_if_stranded(now))
        return actions

    def _replan_if_stranded(self, now: float) -> list[c.Action]:
        """A task can come back to a bag with no machine left: cut off by its machine's release,
        while the plan's own machines, billed by the second, went as they found nothing to take.
        The plan's machines are acquired again while the money pays for them (the ceiling's
        reservation) before the run is called stranded."""
        if self.phase != EXECUTING or self.finished is not None or self.remaining <= 0 or self._live \
                or any(self._requested.values()) or self._money_ran_out():
            return []
        return self.execution.move_to(dict(self.execution.config), now)

    def _money_ran_out(self) -> bool:
        """Whether the ceiling has let machines go for want of money."""
        return self.budget is not None and (self.execution.short_of_money or any(
            m.release_reason.startswith("the budget") for m in self.machines.values()))

    def _release_marked(self, now: float, *, idle_too: bool = False,
                        only: set[str] | None = None) -> list[c.Action]:
        """Let go every marked machine whose moment has come (and, with ``idle_too``, every idle
        one that cannot fit another task before it); with ``only``, of those machines alone."""
        self.execution.due_now = set()
        actions: list[c.Action] = []
        marked = self.execution.marked
        for m in list(marked.values()) if only is None else [marked[i] for i in sorted(only) if i in marked]:
            if m.state is c.MachineState.GONE:
                continue
            due = m.release_at is not None and now >= m.release_at - 1e-9
            if due and m.held and m.id in self.execution.draining:
                continue  # it ends its task first (the ceiling lets it go when the money cannot keep it)
            if due and m.held and self.execution.ends_in_paid_time(m, now):
                if m.id not in self.execution.held_to_edge:  # its task ends before the edge: let it finish
                    self.execution.held_to_edge.add(m.id)
                    actions.append(WakeAt(self.execution.hard_release(m)))
                continue
            if due or (idle_too and not m.held and not self.execution.fits_before_release(m)):
                for started in m.started:  # every busy slot's task is cut off
                    if now > started:
                        self.killed += 1
                        self.killed_paid_s += now - started
                actions.append(c.Release(m.id, m.release_reason))
                actions.extend(self._requeue_held(m))
                self._retire(m, now, m.release_reason)
        return actions

    def _after_event(self, event: c.Event, actions: list[c.Action]) -> None:
        if isinstance(event, c.MachineAcquired) and self._late_requests.get(event.cluster) and \
                event.machine in self.machines:
            self._late_requests[event.cluster] -= 1
            self._late_machines.append(event.machine)
        if self._extra:  # machines marked while handing out tasks
            extra, self._extra = self._extra, []
            if self.finished is None:
                actions[:0] = extra
        if isinstance(event, (c.MachineAcquired, c.MachineCameLate)) and self.budget is not None and \
                self.finished is None and event.machine in self.machines:  # its first edge may come before the next check
            at = self.execution.decision_point(self.machines[event.machine], event.now)
            if at < self.execution.ceiling_at - 1e-9:
                self.execution.ceiling_at = at
                actions.append(WakeAt(at))
        if self.execution.due_now and self.finished is None:  # marked at an edge already within the margin:
            # waiting for a Tick would begin an ATU; the others due now are let go by their own
            # wake-up, after the results that arrive at the same moment (a task may end just then)
            actions.extend(self._release_marked(event.now, only=self.execution.due_now))
            actions.extend(self._replan_if_stranded(event.now))
            actions.extend(self._finish_if_stranded(event.now))

    def _drop_stranded_clusters(self) -> None:
        """A cluster with no machine left or coming (acquisition failed, machines lost) cannot
        finish its replicated copies; the sample goes on without it."""
        for name in list(self._active):
            gone = not self.live_machines(name) and not self._requested[name] and self.machines_of(name)
            if gone and not self._replace_possible(name):
                self._deactivate(name)

    def machines_of(self, cluster: str) -> list[c.Machine]:
        return [m for m in self.machines.values() if m.cluster == cluster]

    def _replace_possible(self, cluster: str) -> bool:
        return self._lost_in_a_row[cluster] < c.GIVE_UP_AFTER

    def _deactivate(self, name: str) -> None:
        self._active.pop(name, None)
        todo, self.sample.todo[name] = self.sample.todo.get(name, []), []
        for task in todo:
            self._close_copy(task)

    def _on_acquire_failed(self, ev: c.AcquireFailed) -> list[c.Action]:
        self._requested[ev.cluster] = max(0, self._requested[ev.cluster] - ev.n)
        if self._late_requests.get(ev.cluster):
            self._late_requests[ev.cluster] = max(0, self._late_requests[ev.cluster] - ev.n)
        if self.phase == SAMPLING and not self.live_machines(ev.cluster) and not self._requested[ev.cluster]:
            self._deactivate(ev.cluster)
            actions = self._end_sampling_if_complete(ev.now)
            return actions + self._finish_if_stranded(ev.now)
        return self._finish_if_stranded(ev.now)

    def _replace_lost(self, machine: c.Machine, now: float) -> list[c.Action]:
        name = machine.cluster
        if self.remaining <= 0 or self._lost_in_a_row[name] >= c.GIVE_UP_AFTER:
            return []
        if self.phase == SAMPLING:
            want = self._sampling_workers[name] if name in self._active else 0
        elif self.phase == EXECUTING:
            want = self.config.get(name, 0)
        else:
            return []
        have = sum(1 for m in self.live_machines(name) if m.release_at is None) + self._requested[name]
        return self.execution.acquire(name, want - have, now) if have < want else []

    def _finish_if_stranded(self, now: float) -> list[c.Action]:
        if self.remaining == 0 or self._live or any(self._requested.values()):
            return []
        if self.phase == OFFERING:
            return []  # waiting for the operator's choice
        if self._money_ran_out():
            assert self.budget is not None
            spent = round(self._spent_under_budget(now), 6)  # money to the micro-dollar, not float noise
            left = round(max(0.0, self.budget + self.cushion - spent), 6)
            return [self._stop(f"the budget is spent: {spent:g} of {self.budget:g}"
                               + (f" + cushion {self.cushion:g}" if self.cushion else "")
                               + f" paid, {left:g} left does not pay the next ATU of any "
                               f"machine; {self.remaining} task(s) did not run")]
        return [self._stop("no machines left to run the remaining tasks")]

    def _stop(self, reason: str) -> c.Finish:
        self.finished = c.Finish("incomplete", reason)
        return self.finished

    # ------------------------------------------------------------ report
    def not_run(self) -> list[int]:
        """Ids of the tasks without a final outcome, ascending."""
        ids = set(self._pending)
        ids.update(task for task, _machine in self._retry)
        ids.update(task for m in self.live_machines() for task, _attempt in m.held)
        ids.update(task for task in self.sample.order if self._status[task] == c.RUNNING)
        for todo in self.sample.todo.values():
            ids.update(todo)
        return sorted(t for t in ids if self._status[t] in (c.PENDING, c.RUNNING))

    def report(self, now: float) -> dict:
        figures = super().report(now)
        figures["endgame"] = self.endgame.report()
        total = figures["cost"]["total"]
        sampling = self._sampling_cost_now() if self.sampling_cost is not None else total
        # rounded to the planner's money resolution (1e-9): a difference of two large float sums
        # must not show a $0.0001 execution as 0.00010000000020
        figures["cost"].update({"sampling": sampling, "execution": round(total - sampling, 9),
                                "sampling_work": round(min(self.sampling_work, sampling), 9)})
        figures["policy"] = "bats"
        figures["phase"] = self.phase
        figures["budget"] = self.budget
        figures["cushion"] = self.cushion
        figures["cushion_accepted"] = self.cushion_accepted
        figures["sample_size"] = self.sample_size
        figures["sampling_bound"] = None if self.sampling_bound is None else {
            **{key: round(value, 9) for key, value in self.sampling_bound.items()},
            "censored": {name: [round(t, 3) for t in values] for name, values in self.sample.censored.items()}}
        figures["options"] = [option_record(o) for o in self.options]
        figures["selected"] = None if self.selected is None else option_record(self.selected)
        figures["estimates"] = {name: {"mean_s": mean, "sd_s": sd} for name, (mean, sd) in self.plan_estimates.items()}
        figures["estimates_at_end"] = {name: {"mean_s": s.mean_s, "sd_s": s.sd_s}
                                       for name, s in ((n, self._stats(n, now)) for n in self.estimates)}
        figures["tasks_at_plan"] = self.tasks_at_plan
        figures["reconfigurations"] = list(self.reconfigurations)
        figures["warnings"] = list(self.warnings)
        figures["budget_raised"] = self.raised
        figures["killed"] = {"tasks": self.killed, "paid_s": round(self.killed_paid_s, 6)}
        if self.remaining:
            figures["tasks"]["not_run_ids"] = self.not_run()
        return figures

