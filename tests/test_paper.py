"""bench/paper.py (``make paper``): the paper's Table 1 and Table 2 next to ours, on a small run."""

from __future__ import annotations

import pytest
from bench_scripts import load_bench_script

from bats.master.sim.driver import simulate
from bats.master.sim.runtimes import parse_runtimes


@pytest.fixture(scope="module")
def paper():
    return load_bench_script("paper")


def body(text: str, paper) -> str:
    """The document without its header (date, commit, machine, wall time)."""
    return text.split(paper.HEADER_END, 1)[1]


def test_one_scenario_one_seed_has_both_tables_and_no_overspend(paper, tmp_path):
    out = tmp_path / "repro.md"
    assert paper.main(["--scenarios", "s3-4", "--seeds", "1", "--out", str(out), "-q"]) == 0
    text = out.read_text(encoding="utf-8")
    assert "## Table 1" in text and "## Table 2" in text
    assert "| 1.33 (S3-4) | $84 |" in text  # the paper's row, S first
    for schedule in ("Sched1", "Sched2", "Sched3", "Sched4"):
        assert f"S3-4 {schedule}" in text
    assert "| S4-1" not in text and "**S4-1" not in text  # only the scenario asked for
    assert "OVER" not in text
    assert "spent at most its budget + the accepted cushion" in text
    # deterministic apart from the header
    again = tmp_path / "again.md"
    assert paper.main(["--scenarios", "s3-4", "--seeds", "1", "--out", str(again), "-q"]) == 0
    assert body(again.read_text(encoding="utf-8"), paper) == body(text, paper)


def test_recording_runner_matches_simulate(paper):
    """run_sim builds the simulation as bats.master.sim.driver.simulate does: same report."""
    config = paper.load_scenario("s3-4")
    choice = paper.b.Choice(policy="bats", schedule="fastest", cushion=True)
    ours = paper.run_sim(config, 2, choice).report()
    theirs = simulate(config, paper.TASKS, parse_runtimes(paper.RUNTIMES_SPEC), 2, choice=choice).report()
    assert ours == theirs


def test_paper_tables_are_internally_consistent(paper):
    """The numbers typed in from the seed add up as the tables print them."""
    for row in paper.PAPER_TABLE1.values():
        assert row.s_nolr % 30 == 0  # 30 machines per cluster for one ATU, every row
    t2 = paper.PAPER_TABLE2
    assert t2[("s3-4", "Sched1")].budget == paper.PAPER_TABLE1["s3-4"].cm_exec
    assert t2[("s4-1", "Sched1")].budget == paper.PAPER_TABLE1["s4-1"].cm_exec
    assert t2[("s3-4", "Sched4")].budget == paper.PAPER_TABLE1["s3-4"].fm_exec
    assert t2[("s4-1", "Sched4")].budget == paper.PAPER_TABLE1["s4-1"].fm_exec
    # every printed configuration costs at most budget + cushion for its printed ATUs
    prices = {"s3-4": (3, 9), "s4-1": (3, 12)}
    for (scenario, _sched), s in t2.items():
        c1, c2 = prices[scenario]
        cost = s.makespan_atu * (s.machines[0] * c1 + s.machines[1] * c2)
        assert cost <= s.budget + (s.cushion or 0)


def test_formatting_helpers(paper):
    assert paper.money(744) == "$744" and paper.money(10.26) == "$10.26" and paper.money(1920) == "$1,920"
    assert paper.hm(5400) == "1h30m" and paper.hm(59) == "0h01m"
    assert paper.diff_phrase(100, 100) == "equal"
    assert paper.diff_phrase(100, 103) == "within 5 % (+3.0 %)"
    assert paper.diff_phrase(100, 88) == "ours 12 % lower"
    assert paper.spread([1, 2, 3], str) == "2.0 [1–3]" and paper.spread([2, 2], str) == "2.0"
    assert paper.signed(-0.2) == "+0 %" and paper.signed(-3.6) == "-4 %"
    assert paper.configs_text([(0, 1), (0, 1), (2, 3)]) == "(0, 1) ×2, (2, 3) ×1"
