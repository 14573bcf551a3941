"""A read-only face of a core for the drivers and the views: what the live figures, ``status``, the
dashboard, the report and the command line show of a run, in one typed object.

Every policy answers :meth:`~.base.Core.view` with a :class:`CoreView`; a field a policy has no
notion of keeps its default (the base policy has no phase, options or budget). The views read these
fields and never the cores' own attributes, so a policy may rename its insides freely.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .option import Option

SAMPLING, OFFERING, EXECUTING = "sampling", "offering", "executing"  # the phases of a BaTS run


@dataclass(frozen=True)
class CoreView:
    policy: str  # the --policy word (core/registry.py)
    phase: str = "running"  # "sampling", "offering", "executing"; "running" for policies without phases
    options: Sequence[Option] = ()  # the options offered (the same object while they are unchanged)
    tasks_at_plan: int | None = None  # the tasks left when the options were planned
    plan_estimates: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # cluster -> (mean_s, sd_s)
    selected: Option | None = None  # the option chosen
    budget: float | None = None
    cushion: float = 0.0
    cushion_accepted: bool = False
    sampling_cost: float | None = None
    budget_up_front: bool = False  # the budget was given before sampling and pays for it too
    reconfigurations: Sequence[Mapping[str, Any]] = ()
    plan_end: Mapping[str, float] = field(default_factory=dict)  # cluster -> when its planned machines end
    monitor_interval_s: float | None = None  # how often the plan is checked (None: no budget to monitor)
    deadline_s: float | None = None  # from the start of the run (deadline-driven policies)
    plan: Any = None  # a deadline policy's plan, else None
    # the last early warning while it holds (chance, threshold, needed, spent, money, at_s): the
    # chance of ending within the money fell below the threshold; None when it did not or recovered
    short: Mapping[str, float] | None = None
