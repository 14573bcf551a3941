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
import logging
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # psutil is imported by the rare sweep that finds something, not by every worker
    from collections.abc import Container

    import psutil

log = logging.getLogger("bats.worker")

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def become_subreaper() -> bool:
    """Ask Linux to re-parent this process's orphaned descendants to it; False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:  # the process's own symbols hold libc's (ctypes.util.find_library ran ldconfig: milliseconds)
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def kill_leftovers(keep: set[int]) -> int:
    """SIGKILL every live child of this process whose pid is not in ``keep``, with its descendants,
    and reap it; returns how many were killed. Children that are already dead (the members of a
    task's group killed a moment ago, re-parented here as they died) are only reaped.

    The common case, nothing left, costs one small read: the main thread's children (it starts
    every task, and Linux re-parents an orphan to a subreaper's first live thread, which is the
    main one while it runs). Only when that shows a child not in ``keep`` are all threads' children
    looked at through psutil."""
    quick = _main_thread_children()
    if quick is not None and all(pid in keep for pid in quick):
        return 0
    import psutil

    children = []
    for pid in _child_pids():
        with contextlib.suppress(psutil.Error):
            children.append(psutil.Process(pid))
    leftovers = []
    for child in children:
        if child.pid in keep:
            continue
        try:
            alive = child.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            continue  # gone already (reaped by whoever waited for it)
        if not alive:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(child.pid, os.WNOHANG)
            continue
        leftovers.append(child)
        _kill_tree(child)
    if leftovers:
        log.info("killed %d process(es) a task left running outside its process group: %s", len(leftovers),
                 ", ".join(f"{p.pid} {_name(p)}" for p in leftovers))
        _, alive_after = psutil.wait_procs(leftovers, timeout=1.0)  # reaps them: they are our children
        for process in alive_after:
            log.warning("pid %d did not die after SIGKILL", process.pid)
    return len(leftovers)


def kill_group_strays(pgid: int, keep: Container[int]) -> int:
    """SIGKILL, with their descendants, and reap every child of this process in process group
    ``pgid`` whose pid is not in ``keep`` (the session shells): what a task run in a session shell (:mod:`bats.worker.shell`) left
    running, adopted here when the task's subshell ended. Returns how many were killed.

    The common case, no child but the known ones, costs one small read and a ``getpgid`` per child
    not in ``keep`` (the directly exec'd tasks, which lead groups of their own)."""
    strays = []
    for pid in _main_thread_children() or ():
        if pid not in keep:
            with contextlib.suppress(OSError):
                if os.getpgid(pid) == pgid:
                    strays.append(pid)
    if not strays:
        return 0
    import psutil

    processes = []
    for pid in strays:
        with contextlib.suppress(psutil.Error):
            processes.append(psutil.Process(pid))
    for process in processes:
        _kill_tree(process)
    psutil.wait_procs(processes, timeout=1.0)  # reaps them: they are our children
    return len(processes)


def _kill_tree(process: psutil.Process) -> None:
    """SIGKILL a process and its descendants, as far as they are still there."""
    import psutil

    with contextlib.suppress(psutil.Error):
        for member in [process, *process.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                member.kill()


def _main_thread_children() -> list[int] | None:
    """The pids in ``/proc/self/task/PID/children`` (a raw read: about a fifth of the cost of
    reading every thread's file with ``open``); None where the kernel has no such file."""
    try:
        fd = os.open(f"/proc/self/task/{os.getpid()}/children", os.O_RDONLY)
    except OSError:
        return None
    try:
        data = b""
        while chunk := os.read(fd, 65536):
            data += chunk
    except OSError:
        return None
    finally:
        os.close(fd)
    return [int(pid) for pid in data.split()]


def _child_pids() -> list[int]:
    """This process's children, from each thread's ``/proc/self/task/TID/children`` (a few small
    reads, not psutil's scan of every process on the machine, which cost about a millisecond a
    task); psutil where the kernel has no such file."""
    pids: list[int] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/children", encoding="ascii") as listing:
                    pids.extend(int(pid) for pid in listing.read().split())
            except ProcessLookupError:
                continue  # the thread ended meanwhile
    except (FileNotFoundError, NotADirectoryError):
        import psutil

        try:
            return [child.pid for child in psutil.Process().children()]
        except psutil.Error:
            return []
    except OSError:
        return []
    return pids


def _name(process: psutil.Process) -> str:
    import psutil

    try:
        return process.name()
    except psutil.Error:
        return "?"
