"""The budget ceiling under faults, in the simulator: one run checked (bench/reliability.py uses it too)."""

from __future__ import annotations

import dataclasses

from bats.common.prices import PriceTrace
from bats.master.core.bats.policy import Choice
from bats.master.sim.driver import SimFaults, simulate
from bats.master.sim.runtimes import parse_runtimes
from helpers.strategies import sim_config


def choose(cfg, tasks: int, spec: str, seed: int, how: tuple, faults: SimFaults):
    """As ``test_bats_core.choose``, from a --plan-only run with the same faults (so the sampling
    phase, and the options it ends with, are the ones the real run sees)."""
    plan = simulate(cfg, tasks, parse_runtimes(spec), seed, choice=Choice(plan_only=True), faults=faults).report()
    if not plan["options"]:
        return None
    kind, value, cushion = how
    if kind == "schedule":
        return Choice(schedule=value, cushion=cushion)
    if kind == "id":
        return Choice(schedule=str(1 + value % len(plan["options"])), cushion=cushion)
    cheapest = min(o["budget"] for o in plan["options"])
    return Choice(budget=cheapest * value, cushion=cushion)


def with_spikes(cfg, spikes):
    clusters = {}
    for (name, cluster), spike in zip(cfg.clusters.items(), spikes):
        if spike is not None:
            at, factor, length = spike
            offsets, prices = [at], [cluster.price * factor]
            if length is not None:
                offsets.append(at + length)
                prices.append(cluster.price)
            cluster = dataclasses.replace(cluster, price_trace=PriceTrace(tuple(offsets), tuple(prices)))
        clusters[name] = cluster
    return dataclasses.replace(cfg, clusters=clusters)


def check_budget(clusters, tasks, spec, how, faults, spikes, seed) -> None:
    cfg = with_spikes(sim_config(clusters, None), spikes)
    choice = choose(cfg, tasks, spec, seed, how, faults)
    if choice is None:  # done during sampling, or every machine lost before the options
        return
    sim = simulate(cfg, tasks, parse_runtimes(spec), seed, choice=choice, faults=faults)
    report = sim.report()
    counts = report["tasks"]
    assert sim.duplicates == 0
    assert counts["done"] + counts["failed"] + counts["not_run"] == tasks
    assert sim.recorded == counts["done"] + counts["failed"]
    if report["budget"] is None:  # stopped (every machine lost) before a plan and its budget existed
        assert choice.budget is None and report["status"] != "done"
        return
    limit = report["budget"] + report["cushion"]
    spent = report["cost"]["total"] if choice.budget is not None else report["cost"]["execution"]
    assert spent <= limit * (1 + 1e-9), (report["status"], report["reason"], report["cost"], limit,
                                          sim.losses, sim.boot_failures)
