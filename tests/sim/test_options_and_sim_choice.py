"""The options table (a snapshot) and ``bats-sim``'s choice flags."""

from __future__ import annotations

import json

import pytest

from bats.master.cli.sim import main
from bats.master.core.planning.planner import Option
from bats.master.views.options_table import format_options, profitability

PAPER = "deploy/examples/paper/s3-4.toml"
RUN = ["--config", PAPER, "--tasks", "1000", "--runtimes", "normal:15m,134s", "--seed", "1"]


def option(id, label, machines, makespan_s, cost, cushion=0.0, also=(), pareto=True):
    return Option(id=id, label=label, machines=machines, makespan_s=makespan_s, makespan_atu=-(-int(makespan_s) // 3600),
                  cost=cost, cushion=cushion, budget=cost, delta_n=0, rounding="b" if cushion else "",
                  pareto=pareto, also=tuple(also))


def test_options_table_snapshot():
    options = [
        option(1, "cheapest", {"cluster1": 0, "cluster2": 29}, 27240.0, 513.0, cushion=10.26),
        option(2, "+20%", {"cluster1": 4, "cluster2": 29}, 24720.0, 582.0, also=("fastest-20%",)),
        option(3, "pareto", {"cluster1": 32, "cluster2": 32}, 12500.0, 768.0, pareto=True),
        option(4, "fastest", {"cluster1": 32, "cluster2": 32}, 12500.0, 768.0, pareto=False),
    ]
    estimates = {"cluster1": (900.0, 134.0), "cluster2": (225.0, 33.5)}
    profit = profitability(estimates, {"cluster1": 3.0 / 3600, "cluster2": 9.0 / 3600})
    assert profit == pytest.approx({"cluster1": 1.0, "cluster2": 4 / 3})  # seed 000's S3-4: 4x as fast, 3x the price
    text = format_options(options, estimates, 970, profit=profit)
    assert text == (
        "estimated mean task runtime: cluster1 15m00s (sd 2m14s); cluster2 3m45s (sd 34s)\n"
        "options for the 970 task(s) left (* = Pareto-optimal):\n"
        "id  schedule             cluster1  cluster2       makespan    cost  budget  cushion\n"
        " 1  cheapest *                  0        29  8 ATU (7h34m)  513.00  513.00    10.26\n"
        " 2  +20%, fastest-20% *         4        29  7 ATU (6h52m)  582.00  582.00        -\n"
        " 3  pareto *                   32        32  4 ATU (3h28m)  768.00  768.00        -\n"
        " 4  fastest                    32        32  4 ATU (3h28m)  768.00  768.00        -\n"
        "    profitability            1.00      1.33"
    )


def test_a_row_dearer_than_another_is_never_left_unexplained_as_cheapest():
    """Seed 000's 'cheapest' is the B_min1 schedule: found at a budget raised for the rounding
    problem, it may cost more than a Pareto row. The table shows each option's budget and says so."""
    import dataclasses

    options = [
        option(1, "pareto", {"cluster1": 0, "cluster2": 30}, 7140.0, 540.0, cushion=270.0),
        dataclasses.replace(option(2, "cheapest", {"cluster1": 1, "cluster2": 30}, 7080.0, 546.0, cushion=279.0),
                            budget=540.0),
        option(3, "fastest", {"cluster1": 32, "cluster2": 32}, 5340.0, 768.0),
    ]
    lines = format_options(options).splitlines()
    assert lines[0].split()[-3:] == ["cost", "budget", "cushion"]
    assert lines[2].split()[-3:] == ["546.00", "540.00", "279.00"]
    assert lines[-1] == ("note: 'cheapest' (option 2) is seed 000's B_min1 schedule, the fastest configuration within "
                         "the least budget (540.00: the bag on one machine of its cheapest type), refined so its last "
                         "tasks fit; option(s) 1 cost less (--schedule takes any id)")
    # when the row labelled cheapest is the least cost, there is nothing to explain
    assert "note:" not in format_options(options[1:])


def test_the_real_table_shows_what_runs(capsys):
    """S3-4, seed 1 (seed 000's setting): the planner's Pareto set had 60 configurations; counted
    with the machines up and whole tasks, 29 to 32 machines of cluster1 end as soon as 28; the
    odds, which replay varying runtimes, show every machine ending sooner. The table shows 12 rows,
    each a Pareto point of the figures it shows: `cheapest` is one machine of cluster2 (B_min1's
    schedule itself: 56 ATUs, for less than any configuration that ends in 2 or 3), `fastest`
    (32, 32), and nothing cheaper than `cheapest` is left to explain."""
    assert main([*RUN, "--plan-only", "--all-options"]) == 0
    table = capsys.readouterr().out.split("INCOMPLETE")[0]
    rows = [line.split() for line in table.splitlines() if line[:3].strip().isdigit()]
    assert [(row[1], row[2:5]) for row in rows if row[1] in ("cheapest", "fastest")] == [
        ("cheapest", ["*", "0", "1"]), ("fastest", ["*", "32", "32"])]
    assert len(rows) == 12 and all("*" in row[2:4] for row in rows)
    costs = [float(row[-5].replace(",", "")) for row in rows]  # ... cost budget cushion P50/P90 P50/P99
    makespans = [row[-7] + row[-6] + row[-2] for row in rows]  # the planned one and its P50/P90
    assert costs == sorted(costs) and len(set(makespans)) == 12  # no row as fast as another for more
    assert "note: 'cheapest'" not in table


def test_profitability_follows_seed_000_and_skips_free_clusters():
    # S4-1: four times the price, the same speed; the base is the cheapest cluster, whatever its order
    assert profitability({"a": (60.0, 1.0), "b": (60.0, 1.0)}, {"a": 12.0, "b": 3.0}) == {"a": 0.25, "b": 1.0}
    assert profitability({"local": (10.0, 1.0)}, {"local": 0.0}) is None
    # a free cluster has no profitability; the others are measured against the cheapest paid one
    assert profitability({"free": (10.0, 1.0), "paid": (5.0, 1.0)}, {"free": 0.0, "paid": 1.0}) == {"paid": 1.0}


def test_sim_without_a_choice_is_exit_2(capsys):
    assert main(RUN) == 2
    err = capsys.readouterr().err
    assert "--schedule" in err and "--budget" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("flags, fragment", [
    (["--budget", "500", "--schedule", "fastest"], "give one of them"),
    (["--no-sampling"], "needs --budget"),
    (["--policy", "self", "--schedule", "fastest"], "--policy bats"),
])
def test_sim_contradicting_choices_are_exit_2(flags, fragment, capsys):
    assert main(RUN + flags) == 2
    assert fragment in capsys.readouterr().err


def test_sim_plan_only_prints_the_options_and_reports_them(tmp_path, capsys):
    report_path = tmp_path / "r.json"
    assert main(RUN + ["--plan-only", "--report", str(report_path)]) == 0  # planned: exit 0, as bats-master
    out = capsys.readouterr().out
    assert "options for the" in out and "cheapest" in out and "fastest" in out
    report = json.loads(report_path.read_text())
    assert report["phase"] == "offering" and report["options"] and report["selected"] is None
    assert report["sample_size"] == 30 and report["tasks_at_plan"] < 1000


def test_sim_schedule_by_id_and_by_budget(tmp_path):
    def run(*flags):
        path = tmp_path / "r.json"
        main(RUN + ["-q", "--report", str(path), *flags])
        return json.loads(path.read_text())

    by_id = run("--schedule", "3")
    assert by_id["selected"]["id"] == 3
    assert by_id["cost"]["execution"] <= by_id["budget"] + by_id["cushion"] + 1e-9
    by_budget = run("--schedule", "$600")
    assert by_budget["selected"]["label"] == "budget" and by_budget["budget"] == 600.0
    assert by_budget["cost"]["execution"] <= 600.0 + 1e-9
    up_front = run("--budget", "700")
    assert up_front["cost"]["total"] <= 700.0 + 1e-9  # the sampling is paid from it too
    assert up_front["status"] == "done"


def test_sim_shows_at_most_15_options_unless_all_and_the_ga_planner_runs(tmp_path, capsys):
    path = tmp_path / "r.json"
    mix = ["--config", "deploy/examples/paper/mix-20-100.toml", *RUN[2:]]  # seed 003's pool: a long front
    assert main(mix + ["--plan-only", "--report", str(path)]) == 0  # planned: exit 0, as bats-master
    out = capsys.readouterr().out
    report = json.loads(path.read_text())
    rows = [line for line in out.splitlines() if line[:3].strip().isdigit()]
    assert len(report["options"]) > 15 and len(rows) == 15 and "--all-options shows them" in out
    assert main(mix + ["--plan-only", "--all-options", "-q", "--report", str(path)]) == 0
    assert main(mix + ["--plan-only", "--all-options"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line[:3].strip().isdigit()]
    assert len(rows) == len(report["options"])
    # seed 003's genetic algorithm supplies the Pareto set; the run stays within its budget
    assert main(RUN + ["--planner", "ga", "--schedule", "cheapest", "-q", "--report", str(path)]) == 0
    ga = json.loads(path.read_text())
    assert ga["options"] and ga["cost"]["execution"] <= ga["budget"] + ga["cushion"] + 1e-9
