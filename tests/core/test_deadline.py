"""Seed 004's deadline ILP (master/core/deadline/ilp.py) and the --deadline policy (master/core/deadline/policy.py):
exact plans worked by hand, properties of every plan, the cross-check of the bounded-knapsack
planner with the same program swapped, exact core actions, and simulator runs that meet deadlines."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
from helpers.cores import SETTINGS, Driver, two_clusters
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bats.common.config import ClusterConfig, Config, MasterConfig
from bats.master import core as c
from bats.master.cli.sim import main as sim_main
from bats.master.core.bats import policy as b
from bats.master.core.bats.policy import Choice
from bats.master.core.deadline.ilp import (
    DeadlineCluster,
    billed_cost,
    cheapest_plan,
    earliest_deadline,
    feasible,
    interval_bounds,
    most_work_within,
    plan_work,
)
from bats.master.core.deadline.policy import STOPPED_BY_PLAN, DeadlineCore, DeadlineSettings
from bats.master.core.planning.planner import ClusterPlan, Planner
from bats.master.sim.driver import simulate
from bats.master.sim.runtimes import parse_runtimes

ROOT = Path(__file__).resolve().parents[2]
LOCAL = DeadlineCluster("local", 90.0, 0.0, 3600.0, 16)
SMALL = DeadlineCluster("small", 90.0, 0.12, 3600.0, 44)


# ---------------------------------------------------------------- exact plans
def test_intervals_are_whole_and_a_shorter_last_one():
    assert interval_bounds(3600, 600) == (0, 600, 1200, 1800, 2400, 3000, 3600)
    assert interval_bounds(4380, 600)[-2:] == (4200, 4380)  # the paper's 73 minutes: 7 + 3 min
    assert interval_bounds(300, 600) == (0, 300)


def test_the_watershed_case_stops_cloud_machines_at_the_hour():
    """Seed 004 §V-C: 1,000 tasks of 90 s, 16 free local cores and small cloud instances at $0.12
    per hour. Within 70 minutes the local cores do 16 x (4200/90 - 1) = 730.7 tasks; the 269.3 left
    need 7 small instances for the first hour (39 tasks each after the whole-task tail), $0.84: the
    paper's shape, "start 18 small instances for one hour and use the 16 local cores for the whole job"."""
    plan = cheapest_plan([LOCAL, SMALL], 1000, 4200)
    assert plan.counts == {"local": (16,) * 7, "small": (7,) * 6 + (0,)}
    assert plan.cost == pytest.approx(0.84) and billed_cost(plan) == pytest.approx(0.84)
    assert plan.describe() == "16 x local throughout; 7 x small until 1h00m"
    # an hour and a half: fewer cloud machines, still stopped at the hour
    assert cheapest_plan([LOCAL, SMALL], 1000, 4800).counts["small"] == (5,) * 6 + (0, 0)
    # within the hour it needs 10 for the whole hour
    assert cheapest_plan([LOCAL, SMALL], 1000, 3600).counts["small"] == (10,) * 6


def test_free_machines_first_then_paid_ones():
    """2 free machines of 60 s tasks do 2 x (60 - 1) = 118 tasks in an hour; 200 need 2 more paid ones."""
    local = DeadlineCluster("local", 60.0, 0.0, 3600.0, 2)
    cloud = DeadlineCluster("cloud", 60.0, 1.0, 3600.0, 10)
    assert cheapest_plan([local, cloud], 100, 3600).counts == {"local": (2,) * 6, "cloud": (0,) * 6}
    plan = cheapest_plan([local, cloud], 200, 3600)
    assert plan.counts == {"local": (2,) * 6, "cloud": (2,) * 6} and plan.cost == 2.0


def test_boot_delay_reduces_the_first_interval():
    """Booting 5 minutes costs each new small instance 300/90 tasks: 8 machines instead of 7."""
    booting = DeadlineCluster("small", 90.0, 0.12, 3600.0, 44, boot_s=300.0)
    assert cheapest_plan([LOCAL, booting], 1000, 4200).counts["small"] == (8,) * 6 + (0,)
    # machines already up need no boot: with 8 of them live, the program is the boot-free one
    live = DeadlineCluster("small", 90.0, 0.12, 3600.0, 44, boot_s=300.0, live=8)
    assert cheapest_plan([LOCAL, live], 1000, 4200).counts["small"] == (7,) * 6 + (0,)


def test_per_second_billing_is_eq_25_with_the_minimum_charge():
    """ATU 1 s, $0.001 a second: cost is machine-seconds; 50 tasks of 60 s in 30 minutes. Six
    machines for one interval (6 x 9 = 54 tasks) cost as much as two for three and finish first."""
    sec = DeadlineCluster("sec", 60.0, 0.001, 1.0, 10, min_charge_s=60.0)
    plan = cheapest_plan([sec], 50, 1800)
    assert plan.counts == {"sec": (6, 0, 0)} and plan.cost == pytest.approx(3.6) == billed_cost(plan)
    # a minimum charge longer than an interval is paid by a slot that ends before it
    long_min = DeadlineCluster("sec", 60.0, 0.001, 1.0, 10, min_charge_s=1500.0)
    plan = cheapest_plan([long_min], 50, 1800)
    assert plan.cost == pytest.approx(billed_cost(plan))


def test_the_overall_machine_limit_holds_in_every_interval():
    plan = cheapest_plan([LOCAL, SMALL], 1000, 3600, max_machines=20)
    assert plan is None  # 20 machines do 20 x 39 = 780 < 1000 in an hour
    plan = cheapest_plan([LOCAL, SMALL], 1000, 7200, max_machines=20)
    assert all(sum(plan.counts[n][i] for n in plan.counts) <= 20 for i in range(len(plan.bounds) - 1))


def test_infeasible_is_none_and_the_earliest_deadline_is_the_boundary():
    assert cheapest_plan([LOCAL], 1000, 3600) is None
    earliest = earliest_deadline([LOCAL], 1000, interval_s=600)
    # 16 machines need (1000 + 16) x 90 / 16 = 5715 s; found within a minute
    assert 5715 <= earliest <= 5715 + 60
    assert feasible([LOCAL], 1000, earliest) and not feasible([LOCAL], 1000, earliest - 60)
    assert earliest_deadline([DeadlineCluster("x", 90.0, 1.0, 3600.0, 0)], 10) is None


def test_bad_input_is_refused():
    with pytest.raises(ValueError):
        DeadlineCluster("x", 0.0, 1.0, 3600.0, 1)
    with pytest.raises(ValueError):
        cheapest_plan([LOCAL], 0, 3600)
    with pytest.raises(ValueError):
        interval_bounds(0, 600)


# ---------------------------------------------------------------- properties of every plan
small_cluster = st.builds(
    lambda k, mean, price, atu, mx, mc, boot, live: DeadlineCluster(
        f"c{k}", float(mean), price, float(atu), mx, float(mc), float(boot), min(live, mx)),
    st.integers(0, 10**6), st.sampled_from([30, 60, 90, 200, 600]), st.sampled_from([0.0, 0.1, 0.5, 1.0, 3.0]),
    st.sampled_from([60, 600, 900, 3600]), st.integers(0, 12), st.sampled_from([0, 60, 1200]),
    st.sampled_from([0, 120, 700]), st.integers(0, 4))


@settings(max_examples=60, deadline=None)
@given(clusters=st.lists(small_cluster, min_size=1, max_size=3, unique_by=lambda c: c.name),
       tasks=st.integers(1, 400), horizon=st.sampled_from([900, 1800, 3600, 4380, 7200]),
       cap=st.one_of(st.none(), st.integers(1, 15)))
def test_property_plans_keep_the_limits_are_monotone_do_the_work_and_cost_their_bill(clusters, tasks, horizon, cap):
    plan = cheapest_plan(clusters, tasks, horizon, interval_s=600, max_machines=cap)
    if plan is None:
        assert not feasible(clusters, tasks, horizon, interval_s=600, max_machines=cap)
        return
    for cl in clusters:
        xs = plan.counts[cl.name]
        assert all(0 <= x <= cl.max for x in xs)
        assert all(a >= b_ for a, b_ in zip(xs, xs[1:]))  # eq. 22
    if cap is not None:
        assert sum(plan.counts[cl.name][0] for cl in clusters) <= cap
    assert np.sum(plan_work(clusters, plan.bounds, plan.counts)) >= tasks - 1e-6
    assert plan.finish_s <= plan.horizon_s + 1e-9
    # every interval here is 600 s, a multiple of each per-minute ATU: the bill is exact
    assert plan.cost == pytest.approx(billed_cost(plan), abs=1e-9)


# ---------------------------------------------------------------- the knapsack planner, cross-checked
def swapped_fastest(clusters: list[ClusterPlan], n_tasks: int, budget: float) -> float | None:
    """The fastest speed within ``budget`` by the deadline program with objective and constraint
    swapped: for every horizon H at which some cluster's ATU count changes, the most work within
    the budget on one interval of length H (cost = price x u(H) per machine: eq. 24 or 25); the
    configuration makes the makespan if its work reaches N, and the fastest of those is the answer."""
    program = [DeadlineCluster(p.name, p.mean_s, p.price, p.atu_s, min(p.max, n_tasks), p.min_charge_s)
               for p in clusters]
    longest = n_tasks * max(p.mean_s for p in clusters)
    edges = sorted({k * p.atu_s for p in clusters for k in range(1, int(longest / p.atu_s) + 2)})
    best = None
    for horizon in edges:
        found = most_work_within(program, horizon, budget)
        if found is not None and found[0] >= n_tasks - 1e-9:
            speed = found[0] / horizon
            best = speed if best is None else max(best, speed)
    return best


@settings(max_examples=30, deadline=None)
@given(spec=st.lists(st.tuples(st.sampled_from([5.0, 12.0, 30.0, 45.0]), st.sampled_from([0.5, 1.0, 2.0, 3.0]),
                               st.sampled_from([60.0, 120.0]), st.integers(1, 4)), min_size=1, max_size=3),
       tasks=st.integers(1, 25), factor=st.sampled_from([1.0, 1.3, 2.0, 4.0]))
def test_property_the_swapped_program_agrees_with_the_knapsack_planner(spec, tasks, factor):
    clusters = [ClusterPlan(f"c{k}", mean, price, atu, mx) for k, (mean, price, atu, mx) in enumerate(spec)]
    planner = Planner(clusters, tasks)
    budget = planner.min_budget() * factor
    config = planner.fastest_within(budget)
    speed = sum(config[p.name] / p.mean_s for p in clusters)
    assert swapped_fastest(clusters, tasks, budget) == pytest.approx(speed, rel=1e-9)


# ---------------------------------------------------------------- the core: exact actions
def deadline_core(deadline_s: float, plan_only: bool = False) -> DeadlineCore:
    """test_bats_core's two clusters (a: $1, 10 s; b: $2, 5 s; ATU 100 s), 50-second intervals."""
    return DeadlineCore(range(1, 31), two_clusters(), random.Random(1), SETTINGS,
                        DeadlineSettings(deadline_s, 50.0, plan_only), max_held=1)


def sampled(core: DeadlineCore) -> tuple[Driver, c.TaskFinished, list]:
    d = Driver(core)
    assert d.feed(c.RunStarted(0.0)) == [c.Acquire("a", 2), c.Acquire("b", 2)]
    d.up(0.0, "a1", "a2", "b1", "b2")
    event, actions = d.until(lambda: core.phase != b.SAMPLING or core.finished is not None)
    return d, event, actions


def test_after_sampling_the_cheapest_plan_keeps_a_and_stops_b_at_its_atu_edge():
    """Sampling ends at t=40 with 16 tasks left and 110 s to the deadline (intervals 50, 50, 10).
    Two a machines do 2 x (100/10 - 1) = 18 >= 16 tasks in the first two intervals for one ATU each
    ($2); b is not needed: b1 and b2 go at the end of their paid ATU (100) less the margin."""
    core = deadline_core(150.0)
    d, event, actions = sampled(core)
    assert event.now == 40.0 and core.remaining == 16
    (dispatch,) = [a for a in actions if isinstance(a, c.Dispatch)]
    assert actions == [
        c.Notify("deadline plan from now (3 intervals of 50s, 16 tasks): 2 x a throughout; estimated cost 2, "
                 "done about 2m10s after the start (deadline 2m30s)"),
        c.WakeAt(90.0), c.WakeAt(90.0),  # b1, b2
        c.WakeAt(90.0),  # the next check
        dispatch,
    ]
    assert core.plan.counts == {"a": (2, 2, 0), "b": (0, 0, 0)}
    assert {m.id: (m.release_at, m.release_reason) for m in core.live_machines()} == {
        "a1": (None, ""), "a2": (None, ""), "b1": (90.0, STOPPED_BY_PLAN), "b2": (90.0, STOPPED_BY_PLAN)}
    now = event.now
    while core.finished is None:
        nxt = d.next_time()
        tick = (math.floor(now / 10.0) + 1) * 10.0
        if nxt is not None and nxt <= tick:
            event, _ = d.step()
            now = event.now
        else:
            d.feed(c.Tick(tick))
            now = tick
    report = core.report(now)
    assert core.finished.status == "done" and report["makespan_s"] <= 150.0
    assert report["policy"] == "deadline" and report["deadline"]["plans"][0]["machines"] == {"a": [2, 2, 0],
                                                                                              "b": [0, 0, 0]}
    # b1 and b2 work on until t=90, so the bag is done before a's edge at t=100: only the first ATUs are paid
    assert report["cost"]["total"] == 2 * 1.0 + 2 * 2.0 and report["makespan_s"] <= 100.0


def test_an_infeasible_deadline_stops_with_the_earliest_feasible_one():
    """At t=40, 16 tasks and 20 s left: all six machines do 3/10 + 3/5 = 0.9 task/s, less one task
    each at the end, so they need (16 + 6) / 0.9 = 24.4 s: the earliest deadline is 64.4 s (the
    binary search stops within 5 s, a tenth of the interval), 65 s once rounded up to be typed."""
    core = deadline_core(60.0)
    _d, event, actions = sampled(core)
    reason = ("deadline 1m00s cannot be met: the earliest feasible deadline is about 1m05s "
              "(16 tasks left after sampling; --deadline 65s or more)")
    assert actions[-5:] == [c.Release(m, reason) for m in ("a1", "a2", "b1", "b2")] + [c.Finish("incomplete", reason)]
    assert 64.4 <= core.earliest_s <= 64.4 + 5
    assert deadline_core(65.0) is not None and sampled(deadline_core(65.0))[0].core.plan is not None
    assert sampled(deadline_core(64.0))[0].core.plan is None


def test_plan_only_shows_the_plan_and_stops():
    core = deadline_core(150.0, plan_only=True)
    _d, _event, actions = sampled(core)
    assert isinstance(actions[0], c.Notify) and actions[-1] == c.Finish("incomplete", "stopped after the plan (--plan-only)")
    assert core.report(40.0)["deadline"]["plans"][0]["cost"] == 2.0


def test_falling_behind_replans_with_the_same_ilp():
    """As above, but from t=40 a takes 40 s a task: at the check at t=90 the plan (2 x a to t=140)
    can do about 4 of the 14 tasks left, so the core re-plans on the time left (60 s): b is needed."""
    core = deadline_core(150.0)
    d, _event, _actions = sampled(core)
    d.runtimes["a"] = 40.0
    d.running["b1"] = []
    d.running["b2"] = []
    d.through(89.0)
    actions = d.feed(c.Tick(90.0))
    notes = [a.message for a in actions if isinstance(a, c.Notify)]
    assert len(notes) == 1 and notes[0].startswith("re-planned (behind the plan:")
    assert core.plan.counts["b"][0] > 0 and len(core.plans) == 2
    assert core.reconfigurations[0]["machines"] == core.plan.initial()
    assert any(isinstance(a, c.Acquire) and a.cluster == "b" for a in actions) or any(
        m.cluster == "b" and m.release_at is None for m in core.live_machines())


def test_a_slot_ending_within_the_release_margin_is_not_acquired():
    """After sampling (t=40) b1 and b2 are kept until t=90 (the plan's first interval ends at 50 s
    from its start). A plan with a third b machine in that interval asks for it while its slot has
    time left; 5 s before the slot ends (the release margin is 10 s) it is not asked for: billed by
    the second, such a machine was let go as it came and asked for again, an endless loop."""
    core = deadline_core(150.0)
    sampled(core)
    core.plan = dataclasses.replace(core.plan, counts={"a": (2, 2, 0), "b": (3, 0, 0)})
    assert core._apply_plan(85.0) == [] and core._requested["b"] == 0
    assert core._apply_plan(41.0) == [c.Acquire("b", 1)] and core._requested["b"] == 1


# ---------------------------------------------------------------- the simulator: deadlines met
def paper_config() -> Config:
    """Seed 000's S3-4 (cluster2 3x the price, 4x the speed; 32 each, 1 h ATU)."""
    return Config(MasterConfig(), {
        "cluster1": ClusterConfig("cluster1", "local", max=32, price=3.0, atu_s=3600.0, speed=1.0),
        "cluster2": ClusterConfig("cluster2", "local", max=32, price=9.0, atu_s=3600.0, speed=4.0)})


@pytest.mark.parametrize("deadline_h", [3.0, 4.0, 6.0])
def test_sim_meets_the_deadline_on_the_paper_bag(deadline_h):
    sim = simulate(paper_config(), 1000, parse_runtimes("normal:15m,134s"), 1,
                   choice=Choice(policy="deadline", deadline=deadline_h * 3600))
    report = sim.report()
    assert report["status"] == "done" and sim.duplicates == 0
    assert report["makespan_s"] <= deadline_h * 3600 and report["deadline"]["met"] is True
    plan = report["deadline"]["plans"][0]
    assert plan["meets_deadline"] and report["cost"]["execution"] <= plan["cost"] + 1e-9


def test_sim_hybrid_free_local_and_paid_cloud_with_boot_delay():
    cfg = Config(MasterConfig(), {
        "local": ClusterConfig("local", "local", max=16, price=0.0, atu_s=3600.0),
        "small": ClusterConfig("small", "local", max=44, price=0.12, atu_s=3600.0,
                               options={"startup": 300.0, "slowdown": 1.0})})
    sim = simulate(cfg, 1000, parse_runtimes("normal:90s,10s"), 2, choice=Choice(policy="deadline", deadline=4800))
    report = sim.report()
    assert report["status"] == "done" and report["makespan_s"] <= 4800
    first = report["deadline"]["plans"][0]
    assert first["machines"]["local"][0] == 16 and max(first["machines"]["small"]) > 0
    small = [m for m in report["machines"] if m["cluster"] == "small"]
    assert small and all(m["atus"] <= 2 for m in small)


def test_sim_command_line_deadline_and_bad_flags(tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text(
        '[policy.deadline]\ninterval = "5m"\n'
        '[clusters.cloud]\nprovisioner = "local"\nmax = 10\nprice = 1.0\natu = "1h"\n')
    report = tmp_path / "r.json"
    code = sim_main(["--config", str(config), "--tasks", "200", "--runtimes", "fixed:60", "--seed", "1",
                     "--deadline", "1h", "--report", str(report), "-q"])
    data = json.loads(report.read_text())
    assert code == 0 and data["policy"] == "deadline" and data["deadline"]["interval_s"] == 300.0
    assert data["makespan_s"] <= 3600
    code = sim_main(["--config", str(config), "--tasks", "200", "--runtimes", "fixed:60", "--deadline", "10m", "-q"])
    assert code == 1
    for argv in (["--deadline", "1h", "--budget", "5"], ["--deadline", "0"], ["--deadline", "1h", "--policy", "self"]):
        assert sim_main(["--config", str(config), "--tasks", "20", "--runtimes", "fixed:60", *argv]) == 2
    err = capsys.readouterr().err
    assert "--deadline" in err


# ---------------------------------------------------------------- properties in the simulator
sim_cluster = st.fixed_dictionaries({
    "max": st.integers(1, 8),
    "price": st.sampled_from([0.0, 0.003, 0.25, 1.0, 5.0]),
    "atu_s": st.sampled_from([1.0, 60.0, 600.0, 3600.0]),
    "speed": st.sampled_from([0.5, 1.0, 3.0]),
    "startup": st.sampled_from([0.0, 90.0]),
})


def peak_live(sim, cluster: str | None = None) -> int:
    edges = []
    for m in sim.core.machines.values():
        if cluster is None or m.cluster == cluster:
            edges.append((m.acquired_at, 1))
            edges.append((m.released_at if m.released_at is not None else sim.now, -1))
    live = peak = 0
    for _t, step in sorted(edges):
        live += step
        peak = max(peak, live)
    return peak


@settings(max_examples=30, deadline=None)
@example(  # a livelock found here: two heavy-tailed tasks longer than any slot were started over forever
    clusters=[{"startup": 0.0, "speed": 0.5, "atu_s": 60.0, "price": 1.0, "max": 2},
              {"startup": 0.0, "speed": 0.5, "atu_s": 60.0, "price": 1.0, "max": 5}],
    tasks=20, spec="levy:2m,30m", hours=24.0, cap=2, seed=12624)
@example(  # an endless acquire: a slot ending within the release margin released each machine as it came
    clusters=[{"startup": 90.0, "speed": 0.5, "atu_s": 600.0, "price": 0.0, "max": 4},
              {"startup": 0.0, "speed": 3.0, "atu_s": 1.0, "price": 0.003, "max": 4}],
    tasks=227, spec="mdb", hours=5.0, cap=None, seed=1722)
@given(clusters=st.lists(sim_cluster, min_size=1, max_size=3), tasks=st.integers(20, 300),
       spec=st.sampled_from(["fixed:5m", "normal:10m,2m", "levy:2m,30m", "mdb"]),
       hours=st.sampled_from([0.5, 1.0, 2.0, 5.0, 24.0]), cap=st.one_of(st.none(), st.integers(2, 10)),
       seed=st.integers(0, 2**31))
def test_property_deadline_runs_count_every_task_once_and_keep_the_limits(clusters, tasks, spec, hours, cap, seed):
    cfg = Config(MasterConfig(max_machines=cap), {
        f"c{k}": ClusterConfig(f"c{k}", "local", max=d["max"], price=d["price"], atu_s=d["atu_s"],
                               options={"slowdown": 1.0, "startup": d["startup"]}, speed=d["speed"])
        for k, d in enumerate(clusters)})
    sim = simulate(cfg, tasks, parse_runtimes(spec), seed, choice=Choice(policy="deadline", deadline=hours * 3600))
    report = sim.report()
    counts = report["tasks"]
    assert sim.duplicates == 0 and counts["done"] + counts["failed"] + counts["not_run"] == tasks
    if report["status"] != "done":  # only an infeasible deadline stops a run (no failures, no losses here)
        assert "cannot be met" in report["reason"] or report["phase"] == "sampling", report["reason"]
    for name, cl in cfg.clusters.items():
        assert peak_live(sim, name) <= cl.max
    if cap is not None:
        assert peak_live(sim) <= cap
    for plan in report["deadline"]["plans"]:
        for xs in plan["machines"].values():
            assert all(a >= b_ for a, b_ in zip(xs, xs[1:]))


def test_a_price_change_replans_with_the_ilp():
    """b's price drops to $0.1 at t=50: two b machines (5 s a task) become the cheapest way to do
    the tasks left, and the plan moves to them."""
    core = deadline_core(150.0)
    d, _event, _actions = sampled(core)
    d.through(50.0)
    actions = d.feed(c.PriceChanged(50.0, "b", 0.1))
    assert isinstance(actions[0], c.Notify) and actions[0].message.startswith("re-planned (price of b 2 -> 0.1)")
    assert core.plans[-1]["reason"] == "price of b 2 -> 0.1" and core.plan.counts["b"][0] > 0
    assert core.handle(c.PriceChanged(51.0, "b", 0.1)) == []  # no change, no plan
