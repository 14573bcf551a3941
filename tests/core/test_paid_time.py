"""An option's makespan with the paid time of the machines up that it lets go (planning/paid_time.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bats.master.core.planning.paid_time import makespan_with_paid_time, with_paid_time
from bats.master.core.planning.planner import ClusterPlan, Planner

CLUSTERS = [ClusterPlan("a", 10.0, 1.0, 100.0, 3), ClusterPlan("b", 5.0, 2.0, 100.0, 3)]


def test_no_machine_let_go_is_the_fluid_makespan():
    assert makespan_with_paid_time(16, 0.2, []) == 80.0


def test_machines_let_go_add_their_speed_until_their_paid_time_ends():
    # 0.2 task/s planned, plus 0.2 task/s for 20 s: 8 tasks by t=20 at 0.4/s, then 8 more at 0.2/s
    assert makespan_with_paid_time(16, 0.2, [(0.2, 20.0)]) == pytest.approx(20.0 + 8 / 0.2)
    # enough paid time to end the bag before it runs out
    assert makespan_with_paid_time(16, 0.2, [(0.2, 100.0), (0.2, 30.0)]) == pytest.approx(16 / 0.6)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 500), speed=st.floats(0.01, 5.0),
       extra=st.lists(st.tuples(st.floats(0.01, 5.0), st.floats(0.0, 1000.0)), max_size=6))
def test_property_the_tasks_done_by_the_makespan_are_the_bag(n, speed, extra):
    t = makespan_with_paid_time(n, speed, extra)
    done = speed * t + sum(s * min(t, left) for s, left in extra)
    assert done == pytest.approx(n, rel=1e-9) and t <= n / speed * (1 + 1e-12)


def test_an_option_keeps_the_machines_with_the_most_paid_time_and_counts_whole_tasks_on_the_others():
    cheapest = next(o for o in Planner(CLUSTERS, 16).options() if o.machines == {"a": 2, "b": 0})
    # a keeps its two machines (60 s and 45 s left), b lets both go: 22 s is 4 whole 5 s tasks, 3 s none
    credited = with_paid_time(cheapest, CLUSTERS, 16, {"a": [45.0, 60.0], "b": [22.0, 3.0]})
    assert credited.makespan_s == pytest.approx(20.0 + 8 / 0.2)  # 0.2 + 0.2 task/s for 20 s, then 0.2
    assert (credited.cost, credited.budget, credited.machines) == (cheapest.cost, cheapest.budget, cheapest.machines)
    assert with_paid_time(cheapest, CLUSTERS, 16, {"a": [45.0, 60.0]}) == cheapest  # none let go
