"""The I/O-free core: exact actions for given event sequences."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bats.common.config import ClusterConfig
from bats.master import core as c

ROOT = Path(__file__).resolve().parents[2]


def make_core(tasks=(1, 2, 3), clusters=None, **kwargs) -> c.Core:
    clusters = clusters or {"a": ClusterConfig("a", "local", max=2, price=0.5, atu_s=60.0)}
    return c.Core(tasks, clusters, random.Random(7), **kwargs)


def up(core: c.Core, machine: str, cluster: str = "a", now: float = 0.0) -> None:
    assert core.handle(c.MachineAcquired(now, machine, cluster)) == []
    assert core.handle(c.MachineUp(now, machine)) == []


def test_run_started_acquires_every_configured_machine_but_no_more_than_tasks():
    clusters = {"a": ClusterConfig("a", "local", max=5), "b": ClusterConfig("b", "local", max=1)}
    core = make_core(tasks=(1, 2, 3), clusters=clusters)
    assert core.handle(c.RunStarted(0.0)) == [c.Acquire("a", 3), c.Acquire("b", 1)]


def test_ask_dispatches_random_tasks_and_prefetch_is_capped_at_two():
    core = make_core(tasks=(10, 20, 30, 40))
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    actions = core.handle(c.WorkerAsked(1.0, "m1", n=5))
    assert [type(a) for a in actions] == [c.Dispatch, c.Dispatch]
    assert all(a.machine == "m1" and a.attempt == 1 for a in actions)
    assert len({a.task for a in actions}) == 2
    # a third ask while two are held gives nothing
    assert core.handle(c.WorkerAsked(1.0, "m1", n=1)) == []


def test_dispatch_order_is_seeded_random():
    def order(seed):
        core = c.Core(range(1, 101), {"a": ClusterConfig("a", "local", max=1)}, random.Random(seed))
        core.handle(c.RunStarted(0.0))
        up(core, "m")
        out = []
        for a in core.handle(c.WorkerAsked(0.0, "m", 1)):
            out.append(a.task)
        for _ in range(99):
            actions = core.handle(c.TaskFinished(1.0, "m", out[-1], 1, 0, 0.1))
            out.append(next(a.task for a in actions if isinstance(a, c.Dispatch)))
        return out

    assert order(1) == order(1)
    assert order(1) != order(2)
    assert sorted(order(1)) == list(range(1, 101))
    assert order(1) != list(range(1, 101))


def test_finishing_the_bag_records_releases_and_finishes():
    core = make_core(tasks=(1,))
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    assert core.handle(c.WorkerAsked(0.0, "m1")) == [c.Dispatch("m1", 1, 1)]
    actions = core.handle(c.TaskFinished(5.0, "m1", 1, 1, 0, 4.5, stdout=b"out"))
    assert actions == [
        c.RecordResult(1, "done", "m1", 1, 0, 4.5, False, b"out", b""),
        c.Release("m1", "bag done"),
        c.Finish("done", "every task succeeded"),
    ]
    machine = core.machines["m1"]
    assert (machine.nt, machine.rt, machine.uptime(99.0)) == (1, 4.5, 5.0)


def test_per_machine_counters_and_cost_by_begun_atu():
    core = make_core(tasks=(1, 2, 3))
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    core.handle(c.WorkerAsked(0.0, "m1", 2))
    held = [t for t, _ in core.machines["m1"].held]
    core.handle(c.TaskFinished(30.0, "m1", held[0], 1, 0, 30.0))
    report = core.report(61.0)  # 61 s of a 60 s ATU: two ATUs begun
    (m,) = report["machines"]
    assert (m["nt"], m["rt_s"], m["uptime_s"], m["atus"], m["cost"]) == (1, 30.0, 61.0, 2, 1.0)
    assert report["tasks"] == {"total": 3, "done": 1, "failed": 0, "not_run": 2}


def test_lost_machine_puts_its_tasks_back_and_is_replaced():
    core = make_core(tasks=(1, 2, 3))
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    up(core, "m2")
    first = core.handle(c.WorkerAsked(0.0, "m1", 2))
    assert len(first) == 2
    core.handle(c.WorkerAsked(0.0, "m2", 2))  # takes the third task, then waits hungry
    lost = core.handle(c.MachineLost(3.0, "m1", "process exited"))
    # m1's tasks are suspects now (either may have crashed it): each runs alone, so m2, which
    # still runs the third, gets neither yet; a replacement for m1 is asked for
    assert lost == [c.Acquire("a", 1)]
    assert core.machines["m1"].released_at == 3.0
    done = core.handle(c.TaskFinished(4.0, "m2", 3, 1, 0, 1.0, ask=True))
    assert [a for a in done if isinstance(a, c.Dispatch)] in (
        [c.Dispatch("m2", first[0].task, 2)], [c.Dispatch("m2", first[1].task, 2)])
    assert len(core.machines["m2"].held) == 1  # alone: nothing prefetched behind it


def test_result_from_lost_machine_or_unknown_attempt_is_ignored_not_counted():
    core = make_core(tasks=(1, 2))
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    (d,) = core.handle(c.WorkerAsked(0.0, "m1", 1))
    assert core.handle(c.TaskFinished(1.0, "m1", d.task, 9, 0, 1.0)) == [
        c.IgnoreResult("m1", d.task, "attempt 9 is not running there")]
    core.handle(c.MachineLost(2.0, "m1", "silent"))
    assert core.handle(c.TaskFinished(3.0, "m1", d.task, 1, 0, 1.0)) == [
        c.IgnoreResult("m1", d.task, "machine is not part of the run")]
    assert core.done == 0


def test_failed_task_is_retried_on_another_machine_then_recorded_failed():
    core = make_core(tasks=(1,), retries=1)
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    up(core, "m2")
    assert core.handle(c.WorkerAsked(0.0, "m1")) == [c.Dispatch("m1", 1, 1)]
    assert core.handle(c.WorkerAsked(0.0, "m2")) == []
    # m1 fails it: the retry goes to m2, which is waiting, not back to m1
    assert core.handle(c.TaskFinished(1.0, "m1", 1, 1, 3, 0.5)) == [c.Dispatch("m2", 1, 2)]
    actions = core.handle(c.TaskFinished(2.0, "m2", 1, 2, 3, 0.5, stderr=b"boom"))
    assert actions == [
        c.RecordResult(1, "failed", "m2", 2, 3, 0.5, False, b"", b"boom"),
        c.Release("m1", "bag done"),
        c.Release("m2", "bag done"),
        c.Finish("failed", "1 task(s) failed"),
    ]


def test_timed_out_task_counts_failed_without_retries():
    core = make_core(tasks=(1,))
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    core.handle(c.WorkerAsked(0.0, "m1"))
    actions = core.handle(c.TaskFinished(9.0, "m1", 1, 1, -9, 8.0, timed_out=True))
    assert actions[0] == c.RecordResult(1, "failed", "m1", 1, -9, 8.0, True, b"", b"")
    assert actions[-1] == c.Finish("failed", "1 task(s) failed")


def test_resume_skips_finished_tasks():
    core = make_core(tasks=(1, 2, 3), finished={1: "done", 2: "failed"})
    assert (core.done, core.failed, core.remaining) == (1, 1, 1)
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    assert core.handle(c.WorkerAsked(0.0, "m1", 2)) == [c.Dispatch("m1", 3, 1)]


def test_everything_already_finished_finishes_at_once():
    core = make_core(tasks=(1,), finished={1: "done"})
    assert core.handle(c.RunStarted(0.0)) == [c.Finish("done", "every task succeeded")]


def test_reconnecting_worker_gets_its_tasks_requeued():
    core = make_core(tasks=(1,))
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    core.handle(c.WorkerAsked(0.0, "m1"))
    assert core.handle(c.MachineUp(5.0, "m1")) == []
    assert core.machines["m1"].held == []
    assert core.handle(c.WorkerAsked(5.0, "m1")) == [c.Dispatch("m1", 1, 2)]
    # the result of the first attempt arrives late: ignored, the second one counts
    assert isinstance(core.handle(c.TaskFinished(6.0, "m1", 1, 1, 0, 1.0))[0], c.IgnoreResult)
    assert core.handle(c.TaskFinished(7.0, "m1", 1, 2, 0, 1.0))[0].status == "done"


def test_boot_timeout_releases_and_replaces_the_machine():
    core = make_core(tasks=(1, 2), boot_timeout_s=10.0)
    core.handle(c.RunStarted(0.0))
    core.handle(c.MachineAcquired(0.0, "m1", "a"))
    assert core.handle(c.Tick(5.0)) == []
    assert core.handle(c.Tick(11.0)) == [c.Release("m1", "boot timeout"), c.Acquire("a", 1)]


def test_cluster_that_keeps_losing_machines_is_given_up_and_run_ends_incomplete():
    core = make_core(tasks=(1,), clusters={"a": ClusterConfig("a", "local", max=1)})
    assert core.handle(c.RunStarted(0.0)) == [c.Acquire("a", 1)]
    actions = []
    for i in range(3):
        core.handle(c.MachineAcquired(float(i), f"m{i}", "a"))
        actions = core.handle(c.MachineLost(float(i), f"m{i}", "crashed"))
    assert actions == [c.Finish("incomplete", "no machines left to run the remaining tasks")]


def test_stop_requested_releases_everything():
    core = make_core(tasks=(1, 2))
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    core.handle(c.MachineAcquired(0.0, "m2", "a"))
    assert core.handle(c.StopRequested(1.0, "stopped by SIGINT")) == [
        c.Release("m1", "stopped by SIGINT"), c.Release("m2", "stopped by SIGINT"),
        c.Finish("incomplete", "stopped by SIGINT")]
    assert core.handle(c.Tick(2.0)) == []


def test_a_machine_that_came_late_is_charged_from_the_asking_and_released_even_after_the_end():
    core = make_core(tasks=(1,))
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    (task,) = [a.task for a in core.handle(c.WorkerAsked(1.0, "m1", n=1))]
    reason = "came after its acquisition was given up on"
    # during the run: charged, never handed a task, and not counted as live
    assert core.handle(c.MachineCameLate(70.0, "late1", "a", asked_at=0.0)) == [c.Release("late1", reason)]
    assert core.handle(c.WorkerAsked(70.0, "late1", n=1)) == []
    assert core.live_machines() == [core.machines["m1"]]
    assert core.handle(c.MachineCameLate(71.0, "late1", "a", asked_at=0.0)) == []  # known: not twice
    core.handle(c.TaskFinished(72.0, "m1", task, 1, 0, 1.0))
    assert core.finished is not None
    # after the end: still charged and released, for the report's total
    assert core.handle(c.MachineCameLate(80.0, "late2", "a", asked_at=79.0)) == [c.Release("late2", reason)]
    report = core.report(80.0)
    late = {m["id"]: (m["atus"], m["cost"], m["state"]) for m in report["machines"] if m["id"].startswith("late")}
    assert late == {"late1": (2, 1.0, "gone"), "late2": (1, 0.5, "gone")}  # 70 s from the asking: 2 ATUs of 60 s
    assert report["cost"]["total"] == pytest.approx(sum(m["cost"] for m in report["machines"]))


@settings(max_examples=60, deadline=None)
@given(
    n_tasks=st.integers(1, 40),
    seed=st.integers(0, 2**16),
    script=st.lists(st.tuples(st.sampled_from(["finish", "fail", "lose", "ask"]), st.integers(0, 3)), max_size=200),
)
def test_every_task_gets_exactly_one_final_result(n_tasks, seed, script):
    """Whatever happens to machines, a task is recorded once and never lost."""
    core = c.Core(range(1, n_tasks + 1), {"a": ClusterConfig("a", "local", max=4)}, random.Random(seed), retries=1)
    now = 0.0
    recorded: list[int] = []
    serial = 0

    def run(actions):
        nonlocal serial
        for a in actions:
            if isinstance(a, c.RecordResult):
                recorded.append(a.task)
            elif isinstance(a, c.Acquire):
                for _ in range(a.n):
                    serial += 1
                    name = f"m{serial}"
                    run(core.handle(c.MachineAcquired(now, name, "a")))
                    run(core.handle(c.MachineUp(now, name)))
                    run(core.handle(c.WorkerAsked(now, name, 2)))

    run(core.handle(c.RunStarted(now)))
    steps = list(script) + [("finish", i % 4) for i in range(10 * n_tasks)]
    for op, index in steps:
        if core.finished:
            break
        now += 1.0
        live = [m for m in core.live_machines() if m.state is c.MachineState.UP]
        if not live:
            break
        machine = live[index % len(live)]
        if op == "lose":
            run(core.handle(c.MachineLost(now, machine.id, "test")))
        elif op == "ask":
            run(core.handle(c.WorkerAsked(now, machine.id, 1)))
        elif machine.held:
            task, attempt = machine.held[0]
            run(core.handle(c.TaskFinished(now, machine.id, task, attempt, 1 if op == "fail" else 0, 1.0)))
    assert len(recorded) == len(set(recorded))
    assert core.done + core.failed == len(recorded)
    if core.finished and core.finished.status != "incomplete":
        assert sorted(recorded) == list(range(1, n_tasks + 1))


@pytest.mark.parametrize("n", [1, 1000])
def test_pending_bag_holds_every_task_once(n):
    core = make_core(tasks=range(1, n + 1))
    assert sorted(core._pending) == list(range(1, n + 1))


def test_deeper_prefetch_lets_a_worker_hold_more_tasks():
    core = make_core(tasks=range(1, 11), max_held=4)
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    assert len(core.handle(c.WorkerAsked(0.0, "m1", n=9))) == 4


def test_last_tasks_are_not_prefetched_to_a_busy_worker_while_another_is_idle():
    core = make_core(tasks=(1, 2))
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    core.handle(c.MachineAcquired(0.0, "m2", "a"))  # still booting
    first = core.handle(c.WorkerAsked(0.0, "m1", 2))
    assert len(first) == 1  # the second task is left for m2
    core.handle(c.MachineUp(1.0, "m2"))
    (second,) = core.handle(c.WorkerAsked(1.0, "m2", 2))
    assert {first[0].task, second.task} == {1, 2}


def test_prefetch_is_used_while_tasks_outnumber_machines():
    core = make_core(tasks=range(1, 10))
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    up(core, "m2")
    assert len(core.handle(c.WorkerAsked(0.0, "m1", 2))) == 2


def test_adaptive_prefetch_deepens_worker_queues_only_for_very_short_tasks():
    core = make_core(tasks=range(1, 200), max_held=16, adaptive_prefetch=True)
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    first = core.handle(c.WorkerAsked(0.0, "m1", n=16))
    assert len(first) == 2  # nothing known yet: one running, one prefetched
    # a no-op task: from now on the worker's queue may fill up to max_held
    more = core.handle(c.TaskFinished(0.001, "m1", first[0].task, 1, 0, 0.0001))
    assert sum(isinstance(a, c.Dispatch) for a in more) == 15
    assert len(core.machines["m1"].held) == 16


def test_adaptive_prefetch_keeps_one_prefetched_task_for_tasks_under_a_second():
    core = make_core(tasks=range(1, 50), max_held=9, adaptive_prefetch=True)
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    first = core.handle(c.WorkerAsked(0.0, "m1", n=9))
    more = core.handle(c.TaskFinished(0.5, "m1", first[0].task, 1, 0, 0.5))
    assert sum(isinstance(a, c.Dispatch) for a in more) == 1
    assert len(core.machines["m1"].held) == 2


def test_adaptive_prefetch_sends_long_tasks_one_at_a_time():
    """A task of a second or more is sent when the previous one ends: at the end of a bag a task
    queued on a slow machine would otherwise wait while a fast machine sits idle."""
    core = make_core(tasks=range(1, 50), max_held=9, adaptive_prefetch=True)
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    first = core.handle(c.WorkerAsked(0.0, "m1", n=9))
    assert len(first) == 2  # nothing known yet
    more = core.handle(c.TaskFinished(30.0, "m1", first[0].task, 1, 0, 30.0))
    assert [type(a) for a in more] == [c.RecordResult]  # it still holds the second task
    nxt = core.handle(c.TaskFinished(60.0, "m1", first[1].task, 1, 0, 30.0))
    assert [type(a) for a in nxt] == [c.RecordResult, c.Dispatch] and len(core.machines["m1"].held) == 1


def test_cost_counts_every_begun_atu_and_at_least_the_minimum_charge():
    per_second = ClusterConfig("ec2", "local", max=1, price=0.001, atu_s=1.0, min_charge_s=60.0)
    core = make_core(tasks=(1,), clusters={"ec2": per_second})
    core.handle(c.RunStarted(0.0))
    core.handle(c.MachineAcquired(0.0, "m1", "ec2"))
    assert core.machine_cost(core.machines["m1"], 10.0) == (60, pytest.approx(0.060))  # the first minute
    assert core.machine_cost(core.machines["m1"], 90.5) == (91, pytest.approx(0.091))  # then per second
    assert c.atus_begun(3600.0, 3600.0) == 1 and c.atus_begun(3600.5, 3600.0) == 2


def test_handlers_are_marked_beside_their_method_and_a_subclass_overrides_one_by_name():
    from bats.master.core.base import handles

    class Noting(c.Core):
        def _on_tick(self, ev):  # an override by name keeps the base's mark
            return [c.Notify(f"tick at {ev.now}")]

        @handles(c.OffersMade)
        def _on_offers(self, ev):
            return [c.Notify("offers")]

    core = Noting(range(1, 3), {"a": ClusterConfig("a", "local", max=1)}, random.Random(1))
    assert core.handle(c.Tick(5.0)) == [c.Notify("tick at 5.0")]
    assert core.handle(c.OffersMade(6.0, ())) == [c.Notify("offers")]
    assert c.OffersMade not in c.Core._handlers  # the base is not changed by its subclass
    with pytest.raises(TypeError, match="Core does not handle OffersMade"):
        c.Core(range(1, 3), {"a": ClusterConfig("a", "local", max=1)}, random.Random(1)).handle(c.OffersMade(0.0, ()))


def test_a_task_that_keeps_losing_its_machine_is_quarantined_and_named():
    core = make_core(tasks=(1, 2), max_machine_losses=2)
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    up(core, "m2")
    (poison,) = core.handle(c.WorkerAsked(0.0, "m1", 1))
    (other,) = core.handle(c.WorkerAsked(0.0, "m2", 1))
    core.handle(c.MachineLost(1.0, "m1", "process exited"))  # one loss: the task goes back into the bag
    up(core, "m3", now=2.0)
    assert core.handle(c.WorkerAsked(2.0, "m3", 1)) == [c.Dispatch("m3", poison.task, 2)]
    actions = core.handle(c.MachineLost(3.0, "m3", "process exited"))  # the second: quarantined
    notice = next(a for a in actions if isinstance(a, c.Notify))
    assert notice.warning and f"task {poison.task} " in notice.message and "quarantined" in notice.message
    record = next(a for a in actions if isinstance(a, c.RecordResult))
    assert (record.task, record.status, record.machine) == (poison.task, "failed", "m3")
    up(core, "m4", now=4.0)
    assert core.handle(c.WorkerAsked(4.0, "m4", 1)) == []  # never handed out again
    done = core.handle(c.TaskFinished(5.0, "m2", other.task, 1, 0, 5.0))
    assert done[0].status == "done" and c.Finish("failed", "1 task(s) failed") in done
    report = core.report(6.0)
    assert report["tasks"]["quarantined_ids"] == [poison.task] and report["tasks"]["failed"] == 1


def test_a_retry_rule_for_lost_machines_fails_their_tasks_or_counts_the_loss_as_an_attempt():
    from bats.common.retry import parse_retry

    fail = make_core(tasks=(1, 2), retry_rules=parse_retry("r", {"rules": [{"cause": "lost", "action": "fail"}]}))
    fail.handle(c.RunStarted(0.0))
    up(fail, "m1")
    up(fail, "m2")
    (lost,) = fail.handle(c.WorkerAsked(0.0, "m1", 1))
    actions = fail.handle(c.MachineLost(1.0, "m1", "process exited"))
    record = next(a for a in actions if isinstance(a, c.RecordResult))
    assert (record.task, record.status, record.exit_code) == (lost.task, "failed", -1)
    assert "[retry] fails a lost machine's task" in record.stderr.decode()
    assert fail.report(2.0)["tasks"].get("quarantined_ids") is None  # a rule, not the quarantine

    retry = make_core(tasks=(1,), retries=1,
                      retry_rules=parse_retry("r", {"rules": [{"cause": "lost", "action": "retry"}]}))
    retry.handle(c.RunStarted(0.0))
    up(retry, "m1")
    (first,) = retry.handle(c.WorkerAsked(0.0, "m1", 1))
    assert not any(isinstance(a, c.RecordResult) for a in retry.handle(c.MachineLost(1.0, "m1", "gone")))
    up(retry, "m2", now=2.0)
    assert retry.handle(c.WorkerAsked(2.0, "m2", 1)) == [c.Dispatch("m2", first.task, 2)]  # one attempt left
    actions = retry.handle(c.MachineLost(3.0, "m2", "gone"))
    assert [(a.task, a.status) for a in actions if isinstance(a, c.RecordResult)] == [(first.task, "failed")]


def test_the_report_counts_the_atus_a_machine_paid_after_its_last_task():
    """ATU 60 s at $0.5. At t=130 each machine has begun 3 ATUs: one whose last task ended at t=10
    paid 2 of them for nothing, one that never ran a task all 3, one still running a task none."""
    core = make_core(tasks=(1, 2, 3))
    core.handle(c.RunStarted(0.0))
    for name in ("m1", "m2", "m3"):
        up(core, name)
    (dispatch,) = core.handle(c.WorkerAsked(0.0, "m1", n=1))
    core.machines["m1"].drop(0, 10.0)  # its task ended at t=10 (the core hands it no other here)
    core.handle(c.WorkerAsked(0.0, "m3", n=1))
    assert [core.idle_atus(core.machines[m], 130.0, 3) for m in ("m1", "m2", "m3")] == [2, 3, 0]
    report = core.report(130.0)
    assert {m["id"]: m["idle_atus"] for m in report["machines"]} == {"m1": 2, "m2": 3, "m3": 0}
    assert report["cost"]["idle"] == pytest.approx(5 * 0.5)


def test_a_machine_lost_while_running_a_task_paid_its_atus_for_that_task_not_for_nothing():
    """Its task was stopped at t=130, when the machine went: the 3 ATUs begun by then held a task
    (the execution study counted such a machine's whole last task as idle money)."""
    core = make_core(tasks=(1, 2))
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    core.handle(c.WorkerAsked(0.0, "m1", n=1))
    core.handle(c.MachineLost(130.0, "m1", "gone"))
    assert core.machines["m1"].worked_until == 130.0
    assert core.idle_atus(core.machines["m1"], 200.0, 3) == 0


def _run_with_poison(core: c.Core, poison: int, first: list, machines: int = 1) -> list[str]:
    """Drive ``core`` as workers would: a dispatched task ends at once, except ``poison``, whose
    machine is lost when it starts; every lost machine is replaced. Returns the machines lost."""
    lost: list[str] = []
    queue = list(first)
    now, names = 10.0, iter(f"r{k}" for k in range(100))
    while queue and core.finished is None:
        now += 1.0
        action = queue.pop(0)
        if not isinstance(action, c.Dispatch):
            continue
        machine = core.machines[action.machine]
        if machine.state is c.MachineState.GONE or (action.task, action.attempt) not in machine.held:
            continue
        running = [t for t, _ in machine.held[:machine.slots]]
        if poison in running:  # it started: its machine dies, with whatever else it held
            lost.append(machine.id)
            queue.extend(core.handle(c.MachineLost(now, machine.id, "process exited")))
            name = next(names)
            up(core, name, now=now)
            queue.extend(core.handle(c.WorkerAsked(now, name, 2)))
            continue
        if action.task == running[0]:
            queue.extend(core.handle(c.TaskFinished(now, machine.id, action.task, action.attempt, 0, 1.0, ask=True)))
        else:
            queue.append(action)  # queued behind the running one: it starts when that one ends
    return lost


def test_a_poison_task_queued_behind_one_whose_result_its_crash_lost_is_quarantined_all_the_same():
    # m1 holds an honest task (running) and the poison (queued). The honest one ends, the poison
    # starts and kills the worker within milliseconds: the honest result never left. Counting only
    # the task the master believed running blamed the honest one every time and never the poison.
    core = make_core(tasks=range(1, 7), clusters={"a": ClusterConfig("a", "local", max=1)}, max_machine_losses=2)
    core.handle(c.RunStarted(0.0))
    up(core, "m1")
    honest, queued = core.handle(c.WorkerAsked(0.0, "m1", 2))
    poison = queued.task
    actions = core.handle(c.MachineLost(1.0, "m1", "process exited"))  # the honest result was lost with it
    up(core, "m2", now=2.0)
    actions += core.handle(c.WorkerAsked(2.0, "m2", 2))
    lost = ["m1", *_run_with_poison(core, poison, actions)]
    assert len(lost) == 2, lost
    report = core.report(100.0)
    assert report["tasks"]["quarantined_ids"] == [poison]
    assert report["tasks"]["done"] == 5 and honest.task != poison


def test_machines_lost_together_quarantine_no_task_however_often_it_happens():
    # spot interruptions take 3 of 4 machines at once, twice: every task on them goes back and runs
    # again, none is quarantined (each loss is shared with machines that did not hold the task)
    core = make_core(tasks=range(1, 9), clusters={"a": ClusterConfig("a", "local", max=4)}, max_machine_losses=2)
    core.handle(c.RunStarted(0.0))
    for name in ("m1", "m2", "m3", "m4"):
        up(core, name)
        core.handle(c.WorkerAsked(0.0, name, 1))
    now = 0.0
    for round_ in range(2):
        names = [m.id for m in core.live_machines()][:3]
        for name in names:
            now += 5.0
            assert not [a for a in core.handle(c.MachineLost(now, name, "spot interruption")) if isinstance(a, c.Notify)]
        for k in range(3):
            up(core, f"n{round_}{k}", now=now)
            core.handle(c.WorkerAsked(now, f"n{round_}{k}", 1))
        now += 200.0
    assert core.quarantined == []
    for machine in core.live_machines():  # the rest of the bag ends normally
        while machine.held:
            task, attempt = machine.held[0]
            now += 1.0
            core.handle(c.TaskFinished(now, machine.id, task, attempt, 0, 1.0, ask=True))
    assert core.report(now)["tasks"]["done"] == 8
