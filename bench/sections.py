"""What every ``make bench`` section returns (bench/run.py writes them to bench/RESULTS.md)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


@dataclass
class Section:
    title: str
    text: list[str] = field(default_factory=list)  # markdown lines
    summary: list[tuple[str, str, str, str]] = field(default_factory=list)  # metric, median, target, verdict
    medians: dict[str, float | None] = field(default_factory=dict)  # for other sections to quote
    repeats: Any = None  # run.Repeats, when the section repeats whole runs


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**PASS**" if ok else "**FAIL**")


def fmt(value: float | None, spec: str = ",.0f", unit: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{unit}"
