"""Watching a run and reading about it after: ``bats-master status`` from another terminal against a
real master and real local workers (and what it says when no run is active), then the summary,
``report.json``'s new tables and ``bats-master report --html`` of the same run.

The tasks wait for a file the test creates, so the run is certainly going while the status is
asked (no timed assertions)."""

from __future__ import annotations

import base64
import json
import re
import struct
import subprocess
from pathlib import Path

import pytest
from helpers.configs import watched_clouds
from helpers.runs import MASTER, wait_for


def status(state_dir: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([*MASTER, "status", "--state-dir", str(state_dir), *flags], capture_output=True,
                          text=True, timeout=60)


@pytest.fixture(scope="module")
def watched(tmp_path_factory) -> dict:
    """One BaTS run, asked about while going and after; returns what was seen."""
    tmp = tmp_path_factory.mktemp("watched")
    go = tmp / "go"
    bag = tmp / "tasks.txt"
    # 200 tasks: once they may end they end at once, and the sample (a few dozen, with copies on
    # both clusters) must be complete before the bag is, or there is no plan to compare with
    bag.write_text("".join(f"while [ ! -e {go} ]; do sleep 0.05; done; echo {i}\n" for i in range(1, 201)))
    config = tmp / "clusters.toml"
    config.write_text(watched_clouds(1))
    state = tmp / "run"
    seen: dict = {"state": state, "before": status(state)}
    master = subprocess.Popen([*MASTER, "--bag", str(bag), "--config", str(config), "--state-dir", str(state),
                               "--schedule", "fastest", "--cushion", "yes"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def running() -> dict | None:
            answer = status(state, "--json")
            if answer.returncode != 0:
                return None
            figures = json.loads(answer.stdout)
            up = sum(c["up"] for c in figures["clusters"].values())
            return figures if up >= 2 and figures["tasks"]["running"] >= 2 else None

        seen["figures"] = wait_for(running, 90, "the machines to run tasks")
        seen["text"] = status(state)
        go.touch()  # let the tasks finish
        seen["stdout"], seen["stderr"] = master.communicate(timeout=120)
        seen["code"] = master.returncode
    finally:
        if master.poll() is None:
            master.kill()
            master.wait()
    seen["after"] = status(state)
    return seen


def test_status_against_a_running_master(watched):
    assert watched["before"].returncode == 1 and "no such state dir" in watched["before"].stderr
    figures = watched["figures"]
    assert figures["tasks"]["total"] == 200 and figures["tasks"]["done"] == 0
    assert figures["policy"] == "bats" and figures["phase"] == "sampling"
    assert set(figures["clusters"]) == {"slow", "fast"}
    assert figures["money"]["spent"] >= 3.0  # one ATU begun on each sampling machine
    machine = figures["clusters"]["fast"]["machines"][0]
    assert machine["atu"] == 1 and machine["atu_s"] == 30.0
    text = watched["text"]
    assert text.returncode == 0
    for fragment in ("tasks      0 done", "2 running", "200 left", "money      spent", "slow-s1-1", "ATU 1"):
        assert fragment in text.stdout, text.stdout


def test_status_says_when_no_run_is_active(watched):
    assert watched["code"] == 0, watched["stderr"]
    after = watched["after"]
    assert after.returncode == 1
    assert "no run is active here" in after.stderr and len(after.stderr.strip().splitlines()) == 1
    assert not (watched["state"] / "control.json").exists()


def test_summary_and_report_have_predicted_against_actual_and_tables(watched):
    out = watched["stdout"]
    assert "predicted against actual" in out and "per cluster:" in out and "per machine:" in out
    report = json.loads((watched["state"] / "report.json").read_text())
    pva = report["predicted_vs_actual"]["execution"]
    assert pva["makespan_s"]["predicted"] == report["selected"]["makespan_s"]
    assert pva["makespan_s"]["actual"] > 0 and pva["cost"]["actual"] == report["cost"]["execution"]
    assert report["predicted_vs_actual"]["run"]["cost"]["actual"] == report["cost"]["total"]
    clusters = report["by_cluster"]
    assert set(clusters) == {"slow", "fast"}
    assert sum(c["tasks"] for c in clusters.values()) >= 200
    assert sum(c["cost"] for c in clusters.values()) == pytest.approx(report["cost"]["total"])


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_html_report_is_self_contained_with_its_plots(watched, tmp_path):
    page = tmp_path / "run.html"
    proc = subprocess.run([*MASTER, "report", "--state-dir", str(watched["state"]), "--html", str(page)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "DONE" in proc.stdout and str(page) in proc.stdout
    text = page.read_text()
    images = re.findall(r'<img alt="([^"]*)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    alts = [alt for alt, _ in images]
    assert len(images) == 4
    assert [a.split(":")[0].split(" (")[0] for a in alts] == [
        "options offered", "progress over time", "spend over time against the budget line",
        "machines over time per cluster"]
    for _alt, data in images:
        width, height = png_size(base64.b64decode(data))
        assert width >= 600 and height >= 300
    for heading in ("Summary", "Predicted against actual", "Options offered", "Per cluster", "Per machine"):
        assert f"<h2>{heading}</h2>" in text
    assert "slow-s1-1" in text and "profitability" in text
    assert not re.search(r'(src|href)="(https?:)?//', text)  # nothing fetched from elsewhere


def test_report_command_on_a_dir_without_a_run_is_one_line(tmp_path):
    proc = subprocess.run([*MASTER, "report", "--state-dir", str(tmp_path), "--html", str(tmp_path / "x.html")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "no report yet" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
