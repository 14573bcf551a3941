"""Sampling-phase math (seed 000 §2.1-2.2): sample size, regression across clusters, runtime profiler."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bats.master.core.bats.sampling import Sample
from bats.master.core.planning import estimate as e

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- sample size
def test_z_values_are_the_two_sided_quantiles_the_paper_rounds():
    # the paper: z_0.90 = 1.65, z_0.95 = 1.96, z_0.99 = 2.58
    assert round(e.z_value(0.90), 2) == 1.64  # 1.6449 (the paper rounds up to 1.65)
    assert round(e.z_value(0.95), 2) == 1.96
    assert round(e.z_value(0.99), 2) == 2.58


@pytest.mark.parametrize("n_tasks, confidence, error, expected", [
    # z^2 = 3.8415 at 95 %; 2 (N-1) Delta^2 = 2 * 999 * 0.0625 = 124.875
    # 1000 * 3.8415 / (3.8415 + 124.875) = 29.84 -> 30 (Fig. 2's value for N = 1000)
    (1000, 0.95, 0.25, 30),
    (100, 0.95, 0.25, 24),     # 384.15 / (3.8415 + 12.375) = 23.69 -> 24
    (10, 0.95, 0.25, 8),       # 38.415 / (3.8415 + 1.125) = 7.73 -> 8
    (1, 0.95, 0.25, 1),        # 3.8415 / 3.8415 = 1
    (0, 0.95, 0.25, 0),
    (1000, 0.95, 0.10, 162),   # 3841.5 / (3.8415 + 19.98) = 161.26 -> 162
    (1000, 0.90, 0.25, 22),    # z^2 = 2.7055: 2705.5 / (2.7055 + 124.875) = 21.21 -> 22
    (1000, 0.99, 0.25, 51),    # z^2 = 6.6349: 6634.9 / (6.6349 + 124.875) = 50.45 -> 51
    (10**6, 0.95, 0.25, 31),   # the bound
])
def test_sample_size(n_tasks, confidence, error, expected):
    assert e.sample_size(n_tasks, confidence, error) == expected


def test_sample_size_bound():
    assert e.sample_size_bound() == 31  # ceil(3.8415 / 0.125) = ceil(30.73)
    assert e.sample_size_bound(0.95, 0.10) == 193  # ceil(3.8415 / 0.02) = ceil(192.07)


@given(st.integers(1, 100_000), st.sampled_from([0.9, 0.95, 0.99]), st.sampled_from([0.1, 0.15, 0.2, 0.25]))
def test_sample_size_is_monotone_and_bounded(n, confidence, error):
    size = e.sample_size(n, confidence, error)
    assert 1 <= size <= n
    assert size <= e.sample_size_bound(confidence, error)
    assert e.sample_size(n + 1, confidence, error) >= size


@pytest.mark.parametrize("args", [(-1,), (10, 1.0), (10, 0.0), (10, 0.95, 0.0), (10, 0.95, -0.1)])
def test_sample_size_rejects_bad_input(args):
    with pytest.raises(ValueError):
        e.sample_size(*args)


# ---------------------------------------------------------------- regression
def test_regression_recovers_an_exact_line():
    base = [600.0, 750.0, 900.0, 1020.0, 840.0, 960.0, 700.0]
    other = [30.0 + 0.25 * t for t in base]  # a 4x faster cluster with 30 s start-up
    fit = e.fit_regression(base, other)
    assert fit.beta0 == pytest.approx(30.0)
    assert fit.beta1 == pytest.approx(0.25)
    assert fit.translate(800.0) == pytest.approx(230.0)
    assert fit.to_base(230.0) == pytest.approx(800.0)


def test_regression_on_noisy_synthetic_data():
    rng = np.random.default_rng(3)
    base = rng.normal(900.0, 134.0, size=e.REPLICATED_TASKS * 20)
    other = 12.0 + 0.5 * base + rng.normal(0.0, 5.0, size=base.size)
    fit = e.fit_regression(base.tolist(), other.tolist())
    assert fit.beta1 == pytest.approx(0.5, abs=0.02)
    assert fit.beta0 == pytest.approx(12.0, abs=20.0)
    assert np.polyfit(base, other, 1) == pytest.approx([fit.beta1, fit.beta0])


@settings(max_examples=50)
@given(st.floats(-100, 100), st.floats(0.05, 20),
       st.lists(st.floats(1, 10_000), min_size=2, max_size=12, unique=True).filter(lambda xs: np.ptp(xs) > 1))
def test_regression_recovers_any_line(beta0, beta1, base):
    fit = e.fit_regression(base, [beta0 + beta1 * t for t in base])
    assert fit.beta1 == pytest.approx(beta1, rel=1e-6)
    assert fit.beta0 == pytest.approx(beta0, abs=1e-6 * max(base) * beta1 + 1e-6)


def test_regression_errors_are_clear():
    with pytest.raises(ValueError, match="at least 2"):
        e.fit_regression([1.0], [2.0])
    with pytest.raises(ValueError, match="all equal"):
        e.fit_regression([5.0, 5.0, 5.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="length"):
        e.fit_regression([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="slope is 0"):
        e.Regression(3.0, 0.0).to_base(3.0)


def test_an_undetermined_fit_takes_the_speed_ratio_from_the_same_tasks_on_both_clusters():
    """Replicated copies all equal (no slope) on a cluster that ran only them, while the base also
    ran the sample's long tasks: the ratio is of the copies, not of everything each cluster saw
    (that made the late cluster look nearly 5 times faster than it is: a ratio of 0.41 for 2)."""
    sample = Sample(["base", "late"])
    for task in range(7):
        sample.replicate(task)
        sample.replica_runtime[task] = {"base": 0.32, "late": 0.64}
    for task, runtime in enumerate([0.32] * 20 + [4.9, 10.0, 10.2, 14.3], start=100):
        sample.record(task, "base", runtime)
    sets = sample.complete_sets(["base", "late"])
    assert sample.regression("base", "late", {"base": [0.32] * 7, "late": [0.64] * 7},
                             {"base": sample.runtime["base"], "late": []}) == e.Regression(0.0, 2.0)
    assert statistics.fmean(sets["late"]) == pytest.approx(2.0 * statistics.fmean(sets["base"]))
    # no pair at all: the means of what each ran are all there is
    lone = Sample(["base", "late"])
    lone.record(1, "base", 2.0)
    lone.record(2, "late", 3.0)
    assert lone.regression("base", "late", {"base": [], "late": []},
                           {"base": [2.0], "late": [3.0]}) == e.Regression(0.0, 1.5)


def test_relative_to_composes_two_base_fits():
    # t_k = 10 + 2 t_base, t_j = 4 + 0.5 t_base  =>  t_base = (t_j - 4) / 0.5
    # t_k = 10 + 2 (t_j - 4) / 0.5 = (10 - 2 * 4 / 0.5) + (2 / 0.5) t_j = -6 + 4 t_j
    k, j = e.Regression(10.0, 2.0), e.Regression(4.0, 0.5)
    kj = k.relative_to(j)
    assert (kj.beta0, kj.beta1) == pytest.approx((-6.0, 4.0))
    for t_base in (100.0, 250.0):
        assert kj.translate(j.translate(t_base)) == pytest.approx(k.translate(t_base))


def test_complete_samples_translate_through_the_base():
    fast = e.Regression(0.0, 0.5)  # "fast" runs tasks in half the base time
    samples = e.complete_samples(
        "base", {"fast": fast},
        replicated={"base": [100.0, 200.0], "fast": [51.0, 99.0]},
        observed={"base": [300.0], "fast": [40.0]},
    )
    # measured values stay as measured; base 300 -> fast 150; fast 40 -> base 80
    assert samples == {"base": [100.0, 200.0, 300.0, 80.0], "fast": [51.0, 99.0, 150.0, 40.0]}
    with pytest.raises(ValueError, match="no regression"):
        e.complete_samples("base", {}, {}, {"slow": [1.0]})


def test_complete_samples_clip_negative_translations():
    samples = e.complete_samples("base", {"k": e.Regression(-100.0, 1.0)}, {}, {"base": [50.0]})
    assert samples["k"] == [0.0]


# ---------------------------------------------------------------- modified cumulative moving average
def test_tail_estimate_is_the_mean_of_longer_sample_runtimes():
    est = e.RuntimeEstimate([40.0, 10.0, 30.0, 20.0])
    assert est.sample == (10.0, 20.0, 30.0, 40.0)
    assert est.tail_estimate(5.0) == 25.0    # all four: 100 / 4
    assert est.tail_estimate(25.0) == 35.0   # 30, 40 (tau_k > tau_j)
    assert est.tail_estimate(30.0) == 40.0   # strictly longer: only 40
    assert est.tail_estimate(40.0) == 40.0   # nothing longer: the elapsed time itself
    assert est.tail_estimate(55.0) == 55.0


def test_modified_cumulative_moving_average_by_hand():
    est = e.RuntimeEstimate([10.0, 20.0, 30.0, 40.0])  # rt_done = 100 over 4 done
    stats = est.stats([25.0])  # one running task, tau_je = 35
    # T_i = (35 + 100) / (1 + 4) = 27; values 10 20 30 40 35: squared deviations 289 49 9 169 64 = 580
    assert stats == e.RuntimeStats(mean_s=27.0, sd_s=pytest.approx(math.sqrt(580 / 4)), n_done=4, n_running=1)
    est.add_finished(60.0)  # done, but not part of the sample's tail
    assert est.tail_estimate(25.0) == 35.0
    assert est.stats().mean_s == 32.0  # 160 / 5
    assert est.stats([5.0, 45.0]).mean_s == pytest.approx((160 + 25 + 45) / 7)
    est.add_sample(50.0)
    assert est.tail_estimate(25.0) == 40.0  # (30 + 40 + 50) / 3


def test_runtime_estimate_needs_data_and_valid_runtimes():
    with pytest.raises(ValueError, match="no runtimes"):
        e.RuntimeEstimate().stats()
    assert e.RuntimeEstimate().stats([12.0]) == e.RuntimeStats(12.0, 0.0, 0, 1)  # empty tail: elapsed
    with pytest.raises(ValueError):
        e.RuntimeEstimate([-1.0])
    with pytest.raises(ValueError):
        e.RuntimeEstimate().add_finished(float("nan"))


@settings(max_examples=60)
@given(st.lists(st.floats(0, 5000), min_size=1, max_size=30),
       st.lists(st.floats(0, 5000), max_size=10),
       st.lists(st.floats(0, 6000), max_size=10))
def test_stats_match_a_direct_computation(sample, finished, running):
    est = e.RuntimeEstimate(sample)
    for runtime in finished:
        est.add_finished(runtime)
    ordered = sorted(sample)
    taus = []
    for elapsed in running:
        tail = [t for t in ordered if t > elapsed]
        taus.append(sum(tail) / len(tail) if tail else elapsed)
    values = sample + finished + taus
    stats = est.stats(running)
    assert stats.mean_s == pytest.approx(statistics.fmean(values), rel=1e-9, abs=1e-9)
    expected_sd = statistics.stdev(values) if len(values) > 1 else 0.0
    assert stats.sd_s == pytest.approx(expected_sd, rel=1e-6, abs=1e-6)
    assert (stats.n_done, stats.n_running) == (len(sample) + len(finished), len(running))


# ---------------------------------------------------------------- one average, each cluster's speed
def _shared(spread: float, n: int = 30, seed: int = 3) -> e.SharedEstimate:
    """A sample of n tasks (lognormal of sigma ``spread`` around 100 s) on a, translated to b (2x as
    fast) and c (4x as slow), as the complete sample sets of §2.2 are."""
    rng = np.random.default_rng(seed)
    sample = list(100.0 * rng.lognormal(0.0, spread, n)) if spread else [100.0] * n
    return e.SharedEstimate({"a": sample, "b": [t / 2 for t in sample], "c": [4 * t for t in sample]})


def test_what_one_cluster_learns_about_the_bag_holds_for_every_cluster():
    """A run short of money once moved from the cluster cheapest per task to one whose mean nothing
    had corrected: a ran the bag's long tasks, b none. Here a's tasks turn out twice the sample's
    mean, and in a bag this wide that says more about the bag than about a: b's mean rises nearly
    as much, and the clusters stay in the order of their prices per task."""
    shared = _shared(1.2)
    a0, b0, c0 = (shared.mean_s(k) for k in "abc")
    assert (b0 / a0, c0 / a0) == (pytest.approx(0.5), pytest.approx(4.0))
    values = np.random.default_rng(5).lognormal(0.0, 1.2, 40)
    for runtime in values / values.mean() * 2 * a0:  # their mean twice a's
        shared.add_finished("a", runtime)
    shared.refit({})  # as a check does, with nothing running
    a1, b1 = shared.mean_s("a"), shared.mean_s("b")
    assert a1 / a0 > 1.3 and b1 / b0 > 1.25
    assert (a1 / a0) / (b1 / b0) < 1.1  # the bag's mean moved: a's own speed barely
    assert shared.correction("b") == 1.0  # b ran nothing: its sampled ratio stands, times the bag's mean


def test_a_cluster_slower_than_sampled_in_a_tight_bag_is_slower_on_its_own():
    """Every sampled task took 100 s; a's tasks now take 400 s, b's still 50 s: a is four times
    slower than its ratio said, the bag is not, and b's mean stays where it was."""
    shared = _shared(0.0)
    for _ in range(3):
        shared.add_finished("a", 400.0)
    for _ in range(5):
        shared.add_finished("b", 50.0)
    shared.refit({})
    assert shared.correction("a") == pytest.approx(4.0, rel=1e-6)
    assert shared.correction("b") == pytest.approx(1.0, rel=1e-6)
    assert shared.mean_s("a") == pytest.approx(400.0, rel=1e-6)
    assert shared.mean_s("b") == pytest.approx(50.0, rel=1e-6)
    assert shared.mean_s("c") == pytest.approx(400.0, rel=1e-6)  # 4 x the bag's 100 s, as sampled


def test_a_few_long_tasks_of_a_wide_bag_do_not_make_their_cluster_slow():
    """Twelve tasks of a wide bag (cv about 1.9) whose mean happens to be 60 % above the sample's:
    noise a mean of so few such tasks often shows; the cluster's ratio moves by a few percent."""
    shared = _shared(1.2, n=40)
    mean = shared.mean_s("a")
    rng = np.random.default_rng(11)
    values = rng.lognormal(0.0, 1.2, 12)
    for runtime in values / values.mean() * 1.6 * mean:
        shared.add_finished("a", runtime)
    shared.refit({})
    assert 1.0 < shared.correction("a") < 1.1


def test_a_task_running_on_any_cluster_counts_in_every_cluster_s_mean():
    """A task that has run on c twice as long as the longest sampled task (on c's scale) counts by
    its elapsed time in every cluster's T_i, b's too, on b's scale."""
    shared = _shared(0.3, n=20)
    alone = shared.stats("b", {})
    longest = 4 * max(shared.base.sample)
    with_it = shared.stats("b", {"c": [2 * longest]})
    assert alone.n_running == 0 and with_it.n_running == 1
    assert with_it.mean_s > alone.mean_s * 1.03
    assert shared.stats("c", {"c": [2 * longest]}).mean_s == pytest.approx(
        with_it.mean_s * 8 * shared.correction("c") / shared.correction("b"))
