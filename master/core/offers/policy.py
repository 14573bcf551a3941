"""``--policy offers --deadline D``: the bag split across pools by composing their offers (seed 002).

How this works (seed ``002_afdcd27f04e6421a.txt`` §II Fig. 1, §III-A, §IV). :class:`OffersCore`
is the self-scheduling :class:`bats.master.core.base.Core` with the metascheduler's five steps; it is the
same I/O-free state machine (time on the events, randomness from the seeded RNG):

1. On ``RunStarted`` it answers :class:`AskOffers` (the bag's tasks, the estimated runtime per task
   from ``[policy.offers] task_runtime``, the time left to the deadline): step 1.
2. The driver asks every cluster's pool (a provisioner's ``offers()``; in ``bats-sim`` the EDF over
   the cluster's ``background_trace``, :mod:`bats.master.core.offers.generate`) and feeds back
   :class:`OffersMade` with every offer, completions in seconds from the question: steps 2-3. A
   pool that makes no offers gets no tasks.
3. :func:`bats.master.core.offers.compose.compose` picks the composite (step 4): OffersNoLB when the offers
   that meet the deadline cannot hold the bag, else OffersWithDPLB when the pools publish their
   capacity (``publish_capacity``: a cluster's capacity is its ``max`` × ``speed``), else
   OffersWithPLB. No composite covering the bag ends the run (incomplete) with a one-line reason.
4. Step 5: the pending tasks are shuffled with the RNG and each cluster gets its share, in config
   order; then each cluster is asked for ``min(share, max)`` machines (one slot each, as the
   offers were computed; under ``[master] max_machines`` the clusters take turns, and a cluster
   short of machines gets more when another cluster's machines are given back or lost). A machine takes tasks of its own cluster's share only (retries and
   tasks of a lost machine go back to the same share). A machine waiting in its pool's queue is
   not timed out before its pool's offered completion plus ``boot_timeout``. When a cluster has
   nothing left to hand out, its idle and still-queued machines are given back at once (a shared
   pool's slot is someone else's work).

A cluster whose machines keep being lost or refused keeps its share: the run ends incomplete when
no machine is left, as self-scheduling does. There is no budget: the report's ``offers`` holds the
offers, the composite, the tasks per cluster and whether the deadline was met.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bats.common.config import ClusterConfig, Config
from bats.common.durations import format_duration

from ... import core as c
from ..actions import AskOffers, Notify
from ..base import handles
from ..billing import EPS as _EPS
from ..events import OffersMade
from ..view import CoreView
from .compose import Composite, Offer, compose

log = logging.getLogger(__name__)
SHARE_DONE = "its pool's share of the bag is done"


@dataclass(frozen=True)
class OffersSettings:
    deadline_s: float  # from the start of the run
    task_runtime_s: float
    publish_capacity: bool = False

    @classmethod
    def from_config(cls, config: Config, deadline_s: float) -> OffersSettings:
        runtime = config.policy.offers.task_runtime_s
        if runtime is None:
            raise ValueError(f"{config.source}: [policy.offers] task_runtime: required with --policy offers "
                             "(the estimated runtime of one task, told to the pools)")
        return cls(deadline_s, runtime, config.policy.offers.publish_capacity)


def offers_config(config: Config, *, task_runtime_s: float, publish_capacity: bool = False) -> Config:
    """``config`` with ``[policy.offers]`` set (for scripts that build configs, as bench/compare.py)."""
    offers = dataclasses.replace(config.policy.offers, task_runtime_s=task_runtime_s,
                                 publish_capacity=publish_capacity)
    return dataclasses.replace(config, policy=dataclasses.replace(config.policy, offers=offers))


class OffersCore(c.Core):
    """Seed 002's metascheduler; see the module docstring."""

    name = "offers"

    def view(self) -> CoreView:
        return CoreView(policy=self.name, deadline_s=self.settings.deadline_s)

    def __init__(self, task_ids: Iterable[int], clusters: dict[str, ClusterConfig], rng: random.Random,
                 settings: OffersSettings, **kwargs: Any) -> None:
        super().__init__(task_ids, clusters, rng, **kwargs)
        self.settings = settings
        self.offers: tuple[Offer, ...] = ()
        self.composite: Composite | None = None
        self.asked_at: float | None = None
        self._share: dict[str, array] = {name: array("l") for name in clusters}
        self._owner: dict[int, str] = {}
        self._boot_limit: dict[str, float] = {}  # cluster -> a queued machine is timed out after this

    # ------------------------------------------------------------ steps 1-4
    def _initial_acquisitions(self, now: float) -> list[c.Action]:
        self.asked_at = now
        left = self.settings.deadline_s
        return [AskOffers(self.remaining, self.settings.task_runtime_s, left)]

    def capacity(self) -> dict[str, float] | None:
        if not self.settings.publish_capacity:
            return None
        return {name: cl.max * cl.speed for name, cl in self.clusters.items()}

    @handles(OffersMade)
    def _on_offers_made(self, ev: OffersMade) -> list[c.Action]:
        if self.composite is not None or self.asked_at is None:
            return []
        usable = tuple(o for o in ev.offers if o.pool in self.clusters and self.clusters[o.pool].max > 0
                       and o.tasks > 0)
        self.offers = usable
        log.debug("offers made: %s", usable)
        left = self.settings.deadline_s - (ev.now - self.asked_at)
        composite = compose(usable, self.remaining, left, self.capacity()) if self.remaining else None
        if composite is None:
            offered = ", ".join(f"{o.pool} {o.tasks} by {format_duration(o.completion)}" for o in usable) or "none"
            self.finished = c.Finish("incomplete", f"offers: no composition of the pools' offers covers the "
                                                   f"{self.remaining} tasks (offers: {offered})")
            return [self.finished]
        self.composite = composite
        return self._assign(composite, ev.now)

    def _assign(self, composite: Composite, now: float) -> list[c.Action]:
        tasks = sorted(self._pending)
        self.rng.shuffle(tasks)
        self._pending = array("l")
        start = 0
        actions: list[c.Action] = [Notify(self.describe())]
        by_pool = {o.pool: o for o in composite.offers}
        for name in self.clusters:
            n = composite.assigned.get(name, 0)
            if n <= 0:
                continue
            share = tasks[start:start + n]
            start += n
            self._share[name] = array("l", share)
            for task in share:
                self._owner[task] = name
            self._boot_limit[name] = now + by_pool[name].completion + self.boot_timeout_s
        assert start == len(tasks), "the composite assigns every task once"
        return actions + self._top_up()

    def _top_up(self) -> list[c.Action]:
        """Machines for every cluster with tasks left, up to min(its tasks left, its max); under
        ``[master] max_machines`` one cluster at a time in turn, so every share gets machines."""
        want = {}
        for name, cl in self.clusters.items():
            left = self._left_for(name)  # to hand out: tasks held are on machines already
            have = len(self.live_machines(name)) + self._requested[name]
            if left > 0 and self._lost_in_a_row[name] < c.GIVE_UP_AFTER:
                want[name] = max(0, min(cl.max, left) - have)
        give = dict.fromkeys(want, 0)
        allowed = self.machines_allowed()
        while allowed > 0 and any(give[n] < want[n] for n in want):
            for name in want:
                if allowed > 0 and give[name] < want[name]:
                    give[name] += 1
                    allowed -= 1
        actions: list[c.Action] = []
        for name, n in give.items():
            if n > 0:
                self._requested[name] += n
                actions.append(c.Acquire(name, n))
        return actions

    def describe(self) -> str:
        comp = self.composite
        if comp is None:
            return "offers: no composite"
        parts = ", ".join(f"{n} to {pool}" for pool, n in comp.assigned.items())
        met = "meets" if comp.completion <= self.settings.deadline_s + _EPS else "cannot meet"
        return (f"offers composed by {comp.policy}: {parts}; the pools offered completion in "
                f"{format_duration(comp.completion)}, which {met} the deadline "
                f"{format_duration(self.settings.deadline_s)}")

    # ------------------------------------------------------------ step 5: each cluster its share
    def _left_for(self, cluster: str) -> int:
        return len(self._share[cluster]) + sum(1 for task, _m in self._retry if self._owner.get(task) == cluster)

    def _next_task(self, machine: c.Machine) -> int | None:
        name = machine.cluster
        if self._retry:
            mine = [(k, t, m) for k, (t, m) in enumerate(self._retry) if self._owner.get(t) == name]
            alone = len(self.live_machines(name)) <= 1
            for k, task, failed_on in mine:
                if failed_on != machine.id or alone:
                    self._retry.pop(k)
                    return task
        share = self._share[name]
        if not share:
            return None
        index = self.rng.randrange(len(share))
        task = share[index]
        share[index] = share[-1]
        share.pop()
        return task

    def _return_task(self, task: int, attempt: int, machine: c.Machine) -> None:
        self._status[task] = c.PENDING
        self._share[self._owner.get(task, machine.cluster)].append(task)

    def _better_left_for_an_idle_machine(self, machine: c.Machine) -> bool:
        name = machine.cluster
        available = self._left_for(name)
        # the cluster's machines not gone that hold nothing, this one left out (it holds tasks)
        idle = self._free.idle.get(name, 0) - (machine.tally is not None and not machine.held)
        return available <= idle

    def _feed_hungry(self) -> list[c.Action]:
        actions: list[c.Action] = []
        for machine_id in list(self._hungry):
            m = self.machines[machine_id]
            if self._left_for(m.cluster):
                actions.extend(self._feed(m))
        return actions

    def _feed(self, machine: c.Machine) -> list[c.Action]:
        actions = super()._feed(machine)
        if self.composite is not None and self.remaining > 0 and not self._left_for(machine.cluster):
            actions.extend(self._give_back(machine.cluster))
        return actions

    def _give_back(self, cluster: str) -> list[c.Action]:
        """Nothing left to hand out on ``cluster``: its idle and queued machines go back to the pool."""
        actions: list[c.Action] = []
        for m in self.live_machines(cluster):
            if not m.held:
                actions.append(c.Release(m.id, SHARE_DONE))
                self._retire(m, self._now, SHARE_DONE)
        if actions and self.max_machines is not None:  # slots under the overall limit for the other shares
            actions.extend(self._top_up())
        return actions

    def _replace_lost(self, machine: c.Machine, now: float) -> list[c.Action]:
        return self._top_up() if self.composite is not None else []

    def _on_tick(self, ev: c.Tick) -> list[c.Action]:
        """Boot timeouts, counted for a pool's machines from its offered completion on."""
        actions: list[c.Action] = []
        for m in list(self.machines.values()):
            if m.state is not c.MachineState.BOOTING:
                continue
            limit = self._boot_limit.get(m.cluster)
            late = ev.now > limit if limit is not None else ev.now - m.acquired_at > self.boot_timeout_s
            if late:
                actions.append(c.Release(m.id, "boot timeout"))
                actions.extend(self._on_machine_lost(c.MachineLost(ev.now, m.id, "boot timeout")))
        return actions

    # ------------------------------------------------------------ report
    def report(self, now: float) -> dict:
        figures = super().report(now)
        figures["policy"] = "offers"
        comp = self.composite
        done_by: dict[str, int] = {}
        for m in self.machines.values():
            done_by[m.cluster] = done_by.get(m.cluster, 0) + m.nt
        met = None
        if self.remaining == 0 and self.last_finish_at is not None and self.started_at is not None:
            met = self.last_finish_at - self.started_at <= self.settings.deadline_s + _EPS
        figures["offers"] = {
            "deadline_s": self.settings.deadline_s,
            "task_runtime_s": self.settings.task_runtime_s,
            "publish_capacity": self.settings.publish_capacity,
            "offers": [{"pool": o.pool, "tasks": o.tasks, "completion_s": o.completion} for o in self.offers],
            "composite": None if comp is None else {
                "policy": comp.policy, "assigned": dict(comp.assigned), "completion_s": comp.completion},
            "task_runs_by_cluster": done_by,
            "met": met,
        }
        return figures
