"""BaTS through the real master and real local workers: two emulated clouds with an ATU of a few
seconds, the slower one stretched by ``slowdown`` (seed 000 §4.1's emulation, scaled down)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from helpers.configs import CONFIG
from helpers.runs import MASTER, results
from helpers.terminal import run_on_terminal

TASKS = 60


def setup_run(tmp_path: Path) -> tuple[Path, Path]:
    config = tmp_path / "clusters.toml"
    config.write_text(CONFIG)
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f"sleep 0.2; echo task {i}\n" for i in range(1, TASKS + 1)))
    return config, bag


def check_money(report: dict) -> None:
    """Execution cost within budget + accepted cushion, and every cost the machines' ATUs."""
    cost = report["cost"]
    assert cost["execution"] <= report["budget"] + report["cushion"] + 1e-9
    assert cost["total"] == pytest.approx(cost["sampling"] + cost["execution"])
    prices = {name: cl["price"] for name, cl in report["clusters"].items()}
    assert cost["total"] == pytest.approx(sum(m["atus"] * prices[m["cluster"]] for m in report["machines"]))


@pytest.mark.parametrize("schedule", ["cheapest", "fastest", "2"])
def test_emulated_run_samples_plans_and_finishes_within_budget(tmp_path, schedule):
    config, bag = setup_run(tmp_path)
    proc = subprocess.run([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--schedule", schedule,
                           "--seed", "3"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "options for the" in proc.stdout and "cheapest" in proc.stdout  # the table was shown
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    assert report["policy"] == "bats"
    rows = results(tmp_path / "bats-run")
    if proc.returncode == 1:  # real workers on a busy machine run slower than sampled: the money
        # of a cheap option (4-second ATUs) can run out first; the ceiling held and nothing is lost
        assert report["status"] == "incomplete" and "budget is spent" in report["reason"], proc.stderr
        assert sorted([r["id"] for r in rows] + report["tasks"]["not_run_ids"]) == list(range(1, TASKS + 1))
    else:
        assert proc.returncode == 0, proc.stderr + proc.stdout
        assert report["status"] == "done"
        assert sorted(r["id"] for r in rows) == list(range(1, TASKS + 1))  # every task exactly once
    check_money(report)
    assert report["selected"]["id"] >= 1 and report["options"]
    assert set(report["estimates"]) == {"slow", "fast"}
    # the slowdown shows in the estimates: slow tasks take about 3x as long
    ratio = report["estimates"]["slow"]["mean_s"] / report["estimates"]["fast"]["mean_s"]
    assert 2.0 < ratio < 4.5
    assert 0 < report["tasks_at_plan"] < TASKS and report["timings"]["plan_s"] >= 0
    assert report["cost"]["sampling"] > 0


def test_up_front_budget_is_a_ceiling(tmp_path):
    config, bag = setup_run(tmp_path)
    proc = subprocess.run([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--budget", "7"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    assert report["cost"]["total"] <= 7 + 1e-9  # with --budget the sampling is paid from it too
    rows = results(tmp_path / "bats-run")
    assert len({r["id"] for r in rows}) == len(rows) == report["tasks"]["done"]
    if report["status"] != "done":
        assert proc.returncode == 1 and "budget is spent" in report["reason"]
        assert len(report["tasks"]["not_run_ids"]) == report["tasks"]["not_run"]
        assert "not run" in proc.stdout


def test_plan_only_stops_after_the_options(tmp_path):
    config, bag = setup_run(tmp_path)
    proc = subprocess.run([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--plan-only"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "fastest" in proc.stdout
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    assert report["status"] == "incomplete" and "plan-only" in report["reason"]
    assert report["options"] and report["selected"] is None
    assert all(m["state"] == "gone" for m in report["machines"])
    # the sampled tasks are real work, journaled, and never run again
    assert len(results(tmp_path / "bats-run")) == report["tasks"]["done"] > 0


def test_no_terminal_and_no_choice_is_exit_2_naming_the_flags(tmp_path):
    config, bag = setup_run(tmp_path)
    proc = subprocess.run([*MASTER, "--bag", str(bag), "--config", str(config)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert "--schedule" in proc.stderr and "--budget" in proc.stderr and "--plan-only" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "bats-run").exists()  # nothing started


@pytest.mark.parametrize("argv, fragment", [
    (["--budget", "5", "--schedule", "cheapest"], "give one of them"),
    (["--no-sampling"], "--no-sampling needs --budget"),
    (["--budget", "-3"], "--budget"),
    (["--budget", "lots"], "--budget"),
    (["--plan-only", "--budget", "4"], "--plan-only"),
])
def test_contradicting_choice_flags_are_exit_2(tmp_path, argv, fragment):
    config, bag = setup_run(tmp_path)
    proc = subprocess.run([*MASTER, "--bag", str(bag), "--config", str(config), *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and fragment in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_interactive_prompt_on_a_terminal(tmp_path):
    config, bag = setup_run(tmp_path)
    answered: set[str] = set()

    def operator(seen: bytes) -> bytes | None:
        if b"choose an option" in seen and "bad" not in answered:
            answered.add("bad")
            return b"99\n"  # no such option: told so, asked again
        if seen.count(b"choose an option") >= 2 and "good" not in answered:
            answered.add("good")
            return b"cheapest\n"
        if b"allow it?" in seen and "cushion" not in answered:
            answered.add("cushion")
            return b"y\n"
        return None

    plot = tmp_path / "options.png"
    code, text = run_on_terminal([*MASTER, "--bag", str(bag), "--config", str(config), "--plot", str(plot)],
                                 tmp_path, operator)
    # the prompt is what is tested; on a loaded machine the 4-second ATUs can run out of money
    # before the last tasks (exit 1, within the budget), which check_money covers too
    assert code == 0 or (code == 1 and "the budget is spent" in text), text
    assert "no option 99" in text and ("DONE" in text or "INCOMPLETE" in text)
    # the table's profitability row, the text plot beside it on a terminal, and the picture
    assert "profitability" in text and "cost against makespan" in text and "drawn in" in text
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 10_000
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    assert report["selected"]["label"] == "cheapest" or "cheapest" in report["selected"]["also"]
    check_money(report)


def test_kill_9_after_the_plan_then_resume_keeps_to_the_budget(tmp_path):
    import signal
    import sqlite3

    config, _ = setup_run(tmp_path)
    bag = tmp_path / "tasks.txt"
    n = 80
    bag.write_text("".join(f"sleep 0.3; echo {i}\n" for i in range(1, n + 1)))
    state = tmp_path / "bats-run"
    with (tmp_path / "master.err").open("w") as err:
        master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--schedule",
                                   "fastest", "--seed", "5"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err)
    plan = None
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and master.poll() is None:
            time.sleep(0.2)
            try:
                # read-only: a plain connect made an empty journal.sqlite when it came between the
                # master's mkdir and its own create, and the master then refused the state dir
                with sqlite3.connect(f"file:{state / 'journal.sqlite'}?mode=ro", uri=True, timeout=1) as db:
                    row = db.execute("SELECT value FROM meta WHERE key = 'plan'").fetchone()
            except sqlite3.Error:
                continue
            if row:
                plan = json.loads(row[0])
                time.sleep(0.5)  # into the execution phase
                break
        assert plan is not None, (f"the plan was never journaled (master exit {master.poll()}): "
                                  + (tmp_path / "master.err").read_text()[-2000:])
        if master.poll() is None:
            master.send_signal(signal.SIGKILL)
    finally:
        master.wait(timeout=30)
    proc = subprocess.run([*MASTER, "--quiet", "--resume", "--state-dir", str(state)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    report = json.loads((state / "report.json").read_text())
    rows = results(state)
    assert len({r["id"] for r in rows}) == len(rows) == report["tasks"]["done"]  # never counted twice
    assert report["sessions"] == 2 and proc.returncode in (0, 1), proc.stderr
    if report["status"] == "done":
        assert report["tasks"]["done"] == n
    # across both sessions: the first session's sampling plus the chosen budget (+ cushion), at most
    limit = plan["sampling_cost"] + plan["budget"] + plan["cushion"]
    assert report["cost"]["total"] <= limit + 1e-9, (report["cost"], plan)
