"""bats.worker.shell in-process: a TaskRun in a ShellPool's session, driven by a poll loop as the
worker drives it (the real /bin/sh, dash or bash, real FIFOs), and the fallback to ``sh -c`` when no FIFO can be made."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator

import psutil
import pytest
import zmq

from bats.worker.shell import ShellPool, takes_sessions
from bats.worker.task import TaskRun

pytestmark = [pytest.mark.timeout(30), pytest.mark.skipif(
    not sys.platform.startswith("linux") or not takes_sessions("/bin/sh"),
    reason="session shells need dash or bash (and Linux's /proc for their leftovers)")]


@pytest.fixture
def pool() -> Iterator[ShellPool]:
    shells = ShellPool("/bin/sh")
    yield shells
    shells.close()


def run(command: str, shells: ShellPool, timeout_s: float | None = None) -> TaskRun:
    """Start ``command`` and step it to its result, as the worker's loop does."""
    poller = zmq.Poller()
    task = TaskRun(1, 0, command, timeout_s)
    task.start(time.monotonic(), poller, shells)
    deadline = time.monotonic() + 10
    while not task.step(time.monotonic()):
        assert time.monotonic() < deadline, "the task did not end"
        for fd, _ in poller.poll(50):
            task.read(fd)
    return task


def test_tasks_share_one_session_shell_and_none_sees_another_s_state(pool: ShellPool) -> None:
    first = run("cd /; x=1; echo $x; echo to-err >&2; exit 5", pool)
    assert (first.returncode, bytes(first.stdout), bytes(first.stderr)) == (5, b"1\n", b"to-err\n")
    second = run('pwd; echo "${x-unset}"', pool)
    assert bytes(second.stdout) == f"{os.getcwd()}\nunset\n".encode()
    assert first.session is second.session is not None
    assert pool.pids() == {first.session.pid}


def test_a_timeout_ends_the_session_and_the_next_task_gets_a_new_one(pool: ShellPool) -> None:
    slow = run("sleep 30; :", pool, timeout_s=0.2)
    assert slow.timed_out and slow.result_fields()["exit_code"] == -9
    assert slow.session is not None and slow.session.dead
    after = run("echo again", pool)
    assert bytes(after.stdout) == b"again\n" and after.session is not slow.session


def test_no_fifo_means_sh_c_said_once(pool: ShellPool, monkeypatch: pytest.MonkeyPatch,
                                      caplog: pytest.LogCaptureFixture) -> None:
    def no_fifos(path: str, mode: int = 0o666) -> None:
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(os, "mkfifo", no_fifos)
    with caplog.at_level(logging.INFO, logger="bats.worker"):
        results = [run("echo ok; exit 4", pool) for _ in range(2)]
    assert [(r.returncode, bytes(r.stdout), r.session) for r in results] == [(4, b"ok\n", None)] * 2
    assert not pool.usable
    assert sum("session shells off" in r.getMessage() for r in caplog.records) == 1


def test_a_session_shell_that_died_while_idle_is_replaced_and_sessions_stay_on(pool: ShellPool) -> None:
    first = run("echo one", pool)
    assert first.session is not None
    os.kill(first.session.pid, 9)  # between tasks (the OOM killer, an operator)
    deadline = time.monotonic() + 5
    while psutil.Process(first.session.pid).status() != psutil.STATUS_ZOMBIE:  # gone, not reaped yet
        assert time.monotonic() < deadline
        time.sleep(0.01)
    second = run("echo two", pool)
    assert bytes(second.stdout) == b"two\n" and second.session is not None
    assert second.session is not first.session and pool.usable
