"""``bats.master.core``: the I/O-free brain of the master: policies as state machines, events in, actions out.

Nothing in this folder opens a socket or a file, reads a clock or starts a process (a test walks
every module of it): time comes in as each event's ``now`` and randomness as a seeded
``random.Random``, so the real master (:mod:`bats.master.server`) and the simulator
(:mod:`bats.master.sim`) share every decision.

- :mod:`.events` and :mod:`.actions`: every event a core is fed and every action it returns.
- :mod:`.billing`: how an ATU is charged.
- :mod:`.base`: the base policy (plain self-scheduling, ``--policy self``) and its hooks.
- one folder per ``--policy``: :mod:`.bats` (seed 000), :mod:`.deadline` (seed 004),
  :mod:`.adaptive` (seed 001), :mod:`.offers` (seed 002); :mod:`.registry` names them.
- :mod:`.planning`: runtime estimates, the knapsack planner, the GA, the §3.1 monitor.
"""

from .actions import (
                      Acquire,
                      Action,
                      AskOffers,
                      Cancel,
                      Dispatch,
                      Finish,
                      IgnoreResult,
                      Notify,
                      OfferOptions,
                      RecordResult,
                      Release,
                      WakeAt,
                      WarnShort,
)
from .base import (
                      DEFAULT_MAX_HELD,
                      DONE,
                      FAILED,
                      GIVE_UP_AFTER,
                      LONG_TASK_S,
                      PENDING,
                      RUNNING,
                      SHORT_TASK_S,
                      Core,
                      Machine,
                      MachineState,
)
from .billing import atus_begun, charged
from .events import (
                      AcquireFailed,
                      BudgetRaised,
                      Event,
                      MachineAcquired,
                      MachineCameLate,
                      MachineLost,
                      MachineUp,
                      OffersMade,
                      PriceChanged,
                      RunStarted,
                      ScheduleChosen,
                      StopRequested,
                      TaskFinished,
                      Tick,
                      WorkerAsked,
)

__all__ = [
    "DEFAULT_MAX_HELD", "DONE", "FAILED", "GIVE_UP_AFTER", "LONG_TASK_S", "PENDING", "RUNNING", "SHORT_TASK_S",
    "Acquire", "AcquireFailed", "BudgetRaised", "Action", "AskOffers", "Cancel", "Core", "Dispatch", "Event", "Finish", "IgnoreResult",
    "Machine", "MachineAcquired", "MachineCameLate", "MachineLost", "MachineState", "MachineUp", "Notify",
    "OfferOptions", "OffersMade", "PriceChanged", "RecordResult", "Release", "RunStarted", "ScheduleChosen",
    "StopRequested", "TaskFinished", "Tick", "WakeAt", "WarnShort", "WorkerAsked", "atus_begun", "charged",
]
