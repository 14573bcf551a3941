"""What the sampling phase learns: sample size, cross-cluster regression, per-cluster runtimes.

Pure math, no I/O: the core feeds runtimes in and asks for numbers (seed 000 "BaTS", §2.1-2.2).

How this works.

* :func:`sample_size` is the paper's sample-size formula for sampling with replacement (§2.1,
  seed lines ~199-208)::

      n_s = ceil( N * z_a^2 / (z_a^2 + 2 * (N - 1) * Delta^2) )

  with N the bag size, Delta the error level and z_a "related to the Gaussian cumulative
  distribution function, usual values being z_0.90 = 1.65, z_0.95 = 1.96 and z_0.99 = 2.58".
  Those are the *two-sided* standard-normal quantiles Phi^-1(1 - (1 - a)/2), computed here exactly
  (1.6449, 1.9600, 2.5758) rather than taken from the rounded table. For N = 1000, a = 0.95,
  Delta = 0.25 this gives 30; the bound for large N is ceil(z^2 / (2 Delta^2)) = 31 (Fig. 2).

* :func:`fit_regression` fits the linear model of §2.2 (seed lines ~309-317),
  ``t_k = beta0_{k,base} + beta1_{k,base} * t_base``, by ordinary least squares over the
  ``REPLICATED_TASKS`` (n_lr = 7) tasks that ran on every cluster. :class:`Regression` translates
  base runtimes to cluster k, back (``t_base = (t_k - beta0) / beta1``, seed line ~333) and
  composes two fits into the k-from-j pair (seed lines ~341-347)::

      beta0_{k,j} = beta0_{k,base} - beta1_{k,base} * beta0_{j,base} / beta1_{j,base}
      beta1_{k,j} = beta1_{k,base} / beta1_{j,base}

  (the flattened text reads "beta0_k,base - beta1_k,base x beta0_j,base  beta1_j,base"; we read
  the lone last term as the denominator of the product, which is what substituting
  t_base = (t_j - beta0_j)/beta1_j into t_k = beta0_k + beta1_k t_base gives).
  :func:`complete_samples` turns the replicated runtimes plus the runtimes of the other sample
  tasks (each seen on one cluster only) into one complete sample set per cluster.

* :class:`RuntimeEstimate` is the per-cluster profiler of §2.1 (seed lines ~224-256): the mean
  task runtime T_i is a *modified cumulative moving average* over the tasks done and the tasks
  still running on the cluster::

      T_i = ( sum_{k=1}^{tasks_running} tau_k  +  rt_done ) / ( tasks_running + tasks_done )

  where rt_done is the total runtime of the done tasks and tau_k, for a task still running, is
  its estimate tau_je from the tail of the sample distribution: with the sample runtimes sorted,
  tau_1 <= ... <= tau_n, and k the first index with tau_k > tau_j (tau_j = the time elapsed since
  the task was submitted)::

      tau_je = ( sum_{m=k}^{n} tau_m ) / ( n - k + 1 )

  i.e. the mean of the sample runtimes strictly longer than the elapsed time ("represent task j
  as one of those from the tail of the sample's distribution"). Two readings the text leaves
  open, decided here: (1) when no sample runtime exceeds the elapsed time the tail is empty; we
  then estimate the task by its elapsed time, the only (lower) bound known; (2) the paper gives no
  spread; ``sd_s`` is the sample standard deviation (n - 1 in the denominator) of the same values
  the mean averages (done runtimes and the running tasks' tau_je).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from ..billing import EPS as _EPS

REPLICATED_TASKS = 7  # n_lr: tasks replicated on every cluster for the regression (§2.2)
DEFAULT_CONFIDENCE = 0.95
DEFAULT_ERROR = 0.25
RATIO_TRUST = 0.15  # how far (relative sd) a sampled speed ratio is trusted: see SharedEstimate


# ---------------------------------------------------------------- sample size (§2.1)
def z_value(confidence: float) -> float:
    """The two-sided standard-normal quantile for ``confidence``: 0.95 -> 1.95996."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def one_sided_z(confidence: float) -> float:
    """The one-sided standard-normal quantile for ``confidence``: 0.6 -> 0.2533, 0.5 -> 0."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    return NormalDist().inv_cdf(confidence)


def sample_size(n_tasks: int, confidence: float = DEFAULT_CONFIDENCE, error: float = DEFAULT_ERROR) -> int:
    """n_s = ceil(N z^2 / (z^2 + 2 (N - 1) Delta^2)) (§2.1); never more than N, 0 for an empty bag."""
    if n_tasks < 0:
        raise ValueError(f"the number of tasks must be >= 0, got {n_tasks}")
    if not error > 0.0:
        raise ValueError(f"the error level must be > 0, got {error!r}")
    if n_tasks == 0:
        return 0
    z2 = z_value(confidence) ** 2
    n = n_tasks * z2 / (z2 + 2.0 * (n_tasks - 1) * error * error)
    return min(n_tasks, math.ceil(n - _EPS))


def sample_size_bound(confidence: float = DEFAULT_CONFIDENCE, error: float = DEFAULT_ERROR) -> int:
    """The limit of n_s for a large bag, ceil(z^2 / (2 Delta^2)) (§2.1, Fig. 2)."""
    if not error > 0.0:
        raise ValueError(f"the error level must be > 0, got {error!r}")
    return math.ceil(z_value(confidence) ** 2 / (2.0 * error * error) - _EPS)


# ---------------------------------------------------------------- regression across clusters (§2.2)
@dataclass(frozen=True, slots=True)
class Regression:
    """t_k = beta0 + beta1 * t_base: runtimes on cluster k from runtimes on the base cluster."""

    beta0: float
    beta1: float

    def translate(self, t_base: float) -> float:
        """The expected runtime on cluster k of a task that took ``t_base`` on the base cluster."""
        return self.beta0 + self.beta1 * t_base

    def to_base(self, t_k: float) -> float:
        """The inverse, t_base = (t_k - beta0) / beta1 (§2.2)."""
        if self.beta1 == 0.0:
            raise ValueError("cannot translate back to the base cluster: the regression slope is 0 "
                             "(runtimes on this cluster did not vary with the base cluster's)")
        return (t_k - self.beta0) / self.beta1

    def relative_to(self, other: Regression) -> Regression:
        """The pair (beta0_{k,j}, beta1_{k,j}) predicting cluster k (``self``) from cluster j
        (``other``), both fitted against the same base (§2.2)."""
        if other.beta1 == 0.0:
            raise ValueError("cannot relate two clusters through a base regression with slope 0")
        return Regression(self.beta0 - self.beta1 * other.beta0 / other.beta1, self.beta1 / other.beta1)


IDENTITY = Regression(0.0, 1.0)  # the base cluster against itself


def fit_regression(base: Sequence[float], other: Sequence[float]) -> Regression:
    """Least-squares beta0, beta1 of other = beta0 + beta1 * base over paired runtimes.

    ``base[i]`` and ``other[i]`` are the runtimes of the same replicated task on the base cluster
    and on cluster k. Raises ``ValueError`` for fewer than two pairs, unequal lengths, or base
    runtimes that are all equal (the slope is then undetermined).
    """
    if len(base) != len(other):
        raise ValueError(f"paired runtimes differ in length: {len(base)} on the base cluster, {len(other)} on the other")
    n = len(base)
    if n < 2:
        raise ValueError(f"a regression needs at least 2 paired runtimes, got {n}")
    mean_b = math.fsum(base) / n
    mean_o = math.fsum(other) / n
    sxx = math.fsum((b - mean_b) ** 2 for b in base)
    sxy = math.fsum((b - mean_b) * (o - mean_o) for b, o in zip(base, other))
    if sxx <= 1e-12 * max(1.0, mean_b * mean_b) * n:
        raise ValueError("the base cluster's replicated runtimes are all equal: the regression slope is undetermined")
    beta1 = sxy / sxx
    return Regression(mean_o - beta1 * mean_b, beta1)


def complete_samples(
    base: str,
    regressions: Mapping[str, Regression],
    replicated: Mapping[str, Sequence[float]],
    observed: Mapping[str, Sequence[float]],
) -> dict[str, list[float]]:
    """One complete sample set per cluster (§2.2).

    ``regressions[k]`` predicts cluster k from ``base`` (``regressions[base]`` may be omitted: the
    identity). ``replicated[k]`` are the runtimes of the replicated tasks measured on cluster k;
    ``observed[k]`` are the runtimes of the other sample tasks, each of which ran on cluster k
    only. A measured runtime is used as is on its own cluster; on every other cluster j it is
    translated through the base, t_j = beta0_j + beta1_j * (t_k - beta0_k) / beta1_k. Translated
    runtimes below 0 (a fit extrapolated far outside its points) are clipped to 0.
    """
    clusters = list(dict.fromkeys([base, *regressions, *replicated, *observed]))
    fits = {name: (IDENTITY if name == base else regressions.get(name)) for name in clusters}
    missing = [name for name, fit in fits.items() if fit is None]
    if missing:
        raise ValueError(f"no regression against {base!r} for cluster(s) {', '.join(map(repr, missing))}")
    result: dict[str, list[float]] = {name: [] for name in clusters}
    for name in clusters:
        result[name].extend(float(t) for t in replicated.get(name, ()))
    for source, runtimes in observed.items():
        source_fit = fits[source]
        assert source_fit is not None
        for t in runtimes:
            t_base = source_fit.to_base(float(t))
            for target, fit in fits.items():
                assert fit is not None
                value = float(t) if target == source else max(0.0, fit.translate(t_base))
                result[target].append(value)
    return result


# ---------------------------------------------------------------- per-cluster runtimes (§2.1)
@dataclass(frozen=True, slots=True)
class RuntimeStats:
    """T_i (``mean_s``) and the spread of the values it averages, with what went into them."""

    mean_s: float
    sd_s: float
    n_done: int
    n_running: int

    def bound(self, z: float, floor: float = 0.0) -> float:
        """mean + z sd / sqrt(n), n the runtimes done (a confidence bound of the mean), >= floor."""
        return max(floor, self.mean_s + z * self.sd_s / math.sqrt(max(1, self.n_done)))


class RuntimeEstimate:
    """The modified cumulative moving average of one cluster's task runtimes (§2.1).

    The *sample* is the ordered list of runtimes whose tail estimates a running task (tau_je);
    *done* are the runtimes averaged into rt_done. A sample runtime is also a done runtime (the
    sample tasks are the first tasks seen), so :meth:`add_sample` feeds both and
    :meth:`add_finished` only the latter. Cost: O(log n) per running task per :meth:`stats`.
    """

    def __init__(self, sample: Iterable[float] = ()) -> None:
        self._sample: list[float] = []
        self._prefix: list[float] | None = [0.0]  # prefix sums of the sorted sample, rebuilt lazily
        self._n_done = 0
        self._mean_done = 0.0
        self._m2_done = 0.0  # Welford: sum of squared deviations of the done runtimes
        self._finished: list[float] = []  # the done runtimes outside the sample (the odds resample them)
        self._finished_sorted = np.zeros(0)  # the first len() of them, sorted (built up as they come)
        for runtime in sample:
            self.add_sample(runtime)

    @property
    def n_done(self) -> int:
        return self._n_done

    @property
    def mean_s(self) -> float:
        """T_i of the done runtimes alone (``stats().mean_s`` with nothing running), without
        building the stats: the hand-out asks it for every task."""
        if self._n_done == 0:
            raise ValueError("no runtimes seen on this cluster yet")
        return self._mean_done

    @property
    def sample(self) -> tuple[float, ...]:
        """The sample runtimes, sorted ascending."""
        return tuple(self._sample)

    def add_sample(self, runtime: float) -> None:
        """A sample task's runtime: it joins the tail distribution and counts as done."""
        value = _runtime(runtime)
        bisect.insort(self._sample, value)
        self._prefix = None
        self._add_done(value)

    def add_finished(self, runtime: float) -> None:
        """A task that finished on this cluster (rt_done grows; the sample does not)."""
        value = _runtime(runtime)
        self._finished.append(value)
        self._add_done(value)

    @property
    def finished(self) -> tuple[float, ...]:
        """The done runtimes outside the sample, in the order they ended."""
        return tuple(self._finished)

    def finished_sorted(self) -> np.ndarray:
        """The done runtimes outside the sample, sorted ascending (a read-only array). The odds ask
        it at every monitoring step: only the runtimes since the last call are sorted, then merged
        (a stable sort of two sorted runs is one merge), so a run of a million tasks costs a copy,
        not a sort, per step."""
        done = len(self._finished_sorted)
        if done < len(self._finished):
            fresh = np.sort(np.asarray(self._finished[done:], dtype=float))
            merged = np.concatenate([self._finished_sorted, fresh])
            merged.sort(kind="stable")
            merged.flags.writeable = False
            self._finished_sorted = merged
        return self._finished_sorted

    def moments(self) -> tuple[int, float, float]:
        """(n, mean, M2) of the done runtimes (M2: the sum of squared deviations)."""
        return self._n_done, self._mean_done, self._m2_done

    def _add_done(self, value: float) -> None:
        self._n_done += 1
        delta = value - self._mean_done
        self._mean_done += delta / self._n_done
        self._m2_done += delta * (value - self._mean_done)

    def tail_estimate(self, elapsed: float) -> float:
        """tau_je: the mean of the sample runtimes longer than ``elapsed`` (``elapsed`` itself
        when none is longer, see the module docstring)."""
        elapsed = float(elapsed)
        if self._prefix is None:
            prefix = [0.0]
            for value in self._sample:
                prefix.append(prefix[-1] + value)
            self._prefix = prefix
        k = bisect.bisect_right(self._sample, elapsed)  # first index with tau_k > elapsed
        n = len(self._sample)
        if k == n:
            return max(elapsed, 0.0)
        return (self._prefix[n] - self._prefix[k]) / (n - k)

    def stats(self, running_elapsed: Iterable[float] = ()) -> RuntimeStats:
        """T_i and its spread, given the elapsed times of the tasks still running on the cluster.

        Raises ``ValueError`` when nothing has been seen (no done and no running task).
        """
        estimates = [self.tail_estimate(e) for e in running_elapsed]
        n_run = len(estimates)
        n = self._n_done + n_run
        if n == 0:
            raise ValueError("no runtimes seen on this cluster yet")
        if n_run == 0:
            mean, m2 = self._mean_done, self._m2_done
        else:
            mean_run = math.fsum(estimates) / n_run
            m2_run = math.fsum((e - mean_run) ** 2 for e in estimates)
            # Chan et al.'s pairwise combination of two (count, mean, M2) summaries
            delta = mean_run - self._mean_done
            mean = (self._n_done * self._mean_done + n_run * mean_run) / n
            m2 = self._m2_done + m2_run + delta * delta * self._n_done * n_run / n
        sd = math.sqrt(max(m2, 0.0) / (n - 1)) if n > 1 else 0.0
        return RuntimeStats(mean_s=mean, sd_s=sd, n_done=self._n_done, n_running=n_run)


class SharedEstimate:
    """Every cluster's T_i from one average over the whole bag, each cluster's speed learned apart.

    Why (an extension of §2.1, which keeps one average per cluster). Once the execution runs, a
    cluster's own average learns only from the tasks that cluster ran: one that ran the bag's long
    tasks looks slow, one that ran none keeps the sample's view. A re-plan of a run short of money
    then moved it from the cluster cheapest per task to a dearer one whose mean nothing had
    corrected (a wide bag billed per minute spent its cushion there and ended 504 tasks short).
    The tasks are drawn at random from one bag on every cluster, so what any cluster learns about
    the *bag* holds for all of them; what is the cluster's own is its *speed*.

    How. Every runtime is put on the first cluster's scale by the speed ratio the sample measured
    (each cluster's complete sample set's mean over the first's: the same tasks translated, §2.2),
    and by a correction ``g`` of that ratio the cluster's own tasks earn: the mean of its tasks
    against the mean of all the others (the sample's and the other clusters', each on its
    corrected scale), shrunk towards 1 by how much two means of so many tasks of this bag can
    differ by chance, ``log g = w log(own / rest)`` with ``w = t^2 / (t^2 + cv^2 (1/n + 1/n_rest))``
    and t = ``RATIO_TRUST``: a precision-weighted mean of a prior that trusts the sampled ratio
    to t and of the evidence, whose relative variance is that of the two means; cv is the spread
    *within* each cluster's tasks, as an analysis of variance takes it, so that a cluster's
    slowdown does not pass for the bag's noise. A dozen tasks of a wide bag (cv 1.9) move a
    ratio by a percent or two, and a sample of 30 that was low moves the bag's mean, not the
    speed of the one cluster running; a cluster whose tasks of a tight bag all take four times
    the sampled runtime is four times slower after a few. The shared mean counts each task by its
    corrected ratio, so a cluster that turned slow does not make the others look slow (a fixed
    point, a few rounds). The corrections are refitted whenever the estimates are asked with the
    tasks running (every plan and check); the hand-out's mean per task uses the last ones.
    Cluster k's T_i is then ``ratio_k * g_k`` times the shared mean; a task running anywhere counts
    in it by the sample's tail rule, on its own cluster's scale. Its confidence bound counts the
    runtimes k itself measured (the sample's and its own tasks): the other clusters' tasks tell
    the bag's mean, not k's speed, and a bound over every task done priced a cluster that had
    run nothing since the sample as if it were known to the percent.
    """

    ROUNDS = 50  # fixed-point rounds at most (they stop once no correction moves by TOLERANCE)
    TOLERANCE = 1e-9

    def __init__(self, samples: Mapping[str, Sequence[float]]) -> None:
        names = [name for name, values in samples.items() if len(values)]
        if not names:
            raise ValueError("no complete sample set to share")
        means = {name: math.fsum(samples[name]) / len(samples[name]) for name in names}
        first = means[names[0]]
        self.ratio = {name: (mean / first if first > 0.0 and mean > 0.0 else 1.0) for name, mean in means.items()}
        self.base = RuntimeEstimate(samples[names[0]])  # the sample on the common scale: its tail and moments
        self._own = {name: RuntimeEstimate() for name in names}  # each cluster's other tasks, on the common scale
        self._g = dict.fromkeys(names, 1.0)  # the corrections of the last refit
        self._refit_for: tuple | None = None  # what the last refit saw
        self._done: tuple[float, float, int] | None = None  # (mean, M2, n) of the runtimes done, corrected
        self._common: tuple[tuple, float, float, int] | None = None  # (refit key, mean, sd, running) on the common scale

    def add_finished(self, cluster: str, runtime: float) -> None:
        """A task that ended on ``cluster``."""
        ratio = self.ratio.get(cluster)
        if ratio is not None:
            self._own[cluster].add_finished(_runtime(runtime) / ratio)
            self._done = None

    def correction(self, cluster: str) -> float:
        """g: how much slower (> 1) ``cluster`` has turned out than its sampled ratio says (as of
        the last :meth:`stats`, which refits it)."""
        return self._g.get(cluster, 1.0)

    def scale(self, cluster: str) -> float:
        """From the common scale to ``cluster``'s: its ratio times its correction."""
        return self.ratio[cluster] * self._g.get(cluster, 1.0)

    def mean_s(self, cluster: str) -> float:
        """``cluster``'s T_i of the runtimes done (no running task counted; the hand-out asks it per
        task, so the corrections are the last refit's)."""
        return self._moments()[0] * self.scale(cluster)

    def stats(self, cluster: str, running: Mapping[str, Iterable[float]]) -> RuntimeStats:
        """``cluster``'s T_i and spread, given the elapsed times of the tasks running on every
        cluster; the corrections are refitted first (:meth:`refit`)."""
        lists = {name: [float(e) for e in values] for name, values in running.items() if name in self.ratio}
        key = self.refit(lists)
        if self._common is None or self._common[0] != key:  # asked per cluster, the same for all of them
            mean, m2, n = self._moments()
            taus = [self.base.tail_estimate(elapsed / self.scale(name)) for name, values in lists.items()
                    for elapsed in values]
            n_run = len(taus)
            total, mean, m2 = _with_values(n, mean, m2, taus)
            self._common = (key, mean, math.sqrt(max(m2, 0.0) / (total - 1)) if total > 1 else 0.0, n_run)
        _key, mean, sd, n_run = self._common
        scale = self.scale(cluster)
        # the confidence of the cluster's mean is the count *it* measured (its ratio is known no better
        # than that): the sample's tasks (each measured or translated there) and its own since
        measured = self.base.n_done + self._own[cluster].n_done
        return RuntimeStats(mean * scale, sd * scale, measured, n_run)

    def seen(self) -> np.ndarray:
        """Every runtime done (the sample's and the others'), on the common scale, sorted."""
        parts = [np.asarray(self.base.sample, dtype=float)]
        parts += [own.finished_sorted() / self._g[name] for name, own in self._own.items() if own.n_done]
        seen = np.concatenate(parts)
        seen.sort(kind="stable")  # sorted runs: merged
        return seen

    def refit(self, running: Mapping[str, Sequence[float]]) -> tuple:
        """The corrections, from each cluster's tasks done and running (a running task by the sample's
        tail rule, as T_i counts it: the tasks a cluster has ended so far are its short ones, and
        without the long ones still running a cluster just started looked fast). Returns what it
        was fitted to (the same key: nothing to do)."""
        key = (sum(e.n_done for e in self._own.values()), tuple((name, tuple(v)) for name, v in running.items()))
        if key == self._refit_for:
            return key
        self._refit_for = key
        n0, mean0, m2_0 = self.base.moments()
        evidence: dict[str, tuple[int, float, float]] = {}
        for name, own in self._own.items():
            n_k, mean_k, m2_k = own.moments()
            taus = [self.base.tail_estimate(e / self.ratio[name]) for e in running.get(name, ())]
            n_k, mean_k, m2_k = _with_values(n_k, mean_k, m2_k, taus)
            if n_k:
                evidence[name] = (n_k, mean_k, m2_k)
        g = dict.fromkeys(self._own, 1.0)
        for _ in range(self.ROUNDS if evidence else 0):
            mean, m2, n = mean0, m2_0, n0
            for name, (n_k, mean_k, m2_k) in evidence.items():
                mean, m2 = _combined(n, mean, m2, n_k, mean_k / g[name], m2_k / g[name] ** 2)
                n += n_k
            if mean <= 0.0:
                break
            # the spread within each cluster's tasks (and the sample's): what the clusters' means differ
            # by is what is tested here, not noise
            within = m2_0 + sum(m2_k / g[name] ** 2 for name, (_n, _mean, m2_k) in evidence.items())
            cv2 = (within / max(1, n - 1 - len(evidence))) / (mean * mean)
            moved = 0.0
            for name, (n_k, mean_k, _m2) in evidence.items():
                n_rest = n - n_k  # the sample's tasks and the other clusters', each on its corrected scale
                rest = (n * mean - n_k * mean_k / g[name]) / n_rest if n_rest else 0.0
                if mean_k <= 0.0 or rest <= 0.0:
                    continue
                weight = RATIO_TRUST**2 / (RATIO_TRUST**2 + cv2 * (1.0 / n_k + 1.0 / n_rest))
                was, g[name] = g[name], math.exp(weight * math.log(mean_k / rest))
                moved = max(moved, abs(g[name] - was))
            if moved <= self.TOLERANCE:
                break
        self._g, self._done = g, None
        return key

    def _moments(self) -> tuple[float, float, int]:
        """(mean, M2, n) of the runtimes done, each on its cluster's corrected scale; M2 within each
        cluster's tasks and the sample's (what the clusters' means still differ by after the
        corrections is their speed's, not the bag's spread)."""
        if self._done is None:
            n, mean, m2 = self.base.moments()
            for name, own in self._own.items():
                n_k, mean_k, m2_k = own.moments()
                g = self._g[name]
                mean = (n * mean + n_k * mean_k / g) / (n + n_k) if n + n_k else mean
                m2 += m2_k / (g * g)
                n += n_k
            self._done = (mean, m2, n)
        return self._done


def _with_values(n: int, mean: float, m2: float, values: Sequence[float]) -> tuple[int, float, float]:
    """A (count, mean, M2) summary with ``values`` added to it."""
    if not values:
        return n, mean, m2
    n_b = len(values)
    mean_b = math.fsum(values) / n_b
    mean, m2 = _combined(n, mean, m2, n_b, mean_b, math.fsum((v - mean_b) ** 2 for v in values))
    return n + n_b, mean, m2


def _combined(n_a: int, mean_a: float, m2_a: float, n_b: int, mean_b: float, m2_b: float) -> tuple[float, float]:
    """Chan et al.'s pairwise combination of two (count, mean, M2) summaries: the mean and M2."""
    n = n_a + n_b
    if n_b == 0:
        return mean_a, m2_a
    if n_a == 0:
        return mean_b, m2_b
    delta = mean_b - mean_a
    return mean_a + delta * n_b / n, m2_a + m2_b + delta * delta * n_a * n_b / n


def _runtime(value: float) -> float:
    runtime = float(value)
    if not (math.isfinite(runtime) and runtime >= 0.0):
        raise ValueError(f"a runtime must be a finite number >= 0, got {value!r}")
    return runtime


def sorted_quantiles(values: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``np.quantile(values, q)`` (its default, linear method) of ``values`` sorted ascending
    already, number for number: numpy copies and partitions the whole array around every
    neighbour the quantiles read (a million runtimes at every monitoring step, twice), where a
    sorted array holds them in place. The same arithmetic as numpy's: the virtual index
    ``(n - 1) * q``, its floor and the next index (both clipped to the array), and the lerp
    taken from the nearer end. ``values`` must hold no nan (numpy's answer is then nan)."""
    n = len(values)
    virtual = (n - 1) * np.asarray(q, dtype=float)
    previous = np.floor(virtual)
    following = previous + 1
    above = virtual >= n - 1
    previous[above] = n - 1
    following[above] = n - 1
    below = virtual < 0
    previous[below] = 0
    following[below] = 0
    gamma = virtual - previous
    a, b = values[previous.astype(np.intp)], values[following.astype(np.intp)]
    diff = b - a
    out = a + diff * gamma
    np.subtract(b, diff * (1 - gamma), out=out, where=gamma >= 0.5)
    return out
