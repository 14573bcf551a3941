"""What every driver of a core shares: the table from action to method, and the feed loop.

A core (:mod:`bats.master.core`) only decides; a driver makes its decisions happen. The real
master (:class:`bats.master.server.Server`, wall-clock time, ZeroMQ and provisioner plugins), the
simulator (:class:`bats.master.sim.Simulator`, virtual time) and the tests' hand-fed driver all
subclass :class:`Driver`: each marks the method that carries out an action with
:func:`carries_out`, and :meth:`Driver.feed` hands an event to the core and carries out the actions
it answers, in order.

The base also times the planning step, from the core's view alone (no driver knows a policy): the
event after which a core that was sampling is sampling no more carried the planning (the options,
or the plan), and :attr:`Driver.plan_s` is the wall time the core took to answer it. A driver feeds
each event through :meth:`Driver.handle` (or :meth:`Driver.feed`) for that.

Every action of :data:`bats.master.core.actions.Action` must have a method: a driver that lacks
one fails when it is built (``TypeError`` naming the action), not when the core first asks for it.
Adding an action to the union is therefore a change every driver has to answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, get_args

from .core import Core
from .core.actions import Action
from .core.events import Event
from .core.view import SAMPLING

ACTIONS: tuple[type, ...] = get_args(Action)

F = TypeVar("F", bound=Callable[..., Any])


def carries_out(*actions: type) -> Callable[[F], F]:
    """Mark a driver method as the one that carries out ``actions`` (one or several action types)."""
    unknown = [a for a in actions if a not in ACTIONS]
    if unknown:
        raise TypeError(f"not an action of the core: {', '.join(getattr(a, '__name__', repr(a)) for a in unknown)}")

    def mark(method: F) -> F:
        method._carries_out = actions  # type: ignore[attr-defined]
        return method

    return mark


class Driver:
    """The base of every driver; see the module docstring. A subclass sets ``self.core`` and calls
    ``Driver.__init__(self)`` before it feeds the first event."""

    core: Core
    plan_s: float | None = None  # wall time of the planning step (see the module docstring)

    def __init__(self) -> None:
        self._planning = self.core.view().phase == SAMPLING
        names: dict[type, str] = {}
        for klass in reversed(type(self).__mro__):  # a subclass's marks win over its base's
            for name, member in vars(klass).items():
                for action in getattr(member, "_carries_out", ()):
                    names[action] = name
        # by name, so a subclass overriding a marked method needs no mark of its own
        table: dict[type, Callable[[Any], None]] = {
            action: method for action, name in names.items() if callable(method := getattr(self, name, None))}
        missing = [a.__name__ for a in ACTIONS if a not in table]
        if missing:
            raise TypeError(f"{type(self).__name__} does not carry out the core's action(s) {', '.join(missing)}: "
                            "mark a method with @carries_out(...) for each")
        self._execute = table

    def carry_out(self, actions: Iterable[Action]) -> None:
        """Carry out ``actions`` in order (an action may feed more events; they are handled
        depth-first, before the next action of this list)."""
        execute = self._execute
        for action in actions:
            try:
                method = execute[type(action)]
            except KeyError:
                raise TypeError(f"{type(self).__name__} cannot carry out {action!r}: not an action of "
                                "bats.master.core.actions") from None
            method(action)

    def handle(self, event: Event) -> list[Action]:
        """The core's answer to ``event``; the event that ends the sampling phase is timed (``plan_s``)."""
        if not self._planning:
            return self.core.handle(event)
        started = time.perf_counter()
        actions = self.core.handle(event)
        if self.core.phase != SAMPLING:
            self._planning = False
            self.plan_s = time.perf_counter() - started
        return actions

    def feed(self, event: Event) -> list[Action]:
        """Hand ``event`` to the core, carry out what it answers, and return those actions."""
        actions = self.handle(event)
        self.carry_out(actions)
        return actions
