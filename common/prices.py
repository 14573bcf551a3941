"""Spot price traces: how a spot cluster's price moves over a run (seed 003 §3, §4.3).

A trace is a CSV file, one row per change: the offset from the start of the run (a duration: a
bare number is seconds, or ``90s``, ``15m``, ``2h``) and the price per ATU from then on::

    # offset, price
    0, 0.0031
    2h, 0.0102
    5h30m, 0.0035

Blank lines and lines starting with ``#`` are skipped; offsets must be increasing and prices
``>= 0``. Every problem is a :class:`PriceTraceError` naming ``FILE:LINE``. A trace starts at the
cluster's configured ``price``: a first row at offset 0 replaces it.
"""

from __future__ import annotations

import bisect
import math
import os
from dataclasses import dataclass

from bats.common.durations import parse_duration
from bats.common.textfiles import csv_rows


class PriceTraceError(ValueError):
    """An unusable trace; the message reads ``FILE:LINE: reason``."""


@dataclass(frozen=True)
class PriceTrace:
    offsets: tuple[float, ...]  # seconds from the start of the run, increasing
    prices: tuple[float, ...]

    def price_at(self, offset: float, before: float) -> float:
        """The price at ``offset``; ``before`` until the first change."""
        k = bisect.bisect_right(self.offsets, offset)
        return before if k == 0 else self.prices[k - 1]


def load_trace(path: str | os.PathLike[str]) -> PriceTrace:
    source = str(path)
    offsets: list[float] = []
    prices: list[float] = []
    for number, fields in csv_rows(path, "offset, price", PriceTraceError):
        try:
            offset = parse_duration(fields[0])
        except ValueError as exc:
            raise PriceTraceError(f"{source}:{number}: offset: {exc}") from None
        try:
            price = float(fields[1])
        except ValueError:
            raise PriceTraceError(f"{source}:{number}: price: expected a number, got {fields[1]!r}") from None
        if not (math.isfinite(price) and price >= 0):
            raise PriceTraceError(f"{source}:{number}: price: must be a finite number >= 0, got {fields[1]!r}")
        if offsets and offset <= offsets[-1]:
            raise PriceTraceError(f"{source}:{number}: offset {fields[0]} is not after the previous row's")
        offsets.append(offset)
        prices.append(price)
    if not offsets:
        raise PriceTraceError(f"{source}: no price rows")
    return PriceTrace(tuple(offsets), tuple(prices))
