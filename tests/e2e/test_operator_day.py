"""An operator's day on local workers, and every figure checked against the journal: the dry run,
a run under ``--budget`` stopped by Ctrl-C (SIGINT) during its execution, ``status`` while the
resumed run works, ``--resume``, the report (its JSON and its summary) and the HTML page."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from helpers.configs import CONFIG
from helpers.runs import MASTER, wait_for, write_bag

pytestmark = pytest.mark.e2e

BUDGET = 60.0


def _journal(state: Path) -> tuple[dict, list[dict]]:
    """The journal's meta and machine rows, read with sqlite3 itself (not through BaTS)."""
    conn = sqlite3.connect(state / "journal.sqlite")
    try:
        meta = {key: json.loads(value) for key, value in conn.execute("SELECT key, value FROM meta")}
        cols = ["machine_id", "cluster", "session", "nt", "rt_s", "uptime_s", "atus", "cost"]
        machines = [dict(zip(cols, row)) for row in conn.execute(f"SELECT {', '.join(cols)} FROM machines")]
    finally:
        conn.close()
    return meta, machines


def _money(text: str, label: str) -> float:
    found = re.search(rf"{label}\s+([0-9.]+)", text)
    assert found, f"no {label!r} in:\n{text}"
    return float(found.group(1))


def test_the_operators_day_every_figure_agrees_with_the_journal(tmp_path: Path):
    (tmp_path / "c.toml").write_text(CONFIG)
    write_bag(tmp_path / "tasks.txt", ["sleep 0.3"] * 150)
    state = tmp_path / "run"

    # 1. the dry run: what --budget would pay for the sampling, and what it leaves
    dry = subprocess.run([*MASTER, "--dry-run", "--bag", "tasks.txt", "--config", "c.toml", "--guess-runtime",
                          "0.3s", "--budget", f"{BUDGET:g}"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, stdin=subprocess.DEVNULL)
    assert dry.returncode == 0, dry.stderr
    simulated = float(re.search(r"sampling costs about ([0-9.]+)", dry.stdout).group(1))
    pick = re.search(rf"--budget {BUDGET:g} would pay about ([0-9.]+) for the sampling, then run .* with the "
                     r"([0-9.]+) left", dry.stdout)
    assert pick, dry.stdout
    assert float(pick.group(1)) == pytest.approx(simulated)
    assert float(pick.group(2)) == pytest.approx(BUDGET - simulated)

    # 2. the run under --budget, stopped by Ctrl-C once its plan is executing
    err = (tmp_path / "err1.txt").open("w")
    first = subprocess.Popen([*MASTER, "--bag", "tasks.txt", "--config", "c.toml", "--budget", f"{BUDGET:g}",
                              "--state-dir", str(state)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=err, text=True,
                             stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: "executing" in (tmp_path / "err1.txt").read_text(), 120, "the plan's execution")
        wait_for(lambda: len(re.findall("progress:", (tmp_path / "err1.txt").read_text())) >= 1, 60, "progress")
        first.send_signal(signal.SIGINT)
        out1, _ = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
        err.close()
    assert first.returncode == 1, out1
    assert out1.startswith("INCOMPLETE: stopped by SIGINT")
    assert "not compared: the run stopped with" in out1  # no "predicted against actual" for a stopped run
    assert f"  resume    bats-master --resume --state-dir {state}" in out1
    stopped = json.loads((state / "report.json").read_text())
    meta, machines = _journal(state)
    assert stopped["cost"]["total"] == pytest.approx(sum(m["cost"] for m in machines))
    assert stopped["cost"]["sampling"] == pytest.approx(meta["run_plan"]["sampling_cost"])
    assert stopped["budget"] == BUDGET and stopped["phase"] == "executing"
    chosen = stopped["selected"]
    assert chosen is not None and chosen == meta["run_plan"]["option"]

    # 3. --resume: the same plan, the same budget, no new sampling; status while it runs
    second = subprocess.Popen([*MASTER, "--resume", "--state-dir", str(state)], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        def asked():
            answer = subprocess.run([*MASTER, "status", "--state-dir", str(state), "--json"], capture_output=True,
                                    text=True, timeout=30)
            return json.loads(answer.stdout) if answer.returncode == 0 else None

        live = wait_for(asked, 60, "bats-master status")
        out2, err2 = second.communicate(timeout=180)
    finally:
        if second.poll() is None:
            second.kill()
    assert second.returncode == 0, err2
    assert "no new sampling" in err2
    money = live["money"]
    assert live["phase"] == "executing" and live["session"] == 2
    assert money["budget"] == BUDGET and money["sampling"] == pytest.approx(stopped["cost"]["sampling"])
    assert money["sampling"] + money["execution"] == pytest.approx(money["spent"])
    assert money["against_budget"] <= money["committed"] <= BUDGET + money["cushion"] + 1e-9

    # 4. the report: every figure is the journal's
    report = json.loads((state / "report.json").read_text())
    meta, machines = _journal(state)
    assert report["status"] == "done" and report["sessions"] == 2
    assert report["phase"] == "executing"
    assert report["selected"] == chosen  # the plan chosen before the Ctrl-C, not the resumed budget's
    assert report["resumed_with"]["session"] == 2
    assert report["cost"]["total"] == pytest.approx(sum(m["cost"] for m in machines))
    assert report["cost"]["sampling"] == pytest.approx(stopped["cost"]["sampling"])  # paid once
    assert report["cost"]["sampling"] + report["cost"]["execution"] == pytest.approx(report["cost"]["total"])
    assert report["budget"] == BUDGET
    assert report["against_budget"] == pytest.approx(report["cost"]["total"])  # --budget pays the sampling too
    assert report["cost"]["total"] <= BUDGET + 1e-9
    for cluster, row in report["by_cluster"].items():
        ours = [m for m in machines if m["cluster"] == cluster]
        assert row["cost"] == pytest.approx(sum(m["cost"] for m in ours))
        assert row["tasks"] == sum(m["nt"] for m in ours)
        assert row["utilisation"] is None or row["utilisation"] <= 1.0
    for m in report["machines"]:
        assert m["rt_s"] / max(1, m.get("slots", 1)) <= m["uptime_s"] + 1e-6, m
    assert len({m["id"] for m in report["machines"]}) == len(machines)
    # ... and the summary printed says the same
    assert out2.startswith("DONE")
    assert _money(out2, "cost") == pytest.approx(report["cost"]["total"], abs=1e-4)
    assert _money(out2, "sampling") == pytest.approx(report["cost"]["sampling"], abs=1e-4)
    assert _money(out2, "execution") == pytest.approx(report["cost"]["execution"], abs=1e-4)
    assert _money(out2, "budget") == pytest.approx(BUDGET)
    assert f"plan      {chosen['label']}" in out2 or f"option {chosen['id']}" in out2

    # 5. the HTML page
    page = tmp_path / "run.html"
    made = subprocess.run([*MASTER, "report", "--state-dir", str(state), "--html", str(page)], capture_output=True,
                          text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    html = page.read_text()
    assert f"{report['cost']['total']:,.4f}" in html
    assert f"sampling {report['cost']['sampling']:,.4f}, execution {report['cost']['execution']:,.4f}" in html
    assert f"{BUDGET:,.4f}" in html
