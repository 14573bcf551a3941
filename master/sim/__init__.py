"""The virtual-time driver and ``bats-sim``: the same cores as the real master, against simulated
machines (:mod:`.driver`), with task runtimes drawn from distributions (:mod:`.runtimes`)."""

from .driver import Simulator, main

__all__ = ["Simulator", "main"]
