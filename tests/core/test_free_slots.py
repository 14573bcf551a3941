"""The end-game rule of the hand-out reads a running sum of free slots instead of scanning every
machine: on random fleets and random event sequences, the sum always equals the scan, and the rule
answers exactly as the scan-based rule did."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from bats.common.config import ClusterConfig
from bats.master import core as c


def scanned_free_slots(core: c.Core, but: c.Machine | None = None) -> int:
    return sum(m.free_slots for m in core.machines.values() if m is not but and m.state is not c.MachineState.GONE)


def scanned_idle(core: c.Core) -> dict[str, int]:
    """Machines not gone that hold nothing, per cluster (what the offers policy's rule reads)."""
    idle: dict[str, int] = {}
    for m in core.machines.values():
        if m.state is not c.MachineState.GONE and not m.held:
            idle[m.cluster] = idle.get(m.cluster, 0) + 1
    return idle


def scanned_rule(core: c.Core, machine: c.Machine) -> bool:
    """The rule as it was written before the sum: a scan of every machine."""
    available = len(core._pending) + len(core._retry)
    if available >= core._live * max(core.cluster_slots.values(), default=1):
        return False
    return available <= scanned_free_slots(core, but=machine)


steps = st.lists(st.tuples(st.sampled_from(["acquire", "up", "ask", "finish", "fail", "lose", "hello again"]),
                           st.integers(0, 1_000)), min_size=1, max_size=120)


@settings(max_examples=200, deadline=None)
@given(slots=st.lists(st.integers(1, 6), min_size=1, max_size=3), tasks=st.integers(1, 60),
       max_held=st.integers(1, 4), retries=st.integers(0, 2), plan=steps)
def test_the_running_sum_of_free_slots_equals_a_scan_of_every_machine(slots, tasks, max_held, retries, plan):
    clusters = {f"c{i}": ClusterConfig(f"c{i}", "local", max=50, slots=n) for i, n in enumerate(slots)}
    core = c.Core(range(1, tasks + 1), clusters, random.Random(3), max_held=max_held, retries=retries)
    core.handle(c.RunStarted(0.0))
    names = list(clusters)
    made = 0
    for now, (kind, pick) in enumerate(plan, start=1):
        live = [m for m in core.machines.values() if m.state is not c.MachineState.GONE]
        up = [m for m in live if m.state is c.MachineState.UP]
        busy = [m for m in up if m.held]
        if kind == "acquire":
            made += 1
            core.handle(c.MachineAcquired(now, f"m{made}", names[pick % len(names)]))
        elif kind == "up" and live:
            m = live[pick % len(live)]
            core.handle(c.MachineUp(now, m.id, 1 + pick % 6))
        elif kind == "hello again" and up:  # a reconnect: what it held goes back
            core.handle(c.MachineUp(now, up[pick % len(up)].id, up[pick % len(up)].slots))
        elif kind == "ask" and up:
            core.handle(c.WorkerAsked(now, up[pick % len(up)].id, 1 + pick % 8))
        elif kind in ("finish", "fail") and busy:
            m = busy[pick % len(busy)]
            task, attempt = m.held[pick % len(m.held)]
            core.handle(c.TaskFinished(now, m.id, task, attempt, 0 if kind == "finish" else 1, 0.5,
                                       ask=bool(pick % 2)))
        elif kind == "lose" and live:
            core.handle(c.MachineLost(now, live[pick % len(live)].id, "test"))
        assert core._free.free == scanned_free_slots(core)
        assert {k: v for k, v in core._free.idle.items() if v} == scanned_idle(core)
        for m in core.machines.values():
            if m.state is c.MachineState.UP and len(m.held) >= m.slots:
                assert core._better_left_for_an_idle_machine(m) == scanned_rule(core, m)
        if core.finished is not None:
            break


def test_a_stopped_copy_gives_its_slot_back_to_the_sum():
    """The BaTS end-game stops the losing attempt of a copied task (its machine's slot frees)."""
    from helpers.cores import make_core, sampled

    from bats.master.core.events import ScheduleChosen

    core = make_core(tasks=50)
    d, event, _actions = sampled(core, {"a": 20.0, "b": 5.0})
    d.feed(ScheduleChosen(event.now, core.choose("fastest"), True))
    cancels = 0
    while core.finished is None:
        _event, actions = d.step()
        cancels += sum(isinstance(a, c.Cancel) for a in actions)
        assert core._free.free == scanned_free_slots(core)
        assert {k: v for k, v in core._free.idle.items() if v} == scanned_idle(core)
    assert cancels >= 1
