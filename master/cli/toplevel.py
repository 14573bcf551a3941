"""``python -m bats``: the three commands from one entry point, for a machine where the scripts are
not on PATH (``python -m bats master --bag tasks.txt`` is ``bats-master --bag tasks.txt``)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from bats.common import __version__

USAGE = """usage: python -m bats {master,sim,worker} [ARGS...]

BaTS runs bags of shell tasks on rented machines within a budget. Three commands:
  master   bats-master: run a bag (sampling, the options, the execution) and its subcommands
           results, status, report, cleanup, completion
  sim      bats-sim: the same scheduling core in virtual time, on simulated machines
  worker   bats-worker: the worker a provisioner starts on each machine

'python -m bats master --help' (or sim, worker) shows a command's options; the full names
(bats-master, bats-sim, bats-worker) are accepted too."""


def _command(name: str) -> Callable[[list[str]], int] | None:
    if name in ("master", "bats-master"):
        from . import main as master

        return master
    if name in ("sim", "bats-sim"):
        from .sim import main as sim

        return sim
    if name in ("worker", "bats-worker"):
        from bats.worker.main import main as worker

        return worker
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    if args[0] == "--version":
        print(f"bats {__version__}")
        return 0
    command = _command(args[0])
    if command is None:
        print(f"python -m bats: error: unknown command {args[0]!r}: expected master, sim or worker "
              "(see 'python -m bats --help')", file=sys.stderr)
        return 2
    return command(args[1:])
