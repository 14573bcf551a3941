"""Progress while a bag runs: a live line on a terminal, a log line every few seconds otherwise."""

from __future__ import annotations

import logging
import sys
import time
from typing import TYPE_CHECKING

from bats.common.durations import format_duration

if TYPE_CHECKING:
    from bats.master.server import Server

log = logging.getLogger("bats.progress")
LOG_EVERY_S = 5.0


class ProgressView:
    """Call :meth:`update` from the server's tick; :meth:`close` when the run ends."""

    def __init__(self, total: int, already_done: int, live: bool | None = None) -> None:
        self.total = total
        self.already = already_done
        self.started = time.monotonic()
        self.last_log = self.started
        self.live = sys.stderr.isatty() if live is None else live
        self._progress = None
        if self.live:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]bats"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(), transient=True, redirect_stderr=True, redirect_stdout=False,
            )
            self._progress.start()
            self._task = self._progress.add_task("bag", total=total, completed=already_done, info="")

    def line(self, server: Server) -> tuple[int, str]:
        core = server.core
        finished = core.done + core.failed
        elapsed = max(1e-9, time.monotonic() - self.started)
        rate = (finished - self.already) / elapsed
        up = sum(1 for m in core.live_machines() if m.state.value == "up")
        booting = sum(1 for m in core.live_machines() if m.state.value == "booting")
        eta = format_duration(core.remaining / rate) if rate > 0 and core.remaining else "-"
        info = (f"{core.failed} failed, {rate:.1f} tasks/s, {up} machines up"
                + (f", {booting} booting" if booting else "") + f", eta {eta}")
        phase = getattr(core, "phase", None)  # BaTS: where it is and what it spent
        if phase is not None:
            info += f", {phase}"
            if core.budget is not None:
                cushion = f" + {core.cushion:.2f}" if core.cushion else ""
                info += f", spent {core.spent(time.time()):.2f} (budget {core.budget:.2f}{cushion})"
        return finished, info

    def update(self, server: Server) -> None:
        finished, info = self.line(server)
        if self._progress is not None:
            self._progress.update(self._task, completed=finished, info=info)
            return
        now = time.monotonic()
        if now - self.last_log >= LOG_EVERY_S:
            self.last_log = now
            log.warning("progress: %d/%d tasks finished, %s", finished, self.total, info)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
