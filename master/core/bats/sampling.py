"""BaTS's sampling phase as data: the replicated tasks every cluster runs, the rest of the sample,
and what each measured (seed 000 "BaTS", §2.1-§2.2, Fig. 3).

How this works. The sample has n_s tasks (§2.1, :func:`~..planning.estimate.sample_size`). The
first n_lr = 7 of them are *replicated* (§2.2): every cluster runs a copy, so the runtimes of one
task on two clusters give the pairs of a linear regression t_other = β0 + β1 t_base. The other
n_s - n_lr tasks run once, on whichever machine asks, and add to their cluster's observed runtimes.
Once every copy has ended and the sample is done, each cluster's *complete* sample set is what it
measured plus what the regressions predict for the tasks it did not run
(:func:`~..planning.estimate.complete_samples`), and the planner starts from those.

:class:`Sample` keeps that state and answers from it; the policy (:mod:`.policy`) decides which
machine runs what, and keeps the bag. No I/O, no clock.

How many machines sample (:func:`sampling_machines`). The paper samples on seven machines per
cluster, each paid for an ATU of an hour that the execution then uses. Billed by the second or the
minute (an ATU of a minute or less), a sampling machine pays its boot and minimum charge for no
task, and a third of the sampling's money went to boots on the execution study's per-second pools.
A cluster's share of the sample is the replicated tasks plus its part of the rest, about a dozen
tasks, and there it samples on one machine per ``TASKS_PER_SAMPLING_MACHINE`` of them (two at
least, seven at most): on 40 such pools `cheapest`'s median sampling share went from 39 % to 22 %
of the total and its total cost down 11 %, for 3 % more wall time. An operator's
``initial_workers`` always wins.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..planning.clusters import SHORT_ATU_S
from ..planning.estimate import REPLICATED_TASKS, Regression, complete_samples, fit_regression

PAPER_SAMPLING_MACHINES = 7  # seed 000 §4: machines per cluster while sampling, each paid for an ATU
TASKS_PER_SAMPLING_MACHINE = 5  # billed by the second or minute, sample tasks a sampling machine's boot is worth


def sampling_machines(atu_s: float, sample_size: int, n_clusters: int, configured: int | None = None) -> int:
    """Machines a cluster billed every ``atu_s`` samples on (see the module docstring), before its
    ``max``: ``configured`` when the operator set it, seven for ATUs longer than a minute, else one
    per ``TASKS_PER_SAMPLING_MACHINE`` tasks of its share of a sample of ``sample_size``."""
    if configured is not None:
        return configured
    if atu_s > SHORT_ATU_S:
        return PAPER_SAMPLING_MACHINES
    share = REPLICATED_TASKS + max(0, sample_size - REPLICATED_TASKS) / max(1, n_clusters)
    return max(2, min(PAPER_SAMPLING_MACHINES, math.ceil(share / TASKS_PER_SAMPLING_MACHINE)))


@dataclass
class Sample:
    """What the sampling phase has asked for and measured; see the module docstring."""

    clusters: list[str]  # in config order
    target: int = 0  # the sample's tasks beyond the replicated ones
    replicas: set[int] = field(default_factory=set)  # replicated tasks some copy of which may still end
    order: list[int] = field(default_factory=list)  # the replicated tasks, in the order they were drawn
    todo: dict[str, list[int]] = field(default_factory=dict)  # per cluster, the copies it still has to run
    open: dict[int, int] = field(default_factory=dict)  # per replicated task, its copies not ended
    replica_runtime: dict[int, dict[str, float]] = field(default_factory=dict)  # task -> cluster -> runtime
    running: set[int] = field(default_factory=set)  # the sample's other tasks, handed out
    done: int = 0  # ... and finished
    runtime: dict[str, list[float]] = field(default_factory=dict)  # per cluster, their runtimes

    def __post_init__(self) -> None:
        for name in self.clusters:
            self.todo.setdefault(name, [])
            self.runtime.setdefault(name, [])

    def replicate(self, task: int) -> None:
        """``task`` is one of the replicated tasks."""
        self.replicas.add(task)
        self.order.append(task)
        self.replica_runtime[task] = {}

    def give_copies_to(self, cluster: str) -> None:
        """``cluster`` runs a copy of every replicated task (in the order they were drawn)."""
        self.todo[cluster] = list(reversed(self.order))
        for task in self.order:
            self.open[task] = self.open.get(task, 0) + 1

    def close_copy(self, task: int) -> bool:
        """One copy of ``task`` ended or will not run; True when it was the last one."""
        self.open[task] -= 1
        if self.open[task] <= 0:
            self.replicas.discard(task)
            return True
        return False

    def still_wanted(self) -> bool:
        """Whether a task handed out now belongs to the sample."""
        return self.done + len(self.running) < self.target

    def record(self, task: int, cluster: str, runtime: float) -> None:
        """A task of the sample (not a replicated one) finished on ``cluster``."""
        self.running.discard(task)
        self.done += 1
        self.runtime[cluster].append(runtime)

    def complete(self, active: Iterable[str], bag_empty: bool) -> bool:
        """Every copy of the active clusters has ended and the sample is done (or the bag ran dry)."""
        if any(self.todo[name] for name in active) or self.replicas or self.running:
            return False
        return self.done >= self.target or bag_empty

    def complete_sets(self, active: Iterable[str]) -> dict[str, list[float]]:
        """Every active cluster's complete sample set (§2.2), regression through the base cluster."""
        active = set(active)
        measured = {name for name in active
                    if self.runtime[name] or any(name in r for r in self.replica_runtime.values())}
        if not measured:
            return {}
        order = [name for name in self.clusters if name in measured]
        base = next((name for name in order if any(name in r for r in self.replica_runtime.values())), order[0])
        replicated = {name: [self.replica_runtime[t][name] for t in self.order if name in self.replica_runtime[t]]
                      for name in order}
        observed = {name: list(self.runtime[name]) for name in order}
        regressions = {name: self.regression(base, name, replicated, observed) for name in order if name != base}
        return complete_samples(base, regressions, replicated, observed)

    def regression(self, base: str, other: str, replicated: Mapping[str, list[float]],
                   observed: Mapping[str, list[float]]) -> Regression:
        """t_other from t_base by least squares over the replicated pairs; when the fit is
        undetermined (fewer than 2 pairs, all base runtimes equal) or not increasing, the ratio
        of the mean runtimes seen on each cluster (beta0 = 0)."""
        pairs = [(r[base], r[other]) for r in (self.replica_runtime[t] for t in self.order)
                 if base in r and other in r]
        try:
            fit = fit_regression([p[0] for p in pairs], [p[1] for p in pairs])
            if fit.beta1 > 0:
                return fit
        except ValueError:
            pass
        seen_base = replicated[base] + observed[base]
        seen_other = replicated[other] + observed[other]
        mean_base = sum(seen_base) / len(seen_base) if seen_base else 0.0
        mean_other = sum(seen_other) / len(seen_other) if seen_other else 0.0
        if mean_base <= 0 or mean_other <= 0:
            return Regression(0.0, 1.0)
        return Regression(0.0, mean_other / mean_base)
