"""One master per state directory: an advisory lock on ``STATE_DIR/master.lock``.

How it works. The master that starts or resumes a run takes an exclusive ``flock`` on the lock
file (created 0600) and writes its pid into it; the kernel lets the lock go when the process
ends, however it ends, so a ``kill -9`` leaves nothing to clean up. A second ``bats-master`` on the
same state directory (a second ``--resume`` of a live run, or two fresh starts racing) does not
get the lock and stops before it writes anything, naming the pid that holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

LOCK_NAME = "master.lock"
_held: list[int] = []  # the descriptors this process holds (released at exit by the kernel)


class StateDirBusy(Exception):
    """Another master holds the state directory."""


def lock_state_dir(state_dir: str | os.PathLike[str]) -> None:
    """Take ``state_dir``'s lock for the rest of this process, or raise :class:`StateDirBusy`."""
    path = Path(state_dir) / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        with contextlib.suppress(OSError):
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StateDirBusy(f"{state_dir}: in use by another bats-master (pid {holder}); wait for it to "
                           "end, or stop it first") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _held.append(fd)


def release_all() -> None:
    """Let go of every lock this process holds (for tests that run masters in-process)."""
    while _held:
        os.close(_held.pop())
