"""Billed by the second, a machine the plan lets go ends its running task first.

Per-second billing has no paid edge for a machine let go to run on to, so a release cut its running
task at once, and the task started over elsewhere from nothing: at the choice, every sampling
machine the chosen option does not keep was cut off mid-task (the study's spiky bags lost
their hours-long tasks so, and a run whose last tasks all ran on such machines ended with "no
machines left"). Now such a machine takes no new task and is let go when its task ends, as long as
the budget's ceiling keeps it (it is then reserved for like a kept machine)."""

from __future__ import annotations

import random

from bats.common.config import ClusterConfig, Config, MasterConfig
from bats.master.core.bats.policy import Choice
from bats.master.core.registry import build_core
from bats.master.sim.driver import Simulator


def test_sampling_machines_the_cheapest_option_lets_go_end_their_tasks_instead_of_being_cut_off():
    """Two clusters billed per second after a 60 s minimum, 30 s boots; 120 tasks, every 7th of
    300 s, the others 20 s; the dear cluster twice as fast and a twentieth dearer per task.
    `cheapest` keeps one machine of the cheap cluster; the dear cluster's sampling machines were
    running long tasks at the choice. Before: 6 tasks cut off (630 paid seconds thrown away),
    execution 4.63. Now the tasks far along run on; the one begun 10 s before the choice was cut
    too (its rest on the dear machine, at the dear cluster's own estimate, cost more than running
    it again): 3.813. With one estimate of the bag for both clusters (the sampled tasks on the dear
    cluster were long ones) its rest costs less there, it runs on, and nothing is cut: 3.793."""
    n = 120
    config = Config(MasterConfig(), {
        "cheap": ClusterConfig("cheap", "local", max=4, price=0.001, atu_s=1.0, min_charge_s=60.0, speed=1.0,
                               options={"slowdown": 1.0, "startup": 30.0}),
        "dear": ClusterConfig("dear", "local", max=4, price=0.0021, atu_s=1.0, min_charge_s=60.0, speed=2.0,
                              options={"slowdown": 1.0, "startup": 30.0})})
    runtimes = [300.0 if t % 7 == 0 else 20.0 for t in range(1, n + 1)]
    choice = Choice(policy="bats", schedule="cheapest", cushion=True)
    core = build_core(range(1, n + 1), config, random.Random(3), choice, max_held=config.master.worker_capacity,
                      adaptive_prefetch=config.master.prefetch is None)
    sim = Simulator(core, config, [0.0, *runtimes], choice=choice)
    sim.run()
    report = sim.report()
    assert report["status"] == "done", report["reason"]
    assert report["selected"]["machines"] == {"cheap": 1, "dear": 0}
    assert report["killed"] == {"tasks": 0, "paid_s": 0.0}
    assert report["cost"]["execution"] <= report["budget"] + report["cushion"]
    assert round(report["cost"]["execution"], 6) == 3.793
