"""What is shown is what runs: the options table's rows are true to the figures they show (a ``*``
means no row is as fast for less, a label whose row has a twin as fast for less moves to the twin),
declining the cushion runs a row of its own, and the report's selected option is that row."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from bats.common.config import ClusterConfig, Config, MasterConfig
from bats.master.core.bats.policy import Choice
from bats.master.core.option import Odds, Option
from bats.master.core.planning.planner import NO_CUSHION, ClusterPlan, Planner, dominates, shown
from bats.master.sim.driver import simulate
from bats.master.sim.runtimes import parse_runtimes


def row(id, label, machines, makespan_s, cost, budget=None, cushion=0.0, also=(), rounding="", odds=None):
    return Option(id=id, label=label, machines=machines, makespan_s=makespan_s, makespan_atu=1, cost=cost,
                  cushion=cushion, budget=cost if budget is None else budget, delta_n=0, rounding=rounding,
                  pareto=True, also=also, odds=odds)


def test_a_row_with_a_twin_as_fast_for_less_goes_and_its_label_follows():
    rows = [row(1, "cheapest", {"a": 2}, 300.0, 2.0),
            row(2, "pareto", {"a": 3}, 200.0, 3.0),
            row(3, "pareto", {"a": 4}, 200.0, 4.0),  # as fast as 2 for more: gone
            row(4, "fastest", {"a": 5}, 200.0, 5.0),  # its label goes to 2
            row(5, "pareto", {"a": 6}, 250.0, 6.0)]  # slower than 2 for more: gone
    assert [(o.id, o.label, o.also, o.machines, o.pareto) for o in shown(rows)] == [
        (1, "cheapest", (), {"a": 2}, True), (2, "fastest", (), {"a": 3}, True)]


def test_a_labelled_schedule_that_is_dominated_stays_without_its_star():
    rows = [row(1, "cheapest", {"a": 2}, 300.0, 2.0), row(2, "+20%", {"a": 3}, 280.0, 3.0),
            row(3, "fastest", {"a": 4}, 250.0, 2.5)]
    assert [(o.id, o.label, o.pareto) for o in shown(rows)] == [
        (1, "cheapest", True), (2, "fastest", True), (3, "+20%", False)]


def test_the_same_point_for_less_money_held_dominates_and_a_no_cushion_row_stays():
    rows = [row(1, "cheapest", {"a": 2}, 300.0, 0.0, budget=2.0),
            row(2, "pareto", {"a": 3}, 300.0, 0.0, budget=3.0),  # the machines up make both free
            row(3, "cheapest" + NO_CUSHION, {"a": 1}, 300.0, 0.0, budget=4.0),  # what declining runs
            row(4, "fastest", {"a": 5}, 100.0, 5.0)]
    out = shown(rows)
    assert [(o.id, o.label, o.machines, o.pareto) for o in out] == [
        (1, "cheapest", {"a": 2}, True), (2, "cheapest (no cushion)", {"a": 1}, False), (3, "fastest", {"a": 5}, True)]
    assert dominates(out[0], out[1]) and not dominates(out[1], out[0])


def test_with_odds_every_figure_shown_counts():
    slow_tail = Odds(300.0, 900.0, 2.0, 2.0, 200)
    rows = [row(1, "cheapest", {"a": 2}, 300.0, 2.0, odds=slow_tail),
            row(2, "pareto", {"a": 3}, 300.0, 3.0, odds=Odds(300.0, 400.0, 3.0, 3.0, 200))]
    # as fast at the P50 for less, but not at the P90: neither is dominated, both are shown
    assert [(o.label, o.pareto) for o in shown(rows)] == [("cheapest", True), ("pareto", True)]


def test_fastest_fitting_is_the_fastest_configuration_whose_whole_tasks_fit_in_the_atus_it_pays():
    # 10 tasks of 60 s, ATU 100 s at $1 (T_e = 600 / k s): 9 machines end them in 66.7 s, 1 ATU each
    # ($9), but run one whole task each in it (dN = 1); 4 machines take 150 s, 2 ATUs ($8), and run 3
    # each in them (dN = -2); 10 machines run one each in one ATU ($10, dN = 0)
    planner = Planner([ClusterPlan("a", 60.0, 1.0, 100.0, 10)], 10)
    assert (planner.fastest_within(9.0), planner.estimate({"a": 9}).delta_n) == ({"a": 9}, 1)
    assert (planner.fastest_fitting(9.0), planner.estimate({"a": 4}).delta_n) == ({"a": 4}, -2)
    assert planner.fastest_fitting(10.0) == {"a": 10}
    assert planner.fastest_fitting(6.0) == {"a": 2}  # 6 machines: 1 ATU, dN = 4
    assert planner.fastest_fitting(5.0) is None


def cluster(name, max, price, speed):
    return ClusterConfig(name, "local", max=max, price=price, atu_s=600.0,
                         options={"slowdown": 1.0, "startup": 0.0}, speed=speed)


POOL = Config(MasterConfig(), {"a": cluster("a", 4, 1.0, 1.0), "b": cluster("b", 4, 2.5, 3.0)})


def run(cushion: bool):
    return simulate(POOL, 100, parse_runtimes("fixed:7m"), 1,
                    choice=Choice(policy="bats", schedule="cheapest", cushion=cushion))


def test_declining_the_cushion_runs_its_own_row_and_the_report_names_it(caplog):
    """100 tasks of 7 min on a (speed 1, $1 per 10 min) and b (speed 3, $2.5). `cheapest` is 2 x a
    + 3 x b, whose budget (45) was raised by 2.7 for the last tasks (case a); declined, the budget
    pays 2 x b, whose whole tasks fit in the ATUs it pays: a row of its own, 5040 s for 40, not the
    same id and label with other machines. Every star is exactly "no row dominates it": `fastest`
    (every machine) is faster than `cheapest` for less, by the planner's figures and by the odds,
    which count the four tasks the a machines `cheapest` lets go are running at the choice: they
    would end past those machines' paid edge, are cut off there and run again on the machines
    kept, as the execution does (the row's odds are then what it runs: 5040 s and 40)."""
    caplog.set_level(logging.INFO, logger="bats.sim")  # its own level: an earlier test may have set it
    declined = run(cushion=False).report()
    assert [(o["id"], o["label"], o["machines"], round(o["makespan_s"]), o["cost"], o["budget"], o["cushion"])
            for o in declined["options"]] == [
        (1, "cheapest (no cushion)", {"a": 0, "b": 2}, 5040, 40.0, 45.0, 0.0),
        (2, "fastest", {"a": 4, "b": 4}, 2100, 42.0, 56.0, 0.0),
        (3, "cheapest", {"a": 2, "b": 3}, 2940, 47.5, 45.0, pytest.approx(2.7)),
        (4, "+20%", {"a": 3, "b": 4}, 2240, 52.0, 54.0, 0.0)]
    rows = [Option(o["id"], o["label"], o["machines"], o["makespan_s"], o["makespan_atu"], o["cost"], o["cushion"],
                   o["budget"], o["delta_n"], o["rounding"], o["pareto"], tuple(o["also"]),
                   None if o["odds"] is None else Odds(**o["odds"])) for o in declined["options"]]
    assert [o.pareto for o in rows] == [not any(dominates(x, o) for x in rows if x is not o) for o in rows]
    assert (rows[0].pareto, rows[1].pareto, rows[2].pareto) == (True, True, False)
    assert rows[0].odds is not None and (rows[0].odds.makespan_p90_s, rows[0].odds.cost_p99) == (5040.0, 40.0)
    selected = declined["selected"]
    assert (selected["id"], selected["label"], selected["machines"]) == (1, "cheapest (no cushion)", {"a": 0, "b": 2})
    assert (declined["status"], declined["budget"], declined["cushion"], declined["cushion_accepted"]) == (
        "done", 45.0, 0.0, False)
    # it runs as that row said: 5040 s from the choice (at 840 s) and 40 of execution money
    assert (declined["makespan_s"] - 840.0, declined["cost"]["execution"]) == (5040.0, 40.0)
    assert ("executing option 1 (cheapest (no cushion)): 2 x b, budget 45 (option 3's cushion declined: its "
            "2 x a, 3 x b need it)") in caplog.text

    accepted = run(cushion=True).report()
    assert (accepted["selected"]["id"], accepted["selected"]["label"], accepted["cushion"]) == (
        3, "cheapest", pytest.approx(2.7))
    assert (accepted["makespan_s"] - 840.0, accepted["cost"]["execution"]) == (2940.0, 47.5)


TAILED = Config(MasterConfig(), {"a": ClusterConfig("a", "local", max=6, price=1.0, atu_s=600.0,
                                                    options={"slowdown": 1.0, "startup": 0.0}, speed=1.0),
                                 "b": ClusterConfig("b", "local", max=6, price=2.5, atu_s=600.0,
                                                    options={"slowdown": 1.0, "startup": 0.0}, speed=3.0)})


@pytest.mark.parametrize("spec, seed", [("fewlong:1m,2h,2", 1), ("fewlong:1m,2h,2", 2), ("shape:heavy,5m", 1)])
def test_the_cushion_is_not_spent_renewing_machines_that_have_nothing_to_run(spec, seed):
    """`fastest` with the cushion on 300 tasks whose few long ones end last, ATUs of 10 minutes:
    while the long tasks run, the other machines have nothing left to take. They go at the end of
    the ATU they paid instead of being renewed by the money the cushion allows (each of these runs
    paid 13 to 18 such ATUs, 23.5 to 25.5 of 63, and ended with the money gone and tasks left)."""
    report = simulate(TAILED, 300, parse_runtimes(spec), seed,
                      choice=Choice(policy="bats", schedule="fastest", cushion=True)).report()
    assert report["status"] == "done"
    assert report["cost"]["idle"] == 0.0 and all(m["idle_atus"] == 0 for m in report["machines"])
    released = [m for m in report["machines"] if m["release_reason"] == "nothing left to run: released at the end of its paid time"]
    assert released


def test_fastest_moves_to_the_fastest_row_that_dominates_it():
    rows = [row(1, "cheapest", {"a": 2}, 300.0, 2.0),
            row(2, "pareto", {"a": 3}, 250.0, 3.0),
            row(3, "pareto", {"a": 4}, 200.0, 3.5),  # faster than 4 for less: the fastest
            row(4, "fastest", {"a": 5}, 220.0, 5.0)]
    assert [(o.label, o.machines) for o in shown(rows)] == [
        ("cheapest", {"a": 2}), ("pareto", {"a": 3}), ("fastest", {"a": 4})]


def test_before_the_odds_every_machine_stays_apart_from_its_twin():
    """Counted in whole tasks, 28 machines of the slow cluster end the bag when 32 do (S3-4): the
    rows are twins until the odds, which replay varying runtimes, show every machine ending sooner."""
    rows = [row(1, "pareto", {"a": 28, "b": 32}, 5561.0, 744.0),
            row(2, "fastest", {"a": 32, "b": 32}, 5561.0, 768.0)]
    assert [o.label for o in shown(rows, apart=frozenset({"fastest"}))] == ["pareto", "fastest"]
    assert [(o.label, o.machines) for o in shown(rows)] == [("fastest", {"a": 28, "b": 32})]
    with_odds = [dataclasses.replace(rows[0], odds=Odds(6220.0, 6396.0, 744.0, 744.0, 200)),
                 dataclasses.replace(rows[1], odds=Odds(6079.0, 6254.0, 768.0, 768.0, 200))]
    assert [(o.label, o.machines) for o in shown(with_odds)] == [
        ("pareto", {"a": 28, "b": 32}), ("fastest", {"a": 32, "b": 32})]


# ---------------------------------------------------------------- the one-pass, numpy shown() keeps the rows
def _reference_shown(options, apart=frozenset()):
    """The table's rows as the first version made them: pairwise, in Python, restarting after each
    merge (quadratic and more); the one in the planner must give exactly the same rows."""
    from dataclasses import replace

    from bats.master.core.planning.planner import _figures, _same

    rows = list(options)
    merged = True
    while merged:
        merged = False
        for i, r in enumerate(rows):
            labels_here = (r.label, *r.also)
            if any(label.endswith(NO_CUSHION) or label in apart for label in labels_here):
                continue
            if "fastest" in labels_here:
                better = [o for o in rows if o is not r and dominates(o, r)]
                pick = min(better, key=lambda o: (_figures(o)[0], _figures(o)[1], o.id)) if better else None
            else:
                twins = [o for o in rows if o is not r and _same(_figures(o)[0], _figures(r)[0]) and dominates(o, r)]
                pick = min(twins, key=lambda o: (_figures(o)[1], o.id)) if twins else None
            if pick is None:
                continue
            cheapest = pick
            best = cheapest
            labels = [label for label in (r.label, *r.also) if label != "pareto"]
            if labels:
                if best.label == "pareto" or best.label.endswith(NO_CUSHION):
                    kept = () if best.label == "pareto" else (best.label,)
                    best = replace(best, label=labels[0], also=(*labels[1:], *kept, *best.also))
                else:
                    best = replace(best, also=(*best.also, *(x for x in labels if x not in (best.label, *best.also))))
            rows = [best if o is cheapest else o for k, o in enumerate(rows) if k != i]
            merged = True
            break
    rows = [replace(o, pareto=not any(dominates(other, o) for other in rows if other is not o)) for o in rows]
    rows = [o for o in rows if o.pareto or o.also or o.label != "pareto"]
    ordered = sorted(rows, key=lambda o: (o.cost, o.makespan_s))
    return [replace(option, id=i) for i, option in enumerate(ordered, start=1)]


@pytest.mark.parametrize("seed", range(40))
def test_the_one_pass_shown_gives_the_rows_of_the_pairwise_one(seed):
    """Random tables full of ties (makespans and costs from a few values, some a hair apart, some
    with odds, labels of schedules, no-cushion rows, budgets that differ at the same point): the
    rows, labels, stars and ids are those of the first, pairwise version."""
    import random

    rnd = random.Random(seed)
    labels = ["pareto"] * 6 + ["cheapest", "fastest", "+20%", "fastest-20%", "cheapest" + NO_CUSHION,
                               "fastest" + NO_CUSHION]
    n = rnd.choice([1, 2, 5, 12, 30, 60])

    def pick(values):
        v = rnd.choice(values)
        return v * (1 + rnd.choice([0.0, 0.0, 1e-10, -1e-10, 1e-6]))

    rows = []
    for k in range(n):
        makespan, cost = pick([100.0, 200.0, 300.0, 0.5]), pick([0.0, 2.0, 3.0, 5.0, 1e6])
        odds = None
        if rnd.random() < 0.6:
            odds = Odds(pick([makespan, 150.0, 250.0]), pick([makespan, 300.0, 900.0, float("inf")]),
                        pick([cost, 2.0, 4.0]), pick([cost, 3.0, 6.0]), 200)
        label = rnd.choice(labels)
        also = tuple(rnd.sample(["cheapest", "+20%", "fastest"], rnd.choice([0, 0, 1, 2])))
        rows.append(row(rnd.choice([k + 1, 1, n]), label, {"a": k}, makespan, cost,
                        budget=pick([cost, 2.0, 4.0]), cushion=rnd.choice([0.0, 0.5]), also=also, odds=odds))
    assert shown(rows) == _reference_shown(rows)
    apart = frozenset({"fastest"})
    assert shown(rows, apart=apart) == _reference_shown(rows, apart)
