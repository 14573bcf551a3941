"""What BaTS's core (:mod:`bats.master.core.bats.policy`) is set up with: :class:`Choice` is what the
command-line flags decide, :class:`BatsSettings` what the config does. Plain data, no logic. (Its
events and actions, ``ScheduleChosen`` in and ``OfferOptions``, ``WakeAt``, ``Notify`` out, are in
:mod:`bats.master.core.events` and :mod:`bats.master.core.actions` with every other.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bats.common.config import SamplingConfig

from ..option import odds_record
from ..planning import DEFAULT_MAX_RAISE
from ..view import EXECUTING, OFFERING, SAMPLING  # noqa: F401 (the phases of a BaTS run, named here too)

if TYPE_CHECKING:
    from ..option import Option


@dataclass(frozen=True)
class BatsSettings:
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    monitor_interval_s: float = 300.0  # §3.1's re-planning interval
    release_margin_s: float = 60.0
    # the config did not set the interval: the execution shortens it to a fraction of the chosen
    # option's makespan, so that short ATUs still re-plan several times per run
    monitor_interval_auto: bool = False
    # how often the budget ceiling is checked (money is reserved up to the next check); None:
    # min(monitor interval, max(shortest ATU, 5 s))
    ceiling_interval_s: float | None = None
    budget: float | None = None  # given up front: implicit sampling, the budget covers everything
    cushion_accepted: bool = False  # with an up-front budget: may spend the rounding cushion too
    max_raise: float = DEFAULT_MAX_RAISE
    # a re-plan's room for the estimate's own error: each cluster's mean is taken at the upper
    # end of this confidence interval (mean + z sd / sqrt(n)); wider than the sample's 0.95 because
    # a sample of a skewed bag (Lévy, bimodal) underestimates its mean more often than the normal
    # law says (make execution-study)
    error_confidence: float = 0.99
    # the options' cushion is at least what a row costs at the upper ends of these intervals (a
    # floor under the P99 cost of the odds, which carry the skewed bags' missed modes themselves):
    # 0.99 there, with the odds' weaker mode, left wide bags a wider cushion and tight ones too
    # little (docs/how-bats-plans.md, step 2)
    cushion_confidence: float = 0.95
    # the options' means: each cluster's at this one-sided bound, mean + z sd / sqrt(n) (0.5: the
    # mean); above the mean because a sample underestimates a skewed bag's mean more often than
    # not (make execution-study)
    plan_confidence: float = 0.6
    planner: str = "exact"  # "exact" or "ga"
    # a run ahead of its plan moves to a faster configuration the budget left pays (the fastest
    # schedule and a budget's fastest configuration only)
    speed_up: bool = True
    # a run that would end late against the chosen makespan adds the machines that end it on time
    # with the money left, the accepted cushion included
    catch_up: bool = True
    # the early warning: at every monitoring check the run replays the tasks left on its machines
    # (planning/odds.py); when the share of replays that end within the money (budget + accepted
    # cushion) falls below this, it warns once (WarnShort) until the chance recovers (0: never)
    short_threshold: float = 0.9
    # cluster -> complete sample set an earlier session of the run measured (it stopped before a
    # choice): the run plans from it instead of sampling again
    prior_sample: dict[str, tuple[float, ...]] | None = None


@dataclass(frozen=True)
class Choice:
    """How the operator decides (the command-line flags): see ``bats-master --help``."""

    policy: str = "bats"  # "bats", "self" (every machine, no budget), "deadline", "adaptive" or "offers"
    schedule: str | None = None  # cheapest, fastest, an option id or a budget ("$25"), after sampling
    budget: float | None = None  # up front: implicit sampling, this budget covers everything
    cushion: bool = False
    plan_only: bool = False
    planner: str = "exact"  # the Pareto set: "exact" (planner.py) or "ga" (seed 003's genetic algorithm)
    all_options: bool = False  # show every option, not at most 15 well-spread ones
    deadline: float | None = None  # --deadline: seconds from the start (policies "deadline" and "offers")
    speed_up: bool = True  # --no-speed-up turns it off
    catch_up: bool = True  # --no-catch-up turns it off
    # --when-short: what an early warning (WarnShort) does where nobody can be asked: go on or stop
    when_short: str = "continue"

    @property
    def decided(self) -> bool:
        """Whether the run needs no one to answer a prompt."""
        return self.policy != "bats" or self.schedule is not None or self.budget is not None or self.plan_only


def option_record(option: Option) -> dict[str, Any]:
    """An option as the report holds it."""
    return {"id": option.id, "label": option.label, "also": list(option.also), "machines": dict(option.machines),
            "makespan_atu": option.makespan_atu, "makespan_s": option.makespan_s, "cost": option.cost,
            "cushion": option.cushion, "budget": option.budget, "delta_n": option.delta_n,
            "rounding": option.rounding, "pareto": option.pareto, "odds": odds_record(option.odds)}
