"""Every event a policy core is fed: what happened, in the past tense, with the driver's ``now``.

The drivers (:mod:`bats.master.server`, :mod:`bats.master.sim`) turn what they see (a worker's
frame, a provisioner's answer, the clock passing a wake-up time, the operator's choice) into one of
these frozen dataclasses and pass it to the core's ``handle``. :data:`Event` is the complete union;
a policy that does not use an event answers it with no actions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from .frozen_init import fast_init

if TYPE_CHECKING:
    from .offers.compose import Offer
    from .option import Option


@dataclass(frozen=True, slots=True)
class RunStarted:
    now: float


@dataclass(frozen=True, slots=True)
class MachineAcquired:
    """The provisioner accepted a request for this machine; billing starts now."""

    now: float
    machine: str
    cluster: str


@dataclass(frozen=True, slots=True)
class MachineCameLate:
    """An acquisition the run had given up on (an attempt that timed out, or one that answered
    after the run ended) returned this machine after all. It is charged from ``asked_at``, when the
    acquisition was asked for (the back end may have started billing any time after that), up to
    now, and released at once: the run did not plan with it."""

    now: float
    machine: str
    cluster: str
    asked_at: float


@dataclass(frozen=True, slots=True)
class AcquireFailed:
    now: float
    cluster: str
    n: int
    reason: str


@dataclass(frozen=True, slots=True)
class MachineUp:
    """The machine's worker said hello (again, after a reconnect); it runs ``slots`` tasks at once."""

    now: float
    machine: str
    slots: int = 1


@fast_init
@dataclass(frozen=True, slots=True)
class WorkerAsked:
    now: float
    machine: str
    n: int = 1


@fast_init
@dataclass(frozen=True, slots=True)
class TaskFinished:
    now: float
    machine: str
    task: int
    attempt: int
    exit_code: int
    runtime_s: float
    timed_out: bool = False
    ask: bool = True
    stdout: bytes = b""
    stderr: bytes = b""


@dataclass(frozen=True, slots=True)
class MachineLost:
    now: float
    machine: str
    reason: str


@dataclass(frozen=True, slots=True)
class Tick:
    now: float


@dataclass(frozen=True, slots=True)
class StopRequested:
    now: float
    reason: str


@dataclass(frozen=True, slots=True)
class PriceChanged:
    """A spot cluster's price per ATU is ``price`` from ``now`` on (ATUs that begin from now)."""

    now: float
    cluster: str
    price: float


@dataclass(frozen=True, slots=True)
class ScheduleChosen:
    """The operator chose an option (or the driver did, from ``--schedule``/``--budget``)."""

    now: float
    option: Option
    cushion_accepted: bool = False


@dataclass(frozen=True, slots=True)
class BudgetRaised:
    """The operator raised the run's budget by ``amount`` (an answer to ``WarnShort``)."""

    now: float
    amount: float


@dataclass(frozen=True, slots=True)
class OffersMade:
    """The pools' answers to :class:`~bats.master.core.actions.AskOffers`; completions in seconds from
    the question."""

    now: float
    offers: tuple[Offer, ...]


Event = Union[RunStarted, MachineAcquired, MachineCameLate, AcquireFailed, MachineUp, WorkerAsked, TaskFinished,
              MachineLost, Tick, StopRequested, PriceChanged, ScheduleChosen, OffersMade, BudgetRaised]
