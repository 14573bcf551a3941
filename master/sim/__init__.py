"""``bats.master.sim``: the virtual-time driver: the same cores as the real master, against simulated machines
(:mod:`.driver`), with task runtimes drawn from distributions (:mod:`.runtimes`). The ``bats-sim``
command around it is :mod:`bats.master.cli.sim`."""

from .driver import Simulator, simulate

__all__ = ["Simulator", "simulate"]
