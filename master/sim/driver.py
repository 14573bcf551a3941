"""The virtual-time driver: the same :class:`bats.master.core.base.Core` as ``bats-master``, run against
simulated machines (the ``bats-sim`` command, :mod:`bats.master.cli.sim`, runs it).

How this works. Time is a number that jumps from one scheduled happening to the next: a heap of
``(time, sequence, kind, …)`` entries, the sequence making equal times pop in the order they were
scheduled, so a run is a pure function of its inputs and seed. The driver feeds the core the same
events the ZeroMQ server feeds it and carries out its actions, nothing more; the scheduling policy
lives in the core alone.

- ``Acquire(cluster, n)``: n simulated machines ``CLUSTER-s1-K`` appear at once (the core hears
  ``MachineAcquired`` now, billing starts); each boots for the cluster's ``startup`` (default 0)
  and then does what a real worker does: says hello (``MachineUp``) and asks for 1 + prefetch tasks
  (``WorkerAsked(n=core.max_held)``).
- ``Dispatch(machine, task, attempt)``: the machine runs up to its cluster's ``slots`` tasks at
  once (1 unless configured; ``auto`` counts as 1 here), the others in the order they arrive. A
  task's runtime there is its base runtime divided by the cluster's speed, times the cluster's
  ``contention`` share for the slots busy when it starts: 1 alone, ``contention`` when it fills the
  last free slot, linear in between (slots share a machine's cores, memory and disk). Its
  ``TaskFinished`` (exit 0, ``ask=True``) is scheduled when it starts, which is at once on a free
  slot, or when a task before it ends (a prefetched task starts the moment a slot frees, before the
  master's reply to that result arrives, as in a real worker).
- ``Cancel(machine, task, attempt)``: the attempt stops (its result never comes) or leaves the
  machine's queue; the machine starts its next queued task, if any, and asks for one more task
  (``WorkerAsked(n=1)``), as a worker does.
- ``Release(machine)``: the machine vanishes; its entries still in the heap are skipped when they
  come up (a task it was running was already put back by the core).
- ``Finish``: the run ends at the current virtual time.
- ``Tick`` every ``tick_s`` virtual seconds (default 60), so time-based core logic (boot timeouts,
  later BaTS's monitoring) runs. If nothing but ticks is left to happen for longer than the longest
  boot timeout or ATU, the run cannot progress: the driver feeds ``StopRequested``.

Shared pools (seed 002): a cluster with a ``background_trace`` is a pool of ``max`` slots that its
own users' jobs (the trace) share with the run's machines, scheduled Earliest Deadline First by
:class:`bats.master.core.offers.generate.EdfPool`. An ``Acquire`` there queues one job of one slot per machine
(due at the ``--deadline`` of an offers run, else after the pool's own jobs); each starts when the
pool gives it a slot, then boots for ``startup``; a release frees the slot (or withdraws the job).
``c.AskOffers`` (``--policy offers``) is answered from each cluster's pool as it stands (the jobs it
knows, not those still to come; a cluster without a trace is an idle pool of ``max`` slots) by
:func:`bats.master.core.offers.generate.generate_offers`, the task runtime divided by the cluster's speed.

Fault injection (:class:`SimFaults`, for property tests): each acquired machine fails to boot
with probability ``boot_fail_rate`` (it never says hello; the core's boot timeout gives it up), and
each machine that boots is lost with probability ``loss_rate`` at a uniformly drawn moment within
``loss_within_s`` of its boot (the core hears ``MachineLost``), from a stream of its own seeded
with ``seed``. Price spikes need nothing new: a cluster's ``price_trace`` moves its price.

Base runtimes are drawn once per task (a task takes the same time wherever it runs, scaled by the
speed) by :mod:`bats.master.sim.runtimes` from a numpy ``Generator`` seeded with ``--seed``; the core
gets its own ``random.Random(seed)``; simulated failures (``--fail-rate``) a third stream. Same seed,
same report, byte for byte.

A cluster's speed is its ``speed`` key when that is not 1, else ``1 / slowdown`` for a cluster
whose provisioner has a ``slowdown`` option (the local emulator), else 1.

Per task the driver costs one heap push and pop, one ``TaskFinished`` and the dispatch of the
core's actions; a million tasks on a thousand machines take well under a minute.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bats.common.config import ClusterConfig, Config

from .. import core as c
from ..choosing import Offering
from ..core.bats.settings import Choice
from ..core.offers.generate import (
    EdfPool,
    PoolJob,
    background_job,
    generate_offers,
    pool_at,
)
from ..core.registry import build_core
from ..driver import Driver, carries_out

if TYPE_CHECKING:
    from .runtimes import RuntimeDistribution

log = logging.getLogger("bats.sim")

DEFAULT_TICK_S = 60.0
_TASK_DONE, _BOOTED, _TICK, _WAKE, _PRICE, _POOL, _LOST = 0, 1, 2, 3, 4, 5, 6  # heap entry kinds
# A task's end sorts before anything else due at the same instant (its sequence number less this):
# a task that ends at the very moment its machine is let go, or a check falls, has ended by then,
# as the plan counted it (the runtimes a simulation draws often fall on such instants exactly)
_ENDS_FIRST = 1 << 62


@dataclass(frozen=True)
class SimFaults:
    """Machines that fail: see the module docstring."""

    boot_fail_rate: float = 0.0
    loss_rate: float = 0.0
    loss_within_s: float = 3600.0
    seed: int = 0


def cluster_speed(cluster: ClusterConfig) -> float:
    """Runtimes on this cluster are base runtimes divided by this (see the module docstring)."""
    if cluster.speed != 1.0:
        return cluster.speed
    return 1.0 / float(cluster.options.get("slowdown", 1.0))


def cluster_startup(cluster: ClusterConfig) -> float:
    """Seconds from acquisition to the worker's hello."""
    return float(cluster.options.get("startup", 0.0))


class SimMachine:
    """A simulated machine: the tasks it holds and whether it is running one."""

    __slots__ = ("cluster", "contention", "current", "gone", "id", "queue", "slots", "speed")

    def __init__(self, machine_id: str, cluster: str, speed: float, slots: int = 1, contention: float = 1.0) -> None:
        self.id = machine_id
        self.cluster = cluster
        self.speed = speed
        self.slots = slots
        self.contention = contention
        self.queue: deque[tuple[int, int]] = deque()  # (task, attempt) waiting for a slot
        self.current: set[tuple[int, int]] = set()  # (task, attempt) running
        self.gone = False

    @property
    def running(self) -> bool:
        """Whether every slot is busy (a new task waits)."""
        return len(self.current) >= self.slots

    def stop_all(self) -> None:
        self.current.clear()
        self.queue.clear()


class Simulator(Driver):
    """Runs a core in virtual time; see the module docstring.

    ``runtimes[task]`` is the base runtime of ``task`` (index 0 unused: task ids are 1..N, as the
    line numbers of a bag)."""

    def __init__(
        self,
        core: c.Core,
        config: Config,
        runtimes: Sequence[float],
        *,
        tick_s: float = DEFAULT_TICK_S,
        fail_rate: float = 0.0,
        fail_rng: random.Random | None = None,
        session: int = 1,
        choice: Choice | None = None,
        faults: SimFaults | None = None,
    ) -> None:
        if tick_s <= 0:
            raise ValueError("tick_s must be > 0")
        self.core = core
        self.config = config
        self.runtimes = runtimes
        self.tick_s = tick_s
        self.fail_rate = fail_rate
        self._fail_random = (fail_rng or random.Random(0)).random
        self.session = session
        self.choice = choice or Choice(policy="self")
        self.now = 0.0
        self.finish: c.Finish | None = None
        self.machines: dict[str, SimMachine] = {}
        self.events = 0  # core events fed
        self.recorded = 0  # RecordResult actions
        self.duplicates = 0  # a task recorded more than once (a core bug; tests check it stays 0)
        self._seen = bytearray(len(runtimes))
        self._heap: list[tuple] = []
        self._seq = itertools.count()
        self._serial = {name: 0 for name in config.clusters}
        self._speed = {name: cluster_speed(cl) for name, cl in config.clusters.items()}
        self._startup = {name: cluster_startup(cl) for name, cl in config.clusters.items()}
        self._price = {name: cl.price for name, cl in config.clusters.items()}
        self.interrupted = 0  # spot machines lost to a price above their bid
        self._pools = {name: pool_at(cl.max, [background_job(j.submit_s, j.slots, j.runtime_s) for j in cl.background], 0.0)
                       for name, cl in config.clusters.items() if cl.background is not None}
        self._pool_next: dict[str, float] = {}
        view = core.view()  # an offers run's pool jobs are due at its deadline
        self._pool_due = view.deadline_s if view.policy == "offers" and view.deadline_s is not None else math.inf
        self.faults = faults or SimFaults()
        self._fault_random = random.Random(f"bats-sim machine faults {self.faults.seed}").random
        self.boot_failures = 0  # machines that never booted (fault injection)
        self.losses = 0  # machines lost (fault injection)
        self._real = 0  # heap entries that are not ticks
        longest = max([config.master.boot_timeout_s, core.boot_timeout_s]
                      + [cl.atu_s for cl in config.clusters.values()])
        self._stall_limit = longest + tick_s
        self._stalled_since: float | None = None
        Driver.__init__(self)

    # ------------------------------------------------------------ the loop
    def run(self) -> c.Finish:
        """Run until the core finishes; returns its :class:`~bats.master.core.base.Finish`."""
        heap = self._heap
        pop = heapq.heappop
        handle = self.handle  # the base driver times the planning step
        carry_out = self.carry_out
        finished_event = c.TaskFinished
        fail_rate, fail_random = self.fail_rate, self._fail_random
        for name in self._pools:
            self._pool_schedule(name)
        self._feed(c.RunStarted(0.0))
        self._push_tick(1)
        for name, cluster in self.config.clusters.items():  # spot prices move as their traces say
            trace = cluster.price_trace
            for offset, price in zip(trace.offsets, trace.prices) if trace is not None else ():
                heapq.heappush(heap, (offset, next(self._seq), _PRICE, name, price))
        events = 0
        while self.finish is None:
            if not heap:  # cannot happen while ticks run; kept as a guard
                self._feed(c.StopRequested(self.now, "simulation has nothing left to do"))
                break
            entry = pop(heap)
            now = self.now = entry[0]
            kind = entry[2]
            if kind == _TASK_DONE:
                self._real -= 1
                _t, _s, _k, machine, task, attempt, runtime = entry
                if machine.gone or (task, attempt) not in machine.current:  # released, or the attempt was stopped
                    continue
                machine.current.discard((task, attempt))
                queue = machine.queue
                if queue:  # the prefetched task starts now, before the master answers this result
                    self._start(machine, *queue.popleft())
                code = 1 if fail_rate and fail_random() < fail_rate else 0
                events += 1
                carry_out(handle(finished_event(now, machine.id, task, attempt, code, runtime)))
            elif kind == _WAKE:
                self._feed(c.Tick(now))
            elif kind == _PRICE:
                self._price_changed(entry[3], entry[4])
            elif kind == _POOL:
                self._real -= 1
                name = entry[3]
                if self._pool_next.get(name) == now:
                    del self._pool_next[name]
                    self._pools[name].advance(now)
                    self._pool_started(name)
                    self._pool_schedule(name)
            elif kind == _LOST:
                self._real -= 1
                machine = entry[3]
                if machine.gone:
                    continue
                machine.gone = True
                machine.stop_all()
                self.losses += 1
                self._feed(c.MachineLost(now, machine.id, "machine lost (fault injection)"))
            elif kind == _BOOTED:
                self._real -= 1
                machine = entry[3]
                if machine.gone:
                    continue
                self._feed(c.MachineUp(now, machine.id, machine.slots))
                self._feed(c.WorkerAsked(now, machine.id, machine.slots - 1 + self.core.max_held))
            else:
                self._feed(c.Tick(now))
                if self.finish is None:
                    self._check_stall(now)
                if self.finish is None:
                    self._push_tick(entry[3] + 1)
        self.events += events
        assert self.finish is not None
        return self.finish

    def _feed(self, event: c.Event) -> None:
        self.events += 1
        self.carry_out(self.handle(event))

    def _push_tick(self, k: int) -> None:
        heapq.heappush(self._heap, (k * self.tick_s, next(self._seq), _TICK, k))

    def _check_stall(self, now: float) -> None:
        if self._real > 0:
            self._stalled_since = None
            return
        if self._stalled_since is None:
            self._stalled_since = now
        elif now - self._stalled_since > self._stall_limit:
            log.warning("virtual time %.0fs: nothing left to happen for %.0fs and the core has not "
                        "finished; stopping", now, now - self._stalled_since)
            self._feed(c.StopRequested(now, "simulation stalled: nothing left to happen"))

    def _start(self, machine: SimMachine, task: int, attempt: int) -> None:
        machine.current.add((task, attempt))
        runtime = self.runtimes[task] / machine.speed
        if machine.slots > 1 and machine.contention != 1.0:
            runtime *= 1.0 + (machine.contention - 1.0) * (len(machine.current) - 1) / (machine.slots - 1)
        heapq.heappush(self._heap, (self.now + runtime, next(self._seq) - _ENDS_FIRST, _TASK_DONE, machine, task,
                                    attempt, runtime))
        self._real += 1

    # ------------------------------------------------------------ actions
    @carries_out(c.Dispatch)
    def _do_dispatch(self, action: c.Dispatch) -> None:
        machine = self.machines[action.machine]
        if machine.running:
            machine.queue.append((action.task, action.attempt))
        else:
            self._start(machine, action.task, action.attempt)

    @carries_out(c.Cancel)
    def _do_cancel(self, action: c.Cancel) -> None:
        machine = self.machines.get(action.machine)
        if machine is None or machine.gone:
            return
        key = (action.task, action.attempt)
        if key in machine.current:  # its heap entry is skipped when it comes up
            machine.current.discard(key)
            if machine.queue:
                self._start(machine, *machine.queue.popleft())
        elif key in machine.queue:
            machine.queue.remove(key)
        else:
            return
        self._feed(c.WorkerAsked(self.now, machine.id, 1))

    @carries_out(c.RecordResult)
    def _do_record(self, action: c.RecordResult) -> None:
        self.recorded += 1
        if self._seen[action.task]:
            self.duplicates += 1
        self._seen[action.task] = 1

    def _price_changed(self, name: str, price: float) -> None:
        """A trace row: the core hears the new price; with a bid below it, the cluster's machines
        are interrupted (seed 003 §3: a spot instance is lost when the price rises above its bid)."""
        self._price[name] = price
        self._feed(c.PriceChanged(self.now, name, price))
        bid = self.config.clusters[name].bid
        if bid is None or price <= bid or self.finish is not None:
            return
        for machine in list(self.machines.values()):
            if machine.cluster == name and not machine.gone:
                machine.gone = True
                machine.stop_all()
                self.interrupted += 1
                self._feed(c.MachineLost(self.now, machine.id, f"spot interruption: price {price:g} above bid {bid:g}"))

    @carries_out(c.Acquire)
    def _do_acquire(self, action: c.Acquire) -> None:
        name = action.cluster
        bid = self.config.clusters[name].bid
        if bid is not None and self._price[name] > bid:  # a spot request above the bid is not filled
            self._feed(c.AcquireFailed(self.now, name, action.n, "spot price above the bid"))
            return
        speed, ready_at = self._speed[name], self.now + self._startup[name]
        cluster = self.config.clusters[name]
        slots, contention = cluster.slots or 1, cluster.contention
        pool = self._pools.get(name)
        for _ in range(action.n):
            self._serial[name] += 1
            machine = SimMachine(f"{name}-s{self.session}-{self._serial[name]}", name, speed, slots, contention)
            self.machines[machine.id] = machine
            self._feed(c.MachineAcquired(self.now, machine.id, name))
            if pool is not None:  # a job in the pool's queue; it boots when the pool starts it
                pool.submit(PoolJob(self.now, 1, math.inf, self._pool_due, 1, machine.id))
                continue
            faults, chance = self.faults, self._fault_random
            if faults.boot_fail_rate and chance() < faults.boot_fail_rate:
                self.boot_failures += 1  # never says hello: the core's boot timeout gives it up
                continue
            heapq.heappush(self._heap, (ready_at, next(self._seq), _BOOTED, machine))
            self._real += 1
            if faults.loss_rate and chance() < faults.loss_rate:
                lost_at = ready_at + chance() * faults.loss_within_s
                heapq.heappush(self._heap, (lost_at, next(self._seq), _LOST, machine))
                self._real += 1
        if pool is not None:
            self._pool_started(name)
            self._pool_schedule(name)
        log.debug("t=%.1f cluster %s: acquired %d machine(s)", self.now, name, action.n)

    @carries_out(c.Release)
    def _do_release(self, action: c.Release) -> None:
        machine = self.machines.get(action.machine)
        if machine is not None:
            machine.gone = True
            machine.stop_all()
            pool = self._pools.get(machine.cluster)
            if pool is not None and pool.release(machine.id):
                self._pool_started(machine.cluster)
                self._pool_schedule(machine.cluster)
        log.debug("t=%.1f released %s: %s", self.now, action.machine, action.reason)

    # ------------------------------------------------------------ shared pools (seed 002)
    def _pool_schedule(self, name: str) -> None:
        """A heap entry for the pool's next end or arrival (one at a time; a later one is stale)."""
        t = self._pools[name].next_event()
        if t is None or self._pool_next.get(name) == t:
            return
        self._pool_next[name] = t
        heapq.heappush(self._heap, (t, next(self._seq), _POOL, name))
        self._real += 1

    def _pool_started(self, name: str) -> None:
        """The run's machines the pool started: they boot now."""
        pool = self._pools[name]
        started, pool.started = pool.started, []
        for _t, tag in started:
            machine = self.machines.get(tag)
            if machine is not None and not machine.gone:
                heapq.heappush(self._heap, (self.now + self._startup[name], next(self._seq), _BOOTED, machine))
                self._real += 1

    @carries_out(c.AskOffers)
    def _do_ask_offers(self, action: c.AskOffers) -> None:
        """Every cluster's pool answers from the jobs it knows now (see the module docstring)."""
        offers = []
        for name, cl in self.config.clusters.items():
            if cl.max <= 0:
                continue
            pool = self._pools.get(name)
            if pool is not None:
                pool.advance(self.now)
            state = pool if pool is not None else EdfPool(cl.max, self.now)
            offers += generate_offers(name, state, action.tasks, action.task_runtime_s / self._speed[name],
                                      action.deadline_s)
        self._feed(c.OffersMade(self.now, tuple(offers)))

    @carries_out(c.IgnoreResult)
    def _do_ignore(self, action: c.IgnoreResult) -> None:
        log.debug("ignored result of task %d from %s: %s", action.task, action.machine, action.reason)

    @carries_out(c.Finish)
    def _do_finish(self, action: c.Finish) -> None:
        self.finish = action

    @carries_out(c.OfferOptions)
    def _do_offer(self, action: c.OfferOptions) -> None:
        """The options are ready: the choice flags answer at once (virtual time does not wait)."""
        core = self.core
        assert isinstance(core, Offering)
        if self.choice.plan_only:
            self._feed(c.StopRequested(self.now, "stopped after the options (--plan-only)"))
            return
        try:
            option = core.choose(self.choice.schedule or "fastest")  # no schedule: the API's default
        except ValueError as exc:  # an option id not offered, a budget no option fits
            self._feed(c.StopRequested(self.now, f"--schedule {self.choice.schedule}: {exc}"))
            return
        log.info("t=%.1f chose option %d (%s)", self.now, option.id, option.label)
        self._feed(c.ScheduleChosen(self.now, option, self.choice.cushion))

    @carries_out(c.WakeAt)
    def _do_wake(self, action: c.WakeAt) -> None:
        if action.at > self.now:
            heapq.heappush(self._heap, (action.at, next(self._seq), _WAKE))

    @carries_out(c.Notify)
    def _do_notify(self, action: c.Notify) -> None:
        log.info("t=%.1f %s", self.now, action.message)

    @carries_out(c.WarnShort)
    def _do_warn_short(self, action: c.WarnShort) -> None:
        """The early warning: nobody to ask in virtual time, so ``--when-short`` answers."""
        log.info("t=%.1f %s", self.now, action.message)
        if self.choice.when_short == "stop":
            self._feed(c.StopRequested(self.now, f"stopped by --when-short stop: {action.message}"))

    # ------------------------------------------------------------ the report
    def report(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The run's report in ``bats-master``'s report.json structure (no wall-clock fields, so
        the same seed gives the same report)."""
        assert self.finish is not None, "run() first"
        figures = self.core.report(self.now)
        machines = [{**m, "session": self.session} for m in figures["machines"]]
        by_cluster = {name: 0.0 for name in self.config.clusters}
        for m in machines:
            by_cluster[m["cluster"]] += m["cost"]
        bats = {key: value for key, value in figures.items()
                if key not in ("tasks", "makespan_s", "cost", "machines")}
        return {
            "status": self.finish.status,
            "reason": self.finish.reason,
            "simulated": True,
            **(extra or {}),
            "tasks": figures["tasks"],
            "started_at": 0.0,
            "finished_at": self.now,
            "makespan_s": figures["makespan_s"],
            "cost": {**figures["cost"], "by_cluster": by_cluster},
            **bats,
            "clusters": {
                name: {"provisioner": cl.provisioner, "max": cl.max, "price": cl.price, "atu_s": cl.atu_s,
                       "slots": cl.slots or 1, "speed": self._speed[name], "startup_s": self._startup[name]}
                for name, cl in self.config.clusters.items()
            },
            "machines": machines,
            "sim": {"events": self.events, "tick_s": self.tick_s, "fail_rate": self.fail_rate,
                    "spot_interruptions": self.interrupted},
        }


def simulate(config: Config, tasks: int, runtimes: RuntimeDistribution, seed: int, *, retries: int = 0,
             tick_s: float = DEFAULT_TICK_S, fail_rate: float = 0.0, choice: Choice | None = None,
             faults: SimFaults | None = None, simulator: type[Simulator] | None = None) -> Simulator:
    """Build a core and a simulator for ``tasks`` tasks with runtimes drawn from the distribution
    ``runtimes`` (:func:`bats.master.sim.runtimes.parse_runtimes`), run it, return the simulator.
    ``choice`` selects the policy and answers the options (default: self-scheduling);
    ``simulator``: a :class:`Simulator` subclass to run (e.g. one that times the core's steps)."""
    import numpy as np

    choice = choice or Choice(policy="self")
    base = runtimes.sample(np.random.default_rng(seed), tasks)
    core = build_core(range(1, tasks + 1), config, random.Random(seed), choice, retries=retries,
                        boot_timeout_s=config.master.boot_timeout_s, max_held=config.master.worker_capacity,
                        adaptive_prefetch=config.master.prefetch is None)
    sim = (simulator or Simulator)(core, config, [0.0, *base.tolist()], tick_s=tick_s, fail_rate=fail_rate,
                    fail_rng=random.Random(f"bats-sim failures {seed}"), choice=choice, faults=faults)
    sim.run()
    return sim
