"""``--policy adaptive``: seed 001's heuristic for how many hosts a bag needs (§4, Fig. 3).

How this works (seed ``001_43057d4a644d0cd2.txt`` §4, Fig. 3a/3b). :class:`AdaptiveCore` is the
self-scheduling :class:`bats.master.core.base.Core` with the paper's host policy, on one cluster (the
paper's single host type: ``[policy.adaptive] cluster``, default the cheapest per ATU). It is the
same I/O-free state machine: time comes in on the events, randomness from the seeded RNG.

* One host first; tasks are handed out in random order (the core's bag is random already), so the
  running average converges early (§4: "by randomly selecting the tasks ...").
* Fig. 3a, on every result: ``tasksAverageTime`` = the finished tasks' total runtime / their number;
  ``possibleTasks`` = what every host (booting or up, and those asked for) can still finish before
  its window ends, at that average (a running task counts from its start); then
  ``necessaryComputers = round((remainingTasks - possibleTasks) * avg / hostProcessingTime)``.
  When some tasks are left that the hosts cannot do, ``int(necessary * creationRatio) + 1`` hosts
  are created (``necessary`` when the ratio has reached 1), never more than the cluster's ``max``,
  ``[master] max_machines`` or the tasks left over. We read the pseudocode's ``necessary >= 0`` as
  "tasks are left over": taken literally it creates a host on every result even with nothing to do.
  After each result ``creationRatio += (1 - creationRatio) * increaseRatio`` (line 18), so the
  damping fades as the average settles (conservative 0.5/0.5, aggressive 0.75/0.75, §5).
* Fig. 3b, every monitoring interval: the average elapsed time of the running tasks; when it is
  above the finished average (or nothing has finished yet), the average becomes the combined one,
  (running elapsed + finished runtimes) / (running + finished), and the hosts are recomputed as in
  3a: a first task that takes long still brings more hosts.
* Each host works for ``host_processing_time`` of each charging unit (default the cluster's ATU:
  "pay the minimum") and is terminated just before the unit ends (the release margin before its
  ATU edge, or at the end of its processing time when that is shorter). It takes no task it is not
  expected to finish by then. When it comes to its end while tasks are left that the other hosts
  cannot do, it is kept for another charging unit instead of being replaced by a new host the next
  result would create (the same money, without a boot): the one liberty taken with the paper.
* A host with several ``slots`` counts as that many of the paper's processors in possibleTasks and
  necessaryComputers (each slot from its own running task's start); with one slot, the paper's rule.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bats.common.config import ClusterConfig, Config

from ... import core as c
from .. import billing
from ..actions import Notify, WakeAt
from ..billing import EPS as _EPS

log = logging.getLogger(__name__)
END_OF_UNIT = "end of its charging unit (adaptive)"


@dataclass(frozen=True)
class AdaptiveSettings:
    cluster: str
    creation_ratio: float = 0.5
    increase_ratio: float = 0.5
    host_processing_time_s: float | None = None  # None: the cluster's ATU
    release_margin_s: float = 60.0
    period_s: float = 300.0  # Fig. 3b: how often the running tasks are looked at

    @classmethod
    def from_config(cls, config: Config) -> AdaptiveSettings:
        a = config.policy.adaptive
        names = list(config.clusters)
        cluster = a.cluster or min(names, key=lambda n: (config.clusters[n].price, names.index(n)))
        return cls(cluster, a.creation_ratio, a.increase_ratio, a.host_processing_time_s,
                   config.release_margin_s, config.monitor_interval_s)


class AdaptiveCore(c.Core):
    """Seed 001's adaptive host heuristic; see the module docstring."""

    name = "adaptive"

    def __init__(self, task_ids: Iterable[int], clusters: dict[str, ClusterConfig], rng: random.Random,
                 settings: AdaptiveSettings, **kwargs: Any) -> None:
        super().__init__(task_ids, clusters, rng, **kwargs)
        if settings.cluster not in clusters:
            raise ValueError(f"adaptive policy: no cluster {settings.cluster!r}")
        self.settings = settings
        self.cluster = clusters[settings.cluster]
        self.hpt = settings.host_processing_time_s or self.cluster.atu_s
        self.creation_ratio = settings.creation_ratio
        self.finished_tasks = 0
        self.finished_time = 0.0
        self.average: float | None = None  # tasksAverageTime
        self._unit: dict[str, int] = {}  # host -> its current charging unit (1-based)
        self._last_period = 0.0
        self.creations: list[dict[str, Any]] = []
        self.renewals = 0
        self.peak_hosts = 0

    # ------------------------------------------------------------ hosts and their windows
    def _window_end(self, m: c.Machine) -> float:
        """When host ``m`` is let go: the end of its processing time in its current unit, at the
        latest the release margin before the unit's edge."""
        cl = self.cluster
        unit = self._unit.get(m.id, 1)
        first = billing.atus_begun(0.0, cl.atu_s, cl.min_charge_s)
        edge = m.acquired_at + max(unit, first) * cl.atu_s
        work_end = m.acquired_at + (unit - 1) * cl.atu_s + self.hpt
        return min(work_end, edge - self.settings.release_margin_s)

    def _boot_estimate(self) -> float:
        seen = [m.up_at - m.acquired_at for m in self.machines.values() if m.up_at is not None]
        return sum(seen) / len(seen) if seen else 0.0

    def _possible(self, m: c.Machine, now: float, avg: float) -> int:
        """possibleTasks(): what host ``m`` can still finish before its end, its running task included."""
        end = m.release_at if m.release_at is not None else self._window_end(m)
        if m.state is c.MachineState.BOOTING:
            start = now + max(0.0, self._boot_estimate() - (now - m.acquired_at))
        else:  # each slot from its running task's start, or from now
            starts = [*m.started, *[now] * max(0, m.slots - len(m.started))]
            return sum(max(0, math.floor((end - start) / avg + _EPS)) for start in starts)
        return m.slots * max(0, math.floor((end - start) / avg + _EPS))

    def _hosts(self) -> list[c.Machine]:
        return self.live_machines(self.cluster.name)

    def _possible_all(self, now: float, avg: float, skip: c.Machine | None = None) -> int:
        total = sum(self._possible(m, now, avg) for m in self._hosts() if m is not skip)
        fresh = self.cluster_slots[self.cluster.name] * max(0, math.floor((self.hpt - self._boot_estimate()) / avg + _EPS))
        return total + self._requested[self.cluster.name] * fresh

    # ------------------------------------------------------------ Fig. 3a / 3b
    def _create_hosts(self, now: float, avg: float, reason: str) -> list[c.Action]:
        """Lines 6-17: the hosts needed for the tasks the current ones cannot finish, damped."""
        left = self.remaining - self._possible_all(now, avg)
        if left <= 0:
            return []
        necessary = max(0, round(left * avg / (self.hpt * self.cluster_slots[self.cluster.name])))
        create = max(1, necessary if self.creation_ratio >= 1.0 else int(necessary * self.creation_ratio) + 1)
        name = self.cluster.name
        room = self.cluster.max - len(self._hosts()) - self._requested[name]
        create = min(create, room, self.machines_allowed(), left)
        if create <= 0:
            return []
        log.debug("adaptive: %d task(s) left over at %.1fs a task: %d host(s) needed, %d created (ratio %.3f)",
                  left, avg, necessary, create, self.creation_ratio)
        self._requested[name] += create
        self.peak_hosts = max(self.peak_hosts, len(self._hosts()) + self._requested[name])
        self.creations.append({"at_s": now - (self.started_at if self.started_at is not None else now), "hosts": create, "necessary": necessary,
                               "creation_ratio": round(self.creation_ratio, 6), "average_s": avg,
                               "reason": reason})
        return [c.Acquire(name, create)]

    def _after_result(self, machine: c.Machine, ev: c.TaskFinished) -> list[c.Action]:
        self.finished_tasks += 1
        self.finished_time += max(0.0, ev.runtime_s)
        self.average = max(1e-6, self.finished_time / self.finished_tasks)
        actions: list[c.Action] = []
        if self.remaining > 0:
            actions = self._create_hosts(ev.now, self.average, "a task finished")
        self.creation_ratio += (1.0 - self.creation_ratio) * self.settings.increase_ratio
        return actions

    def _periodic(self, now: float) -> list[c.Action]:
        """Fig. 3b: running tasks longer than the finished average raise the average."""
        self._last_period = now
        elapsed = [now - started for m in self._hosts() for started in m.started]
        actions: list[c.Action] = [WakeAt(now + self.settings.period_s)]
        if self.remaining <= 0:
            return actions
        finished_avg = self.finished_time / self.finished_tasks if self.finished_tasks else 0.0
        if elapsed and sum(elapsed) / len(elapsed) > finished_avg:
            self.average = max(1e-6, (sum(elapsed) + self.finished_time) / (len(elapsed) + self.finished_tasks))
        if self.average is not None:
            actions.extend(self._create_hosts(now, self.average, "running tasks (periodic)"))
        return actions

    # ------------------------------------------------------------ the core's hooks
    def _initial_acquisitions(self, now: float) -> list[c.Action]:
        self._last_period = now
        if self.machines_allowed() <= 0 or self.cluster.max <= 0:
            self.finished = c.Finish("incomplete", f"adaptive policy: cluster {self.cluster.name} has no machines")
            return [self.finished]
        self._requested[self.cluster.name] += 1
        self.peak_hosts = 1
        return [c.Acquire(self.cluster.name, 1), WakeAt(now + self.settings.period_s)]

    def _on_machine_acquired(self, ev: c.MachineAcquired) -> list[c.Action]:
        actions = super()._on_machine_acquired(ev)
        m = self.machines[ev.machine]
        self._unit[m.id] = 1
        m.release_at = self._window_end(m)
        m.release_reason = END_OF_UNIT
        return actions + [WakeAt(m.release_at)]

    def _next_task(self, machine: c.Machine) -> int | None:
        if not self._fits(machine):
            return None
        return super()._next_task(machine)

    def _fits(self, m: c.Machine) -> bool:
        """Whether another task is expected to end before the host is let go."""
        end = m.release_at
        if end is None:
            return True
        if self._now >= end - _EPS:
            return False
        avg = self.average
        if avg is not None and not m.held and self._window_end(m) - self._window_start(m) < avg:
            return True  # tasks longer than a host's window: one at a time, the host renewed while it runs
        return avg is None or self._now + m.rounds_to_end() * avg <= end + _EPS

    def _window_start(self, m: c.Machine) -> float:
        return m.acquired_at + (self._unit.get(m.id, 1) - 1) * self.cluster.atu_s

    def _replace_lost(self, machine: c.Machine, now: float) -> list[c.Action]:
        """A lost host is not replaced as such; the heuristic decides (at least one host while
        tasks are left and none is up or coming)."""
        if self.remaining > 0 and not self._hosts() and not self._requested[self.cluster.name]:
            return self._create_hosts(now, self.average or self.hpt, "every host was lost")
        return []

    def _on_tick(self, ev: c.Tick) -> list[c.Action]:
        actions = super()._on_tick(ev)
        if self.finished is None and ev.now - self._last_period >= self.settings.period_s - _EPS:
            actions.extend(self._periodic(ev.now))
        return actions

    def _after_event(self, event: c.Event, actions: list[c.Action]) -> None:
        if self.finished is None and self.started_at is not None:
            actions.extend(self._ends(event.now))

    def _ends(self, now: float) -> list[c.Action]:
        """Hosts at the end of their window (or idle with no task that fits before it): kept for
        another charging unit while tasks are left that the others cannot do, else let go."""
        actions: list[c.Action] = []
        for m in self._hosts():
            due = m.release_at is not None and now >= m.release_at - _EPS
            idle_done = m.state is c.MachineState.UP and not m.held and not self._fits(m)
            if not (due or idle_done):
                continue
            avg = self.average or self.hpt
            if self.remaining - self._possible_all(now, avg, skip=m) > 0 and self._renewable(m, now):
                self._unit[m.id] += 1
                m.release_at = self._window_end(m)
                if m.held or self._fits(m):  # a running task goes on; an idle host must have a task to take
                    self.renewals += 1
                    actions.append(WakeAt(m.release_at))
                    actions.extend(self._feed(m))
                    continue
                self._unit[m.id] -= 1
                m.release_at = self._window_end(m)
            actions.append(c.Release(m.id, END_OF_UNIT))
            actions.extend(self._requeue_held(m))
            self._retire(m, now, END_OF_UNIT)
        if actions and self.remaining > 0 and not self._hosts() and not self._requested[self.cluster.name]:
            actions.extend(self._create_hosts(now, self.average or self.hpt, "no host left"))
        if actions and self.remaining > 0 and not self._live and not any(self._requested.values()):
            actions.append(Notify("adaptive policy: no host left and none can be created"))
            self.finished = c.Finish("incomplete", "no machines left to run the remaining tasks")
            actions.append(self.finished)
        return actions

    def _renewable(self, m: c.Machine, now: float) -> bool:
        """Another unit is worth it only if the host can still be let go before that unit's end."""
        self._unit[m.id] += 1
        end = self._window_end(m)
        self._unit[m.id] -= 1
        return end > now + _EPS

    # ------------------------------------------------------------ report
    def report(self, now: float) -> dict:
        figures = super().report(now)
        figures["policy"] = "adaptive"
        figures["adaptive"] = {
            "cluster": self.cluster.name,
            "creation_ratio": self.settings.creation_ratio,
            "increase_ratio": self.settings.increase_ratio,
            "host_processing_time_s": self.hpt,
            "hosts": len(self.machines),
            "peak_hosts": self.peak_hosts,
            "renewals": self.renewals,
            "average_s": self.average,
            "creations": list(self.creations),
        }
        return figures
