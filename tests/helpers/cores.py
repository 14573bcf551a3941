"""A BaTS core fed by hand: two clusters whose numbers can be followed by hand (``a``: $1, 10 s a task;
``b``: $2, 5 s a task; at most 3 machines each, ATU 100 s), and a driver that reports each
task's end at the time its runtime says."""

from __future__ import annotations

import random
from pathlib import Path

from bats.common.config import ClusterConfig, SamplingConfig
from bats.master import core as c
from bats.master.core.bats import policy as b
from bats.master.core.bats.policy import BatsCore, BatsSettings
from bats.master.driver import Driver as BaseDriver
from bats.master.driver import carries_out

ROOT = Path(__file__).resolve().parents[2]


SAMPLING = SamplingConfig(initial_workers=2, error=0.4)


SETTINGS = BatsSettings(sampling=SAMPLING, monitor_interval_s=50.0, release_margin_s=10.0)


RUNTIMES = {"a": 10.0, "b": 5.0}


DONE_SAMPLING = "sampling done: released at the end of its ATU"


def two_clusters(a_max: int = 3, b_max: int = 3) -> dict[str, ClusterConfig]:
    return {"a": ClusterConfig("a", "local", max=a_max, price=1.0, atu_s=100.0),
            "b": ClusterConfig("b", "local", max=b_max, price=2.0, atu_s=100.0)}


def make_core(tasks: int = 30, clusters=None, settings_=SETTINGS, seed: int = 1) -> BatsCore:
    return BatsCore(range(1, tasks + 1), clusters or two_clusters(), random.Random(seed), settings_, max_held=1)


class Driver(BaseDriver):
    """Feeds a core by hand and keeps, per machine, the tasks it was sent with the time each will
    end (``runtimes[cluster]`` seconds each, as many at once as the machine has slots, one after
    the other beyond those); :meth:`step` reports the earliest."""

    def __init__(self, core: BatsCore, runtimes: dict[str, float] | None = None) -> None:
        self.core = core
        self.runtimes = dict(runtimes or RUNTIMES)
        self.running: dict[str, list[tuple[float, int, int]]] = {}
        self.actions: list[c.Action] = []
        self.now = 0.0
        BaseDriver.__init__(self)

    def feed(self, event) -> list:
        self.now = event.now
        actions = super().feed(event)
        self.actions.extend(actions)
        if isinstance(event, c.MachineLost):
            self.running.pop(event.machine, None)
        return actions

    @carries_out(c.Dispatch)
    def _dispatch(self, a: c.Dispatch) -> None:
        queue = self.running.setdefault(a.machine, [])
        slots = self.core.machines[a.machine].slots
        start = max(self.now, queue[-slots][0]) if len(queue) >= slots else self.now  # when a slot frees
        queue.append((start + self.runtimes[self.core.machines[a.machine].cluster], a.task, a.attempt))

    @carries_out(c.Cancel)
    def _cancel(self, a: c.Cancel) -> None:
        """The attempt stops (no result comes); the machine asks for another task, as a worker does."""
        queue = self.running.get(a.machine, [])
        self.running[a.machine] = [e for e in queue if (e[1], e[2]) != (a.task, a.attempt)]
        self.feed(c.WorkerAsked(self.now, a.machine, 1))

    @carries_out(c.Release)
    def _release(self, a: c.Release) -> None:
        self.running.pop(a.machine, None)

    @carries_out(c.Acquire, c.RecordResult, c.IgnoreResult, c.Finish, c.OfferOptions, c.WakeAt, c.Notify, c.WarnShort,
                 c.AskOffers)
    def _noted(self, a: c.Action) -> None:
        """The test reads these from the returned actions."""

    def up(self, now: float, *machines: str) -> list:
        """Machines acquired, booted and asking for a task; ``a1`` is of cluster ``a``."""
        actions = []
        for m in machines:
            slots = self.core.clusters[m[0]].slots or 1
            assert self.feed(c.MachineAcquired(now, m, m[0])) == []
            assert self.feed(c.MachineUp(now, m, slots)) == []
            actions += self.feed(c.WorkerAsked(now, m, slots))
        return actions

    def next_time(self) -> float | None:
        return min((q[0][0] for q in self.running.values() if q), default=None)

    def step(self) -> tuple[c.TaskFinished, list]:
        end, machine = min((q[0][0], m) for m, q in self.running.items() if q)
        _end, task, attempt = self.running[machine].pop(0)
        runtime = self.runtimes[self.core.machines[machine].cluster]
        event = c.TaskFinished(end, machine, task, attempt, 0, runtime)
        return event, self.feed(event)

    def until(self, done) -> tuple[c.TaskFinished, list]:
        while True:
            event, actions = self.step()
            if done():
                return event, actions

    def through(self, t: float) -> None:
        """Report every result due by ``t``."""
        while self.next_time() is not None and self.next_time() <= t:
            self.step()


def sampled(core: BatsCore | None = None, runtimes=None) -> tuple[Driver, c.TaskFinished, list]:
    """The standard run up to the result that ends sampling (a1's copy of the last replica, t=40)."""
    core = core or make_core()
    d = Driver(core, runtimes)
    assert d.feed(c.RunStarted(0.0)) == [c.Acquire("a", 2), c.Acquire("b", 2)]
    d.up(0.0, "a1", "a2", "b1", "b2")
    event, actions = d.until(lambda: core.phase != b.SAMPLING)
    return d, event, actions
