"""fast_init: the faster constructor of the core's hot events and actions keeps what the dataclass promised."""

from __future__ import annotations

import dataclasses

import pytest

from bats.master import core as c
from bats.master.core.frozen_init import fast_init


def test_the_hot_events_and_actions_build_as_dataclasses_do():
    ev = c.TaskFinished(2.0, "m1", 7, 1, 0, 0.5)
    assert (ev.now, ev.machine, ev.task, ev.attempt, ev.exit_code, ev.runtime_s) == (2.0, "m1", 7, 1, 0, 0.5)
    assert (ev.timed_out, ev.ask, ev.stdout, ev.stderr) == (False, True, b"", b"")  # the defaults
    assert ev == c.TaskFinished(now=2.0, machine="m1", task=7, attempt=1, exit_code=0, runtime_s=0.5, ask=True)
    assert hash(ev) == hash(c.TaskFinished(2.0, "m1", 7, 1, 0, 0.5))
    assert dataclasses.replace(ev, task=8).task == 8
    assert repr(c.Dispatch("m1", 3, 2)) == "Dispatch(machine='m1', task=3, attempt=2)"
    assert c.RecordResult(1, "done", "m", 1, 0, 0.0, False, b"", b"") != c.RecordResult(1, "done", "m", 2, 0, 0.0,
                                                                                         False, b"", b"")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ev.task = 9  # type: ignore[misc]
    with pytest.raises(TypeError, match="missing"):
        c.Dispatch("m1")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected"):
        c.WorkerAsked(1.0, "m1", 2, extra=1)  # type: ignore[call-arg]


def test_fast_init_refuses_what_it_cannot_build():
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(slots=True)
    class NotFrozen:
        a: int

    for cls in (NoSlots, Factory, NotFrozen):
        with pytest.raises(TypeError):
            fast_init(cls)
