"""Billed by the second or minute, sampling spends at most what a low estimate of the execution it
informs costs (bats.master.core.bats.sampling): past the machines' boots and minimum charges, once
every cluster has ended two tasks, the sample closes and its running tasks are censored."""

from __future__ import annotations

import random

import pytest
from helpers.cores import Driver

from bats.common.config import ClusterConfig, Config, MasterConfig, SamplingConfig
from bats.master import core as c
from bats.master.core.bats import policy as b
from bats.master.core.bats.policy import BatsCore, BatsSettings, Choice
from bats.master.sim.driver import simulate
from bats.master.sim.runtimes import parse_runtimes

SETTINGS = BatsSettings(sampling=SamplingConfig(initial_workers=2, error=0.4), monitor_interval_s=50.0,
                        release_margin_s=10.0)
DONE_SAMPLING = "sampling done: released at the end of its ATU"


def _per_second(b_price: float) -> dict[str, ClusterConfig]:
    return {"a": ClusterConfig("a", "local", max=3, price=0.01, atu_s=1.0),
            "b": ClusterConfig("b", "local", max=3, price=b_price, atu_s=1.0)}


def test_the_sample_closes_at_its_money_bound_and_censors_the_tasks_running():
    """a runs a task in 10 s for $0.01 a second, b in 1000 s for $0.1 a second; b2 comes up at
    t=500. b ends its second task at t=1500 (b2's first copy): by then the machines have spent
    279.78 past their first second (a: 2 x 14.99, b1: 149.9, b2: 99.9), 30 of it on the 300 results
    a recorded (10 s at $0.01 each, the bag's work), so 249.78 only measured, while the 700 tasks left
    cost at least 700 x 0.1 x 300 / 302 = 69.54 on a (its 300 tasks of 10 s, and 2 just begun,
    counted at 0 s). The sample closes there instead of waiting until t=3500 for b's last copies:
    b1's copy of the third replicated task (a's copy is its result) only measured, so it stops,
    censored at 500 s; a's two tasks just begun are the bag's and run on."""
    core = BatsCore(range(1, 1001), _per_second(0.1), random.Random(1), SETTINGS, max_held=1)
    d = Driver(core, {"a": 10.0, "b": 1000.0})
    assert d.feed(c.RunStarted(0.0)) == [c.Acquire("a", 2), c.Acquire("b", 2)]
    d.up(0.0, "a1", "a2", "b1")
    d.through(499.0)
    (first,) = d.up(500.0, "b2")
    assert first == c.Dispatch("b2", core.sample.order[1], 2)  # b2's first copy: its cluster's second
    d.through(1499.0)
    assert core.phase == b.SAMPLING and core.sample.done == core.sample.target  # only b's copies are missing
    event, actions = d.until(lambda: core.phase != b.SAMPLING)
    assert (event.now, event.machine) == (1500.0, "b2") and core.phase == b.OFFERING
    notify = c.Notify("sampling closed at its money bound: 249.78 spent only to measure, the execution it informs "
                      "is estimated at 69.5364 at least; 3 sampled task(s) still running count as lasting longer "
                      "than they have run (each runs on as the bag's work while its machine is kept, a copy that "
                      "only measured stops)")
    stop = c.Cancel("b1", core.sample.order[2], 2, "sampling closed at its money bound: the copy only measured")
    offer = next(a for a in actions if isinstance(a, c.OfferOptions))
    # billed by the second with no boot to save, the sampling machines go at the offer
    assert actions == [notify, stop, *[c.WakeAt(1500.0)] * 4, offer,
                       *[c.Release(m, DONE_SAMPLING) for m in ("a1", "a2", "b1", "b2")]]
    assert offer.tasks == 700 and core.sample.closed
    assert core.sample.censored == {"a": [0.0, 0.0], "b": [500.0]}
    # the stopped copy still counts for b as a task of more than 500 s (the estimates, the odds)
    assert core._seen_running("b", 1500.0) == [500.0]
    report = core.report(1500.0)
    assert report["sampling_bound"] == {"spent": 249.78, "execution_floor": 69.536423841,
                                        "censored": {"a": [0.0, 0.0], "b": [500.0]}}
    # the 300 results recorded while sampling, every one on a (10 s at $0.01): the bag's work
    assert report["cost"]["sampling"] == 280.0 and report["cost"]["sampling_work"] == 30.0


def test_below_its_bound_the_sample_asks_to_wake_when_the_money_may_reach_it():
    """With b at $0.001 a second, b's second task at t=1500 finds 29.98 + 1.499 + 0.999 = 32.478
    spent past the first seconds, 2.478 of it only measuring (a's 300 results took 30), below the
    69.54 the tasks left cost at least: the sample goes on, and asks to be woken when that money,
    spent at $0.022 a second, may reach the bound."""
    core = BatsCore(range(1, 1001), _per_second(0.001), random.Random(1), SETTINGS, max_held=1)
    d = Driver(core, {"a": 10.0, "b": 1000.0})
    d.feed(c.RunStarted(0.0))
    d.up(0.0, "a1", "a2", "b1")
    d.through(499.0)
    d.up(500.0, "b2")
    d.through(1499.0)
    event, actions = d.until(lambda: d.now >= 1500.0 and d.running["b2"][0][0] > 1500.0)  # b2's result at t=1500
    assert (event.now, event.machine, core.phase) == (1500.0, "b2", b.SAMPLING)
    (wake,) = [a for a in actions if isinstance(a, c.WakeAt)]
    assert wake.at == pytest.approx(1500.0 + (700 * 0.1 * 300 / 302 - 2.478) / 0.022)
    assert not core.sample.closed


def test_hourly_clusters_sample_as_the_paper_does():
    hourly = {name: ClusterConfig(name, "local", max=3, price=cl.price, atu_s=3600.0)
              for name, cl in _per_second(0.1).items()}
    core = BatsCore(range(1, 1001), hourly, random.Random(1), SETTINGS, max_held=1)
    d = Driver(core, {"a": 10.0, "b": 1000.0})
    d.feed(c.RunStarted(0.0))
    d.up(0.0, "a1", "a2", "b1", "b2")
    d.through(1500.0)
    assert core.phase == b.SAMPLING and not core.sample.closed  # b's copies run on to t=4000


def test_a_small_bag_billed_by_the_second_does_not_wait_for_a_slow_clusters_copies():
    """60 tasks of 5 s on a fast cluster; the slow one (speed 0.02: 250 s a task, dearer per task)
    would hold the sample until its seven copies end. The bound closes it once the slow cluster has
    ended two: the bag ends, within budget, for less than waiting cost."""
    clusters = {"fast": ClusterConfig("fast", "local", max=4, price=0.0025, atu_s=1.0, min_charge_s=60.0,
                                      options={"startup": 20.0}),
                "slow": ClusterConfig("slow", "local", max=4, price=0.02, atu_s=1.0, min_charge_s=60.0,
                                      options={"startup": 20.0}, speed=0.02)}
    sim = simulate(Config(MasterConfig(), clusters), 400, parse_runtimes("fixed:5"), 1,
                   choice=Choice(schedule="cheapest", cushion=True))
    report = sim.report()
    assert report["status"] == "done" and report["tasks"]["done"] == 400
    bound = report["sampling_bound"]
    assert bound is not None and bound["spent"] >= bound["execution_floor"]
    # waiting for every slow copy (4 slow machines, two rounds of 250 s after a 20 s boot) would
    # have cost the slow cluster alone 4 x 520 x 0.02 = 41.6
    assert report["cost"]["sampling"] < 4 * 520 * 0.02
    assert report["cost"]["execution"] <= report["budget"] + report["cushion"] + 1e-9
