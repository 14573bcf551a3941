"""The report's figures from a simulated run: busy time counts a machine's slots (never above 100 %),
a stopped run's plan is not compared with what it did."""

from __future__ import annotations

from helpers.configs import CONFIG

from bats.common.config import load_config
from bats.master.core.bats.settings import Choice
from bats.master.sim.driver import simulate
from bats.master.sim.runtimes import parse_runtimes
from bats.master.views.report import add_analysis, summary
from bats.provisioners import options_of


def _config(tmp_path, slots: int):
    path = tmp_path / "c.toml"
    path.write_text(CONFIG.replace('atu = "4s"', f'atu = "4s"\nslots = {slots}'))
    return load_config(path, options_of)


def test_a_four_slot_machine_is_never_more_than_fully_busy(tmp_path):
    sim = simulate(_config(tmp_path, 4), 400, parse_runtimes("normal:2s,0.1s"), 1,
                   choice=Choice(policy="bats", schedule="fastest"))
    report = sim.report()
    add_analysis(report, sim.core.execution_started_at, sim.core.last_finish_at)
    assert report["status"] == "done"
    busy = [row["utilisation"] for row in report["by_cluster"].values() if row["utilisation"] is not None]
    assert busy and all(0 < b <= 1.0 for b in busy)
    assert max(m["rt_s"] for m in report["machines"]) > max(m["uptime_s"] for m in report["machines"])  # 4 slots
    report["state_dir"] = "run"
    for line in summary(report, "run/report.json").splitlines():
        if line.strip().endswith("%") or "%  " in line:
            assert all(int(cell[:-1]) <= 100 for cell in line.split() if cell.endswith("%") and cell[:-1]), line


def test_a_stopped_run_is_not_compared_with_its_plan(tmp_path):
    """(The Ctrl-C'ed run's --resume hint: tests/e2e/test_operator_day.py; one whose budget is spent has none.)"""
    sim = simulate(_config(tmp_path, 1), 200, parse_runtimes("normal:2s,0.1s"), 1,
                   choice=Choice(policy="bats", budget=40.0))
    report = sim.report()
    add_analysis(report, sim.core.execution_started_at, sim.core.last_finish_at or sim.now)
    assert report["status"] == "incomplete" and report["tasks"]["not_run"] > 0
    report["state_dir"] = "my run"
    text = summary(report, "my run/report.json")
    assert "predicted against actual" not in text
    assert f"not compared: the run stopped with {report['tasks']['not_run']} task(s) not run" in text
    assert report["selected"] is not None and "predicted_vs_actual" in report
    assert "--resume" not in text  # the budget is spent: resuming would not run more
