"""Option ids that hold for a whole run: the id an operator read in a table is the one ``--schedule``
(or the prompt) takes, in that session and in every later one, and the one the report and the HTML
page show. Light on purpose (no planner import): the report uses it in every run."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.planning.planner import Option


class OptionIds:
    """The ids a run gives its options, kept for the whole run (its journal's ``option_ids``): a
    configuration keeps the id it was first shown with, in every later table (options offered again
    at new prices, a run resumed after ``--plan-only``, the report, the HTML page), so the id an
    operator read is the one ``--schedule`` takes. The first table numbers its rows as the planner
    does (by cost); a configuration first seen later takes the next free number."""

    def __init__(self, known: Sequence[Sequence[object]] | None = None) -> None:
        self.ids: dict[tuple[tuple[str, int], ...], int] = {}
        for entry in known or ():
            try:
                machines, number = entry
                self.ids[machines_key(dict(machines))] = int(number)  # type: ignore[call-overload]
            except (TypeError, ValueError):
                continue  # a damaged entry: that configuration is numbered again

    def renumber(self, options: Sequence[Option]) -> list[Option]:
        """``options`` with the run's ids (an option of id 0, a budget's configuration, keeps 0)."""
        first = not self.ids
        following = max(self.ids.values(), default=0) + 1
        for option in sorted((o for o in options if o.id and machines_key(o.machines) not in self.ids), key=lambda o: o.id):
            if first:  # the run's first table: the planner's numbers
                self.ids[machines_key(option.machines)] = option.id
            else:
                self.ids[machines_key(option.machines)] = following
                following += 1
        return [dataclasses.replace(o, id=self.ids.get(machines_key(o.machines), o.id)) if o.id else o for o in options]

    def record(self) -> list[list[object]]:
        """What the journal keeps (JSON)."""
        return [[dict(machines), number] for machines, number in sorted(self.ids.items(), key=lambda kv: kv[1])]


def machines_key(machines: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """A configuration as the option ids know it (clusters with no machine left out)."""
    return tuple(sorted((name, int(n)) for name, n in machines.items() if n))
