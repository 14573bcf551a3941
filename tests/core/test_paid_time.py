"""An option's makespan with the machines already up and the new ones' boot time
(planning/paid_time.py)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bats.master.core.planning.paid_time import (
    cost_from_now,
    makespan_of,
    tail_allowance,
    whole_tasks_makespan,
    with_machines_up,
)
from bats.master.core.planning.planner import ClusterPlan, Option, Planner

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
    # billed from now: the a machine with 45 s left begins one more ATU ($1), the other ends in the
    # time it has paid; the budget stays the planner's ($2)
    assert (credited.cost, credited.budget, credited.machines) == (1.0, cheapest.budget, cheapest.machines)
    assert cost_from_now(cheapest, CLUSTERS, {"a": [45.0, 60.0], "b": [22.0, 3.0]}, 60.0) == 1.0
    assert with_machines_up(cheapest, CLUSTERS, 16, {"a": [45.0, 60.0]}, {"a": 30.0}) == cheapest  # as planned


def test_an_option_that_adds_machines_waits_for_their_boot():
    option = next(o for o in Planner(CLUSTERS, 16).options() if o.machines == {"a": 2, "b": 0})
    # one a machine is up, the other is new and boots for 30 s: by t=90 they have ended 9 + 6
    # 10 s tasks, by t=100 10 + 7 (the fluid model would say 30 + 13 / 0.2 = 95 s)
    booted = with_machines_up(option, CLUSTERS, 16, {"a": [60.0]}, {"a": 30.0})
    assert booted.makespan_s == pytest.approx(100.0) and booted.makespan_s > option.makespan_s


def test_whole_tasks_end_one_task_length_after_the_start_however_many_machines():
    # 28 tasks of 30 s on 108 machines: one task length, not the fluid 28 / 108 of one
    assert whole_tasks_makespan(28, [(108, 30.0, 0.0, INF)]) == 30.0
    assert makespan_of(28, [(108 / 30.0, 0.0, INF)]) == pytest.approx(7.78, abs=0.01)
    # 11 tasks of 100 s on 2 slots: six rounds, the last with one slot idle
    assert whole_tasks_makespan(11, [(2, 100.0, 0.0, INF)]) == 600.0
    # a machine let go after 250 s ends 2 tasks; a booted one (from 60 s, 50 s tasks) the rest
    assert whole_tasks_makespan(5, [(1, 100.0, 0.0, 250.0), (1, 50.0, 60.0, INF)]) == 210.0
    assert whole_tasks_makespan(5, [(1, 100.0, 0.0, 250.0)]) == INF


def test_an_option_with_more_machines_than_tasks_waits_for_one_whole_task():
    planner = Planner(CLUSTERS, 4)
    option = next(o for o in planner.options() if sum(o.machines.values()) >= 4)
    planned = with_machines_up(option, CLUSTERS, 4, {}, {})
    assert planned.makespan_s == pytest.approx(max(c.mean_s for c in CLUSTERS if option.machines[c.name]))
    assert planned.makespan_s > option.makespan_s


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 400),
       groups=st.lists(st.tuples(st.integers(1, 8), st.floats(1.0, 500.0), st.floats(0.0, 300.0),
                                 st.one_of(st.just(INF), st.floats(0.0, 3000.0))), min_size=1, max_size=6))
def test_property_whole_tasks_end_the_bag_exactly_then_and_within_a_task_of_the_fluid_makespan(n, groups):
    def done(t):
        return sum(k * math.floor((min(t, e) - b) / T + 1e-9) for k, T, b, e in groups if t > b and e > b)

    t = whole_tasks_makespan(n, groups)
    fluid = makespan_of(n, [(k / T, b, b + math.floor((e - b) / T + 1e-9) * T if e < INF else e)
                            for k, T, b, e in groups if e > b])
    if not math.isfinite(fluid):
        assert t == INF
        return
    assert done(t) >= n and done(t - 1e-6 * max(1.0, t)) < n
    assert fluid - 1e-6 <= t <= fluid + max(T for _k, T, _b, _e in groups) + 1e-6


def test_a_bag_does_not_end_before_the_longest_sampled_task_of_the_clusters_it_uses():
    """Two tasks on two machines of 100 s each plan 100 s; with a 900 s task sampled on the
    cluster, the option cannot end before 900 s (the least over the clusters it uses)."""
    clusters = [ClusterPlan("a", 100.0, 1.0, 3600.0, 4), ClusterPlan("b", 50.0, 2.0, 3600.0, 4)]
    option = Option(1, "fastest", {"a": 2, "b": 0}, 100.0, 1, 2.0, 0.0, 2.0, 0, "", True)
    assert with_machines_up(option, clusters, 2, {}, {}).makespan_s == pytest.approx(100.0)
    assert with_machines_up(option, clusters, 2, {}, {}, {"a": 900.0, "b": 450.0}).makespan_s == pytest.approx(900.0)
    both = dataclasses.replace(option, machines={"a": 2, "b": 2})
    assert with_machines_up(both, clusters, 2, {}, {}, {"a": 900.0, "b": 450.0}).makespan_s == pytest.approx(450.0)
    many = with_machines_up(option, clusters, 200, {}, {}, {"a": 900.0})
    assert many.makespan_s == pytest.approx(with_machines_up(option, clusters, 200, {}, {}).makespan_s)


def test_the_end_of_the_bag_adds_nothing_when_every_task_takes_its_mean():
    # fixed runtimes: the whole-task model is exact, so the sampled spread adds nothing
    assert tail_allowance([(50, 10.0, 0.0, INF)], [[3.0] * 30], 200.0) == 0.0
    assert tail_allowance([(50, 10.0, 0.0, INF)], [None], 200.0) == 0.0
    # nor a machine let go (it takes only tasks that fit before its release) or one booting past the end
    assert tail_allowance([(4, 10.0, 0.0, 50.0), (4, 10.0, 195.0, INF)], [[5.0, 15.0]] * 2, 200.0) == 0.0


def test_the_end_of_the_bag_waits_for_the_longest_residual_of_the_last_tasks():
    # two slots, runtimes 5 s or 15 s (mean 10): each slot's last task has a renewal residual R,
    # P(R <= r) = E[min(X, r)] / 10; E[max of two] = 8.75 s, E[R] = E[X^2] / 20 = 6.25 s; with every
    # task at 10 s they are 6.67 s and 5 s: the bag ends (8.75 - 6.25) - (6.67 - 5) = 5/6 s later
    assert tail_allowance([(2, 10.0, 0.0, INF)], [[5.0, 15.0]], 80.0) == pytest.approx(5 / 6, rel=1e-5)
    # the same runtimes on any scale: only their shape counts
    assert tail_allowance([(2, 10.0, 0.0, INF)], [[1.0, 3.0]], 80.0) == pytest.approx(5 / 6, rel=1e-5)


def test_an_option_ends_later_by_the_spread_of_its_runtimes_and_costs_the_same():
    option = next(o for o in Planner(CLUSTERS, 16).options() if o.machines == {"a": 2, "b": 0})
    up = {"a": [500.0, 500.0]}
    plain = with_machines_up(option, CLUSTERS, 16, up, {})
    spread = with_machines_up(option, CLUSTERS, 16, up, {}, shapes={"a": [5.0, 15.0]})
    assert plain.makespan_s == 80.0  # 16 tasks of 10 s on two machines up
    assert spread.makespan_s == pytest.approx(80.0 + 5 / 6, rel=1e-6)
    # machines with nothing left are let go: the tail is not billed to every one of them
    assert spread.cost == plain.cost and spread.budget == plain.budget
    # fixed runtimes: exactly the whole-task makespan
    assert with_machines_up(option, CLUSTERS, 16, up, {}, shapes={"a": [10.0] * 5}) == plain


def test_a_machine_kept_while_it_boots_works_once_its_boot_is_over():
    option = next(o for o in Planner(CLUSTERS, 16).options() if o.machines == {"a": 2, "b": 0})
    # both a machines are kept; one is up, the other still boots for 30 s: as if it were new
    booting = with_machines_up(option, CLUSTERS, 16, {"a": [60.0, 90.0]}, {}, ready_s={"a": [0.0, 30.0]})
    assert booting.makespan_s == 100.0  # by t=100 the one up has ended 10 tasks, the other 7
    assert with_machines_up(option, CLUSTERS, 16, {"a": [60.0]}, {"a": 30.0}).makespan_s == 100.0
    # without ready_s (or with zeros) both work from now: 8 rounds of 10 s
    assert with_machines_up(option, CLUSTERS, 16, {"a": [60.0, 90.0]}, {}).makespan_s == 80.0
    assert with_machines_up(option, CLUSTERS, 16, {"a": [60.0, 90.0]}, {}, ready_s={"a": [0.0, 0.0]}).makespan_s == 80.0


def test_slots_twice_as_slow_as_the_fastest_are_left_idle_at_the_end_of_the_bag():
    # the end-game hands the last tasks to the fast slots: the slow ones' long residuals do not count
    fast = tail_allowance([(2, 10.0, 0.0, INF)], [[5.0, 15.0]], 80.0)
    assert tail_allowance([(2, 10.0, 0.0, INF), (5, 20.0, 0.0, INF)], [[5.0, 15.0], [1.0, 100.0]], 80.0) == fast


def test_the_tail_reuses_its_residual_laws_for_other_machine_counts():
    # the laws of the residuals depend on the clusters' means and shapes, not on their slots: what
    # a plan's options share comes out as a fresh computation gives it, to the bit
    import numpy as np

    from bats.master.core.planning import paid_time

    shapes = [np.array([30.0, 31.0, 29.0, 300.0, 33.0]), np.array([12.0, 60.0, 14.0]), None]
    def groups(k: int) -> list[tuple[int, float, float, float]]:
        return [(k, 40.0, 0.0, math.inf), (2 * k, 55.0, 30.0, math.inf), (3, 50.0, 0.0, math.inf)]

    paid_time._LAWS.clear()
    fresh = paid_time.tail_allowance(groups(3), shapes, 2000.0)
    paid_time.tail_allowance(groups(7), shapes, 2000.0)
    assert paid_time._LAWS  # kept
    paid_time._LAWS.clear()
    paid_time.tail_allowance(groups(7), shapes, 2000.0)  # the laws made for 7 slots serve 3
    assert paid_time.tail_allowance(groups(3), shapes, 2000.0) == fresh > 0
