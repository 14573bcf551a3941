"""One account of a run's money, for every view: the live view, ``bats-master status``, the dashboard,
the report (its JSON, its summary and the HTML page) and a resumed run.

How this works. A run may last several sessions (``--resume``); the core of the current session
knows only its own machines and, when resumed, the budget left. :class:`Earlier` reads from the
journal what earlier sessions paid and chose; :func:`account` adds the current core's figures and
returns the five amounts, each with one meaning:

- **sampling**: every ATU the sampling phase began (in whichever session it ran), the price of the
  runtime estimates;
- **execution**: everything else, so that sampling + execution is what the bill says (``spent``);
- **budget**: the run's budget as chosen: the option's budget when the operator chose after the
  sampling (the sampling is then paid apart), or the ``--budget`` given up front (which pays for the
  sampling too); a resumed run keeps it (its core is held to what is left of it);
- **cushion**: what the run may spend beyond the budget, accepted by the operator;
- **committed**: what counts against the budget so far (the execution, plus the sampling when the
  budget paid for it) and the ATUs the machines the plan keeps will still begin until the plan's end,
  at today's prices; never above budget + cushion, since the core begins no ATU it cannot pay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Earlier:
    """What the sessions before the current one paid and chose."""

    spent: float = 0.0  # every ATU their machines began
    sampling: float = 0.0  # the part of it the sampling phase began
    plan: Mapping[str, Any] | None = None  # the run's chosen plan, if an earlier session chose it

    @property
    def budget(self) -> float | None:
        return None if self.plan is None else self.plan.get("budget")

    @property
    def cushion(self) -> float:
        return 0.0 if self.plan is None else float(self.plan.get("cushion") or 0.0)

    @property
    def sampling_apart(self) -> bool:
        return self.plan is not None and not self.plan.get("implicit")


def earlier(meta: Mapping[str, Any], machines: Sequence[Mapping[str, Any]], session: int) -> Earlier:
    """The sessions before ``session``, from the journal's ``meta`` and machine rows."""
    spent = sum(float(row["cost"]) for row in machines if row["session"] < session)
    plan = meta.get("run_plan")
    if not isinstance(plan, dict) or int(plan.get("session", session)) >= session:
        return Earlier(spent, spent, None)  # no plan was executed before: all of it was sampling
    # the plan's own sampling, and all that sessions before the plan's paid: no plan ran then (a run
    # resumed after --plan-only plans from their sample)
    before_plan = sum(float(row["cost"]) for row in machines if row["session"] < int(plan.get("session", session)))
    return Earlier(spent, min(float(plan.get("sampling_cost") or 0.0) + before_plan, spent), plan)


def run_plan_record(view: Any, session: int, record: Mapping[str, Any]) -> dict[str, Any]:
    """What the journal keeps of the plan a session chose (``run_plan``): the option as offered and
    the budget and cushion it is held to, whether that budget pays for the sampling too."""
    return {"session": session, "option": dict(record), "budget": view.budget, "cushion": view.cushion,
            "cushion_accepted": bool(view.cushion_accepted), "implicit": bool(view.budget_up_front), "sampling_cost": view.sampling_cost}


def account(view: Any, spent_now: float, sampling_now: float, earlier_run: Earlier,
            committed_more: float = 0.0) -> dict[str, Any]:
    """The run's money (see the module docstring). ``view`` is the current core's view, ``spent_now``
    every ATU its machines began, ``sampling_now`` the part of it its own sampling phase began, and
    ``committed_more`` the ATUs the kept machines will begin until the plan's end."""
    spent = spent_now + earlier_run.spent
    sampling = sampling_now + earlier_run.sampling
    if earlier_run.plan is not None:
        budget, cushion, apart = earlier_run.budget, earlier_run.cushion, earlier_run.sampling_apart
    else:
        budget, cushion, apart = view.budget, view.cushion or 0.0, not view.budget_up_front
    against = spent - sampling if apart else spent
    committed = against + committed_more
    if budget is not None:
        committed = min(committed, max(against, budget + cushion))
    return {"spent": round(spent, 9), "sampling": round(sampling, 9), "execution": round(spent - sampling, 9),
            "budget": budget, "cushion": cushion, "sampling_apart": bool(apart and budget is not None),
            "against_budget": round(against, 9), "committed": round(committed, 9)}


def earlier_sampling(meta: Mapping[str, Any], session: int, machines: Sequence[Mapping[str, Any]]) -> float:
    """The sampling cost the sessions before ``session`` paid."""
    return earlier(meta, machines, session).sampling
