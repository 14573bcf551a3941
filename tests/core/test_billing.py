"""The one billing model: scalar and numpy forms agree, and every caller charges what it says."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bats.master.core import billing
from bats.master.core.billing import Billing
from bats.master.core.deadline.ilp import billed_cost
from bats.master.core.planning.ga import _Model
from bats.master.core.planning.planner import ClusterPlan, Planner

# hourly, 10-minute, per-minute and per-second billings, with and without a minimum charge
billings = st.builds(Billing, atu_s=st.sampled_from([1.0, 6.0, 60.0, 600.0, 3600.0, 7200.0]),
                     price=st.sampled_from([0.0, 0.001, 0.25, 3.0, 9.0]),
                     min_charge_s=st.sampled_from([0.0, 60.0, 600.0]))
uptimes = st.one_of(st.floats(0.0, 30_000.0), st.integers(0, 20).map(float).map(lambda k: k * 60.0))


@given(billings, uptimes)
def test_scalar_and_array_forms_agree(b, up):
    assert billing.atus_begun_array(np.array([up]), b.atu_s, b.min_charge_s)[0] == b.atus_paid(up)
    assert billing.units_array(np.array([up]), b.atu_s, b.min_charge_s)[0] == b.units(up)
    assert billing.atus_spanning_array(np.array([up]), b.atu_s)[0] == billing.atus_spanning(up, b.atu_s)


@given(billings, uptimes)
def test_paid_time_covers_the_uptime_and_the_minimum(b, up):
    paid = b.paid_until(up)
    assert paid >= max(up, b.min_charge_s) - 1e-6
    assert b.paid_left(up) >= -1e-6
    assert b.cost(up) == b.atus_paid(up) * b.price
    # one ATU less would not cover it (the least whole number of ATUs)
    if b.atus_paid(up) > 1:
        assert (b.atus_paid(up) - 1) * b.atu_s < max(up, b.min_charge_s) - 1e-9 * b.atu_s


def test_an_uptime_of_exactly_k_atus_is_k_atus():
    assert billing.atus_begun(3 * 0.1 * 36000, 3600.0) == 3  # 10800.000000000002
    assert billing.atus_begun(3600.5, 3600.0) == 2
    assert billing.atus_begun(5.0, 1.0, 60.0) == 60  # per second after a minute
    assert billing.atus_begun(61.2, 1.0, 60.0) == 62
    assert billing.units(0.0, 1.0, 60.0) == 0


@settings(max_examples=60, deadline=None)
@given(billings, st.floats(1.0, 20_000.0), st.integers(1, 5))
def test_every_planner_charges_the_billing_models_cost(b, makespan, machines):
    """The exact planner, the genetic algorithm and the deadline ILP's check price a machine that
    runs ``makespan`` seconds exactly as :class:`Billing` does."""
    mean = 10.0
    n_tasks = max(1, round(makespan / mean * machines))
    plan = ClusterPlan("c", mean_s=mean, price=b.price, atu_s=b.atu_s, max=machines, min_charge_s=b.min_charge_s)
    planner = Planner([plan], n_tasks)
    estimate = planner.estimate({"c": machines})
    assert math.isclose(estimate.cost, machines * b.cost(estimate.makespan_s), rel_tol=1e-9, abs_tol=1e-12)
    assert plan.units(estimate.makespan_s) == b.atus_paid(estimate.makespan_s)
    model = _Model([plan], n_tasks, None)
    ga_makespan, ga_cost = model.evaluate(np.array([[machines]], dtype=np.int64))
    assert math.isclose(ga_cost[0], machines * b.cost(float(ga_makespan[0])), rel_tol=1e-9, abs_tol=1e-12)


class _Slot:
    def __init__(self, b: Billing, span: float) -> None:
        self.clusters = [type("C", (), {"name": "c", "price": b.price, "atu_s": b.atu_s,
                                        "min_charge_s": b.min_charge_s})()]
        self.counts = {"c": [1]}
        self._span = span

    def slot_end(self, name: str, rank: int) -> float:
        return self._span


@given(billings, st.floats(0.5, 20_000.0))
def test_the_deadline_plans_bill_is_the_billing_models(b, span):
    assert math.isclose(billed_cost(_Slot(b, span)), b.cost(span), rel_tol=1e-12, abs_tol=1e-12)  # type: ignore[arg-type]
