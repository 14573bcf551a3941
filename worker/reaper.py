"""Processes a task detached from its process group do not outlive the task.

How this works. A task runs in its own session, and the worker kills that process group when the
task ends or times out; but a task may start a process in a session of its own (``setsid``, a
daemon's double fork), which the group kill misses. On Linux the worker makes itself a *child
subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): an orphan among its descendants is re-parented to
the worker instead of to init, so once a task is over every child of the worker that is not a task
it is running is a leftover, and :func:`kill_leftovers` kills it with everything it started and
reaps it. Elsewhere, or where the call is refused, nothing changes (the group kill still runs).

Only ``bats-worker`` as a program does this; a worker embedded in another process (the tests'
threads) leaves that process's children alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import sys

import psutil

log = logging.getLogger("bats.worker")

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def become_subreaper() -> bool:
    """Ask Linux to re-parent this process's orphaned descendants to it; False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def kill_leftovers(keep: set[int]) -> int:
    """SIGKILL every child of this process whose pid is not in ``keep``, with its descendants, and
    reap it; returns how many children were killed."""
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return 0
    leftovers = [child for child in children if child.pid not in keep]
    for child in leftovers:
        with contextlib.suppress(psutil.Error):
            family = [child, *child.children(recursive=True)]
            for process in family:
                with contextlib.suppress(psutil.Error):
                    process.kill()
    if leftovers:
        _, alive = psutil.wait_procs(leftovers, timeout=1.0)  # reaps them: they are our children
        log.info("killed %d process(es) a task left running outside its process group", len(leftovers))
        for process in alive:
            log.warning("pid %d did not die after SIGKILL", process.pid)
    return len(leftovers)
