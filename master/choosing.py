"""What a driver hears from whoever answers the core's options: the interface, beside the driver base.

How this works. A core with a sampling phase ends it with an ``OfferOptions`` action and waits for
``ScheduleChosen``. The real master hands the offer to a :class:`Chooser` (the command line's, in
:mod:`bats.master.cli.choosing`: from the flags, or by asking on the terminal) and polls it every
tick until it answers :class:`Chosen` or :class:`StopRun`; the simulator answers at once through the
core's own :meth:`Offering.choose`. Neither driver knows the policy behind the offer: both see a
core that offers (:class:`Offering`) and an answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .core import Core
    from .core.actions import OfferOptions, WarnShort
    from .core.option import Option


@dataclass(frozen=True)
class Chosen:
    option: Option
    cushion_accepted: bool


@dataclass(frozen=True)
class StopRun:
    reason: str


Answer = Chosen | StopRun


@dataclass(frozen=True)
class RaiseBudget:
    """The answer to an early warning (``WarnShort``): add ``amount`` to the budget."""

    amount: float


ShortAnswer = RaiseBudget | StopRun | None  # None: go on


@runtime_checkable
class Offering(Protocol):
    """A core that offers options and names the one a spec means (``cheapest``, ``fastest``, an
    option id, a budget: ValueError when none)."""

    def choose(self, spec: str) -> Option: ...


class Chooser(Protocol):
    """Who answers the options for the real master: shown once (:meth:`offer`), then asked every
    tick (:meth:`poll`, None until there is an answer)."""

    asking: bool  # the options are shown and nobody has answered yet
    chosen_at: float | None  # when an option was chosen

    def offer(self, core: Core, offer: OfferOptions) -> None: ...
    def poll(self, core: Core) -> Answer | None: ...
    # an early warning: shown once (:meth:`warn_short`), then asked every tick until it answers
    # (True, the answer; None for go on) or (False, None) while nobody has answered yet
    def warn_short(self, warning: WarnShort) -> None: ...
    def poll_short(self) -> tuple[bool, ShortAnswer]: ...
    def waiting_s(self, now: float) -> float: ...
