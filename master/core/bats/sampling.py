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
of the total and its total cost down 11 %, for 3 % more wall time. A cluster never samples on
more machines than the tasks its share holds (a bag of three tasks on two machines each wasted a
boot). An operator's ``initial_workers`` always wins.

What sampling may spend (:func:`execution_floor`, :data:`SAMPLING_BOUND`). Billed by the second or
the minute on every cluster, sampling pays for each second it waits, and waiting for the last copy
of a long task can cost more than the whole execution the sample is for: on a heavy-tailed bag
(1 % of the tasks holding a quarter of the work) the study paid 2.13 for sampling against 0.0095
for the execution, every cluster running one very long replicated task to its end. So the money the sample spends
only to measure is bounded by a low estimate of the execution it informs: the tasks left times the least money
a task costs on any cluster, each cluster's mean taken from what it has shown (the runtimes ended
and, for a task still running, its elapsed time: a lower bound). Once every active cluster has
ended :data:`MIN_SEEN` tasks, every task of the sample has been handed out (the sample keeps the
size n_s that §2.1 asks for, some of its tasks censored rather than missing), and the money that
only measured reaches :data:`SAMPLING_BOUND`
times that estimate, the sample *closes*. That money is what the machines spent past their boot and
their first ATU or minimum charge (paid at once whatever the sample does), second by second, less
what ran the bag's own results (see below): the copies that only measure and the time idle. A
machine doing the bag's work while a slow copy runs elsewhere is not waste, and a small bag whose
sampling machines do most of it is not cut short for that. At the close (:meth:`Sample.close`)
the copies not yet begun are dropped, and the sampled tasks still running become censored observations "> t". The sample does not cut
them off: each runs on as the bag's work while its machine is kept (the choice may let the
machine go, and then the task goes back to the bag; a replicated task's first copy to succeed is
still its result), and while it runs the estimator (§2.1's tail, or its elapsed time beyond the sample's longest) and
the odds (a running task is a lower bound there) count it as a task that lasts at least that long.
With an ATU longer than a minute (the papers' hours) the sampling machines' first ATU is paid at
once and the rule does not apply: seed 000's sample is taken as the paper takes it. The bound is a
guard for the tail, not the common case: on the execution study's first 100 per-second and
per-minute pools (``--billing fine --seed 1``) it closed 2 samples; a spiky bag of 794 tasks paid
0.24 for sampling instead of 0.51, against a cheapest option of 0.070 instead of 0.0097 (sampling
had run most of the bag), and the most sampling cost against the cheapest option went from 52x to
3.8x; the median (0.24x) did not move.

The sampled tasks are the bag's work: their results are kept and never run again, so what
sampling paid for them (the runtime of every result recorded while sampling, at its cluster's
price per second and slot) is reported apart (``cost.sampling_work``), and the rest of sampling's
money (boots, minimum charges, the copies that only measure, idle time) is what measuring cost.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..planning.clusters import SHORT_ATU_S
from ..planning.estimate import REPLICATED_TASKS, Regression, complete_samples, fit_regression

PAPER_SAMPLING_MACHINES = 7  # seed 000 §4: machines per cluster while sampling, each paid for an ATU
TASKS_PER_SAMPLING_MACHINE = 5  # billed by the second or minute, sample tasks a sampling machine's boot is worth
SAMPLING_BOUND = 1.0  # billed by the second or minute, sampling spends at most this times the execution's low estimate
MIN_SEEN = 2  # tasks every active cluster must have ended before the bound may close the sample


def sampling_machines(atu_s: float, sample_size: int, n_clusters: int, configured: int | None = None) -> int:
    """Machines a cluster billed every ``atu_s`` samples on (see the module docstring), before its
    ``max``: ``configured`` when the operator set it, seven for ATUs longer than a minute, else one
    per ``TASKS_PER_SAMPLING_MACHINE`` tasks of its share of a sample of ``sample_size``."""
    if configured is not None:
        return configured
    if atu_s > SHORT_ATU_S:
        return PAPER_SAMPLING_MACHINES
    replicated = min(REPLICATED_TASKS, sample_size)
    share = replicated + max(0, sample_size - replicated) / max(1, n_clusters)
    machines = max(2, min(PAPER_SAMPLING_MACHINES, math.ceil(share / TASKS_PER_SAMPLING_MACHINE)))
    return max(1, min(machines, math.ceil(share - 1e-9)))


def execution_floor(tasks_left: int, per_cluster: Mapping[str, tuple[float, float]]) -> float | None:
    """A low estimate of the execution's money: ``tasks_left`` times the least a task costs on any
    cluster, each given as (its mean runtime's lower estimate in seconds, its money per second and
    slot); None when no cluster has shown a runtime yet."""
    costs = [mean_s * rate for mean_s, rate in per_cluster.values() if mean_s > 0]
    if not costs:
        return None
    return max(0, tasks_left) * min(costs)


def lower_mean(ended_s: float, ended: int, running_elapsed: Iterable[float]) -> float:
    """A cluster's mean runtime from below: ``ended`` runtimes summing to ``ended_s`` and, for each
    task still running, the time it has run (0 with nothing seen)."""
    running = list(running_elapsed)
    count = ended + len(running)
    return (ended_s + sum(running)) / count if count else 0.0


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
    closed: bool = False  # closed by the money bound before every copy and sample task ended
    censored: dict[str, list[float]] = field(default_factory=dict)  # at the close, per cluster: "> t" of each running

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
        return not self.closed and self.done + len(self.running) < self.target

    def ended_on(self, cluster: str) -> list[float]:
        """The runtimes the sample has seen end on ``cluster`` (its replicated copies and its others)."""
        return [r[cluster] for r in self.replica_runtime.values() if cluster in r] + self.runtime.get(cluster, [])

    def close(self, running_elapsed: Mapping[str, list[float]]) -> dict[str, list[int]]:
        """The money bound closes the sample now (see the module docstring): the tasks running are
        censored at their elapsed times (``running_elapsed``, per cluster), the sample's other
        tasks running become ordinary ones, and the copies not begun are dropped: returned per
        cluster, for the caller to close (a task none of whose copies ran goes back to the bag)."""
        self.closed = True
        self.censored = {name: sorted(values) for name, values in running_elapsed.items() if values}
        self.running = set()
        dropped = {name: list(todo) for name, todo in self.todo.items() if todo}
        for name in dropped:
            self.todo[name] = []
        return dropped

    def record(self, task: int, cluster: str, runtime: float) -> None:
        """A task of the sample (not a replicated one) finished on ``cluster``."""
        self.running.discard(task)
        self.done += 1
        self.runtime[cluster].append(runtime)

    def complete(self, active: Iterable[str], bag_empty: bool) -> bool:
        """Every copy of the active clusters has ended and the sample is done (or the bag ran dry),
        or the money bound closed it."""
        if self.closed:
            return True
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
        of the mean runtimes (beta0 = 0) of the same tasks on both clusters, the replicated pairs;
        only without a pair, of every task each cluster ran.

        The pairs first: the tasks each cluster ran apart are different tasks. A cluster that boots
        late may run only the replicated copies (a handful of short tasks, all equal) while the
        base also ran the sample's long ones; the means of everything seen then made it look
        several times faster than it is (a heavy bag billed per second planned its cheapest option
        on such a cluster at a fifth of its true runtime)."""
        pairs = [(r[base], r[other]) for r in (self.replica_runtime[t] for t in self.order)
                 if base in r and other in r]
        try:
            fit = fit_regression([p[0] for p in pairs], [p[1] for p in pairs])
            if fit.beta1 > 0:
                return fit
        except ValueError:
            pass
        if pairs:
            ratio = _ratio([p[1] for p in pairs], [p[0] for p in pairs])
            if ratio is not None:
                return Regression(0.0, ratio)
        ratio = _ratio(replicated[other] + observed[other], replicated[base] + observed[base])
        return Regression(0.0, 1.0 if ratio is None else ratio)


def _ratio(other: Sequence[float], base: Sequence[float]) -> float | None:
    """mean(other) / mean(base), None when either is empty or not positive."""
    if not other or not base:
        return None
    mean_base, mean_other = math.fsum(base) / len(base), math.fsum(other) / len(other)
    return mean_other / mean_base if mean_base > 0 and mean_other > 0 else None
