"""One cluster as the planners see it: its mean task runtime, price, ATU, machine limit, slots and
boot and release times (seed 000 "BaTS", §2.3's knapsack items; seed 003's instance types).

Plain data with the billing rule (:mod:`..billing`), apart from the planner so that the modules the
planner uses (:mod:`.frontier`) can name it without importing the planner back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .. import billing

SHORT_ATU_S = 60.0  # an ATU this short or shorter (per-second, per-minute billing) prices boots and releases


@dataclass(frozen=True, slots=True)
class ClusterPlan:
    """One cluster as the planner sees it. ``mean_s`` is T_i, a task's runtime on one of the
    machine's ``slots`` with all of them busy; ``price`` is per ATU per machine."""

    name: str
    mean_s: float
    price: float
    atu_s: float = 3600.0
    max: int = 1
    min_charge_s: float = 0.0
    slots: int = 1  # k_i: tasks a machine runs at once; its speed is k_i / T_i
    boot_s: float = 0.0  # seconds a new machine is billed before it runs a task
    release_s: float = 0.0  # seconds at the end of its paid time a machine cannot use (a release's delay)

    @property
    def overhead_s(self) -> float:
        """Paid seconds a new machine runs no task in: its boot, then (billed in ATUs of a minute or
        less) the time its release takes."""
        return self.boot_s + (self.release_s if self.atu_s <= SHORT_ATU_S else 0.0)

    @property
    def priced_overhead_s(self) -> float:
        """The unworked seconds an option's cost pays for each machine: the overhead where the ATU is
        a minute or less. With longer ATUs a boot of minutes seldom begins another ATU, and pricing
        it for every machine (the sampling machines kept have no boot) made seed 000's cheapest
        schedule on S3-4 two machines for 28 h instead of thirty for 2 h."""
        return self.overhead_s if self.atu_s <= SHORT_ATU_S else 0.0

    @property
    def speed(self) -> float:
        """Tasks a machine finishes per second: k_i / T_i."""
        return self.slots / self.mean_s

    def tasks_in(self, seconds: float) -> int:
        """Whole tasks a new machine finishes in ``seconds`` of paid time, its boot first and its
        release last: k_i floor((t - boot - release) / T_i), each slot its own."""
        return self.slots * billing.whole(seconds - self.overhead_s, self.mean_s)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mean_s) and self.mean_s > 0):
            raise ValueError(f"cluster {self.name!r}: mean runtime must be a finite number > 0, got {self.mean_s!r}")
        if not (math.isfinite(self.price) and self.price >= 0):
            raise ValueError(f"cluster {self.name!r}: price must be a finite number >= 0, got {self.price!r}")
        if not (math.isfinite(self.atu_s) and self.atu_s > 0):
            raise ValueError(f"cluster {self.name!r}: ATU must be > 0 seconds, got {self.atu_s!r}")
        if not (math.isfinite(self.min_charge_s) and self.min_charge_s >= 0):
            raise ValueError(f"cluster {self.name!r}: min_charge must be >= 0 seconds, got {self.min_charge_s!r}")
        if isinstance(self.max, bool) or not isinstance(self.max, int) or self.max < 0:
            raise ValueError(f"cluster {self.name!r}: max must be an integer >= 0, got {self.max!r}")
        if isinstance(self.slots, bool) or not isinstance(self.slots, int) or self.slots < 1:
            raise ValueError(f"cluster {self.name!r}: slots must be an integer >= 1, got {self.slots!r}")
        if not (math.isfinite(self.boot_s) and self.boot_s >= 0):
            raise ValueError(f"cluster {self.name!r}: boot time must be >= 0 seconds, got {self.boot_s!r}")
        if not (math.isfinite(self.release_s) and self.release_s >= 0):
            raise ValueError(f"cluster {self.name!r}: release time must be >= 0 seconds, got {self.release_s!r}")

    @classmethod
    def from_config(cls, config: Any, mean_s: float, max_machines: int | None = None,
                    slots: int | None = None) -> ClusterPlan:
        """From a :class:`bats.common.config.ClusterConfig` (``min_charge_s`` and ``slots`` read if it
        has them; ``slots`` given: the slots its machines were seen to have, for ``auto``)."""
        return cls(name=config.name, mean_s=mean_s, price=config.price, atu_s=config.atu_s,
                   max=config.max if max_machines is None else max_machines,
                   min_charge_s=getattr(config, "min_charge_s", 0.0),
                   slots=slots or getattr(config, "slots", None) or 1)

    def units(self, seconds: float) -> int:
        """u_i: ATUs a machine starts when it is up for ``seconds`` (0 for no time at all)."""
        return billing.units(seconds, self.atu_s, self.min_charge_s)
