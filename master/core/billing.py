"""How a machine is charged: whole accountable time units (ATUs), begun ATUs counting, at the price
in force when each begins (seed 000 "BaTS", §2: "the cost of a machine is the number of ATUs begun
in its uptime times its price"). Pure arithmetic, no I/O.
"""

from __future__ import annotations

import math


def atus_begun(uptime_s: float, atu_s: float, min_charge_s: float = 0.0) -> int:
    """ATUs paid for ``uptime_s`` of a machine: every begun ATU counts, the first one at once, and
    never less than the cluster's minimum charge (EC2 bills per second after the first minute)."""
    return max(1, math.ceil(max(uptime_s, min_charge_s) / atu_s - 1e-9))


def charged(start: float, atus: int, atu_s: float, first_price: float, times: list[float],
             prices: list[float]) -> float:
    """The money of ``atus`` ATUs beginning at ``start``, ``start + atu_s``, …, each at the price in
    force when it begins: ``first_price`` before ``times[0]``, then ``prices[j]`` from ``times[j]``.
    O(price changes), however many ATUs (per-second billing has thousands)."""
    total = 0.0
    bounds = [-math.inf, *times, math.inf]
    rates = [first_price, *prices]
    for j, price in enumerate(rates):
        lo, hi = bounds[j], bounds[j + 1]
        first = 0 if lo == -math.inf else max(0, math.ceil((lo - start) / atu_s - 1e-9))
        last = atus if hi == math.inf else min(atus, math.ceil((hi - start) / atu_s - 1e-9))
        if last > first:
            total += (last - first) * price
    return total
