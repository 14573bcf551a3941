"""The odds of an option (bats.master.core.planning.odds): the replay's arithmetic on known runtimes,
its tail allowance on bags whose long tasks a sample misses, and the replay against the simulator."""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest
from helpers.cores import sampled

from bats.common.config import ClusterConfig, Config, MasterConfig
from bats.master import core as c
from bats.master.core.actions import WarnShort
from bats.master.core.bats.policy import BatsCore, Choice
from bats.master.core.events import BudgetRaised, ScheduleChosen
from bats.master.core.option import Odds, odds_from_record, odds_record
from bats.master.core.planning import odds
from bats.master.core.planning.clusters import ClusterPlan
from bats.master.core.planning.odds import RuntimeModel, fleet_of, replay
from bats.master.core.planning.paid_time import whole_tasks_makespan
from bats.master.sim.driver import simulate
from bats.master.sim.runtimes import parse_runtimes


def test_equal_runtimes_replay_to_the_whole_task_makespan_and_the_bill():
    # 100 tasks of 100 s: 3 machines at 100 s a task, 2 at 50 s; every machine up < 1 ATU
    clusters = [ClusterPlan("a", 100.0, 1.0, 3600.0, 10), ClusterPlan("b", 50.0, 3.0, 3600.0, 10)]
    fleet = fleet_of({"a": 3, "b": 2}, clusters, {"a": 1.0, "b": 0.5})
    makespan, cost = replay(fleet, 100, RuntimeModel.of([100.0] * 30), np.random.default_rng(1), 20)
    assert makespan.tolist() == [whole_tasks_makespan(100, [(3, 100.0, 0.0, math.inf), (2, 50.0, 0.0, math.inf)])] * 20
    assert makespan[0] == 1450.0
    assert cost.tolist() == [3 * 1.0 + 2 * 3.0] * 20


def test_a_boot_delays_new_machines_and_paid_time_left_is_not_billed_again():
    clusters = [ClusterPlan("a", 100.0, 2.0, 600.0, 10, release_s=0.0)]
    # one machine up with 450 s paid left, one new machine that boots in 50 s
    fleet = fleet_of({"a": 2}, clusters, {"a": 1.0}, paid_left={"a": [450.0]}, boot_s={"a": 50.0})
    makespan, cost = replay(fleet, 10, RuntimeModel.of([100.0] * 10), np.random.default_rng(2), 5)
    # the machine up starts at 0 and takes 5 tasks (ends 500), the new one at 50, 5 tasks (ends 550)
    assert makespan.tolist() == [550.0] * 5
    # up: 500 s past 450 s paid -> one more ATU; new: 550 s from its acquisition -> one ATU
    assert cost.tolist() == [4.0] * 5


def test_a_machine_let_go_takes_only_the_tasks_that_end_before_its_release():
    clusters = [ClusterPlan("a", 100.0, 1.0, 3600.0, 10)]
    # the option keeps one of two machines up; the other has 250 s left: two tasks fit, not three
    fleet = fleet_of({"a": 1}, clusters, {"a": 1.0}, paid_left={"a": [3000.0, 250.0]})
    makespan, cost = replay(fleet, 10, RuntimeModel.of([100.0] * 10), np.random.default_rng(3), 5)
    assert makespan.tolist() == [800.0] * 5  # 8 tasks on the kept machine, 2 on the other
    assert cost.tolist() == [0.0] * 5  # both inside the hour already paid


def test_a_running_task_holds_its_slot_at_least_until_its_elapsed_time_is_passed():
    clusters = [ClusterPlan("a", 100.0, 1.0, 3600.0, 10)]
    fleet = fleet_of({"a": 1}, clusters, {"a": 1.0}, paid_left={"a": [3600.0]}, running={"a": [[40.0]]})
    makespan, _cost = replay(fleet, 2, RuntimeModel.of([100.0] * 10), np.random.default_rng(4), 5)
    assert makespan.tolist() == [260.0] * 5  # 60 s left of the running task, then two of 100 s


def test_a_task_running_on_a_machine_let_go_past_its_release_is_cut_and_run_again_on_a_kept_one():
    clusters = [ClusterPlan("a", 100.0, 1.0, 3600.0, 10)]
    # kept: 3000 s paid left, idle; let go: 50 s left, running a task 20 s in (80 s to go): the
    # execution lets it go at its edge, the task comes back and runs again from its start
    fleet = fleet_of({"a": 1}, clusters, {"a": 1.0}, paid_left={"a": [3000.0, 50.0]}, running={"a": [[], [20.0]]})
    makespan, cost = replay(fleet, 2, RuntimeModel.of([100.0] * 10), np.random.default_rng(5), 5)
    # the kept machine runs a task from 0 to 100 s, the task cut at 50 s from 100 to 200, the last to 300
    assert makespan.tolist() == [300.0] * 5
    assert cost.tolist() == [0.0] * 5
    # with nothing kept to run it again the bag never ends
    alone = fleet_of({"a": 0}, clusters, {"a": 1.0}, paid_left={"a": [50.0]}, running={"a": [[20.0]]})
    makespan, _cost = replay(alone, 0, RuntimeModel.of([100.0] * 10), np.random.default_rng(5), 3)
    assert np.isinf(makespan).all()


def test_an_empty_fleet_never_ends_the_bag():
    fleet = fleet_of({}, [ClusterPlan("a", 100.0, 1.0)], {"a": 1.0})
    makespan, cost = replay(fleet, 3, RuntimeModel.of([1.0, 2.0]), np.random.default_rng(0), 4)
    assert np.isinf(makespan).all() and (cost == 0).all()


def test_the_odds_round_trip_through_the_report():
    o = Odds(10.0, 12.5, 3.0, 4.25, 200)
    assert odds_from_record(odds_record(o)) == o
    assert odds_record(None) is None and odds_from_record(None) is None


def _heavy_bag(rng: np.random.Generator, n: int) -> np.ndarray:
    """Median about 14 s, mean about 550 s, 1 % of the tasks (about 4 h each) holding a quarter of
    the work; a fifth of the tasks around half an hour."""
    u = rng.random(n)
    return np.where(u < 0.01, rng.lognormal(math.log(13000.0), 0.4, n),
                    np.where(u < 0.21, rng.lognormal(math.log(1700.0), 0.7, n), rng.lognormal(math.log(10.0), 1.0, n)))


def _first_come(runtimes: np.ndarray, machines: int, atu_s: float) -> tuple[float, float]:
    """The true makespan and ATUs of handing each task to the machine that frees first."""
    free = [(0.0, i) for i in range(machines)]
    ends = [0.0] * machines
    for r in runtimes:
        t, i = heapq.heappop(free)
        heapq.heappush(free, (t + r, i))
        ends[i] = t + r
    return max(ends), float(sum(math.ceil(e / atu_s) for e in ends if e > 0))


def _coverage(bags: int, cap: float, monkeypatch) -> tuple[float, float]:
    monkeypatch.setattr(odds, "TAIL_CAP", cap)
    rng = np.random.default_rng(11)
    clusters = [ClusterPlan("a", 600.0, 1.0, 600.0, 20)]
    makespan_in = cost_in = 0
    for _ in range(bags):
        bag = _heavy_bag(rng, 1000)
        sample, rest = bag[:30], bag[30:]
        true_makespan, true_atus = _first_come(rest, 20, 600.0)
        found = odds.odds_of(fleet_of({"a": 20}, clusters, {"a": 1.0}), len(rest), RuntimeModel.of(sample), rng, 100)
        makespan_in += true_makespan <= found.makespan_p90_s
        cost_in += true_atus <= found.cost_p99
    return makespan_in / bags, cost_in / bags


def test_the_tail_allowance_covers_bags_whose_long_tasks_the_sample_misses(monkeypatch):
    bag = _heavy_bag(np.random.default_rng(1), 100_000)
    top = np.sort(bag)[-1000:]
    assert 0.2 < top.sum() / bag.sum() < 0.3 and np.median(bag) < 30 < 400 < bag.mean()
    with_tail = _coverage(30, odds.TAIL_CAP, monkeypatch)
    without = _coverage(30, 1.0, monkeypatch)  # the plain bootstrap: nothing longer than seen
    assert with_tail[0] >= 0.85 and with_tail[1] >= 0.9
    assert without[0] < with_tail[0]


def _few_long_bag(rng: np.random.Generator, n: int) -> np.ndarray:
    """Tasks of about 10 minutes, 1 in 400 of them 40 times longer (about 9 % of the work): a
    sample of 30 misses them nineteen times in twenty and looks like a normal bag."""
    bag = np.maximum(1.0, rng.normal(600.0, 60.0, n))
    bag[rng.choice(n, n // 400, replace=False)] *= 40.0
    return bag


def _cost_coverage(mode_xi: float, monkeypatch) -> tuple[float, float]:
    """Of 30 bags billed by the minute on 8 machines, the share whose true cost the P99 covers,
    and the median P99 / P50 cost."""
    monkeypatch.setattr(odds, "MODE_XI", mode_xi)
    rng = np.random.default_rng(3)
    clusters = [ClusterPlan("a", 600.0, 1.0, 60.0, 8)]
    covered, widths = 0, []
    for _ in range(30):
        bag = _few_long_bag(rng, 2000)
        sample, rest = bag[:30], bag[30:]
        _makespan, true_atus = _first_come(rest, 8, 60.0)
        found = odds.odds_of(fleet_of({"a": 8}, clusters, {"a": 1.0}), len(rest), RuntimeModel.of(sample), rng, 100)
        covered += true_atus <= found.cost_p99
        widths.append(found.cost_p99 / found.cost_p50)
    return covered / 30, float(np.median(widths))


def test_the_mode_covers_long_tasks_a_tight_sample_missed(monkeypatch):
    """A tight sample says the next task is barely longer; the replay's mode keeps the chance of a
    kind of long task it missed, and the P99 cost covers such bags at a bearable width."""
    with_mode = _cost_coverage(odds.MODE_XI, monkeypatch)
    without = _cost_coverage(0.0, monkeypatch)
    assert with_mode[0] >= 0.85 and without[0] <= 0.5
    assert with_mode[1] < 1.4  # a P99 within 40 % of the P50 (about 32 % on these bags)


def _pool() -> Config:
    clusters = {
        "slow": ClusterConfig("slow", "local", max=6, price=0.02, atu_s=600.0, options={"startup": 30.0}, speed=1.0),
        "fast": ClusterConfig("fast", "local", max=6, price=0.09, atu_s=600.0, options={"startup": 30.0}, speed=3.0),
    }
    return Config(MasterConfig(), clusters)


@pytest.mark.parametrize("schedule", ["cheapest", "fastest"])
def test_the_replay_agrees_with_the_simulator(schedule):
    """The simulator runs the whole core (end-game, re-plans, ceiling) on the option the odds were
    stated for: its makespan and spend land inside the stated odds in most runs."""
    inside_makespan = inside_cost = runs = 0
    for seed in range(8):
        sim = simulate(_pool(), 400, parse_runtimes("normal:5m,60s"), seed, choice=Choice(schedule=schedule, cushion=True))
        core = sim.core
        assert isinstance(core, BatsCore) and core.selected is not None
        stated = core.selected.odds
        assert stated is not None and stated.replays == odds.REPLAYS
        assert stated.makespan_p50_s <= stated.makespan_p90_s and stated.cost_p50 <= stated.cost_p99
        report = sim.report()
        assert report["selected"]["odds"] == odds_record(stated)
        actual = core.last_finish_at - core.execution_started_at
        runs += 1
        inside_makespan += 0.8 * stated.makespan_p50_s <= actual <= 1.05 * stated.makespan_p90_s
        inside_cost += report["cost"]["execution"] <= stated.cost_p99 + 1e-9
    assert inside_makespan >= runs - 1 and inside_cost >= runs - 1


# ---------------------------------------------------------------- the early warning
def test_a_run_short_of_money_is_warned_once_with_what_it_would_take_and_a_raise_clears_it():
    """The standard run (every a task takes 10 s, every b task 5 s) executing `fastest` (2 x a, 3 x b:
    as fast as every machine, for less) on a budget cut to 0.5: the machine it adds costs $2 at
    once, so no replay ends within the money. The check warns once with the money that brings the chance to 90 %, stays quiet while
    nothing changes, and a raise by that amount clears it."""
    d, _event, _actions = sampled()
    core = d.core
    d.feed(ScheduleChosen(40.0, core.choose("fastest")))
    core.execution.budget = 0.5
    assert core.check_odds(40.0) == [WarnShort(
        0.0, 0.9, 1.5, 0.0, 0.5,
        "the run may fall short of money: 0 % chance to end within the 0.5 budget (0 spent, 16 task(s) left); "
        "another 1.5 would bring it to 90 %")]
    assert core.view().short == {"at_s": 40.0, "chance": 0.0, "threshold": 0.9, "needed": 1.5, "spent": 0.0,
                                 "money": 0.5}
    assert core.check_odds(41.0) == []  # said once, until the chance recovers
    actions = d.feed(BudgetRaised(42.0, 1.5))
    assert actions[0] == c.Notify("budget raised by 1.5 to 2")
    assert core.check_odds(43.0) == [] and core.view().short is None
    report = core.report(43.0)
    assert report["budget_raised"] == 1.5 and [w["needed"] for w in report["warnings"]] == [1.5]


def test_when_short_stop_ends_a_simulated_run_at_the_warning():
    clusters = {"a": ClusterConfig("a", "local", max=4, price=1.0, atu_s=600.0, speed=1.0)}
    bag = parse_runtimes("bimodal:1m,30m,0.05")  # a sample of a few dozen tasks often misses the long ones
    stopped = 0
    for seed in range(6):
        sim = simulate(Config(MasterConfig(), clusters), 300, bag, seed,
                       choice=Choice(schedule="cheapest", cushion=False, when_short="stop"))
        report = sim.report()
        if report["warnings"]:
            stopped += 1
            assert report["status"] == "incomplete" and report["reason"].startswith("stopped by --when-short stop")
    assert stopped >= 1


# ---------------------------------------------------------------- large bags: heads, chunks, grouped pools
def _large(kind: str) -> tuple[odds.Fleet, int, RuntimeModel]:
    """Bags too large to draw every task of every replay at once (the replay then sums the bulk of
    each slot's tasks and draws whole tasks around the end, in chunks of replays), one of them with
    a sample large enough to be resampled by groups."""
    rng = np.random.default_rng(42)
    if kind == "normal, 5,000 seen, machines up and booting":
        clusters = [ClusterPlan("a", 900.0, 1.0, 3600.0, 20), ClusterPlan("b", 225.0, 3.0, 3600.0, 10)]
        fleet = fleet_of({"a": 20, "b": 10}, clusters, {"a": 1.0, "b": 0.25}, paid_left={"a": list(rng.uniform(0, 3600, 15))},
                         boot_s={"a": 60.0, "b": 120.0}, running={"a": [[float(x)] for x in rng.uniform(0, 800, 15)]})
        return fleet, 8000, RuntimeModel.of(rng.normal(900.0, 134.0, 5000), rng.uniform(0.0, 900.0, 15))
    if kind == "lognormal, machines let go":
        clusters = [ClusterPlan("a", float(np.exp(5.5)), 1.0, 600.0, 30)]
        fleet = fleet_of({"a": 25}, clusters, {"a": 1.0}, paid_left={"a": list(rng.uniform(0, 600, 30))})
        return fleet, 6000, RuntimeModel.of(rng.lognormal(5.0, 1.0, 300))
    clusters = [ClusterPlan("a", 600.0, 2.0, 3600.0, 40)]  # a sample of 40: the tail allowance counts
    return fleet_of({"a": 40}, clusters, {"a": 1.0}, boot_s={"a": 100.0}), 10000, RuntimeModel.of(rng.normal(600.0, 120.0, 40))


@pytest.mark.parametrize("kind, tolerance", [("normal, 5,000 seen, machines up and booting", 0.005),
                                             ("lognormal, machines let go", 0.03), ("sample of 40", 0.02)])
def test_a_large_bag_replays_to_the_odds_of_drawing_every_task(kind, tolerance, monkeypatch):
    """The same replays with every task drawn at once (no chunks, no heads, no groups, no
    bundles: the replay as first written) give the same P50/P90 makespan and P50/P99 cost, within
    their Monte-Carlo noise (measured at 400 replays, between two seeds of either: the makespans
    0.05 %, 1 % and 0.3 % apart, the P99 cost, the 4th largest, up to 2 % and 5 %; with a sample
    of 40 the P50 cost up to 1.5 % apart between seeds, the unseen tasks' mode drawn as heavy as it is)."""
    fleet, n, model = _large(kind)
    assert 400 * n > odds.WHOLE_NUMBERS  # the large path is the one taken
    found = odds.odds_of(fleet, n, model, np.random.default_rng(1), 400)
    for name in ("WHOLE_NUMBERS", "POOL_GROUPS", "MAX_DRAWS"):
        monkeypatch.setattr(odds, name, 1 << 40)
    exact = odds.odds_of(fleet, n, model, np.random.default_rng(2), 400)
    for figure in ("makespan_p50_s", "makespan_p90_s", "cost_p50", "cost_p99"):
        noise = 5 * tolerance if figure == "cost_p99" else tolerance
        assert getattr(found, figure) == pytest.approx(getattr(exact, figure), rel=noise), figure


def test_a_huge_bag_and_sample_replay_in_bounded_memory():
    """200,000 tasks left on 1,000 machines after 200,000 seen: the arrays stay within a few times
    CHUNK_NUMBERS numbers (the first version took hundreds of MiB, and a copy of the sample per
    replay), and the makespan is about the bag's work over the machines' speed."""
    import tracemalloc

    rng = np.random.default_rng(3)
    clusters = [ClusterPlan("a", 900.0, 3.0, 3600.0, 500), ClusterPlan("b", 225.0, 9.0, 3600.0, 500)]
    fleet = fleet_of({"a": 500, "b": 500}, clusters, {"a": 1.0, "b": 0.25})
    model = RuntimeModel.of(rng.normal(900.0, 134.0, 200_000), rng.uniform(0.0, 900.0, 1000))
    tracemalloc.start()
    try:
        makespan, cost = replay(fleet, 200_000, model, rng, odds.MONITOR_REPLAYS)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 24 * 8 * odds.CHUNK_NUMBERS  # 24 MiB (measured: 12)
    assert np.all(np.isfinite(makespan)) and np.all(cost > 0)
    # 2,000 tasks of 900 s per 4,000 s of slots' speed: about 18 of those hourly rounds
    assert 0.9 < np.median(makespan) / (200_000 / (500 / 900.0 + 500 / 225.0)) < 1.1
