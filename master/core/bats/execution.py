"""BaTS's third phase: executing the chosen configuration within the budget (seed 000 "BaTS", §3.1,
Fig. 4), and the budget ceiling every phase keeps.

How this works. :class:`Execution` is a part that :class:`~.policy.BatsCore` owns and calls, as it
owns its :class:`~.sampling.Sample`. It keeps the run's money and plan (the budget and cushion, the
configuration running, the machines marked for release and when, the re-plans) and reads the
machines and the bag from the core (:class:`~..base.Core`); the estimates it plans with come from
the policy through :class:`Planning`. Starting the chosen option acquires what it adds to the
sampling machines; the monitoring check (§3.1) compares N_e with N_p and re-plans (a run short
of money to the slowest configuration the money left pays that still ends by the chosen
option's makespan, the fastest when none does; one ahead of it, with the fastest schedule or a
budget, to a faster one the budget left pays; one whose money suffices but whose tasks take
longer than planned adds the machines that end it on time: extensions of §3.1, which re-plans
for the money alone); the budget
ceiling (:func:`~..planning.monitor.plan_releases`) decides at every machine's edge, less the
release margin, whether the money left renews it, and marks for release what it cannot; a task
that would carry a machine past an edge the budget will not renew is not handed out. The rules
are below and in the policy module's docstring; the end of the bag (hand-out by
expected finish, copies on idle paid machines) is the :mod:`.endgame` part, which asks this one
about paid time and the budget.

The ceiling. The budget is checked on its own clock, not once per monitoring interval (a 5-minute
reservation made a 6 s ATU unaffordable). Where a cluster's ATU is longer than twice the release
margin, each machine's next ATU is decided at its edge less the margin (a :class:`WakeAt` there),
and :func:`~..planning.monitor.plan_releases` reserves one ATU per kept machine;
for shorter ATUs (per-second billing) the ceiling is checked every max(ATU, 5 s) and reserves
what a machine begins until then plus the margin. Every monitoring check also checks it. Money
is reserved out of budget + cushion - spent; machines that do not fit are let go before their
next edge; a machine is acquired only if the same reservation for it fits as well (machines
asked for and not acquired yet count as reserved). Machines whose running task is expected to
end past their edge keep their reservation first. When the money is gone the run ends
incomplete, and the reason gives the figures.

Paid work is not thrown away. A task that would carry a machine past its edge is handed out only
if the budget renews the machine (:meth:`Execution.decide_renewal`); if not, the machine is
marked first and gets only tasks expected (the cluster's mean) to end before it is let go. A
marked machine running a task when its moment comes stays until the task ends, at the latest
until its edge less a tenth of the margin (at least 1 s, at most the margin; the time a release
takes to stop the bill): that time is paid anyway, and long-tailed runtimes often end where the
estimate said they would not. A release
that cuts a running task off is the last resort; the report counts such tasks and the paid
seconds they ran (``killed``). After sampling, machines whose edge is within the margin wait
for the choice until the same moment, so that an option chosen at once keeps them. Billed by the
second or the minute (an ATU of a minute or less) there is no paid edge to wait for, yet a
machine up is worth its cluster's boot: a sampling machine is held (and paid) while the operator
chooses, at most as long as a new machine would take to boot, the options count it as kept from
the choice on, and the ones the chosen option does not keep are let go at the choice. There, and
when a re-plan needs fewer machines, a machine so billed that is running a task ends it first
(``draining``; it takes no new one) when the task's expected rest on it (the sample's tail rule,
or as long again for a task longer than every sampled one) costs no more than the whole task run
again on the plan's cheapest cluster: cut off, a task far along is paid twice. The ceiling keeps
such a machine only with the money the plan's own machines leave, and lets it go when that runs out.

A run short of money re-plans (§3.1) unless the configuration running still ends the tasks left
within the catch-up's slack of the chosen makespan and its money pays: the per-machine speeds the
check measures are noisy, and with per-second billing the next configuration up is often twice as
fast, so a re-plan for a shortfall of a few tasks moved runs far from their plan.

The interface the policy calls: :meth:`Execution.start` (the choice), :meth:`~Execution.move_to`,
:meth:`~Execution.monitor`, :meth:`~Execution.enforce_budget` and :meth:`~Execution.next_check`
(the checks), :meth:`~Execution.acquire`, :meth:`~Execution.mark`, :meth:`~Execution.unmark` and
:meth:`~Execution.forget` (machines), :meth:`~Execution.decide_renewal` (before a hand-out), and the
queries :meth:`~Execution.edge`, :meth:`~Execution.kept_by_budget`, :meth:`~Execution.decision_point`,
:meth:`~Execution.fits_before_release`, :meth:`~Execution.hard_release`,
:meth:`~Execution.ends_in_paid_time`, :meth:`~Execution.reserve_new` and :meth:`~Execution.tau_e`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from ... import core as c
from ..actions import Notify, WakeAt
from ..billing import atus_begun, atus_spanning, release_guard_s, whole
from ..planning.clusters import SHORT_ATU_S
from ..planning.estimate import RuntimeEstimate
from ..planning.monitor import Billing, MachineTable, ReleasePlan, TailEstimates, check, plan_releases
from ..planning.paid_time import with_machines_up
from ..planning.planner import Option, Planner
from .settings import BatsSettings

REPLANS_PER_MAKESPAN = 6  # an automatic monitoring interval lets a plan re-plan this often
TIGHT_PLAN_REUSE_S = 10.0  # a hand-out reuses a release plan this old when money is tight
SPEED_UP_GAIN = 0.1  # a run ahead of its plan speeds up when that ends the bag this much sooner
SPEED_UP_TASKS = 5  # ... and leaves each machine of the new configuration at least this many tasks
CATCH_UP_SLACK = 0.05  # a run adds machines when it would end this share of its makespan late
CEILING_FLOOR_S = 5.0  # the budget ceiling is checked at least this far apart (per-second billing)


# what a projection reads of the run at one moment (Execution._fleet_now): tasks to place, per
# cluster the paid seconds left of each machine up, boot times, runtime shapes, seconds until ready
FleetNow = tuple[int, dict[str, list[float]], dict[str, float], Mapping[str, np.ndarray], dict[str, list[float]]]


class Planning(Protocol):
    """What the execution asks of the policy that owns it: planners and figures from the runtime
    estimates, which the policy keeps, and the clusters still taking part."""

    estimates: dict[str, RuntimeEstimate]
    tasks_at_plan: int | None
    _active: dict[str, None]

    def _planner(self, n_tasks: int, means: dict[str, float] | None = None) -> Planner: ...
    def _plan_planner(self, n_tasks: int) -> Planner: ...
    def _upper_means(self, now: float) -> dict[str, float]: ...
    def _machines_up(self, now: float) -> list[tuple[c.Machine, float]]: ...
    def _paid_left(self, now: float, up: list[tuple[c.Machine, float]] | None = None) -> dict[str, list[float]]: ...
    def _boot_times(self) -> dict[str, float]: ...
    def mean_s(self, cluster: str) -> float | None: ...
    def _shapes(self) -> Mapping[str, np.ndarray]: ...
    def _ready_in(self, now: float, up: list[tuple[c.Machine, float]] | None = None) -> dict[str, list[float]]: ...
    def _sampling_not_budgeted(self) -> float: ...
    def declined_row(self, option: Option) -> Option | None: ...


class Execution:
    """Phase 3 of :class:`~.policy.BatsCore` and its budget ceiling; see the module docstring."""

    def __init__(self, core: c.Core, policy: Planning, settings: BatsSettings) -> None:
        self.core = core  # the machines and the bag
        self.policy = policy  # the estimates (the same object as ``core``: the BaTS policy)
        self.settings = settings
        clusters = core.clusters
        self.billings = {name: Billing(cl.atu_s, cl.price, cl.min_charge_s) for name, cl in clusters.items()}
        self.marked: dict[str, c.Machine] = {}  # machines marked for release, by id
        self.due_now: set[str] = set()  # the machines marked for release at the current moment
        self.short_of_money = False  # an acquisition was cut because the budget could not pay it
        self.tail: TailEstimates | None = None  # the sample's, once sampling is done
        self.selected: Option | None = None
        self.budget: float | None = settings.budget
        self.cushion = 0.0
        self.cushion_accepted = settings.cushion_accepted
        self.delta_n_allowed = 0
        self.config: dict[str, int] = {}
        self.plan_end: dict[str, float] = {}
        self.reconfigurations: list[dict[str, Any]] = []
        self.last_monitor = 0.0
        self.execution_started_at: float | None = None  # the choice (or, with an up-front budget, the plan)
        # the budget ceiling (see "The ceiling" in the module docstring): checked at every machine's
        # edge less the margin where an ATU is longer than twice the margin, every max(ATU, 5 s)
        # for the other clusters (per-second billing), and at every monitoring check
        margin = settings.release_margin_s
        self.monitor_s = settings.monitor_interval_s
        short = [cl.atu_s for cl in clusters.values() if cl.atu_s <= 2 * margin]
        self.ceiling_s = settings.ceiling_interval_s or (
            min(settings.monitor_interval_s, max(min(short), CEILING_FLOOR_S)) if short else math.inf)
        self._horizons = {name: (0.0 if cl.atu_s > 2 * margin else self.ceiling_s) for name, cl in clusters.items()}
        self.last_ceiling = 0.0
        self.ceiling_at = math.inf
        self.guard_s = release_guard_s(margin)  # a marked machine running a task stays until its edge less this
        self.release_edge: dict[str, float] = {}  # marked machine -> the edge of its paid time
        self.held_to_edge: set[str] = set()  # marked machines kept past their moment for a task in paid time
        self.held_for_choice: set[str] = set()  # sampling machines billed by the second or minute, held
        # (and paid) while the operator chooses, for as long as booting a new one would take
        # marked machines billed by the second or the minute, let go by the plan while running a
        # task: they end it first while the ceiling keeps them
        self.draining: set[str] = set()
        self._keep_cache: tuple[tuple, float, float, frozenset[str]] | None = None  # see kept_by_budget

    def start(self, now: float, option: Option, cushion_accepted: bool, *,
              keep_budget: bool) -> list[c.Action]:
        self.execution_started_at = now
        self.selected = option
        self.cushion_accepted = cushion_accepted
        if not keep_budget:
            self.budget = option.budget
        # an up-front budget is the whole money: any cushion the plan wants comes out of it
        self.cushion = option.cushion if cushion_accepted and not keep_budget else 0.0
        self.delta_n_allowed = max(0, option.delta_n) if cushion_accepted else 0
        config = dict(option.machines)
        declined = None if cushion_accepted else self.policy.declined_row(option)
        if declined is not None:  # the raise was the cushion, not taken: the row the table shows for that runs
            self.selected, config = declined, dict(declined.machines)
            if not keep_budget:
                self.budget = min(option.budget, declined.budget)
        self.last_monitor = self.last_ceiling = now
        if self.settings.monitor_interval_auto and self.selected.makespan_s > 0:
            # no more often than the ceiling's own check; billed by ATUs long next to the release
            # margin (per minute, hourly) the ceiling runs at the machines' edges instead, and the
            # monitoring still comes REPLANS_PER_MAKESPAN times a plan (a 6-minute plan billed per
            # minute once a minute, not once in its 5-minute default)
            floor = self.ceiling_s if math.isfinite(self.ceiling_s) else CEILING_FLOOR_S
            self.monitor_s = min(self.settings.monitor_interval_s,
                                  max(floor, self.selected.makespan_s / REPLANS_PER_MAKESPAN))
        ran = self.selected
        label = ran.label if ran.id == 0 else f"option {ran.id} ({ran.label})"
        inside = (f" (its cushion {option.cushion:g} comes out of the budget)"
                  if keep_budget and cushion_accepted and option.cushion else "")
        if declined is not None:
            inside += (f" ({option.label if option.id == 0 else f'option {option.id}'}'s cushion declined: "
                       f"its {_machines_text(option.machines)} need it)")
        actions: list[c.Action] = [Notify(f"executing {label}: {_machines_text(config)}, budget "
                                          f"{self.budget:g}" + (f" + cushion {self.cushion:g}" if self.cushion else "")
                                          + inside)]
        actions.extend(self.move_to(config, now))
        for machine_id in sorted(self.held_for_choice):  # held for a choice that does not keep them
            m = self.marked[machine_id]
            actions.extend(self.mark(m, now, m.release_reason, drain=True))
        self.held_for_choice.clear()
        actions.extend(self.enforce_budget(now))
        actions.append(WakeAt(self.next_check(now)))  # the next check, on time
        return actions

    def decision_point(self, m: c.Machine, now: float) -> float:
        """The next moment the ceiling must decide whether ``m`` begins another ATU (its edge less
        the margin); inf where its cluster is checked periodically instead."""
        if (m.release_at is not None and m.id not in self.draining) or m.state is c.MachineState.GONE \
                or self._horizons[m.cluster] > 0:
            return math.inf
        at = self.edge(m, now) - self.settings.release_margin_s
        return at if at > now + 1e-9 else at + self.core.clusters[m.cluster].atu_s

    def next_check(self, now: float) -> float:
        """When the next check is due: a machine's decision point, the periodic ceiling or the
        plan's, whichever comes first."""
        at = min(self.last_ceiling + self.ceiling_s, self.last_monitor + self.monitor_s,
                 min((self.decision_point(m, now) for m in self.core.machines.values()), default=math.inf))
        self.ceiling_at = at
        return at

    def move_to(self, config: dict[str, int], now: float) -> list[c.Action]:
        """Make ``config`` the plan: keep or acquire its machines, mark the others for release."""
        self.config = dict(config)
        estimate = self.policy._planner(max(1, self.core.remaining)).estimate(config) if any(config.values()) else None
        self.plan_end = {name: now + u * self.core.clusters[name].atu_s
                          for name, u in (estimate.atus.items() if estimate else ())}
        actions: list[c.Action] = []
        for name in self.core.clusters:
            want = config.get(name, 0)
            live = self.core.live_machines(name)
            kept = [m for m in live if m.release_at is None]
            have = self._kept_or_asked(name)
            if have < want:  # keep first the marked machines whose running task would be cut off
                marked = (m for m in live if m.release_at is not None)
                for m in sorted(marked, key=lambda m: (not self._crosses_edge(m, now), -(m.release_at or 0))):
                    if have >= want:
                        break
                    self.unmark(m)
                    actions.extend(self.core._feed(m))  # it may have been left idle while marked
                    have += 1
                actions.extend(self.acquire(name, want - have, now))
            elif have > want:
                # let go first the machines whose running task ends in their paid time (or idle ones)
                surplus = sorted(kept, key=lambda m: (self._crosses_edge(m, now), self.edge(m, now)))[:have - want]
                for m in surplus:
                    actions.extend(self.mark(m, now, "the plan needs fewer machines of its cluster", drain=True))
        return actions

    def _crosses_edge(self, m: c.Machine, now: float) -> bool:
        """Whether ``m``'s running task is expected (the sample's tail rule) to run past the moment
        a release at its edge would come: releasing it then would throw that task's work away."""
        if not m.held or m.running_since is None:
            return False
        elapsed = max(0.0, now - m.running_since)
        ends = m.running_since + max(elapsed, float(self.tau_e()(m.cluster, elapsed)))
        return ends > self.edge(m, now) - self.settings.release_margin_s

    def kept_by_budget(self, machine_id: str, now: float) -> bool:
        """Whether the release plan keeps ``machine_id`` (its next ATU reserved).

        Building the plan walks every machine, and a pool of a thousand machines hands out tasks at
        thousands of distinct moments, so one plan serves the hand-outs of ``TIGHT_PLAN_REUSE_S``,
        but never past the moment a kept machine begins the ATU the plan reserved for it: a plan
        kept from before that edge said "renewed" for an ATU no longer reserved, and the task it let
        through was cut off by the ceiling (a 6 s ATU run ended 2 tasks short). While the money is plentiful the plan serves until the
        next ceiling check: when it kept every machine with money to spare for each to begin an ATU
        at every edge it may pass before then (each such ATU leaves the reservation as it was and
        the spare one ATU less), a fresh plan would say the same. A change in the machines, the
        prices or the money builds it afresh."""
        key = (self.last_ceiling, len(self.marked), self.core._live, sum(self.core._requested.values()), self.budget,
               self.cushion, tuple(self.core.prices.values()))
        cache = self._keep_cache
        if cache is not None and cache[0] == key and cache[1] <= now <= cache[2]:
            return machine_id in cache[3]
        plan = self._release_plan(now)
        # no longer than a kept machine's reservation lasts: its next ATU (or, checked periodically,
        # those until the next check) is reserved, and once it begins that ATU the one after is not
        covered = min((max(self.edge(m, now), now + self._horizons[m.cluster]) for m in self.core.live_machines()
                       if m.release_at is None), default=math.inf)
        until = min(now + min(TIGHT_PLAN_REUSE_S, self.ceiling_s), covered)
        check = math.inf
        if not plan.release:
            # the next check: periodic, or (edge-checked clusters only) at a machine's edge less the margin
            check = self.last_ceiling + self.ceiling_s if math.isfinite(self.ceiling_s) else self.ceiling_at
        if math.isfinite(check):
            drift = 0.0
            for m in self.core.machines.values():
                if m.state is not c.MachineState.GONE:
                    billing = self.billings[m.cluster]
                    drift += billing.price * atus_spanning(check - now, billing.atu_s)
            if plan.money_left - plan.reserved >= drift - 1e-9:
                until = max(until, check)
        self._keep_cache = (key, now, until, frozenset(plan.keep))
        return machine_id in plan.keep

    def acquire(self, name: str, n: int, now: float) -> list[c.Action]:
        n = min(n, self.core.machines_allowed())
        if n <= 0 or name not in self.policy._active:
            return []
        reserve = self.reserve_new(name)
        if reserve > 0 and self.budget is not None:
            plan = self._release_plan(now)
            affordable = max(0, math.floor((plan.money_left - plan.reserved) / reserve + 1e-9))
            if affordable < n:
                self.short_of_money = True
            n = min(n, affordable)
        if n <= 0:
            return []
        self.core._requested[name] += n
        return [c.Acquire(name, n)]

    def reserve_new(self, name: str) -> float:
        """What a machine of ``name`` acquired now must have reserved: every ATU it begins before
        the next check can let it go (the horizon and margin ``plan_releases`` reserves for a kept one)."""
        billing = self.billings[name]
        return billing.price * billing.atus_paid(self._horizons[name] + self.settings.release_margin_s)

    def _reserved_for_requested(self) -> float:
        """The reservations of the machines asked for and not acquired yet."""
        return sum(n * self.reserve_new(name) for name, n in self.core._requested.items() if n)

    def unworked_s(self, name: str) -> float:
        """Paid seconds at the end of a machine's time that it runs no task in: it is let go the
        release margin before its edge, and where the ceiling is checked periodically (per-second
        billing) its last check must still find that margin and the time to the next check paid."""
        return self.settings.release_margin_s + self._horizons[name]

    def edge(self, m: c.Machine, now: float) -> float:
        """When the machine's current ATU ends (absolute time)."""
        return m.acquired_at + self.billings[m.cluster].paid_until(m.uptime(now))

    def mark(self, m: c.Machine, now: float, reason: str, *, wait_for_choice: bool = False,
             drain: bool = False) -> list[c.Action]:
        """Mark ``m`` for release at its edge less the margin (see the module docstring). With
        ``drain`` (the plan lets it go, not the money), a machine billed by the second or the minute
        (no paid time worth the name to run on to) that is running
        a task ends that task first, as long as the ceiling keeps it: cutting it would throw its
        paid work away and run it again from the start elsewhere."""
        if drain and self._drain_pays(m, now):
            self.draining.add(m.id)
        edge = self.edge(m, now)
        at = max(now, edge - self.settings.release_margin_s)
        if wait_for_choice and at <= now + 1e-9:  # the option chosen may keep it: wait until just before its edge
            at = max(now, edge - self.guard_s)
            held = self.choice_hold(m, now)
            if held is not None:
                at = held
                self.held_for_choice.add(m.id)
        if m.release_at is not None and m.release_at <= at:
            return []
        m.release_at = at
        m.release_reason = reason
        self.marked[m.id] = m
        self.release_edge[m.id] = edge
        if at <= now + 1e-9:  # its edge is within the margin already: let go before this event ends
            self.due_now.add(m.id)
        return [WakeAt(at)]

    def choice_hold(self, m: c.Machine, now: float) -> float | None:
        """Until when a sampling machine at the end of its paid time is held for the operator's
        choice, or None. Billed by the second or the minute there is no paid edge worth waiting
        for, but a machine up is worth its cluster's boot: it is held (paid) that long, to the last
        edge before then, rather than let go and a new one booted."""
        billing = self.billings[m.cluster]
        if billing.atu_s > SHORT_ATU_S:
            return None
        edge = self.edge(m, now)
        boot = self.policy._boot_times().get(m.cluster, 0.0)
        more = whole(now + boot + self.guard_s - edge, billing.atu_s)
        return edge + more * billing.atu_s - self.guard_s if more > 0 else None

    def _drain_pays(self, m: c.Machine, now: float) -> bool:
        """Whether a machine the plan lets go, billed by the second or the minute, should end its
        running task rather than have it cut off and run again from the start on the plan's
        cheapest cluster: its expected rest there (the sample's tail rule; a task that has outlived
        every sampled one is expected to run as long again) costs no more than the whole task
        again on that cluster. A task just begun on a dear machine is cut; one far along, or on a
        machine no dearer per task than the plan's, runs on."""
        billing = self.billings[m.cluster]
        if m.running_since is None or (self._horizons[m.cluster] <= 0 and billing.atu_s > SHORT_ATU_S):
            return False
        mean_s = self.policy.mean_s
        own = mean_s(m.cluster)
        if own is None or own <= 0:
            return False
        # the plan's cheapest cost of a second of this machine's work
        rerun = min((self.billings[k].price / self.billings[k].atu_s * mean / own
                     for k, n in self.config.items() if n > 0 and k != m.cluster and (mean := mean_s(k)) is not None),
                    default=math.inf)
        if not math.isfinite(rerun):
            return True  # no other cluster to run it again on
        elapsed = max(0.0, now - m.running_since)
        expected = float(self.tau_e()(m.cluster, elapsed))
        rest = expected - elapsed if expected > elapsed + 1e-9 else elapsed
        return rest * billing.price / billing.atu_s <= (elapsed + rest) * rerun + 1e-12

    def unmark(self, m: c.Machine) -> None:
        self.held_for_choice.discard(m.id)
        m.release_at = None
        m.release_reason = ""
        self.marked.pop(m.id, None)
        self.release_edge.pop(m.id, None)
        self.held_to_edge.discard(m.id)
        self.draining.discard(m.id)

    def decide_renewal(self, machine: c.Machine) -> list[c.Action]:
        """Before a task that would carry ``machine`` past its edge is handed out: does the budget
        pay its next ATU? If not, mark it now (it then gets only tasks that end in paid time)
        instead of finding out at the edge and cutting the task off."""
        mean = self.policy.mean_s(machine.cluster)
        if self.budget is None or mean is None or machine.state is not c.MachineState.UP:
            return []
        now = self.core._now
        if now + machine.rounds_to_end() * mean <= self.edge(machine, now) - self.settings.release_margin_s:
            return []  # it ends in paid time
        if self.kept_by_budget(machine.id, now):
            return []
        return self.mark(machine, now, "the budget cannot pay its next ATU")

    def fits_before_release(self, machine: c.Machine) -> bool:
        """Whether ``machine``, if marked, is expected (its cluster's mean) to end one more task
        before it is let go."""
        if machine.release_at is not None and self.core._now >= machine.release_at - 1e-9:
            return False  # due: it is let go now
        mean = self.policy.mean_s(machine.cluster)
        if mean is None or machine.release_at is None:
            return True
        return self.core._now + machine.rounds_to_end() * mean <= machine.release_at

    def hard_release(self, m: c.Machine) -> float:
        """The last moment a marked machine may stay: just before the edge of its paid time."""
        edge = self.release_edge.get(m.id)
        if edge is None:  # marked by a policy of its own: the edge of the ATU its release time falls in
            at = m.release_at if m.release_at is not None else self.core._now
            edge = m.acquired_at + self.billings[m.cluster].paid_until(max(0.0, at - m.acquired_at))
        return edge - self.guard_s

    def ends_in_paid_time(self, m: c.Machine, now: float) -> bool:
        """Whether ``m`` goes on with its running task until its hard release: that time is paid
        for anyway, so the task may use it to end (long-tailed runtimes often end where the mean
        says they would not, and a task cut off now would have to start over elsewhere)."""
        return m.running_since is not None and now < self.hard_release(m) - 1e-9

    def forget(self, machine: c.Machine) -> None:
        """``machine`` left the run (released or lost): it is no longer marked."""
        self.marked.pop(machine.id, None)
        self.held_for_choice.discard(machine.id)
        self.draining.discard(machine.id)

    def _gone_spent(self, now: float) -> float:
        """``spent_before`` for the monitor, which prices a live machine's begun ATUs at its
        cluster's price now: what the budget paid for machines no longer live, plus, after spot
        price changes, the difference between what live machines' ATUs really cost and that."""
        gone = 0.0
        correction = 0.0
        for m in self.core.machines.values():
            if m.state is c.MachineState.GONE:
                gone += self.core.machine_cost(m, now)[1]
            elif m.cluster in self.core._price_log:
                atus, cost = self.core.machine_cost(m, now)
                correction += cost - atus * self.core.prices[m.cluster]
        return gone + correction - self.policy._sampling_not_budgeted()

    def tau_e(self) -> _TauE:
        return _TauE(self.tail)

    def _views(self, now: float) -> MachineTable:
        """Every live machine as monitoring sees it, built straight into the monitor's columns
        (one pass, the billing rule read per cluster)."""
        names = list(self.core.clusters)
        code_of = {name: k for k, name in enumerate(names)}
        rules = [(cl.atu_s, cl.min_charge_s, self.plan_end.get(name, now)) for name, cl in self.core.clusters.items()]
        ids, codes, ups, nts, rts, elapsed, lefts, marks = [], [], [], [], [], [], [], []
        nan = math.nan
        for m in self.core.machines.values():
            if m.state is c.MachineState.GONE:
                continue
            code = code_of[m.cluster]
            atu, min_charge, end = rules[code]
            up = max(0.0, now - m.acquired_at)
            edge = m.acquired_at + atus_begun(up, atu, min_charge) * atu
            marked = m.release_at is not None
            ids.append(m.id)
            codes.append(code)
            ups.append(up)
            nts.append(m.nt)
            rts.append(m.rt / m.slots)  # a k-slot machine: rt in machine seconds, so v is the machine's speed
            elapsed.append(now - m.running_since if m.held and m.running_since is not None else nan)
            lefts.append(0 if marked else atus_spanning(end - edge, atu))
            marks.append(marked)
        return MachineTable(tuple(ids), tuple(names), np.array(codes, dtype=np.intp), np.array(ups, dtype=float),
                            np.array(nts, dtype=float), np.array(rts, dtype=float), np.array(elapsed, dtype=float),
                            np.array(lefts, dtype=float), np.array(marks, dtype=bool))

    def _tasks_not_started(self) -> int:
        prefetched = sum(len(m.held) - m.running for m in self.core.live_machines())
        return len(self.core._pending) + len(self.core._retry) + prefetched

    def monitor(self, now: float) -> list[c.Action]:
        """§3.1 every monitoring interval: re-plan when N_e > N_p (+ dN), then keep to the budget."""
        self.last_monitor = now
        views: MachineTable | None = self._views(now)
        assert views is not None
        result = check(views, self._tasks_not_started(), self.billings, self.tau_e(),
                       self.delta_n_allowed, spent_before=self._gone_spent(now),
                       release_margin_s=self.settings.release_margin_s)
        actions: list[c.Action] = []
        # short of money with every task left running, the run does not re-plan: a new configuration
        # starts none of them, its machines added would be paid to wait, and those it drops would cut
        # a running task off; the ceiling alone decides which running machines the money renews
        if not result.ok and self._tasks_not_started() > 0:
            money = (self.budget + self.cushion - result.spent) if self.budget is not None else math.inf
            new = self._replan_within(money, now, by=self._promised_end()) if money > 0 else None
            new = self._starting_something(new) if new is not None else None
            if new is not None and new != self.config:
                reason = f"N_e {result.n_e} > N_p {result.n_p}" + (
                    f" + dN {self.delta_n_allowed}" if self.delta_n_allowed else "")
                self.reconfigurations.append({"at_s": now - (self.core.started_at or 0.0), "reason": reason,
                                              "machines": dict(new)})
                actions.append(Notify(f"re-planned ({reason}): {_machines_text(new)}"))
                actions.extend(self.move_to(new, now))
                views = None  # machines were marked or unmarked
        elif result.ok:
            moved = self._speed_up(result.spent, now) if result.n_e < result.n_p and self._speeds_up() else []
            moved = moved or self._catch_up(result.spent, now)
            if moved:
                actions.extend(moved)
                views = None
        actions.extend(self.enforce_budget(now, views))
        actions.append(WakeAt(self.next_check(now)))  # the next check, on time
        return actions

    def _starting_something(self, new: dict[str, int]) -> dict[str, int]:
        """``new`` with no more machines added than the tasks not started can keep busy: near the
        end of the bag the planner, asked for a few tasks, adds as many machines as the money
        pays, and the ones with no task to start are paid to wait (the options' odds, which
        replay the configuration chosen, never count such money). The additions of the slowest
        clusters (by their mean runtime) are dropped first."""
        free = self._tasks_not_started()
        added = {name: n - self._kept_or_asked(name) for name, n in new.items() if n > self._kept_or_asked(name)}
        mean_s = self.policy.mean_s
        keep = dict(new)
        for name in sorted(added, key=lambda k: mean if (mean := mean_s(k)) is not None else math.inf):
            slots = max(1, self.core.cluster_slots.get(name, 1))
            useful = min(added[name], math.ceil(free / slots))
            keep[name] = new[name] - added[name] + useful
            free = max(0, free - useful * slots)
        return keep

    def _kept_or_asked(self, name: str) -> int:
        """The machines of ``name`` the plan has: live and not marked for release, or asked for."""
        return sum(1 for m in self.core.live_machines(name) if m.release_at is None) + self.core._requested[name]

    def _speeds_up(self) -> bool:
        """Whether a run ahead of its plan may move to a faster configuration: on (``speed_up``)
        for the schedules that mean "the fastest within this money", the fastest schedule and a
        budget, never for the cheaper ones, whose operator chose to keep the money."""
        chosen = self.selected
        return (self.settings.speed_up and chosen is not None and self.budget is not None
                and bool({"fastest", "budget"} & {chosen.label, *chosen.also}))

    def _speed_up(self, spent: float, now: float) -> list[c.Action]:
        """§3.1 re-plans only when a run falls behind; one ahead of its plan leaves money that the
        plan will not need. Move to the fastest configuration the budget left pays (without the
        cushion, with room for the estimate's error as a run behind its plan gets) when it ends
        the tasks left at least SPEED_UP_GAIN sooner than the one running."""
        if self.budget is None:
            return []
        money = self.budget - spent
        new = self._replan_within(money, now)
        if new is None or new == self.config or not any(self.config.values()):
            return []
        if any(new.get(name, 0) < n for name, n in self.config.items()):
            return []  # it would let machines go: their running tasks could be cut off at the edge
        if self.core.remaining < SPEED_UP_TASKS * sum(new.values()):
            return []  # near the end a few long tasks decide the makespan, not the machines
        planner = self.policy._planner(self.core.remaining)
        running, faster = planner.estimate(self.config).makespan_s, planner.estimate(new).makespan_s
        if faster > running * (1.0 - SPEED_UP_GAIN):
            return []
        if not self._pays_for(new, money, now):
            return []
        reason = f"ahead of plan: the budget left ends the {self.core.remaining} task(s) in {faster:.0f} s, not {running:.0f} s"
        self.reconfigurations.append({"at_s": now - (self.core.started_at or 0.0), "reason": reason, "machines": dict(new)})
        return [Notify(f"re-planned ({reason}): {_machines_text(new)}"), *self.move_to(new, now)]

    def _pays_for(self, new: Mapping[str, int], money: float, now: float) -> bool:
        """Whether ``money`` surely pays for moving up to ``new``, which keeps every machine up.
        What the faster plan saves on the machines up is not counted on: they are costed for the
        plan running now, the ones it adds for the new plan (boot and one more task included),
        every mean at the upper end of its interval."""
        upper_means, boots = self.policy._upper_means(now), self.policy._boot_times()
        upper = self._booted(self.policy._planner(self.core.remaining, upper_means))
        need, new_s = upper.estimate(self.config).cost, upper.estimate(new).makespan_s
        for name, n in new.items():
            added = n - self.config.get(name, 0)
            if added > 0:
                need += added * self.billings[name].cost(new_s + boots[name] + upper_means[name])
        return need <= money + 1e-9

    def _promised_end(self) -> float | None:
        """When the chosen option said the bag would be done (None before a choice)."""
        if self.selected is None or self.execution_started_at is None or self.selected.makespan_s <= 0:
            return None
        return self.execution_started_at + self.selected.makespan_s

    def _fleet_now(self, now: float) -> FleetNow:
        """What :meth:`_projected_s` reads of the run, whatever the configuration: (tasks, paid time
        left, boot times, runtime shapes, ready times). A catch-up projects two configurations
        at one moment; each walked every machine three times and sorted a million runtimes."""
        running = sum(m.running for m in self.core.live_machines())
        n = max(1, self._tasks_not_started() + (running + 1) // 2)
        up = self.policy._machines_up(now)
        return (n, self.policy._paid_left(now, up), self.policy._boot_times(), self.policy._shapes(),
                self.policy._ready_in(now, up))

    def _projected_s(self, planner: Planner, config: Mapping[str, int], now: float,
                     fleet_now: FleetNow | None = None) -> float:
        """How long from now ``config`` takes to end the tasks left, as the options count it
        (:func:`~..planning.paid_time.with_machines_up`): its machines up work at once (one
        still booting once its boot is over), the ones it adds after their cluster's boot, the
        machines marked for release until they go, each task its cluster's mean (a task running
        counts as half of one), and the end of the bag as the runtimes seen spread.
        ``fleet_now``: :meth:`_fleet_now` of this moment, when the caller has it already."""
        assert self.selected is not None
        n, paid, boots, shapes, ready = self._fleet_now(now) if fleet_now is None else fleet_now
        option = dataclasses.replace(self.selected, machines=dict(config), makespan_s=-1.0)
        made = with_machines_up(option, planner.clusters, n, paid, boots, shapes=shapes, ready_s=ready)
        return made.makespan_s if made.makespan_s >= 0 else math.inf

    def _catch_up(self, spent: float, now: float) -> list[c.Action]:
        """A run whose tasks take longer than its plan said ends late even when its money suffices
        (§3.1 re-plans for the money alone). When the configuration running would end the tasks
        left more than CATCH_UP_SLACK of the chosen makespan after the promised end, add the
        fewest machines that end them by it and that the money left pays (the accepted cushion
        included: it is the room for an estimate that was low); when none does, the fastest such
        addition, if it gains SPEED_UP_GAIN. Machines up are kept, so no running task is cut."""
        promised = self._promised_end()
        if not self.settings.catch_up or promised is None or self.budget is None or not any(self.config.values()):
            return []
        assert self.selected is not None
        if self.core.remaining < SPEED_UP_TASKS * sum(self.config.values()):
            return []  # near the end a few long tasks decide the makespan, not the machines
        planner = self.policy._planner(self.core.remaining)
        fleet_now = self._fleet_now(now)  # nothing changes between the two projections
        running = self._projected_s(planner, self.config, now, fleet_now)
        if now + running <= promised + CATCH_UP_SLACK * self.selected.makespan_s:
            return []
        money = self.budget + self.cushion - spent
        boot = max(self.policy._boot_times().values(), default=0.0)
        booted = self._booted(planner)
        new = booted.slowest_by(promised - now - boot, money, at_least=self.config)
        if new is None:
            new = booted.fastest_within(money)
            if new is None or any(new.get(name, 0) < n for name, n in self.config.items()):
                return []
        if new == self.config or self.core.remaining < SPEED_UP_TASKS * sum(new.values()):
            return []
        faster = self._projected_s(planner, new, now, fleet_now)
        if now + faster > promised and faster > running * (1.0 - SPEED_UP_GAIN):
            return []
        if not self._pays_for(new, money, now):
            return []
        reason = (f"behind plan: the {self.core.remaining} task(s) left would end {now + running - promised:.0f} s after "
                  f"the chosen makespan; {faster:.0f} s from now instead of {running:.0f} s")
        self.reconfigurations.append({"at_s": now - (self.core.started_at or 0.0), "reason": reason, "machines": dict(new)})
        return [Notify(f"re-planned ({reason}): {_machines_text(new)}"), *self.move_to(new, now)]

    def _replan_within(self, money: float, now: float, by: float | None = None) -> dict[str, int] | None:
        """The configuration a run short of money moves to: with room for the estimate's error,
        the slowest that the money left pays and that ends the tasks left ``by`` then (the
        chosen option's end), or the fastest the money pays when none does (or without ``by``).
        The configuration running is kept when it does both. Each cluster's mean is taken at
        the upper end of its confidence interval (``error_confidence``) for the cost; billed by
        the second or the minute the machines up are not priced their boot again
        (:meth:`_booted`), and a machine added is charged what its boot and one task more (tasks
        are whole) add to the ATUs the plan's makespan rounds up to: a run that is short of
        money does not spend it all on new machines the estimate only just pays. The makespans
        are the means' (the upper means' stretched back to them), so that the run moves to what
        ends on time, not to what would if every task took its upper mean."""
        if not math.isfinite(money):
            return self.policy._planner(self.core.remaining).fastest_within(money)
        upper, boots = self.policy._upper_means(now), self.policy._boot_times()
        planner = self._booted(self.policy._planner(self.core.remaining, upper))
        stretch = 1.0  # the upper means' makespans against the means'
        if by is not None and any(self.config.values()):
            plain_s = self.policy._planner(self.core.remaining).estimate(self.config).makespan_s
            stretch = planner.estimate(self.config).makespan_s / max(plain_s, 1e-9)
            # late by no more than a catch-up tolerates (the per-machine speeds the check measures
            # are noisy, and billed by the second the next configuration up is often twice as fast)
            slack = CATCH_UP_SLACK * self.selected.makespan_s if self.selected is not None else 0.0
            if now + plain_s <= by + slack and self._need(planner, self.config, upper, boots) <= money + 1e-9:
                return dict(self.config)
        deadline = None if by is None else (by - now - max(boots.values(), default=0.0)) * stretch
        limit = money
        for _ in range(8):
            config = planner.slowest_by(deadline, max(0.0, limit)) if deadline is not None and deadline > 0 else None
            if config is None:
                config = planner.fastest_within(max(0.0, limit))
            if config is None:
                return None
            need = self._need(planner, config, upper, boots)
            if need <= money + 1e-9:
                return config
            limit -= max(need - money, 1e-6 * max(1.0, money))
        return None

    @staticmethod
    def _booted(planner: Planner) -> Planner:
        """``planner`` as a re-plan sees the clusters billed by the second or the minute (an ATU
        of SHORT_ATU_S or less): their machines up have booted and paid their minimum charge, so
        the plan prices none of them a boot or a minimum again; what a machine the re-plan adds
        costs on top is :meth:`_need`'s. With longer ATUs a plan prices no boot anyway, and
        those clusters are left as they are. Pricing every machine's boot again made a
        re-plan of a fine-billed run short of money fall back to far fewer machines than the
        money left pays (35 to 2 on a heavy-tailed bag, which then ended 80 tasks short)."""
        if all(cl.atu_s > SHORT_ATU_S or (cl.boot_s == 0 and cl.min_charge_s == 0) for cl in planner.clusters):
            return planner
        clusters = [cl if cl.atu_s > SHORT_ATU_S else dataclasses.replace(cl, boot_s=0.0, min_charge_s=0.0)
                    for cl in planner.clusters]
        return Planner(clusters, planner.n_tasks, planner.max_machines)

    def _need(self, planner: Planner, config: Mapping[str, int], upper: Mapping[str, float],
              boots: Mapping[str, float]) -> float:
        """What ``config`` costs for the tasks left at ``planner``'s (upper) means, plus for each
        machine it adds the ATUs the plan leaves out: those its boot (billed by the second or
        the minute, where :meth:`_booted` priced none), its minimum charge and one task more
        carry it past the ATUs the plan's makespan rounds up to."""
        planned = planner.estimate(config)
        extra = 0.0
        for name, n in config.items():
            added = max(0, n - len(self.core.live_machines(name)) - self.core._requested[name])
            if added:
                billing, cluster = self.billings[name], planner.cluster(name)
                paid = planned.makespan_s + cluster.priced_overhead_s  # as the plan priced it
                boot = boots.get(name, 0.0) if cluster.atu_s <= SHORT_ATU_S else 0.0
                longer = billing.units(paid + boot + upper.get(name, 0.0))
                extra += added * billing.price * max(0, longer - cluster.units(paid))
        return planned.cost + extra

    def _release_plan(self, now: float, views: MachineTable | None = None) -> ReleasePlan:
        """plan_releases with money reserved up to the next ceiling check (plus the margin)."""
        assert self.budget is not None
        views = self._views(now) if views is None else views
        last = None
        if self.draining:  # a machine ending its last task is paid with what the plan's machines leave
            last = np.array([i in self.draining for i in views.machine], dtype=bool)
            views = dataclasses.replace(views, marked_for_release=views.marked_for_release & ~last)
        return plan_releases(views, self.billings, self.tau_e(),
                             self.budget - self._reserved_for_requested(), self.cushion,
                             spent_before=self._gone_spent(now), release_margin_s=self.settings.release_margin_s,
                             horizon_s=self._horizons, running_first=True, last=last)

    def enforce_budget(self, now: float, views: MachineTable | None = None) -> list[c.Action]:
        """Mark every machine whose next ATU(s) the money left cannot pay (plan_releases)."""
        self.last_ceiling = now
        if self.budget is None:
            return []
        for machine_id in sorted(self.draining):  # its task has run on past what it was worth
            m = self.core.machines[machine_id]
            if not self._drain_pays(m, now):
                self.draining.discard(machine_id)
                if m.release_at is not None and m.release_at <= now + 1e-9:
                    self.due_now.add(m.id)
        plan = self._release_plan(now, views)
        actions: list[c.Action] = []
        for due in plan.release:
            m = self.core.machines[due.machine]
            if m.release_at is None:
                actions.extend(self.mark(m, now, "the budget cannot pay its next ATU"))
            elif m.id in self.draining:  # the money no longer keeps it to the end of its task
                self.draining.discard(m.id)
                m.release_reason = "the budget cannot pay its next ATU"
                if m.release_at <= now + 1e-9:
                    self.due_now.add(m.id)
        return actions


class _TauE:
    """tau_e for monitoring: the sample tail of a cluster that has one, else the elapsed time."""

    def __init__(self, tail: TailEstimates | None) -> None:
        self.tail = tail

    def _known(self, cluster: str) -> bool:
        return self.tail is not None and cluster in self.tail.sorted_samples

    def __call__(self, cluster: str, elapsed: float) -> float:
        return self.tail(cluster, elapsed) if self._known(cluster) else max(float(elapsed), 0.0)  # type: ignore[misc]

    def many(self, cluster: str, elapsed: np.ndarray) -> np.ndarray:
        if self._known(cluster):
            return self.tail.many(cluster, elapsed)  # type: ignore[union-attr]
        return np.maximum(np.asarray(elapsed, dtype=float), 0.0)


def _machines_text(config: Mapping[str, int]) -> str:
    return ", ".join(f"{n} x {name}" for name, n in config.items() if n) or "no machines"


def _affordable(counts: dict[str, int], costs: Mapping[str, float], budget: float) -> dict[str, int]:
    """Up to ``counts`` machines per cluster whose ``costs`` (the ATUs each begins before the first
    check) fit ``budget``, one per cluster per round so that every cluster gets sampled if the money
    allows it."""
    given = {name: 0 for name in counts}
    left = budget
    progress = True
    while progress:
        progress = False
        for name, n in counts.items():
            cost = costs[name]
            if given[name] < n and cost <= left + 1e-9:
                given[name] += 1
                left -= cost
                progress = True
    return given
