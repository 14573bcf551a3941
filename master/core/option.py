"""One option the planners offer: a configuration, what it is expected to take and cost, and the
money it was planned for (seed 000 "BaTS", §4.3; seed 003's Pareto points).

Plain data with no imports of the project, so the events, the actions and the core's view can name
it without loading the planners (:mod:`.planning.planner` makes them).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Option:
    """One proposed schedule (§4.3) or Pareto point; the report's ``options`` entries."""

    id: int
    label: str  # "cheapest", "+20%", "fastest-20%", "fastest", "pareto", or "budget"
    machines: dict[str, int]
    makespan_s: float
    makespan_atu: int
    cost: float  # B_e of ``machines``
    cushion: float  # extra money beyond ``budget`` for the rounding problem (0: none needed)
    budget: float  # the budget the schedule was planned for (a Pareto point: its cost)
    delta_n: int  # dN of ``machines``
    rounding: str  # "" (dN <= 0 from the start), "a" (budget raised), "b" (cushion pays dN tasks)
    pareto: bool  # the configuration is Pareto-optimal in (makespan_s, cost)
    also: tuple[str, ...] = ()  # other labels that produced the same configuration
