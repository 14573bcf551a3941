"""The master's clock: seconds since the epoch that move with the monotonic clock, never stepped.

Every time the master stamps (events fed to the core, ATU starts and edges, boot and call timeouts,
the journal's times) comes from :func:`now`. It is anchored to the wall clock once, when the
process starts, and from then on advances with :func:`time.monotonic`: an NTP step or an operator's
``date -s`` while a run is going changes neither the bill nor the edges at which machines are
released. Times stay epoch seconds, so the journal, the report and a later ``--resume`` read them
as dates. A run records where its clock started (:func:`mark`: wall and monotonic seconds and the
kernel's boot id); a ``--resume`` on the same boot continues that clock (:func:`continue_from`)
instead of anchoring anew, so a wall-clock step between a crash and the resume does not stretch
or shrink the run's makespan either. After a reboot the monotonic clock starts again, and the new
session anchors to the wall clock as a first one does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


class SteadyClock:
    """Wall-clock seconds from ``wall`` read once, advanced by ``mono`` since."""

    def __init__(self, wall: Callable[[], float] = time.time,
                 mono: Callable[[], float] = time.monotonic) -> None:
        self._mono = mono
        self._offset = wall() - mono()

    def __call__(self) -> float:
        return self._offset + self._mono()

    def continue_from(self, wall: float, mono: float) -> float:
        """Read ``wall`` at monotonic time ``mono`` from now on; returns how far that moved the clock."""
        moved = (wall - mono) - self._offset
        self._offset = wall - mono
        return moved


now = SteadyClock()


def _boot_id() -> str | None:
    try:
        return BOOT_ID.read_text().strip() or None
    except OSError:
        return None


def mark() -> dict[str, Any]:
    """Where this run's clock is now, for the journal: wall and monotonic seconds, the boot."""
    return {"wall": now(), "mono": time.monotonic(), "boot": _boot_id()}


def continue_from(marked: Any) -> float | None:
    """Continue the clock a run :func:`mark`-ed, when this is the same boot (the monotonic clock has
    run on since); returns how far the wall clock had moved apart from it, or None when it cannot."""
    if not isinstance(marked, dict):
        return None
    wall, mono, boot = marked.get("wall"), marked.get("mono"), marked.get("boot")
    if (not isinstance(wall, (int, float)) or not isinstance(mono, (int, float)) or boot is None
            or boot != _boot_id() or time.monotonic() < mono):
        return None
    return now.continue_from(float(wall), float(mono))
