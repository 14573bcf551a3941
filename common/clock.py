"""The master's clock: seconds since the epoch that move with the monotonic clock, never stepped.

Every time the master stamps (events fed to the core, ATU starts and edges, boot and call timeouts,
the journal's times) comes from :func:`now`. It is anchored to the wall clock once, when the
process starts, and from then on advances with :func:`time.monotonic`: an NTP step or an operator's
``date -s`` while a run is going changes neither the bill nor the edges at which machines are
released. Times stay epoch seconds, so the journal, the report and a later ``--resume`` (which
anchors its own clock when it starts) read them as dates.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class SteadyClock:
    """Wall-clock seconds from ``wall`` read once, advanced by ``mono`` since."""

    def __init__(self, wall: Callable[[], float] = time.time,
                 mono: Callable[[], float] = time.monotonic) -> None:
        self._mono = mono
        self._offset = wall() - mono()

    def __call__(self) -> float:
        return self._offset + self._mono()


now = SteadyClock()
