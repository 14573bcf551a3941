"""The overall machine limit (seed 003 §3.1) and showing a large front (``spread``, seed 003's 15)."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest
from brute_force import configurations, pareto_points
from hypothesis import given, settings
from hypothesis import strategies as st

from bats.master.core.planning import frontier
from bats.master.core.planning import planner as p
from bats.master.core.planning.planner import ClusterPlan, Planner

HOUR = 3600.0
SCALE = 10_000  # prices in whole ten-thousandths of a dollar: $0.0031 is 31, $0.13 is 1300


# ---------------------------------------------------------------- by hand
def test_a_cap_keeps_configurations_that_plain_pruning_would_drop():
    # 20 slow machines (W = 20 * 0.5 = $10 per ATU, S = 20/1000) beat 1 fast one (W = $10, S = 1/100)
    # in both W and S, so without a cap the fast one is off the frontier. With at most 1 machine
    # in all, the fast one is the fastest configuration there is.
    clusters = [ClusterPlan("slow", 1000.0, 0.5, HOUR, 20), ClusterPlan("fast", 100.0, 10.0, HOUR, 1)]
    assert p.fastest_within(1000.0, clusters, 20) == {"slow": 20, "fast": 1}
    assert p.fastest_within(1000.0, clusters, 20, max_machines=1) == {"slow": 0, "fast": 1}
    planner = Planner(clusters, 20, max_machines=1)
    # 20 tasks: fast runs them in 2000 s (1 ATU, $10); one slow machine in 20000 s (6 ATUs, $3)
    assert [(e.machines, e.cost) for e in planner.pareto()] == \
        [({"slow": 0, "fast": 1}, 10.0), ({"slow": 1, "fast": 0}, 3.0)]
    assert planner.all_machines == {"slow": 0, "fast": 1}
    assert planner.fastest_budget() == 10.0
    assert planner.min_budget() == 3.0
    assert p.fastest_within(9.99, clusters, 20, max_machines=1) == {"slow": 1, "fast": 0}
    # The dominating configuration may fit the cap alone and not next to others: 2 slow machines
    # (W = $1, S = 2/1000) beat 1 medium one (W = $1, S = 1/600), but with at most 2 machines
    # the fastest is the fast one and the medium one: S = 1/100 + 1/600, not 1/100 + 1/1000.
    three = [ClusterPlan("slow", 1000.0, 0.5, HOUR, 2), ClusterPlan("medium", 600.0, 1.0, HOUR, 1),
             ClusterPlan("fast", 100.0, 10.0, HOUR, 1)]
    assert p.fastest_within(1000.0, three, 20) == {"slow": 2, "medium": 1, "fast": 1}
    assert p.fastest_within(1000.0, three, 20, max_machines=2) == {"slow": 0, "medium": 1, "fast": 1}
    assert p.fastest_within(1000.0, three, 20, max_machines=3) == {"slow": 1, "medium": 1, "fast": 1}


def test_a_cap_that_does_not_bind_changes_nothing():
    clusters = [ClusterPlan("a", 900.0, 3.0, HOUR, 32), ClusterPlan("b", 225.0, 12.0, HOUR, 32)]
    plain = Planner(clusters, 1000).options()
    assert Planner(clusters, 1000, max_machines=64).options() == plain
    assert Planner(clusters, 1000, max_machines=10**6).options() == plain


def test_paper_scenario_under_a_cap_of_40():
    # S1-4 (cluster2 4x as fast for the same $3): 40 machines at most. The fastest is 32 of cluster2
    # and 8 of cluster1: S = 8/900 + 32/225 = 136/900, T_e = 1000 * 900 / 136 = 6618 s -> 2 ATUs,
    # 2 * 40 * $3 = $240.
    clusters = [ClusterPlan("cluster1", 900.0, 3.0, HOUR, 32), ClusterPlan("cluster2", 225.0, 3.0, HOUR, 32)]
    planner = Planner(clusters, 1000, max_machines=40)
    assert planner.all_machines == {"cluster1": 8, "cluster2": 32}
    assert planner.fastest_budget() == 240.0
    opts = planner.options()
    named = {label: o for o in opts for label in (o.label, *o.also)}
    assert named["fastest"].machines == {"cluster1": 8, "cluster2": 32}
    assert all(sum(o.machines.values()) <= 40 for o in opts)
    assert [o.id for o in opts] == list(range(1, len(opts) + 1))


def test_a_cap_of_zero_plans_nothing_and_bad_caps_are_refused():
    clusters = [ClusterPlan("a", 900.0, 3.0, HOUR, 4)]
    planner = Planner(clusters, 10, max_machines=0)
    assert (planner.fastest_within(100.0), planner.min_budget(), planner.fastest_budget()) == (None, None, None)
    assert planner.options() == [] and planner.pareto() == []
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="overall machine limit"):
            Planner(clusters, 10, max_machines=bad)


def test_tiny_prices_next_to_large_ones_under_a_cap():
    # spot at $0.003/h next to on-demand at $0.13/h (tests/test_planner.py's pair), at most 4 machines
    cheap = [ClusterPlan("spot", 900.0, 0.003, HOUR, 3), ClusterPlan("od", 300.0, 0.13, HOUR, 3)]
    # N = 12. (1, 3): S = 1/900 + 3/300 = 10/900, T_e = 1080 s, 1 ATU: 0.003 + 0.39 = 0.393
    assert p.fastest_within(0.393, cheap, 12, max_machines=4) == {"spot": 1, "od": 3}
    # one unit ($0.001) less: (0, 3) at 0.39 (1200 s, 1 ATU) rather than (3, 1) (2700 s, 0.139)
    assert p.fastest_within(0.392, cheap, 12, max_machines=4) == {"spot": 0, "od": 3}


def test_too_many_capped_candidates_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(p, "MAX_CANDIDATES", 10)
    clusters = [ClusterPlan(f"c{i}", 900.0, 1.0 + i, atu, 3) for i, atu in enumerate((60.0, 600.0, HOUR))]
    with pytest.raises(ValueError, match="billing rules"):
        Planner(clusters, 100, max_machines=5).fastest_within(100.0)


# ---------------------------------------------------------------- against brute force
@st.composite
def capped_scenarios(draw):
    """Up to 4 clusters with small limits, prices in ten-thousandths (tiny spot prices included),
    hourly, ten-minute, minute and per-second ATUs (the last with a minimum charge), and a cap."""
    clusters, units = [], []
    for i in range(draw(st.integers(1, 4))):
        price = draw(st.sampled_from([0, 31, 30, 1300, 850, 30000, 120000]) | st.integers(0, 200_000))
        atu, min_charge = draw(st.sampled_from([(HOUR, 0.0), (HOUR, 0.0), (600.0, 0.0), (60.0, 0.0),
                                                (60.0, 120.0), (1.0, 60.0)]))
        clusters.append(ClusterPlan(
            name=f"c{i}",
            mean_s=draw(st.sampled_from([225.0, 900.0, 878.4]) | st.floats(20.0, 5000.0)),
            price=price / SCALE,
            atu_s=atu,
            max=draw(st.integers(0, 4)),
            min_charge_s=min_charge,
        ))
        units.append(price)
    n_tasks = draw(st.integers(1, 300))
    cap = draw(st.integers(0, sum(c.max for c in clusters) + 1))
    return clusters, units, n_tasks, cap


def fastest(rows, budget):
    """(speed, least cost at that speed) of the fastest row within ``budget`` units, or None."""
    feasible = [r for r in rows if r[2] <= budget]
    if not feasible:
        return None
    best = max(r[0] for r in feasible)
    return best, min(r[2] for r in feasible if r[0] >= best * (1 - 1e-12))


@settings(max_examples=100, deadline=None)
@given(capped_scenarios(), st.lists(st.floats(0.0, 1.3), min_size=3, max_size=3))
def test_capped_planner_agrees_with_brute_force(scenario, fractions):
    clusters, units, n_tasks, cap = scenario
    rows = configurations(clusters, units, n_tasks, cap)
    planner = Planner(clusters, n_tasks, max_machines=cap)
    by_config = {r[3]: r for r in rows}

    # the Pareto set of (makespan, cost), point for point, each within the cap
    mine = planner.pareto()
    expected = pareto_points(rows)
    assert len(mine) == len(expected)
    for est, (makespan, cost) in zip(mine, expected):
        assert sum(est.machines.values()) <= cap
        assert est.makespan_s == pytest.approx(makespan, rel=1e-9)
        assert round(est.cost * SCALE) == cost

    # the fastest configuration within random budgets (and within none at all)
    top = max((r[2] for r in rows), default=0)
    for fraction in fractions:
        budget = int(fraction * top)
        chosen = planner.fastest_within(budget / SCALE)
        best = fastest(rows, budget)
        if best is None:
            assert chosen is None
            continue
        row = by_config[tuple(chosen.values())]  # KeyError: over the cap or a limit
        assert row[0] == pytest.approx(best[0], rel=1e-9)
        assert row[2] == best[1]

    # "every machine in use" and B_fastest: the fastest configuration within the cap
    if not rows:
        assert planner.fastest_budget() is None and planner.options() == []
        return
    best = fastest(rows, math.inf)
    top_row = by_config[tuple(planner.all_machines.values())]
    assert top_row[0] == pytest.approx(best[0], rel=1e-9) and top_row[2] == best[1]
    assert round(planner.fastest_budget() * SCALE) == best[1]

    # every option and schedule respects the cap
    opts = planner.options()
    named = {label: o for o in opts for label in (o.label, *o.also)}
    assert named["fastest"].machines == planner.all_machines
    assert all(sum(o.machines.values()) <= cap for o in opts)
    assert {tuple(o.machines.values()) for o in opts if o.pareto} == \
        {tuple(e.machines.values()) for e in mine}
    option = planner.schedule_within(fractions[0] * top / SCALE)
    assert option is None or sum(option.machines.values()) <= cap


def test_seed_003_six_types_scaled_down_agrees_with_brute_force():
    """The paper's six-type mix at a tenth of its limits (4 on-demand, 6 spot, 10 in all): large
    enough that many configurations share a machine count and a cost per ATU, which the capped
    planner's pruning must not lose (42,875 configurations enumerated)."""
    prices = [20, 65, 130, 3, 7, 13]  # $0.001 per hour
    means = [900.0, 450.0, 150.0] * 2
    clusters = [ClusterPlan(f"t{i}", m, u / 1000, HOUR, 4 if i < 3 else 6) for i, (m, u) in enumerate(zip(means, prices))]
    for n_tasks in (100, 1000):
        rows = configurations(clusters, prices, n_tasks, 10)
        mine = Planner(clusters, n_tasks, max_machines=10).pareto()
        expected = pareto_points(rows)
        assert [(round(e.makespan_s, 6), round(e.cost * 1000)) for e in mine] == \
            [(round(m, 6), c) for m, c in expected]


def test_clamped_counts_keep_the_front_of_plain_count_pruning():
    """At the paper's own size (40 on-demand, 60 spot, 100 in all; too big to enumerate), the
    pruning with counts clamped at cap - machines still to come gives the same (W, S) front as
    plain (W, S, count) pruning, which a group with room outside (``outside`` >= cap) gets."""
    prices = [20, 65, 130, 3, 7, 13]
    means = [900.0, 450.0, 150.0] * 2
    clusters = [ClusterPlan(f"t{i}", m, u / 1000, HOUR, 40 if i < 3 else 60) for i, (m, u) in enumerate(zip(means, prices))]
    limits = [c.max for c in clusters]
    fronts = []
    for outside in (0, 100):
        weight, speed, config, count = frontier.group_frontier_capped(range(6), clusters, prices, limits, 6, 100, outside)
        assert (count <= 100).all() and (config.sum(axis=1) == count).all()
        keep = frontier.front2(weight, speed)
        fronts.append(sorted(zip(weight[keep].tolist(), speed[keep].tolist())))
    assert fronts[0] == fronts[1] and len(fronts[0]) > 500


# ---------------------------------------------------------------- spread
def front(n: int, labels: dict[int, tuple[str, ...]] | None = None) -> list[p.Option]:
    """``n`` options along a convex front, cheapest (id 1) to fastest (id n), like options()."""
    result = []
    for i in range(n):
        makespan = 1000.0 + 50_000.0 / (1 + i)
        names = (labels or {}).get(i + 1, ("pareto",))
        result.append(p.Option(id=i + 1, label=names[0], machines={"a": i + 1}, makespan_s=makespan,
                               makespan_atu=math.ceil(makespan / HOUR), cost=10.0 + 3.0 * i, cushion=0.0,
                               budget=10.0 + 3.0 * i, delta_n=0, rounding="", pareto=True, also=names[1:]))
    return result


def test_spread_keeps_small_fronts_whole():
    opts = front(15)
    assert p.spread(opts) == opts
    assert p.spread(opts, 20) == opts


def test_spread_keeps_extremes_and_labels_and_ids():
    labels = {1: ("cheapest",), 40: ("+20%", "fastest-20%"), 77: ("pareto",), 120: ("fastest",)}
    opts = front(120, labels)
    # a non-labelled, non-extreme fastest-20% in "also" of a Pareto point
    opts[59] = replace(opts[59], also=("fastest-20%",))
    shown = p.spread(opts)
    ids = [o.id for o in shown]
    assert len(shown) == 15
    assert {1, 40, 60, 120} <= set(ids)
    assert ids == sorted(ids)  # in the order given, ids untouched
    assert all(o is opts[o.id - 1] for o in shown)
    assert p.spread(opts) == shown  # deterministic
    assert p.spread(list(opts), 15) == shown


def test_spread_extremes_are_by_value_not_by_label():
    opts = front(30)
    shuffled = opts[10:] + opts[:10]  # the cheapest (id 1) and the fastest (id 30) anywhere in the list
    ids = {o.id for o in p.spread(shuffled, 5)}
    assert {1, 30} <= ids and len(ids) == 5


def test_spread_keeps_every_labelled_option_even_past_k():
    labels = {3: ("cheapest",), 9: ("+20%",), 14: ("fastest-20%",), 20: ("fastest",)}
    opts = front(25, labels)
    # cheapest by cost is id 1, fastest by makespan is id 25: six required options
    assert [o.id for o in p.spread(opts, 4)] == [1, 3, 9, 14, 20, 25]
    assert [o.id for o in p.spread(opts, 0)] == [1, 3, 9, 14, 20, 25]
    assert len(p.spread(opts, 7)) == 7
    with pytest.raises(ValueError):
        p.spread(opts, -1)


def test_spread_picks_well_spread_points_on_a_big_front():
    # 2,000 points, 1,900 of them crowded on the cheapest tenth of the front: picking every n-th
    # would follow the crowd; the spread covers the whole front
    opts = []
    xs = [0.1 * i / 1899 for i in range(1900)] + [0.1 + 0.9 * (i + 1) / 100 for i in range(100)]
    for i, x in enumerate(xs):
        opts.append(p.Option(id=i + 1, label="pareto", machines={"a": i}, makespan_s=100.0 + 10_000.0 * x,
                             makespan_atu=1, cost=100.0 * (1 - x) ** 2, cushion=0.0, budget=100.0 * (1 - x) ** 2,
                             delta_n=0, rounding="", pareto=True))

    def normalised(chosen):
        return [((o.makespan_s - 100.0) / 10_000.0, o.cost / 100.0) for o in chosen]

    def covering_radius(chosen):  # how far the worst-served option is from a shown one
        return max(min(math.dist(a, b) for b in normalised(chosen)) for a in normalised(opts))

    shown = p.spread(opts, 15)
    assert len(shown) == 15 and {1, 2000} <= {o.id for o in shown}
    points = normalised(shown)
    separation = min(math.dist(a, b) for a, b in itertools.combinations(points, 2))
    # the front is about 1.48 long: 15 points evenly along it would be ~0.106 apart. Greedy
    # farthest-first is within a factor of 2 of the best on both counts.
    assert separation > 0.106 / 2
    assert covering_radius(shown) < 0.106
    every_nth = opts[::143][:14] + [opts[-1]]
    assert covering_radius(every_nth) > 3 * covering_radius(shown)


def test_spread_of_real_options():
    clusters = [ClusterPlan("spot", 900.0, 0.0031, HOUR, 20), ClusterPlan("od", 300.0, 0.13, HOUR, 20),
                ClusterPlan("big", 120.0, 0.85, HOUR, 10)]
    opts = Planner(clusters, 2000, max_machines=30).options()
    assert len(opts) > 15
    shown = p.spread(opts)
    assert len(shown) == 15
    labelled = {o.id for o in opts if {o.label, *o.also} & set(p.LABELLED)}
    cheapest = min(opts, key=lambda o: (o.cost, o.makespan_s)).id
    quickest = min(opts, key=lambda o: (o.makespan_s, o.cost)).id
    assert labelled | {cheapest, quickest} <= {o.id for o in shown}
