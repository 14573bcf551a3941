"""How a machine is charged: the one billing model every planner, check, driver and view uses.

How this works. A cluster bills its machines in accountable time units (ATUs): every begun ATU
is paid, the first one at once, at the price in force when it begins (seed 000 "BaTS", §2: "the
cost of a machine is the number of ATUs begun in its uptime times its price"). Today's clouds are
the same rule with other numbers, so one :class:`Billing` (ATU, price, minimum charge) covers
them all:

- hourly (the papers' setting, and on-premise prices per hour): ``Billing(3600, price)``;
- per minute: ``Billing(60, price)``;
- per second after a minimum (EC2, GCP, Azure: one minute): ``Billing(1, price, 60)``: a
  machine is billed for at least the minimum, then second by second.

What a caller may ask, for one uptime (scalar) or many (the ``*_array`` functions, numpy):

- :func:`atus_begun` / :meth:`Billing.atus_paid`: ATUs paid for a machine up that long (>= 1);
- :func:`units`: the same for a length of time a plan gives a machine, 0 for no time at all;
- :meth:`Billing.cost`: their money;
- :meth:`Billing.paid_until` / :meth:`Billing.paid_left`: the uptime up to which it is paid, and
  how much of that is left (exactly on an edge the next ATU has not begun: 0 left);
- :func:`atus_spanning`: the ATUs a stretch of time spans from an edge (a plan's horizon, a
  task's extension): ceil(seconds / ATU), 0 for none;
- :func:`whole`: the whole times a length fits into another, floor(x / y), guarded the same way;
- :func:`release_guard_s`: how long before its paid edge a machine let go while running a task is
  released at the latest (the time a release takes to stop the bill), the same in the execution
  and in the options' odds;
- :meth:`Billing.is_fine`: whether the ATU is short against the time a release takes to stop the
  bill, so that holding a machine "to its edge" saves nothing (per-second billing): such a
  machine with nothing left to finish is released at once.

Every rounding goes through these with one guard, :data:`EPS` (an uptime of exactly k ATUs is k
ATUs, not k + 1, whatever float noise the sum that made it carries). Nothing else in the project
rounds by ATU; a property test (tests/core/test_billing.py) holds the scalar and numpy forms and
every caller's use of them to the same answers. Pure arithmetic, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the array forms import numpy when called: a run that plans nothing starts without it
    import numpy as np

EPS = 1e-9  # guards ceil() and floor() against float noise on an exact integer
FINE_ATU_S = 10.0  # an ATU this short or shorter bills "by the second": no edge worth waiting for
RELEASE_GUARD_SHARE = 0.1  # a release takes this share of the release margin to stop the bill (see release_guard_s)


def release_guard_s(release_margin_s: float) -> float:
    """How long before its paid edge a machine let go while running a task is released at the
    latest: a tenth of the release margin, at least 1 s, at most the margin. Kept short so that
    little paid time is cut off; a task that has not ended by then is cut off (the execution) or
    run again (the options' odds)."""
    return min(release_margin_s, max(1.0, RELEASE_GUARD_SHARE * release_margin_s))


def atus_begun(uptime_s: float, atu_s: float, min_charge_s: float = 0.0) -> int:
    """ATUs paid for ``uptime_s`` of a machine: every begun ATU counts, the first one at once, and
    never less than the cluster's minimum charge (EC2 bills per second after the first minute)."""
    return max(1, math.ceil(max(uptime_s, min_charge_s) / atu_s - EPS))


def units(seconds: float, atu_s: float, min_charge_s: float = 0.0) -> int:
    """ATUs a machine starts when it is up for ``seconds`` (0 for no time at all)."""
    return 0 if seconds <= 0 else atus_begun(seconds, atu_s, min_charge_s)


def atus_begun_array(uptime_s: np.ndarray | float, atu_s: np.ndarray | float,
                     min_charge_s: np.ndarray | float = 0.0) -> np.ndarray:
    """:func:`atus_begun` of many uptimes at once (broadcast), as floats."""
    import numpy as np

    return np.maximum(1.0, np.ceil(np.maximum(uptime_s, min_charge_s) / atu_s - EPS))


def units_array(seconds: np.ndarray | float, atu_s: np.ndarray | float,
                min_charge_s: np.ndarray | float = 0.0) -> np.ndarray:
    """:func:`units` of many lengths at once (broadcast), as int64."""
    import numpy as np

    seconds = np.asarray(seconds, dtype=float)
    return np.where(seconds > 0, atus_begun_array(seconds, atu_s, min_charge_s), 0.0).astype(np.int64)


def atus_spanning(seconds: float, atu_s: float) -> int:
    """Whole ATUs a stretch of ``seconds`` spans when it starts on an edge: ceil(seconds / ATU)."""
    return max(0, math.ceil(seconds / atu_s - EPS))


def atus_spanning_array(seconds: np.ndarray | float, atu_s: np.ndarray | float) -> np.ndarray:
    """:func:`atus_spanning` of many stretches at once, as floats."""
    import numpy as np

    return np.maximum(0.0, np.ceil(np.asarray(seconds, dtype=float) / atu_s - EPS))


def whole(length: float, each: float) -> int:
    """How many whole ``each`` fit into ``length``: floor(length / each), 0 for none."""
    return max(0, math.floor(length / each + EPS))


def whole_array(length: np.ndarray | float, each: np.ndarray | float) -> np.ndarray:
    """:func:`whole` of many lengths at once, as floats."""
    import numpy as np

    return np.maximum(0.0, np.floor(np.asarray(length, dtype=float) / each + EPS))


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
        first = 0 if lo == -math.inf else atus_spanning(lo - start, atu_s)
        last = atus if hi == math.inf else min(atus, atus_spanning(hi - start, atu_s))
        if last > first:
            total += (last - first) * price
    return total


@dataclass(frozen=True, slots=True)
class Billing:
    """How one cluster charges: ``price`` per ATU of ``atu_s`` seconds, at least ``min_charge_s``.

    Every begun ATU is paid, the first one at once; with a minimum charge the machine is billed
    for at least ``min_charge_s`` seconds (EC2 per-second billing: ``Billing(1, p, 60)``).
    """

    atu_s: float
    price: float
    min_charge_s: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.atu_s) and self.atu_s > 0):
            raise ValueError(f"the ATU must be > 0 seconds, got {self.atu_s!r}")
        if not (math.isfinite(self.price) and self.price >= 0):
            raise ValueError(f"the price must be a finite number >= 0, got {self.price!r}")
        if not (math.isfinite(self.min_charge_s) and self.min_charge_s >= 0):
            raise ValueError(f"the minimum charge must be >= 0 seconds, got {self.min_charge_s!r}")

    def atus_paid(self, uptime_s: float) -> int:
        """ATUs paid for a machine up ``uptime_s``: ceil(max(uptime, min_charge) / ATU), >= 1."""
        return atus_begun(uptime_s, self.atu_s, self.min_charge_s)

    def units(self, seconds: float) -> int:
        """ATUs a machine up for ``seconds`` starts (0 for no time at all)."""
        return units(seconds, self.atu_s, self.min_charge_s)

    def cost(self, uptime_s: float) -> float:
        """The money a machine up ``uptime_s`` has cost."""
        return self.atus_paid(uptime_s) * self.price

    def paid_until(self, uptime_s: float) -> float:
        """The uptime up to which a machine up ``uptime_s`` is paid."""
        return self.atus_paid(uptime_s) * self.atu_s

    def next_edge(self, uptime_s: float) -> float:
        """The uptime at which the next paid ATU would start: the end of the paid time (exactly on
        an edge the next ATU has not begun yet, so that edge is returned)."""
        return self.paid_until(uptime_s)

    def paid_left(self, uptime_s: float) -> float:
        """Paid seconds a machine up ``uptime_s`` has left before its next charge."""
        return self.paid_until(uptime_s) - uptime_s

    def is_fine(self, release_s: float = FINE_ATU_S) -> bool:
        """True when the ATU is no longer than ``release_s`` (per-second billing): waiting for the
        edge of a paid ATU saves nothing worth a release's delay."""
        return self.atu_s <= release_s
