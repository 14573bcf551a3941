"""Option ids hold for the whole run: a configuration keeps the id it was first shown with, in a
run resumed after --plan-only, its --schedule, its report and its HTML page."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from helpers.configs import CONFIG
from helpers.runs import MASTER, write_bag

from bats.master.core.planning.planner import Option
from bats.master.views.option_ids import OptionIds


def _option(number: int, slow: int, fast: int, cost: float = 1.0) -> Option:
    return Option(number, "pareto", {"slow": slow, "fast": fast}, 10.0, 1, cost, 0.0, cost, 0, "", True)


def test_a_configuration_keeps_its_first_id_and_new_ones_take_the_next():
    ids = OptionIds()
    first = ids.renumber([_option(1, 1, 0), _option(2, 2, 0), _option(3, 0, 2)])
    assert [o.id for o in first] == [1, 2, 3]  # the first table: the planner's numbers
    later = ids.renumber([_option(1, 2, 0), _option(2, 1, 1), _option(3, 0, 2)])
    assert [o.id for o in later] == [2, 4, 3]
    again = OptionIds(json.loads(json.dumps(ids.record())))  # as the journal keeps them
    assert [o.id for o in again.renumber([_option(1, 1, 1), _option(2, 1, 0)])] == [4, 1]
    assert OptionIds([["damaged"], [{"slow": 1}, 7]]).renumber([_option(1, 1, 0)])[0].id == 7
    assert ids.renumber([_option(0, 5, 5)])[0].id == 0  # a budget's configuration has no id


def _rows(text: str) -> dict[int, tuple[str, str]]:
    """id -> (slow, fast) machines, from an options table."""
    rows = {}
    for line in text.splitlines():
        found = re.match(r"^\s*(\d+)\s+\S.*?\s(\d+)\s+(\d+)\s+\d+ ATU", line)
        if found:
            rows[int(found.group(1))] = (found.group(2), found.group(3))
    return rows


def test_a_run_resumed_after_plan_only_runs_the_row_its_id_named(tmp_path: Path):
    (tmp_path / "c.toml").write_text(CONFIG)
    write_bag(tmp_path / "tasks.txt", ["sleep 0.2"] * 60)
    shown = subprocess.run([*MASTER, "--bag", "tasks.txt", "--config", "c.toml", "--plan-only", "--all-options"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert shown.returncode == 0, shown.stderr
    first = _rows(shown.stdout)
    assert len(first) >= 2, shown.stdout
    pick = max(first)  # the last row: the one most likely renumbered by a re-plan
    resumed = subprocess.run([*MASTER, "--resume", "--schedule", str(pick), "--all-options"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert resumed.returncode == 0, resumed.stderr
    second = _rows(resumed.stdout)
    for number in set(first) & set(second):  # a configuration shown twice has one id
        assert first[number] == second[number] or number not in second
    same = {machines: number for number, machines in second.items()}
    assert all(same.get(machines, number) == number for number, machines in first.items())
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    chosen = report["selected"]
    assert chosen["id"] == pick
    assert (str(chosen["machines"]["slow"]), str(chosen["machines"]["fast"])) == first[pick]
    assert {o["id"] for o in report["options"]} <= set(first) | set(second)
    # the sampling was the first session's, planned from again: paid once, reported as the sampling
    first_session = sum(m["cost"] for m in report["machines"] if m["session"] == 1)
    assert report["cost"]["sampling"] == first_session
    assert report["cost"]["execution"] == sum(m["cost"] for m in report["machines"] if m["session"] == 2)
