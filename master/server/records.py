"""What the server journals about the plan for the reports and a later session, once each.

How this works. The core decides; the journal's meta keeps what ``bats-master report --html`` and
a ``--resume`` need of those decisions: the options offered and the clusters' profitability
(again when they are offered anew at new spot prices), the moment the execution of a plan began
(the operator's or the flags' choice, else when the plan was first seen: an up-front budget), the
first plan of the run, and the sample a budget given up front planned with. :class:`PlanRecords`
looks at the core's view every housekeeping tick and once more at the end of the run, and writes
what is new; the views only read it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..choosing import Chooser
    from ..core import Core
    from ..state.journal import Journal


class PlanRecords:
    """See the module docstring."""

    def __init__(self) -> None:
        self._options_journaled: object = None
        self._chosen_seen = False

    def update(self, core: Core, journal: Journal, session: int, chooser: Chooser | None, now: float) -> None:
        self._journal_options(core, journal)
        self._journal_choice(core, journal, session, chooser, now)

    def _journal_options(self, core: Core, journal: Journal) -> None:
        """The options offered and the clusters' profitability, for ``bats-master report --html``."""
        view = core.view()
        options = view.options
        if not options or options is self._options_journaled:  # offered again at new prices: again
            return
        from ..core.bats.settings import option_record
        from ..views.option_ids import OptionIds
        from ..views.options_table import core_profitability

        self._options_journaled = options
        shown = OptionIds(journal.meta.get("option_ids")).renumber(options)  # the ids the operator read
        journal.set_meta("options", {"tasks": view.tasks_at_plan,
                                     "options": [option_record(o) for o in shown],
                                     "profitability": core_profitability(core)})

    def _journal_choice(self, core: Core, journal: Journal, session: int, chooser: Chooser | None,
                        now: float) -> None:
        """When the execution of a plan began, for predicted-versus-actual: the instant the operator
        (or the flags) chose, else when the plan was first seen (an up-front budget)."""
        if self._chosen_seen or core.view().selected is None:
            return
        self._chosen_seen = True
        chosen_at = getattr(chooser, "chosen_at", None)
        meta = journal.meta
        if "plan_chosen_at" not in meta:  # a resumed run keeps its first plan's time
            journal.set_meta("plan_chosen_at", chosen_at if chosen_at is not None else now)
        if "run_plan" not in meta:  # ... and its first plan: the option, its budget and cushion
            from ..core.bats.settings import option_record
            from ..views.money import run_plan_record

            view = core.view()
            assert view.selected is not None
            journal.set_meta("run_plan", run_plan_record(view, session, option_record(view.selected)))
        estimates = getattr(core, "estimates", None)
        if "sample" not in meta and estimates:  # a budget given up front offers nothing: its sample is kept here
            journal.set_meta("sample", {"session": session, "cost": core.view().sampling_cost,
                                        "sets": {name: list(e.sample) for name, e in estimates.items()}})
