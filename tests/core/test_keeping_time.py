"""A run ends when its chosen option said: the mean at the choice counts every task begun while
sampling, the options plan a little above it, the cushion still prices the paper's average, a run
short of money re-plans to what ends on time, and one whose tasks take longer than planned adds
machines (make execution-study has the figures)."""

from __future__ import annotations

import math

import pytest
from helpers.brute_force import configurations

from bats.common.config import ClusterConfig, Config, MasterConfig
from bats.master.core.bats.policy import BatsCore, Choice
from bats.master.core.planning.estimate import one_sided_z
from bats.master.core.planning.planner import ClusterPlan, Planner
from bats.master.sim.driver import Simulator, simulate
from bats.master.sim.runtimes import parse_runtimes

HOUR = 3600.0


def test_one_sided_z():
    assert one_sided_z(0.5) == 0.0
    assert one_sided_z(0.6) == pytest.approx(0.2533, abs=1e-4)
    with pytest.raises(ValueError, match="between 0 and 1"):
        one_sided_z(1.0)


@pytest.mark.parametrize("deadline", [1800.0, 3 * HOUR, 5 * HOUR, 12 * HOUR])
@pytest.mark.parametrize("budget", [40.0, 90.0, 400.0])
def test_slowest_by_is_the_slowest_configuration_that_ends_in_time_within_the_money(deadline, budget):
    clusters = [ClusterPlan("a", 900.0, 3.0, HOUR, 4), ClusterPlan("b", 300.0, 6.0, HOUR, 3)]
    planner = Planner(clusters, 100)
    rows = [r for r in configurations(clusters, [3, 6], 100)
            if r[1] <= deadline * (1 + 1e-9) and r[2] <= budget + 1e-9]
    got = planner.slowest_by(deadline, budget)
    if not rows:
        assert got is None
        return
    assert got is not None
    estimate = planner.estimate(got)
    assert estimate.makespan_s <= deadline * (1 + 1e-9) and estimate.cost <= budget + 1e-9
    # never faster than the cheapest configuration that ends in time (a point of the front)
    cheapest = min(rows, key=lambda r: (r[2], -r[0]))
    assert 100 / estimate.makespan_s <= cheapest[0] * (1 + 1e-9)


def test_slowest_by_keeps_the_machines_asked_for():
    clusters = [ClusterPlan("a", 900.0, 3.0, HOUR, 4), ClusterPlan("b", 300.0, 6.0, HOUR, 3)]
    planner = Planner(clusters, 100)
    got = planner.slowest_by(5 * HOUR, 1000.0, at_least={"a": 4})
    assert got is not None and got["a"] == 4
    assert planner.slowest_by(5 * HOUR, 1000.0, at_least={"a": 5}) is None


def two_clouds() -> Config:
    return Config(MasterConfig(), {
        "slow": ClusterConfig("slow", "local", max=8, price=1.0, atu_s=600.0, speed=1.0),
        "fast": ClusterConfig("fast", "local", max=8, price=3.0, atu_s=600.0, speed=4.0)})


class Offered(Simulator):
    """The simulator, keeping what the core's estimates were when the options were offered (the
    plan-only stop that follows lets the machines and their running tasks go)."""

    def _do_offer(self, action) -> None:
        core = self.core
        assert isinstance(core, BatsCore)
        self.at_offer = {name: (core._stats(name, core._now),
                                core._sample_estimates[name].stats(core._running_for(name, core._now)))
                         for name in core.estimates}
        self.upper = core._upper_planner(core.remaining)
        super()._do_offer(action)


def planned(runtimes: str, seed: int) -> Offered:
    sim = simulate(two_clouds(), 400, parse_runtimes(runtimes), seed, choice=Choice(policy="bats", plan_only=True),
                   simulator=Offered)
    assert isinstance(sim, Offered) and isinstance(sim.core, BatsCore) and sim.core.options
    return sim


def test_the_mean_at_the_choice_counts_the_tasks_that_ended_outside_the_sample():
    """Bimodal runtimes (2 min, 10 % of 40 min): the tasks still running when the sample
    completes are the long ones; the short ones that ended beside them now count too."""
    sim = planned("bimodal:2m,40m,0.1", 3)
    core = sim.core
    assert isinstance(core, BatsCore)
    for name, estimate in core.estimates.items():
        assert estimate.n_done == len(core._sample_estimates[name].sample) + len(core._unsampled[name])
    assert core._unsampled["fast"]
    stats, paper = sim.at_offer["fast"]
    assert paper.mean_s > 1.1 * stats.mean_s  # the paper's average leaves the short ones out


def test_the_options_plan_each_mean_at_its_one_sided_bound_and_the_cushion_prices_both_averages():
    sim = planned("levy:12m,45m", 5)
    core = sim.core
    assert isinstance(core, BatsCore) and core.settings.plan_confidence == 0.6
    z_plan, z_upper = one_sided_z(0.6), one_sided_z(0.975)  # the cushion's floor: two-sided 95 %
    for name, (mean, _sd) in core.plan_estimates.items():
        stats, _paper = sim.at_offer[name]
        assert mean == pytest.approx(stats.mean_s + z_plan * stats.sd_s / math.sqrt(stats.n_done))
    for plan in sim.upper.clusters:
        stats, paper = sim.at_offer[plan.name]
        bound = max(stats.mean_s + z_upper * stats.sd_s / math.sqrt(stats.n_done),
                    paper.mean_s + z_upper * paper.sd_s / math.sqrt(paper.n_done))
        assert plan.mean_s == pytest.approx(bound)
    # the cushion is the P99 cost above the budget (tests/core/test_odds.py); an option without odds
    # (beyond those a table shows) keeps the room of the upper means
    for option in core.options:
        if option.odds is not None:
            assert option.cushion == pytest.approx(max(0.0, option.odds.cost_p99 - option.budget), abs=1e-9) \
                or option.cushion >= option.odds.cost_p99 - option.budget
        else:
            assert option.budget + option.cushion >= sim.upper.estimate(option.machines).cost - 1e-9


def mdb_pool() -> Config:
    """A pool of a random study (705 multi-modal tasks): an hourly dear cluster and a cheap one
    billed every 10 minutes; with the seed below `cheapest` runs 2 cheap machines, and its tasks take
    longer than the sample said."""
    return Config(MasterConfig(), {
        "c0": ClusterConfig("c0", "local", max=9, price=0.1499, atu_s=3600.0, speed=6.58,
                            options={"slowdown": 1.0, "startup": 90.0}),
        "c1": ClusterConfig("c1", "local", max=10, price=0.0201, atu_s=600.0, speed=5.74,
                            options={"slowdown": 1.0, "startup": 0.0})})


@pytest.fixture
def upper_cushion(monkeypatch):
    """The options without odds, so their cushion is the room of the upper means (as before the
    odds): these runs test how the re-plans use a cushion that leaves room for more machines, which
    a P99 cushion of a plan that fits its budget does not."""
    monkeypatch.setattr(BatsCore, "_with_odds", lambda self, options, planner: options)


def test_a_run_whose_tasks_take_longer_than_planned_adds_machines_and_ends_on_time(upper_cushion):
    def run(catch_up: bool) -> dict:
        return simulate(mdb_pool(), 705, parse_runtimes("mdb"), 486215926,
                        choice=Choice(policy="bats", schedule="cheapest", cushion=True, catch_up=catch_up)).report()

    kept, caught = run(False), run(True)
    assert kept["status"] == caught["status"] == "done"
    assert kept["selected"] == caught["selected"] and caught["selected"]["machines"] == {"c0": 0, "c1": 2}
    promised = caught["selected"]["makespan_s"]
    moves = [r for r in caught["reconfigurations"] if r["reason"].startswith("behind plan")]
    assert moves and moves[0]["machines"] == {"c0": 0, "c1": 3}
    assert not [r for r in kept["reconfigurations"] if r["reason"].startswith("behind plan")]
    assert kept["makespan_s"] > caught["makespan_s"] + 0.05 * promised
    assert caught["cost"]["execution"] <= caught["budget"] + caught["cushion"] + 1e-9


def test_no_catch_up_is_a_flag():
    from bats.master.cli.args import choice_from_args
    from bats.master.cli.sim import build_parser

    parser = build_parser()
    args = parser.parse_args(["--tasks", "5", "--runtimes", "fixed:1", "--schedule", "cheapest", "--no-catch-up"])
    assert choice_from_args(args, two_clouds()).catch_up is False
    args = parser.parse_args(["--tasks", "5", "--runtimes", "fixed:1", "--schedule", "cheapest"])
    assert choice_from_args(args, two_clouds()).catch_up is True


def test_a_run_short_by_less_than_a_catch_up_keeps_its_configuration(upper_cushion):
    """A pool of a random study (625 multi-modal tasks): `cheapest` runs 9 machines billed every
    10 minutes; with this seed N_e > N_p once, by a few tasks. Moving to what ends by the chosen
    makespan would mean a dear hourly machine more; the configuration running ends the bag less
    than 1 % late, less than a catch-up would tolerate, so the run keeps it: the speeds the check
    measures are noisy, and a move costs more than it saves."""
    config = Config(MasterConfig(), {
        "c0": ClusterConfig("c0", "local", max=9, price=0.0098, atu_s=600.0, speed=4.41,
                            options={"slowdown": 1.0, "startup": 30.0}),
        "c1": ClusterConfig("c1", "local", max=16, price=0.0996, atu_s=3600.0, speed=2.62,
                            options={"slowdown": 1.0, "startup": 180.0})})
    sim = simulate(config, 625, parse_runtimes("mdb"), 1706456525,
                   choice=Choice(policy="bats", schedule="cheapest", cushion=True))
    report = sim.report()
    assert report["status"] == "done" and report["selected"]["machines"] == {"c0": 9, "c1": 0}
    assert report["reconfigurations"] == []
    core = sim.core
    assert isinstance(core, BatsCore) and core.execution_started_at is not None
    actual = core.last_finish_at - core.execution_started_at
    assert 1.0 < actual / report["selected"]["makespan_s"] < 1.05
    assert report["cost"]["execution"] <= report["budget"] + report["cushion"] + 1e-9
