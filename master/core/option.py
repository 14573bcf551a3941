"""One option the planners offer: a configuration, what it is expected to take and cost, and the
money it was planned for (seed 000 "BaTS", §4.3; seed 003's Pareto points).

An option may carry its :class:`Odds`: the makespan and cost as a distribution (P50/P90 makespan,
P50/P99 cost) from replaying the plan on runtimes resampled from what the run has learned
(:mod:`.planning.odds`); ``None`` where nothing estimated them.

Plain data with no imports of the project, so the events, the actions and the core's view can name
it without loading the planners (:mod:`.planning.planner` makes them).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Odds:
    """An option's makespan and cost as quantiles over ``replays`` resampled replays of its plan."""

    makespan_p50_s: float
    makespan_p90_s: float
    cost_p50: float
    cost_p99: float
    replays: int


def odds_record(odds: Odds | None) -> dict[str, float | int] | None:
    """The report's ``odds`` of an option (``None``: not estimated)."""
    if odds is None:
        return None
    return {"makespan_p50_s": odds.makespan_p50_s, "makespan_p90_s": odds.makespan_p90_s,
            "cost_p50": odds.cost_p50, "cost_p99": odds.cost_p99, "replays": odds.replays}


def odds_from_record(record: dict[str, float | int] | None) -> Odds | None:
    """The inverse of :func:`odds_record` (a report without odds gives ``None``)."""
    if not record:
        return None
    return Odds(float(record["makespan_p50_s"]), float(record["makespan_p90_s"]), float(record["cost_p50"]),
                float(record["cost_p99"]), int(record["replays"]))


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
    # makespan and cost as a distribution (None: not estimated); a replayed estimate, so two
    # options with the same configuration and figures are equal whatever their odds say
    odds: Odds | None = field(default=None, compare=False)
