"""Random pools, bags and choices for the simulator's property tests (hypothesis strategies), and
choosing an option the way an operator would, from a --plan-only run with the same seed."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from bats.common.config import ClusterConfig, Config, MasterConfig
from bats.master.core.bats.policy import Choice
from bats.master.sim.driver import simulate
from bats.master.sim.runtimes import parse_runtimes

PRICES = [0.0001, 0.003, 0.02, 0.25, 1.0, 2.0, 5.0]


cluster_strategy = st.fixed_dictionaries({
    "max": st.integers(1, 8),
    "price": st.sampled_from(PRICES),
    "atu_s": st.sampled_from([1.0, 60.0, 300.0, 3600.0]),
    "speed": st.sampled_from([0.5, 1.0, 2.0, 3.0]),
    "startup": st.sampled_from([0.0, 5.0, 90.0]),
})


spec_strategy = st.one_of(
    st.integers(1, 900).map(lambda t: f"fixed:{t}"),
    st.tuples(st.integers(1, 30), st.integers(0, 300)).map(lambda ms: f"normal:{ms[0]}m,{ms[1]}s"),
    st.tuples(st.integers(1, 15), st.integers(1, 60)).map(lambda sm: f"levy:{sm[0]}m,{sm[1]}m"),
    st.just("mdb"),
)


choice_strategy = st.one_of(
    st.tuples(st.just("schedule"), st.sampled_from(["cheapest", "fastest"]), st.booleans()),
    st.tuples(st.just("id"), st.integers(1, 10_000), st.booleans()),
    st.tuples(st.just("budget"), st.sampled_from([1.0, 1.01, 1.2, 2.0, 5.0]), st.booleans()),
)


def sim_config(clusters: list[dict], prefetch: int | None) -> Config:
    return Config(MasterConfig(prefetch=prefetch), {
        f"c{k}": ClusterConfig(f"c{k}", "local", max=d["max"], price=d["price"], atu_s=d["atu_s"],
                               options={"slowdown": 1.0, "startup": d["startup"]}, speed=d["speed"])
        for k, d in enumerate(clusters)})


def choose(cfg: Config, tasks: int, spec: str, seed: int, how: tuple) -> tuple[Choice | None, dict]:
    """The choice ``how`` names, made from a --plan-only run with the same seed (None: the bag
    was done during sampling, nothing to choose)."""
    plan = simulate(cfg, tasks, parse_runtimes(spec), seed, choice=Choice(plan_only=True)).report()
    if not plan["options"]:
        assert plan["status"] == "done"
        return None, plan
    kind, value, cushion = how
    if kind == "schedule":
        return Choice(schedule=value, cushion=cushion), plan
    if kind == "id":
        return Choice(schedule=str(1 + value % len(plan["options"])), cushion=cushion), plan
    cheapest = min(o["budget"] for o in plan["options"])
    return Choice(budget=cheapest * value, cushion=cushion), plan


def replayable(report: dict) -> str:
    return json.dumps({k: v for k, v in report.items() if k != "timings"}, sort_keys=True)
