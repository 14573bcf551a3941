"""Which lost machines count against which tasks: the evidence for quarantining a poison task.

How this works. A task that crashes its machine (an out-of-memory kill of the worker, a
``kill -9 $PPID``) takes down every machine it is handed to; a queue quarantines such a "poison
message" after a few deliveries. Two things blur the evidence, and :class:`LossLedger` handles both.

- Which task did it? When a machine is lost the master knows the tasks it held, not which of them
  was running at that instant: a task that kills its worker within milliseconds of starting may
  have started after the worker sent the result of the one before, a result the kill then lost.
  So every task the machine held, running or queued, is a **suspect** (one loss counted), and a
  suspect is afterwards never queued: it is handed out only into a free slot, where it starts at
  once, and nothing is queued behind it on its machine while it runs (:meth:`LossLedger.is_suspect`,
  read by the core's hand-out). On a machine of one slot it then runs alone, and the next loss of
  that machine is its own; on one of several slots it shares the loss with the tasks running beside
  it, as any task there does. An honest task that was queued beside a poison one runs once more
  that way and is done.
- Was it the task at all? Machines are also lost en masse (spot interruptions, a rack, a network
  cut), with honest tasks on them. A loss is **shared** for a task when at least ``SHARED_WITH``
  other machines were lost within ``SHARED_WINDOW_S`` of it, before or after, that did not hold
  that task and are not explained otherwise: none of the tasks they held was on another lost
  machine of the last windows. A shared loss does not count against the task, and one counted
  before the others came is taken back (unless the task was quarantined already). Poison tasks
  explain their own losses: two of them taking down machine after machine at once make no mass
  loss, since each of their machines held a task another lost machine held too. Past
  ``MASS_LOSSES`` losses in one window every loss of it is shared, without looking further.

A task is quarantined once ``limit`` losses count against it (``--max-machine-losses``). The
ledger does no I/O and reads no clock: the core passes each loss's time.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

SHARED_WINDOW_S = 60.0  # losses this close in time may be one event (a mass spot interruption)
SHARED_WITH = 2  # other machines lost within the window, without the task, that make a loss shared
MASS_LOSSES = 64  # losses within one window past which all of them are shared


@dataclass
class _Loss:
    at: float
    machine: str
    held: frozenset[int]
    counted: set[int] = field(default_factory=set)  # tasks this loss counts against now


class LossLedger:
    """Losses counted per task, the suspects among the tasks, and the quarantine decision."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.counts: dict[int, int] = {}  # task -> losses counted against it (a suspect when > 0)
        self.quarantined: set[int] = set()
        self._recent: deque[_Loss] = deque()  # losses of the last two windows, oldest first

    def is_suspect(self, task: int) -> bool:
        return self.counts.get(task, 0) > 0

    def lost(self, now: float, machine: str, held: list[int]) -> list[tuple[int, int]]:
        """A machine holding ``held`` was lost at ``now``: count it where it counts, take back what
        it makes shared (or count what it makes no longer shared), and return (task, losses) of
        each task to quarantine now."""
        while self._recent and now - self._recent[0].at > 2 * SHARED_WINDOW_S:
            self._recent.popleft()
        self._recent.append(_Loss(now, machine, frozenset(held)))
        window = [loss for loss in self._recent if now - loss.at <= 2 * SHARED_WINDOW_S]
        on = Counter(task for loss in window for task in loss.held)  # lost machines each task was on
        mass = sum(1 for loss in window if now - loss.at <= SHARED_WINDOW_S) > MASS_LOSSES
        out: list[tuple[int, int]] = []
        for loss in window:
            for task in loss.held:
                if task in self.quarantined:
                    continue
                counts = not mass and not self._shared(loss, task, window, on)
                if counts == (task in loss.counted):
                    continue
                if counts:
                    loss.counted.add(task)
                    self.counts[task] = self.counts.get(task, 0) + 1
                else:
                    loss.counted.discard(task)
                    self.counts[task] -= 1
        for task in sorted({t for loss in window for t in loss.counted}):
            if task not in self.quarantined and self.counts[task] >= self.limit:
                self.quarantined.add(task)
                out.append((task, self.counts[task]))
        return out

    @staticmethod
    def _shared(loss: _Loss, task: int, window: list[_Loss], on: Counter[int]) -> bool:
        others = 0
        for other in window:
            if (other is not loss and abs(other.at - loss.at) <= SHARED_WINDOW_S and task not in other.held
                    and all(on[t] == 1 for t in other.held)):  # not explained by a task lost elsewhere too
                others += 1
                if others >= SHARED_WITH:
                    return True
        return False
