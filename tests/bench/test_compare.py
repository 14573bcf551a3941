"""bench/compare.py (``make compare``): one table per setting, every policy, deterministic."""

from __future__ import annotations

import pytest
from helpers.bench_scripts import load_bench_script


@pytest.fixture(scope="module")
def compare():
    return load_bench_script("compare")


def body(text: str, compare) -> str:
    return text.split(compare.HEADER_END, 1)[1]


def test_one_setting_small_bag_has_every_policy_and_is_deterministic(compare, tmp_path):
    out = tmp_path / "policies.md"
    assert compare.main(["--settings", "s3-4", "--tasks", "200", "--out", str(out), "-q"]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# The policies compared")
    assert "## S3-4" in text and "## NDB" not in text
    assert "| policy | makespan | cost | budget or deadline | respected | tasks done | machines used |" in text
    for label in ("BaTS Sched1 (cheapest)", "BaTS Sched4 (fastest)", "Pareto option", "Deadline ILP at Sched1",
                  "Adaptive, conservative", "Adaptive, aggressive", "Self-scheduling, every machine",
                  "Fixed pool, half of each cluster", "Offers, OffersWith"):
        assert f"| {label}" in text, label
    bats_rows = [line for line in text.splitlines() if line.startswith(("| BaTS", "| Pareto")) and "not offered" not in line]
    assert bats_rows and all("| yes |" in line for line in bats_rows)
    assert "BaTS's guarantee held on every setting." in text
    again = tmp_path / "again.md"
    assert compare.main(["--settings", "s3-4", "--tasks", "200", "--out", str(again), "-q"]) == 0
    assert body(again.read_text(encoding="utf-8"), compare) == body(text, compare)


def test_phrases(compare):
    assert compare.hm(5400) == "1h30m"
    assert compare.money(768) == "$768" and compare.money(2.04) == "$2.04" and compare.money(0.753) == "$0.753"
    assert compare._pct(110, 100) == "10 % more than" and compare._pct(300, 100) == "3.0× as much as"
    assert compare._faster(3000, 6000) == "50 % faster than" and compare._faster(6000, 6010) == "as fast as"
    assert compare.yes_no(None) == "–" and compare.yes_no(False) == "**NO**"
