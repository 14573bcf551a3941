"""Every action a policy core returns: what its driver must do, in the imperative.

A driver carries each one out (:class:`bats.master.driver.Driver` holds the table from action type
to method; a driver that lacks one fails when it is built). :data:`Action` is the complete union.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

from .frozen_init import fast_init

if TYPE_CHECKING:
    from .option import Option


@dataclass(frozen=True, slots=True)
class Acquire:
    cluster: str
    n: int


@dataclass(frozen=True, slots=True)
class Release:
    machine: str
    reason: str


@fast_init
@dataclass(frozen=True, slots=True)
class Dispatch:
    machine: str
    task: int
    attempt: int


@dataclass(frozen=True, slots=True)
class Cancel:
    """Stop running (or drop from the queue) this attempt on this machine: another copy of the task
    ended first. The machine then asks for work again; a result of the attempt that still comes
    is ignored."""

    machine: str
    task: int
    attempt: int
    reason: str


@fast_init
@dataclass(frozen=True, slots=True)
class RecordResult:
    """A task's final outcome, to be journaled once."""

    task: int
    status: str  # "done" or "failed"
    machine: str
    attempts: int
    exit_code: int
    runtime_s: float
    timed_out: bool
    stdout: bytes
    stderr: bytes


@dataclass(frozen=True, slots=True)
class IgnoreResult:
    """A result the core did not expect (stale, duplicate, from a lost machine): dropped."""

    machine: str
    task: int
    reason: str


@dataclass(frozen=True, slots=True)
class Finish:
    status: str  # "done", "failed" (some task failed) or "incomplete"
    reason: str


@dataclass(frozen=True, slots=True)
class OfferOptions:
    """Show the operator the options (the sampling phase is over) and feed back a choice."""

    options: tuple[Option, ...]
    tasks: int  # the tasks the options were planned for
    estimates: dict[str, tuple[float, float]]  # cluster -> (mean_s, sd_s)
    # cluster -> the complete sample set the estimates come from (journaled, so that a run resumed
    # before a choice plans from it instead of sampling again); not part of what the action says
    samples: dict[str, tuple[float, ...]] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class WakeAt:
    """Feed a ``Tick`` no later than ``at``: a machine must be let go then."""

    at: float


@dataclass(frozen=True, slots=True)
class Notify:
    """Something the operator should read in the log (a plan chosen or changed, money running out);
    ``warning``: something went wrong (shown even with ``--quiet``)."""

    message: str
    warning: bool = False


@dataclass(frozen=True, slots=True)
class AskOffers:
    """Ask every pool for offers for ``tasks`` tasks of ``task_runtime_s`` due in ``deadline_s``."""

    tasks: int
    task_runtime_s: float
    deadline_s: float  # from now


@dataclass(frozen=True, slots=True)
class WarnShort:
    """The chance that the run ends within its money (budget + accepted cushion) fell below the
    threshold: tell the operator (log, live view, status, report) and, where someone can answer,
    ask whether to go on, stop (feed ``StopRequested``) or raise the budget by ``needed`` (feed
    ``BudgetRaised``); without an answer the run goes on."""

    chance: float  # share of replays of the tasks left that end within the money left
    threshold: float
    needed: float  # the money that brings the chance back to the threshold
    spent: float  # what the budget has paid so far
    money: float  # budget + accepted cushion
    message: str


Action = Union[Acquire, Release, Dispatch, Cancel, RecordResult, IgnoreResult, Finish, OfferOptions, WakeAt, Notify, AskOffers,
               WarnShort]
