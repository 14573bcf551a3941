"""The genetic algorithm of seed 003 (bats.master.core.planning.ga) against the exact planner and by hand."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from bats.master.core.planning import ga as ga
from bats.master.core.planning.ga import GAParams, front_gap, ga_front, hypervolume, reference_point
from bats.master.core.planning.planner import ClusterPlan, Estimate, Planner

HOUR = 3600.0


def paper_mix(micro: int, small: int, medium: int, t_micro: float = 900.0) -> list[ClusterPlan]:
    """Seed 003 §4.1 (lines 299-301): t1.micro $0.020/h runs tasks at their runtime (NDB: 15 min
    mean, §4.2 line 310), m1.small twice as fast at $0.065/h, m1.medium three times as fast as
    m1.small at $0.130/h; hourly ATU."""
    return [ClusterPlan("t1.micro", t_micro, 0.020, HOUR, micro),
            ClusterPlan("m1.small", t_micro / 2, 0.065, HOUR, small),
            ClusterPlan("m1.medium", t_micro / 6, 0.130, HOUR, medium)]


def paper_six(on_demand: int, spot: int) -> list[ClusterPlan]:
    """The six types of §4.1 (lines 299-304): the three on-demand ones and their spot twins."""
    spots = [ClusterPlan("spot t1.micro", 900.0, 0.003, HOUR, spot),
             ClusterPlan("spot m1.small", 450.0, 0.007, HOUR, spot),
             ClusterPlan("spot m1.medium", 150.0, 0.013, HOUR, spot)]
    return paper_mix(on_demand, on_demand, on_demand) + spots


MIXED = [ClusterPlan("hourly", 600.0, 1.0, HOUR, 5), ClusterPlan("minutely", 300.0, 0.05, 60.0, 5),
         ClusterPlan("persec", 200.0, 0.002, 1.0, 5, min_charge_s=60.0)]
TWO = [ClusterPlan("a", 900.0, 3.0, HOUR, 4), ClusterPlan("b", 225.0, 9.0, HOUR, 6)]
SMALL = {"population_size": 300, "generations": 40}  # quick runs where only validity matters


def brute_front(clusters: list[ClusterPlan], n: int, total: int | None = None) -> list[tuple[float, float]]:
    """The exact front by enumerating every configuration (small pools only)."""
    cap = n if total is None else min(n, total)
    grid = np.array(list(itertools.product(*[range(min(c.max, cap) + 1) for c in clusters])))
    machines = grid.sum(axis=1)
    grid = grid[(machines >= 1) & (machines <= (total if total is not None else machines.max()))]
    makespan, cost = ga.evaluate(clusters, n, grid)
    keep = ga.staircase(makespan, cost)
    return list(zip(makespan[keep].tolist(), cost[keep].tolist()))


def same_points(a, b) -> bool:
    """Two lists of (makespan, cost) points equal to float noise."""
    return len(a) == len(b) and np.allclose(np.array(a, dtype=float).reshape(-1, 2),
                                            np.array(b, dtype=float).reshape(-1, 2), rtol=1e-12, atol=1e-12)


def ratios(approx, exact) -> tuple[float, float]:
    """Hypervolume of ``approx`` over that of ``exact`` (linear, log10), reference: exact nadir + 10 %."""
    out = []
    for log in (False, True):
        ref = reference_point(exact, log=log)
        out.append(hypervolume(approx, ref, log=log) / hypervolume(exact, ref, log=log))
    return out[0], out[1]


def assert_valid_front(front: list[Estimate], clusters: list[ClusterPlan], n: int, total: int | None = None) -> None:
    assert front
    planner = Planner(clusters, n)
    for e in front:
        counts = [e.machines[c.name] for c in clusters]
        assert set(e.machines) == {c.name for c in clusters}
        assert all(0 <= a <= min(c.max, n) for a, c in zip(counts, clusters))
        assert sum(counts) >= 1
        if total is not None:
            assert sum(counts) <= total
        assert planner.estimate(e.machines) == e  # the planner's numbers, exactly
    for before, after in itertools.pairwise(front):  # fastest first, each slower one strictly cheaper
        assert before.makespan_s < after.makespan_s
        assert before.cost > after.cost
    for a, b in itertools.permutations(front, 2):  # mutually non-dominated
        assert not (a.makespan_s <= b.makespan_s and a.cost <= b.cost)
    assert len({tuple(e.machines.values()) for e in front}) == len(front)


# ---------------------------------------------------------------- parameters
def test_params_defaults_are_the_papers():
    p = GAParams()
    assert (p.population_size, p.elite_fraction, p.crossover_fraction) == (2000, 0.2, 0.4)
    assert (p.cost_fraction, p.makespan_fraction, p.sum_fraction) == (0.2, 0.2, 0.5)
    assert p.mutation_probability == 1 / 15000 and p.blx_alpha == 0.3
    assert (p.front_threshold, p.max_restarts) == (15, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.population_size = 10  # type: ignore[misc]


@pytest.mark.parametrize("bad", [{"population_size": 0}, {"generations": -1}, {"elite_fraction": 1.5},
                                 {"mutation_probability": -0.1}, {"blx_alpha": -1.0}, {"grid_cells": 0},
                                 {"cost_fraction": 0.5, "makespan_fraction": 0.5, "sum_fraction": 0.5},
                                 {"population_size": True}, {"population_size": 1}])
def test_params_refuse_bad_values(bad):
    with pytest.raises(ValueError):
        GAParams(**bad)


def test_bad_arguments():
    with pytest.raises(ValueError, match="max_machines"):
        ga_front(TWO, 10, 0, GAParams(**SMALL), max_machines=0)
    with pytest.raises(ValueError, match="every max is 0"):
        ga_front([ClusterPlan("a", 1.0, 1.0, HOUR, 0)], 10, 0, GAParams(**SMALL))
    with pytest.raises(ValueError):
        ga_front(TWO, 0, 0)
    with pytest.raises(TypeError):
        ga_front(TWO, 10, 0, params={"population_size": 10})  # type: ignore[arg-type]


# ---------------------------------------------------------------- the cost model
def test_evaluate_matches_planner_estimate():
    rng = np.random.default_rng(7)
    for clusters, n in ((MIXED, 37), (MIXED, 5000), (paper_mix(40, 60, 100), 1000), (paper_six(40, 60), 1000)):
        planner = Planner(clusters, n)
        rows = rng.integers(0, [c.max + 1 for c in clusters], size=(300, len(clusters)))
        rows = rows[rows.sum(axis=1) > 0]
        makespan, cost = ga.evaluate(clusters, n, rows)
        for row, m, c in zip(rows, makespan, cost):
            e = planner.estimate({cl.name: int(a) for cl, a in zip(clusters, row)})
            assert m == pytest.approx(e.makespan_s, rel=1e-12)
            assert c == pytest.approx(e.cost, rel=1e-12, abs=1e-12)
    with pytest.raises(ValueError):
        ga.evaluate(TWO, 10, [[0, 0]])
    with pytest.raises(ValueError):
        ga.evaluate(TWO, 10, [[1, 0, 0]])


# ---------------------------------------------------------------- the operators
def test_fitness_algorithm_2():
    # costs 1..5 and makespans 50..10 (one cell per unit with G = 4): closeness (max - v + 1) / diff
    cost = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    makespan = np.array([50.0, 40.0, 30.0, 20.0, 10.0])
    fit = ga.fitness(makespan, cost, grid_cells=4)
    cl_cost = np.array([5, 4, 3, 2, 1]) / 4
    cl_msp = np.array([1, 2, 3, 4, 5]) / 4
    assert fit == pytest.approx(np.maximum(cl_cost, cl_msp) * cl_cost * cl_msp)
    assert (fit > 0).all()
    # one value for everyone: closeness 1, no division by zero
    assert ga.fitness(np.full(3, 7.0), np.zeros(3)).tolist() == pytest.approx(
        ga.fitness(np.full(3, 7.0), np.ones(3)).tolist())
    assert ga.fitness(np.array([1.0, 2.0]), np.zeros(2), grid_cells=10) == pytest.approx([1.1 * 1.1, 0.1])


def test_blx_figure_2_and_equal_parents():
    """Figure 2 (line 267): parents 10 and 38, a = 0.3, maxM = 40: every integer from 2 to 40."""
    rng = np.random.default_rng(1)
    p1 = np.full((20000, 1), 10)
    p2 = np.full((20000, 1), 38)
    children = ga.blx_children(p1, p2, np.array([40]), 0.3, rng)
    assert set(children.ravel().tolist()) == set(range(2, 41))
    same = ga.blx_children(np.full((100, 2), 7), np.full((100, 2), 7), np.array([40, 9]), 0.3, rng)
    assert (same == 7).all()  # d = 0: the parents' gene
    low = ga.blx_children(np.full((5000, 1), 0), np.full((5000, 1), 3), np.array([3]), 0.3, rng)
    assert set(low.ravel().tolist()) == {0, 1, 2, 3}  # clipped at 0 and at maxM


def test_repair_scales_down_and_fills_empty_rows():
    clusters = [ClusterPlan("a", 10.0, 1.0, HOUR, 6), ClusterPlan("b", 10.0, 1.0, HOUR, 6),
                ClusterPlan("c", 10.0, 1.0, HOUR, 0)]
    model = ga._Model(clusters, 100, max_machines=5)
    rows = np.array([[5, 5, 0], [1, 4, 0], [0, 0, 0], [3, 3, 0], [5, 1, 0]])
    original = rows.copy()
    model.repair(rows, np.random.default_rng(0))
    assert rows.sum(axis=1).tolist() == [5, 5, 1, 5, 5]
    assert (rows[[0, 1, 3, 4]] <= original[[0, 1, 3, 4]]).all()  # scaling never adds to a gene
    assert rows[1].tolist() == [1, 4, 0]  # already valid: untouched
    assert rows[4].tolist() == [4, 1, 0]  # 5*5/6 = 4.17, 1*5/6 = 0.83: floors 4 + 0, remainder to b
    assert rows[2, 2] == 0  # the empty row's machine is on a cluster that allows one
    assert model.limits.tolist() == [5, 5, 0]  # no gene may exceed max_machines either


def test_staircase_algorithm_5():
    makespan = np.array([3.0, 1.0, 2.0, 1.0, 2.0, 4.0, 3.0])
    cost = np.array([2.0, 9.0, 5.0, 8.0, 5.0, 2.0, 1.0])
    assert ga.staircase(makespan, cost).tolist() == [3, 2, 6]  # (1, 8), (2, 5) once, (3, 1)


# ---------------------------------------------------------------- the GA's output
def test_same_seed_same_front():
    params = GAParams(population_size=500, generations=50)
    first = ga_front(paper_mix(40, 60, 100), 1000, 42, params)
    assert first == ga_front(paper_mix(40, 60, 100), 1000, 42, params)
    assert first == ga_front(paper_mix(40, 60, 100), 1000, np.random.default_rng(42), params)
    with_total = ga_front(paper_six(40, 60), 1000, 3, params, max_machines=100)
    assert with_total == ga_front(paper_six(40, 60), 1000, 3, params, max_machines=100)


@pytest.mark.parametrize("clusters, n, total", [
    (TWO, 100, None), (MIXED, 1000, None), (MIXED, 7, None), (MIXED, 1000, 4),
    (paper_mix(40, 60, 100), 1000, 50), (paper_six(40, 60), 1000, 100),
    ([ClusterPlan("only", 60.0, 0.5, HOUR, 3)], 10, None), ([ClusterPlan("free", 60.0, 0.0, HOUR, 5)], 10, None),
])
def test_front_is_valid(clusters, n, total):
    front = ga_front(clusters, n, 5, GAParams(**SMALL), max_machines=total)
    assert_valid_front(front, clusters, n, total)


def test_mutation_keeps_genes_in_range():
    """p_f = 1: every child gene has a bit flipped; the clip keeps it within its cluster's max."""
    clusters = paper_mix(5, 6, 7)
    front = ga_front(clusters, 100, 0, GAParams(population_size=200, generations=20, mutation_probability=1.0),
                     max_machines=12)
    assert_valid_front(front, clusters, 100, 12)


def test_restart_rule_keeps_the_bigger_front():
    """Algorithm 1 lines 12-15: a front under 15 points runs the generations once more; the
    first run is the same either way (same seed), so the result is at least as big."""
    params = GAParams(population_size=200, generations=10)
    tiny = TWO  # its exact front has 4 points: always under the threshold
    once = ga_front(tiny, 100, 3, dataclasses.replace(params, max_restarts=0))
    again = ga_front(tiny, 100, 3, params)
    assert len(again) >= len(once)
    big = paper_mix(40, 60, 100)  # a front well over 15 points: no second run, the same result
    first = ga_front(big, 1000, 3, dataclasses.replace(params, max_restarts=0))
    assert len(first) >= 15
    assert ga_front(big, 1000, 3, params) == first


@pytest.mark.parametrize("clusters, n, total", [
    (TWO, 100, None), (MIXED, 1000, None), (paper_mix(8, 8, 8), 100, None), (paper_mix(8, 8, 8), 100, 12),
])
def test_small_pools_close_to_exact(clusters, n, total):
    """Small pools: hypervolume >= 95 % of the exact front's (linear and log10). Over seeds 0-19
    these pools measure >= 0.985 linear, >= 0.956 log10."""
    exact = brute_front(clusters, n, total)
    if total is None:  # the enumeration is the planner's exact Pareto set
        pareto = Planner(clusters, n).pareto()
        assert same_points([(e.makespan_s, e.cost) for e in pareto], exact)
    front = ga_front(clusters, n, 0, max_machines=total)
    assert_valid_front(front, clusters, n, total)
    linear, log = ratios(front, exact)
    assert linear >= 0.95 and log >= 0.95
    assert linear <= 1 + 1e-9  # never better than exact


def test_paper_mix_40_60_100_with_population_2000():
    """§4.1 mix read as per-type limits 40, 60, 100 (t1.micro, m1.small, m1.medium), 1000 NDB
    tasks, population 2k. The paper's "no noticeable loss": within 2 % of the exact hypervolume
    (measured over seeds 0-19: 0.982-0.985 linear, 0.959-0.975 log10; the GA's front drops both
    ends of the exact one, see the module doc)."""
    clusters = paper_mix(40, 60, 100)
    exact = Planner(clusters, 1000).pareto()
    front = ga_front(clusters, 1000, 0)
    assert_valid_front(front, clusters, 1000)
    assert len(front) >= GAParams().front_threshold
    linear, log = ratios(front, exact)
    assert 0.98 <= linear <= 1 + 1e-9
    assert log >= 0.95
    assert front_gap(front, exact, log=True) < 0.7


def test_paper_six_types_with_a_pool_of_100():
    """The §4.1 40-60-100 mix as the paper defines it (six types, at most 40 of each on-demand and
    60 of each spot type, 100 in all). Against the exact front the faithful GA loses more than in
    the 3-type mix (seeds 0-9 measured 0.85-0.90 linear, 0.79-0.86 log10): a regression guard, not
    the paper's claim. Its front size is in the range of Table 3 (GA: 18-54 points)."""
    clusters = paper_six(40, 60)
    exact = Planner(clusters, 1000, max_machines=100).pareto()
    assert 150 <= len(exact) <= 400  # Table 3: exhaustive search 155-278 points
    front = ga_front(clusters, 1000, 0, max_machines=100)
    assert_valid_front(front, clusters, 1000, 100)
    assert 15 <= len(front) <= 60
    linear, log = ratios(front, exact)
    assert 0.8 <= linear <= 1 + 1e-9
    assert log >= 0.75


def test_capped_exact_front_matches_enumeration():
    clusters = paper_mix(6, 7, 8)
    capped = [(e.makespan_s, e.cost) for e in Planner(clusters, 100, max_machines=9).pareto()]
    assert same_points(capped, brute_front(clusters, 100, 9))
    pareto = [(e.makespan_s, e.cost) for e in Planner(clusters, 100).pareto()]
    uncapped = [(e.makespan_s, e.cost) for e in Planner(clusters, 100, max_machines=100).pareto()]
    assert same_points(uncapped, pareto)


# ---------------------------------------------------------------- comparing fronts by hand
def test_hypervolume_by_hand():
    assert hypervolume([(1.0, 3.0)], (4.0, 5.0)) == pytest.approx(3 * 2)
    # staircase (1, 3), (2, 1) under (4, 5): [1,2] x [3,5] + [2,4] x [1,5]
    assert hypervolume([(2.0, 1.0), (1.0, 3.0)], (4.0, 5.0)) == pytest.approx(1 * 2 + 2 * 4)
    # dominated, duplicate and out-of-reference points add nothing
    assert hypervolume([(2.0, 1.0), (1.0, 3.0), (3.0, 3.0), (2.0, 1.0), (5.0, 0.5), (0.5, 6.0)],
                       (4.0, 5.0)) == pytest.approx(10.0)
    assert hypervolume([], (4.0, 5.0)) == 0.0
    assert hypervolume([(4.0, 1.0)], (4.0, 5.0)) == 0.0  # on the reference: no area
    # log10: (10, 10) under (1000, 100) is 2 decades x 1 decade
    assert hypervolume([(10.0, 10.0)], (1000.0, 100.0), log=True) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        hypervolume([(0.0, 1.0)], (10.0, 10.0), log=True)
    e = Estimate(machines={"a": 1}, makespan_s=1.0, makespan_atu=1, atus={"a": 1}, cost=3.0, delta_n=0)
    assert hypervolume([e], (4.0, 5.0)) == pytest.approx(6.0)


def test_front_gap_by_hand():
    exact = [(0.0, 10.0), (5.0, 5.0), (10.0, 0.0)]  # ranges 10 and 10
    assert front_gap(exact, exact) == 0.0
    assert front_gap([(0.0, 10.0), (10.0, 0.0)], exact) == pytest.approx(math.hypot(0.5, 0.5))
    assert front_gap([(0.0, 10.0), (5.0, 6.0), (10.0, 0.0)], exact) == pytest.approx(0.1)
    assert front_gap([], exact) == math.inf
    assert front_gap([(100.0, 100.0)], [(1.0, 2.0)]) == pytest.approx(math.hypot(99, 98))  # zero ranges count as 1
    assert front_gap([(10.0, 1.0)], [(1.0, 1.0), (100.0, 10.0)], log=True) == pytest.approx(math.hypot(0.5, 1.0))
    with pytest.raises(ValueError):
        front_gap([(1.0, 1.0)], [])


def test_reference_point():
    assert reference_point([(1.0, 5.0), (3.0, 1.0)]) == pytest.approx((3.2, 5.4))
    assert reference_point([(2.0, 4.0)]) == pytest.approx((2.2, 4.4))
    assert reference_point([(10.0, 1.0), (100.0, 10.0)], log=True) == pytest.approx((10 ** 2.1, 10 ** 1.1))
