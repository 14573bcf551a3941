"""Machines with several slots in bats-sim: slots run at once, contention stretches them."""

from __future__ import annotations

import dataclasses

from bats.common.config import AdaptiveConfig, ClusterConfig, Config, MasterConfig, PolicyConfig
from bats.master.core.bats.settings import Choice
from bats.master.sim.driver import simulate
from bats.master.sim.runtimes import parse_runtimes


def one_machine(slots: int, contention: float = 1.0) -> Config:
    cluster = ClusterConfig("big", "local", max=1, price=1.0, atu_s=3600.0, slots=slots, contention=contention,
                            options={"slowdown": 1.0, "startup": 0.0})
    return Config(MasterConfig(prefetch=1), {"big": cluster})


def test_four_slots_run_eight_ten_second_tasks_in_twenty_seconds():
    report = simulate(one_machine(4), 8, parse_runtimes("fixed:10s"), 1).report()
    assert report["makespan_s"] == 20.0 and report["tasks"]["done"] == 8
    assert report["clusters"]["big"]["slots"] == 4
    (machine,) = report["machines"]
    assert (machine["slots"], machine["nt"], machine["rt_s"]) == (4, 8, 80.0)  # rt in slot-seconds
    assert simulate(one_machine(1), 8, parse_runtimes("fixed:10s"), 1).report()["makespan_s"] == 80.0


def test_contention_stretches_a_task_by_the_share_of_busy_slots_when_it_starts():
    # the four start at once, each filling one more slot: 10 s x (1, 4/3, 5/3, 2) with contention 2
    report = simulate(one_machine(4, contention=2.0), 4, parse_runtimes("fixed:10s"), 1).report()
    assert abs(report["makespan_s"] - 20.0) < 1e-9
    (machine,) = report["machines"]
    assert abs(machine["rt_s"] - 10.0 * (1 + 4 / 3 + 5 / 3 + 2)) < 1e-6


def test_a_bats_run_plans_with_the_slots_and_keeps_to_its_budget():
    clusters = {
        "wide": ClusterConfig("wide", "local", max=4, price=4.0, atu_s=600.0, slots=8, contention=1.2,
                              options={"slowdown": 1.0, "startup": 0.0}),
        "narrow": ClusterConfig("narrow", "local", max=8, price=1.0, atu_s=600.0,
                                options={"slowdown": 0.5, "startup": 0.0}),
    }
    config = dataclasses.replace(one_machine(1), clusters=clusters)
    sim = simulate(config, 2000, parse_runtimes("normal:60s,10s"), 3,
                   choice=Choice(policy="bats", schedule="fastest", cushion=True))
    report = sim.report()
    assert report["tasks"]["done"] == 2000
    assert report["cost"]["execution"] <= report["budget"] + report["cushion"] + 1e-9
    assert report["selected"]["machines"]["wide"] > 0  # eight slots at 4x the price pay


def test_the_adaptive_policy_counts_a_hosts_slots():
    """seed 001's bag (256 tasks of 150 s) in an hour: about 11 one-slot hosts, a quarter of that with 4 slots."""
    def hosts(slots: int) -> int:
        cluster = ClusterConfig("ec2", "local", max=100, price=0.1, atu_s=3600.0, slots=slots,
                                options={"slowdown": 1.0, "startup": 0.0})
        config = Config(MasterConfig(), {"ec2": cluster}, policy=PolicyConfig(adaptive=AdaptiveConfig(0.5, 0.5)))
        report = simulate(config, 256, parse_runtimes("normal:150s,30s"), 1, choice=Choice(policy="adaptive")).report()
        assert report["status"] == "done"
        return report["adaptive"]["hosts"]

    one, four = hosts(1), hosts(4)
    assert one >= 10 and four <= -(-one // 4) + 1
