"""An option's makespan with the machines already up and the new ones' boot time
(planning/paid_time.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bats.master.core.planning.paid_time import makespan_of, with_machines_up
from bats.master.core.planning.planner import ClusterPlan, Planner

CLUSTERS = [ClusterPlan("a", 10.0, 1.0, 100.0, 3), ClusterPlan("b", 5.0, 2.0, 100.0, 3)]
INF = math.inf


def test_machines_that_work_from_the_start_for_good_give_the_fluid_makespan():
    assert makespan_of(16, [(0.2, 0.0, INF)]) == 80.0


def test_a_machine_let_go_adds_its_speed_until_its_paid_time_ends():
    # 0.2 task/s planned, plus 0.2 task/s for 20 s: 8 tasks by t=20, then 8 more at 0.2/s
    assert makespan_of(16, [(0.2, 0.0, INF), (0.2, 0.0, 20.0)]) == pytest.approx(20.0 + 8 / 0.2)
    # enough paid time to end the bag before it runs out
    assert makespan_of(16, [(0.2, 0.0, INF), (0.2, 0.0, 100.0), (0.2, 0.0, 30.0)]) == pytest.approx(16 / 0.6)


def test_a_new_machine_starts_after_its_boot_and_nothing_may_never_end():
    # alone, 30 s of boot then 0.2 task/s; with a machine up, 6 tasks by t=30 then 0.4 task/s
    assert makespan_of(16, [(0.2, 30.0, INF)]) == pytest.approx(30.0 + 80.0)
    assert makespan_of(16, [(0.2, 0.0, INF), (0.2, 30.0, INF)]) == pytest.approx(30.0 + 10 / 0.4)
    assert makespan_of(16, [(0.2, 0.0, 20.0)]) == INF


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 500), speed=st.floats(0.01, 5.0), boot=st.floats(0.0, 300.0),
       extra=st.lists(st.tuples(st.floats(0.01, 5.0), st.floats(0.0, 1000.0)), max_size=6))
def test_property_the_tasks_done_by_the_makespan_are_the_bag(n, speed, boot, extra):
    machines = [(speed, boot, INF), *((s, 0.0, left) for s, left in extra)]
    t = makespan_of(n, machines)
    done = sum(s * min(max(0.0, t - b), e - b) for s, b, e in machines)
    assert done == pytest.approx(n, rel=1e-9) and t <= boot + n / speed * (1 + 1e-12)


def test_an_option_keeps_the_machines_with_the_most_paid_time_and_counts_whole_tasks_on_the_others():
    cheapest = next(o for o in Planner(CLUSTERS, 16).options() if o.machines == {"a": 2, "b": 0})
    # a keeps its two machines (60 s and 45 s left), b lets both go: 22 s is 4 whole 5 s tasks, 3 s none
    credited = with_machines_up(cheapest, CLUSTERS, 16, {"a": [45.0, 60.0], "b": [22.0, 3.0]}, {})
    assert credited.makespan_s == pytest.approx(20.0 + 8 / 0.2)  # 0.2 + 0.2 task/s for 20 s, then 0.2
    assert (credited.cost, credited.budget, credited.machines) == (cheapest.cost, cheapest.budget, cheapest.machines)
    assert with_machines_up(cheapest, CLUSTERS, 16, {"a": [45.0, 60.0]}, {"a": 30.0}) == cheapest  # as planned


def test_an_option_that_adds_machines_waits_for_their_boot():
    option = next(o for o in Planner(CLUSTERS, 16).options() if o.machines == {"a": 2, "b": 0})
    # one a machine is up, the other is new and boots for 30 s: 0.1 task/s, then 0.2 from t=30
    booted = with_machines_up(option, CLUSTERS, 16, {"a": [60.0]}, {"a": 30.0})
    assert booted.makespan_s == pytest.approx(30.0 + 13 / 0.2) and booted.makespan_s > option.makespan_s
