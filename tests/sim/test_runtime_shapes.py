"""The runtime families of bats-sim beyond the papers' bags: the heavy tail, few long tasks among
many short ones, and the real-like shapes (parametric mixtures, not traces): their shape, measured
on large draws (the share of the work the longest 1 % of the tasks hold, median against mean)."""

from __future__ import annotations

import numpy as np
import pytest

from bats.master.sim.driver import simulate
from bats.master.sim.runtimes import SHAPES, RuntimeSpecError, parse_runtimes

from .test_sim import check_accounting, cluster, config


def top_share(values: np.ndarray, share: float = 0.01) -> float:
    """The share of the work the longest ``share`` of the tasks hold."""
    ordered = np.sort(values)[::-1]
    return float(ordered[:max(1, int(share * len(ordered)))].sum() / ordered.sum())


def draw(spec: str, n: int = 100_000, seed: int = 3) -> np.ndarray:
    return parse_runtimes(spec).sample(np.random.default_rng(seed), n)


def test_the_heavy_tail_median_far_below_the_mean_and_one_percent_holding_a_quarter():
    values = draw("shape:heavy,10m")
    assert values.mean() == pytest.approx(600.0, rel=0.03)
    assert np.median(values) < values.mean() / 40  # the trace: 10 s against 600 s
    assert 0.2 <= top_share(values) <= 0.3
    assert values.min() >= 1.0


@pytest.mark.parametrize("name, median_over_mean, top1", [
    ("heavy", (0.01, 0.03), (0.2, 0.3)),
    ("wide", (0.4, 0.55), (0.1, 0.16)),
    ("stragglers", (0.85, 0.95), (0.04, 0.07)),
    ("stages", (0.3, 0.4), (0.04, 0.07)),
    ("powerlaw", (0.55, 0.65), (0.12, 0.18)),
    ("spiky", (0.45, 0.55), (0.45, 0.55)),
])
def test_every_shape_has_its_mean_and_its_stated_shape(name, median_over_mean, top1):
    values = draw(f"shape:{name},5m")
    assert values.mean() == pytest.approx(300.0, rel=0.04)  # scaled to the spec's mean
    low, high = median_over_mean
    assert low <= np.median(values) / values.mean() <= high
    low, high = top1
    assert low <= top_share(values) <= high


def test_six_shapes():
    assert sorted(SHAPES) == ["heavy", "powerlaw", "spiky", "stages", "stragglers", "wide"]


def test_fewlong_has_exactly_k_long_tasks_at_random_places():
    values = draw("fewlong:1m,4h,10", n=3000)
    long = np.flatnonzero(values > 3600)
    assert len(long) == 10
    assert long.max() - long.min() > 300  # not in a block of task ids
    assert abs(np.median(values) - 60) < 2
    assert top_share(values) > 0.4  # 0.3 % of the tasks, 44 % of the work
    assert (draw("fewlong:1m,4h,10", n=4) > 3600).all()  # fewer tasks than K: every one is long
    assert (draw("fewlong:1m,4h,0", n=50) < 3600).all()


@pytest.mark.parametrize("spec, fragment", [
    ("shape:", "unknown shape"), ("shape:nosuch,10m", "unknown shape"), ("shape:heavy", "MEAN"),
    ("shape:heavy,0", "MEAN"), ("shape:heavy,lots", "MEAN"), ("fewlong:1m,4h", "fewlong:SHORT,LONG,K"),
    ("fewlong:1m,4h,x", "whole number"), ("fewlong:0,4h,3", "longer than 0"), ("fewlong:1m,4h,-1", "at least 0"),
])
def test_bad_specs_say_what_is_wrong_in_one_line(spec, fragment):
    with pytest.raises(RuntimeSpecError, match=fragment) as caught:
        parse_runtimes(spec)
    assert "\n" not in str(caught.value)


def test_a_heavy_tailed_bag_runs_in_the_simulator_every_task_once():
    sim = simulate(config(cluster(max=4, atu_s=600.0)), 200, parse_runtimes("shape:heavy,1m"), 5)
    check_accounting(sim, 200)
