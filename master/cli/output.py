"""Writing to standard output when its reader may have gone (``bats-master results | head``).

A reader that closes the pipe early is not an error of the run: the first write that meets the
closed pipe points standard output at ``/dev/null`` (so nothing later, nor Python's own flush at
exit, fails on it again) and the command goes on and exits with its own status.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TextIO


def emit(text: str, *, file: TextIO | None = None, end: str = "\n") -> None:
    """``print(text)`` to ``file`` (standard output by default), flushed; a closed pipe silences it."""
    stream = file if file is not None else sys.stdout
    try:
        print(text, end=end, file=stream, flush=True)
    except BrokenPipeError:
        silence(stream)


def silence(stream: TextIO | None = None) -> None:
    """Point ``stream``'s file descriptor at /dev/null: its reader is gone."""
    stream = stream if stream is not None else sys.stdout
    with contextlib.suppress(AttributeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
