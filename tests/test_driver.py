"""The one driver base: every action of the core has a method, checked when a driver is built, and
the feed loop carries the core's actions out in order."""

from __future__ import annotations

import random

import pytest

from bats.common.config import ClusterConfig
from bats.master import core as c
from bats.master.driver import ACTIONS, Driver, carries_out


class Recorder(Driver):
    def __init__(self) -> None:
        self.core = c.Core(range(1, 4), {"a": ClusterConfig("a", "local", max=2)}, random.Random(1))
        self.done: list[c.Action] = []
        Driver.__init__(self)

    @carries_out(*ACTIONS)
    def _note(self, action: c.Action) -> None:
        self.done.append(action)


def test_the_union_is_every_action_class_of_the_actions_module():
    import inspect

    from bats.master.core import actions

    classes = {obj for _name, obj in inspect.getmembers(actions, inspect.isclass) if obj.__module__ == actions.__name__}
    assert set(ACTIONS) == classes


def test_a_driver_missing_an_action_fails_when_it_is_built_naming_it():
    class Partial(Recorder):
        _note = None  # type: ignore[assignment]

        @carries_out(c.Dispatch, c.Acquire)
        def _some(self, action: c.Action) -> None:
            pass

    with pytest.raises(TypeError, match=r"Partial does not carry out .*RecordResult"):
        Partial()


def test_only_actions_can_be_marked():
    with pytest.raises(TypeError, match="not an action of the core: Tick"):
        carries_out(c.Tick)


def test_feed_carries_the_actions_out_in_order_and_returns_them():
    d = Recorder()
    actions = d.feed(c.RunStarted(0.0))
    assert actions == [c.Acquire("a", 2)] and d.done == actions
    d.feed(c.MachineAcquired(0.0, "m1", "a"))
    d.feed(c.MachineUp(0.0, "m1"))
    asked = d.feed(c.WorkerAsked(0.0, "m1", 2))
    assert [type(a) for a in asked] == [c.Dispatch, c.Dispatch] and d.done[-2:] == asked


def test_an_overriding_method_is_used_without_marking_it_again():
    class Counting(Recorder):
        def _note(self, action: c.Action) -> None:
            self.done.append(("counted", action))

    d = Counting()
    d.feed(c.RunStarted(0.0))
    assert d.done == [("counted", c.Acquire("a", 2))]


def test_an_unknown_action_is_a_clear_error():
    d = Recorder()
    with pytest.raises(TypeError, match="cannot carry out 'nonsense'"):
        d.carry_out(["nonsense"])  # type: ignore[list-item]
