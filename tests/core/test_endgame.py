"""The end of the bag (the end-game layer of the BaTS core): exact actions when the last tasks go to
the machine expected to finish them first, and when an idle paid machine runs a copy of a slower
machine's task: the first result counts, the other attempt is stopped, the task is recorded once.

Two clusters by hand (tests/helpers/cores.py): ``a`` ($1, ATU 100 s) and ``b`` ($2, ATU 100 s); the
driver ends each task after its cluster's runtime.
"""

from __future__ import annotations

from helpers.cores import Driver, make_core, sampled

from bats.master import core as c
from bats.master.core.events import ScheduleChosen


def executing(tasks: int, runtimes: dict[str, float]) -> Driver:
    core = make_core(tasks=tasks)
    d, event, _actions = sampled(core, runtimes)
    d.feed(ScheduleChosen(event.now, core.choose("fastest"), True))
    return d


def step_at(d: Driver, now: float, machine: str) -> list[c.Action]:
    """Report results up to the one of ``machine`` at ``now``; its actions, results left out."""
    while True:
        event, actions = d.step()
        if (event.now, event.machine) == (now, machine):
            return [a for a in actions if not isinstance(a, c.RecordResult)]


def recorded(d: Driver, task: int) -> list[c.RecordResult]:
    return [a for a in d.actions if isinstance(a, c.RecordResult) and a.task == task]


def test_the_last_task_waits_for_a_fast_machine_about_to_be_free_not_a_slow_idle_one():
    # a takes 10 s a task, b 5 s: at t=60 one task is left, a1 and a2 are free, b1 and b2 end theirs
    # at t=60 as well and finish the task by 65, before an a machine would (70)
    d = executing(30, {"a": 10.0, "b": 5.0})
    assert step_at(d, 60.0, "a1") == []
    assert step_at(d, 60.0, "a2") == []
    assert step_at(d, 60.0, "b1") == [c.Dispatch("b1", 27, 1)]
    assert d.core.report(60.0)["endgame"]["tasks_withheld"] == 2


def test_an_idle_fast_machine_copies_a_slow_machines_task_and_its_result_stops_the_original():
    # a takes 20 s, b 5 s: at t=110 the bag is dry, b2 is idle in a paid ATU (edge 200) while a1 runs
    # task 49 until 120; the copy on b2 ends at 115 and wins, a1's attempt is stopped. b2, idle with
    # nothing left in the bag, is marked to go at the end of the ATU it paid (200 less the 10 s
    # margin): the money left would renew it, for nothing to run
    d = executing(50, {"a": 20.0, "b": 5.0})
    assert step_at(d, 110.0, "b2") == [c.Dispatch("b2", 49, 2)]
    assert step_at(d, 115.0, "b2") == [c.WakeAt(190.0), c.Cancel("a1", 49, 1, "another copy of the task ended first")]
    assert d.core.machines["b2"].release_reason == "nothing left to run: released at the end of its paid time"
    assert [(r.machine, r.status) for r in recorded(d, 49)] == [("b2", "done")]
    assert d.core.machines["a1"].held == []
    figures = d.core.report(115.0)["endgame"]
    assert (figures["copies_started"], figures["copies_won"], figures["copy_paid_s"]) == (1, 1, 5.0)
    assert d.core.report(115.0)["killed"]["tasks"] == 0  # a stopped copy is not a task killed by a release


def test_when_the_original_ends_first_the_copy_is_stopped_and_the_task_recorded_once():
    d = executing(50, {"a": 20.0, "b": 5.0})
    assert step_at(d, 110.0, "b2") == [c.Dispatch("b2", 49, 2)]
    d.running["b2"] = [(125.0, 49, 2)]  # the copy turns out slower than its cluster's mean
    # a1 ends the task at 120 with nothing left to take: it is marked for the end of its paid ATU
    assert step_at(d, 120.0, "a1") == [c.WakeAt(190.0), c.Cancel("b2", 49, 2, "another copy of the task ended first")]
    assert [(r.machine, r.status) for r in recorded(d, 49)] == [("a1", "done")]
    figures = d.core.report(120.0)["endgame"]
    assert (figures["copies_started"], figures["copies_won"], figures["copy_paid_s"]) == (1, 0, 10.0)


def test_a_copy_that_fails_while_the_original_runs_is_dropped_not_counted_as_a_failure():
    d = executing(50, {"a": 20.0, "b": 5.0})
    assert step_at(d, 110.0, "b2") == [c.Dispatch("b2", 49, 2)]
    d.running["b2"] = []
    assert d.feed(c.TaskFinished(115.0, "b2", 49, 2, 1, 5.0)) == [c.WakeAt(190.0)]  # b2 idle: marked
    d.running["a1"] = [(120.0, 49, 1)]
    d.until(lambda: d.core.finished is not None)
    assert d.core.finished == c.Finish("done", "every task succeeded")
    assert [(r.machine, r.status) for r in recorded(d, 49)] == [("a1", "done")]
    assert d.core.failed == 0
