"""A recorded session's events fed again to a fresh core: does it take the same actions?

How this works. A session of the real master records every event it fed its core and the actions
the core answered (:mod:`..state.events`), after a header that says how the core was built. For each
session, :func:`replay_session` builds the same core (the same task ids, config, seed, choice and
settings; the finished tasks of a resumed session; the slots the clusters were found to have),
feeds it the events in their order, and compares each answer with the recorded one, task output
left out. The first answer that differs is returned as a :class:`Divergence`; none means the core
took every decision of the run again. No driver runs: the recorded events already say what the
machines did, and the actions are only compared.

The real master changes one thing outside the events: a provisioner that can give fewer machines
than a cluster's ``max`` lowers it on the core (``usable_max``). A replay of such a run may differ
after that point.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bats.common.config import Config

from ..core import Action, Core, Event
from ..core.registry import build_core
from ..state.events import EventLogError, without_output


@dataclass(frozen=True)
class Divergence:
    """The first event whose answer differs: its index in the session, the event, and both answers."""

    session: int
    index: int
    event: Event
    recorded: list[Action]
    replayed: list[Action]

    def describe(self) -> str:
        def lines(actions: Sequence[Action]) -> str:
            return "\n".join(f"    {a!r}" for a in actions) or "    (nothing)"

        return (f"session {self.session}, event {self.index}: {self.event!r}\n  the run answered:\n"
                f"{lines(self.recorded)}\n  the replay answered:\n{lines(self.replayed)}")


def core_for(task_ids: Iterable[int], config: Config, header: dict[str, Any]) -> Core:
    """The core a session built, from its header (see :mod:`..state.events`)."""
    slots = header.get("slots") or {}
    clusters = {name: dataclasses.replace(cl, slots=slots.get(name, cl.slots)) for name, cl in config.clusters.items()}
    config = dataclasses.replace(config, clusters=clusters)
    finished = {int(task): outcome for task, outcome in (header.get("finished") or {}).items()}
    return build_core(task_ids, config, random.Random(header["seed"]), header["choice"],
                      prior_sample=header.get("prior_sample"), retries=header["retries"],
                      boot_timeout_s=header["boot_timeout_s"], max_machine_losses=header.get("max_machine_losses", 2),
                      finished=finished, max_held=header["max_held"],
                      adaptive_prefetch=header["adaptive_prefetch"])


@dataclass(frozen=True)
class SessionReplay:
    """One session replayed: how many events were fed, and the first divergence (None: the same)."""

    session: int
    events: int
    divergence: Divergence | None


def replay(records: Iterable[tuple[int, str, Any]], make_core: Callable[[dict[str, Any]], Core]) -> Iterator[SessionReplay]:
    """Replay every session of an events file's ``records`` (:func:`~..state.events.read`), each on a
    fresh core from ``make_core(header)``; after a divergence the rest of its session is skipped."""
    core: Core | None = None
    session = fed = 0
    divergence: Divergence | None = None
    for index, kind, payload in records:
        if kind == "session":
            if core is not None:
                yield SessionReplay(session, fed, divergence)
            session, header = payload
            core, fed, divergence = make_core(header), 0, None
        elif core is None:
            raise EventLogError(f"record {index}: an event before any session header")
        elif divergence is None:
            event, recorded = payload
            replayed = [without_output(a) for a in core.handle(event)]
            if replayed != list(recorded):
                divergence = Divergence(session, fed, event, list(recorded), replayed)
            fed += 1
    if core is not None:
        yield SessionReplay(session, fed, divergence)
