"""A run ahead of its plan moves to a faster configuration the budget left pays (on for a budget
and the fastest schedule; ``--no-speed-up`` turns it off)."""

from __future__ import annotations

from helpers.strategies import sim_config

from bats.master.cli.args import choice_from_args
from bats.master.cli.sim import build_parser
from bats.master.core.bats.policy import Choice
from bats.master.sim.driver import simulate
from bats.master.sim.runtimes import parse_runtimes

POOL = sim_config([{"max": 8, "price": 0.2, "atu_s": 600.0, "speed": 1.0, "startup": 30.0},
                   {"max": 8, "price": 0.5, "atu_s": 600.0, "speed": 3.0, "startup": 30.0}], None)


def run(schedule: str, speed_up: bool) -> dict:
    return simulate(POOL, 600, parse_runtimes("normal:10m,2m"), 4,
                    choice=Choice(schedule=schedule, speed_up=speed_up)).report()


def ahead(report: dict) -> list[dict]:
    return [r for r in report["reconfigurations"] if r["reason"].startswith("ahead of plan")]


def test_a_run_ahead_of_its_plan_spends_the_budget_it_will_not_need_on_speed():
    """$110 for 600 tasks buys 0 + 7 machines (their P99 cost 105.0): later the run is ahead of its
    plan, and the budget left pays all 16; the bag ends sooner than without the move, within the
    budget."""
    fast, plain = run("$110", True), run("$110", False)
    assert fast["selected"]["machines"] == {"c0": 0, "c1": 7}
    (move,) = ahead(fast)
    assert move["machines"] == {"c0": 8, "c1": 8} and not ahead(plain)
    assert fast["status"] == plain["status"] == "done"
    assert fast["makespan_s"] < plain["makespan_s"] - 300
    assert fast["cost"]["execution"] <= fast["budget"] + 1e-9


def test_the_cheapest_schedule_keeps_its_money():
    assert not ahead(run("cheapest", True))


def test_no_speed_up_is_a_flag():
    parser = build_parser()
    args = parser.parse_args(["--tasks", "5", "--runtimes", "fixed:1", "--schedule", "fastest", "--no-speed-up"])
    assert choice_from_args(args, POOL).speed_up is False
    args = parser.parse_args(["--tasks", "5", "--runtimes", "fixed:1", "--schedule", "fastest"])
    assert choice_from_args(args, POOL).speed_up is True
