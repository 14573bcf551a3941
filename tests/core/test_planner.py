"""Budget estimates, the bounded-knapsack solver, the rounding problem and the options (seed 000 §2.3, §4.3)."""

from __future__ import annotations

import itertools

import pytest
from helpers.brute_force import configurations, pareto_points
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from bats.master.core.planning import planner as p
from bats.master.core.planning.planner import ClusterPlan, Planner

HOUR = 3600.0


def paper(price2: float, speed2: float, t1: float = 900.0, t2: float | None = None) -> list[ClusterPlan]:
    """Seed 000 §4.1: cluster1 at $3 per hour, cluster2 at ``price2`` and ``speed2`` times as fast;
    32 machines each, ATU 60 min; tasks of 15 min on cluster1 unless ``t1`` says otherwise."""
    return [ClusterPlan("cluster1", t1, 3.0, HOUR, 32),
            ClusterPlan("cluster2", t2 if t2 is not None else t1 / speed2, price2, HOUR, 32)]


def by_label(options: list[p.Option]) -> dict[str, p.Option]:
    return {label: o for o in options for label in (o.label, *o.also)}


# ---------------------------------------------------------------- estimates by hand
def test_estimate_one_atu():
    clusters = [ClusterPlan("a", 900.0, 3.0, HOUR, 4), ClusterPlan("b", 225.0, 3.0, HOUR, 4)]
    est = p.estimate({"a": 2, "b": 1}, clusters, 100)
    # S = 2/900 + 1/225 = 6/900 tasks/s; T_e = 100 * 900 / 6 = 15000 s = 4.17 ATU -> 5 ATU
    # B_e = 5 * (2 * 3 + 1 * 3) = 45; M = 18000 s: n_a = 20, n_b = 80, dN = 100 - (2*20 + 80) = -20
    assert est == p.Estimate(machines={"a": 2, "b": 1}, makespan_s=pytest.approx(15000.0), makespan_atu=5,
                             atus={"a": 5, "b": 5}, cost=45.0, delta_n=-20)


def test_estimate_with_per_cluster_atus_and_a_minimum_charge():
    clusters = [ClusterPlan("hourly", 600.0, 1.0, HOUR, 2), ClusterPlan("minutely", 600.0, 0.02, 60.0, 2),
                ClusterPlan("persec", 600.0, 0.001, 1.0, 2, min_charge_s=60.0)]
    est = p.estimate({"hourly": 1, "minutely": 1}, clusters, 10)
    # T_e = 10 / (2/600) = 3000 s. hourly: 1 ATU * $1; minutely: 50 ATUs * $0.02 = $1 -> $2
    # makespan_atu counts the longest ATU in use (1 h): 1. dN: hourly M = 3600 s -> 6 tasks,
    # minutely M = 3000 s -> 5 tasks; 10 - 11 = -1
    assert (est.makespan_s, est.makespan_atu, est.atus, est.cost, est.delta_n) == \
        (pytest.approx(3000.0), 1, {"hourly": 1, "minutely": 50}, 2.0, -1)
    short = p.estimate({"persec": 2}, clusters, 1)
    # T_e = 1 / (2/600) = 300 s -> 300 one-second ATUs each, 2 * 300 * $0.001 = $0.60
    assert (short.atus, short.cost) == ({"persec": 300}, 0.6)
    tiny = p.estimate({"persec": 2}, [ClusterPlan("persec", 20.0, 0.001, 1.0, 2, min_charge_s=60.0)], 1)
    # T_e = 10 s, but each machine pays the 60 s minimum: 2 * 60 * $0.001
    assert (tiny.atus, tiny.cost) == ({"persec": 60}, 0.12)


def test_prices_are_compared_exactly():
    clusters = [ClusterPlan("a", HOUR, 0.1, HOUR, 1), ClusterPlan("b", HOUR, 0.2, HOUR, 1)]
    # (1, 1) runs 2 tasks in exactly 1 ATU for 0.1 + 0.2, which is 0.30000000000000004 in floats
    assert p.fastest_within(0.3, clusters, 2) == {"a": 1, "b": 1}
    # below it: a alone runs the 2 tasks in 2 ATUs for 0.2 (b alone would cost 0.4)
    assert p.fastest_within(0.29, clusters, 2) == {"a": 1, "b": 0}
    cheap = [ClusterPlan("spot", 900.0, 0.003, HOUR, 3), ClusterPlan("od", 300.0, 0.13, HOUR, 3)]
    # N = 12. (3, 3): S = 3/900 + 3/300 = 1/75 -> T_e = 900 s, 1 ATU: 3 * 0.003 + 3 * 0.13 = 0.399
    assert p.fastest_within(0.399, cheap, 12) == {"spot": 3, "od": 3}
    # (2, 3): S = 2/900 + 3/300 -> T_e = 981.8 s, 1 ATU: 0.006 + 0.39 = 0.396, faster than (3, 2) at 0.269
    assert p.fastest_within(0.398, cheap, 12) == {"spot": 2, "od": 3}


def test_estimate_rejects_bad_configurations():
    clusters = [ClusterPlan("a", 900.0, 3.0, HOUR, 4)]
    with pytest.raises(ValueError, match="at least one machine"):
        p.estimate({"a": 0}, clusters, 10)
    with pytest.raises(ValueError, match="unknown cluster"):
        p.estimate({"b": 1}, clusters, 10)
    with pytest.raises(ValueError, match="tasks"):
        p.estimate({"a": 1}, clusters, 0)
    with pytest.raises(ValueError, match="names repeat"):
        Planner(clusters * 2, 10)
    with pytest.raises(ValueError, match="mean runtime"):
        ClusterPlan("x", 0.0, 1.0)
    with pytest.raises(ValueError, match="price"):
        ClusterPlan("x", 1.0, -1.0)
    with pytest.raises(ValueError, match="finite"):
        p.fastest_within(float("inf"), clusters, 10)


# ---------------------------------------------------------------- the paper's scenarios
def test_paper_fastest_budgets_match_table_1():
    # B_fastest = ATUs for 1000 tasks of 15 min on 64 machines * cost per ATU of all machines.
    # Table 1's "F.M." execution costs: S4-1 1920, S4-3 960, S1-1 768, S3-4 768, S1-4 384.
    for price2, speed2, expected in [(12, 1, 1920), (12, 3, 960), (3, 1, 768), (9, 4, 768), (3, 4, 384)]:
        assert Planner(paper(price2, speed2), 1000).fastest_budget() == expected


def test_s1_4_cheapest_and_fastest_are_sensible():
    opts = p.options(paper(3, 4), 1000)
    named = by_label(opts)
    # cluster2 is 4x as fast for the same price: B_min1 = ceil(1000 * 225 s / 3600 s) * $3 = 63 * 3 = $189,
    # and the cheapest schedule uses cluster2 only: 21 machines * 3 ATUs * $3 = $189 (63 machine-ATUs).
    # (The paper's Table 1 measured $171 with its own sampled estimates.)
    assert named["cheapest"].machines == {"cluster1": 0, "cluster2": 21}
    assert (named["cheapest"].cost, named["cheapest"].makespan_atu) == (189.0, 3)
    # fastest: all 64 machines, T_e = 1000 / (32/900 + 32/225) = 5625 s -> 2 ATUs * (96 + 96) = $384
    assert named["fastest"].machines == {"cluster1": 32, "cluster2": 32}
    assert (named["fastest"].cost, named["fastest"].makespan_atu) == (384.0, 2)
    assert [o.id for o in opts] == list(range(1, len(opts) + 1))
    assert all(a.cost <= b.cost for a, b in itertools.pairwise(opts))


def test_s3_4_reproduces_table_2():
    # The paper's estimates: T1 = 14.64 min (878.4 s; its B_min1 = $513 needs T2 in (201.6, 203.3] s).
    # With T2 = 202 s: B_min1 = ceil(1000 * 202 / 3600 = 56.1) = 57 ATUs * $9 = $513.
    planner = Planner(paper(9, 4, t1=878.4, t2=202.0), 1000)
    assert planner.min_budget() == 513.0
    named = by_label(planner.options())
    cheap = named["cheapest"]
    # BKP(513) -> (1, 28): 2 ATUs * (3 + 252) = $510; n1 = floor(7200 / 878.4) = 8, n2 = floor(7200/202) = 35,
    # dN = 1000 - (8 + 28 * 35) = 12 > 0 (the paper: 14). Case a: at 1.01 * 513 the solution is (2, 28) with
    # dN = 1000 - (16 + 980) = 4; at 1.02 * 513 = 523.26 it is (0, 29): 2 * 261 = $522, dN = 1000 - 1015 = -15.
    assert cheap.machines == {"cluster1": 0, "cluster2": 29}
    assert (cheap.budget, cheap.cost, cheap.makespan_atu, cheap.delta_n, cheap.rounding) == (513.0, 522.0, 2, -15, "a")
    assert cheap.cushion == pytest.approx(10.26)  # the paper rounds up to whole dollars: $11
    # Sched2 (1.2 * 513 = 615.6) and Sched3 (0.8 * 768 = 614.4) are the same (6, 32) in 2 ATUs, as in Table 2
    assert named["+20%"] is named["fastest-20%"]
    assert named["+20%"].machines == {"cluster1": 6, "cluster2": 32}
    assert (named["+20%"].cost, named["+20%"].makespan_atu) == (612.0, 2)  # 2 * (18 + 288)
    assert (named["fastest"].machines, named["fastest"].cost, named["fastest"].makespan_atu) == \
        ({"cluster1": 32, "cluster2": 32}, 768.0, 2)


def test_s4_1_against_table_2():
    planner = Planner(paper(12, 1, t1=878.4, t2=878.4), 1000)
    named = by_label(planner.options())
    # B_min1 = 244 ATUs * $3 = $732; the fastest within it is (4, 0) for 61 ATUs (4 * 61 * 3 = 732), as Table 2
    assert (named["cheapest"].machines, named["cheapest"].cost, named["cheapest"].makespan_atu) == \
        ({"cluster1": 4, "cluster2": 0}, 732.0, 61)
    # 1.2 * 732 = 878.4: (32, 1) runs in 878400 / 33 = 26618 s -> 8 ATUs, 8 * 108 = $864 (Table 2: (32, 1), 8 ATU)
    assert (named["+20%"].machines, named["+20%"].cost, named["+20%"].makespan_atu) == \
        ({"cluster1": 32, "cluster2": 1}, 864.0, 8)
    # 0.8 * 1920 = 1536: (32, 17) in 5 ATUs for $1500 (the paper's first solution, too), with
    # n = floor(18000 / 878.4) = 20, dN = 1000 - 49 * 20 = 20. One 1 % step (of B_fastest, $19.20) later,
    # $1555.20 still buys only (32, 17); at $1574.40 (0.82 B_fastest) (32, 18) costs 5 * 312 = $1560 and
    # dN = 1000 - 50 * 20 = 0. The paper, with its own per-cluster estimates, stopped at 0.85 with (32, 19).
    sched3 = named["fastest-20%"]
    assert (sched3.machines, sched3.cost, sched3.delta_n, sched3.rounding) == \
        ({"cluster1": 32, "cluster2": 18}, 1560.0, 0, "a")
    assert sched3.cushion == pytest.approx(38.4)
    # B_fastest = 4 ATUs * (96 + 384) = $1920 (Table 2); T_e = 13725 s, n = floor(14400 / 878.4) = 16, dN = -24
    assert (named["fastest"].cost, named["fastest"].makespan_atu, named["fastest"].delta_n) == (1920.0, 4, -24)


def test_case_b_cushion_pays_the_leftover_tasks_on_the_cheapest_machines():
    clusters = paper(12, 1, t1=920.0, t2=920.0)
    # all 64 machines: T_e = 920000 / 64 = 14375 s -> 4 ATUs (14400 s); n = floor(14400 / 920) = 15;
    # dN = 1000 - 64 * 15 = 40 <= 64 (Theorem 1). Every machine is in use: case b. One more task needs
    # ceil(16 * 920 / 3600) - 4 = 1 more ATU: 32 machines of cluster1 at $3 and 8 of cluster2 at $12 = $192.
    option = Planner(clusters, 1000).schedule_within(1920.0)
    assert (option.machines, option.delta_n, option.rounding, option.cushion) == \
        ({"cluster1": 32, "cluster2": 32}, 40, "b", 192.0)


def test_a_new_machines_boot_comes_out_of_the_paid_time_in_which_dn_counts_its_tasks():
    # 600 s paid, 60 s of boot: 5 tasks of 100 s per slot, not 6
    assert ClusterPlan("x", 100.0, 1.0, 600.0, 2, boot_s=60.0).tasks_in(600.0) == 5
    assert ClusterPlan("x", 100.0, 1.0, 600.0, 2, slots=2, boot_s=60.0).tasks_in(600.0) == 10
    assert ClusterPlan("x", 100.0, 1.0, 600.0, 2).tasks_in(600.0) == 6
    # 12 tasks on 2 machines: T_e = 600 s, one ATU each; with the boot 10 tasks fit, dN = 2, and
    # each machine's 6th task needs one more ATU: a $2 cushion (case b)
    planner = Planner([ClusterPlan("x", 100.0, 1.0, 600.0, 2, boot_s=60.0)], 12)
    option = planner.schedule_within(2.0)
    assert (option.machines, option.delta_n, option.rounding, option.cushion) == ({"x": 2}, 2, "b", 2.0)
    assert Planner([ClusterPlan("x", 100.0, 1.0, 600.0, 2)], 12).estimate({"x": 2}).delta_n == 0
    with pytest.raises(ValueError, match="boot time"):
        ClusterPlan("x", 100.0, 1.0, 600.0, 2, boot_s=-1.0)


def test_a_boot_longer_than_a_task_leaves_more_than_one_task_per_slot_to_the_cushion():
    # 4 tasks of 300 s on one machine, ATU 300 s, 350 s of boot: T_e = 1200 s (4 ATUs) ends 2 tasks
    # (dN = 2, past Theorem 1's one per machine); the 3rd needs a 5th ATU, the 4th a 6th: $2
    planner = Planner([ClusterPlan("x", 300.0, 1.0, 300.0, 1, boot_s=350.0)], 4)
    option = planner.schedule_within(4.0)
    assert (option.delta_n, option.rounding, option.cushion) == (2, "b", 2.0)
    # one pass covers one task per slot, the next is free when the ATU it added fits it too: 11
    # tasks of 200 s on 2 machines, 280 s of boot, 4 ATUs of 300 s end 8; one ATU more each ends 12
    planner = Planner([ClusterPlan("x", 200.0, 1.0, 300.0, 2, boot_s=280.0)], 11)
    option = planner.schedule_within(8.0)
    assert (option.delta_n, option.cushion) == (3, 2.0)


def test_billed_by_the_minute_or_less_a_new_machine_pays_its_boot_and_its_release():
    # per second after a minute: 120 tasks of 10 s on 2 machines are 600 s of work each, after a
    # 20 s boot and with a 6 s release: each is paid 626 s, not 600 s, and ends its 60 tasks in it
    plan = ClusterPlan("x", 10.0, 0.01, 1.0, 2, min_charge_s=60.0, boot_s=20.0, release_s=6.0)
    estimate = Planner([plan], 120).estimate({"x": 2})
    assert (estimate.cost, estimate.delta_n) == (pytest.approx(12.52), 0)
    assert plan.tasks_in(626.0) == 60 and plan.tasks_in(625.0) == 59
    # by the minute: 4 tasks of 300 s on one machine after a 350 s boot are 26 minutes, 26 paid
    planner = Planner([ClusterPlan("x", 300.0, 1.0, 60.0, 1, boot_s=350.0)], 4)
    assert planner.schedule_within(25.0) is None
    option = planner.schedule_within(26.0)
    assert (option.machines, option.cost, option.delta_n <= 0, option.cushion) == ({"x": 1}, 26.0, True, 0.0)
    # with hourly ATUs the boot comes out of the paid time (dN) but is not priced: a release
    # margin does not apply to such an ATU's tasks either
    hourly = ClusterPlan("x", 100.0, 1.0, 3600.0, 2, boot_s=60.0, release_s=60.0)
    assert (hourly.overhead_s, hourly.priced_overhead_s, hourly.tasks_in(3600.0)) == (60.0, 0.0, 35)
    with pytest.raises(ValueError, match="release time"):
        ClusterPlan("x", 100.0, 1.0, 600.0, 2, release_s=-1.0)


def test_case_a_falls_back_to_b_past_the_threshold():
    clusters = paper(12, 1, t1=878.4, t2=878.4)
    option = Planner(clusters, 1000).schedule_within(1536.0, reference=1920.0, max_raise=0.01)
    # one step of $19.20 buys nothing new, so the original (32, 17) keeps dN = 20 and the case b cushion:
    # ceil(21 * 878.4 / 3600) - 5 = 1 more ATU on 20 cluster1 machines: 20 * $3
    assert (option.machines, option.delta_n, option.rounding, option.cushion) == \
        ({"cluster1": 32, "cluster2": 17}, 20, "b", 60.0)


def test_options_merge_duplicates_and_mark_pareto():
    opts = p.options(paper(3, 1), 1000)  # S1-1: two identical clusters
    named = by_label(opts)
    # B_min1 = 250 ATUs * $3 = $750 -> (32, 18) in 5 ATUs for 50 * 5 * 3 = $750; 1.2 * 750 = 900 buys
    # everything ((32, 32) for $768), which is also "fastest"; 0.8 * 768 = 614.4 < B_min1 buys nothing.
    assert named["cheapest"].machines == {"cluster1": 32, "cluster2": 18}
    assert named["+20%"] is named["fastest"]
    assert named["+20%"].also == ("fastest",)
    assert "fastest-20%" not in named
    assert all(o.pareto for o in opts)
    assert len({tuple(o.machines.values()) for o in opts}) == len(opts)


def test_too_many_billing_rules_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(p, "MAX_CANDIDATES", 10)
    clusters = [ClusterPlan(f"c{i}", 900.0, 1.0, atu, 3) for i, atu in enumerate((60.0, 600.0, HOUR))]
    with pytest.raises(ValueError, match="billing rules"):
        Planner(clusters, 100).fastest_within(100.0)


# ---------------------------------------------------------------- against brute force
@st.composite
def scenarios(draw, max_clusters=3, max_machines=5):
    """Clusters with prices in whole thousandths (so brute force can compare money exactly)."""
    clusters, milli = [], []
    for i in range(draw(st.integers(1, max_clusters))):
        price = draw(st.sampled_from([0, 3, 130, 1000, 3000, 9000, 12000]) | st.integers(0, 20_000))
        clusters.append(ClusterPlan(
            name=f"c{i}",
            mean_s=draw(st.sampled_from([225.0, 900.0, 878.4]) | st.floats(20.0, 5000.0)),
            price=price / 1000,
            atu_s=draw(st.sampled_from([HOUR, HOUR, 600.0, 60.0])),
            max=draw(st.integers(0, max_machines)),
            min_charge_s=draw(st.sampled_from([0.0, 0.0, 120.0])),
        ))
        milli.append(price)
    return clusters, milli, draw(st.integers(1, 400))


@settings(max_examples=150, deadline=None)
@given(scenarios(), st.floats(0.0, 1.3))
def test_fastest_within_agrees_with_brute_force(scenario, fraction):
    clusters, milli, n_tasks = scenario
    rows = configurations(clusters, milli, n_tasks)
    assume(rows)
    budget_milli = int(fraction * max(r[2] for r in rows))
    chosen = p.fastest_within(budget_milli / 1000, clusters, n_tasks)
    feasible = [r for r in rows if r[2] <= budget_milli]
    if not feasible:
        assert chosen is None
        return
    best = max(r[0] for r in feasible)
    cheapest_best = min(r[2] for r in feasible if r[0] >= best * (1 - 1e-12))
    mine = next(r for r in rows if r[3] == tuple(chosen.values()))
    assert mine[0] == pytest.approx(best, rel=1e-9)
    assert mine[2] == cheapest_best


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_pareto_set_agrees_with_brute_force(scenario):
    clusters, milli, n_tasks = scenario
    rows = configurations(clusters, milli, n_tasks)
    mine = Planner(clusters, n_tasks).pareto()
    expected = pareto_points(rows)
    assert len(mine) == len(expected)
    for est, (makespan, cost) in zip(mine, expected):
        assert est.makespan_s == pytest.approx(makespan, rel=1e-9)
        assert round(est.cost * 1000) == cost


@settings(max_examples=150, deadline=None)
@given(scenarios(), st.data())
def test_theorem_1_delta_n_is_at_most_the_machine_count(scenario, data):
    clusters, _milli, n_tasks = scenario
    assume(any(c.max for c in clusters))
    config = {c.name: data.draw(st.integers(0, c.max)) for c in clusters}
    assume(any(config.values()))
    # the bound holds for any configuration: each cluster is paid for M_k >= T_e
    assert Planner(clusters, n_tasks).estimate(config).delta_n <= sum(config.values())


@settings(max_examples=100, deadline=None)
@given(scenarios(max_machines=8), st.floats(0.0, 1.5))
def test_schedules_respect_their_budget_plus_cushion(scenario, fraction):
    clusters, _milli, n_tasks = scenario
    planner = Planner(clusters, n_tasks)
    assume(any(c.max for c in clusters))
    budget = round(fraction * planner.fastest_budget(), 3)
    option = planner.schedule_within(budget)
    if option is None:
        assert planner.fastest_within(budget) is None
        return
    assert option.delta_n <= sum(option.machines.values())  # Theorem 1 on BKP solutions
    if option.rounding == "":
        assert option.delta_n <= 0 and option.cushion == 0 and option.cost <= budget + 1e-9
    elif option.rounding == "a":
        # raised to a configuration without rounding risk, or to every machine when that costs less
        # than the cushion case b needs, with the money for its own dN tasks in the cushion too
        assert option.delta_n <= 0 or option.machines == planner.all_machines
        assert 0 < option.cushion <= 0.2 * budget + 1e-9
        assert option.cost <= budget + option.cushion + 1e-9
    else:
        # (the cushion is 0 only when the cheapest extensions run on free machines)
        assert option.rounding == "b" and option.delta_n > 0 and option.cushion >= 0
        assert option.cost <= budget + 1e-9


def test_a_raise_to_every_machine_carries_the_cushion_for_their_own_rounding():
    """$0.693 buys 4 c0 + 5 c1 (dN 5: 20 tasks in one ATU of 600 s, 225 s each); case b would add
    4 one-task extensions on c0 and one on c1, $0.804 in all. Every machine costs $0.792 and its 3
    tasks past the ATU run on c0 extensions ($0.009): $0.801, so the budget is raised to it (case
    a, found by hypothesis), the cushion paying the raise and the dN tasks."""
    planner = Planner([ClusterPlan("c0", 225.0, 0.003, 600.0, 4), ClusterPlan("c1", 225.0, 0.13, 600.0, 6)], 23)
    option = planner.schedule_within(0.693)
    assert (option.machines, option.delta_n, option.rounding) == ({"c0": 4, "c1": 6}, 3, "a")
    assert (option.cost, option.cushion) == (0.792, pytest.approx(0.108))


@settings(max_examples=60, deadline=None)
@given(scenarios(max_machines=8))
def test_options_are_consistent(scenario):
    clusters, _milli, n_tasks = scenario
    planner = Planner(clusters, n_tasks)
    opts = planner.options()
    if not any(c.max for c in clusters):
        assert opts == []
        return
    named = by_label(opts)
    assert {"cheapest", "fastest"} <= set(named)
    assert named["fastest"].machines == planner.all_machines
    assert [o.id for o in opts] == list(range(1, len(opts) + 1))
    assert len({tuple(o.machines.values()) for o in opts}) == len(opts)
    pareto = {tuple(e.machines.values()) for e in planner.pareto()}
    assert {tuple(o.machines.values()) for o in opts if o.pareto} == pareto
    for o in opts:
        assert o.cost <= o.budget + o.cushion + 1e-9


# ---------------------------------------------------------------- the candidates, reused
def _fresh_candidates(planner: Planner) -> tuple:
    """The candidates as the product of the group frontiers built anew, one group at a time, and
    the Pareto set by a plain walk over them: what the planner computed before it reused its
    candidates' shape; the reference the reused path must match to the bit."""
    import numpy as np

    from bats.master.core.planning import frontier

    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(planner.clusters):
        groups.setdefault(p._billing_group(c), []).append(i)
    fronts = [frontier.group_frontier(members, planner.clusters, planner._units, planner._limits,
                                      len(planner.clusters)) for members in groups.values()]
    weights, speed, config = fronts[0][0][:, None], fronts[0][1], fronts[0][2]
    for w, s, cfg in fronts[1:]:
        left = np.repeat(np.arange(len(speed)), len(s))
        right = np.tile(np.arange(len(s)), len(speed))
        weights = np.column_stack([weights[left], w[right]])
        speed, config = speed[left] + s[right], config[left] + cfg[right]
    keep = speed > 0
    speed, config, weights = speed[keep], config[keep], weights[keep]
    makespan = planner.n_tasks / speed
    units = np.column_stack([p.billing.units_array(makespan + overhead, atu, charge)
                             for atu, charge, overhead in groups])
    cost = (weights * units).sum(axis=1)
    order = np.lexsort((cost.astype(float), makespan))
    kept: list[int] = []
    best = None
    for row in order:
        if best is not None and cost[row] >= best:
            continue
        if kept and makespan[row] <= makespan[kept[-1]] * (1 + 1e-12):
            kept.pop()
        kept.append(int(row))
        best = cost[row]
    return speed, config, makespan, cost, [config[r].tolist() for r in kept]


@pytest.mark.parametrize("means", [(300.0, 200.0, 90.0), (310.5, 199.25, 91.125), (300.0, 150.0, 100.0)])
def test_reused_candidates_match_a_fresh_build(means):
    import numpy as np

    # per-second and per-minute billing with different boots: every cluster its own billing group,
    # whose frontier is every count up to its limit whatever the runtimes; the same shape serves
    # every set of means (the last one gives exact speed ties: 2 x 300 s = 1 x 150 s); 7,056
    # candidates, enough for the Pareto set to sift them by makespan before its sort
    def clusters(t: tuple[float, float, float]) -> list[ClusterPlan]:
        return [ClusterPlan("a", t[0], 0.0007, 1.0, 20, min_charge_s=60.0, boot_s=40.0),
                ClusterPlan("b", t[1], 0.0011, 1.0, 20, min_charge_s=60.0, boot_s=90.0),
                ClusterPlan("c", t[2], 0.07, 60.0, 15, boot_s=20.0, slots=2)]

    Planner(clusters((250.0, 250.0, 250.0)), 400)._build_candidates()  # the shape built by another planner
    planner = Planner(clusters(means), 400)
    speed, config, makespan, cost, front = _fresh_candidates(planner)
    planner._build_candidates()
    assert np.array_equal(planner._speed, speed)  # bit for bit: the same floats in the same order
    assert np.array_equal(planner._machines, config)
    assert np.array_equal(planner._makespan, makespan) and np.array_equal(planner._cost, cost)
    assert planner.candidate_count > p._BINS
    assert [list(e.machines.values()) for e in planner.pareto()] == front
