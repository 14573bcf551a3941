"""Run a command with a pseudo-terminal as its terminal, the way an operator would, and answer
what it prints (shared by the tests of the progress bar and of the options prompt)."""

from __future__ import annotations

import os
import pty
import select
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def run_on_terminal(argv: Sequence[str], cwd: Path, respond: Callable[[bytes], bytes | None] | None = None,
                    timeout: float = 120) -> tuple[int, str]:
    """Run ``argv`` on a new pty until it exits; after every chunk of output ``respond(seen so far)``
    may return bytes to type. Returns (exit code, everything it wrote)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, with the pty as its terminal
        os.chdir(cwd)
        os.execv(argv[0], list(argv))
    seen = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
            answer = respond(seen) if respond is not None else None
            if answer:
                os.write(fd, answer)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), seen.decode(errors="replace")
