"""``bats.master.cli``: the command-line layer: the only code that prints. ``bats-master`` (:mod:`.commands`), what the
two commands share (:mod:`.args`), and how the operator's choice is asked for (:mod:`.choosing`).

:func:`entry` is the ``bats-master`` command itself: :func:`main`, then the process ends as soon as its
output is flushed. By then the journal is closed, the report written, the sockets closed and every
worker stopped (the threads left are daemons), so the interpreter's teardown, tens of milliseconds on
every run, is skipped; :func:`main` returns the exit code and is what code calling the master in-process uses.
"""

import logging
import os
import sys
from typing import NoReturn

from .commands import main

__all__ = ["entry", "main"]


def entry() -> NoReturn:
    code = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed reader (`| head`): main has already made its peace with it
            pass
    os._exit(code)
