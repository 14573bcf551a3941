"""How ``bats-master`` answers the core's :class:`~bats.master.core.bats.policy.OfferOptions`: from the
command-line flags, or by asking the operator on the terminal. Part of the command-line layer
(it prints the options table and the prompt).

The server calls :meth:`Chooser.offer` once, when the sampling phase ends, and then
:meth:`Chooser.poll` on every housekeeping tick until it returns an answer: workers keep being
served while the operator reads the table, so no machine is declared lost and the sampling
machines keep working through the ATU already paid for. The terminal is read by a daemon thread
(``input()`` blocks), one line at a time, handed over through a queue.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from bats.common import clock

from ..choosing import Answer, Chosen, Offering, RaiseBudget, ShortAnswer, StopRun
from ..core.actions import OfferOptions, WarnShort
from .output import emit

if TYPE_CHECKING:  # the planners (numpy) are imported when options are shown, not by every run
    from ..core import Core
    from ..core.bats.settings import Choice
    from ..core.planning.planner import Option
    from ..views.option_ids import OptionIds

log = logging.getLogger(__name__)

PROMPT = "choose an option: an id, cheapest, fastest, or a budget such as $25 (q to stop): "


class FlagChooser:
    """Answers from the flags (``--schedule``, ``--cushion``, ``--plan-only``); a
    :class:`~bats.master.choosing.Chooser`."""

    def __init__(self, choice: Choice, out: TextIO | None = None, ids: OptionIds | None = None) -> None:
        from ..views.option_ids import OptionIds

        self.choice = choice
        self.out = out if out is not None else sys.stdout
        self.ids = ids if ids is not None else OptionIds()  # the run's option ids (kept in its journal)
        self.on_ids: Callable[[list[list[object]]], None] | None = None  # called with them when they grow
        self.offered: tuple[Option, ...] = ()  # the options shown last, with the run's ids
        self._answer: Answer | None = None
        self.before_show: Callable[[], None] | None = None  # e.g. stop a live progress bar
        self.plot_path: str | None = None  # --plot FILE.png: the options drawn there when offered
        self.text_plot = self.out.isatty() if hasattr(self.out, "isatty") else False  # beside the table
        self.chosen_at: float | None = None  # when an option was chosen (the execution starts then)
        self._plot_thread: threading.Thread | None = None
        self.asking = False  # the options are shown and the operator has not answered yet
        self.asked_at: float | None = None  # when the current question was put
        self.waited_s = 0.0  # time spent waiting for the operator's answers, questions now over
        self._short: tuple[bool, ShortAnswer] = (False, None)  # the answer to an early warning

    def waiting_s(self, now: float) -> float:
        """Time the run has spent waiting for the operator's answers, up to ``now``: the live
        figures leave it out of the rate, which measures the machines, not the operator."""
        ongoing = now - self.asked_at if self.asking and self.asked_at is not None else 0.0
        return self.waited_s + max(0.0, ongoing)

    def offer(self, core: Core, offer: OfferOptions) -> None:
        before = self.ids.record()
        offer = dataclasses.replace(offer, options=tuple(self.ids.renumber(offer.options)))
        self.offered = offer.options
        if self.on_ids is not None and self.ids.record() != before:
            self.on_ids(self.ids.record())
        self.show(offer, core)
        if self.choice.plan_only:
            self._answer = StopRun("stopped after the options (--plan-only)")
        elif self.choice.schedule is not None:
            try:
                option = self.choose(core, self.choice.schedule)
            except ValueError as exc:
                self._answer = StopRun(f"--schedule {self.choice.schedule}: {exc}")
                return
            self._answer = self._chosen(Chosen(option, self.choice.cushion))

    def choose(self, core: Core, spec: str) -> Option:
        """The option ``spec`` names (as :meth:`BatsCore.choose`), an id read in the table shown."""
        text = spec.strip()
        if text.isdigit():
            for option in self.offered:
                if option.id == int(text):
                    return option
            shown = ", ".join(str(o.id) for o in sorted(self.offered, key=lambda o: o.id))
            raise ValueError(f"no option {text} (the options are {shown})")
        option = _offering(core).choose(spec)
        return self.ids.renumber([option])[0]

    def _as_shown(self, chosen: Chosen) -> None:
        """Say which row runs when it is not the chosen one: a budget raised for the rounding problem
        (seed 000 Theorem 1) pays the row's machines only with its cushion, and without it the run
        takes the row the table shows for that ("cheapest (no cushion)")."""
        from ..core.planning.planner import NO_CUSHION

        option = chosen.option
        if option.rounding != "a" or chosen.cushion_accepted or not option.cushion:
            return
        label = option.label + NO_CUSHION
        row = next((o for o in self.offered if label in (o.label, *o.also)), None)
        if row is None:
            return
        machines = ", ".join(f"{n} x {name}" for name, n in option.machines.items() if n)
        emit(f"option {option.id}'s machines ({machines}) need its cushion ({option.cushion:g}); declined, the run "
             f"takes option {row.id} ({label}) as shown (--cushion yes runs option {option.id})", file=self.out)

    def show(self, offer: OfferOptions, core: Core | None = None) -> None:
        if self.before_show is not None:
            self.before_show()
        from ..core.planning.planner import spread
        from ..views.options_table import core_profitability, format_options

        shown = list(offer.options) if self.choice.all_options else spread(offer.options)
        profit = core_profitability(core) if core is not None else None
        text = format_options(shown, offer.estimates, offer.tasks, hidden=len(offer.options) - len(shown),
                              profit=profit, slots=core.cluster_slots if core is not None else None)
        if self.text_plot:
            from ..views.plots import text_plot

            text += "\n\n" + text_plot(offer.options)
        if self.plot_path:
            # drawn beside the loop (matplotlib takes a second to load): workers keep being served
            text += f"\nthe options are drawn in {self.plot_path}"
            self._plot_thread = threading.Thread(target=self._write_plot, args=(self.plot_path, offer),
                                                 name="bats-plot", daemon=True)
            self._plot_thread.start()
        emit(text, file=self.out)

    def wait_for_plot(self, timeout_s: float = 60.0) -> None:
        """Let the drawing started at the offer end before the process does (matplotlib's C++ code
        aborts the interpreter's exit if it is cut off in a thread)."""
        if self._plot_thread is not None:
            self._plot_thread.join(timeout_s)

    @staticmethod
    def _write_plot(path: str, offer: OfferOptions) -> None:
        from ..views.plots import write_options_png

        try:
            write_options_png(path, offer.options, tasks=offer.tasks)
        except OSError as exc:
            log.error("--plot %s: cannot write the picture: %s", path, exc.strerror or exc)

    def poll(self, core: Core) -> Answer | None:
        answer, self._answer = self._answer, None
        return self._chosen(answer)

    def warn_short(self, warning: WarnShort) -> None:
        """An early warning with nobody to ask: ``--when-short`` answers."""
        if self.choice.when_short == "stop":
            self._short = (True, StopRun(f"stopped by --when-short stop: {warning.message}"))
        else:
            self._short = (True, None)

    def poll_short(self) -> tuple[bool, ShortAnswer]:
        answer, self._short = self._short, (False, None)
        return answer

    def _chosen(self, answer: Answer | None) -> Answer | None:
        if isinstance(answer, Chosen) and self.chosen_at is None:
            self.chosen_at = clock.now()
            self._as_shown(answer)
        return answer


class TerminalChooser(FlagChooser):
    """Asks on the terminal when the flags did not decide; asks about the cushion too when the
    chosen option has one and ``--cushion`` was not given."""

    def __init__(self, choice: Choice, cushion_given: bool, out: TextIO | None = None,
                 read_line=None, ids: OptionIds | None = None) -> None:
        super().__init__(choice, out, ids)
        self.cushion_given = cushion_given
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._read_line = read_line or sys.stdin.readline
        self._pending: Option | None = None  # chosen, waiting for the cushion answer

    def offer(self, core: Core, offer: OfferOptions) -> None:
        """Show the options and ask; an offer while asking (the options were re-planned at new
        spot prices) shows the new table and asks again on the same reader."""
        again = self.asking
        super().offer(core, offer)
        if self._answer is None:
            if again:
                emit(PROMPT if self._pending is None else "", end="", file=self.out)
            else:
                self._ask(PROMPT)

    def _ask(self, prompt: str) -> None:
        emit(prompt, end="", file=self.out)
        if not self.asking:
            self.asked_at = clock.now()
        self.asking = True
        threading.Thread(target=self._read, name="bats-prompt", daemon=True).start()

    def warn_short(self, warning: WarnShort) -> None:
        """An early warning on a terminal: ask whether to go on, stop, or raise the budget."""
        self._short_warning = warning
        self._short_lines: queue.Queue[str | None] | None = queue.Queue()
        emit(f"{warning.message}\n  continue, stop, or raise the budget by {warning.needed:.2f}? [c/s/r] ",
             end="", file=self.out)
        threading.Thread(target=self._read_into, args=(self._short_lines,), name="bats-short", daemon=True).start()

    def _read_into(self, lines: queue.Queue[str | None]) -> None:
        try:
            line = self._read_line()
        except (OSError, ValueError):
            line = ""
        lines.put(line if line else None)

    def poll_short(self) -> tuple[bool, ShortAnswer]:
        lines = getattr(self, "_short_lines", None)
        if lines is None:
            return False, None
        try:
            line = lines.get_nowait()
        except queue.Empty:
            return False, None
        self._short_lines = None
        warning = self._short_warning
        text = (line or "").strip().lower()
        if text in ("s", "stop", "q"):
            return True, StopRun(f"stopped by the operator after the warning: {warning.message}")
        if text in ("r", "raise") and warning.needed > 0:
            return True, RaiseBudget(warning.needed)
        return True, None  # c, an empty line, end of input: go on

    def _read(self) -> None:
        try:
            line = self._read_line()
        except (OSError, ValueError):
            line = ""
        self._lines.put(line if line else None)  # None: end of input

    def poll(self, core: Core) -> Answer | None:
        if self._answer is not None:
            return super().poll(core)
        try:
            line = self._lines.get_nowait()
        except queue.Empty:
            return None
        self.asking = False
        if self.asked_at is not None:
            self.waited_s += max(0.0, clock.now() - self.asked_at)
            self.asked_at = None
        if line is None:
            return StopRun("no choice made (end of input)")
        text = line.strip()
        if self._pending is not None:
            option, self._pending = self._pending, None
            return self._chosen(Chosen(option, text.lower() in ("y", "yes")))
        if text.lower() in ("q", "quit", "stop"):
            return StopRun("stopped at the options by the operator")
        try:
            option = self.choose(core, text)
        except ValueError as exc:
            emit(f"  {exc}", file=self.out)
            self._ask(PROMPT)
            return None
        if option.cushion > 0 and not self.cushion_given:
            self._pending = option
            self._ask(f"option {option.id} may need a cushion of {option.cushion:.2f} beyond its budget of "
                      f"{option.budget:.2f} for the last tasks; allow it? [y/N] ")
            return None
        return self._chosen(Chosen(option, self.choice.cushion))


def _offering(core: Core) -> Offering:
    """The core that offered the options, which names the one a spec means."""
    assert isinstance(core, Offering), f"{type(core).__name__} offers no options"
    return core
