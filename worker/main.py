"""``bats-worker``: the lightweight worker that runs shell tasks for a BaTS master.

One process, one thread, one ZeroMQ DEALER socket connected to the master's ROUTER. Everything
happens in :meth:`Worker.run`'s loop around a single ``zmq.Poller`` that watches the socket, the
running tasks' stdout/stderr pipes and a self-pipe that signal handlers write to
(``signal.set_wakeup_fd``; SIGCHLD wakes the loop when a task exits, SIGTERM/SIGINT make the
worker leave). The master's ``welcome`` says how many tasks the machine runs at once (its
cluster's ``slots``, 1 unless configured); each runs in its own process group with its own timeout
and output tails, and the others wait in a queue. The poll timeout is the nearest deadline
(heartbeat, liveness, task timeout, slowdown padding, a held result), so an idle worker sleeps in
``poll``.

Protocol (``bats.common.protocol``): ``hello`` → ``welcome`` → ``ask n=2`` (one task to run, one
prefetched so dispatch latency is hidden); every ``result`` carries ``ask=True`` to ask for the
next task. Results of short tasks go out together: a result waits (at most ``OUTBOX_MAX_S``) while
the worker still has as many tasks queued as the waiting results ask for, so one frame each way
carries several; with one task prefetched it goes at once. ``unknown`` (the master restarted) or
``liveness_s`` without a word from the master makes the worker say hello again (on a fresh socket
after a liveness timeout), keep running what it holds, send results held meanwhile after the new
``welcome`` and ask for the free slots.
``wait`` before any ``welcome`` (a worker started by hand whose seat is not open yet) makes it say
hello again, on a fresh socket, every ``JOIN_RETRY_S``.
``stop`` and SIGTERM/SIGINT kill the running tasks' process groups, send ``bye`` and exit 0.
``cancel`` (another copy of the task ended first on another machine) kills that attempt's process
group, or drops it from the queue, sends no result and asks for a task in its place.
``--files-from``/``--files-to`` (a cloud machine's ``[files]``, :mod:`bats.worker.s3files`) fetch
the inputs and run the setup before the first hello, through the S3 URLs the master signed, which
arrive in ``BATS_FILES_GRANT`` (popped from the environment like the token: tasks do not inherit it).
A welcome naming a shell this machine lacks (``[master] shell``) makes the worker leave with a
``bye`` saying so, rather than fail every task with 127.
A line with no shell syntax is exec'd without the shell where it is dash, exactly as dash would run
it (:func:`bats.worker.task.direct_argv`); other lines run in one long-lived shell per slot (dash or
bash), each in a subshell (:mod:`bats.worker.shell`, only as ``bats-worker``: it needs the child subreaper).
``--noop`` answers each task at once without running it (master benchmarks).
``--spot-notice URL`` starts a :class:`~bats.worker.spot.SpotWatcher` on the instance metadata;
its notice wakes the loop through a pipe and the worker sends ``interruption`` (once welcomed), so
the master re-queues this machine's tasks before the cloud takes it away.

Imports stay light on purpose (stdlib, pyzmq, msgpack via ``bats.common.protocol``): this is
what machine images carry.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import logging
import math
import os
import shutil
import signal
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, cast

import zmq
from zmq.utils import z85

from bats.common import __version__
from bats.common.durations import parse_duration
from bats.common.protocol import MASTER_TYPES, ProtocolError, decode_all, encode, frames
from bats.worker import reaper
from bats.worker.shell import ShellPool, takes_sessions
from bats.worker.task import DEFAULT_SHELL, TaskRun

if TYPE_CHECKING:  # urllib and http.client come with --spot-notice only
    from bats.worker.spot import SpotWatcher

log = logging.getLogger("bats.worker")
TOKEN_ENV = "BATS_TOKEN"  # how a provisioner hands a worker its one-time token (not on the command line)
FILES_GRANT_ENV = "BATS_FILES_GRANT"  # [files] on a cloud machine: its signed S3 URLs (bats.worker.s3files)
PARENT_ENV = "BATS_PARENT_PID"  # with --exit-with-parent: the master's pid, from the provisioner


HELD = 2  # tasks held at most until the master's welcome says otherwise: one running, one prefetched
BYE_LINGER_MS = 1000  # how long the final ``bye`` may take to leave
PARENT_CHECK_S = 0.5  # with --exit-with-parent, the longest the loop sleeps between checks
NO_SIGCHLD_POLL_S = 0.05  # without signal wake-ups (not the main thread): poll a running task
JOIN_RETRY_S = 2.0  # a worker started by hand and told to wait for a seat says hello again this often
MAX_FRAMES_PER_WAKE = 10_000  # socket frames handled before the pipes get a turn
OUTBOX_MAX_S = 0.05  # the longest a finished task's result waits to go out with others (see _step_tasks)


class BadEndpoint(ValueError):
    """The ``--master`` endpoint is not one ZeroMQ can connect to."""


class WorkerOptions:
    """What the command line (or an embedding test) sets. A plain class, not a dataclass: the worker
    does not import dataclasses (and inspect with it), a few tens of milliseconds of its start."""

    def __init__(
        self,
        master: str,
        machine: str,
        token: str = "",
        cluster: str = "default",
        heartbeat_s: float = 2.0,
        liveness_s: float = 15.0,
        slowdown: float = 1.0,
        exit_with_parent: bool = False,
        noop: bool = False,
        spot_notice: str | None = None,  # instance metadata base URL to watch for a spot interruption
        spot_poll_s: float = 5.0,
        server_key: str | None = None,  # the master's CurveZMQ public key (Z85); None: plain TCP
        reap_detached: bool = False,  # kill what a task left running outside its group (bats.worker.reaper)
    ) -> None:
        self.master = master
        self.machine = machine
        self.token = token
        self.cluster = cluster
        self.heartbeat_s = heartbeat_s
        self.liveness_s = liveness_s
        self.slowdown = slowdown
        self.exit_with_parent = exit_with_parent
        self.noop = noop
        self.spot_notice = spot_notice
        self.spot_poll_s = spot_poll_s
        self.server_key = server_key
        self.reap_detached = reap_detached

    def __repr__(self) -> str:  # the token is a secret: never in a log line
        return f"WorkerOptions(master={self.master!r}, machine={self.machine!r}, cluster={self.cluster!r})"


class Worker:
    """The worker's state and its single-threaded event loop; see the module docstring."""

    def __init__(self, options: WorkerOptions, context: zmq.Context | None = None) -> None:
        self.opts = options
        self.heartbeat_s = options.heartbeat_s
        self.liveness_s = options.liveness_s
        self._ctx = context if context is not None else zmq.Context()
        self._own_ctx = context is None
        self._sock: zmq.Socket | None = None
        self._poller = zmq.Poller()
        self.slots = 1  # tasks run at once (the welcome's ``slots``)
        self.capacity = HELD  # tasks held at most: slots + the welcome's ``prefetch``
        self.shell = DEFAULT_SHELL  # what tasks run with; the master's welcome names it
        self._shells: dict[str, ShellPool] = {}  # session shells by shell (bats.worker.shell)
        self._outgoing: list[bytes] | None = None
        self._welcomed = False
        self._last_sent = 0.0
        self._last_recv = 0.0
        self._running: list[TaskRun] = []  # at most ``slots``, in start order
        self._queue: collections.deque[TaskRun] = collections.deque()
        self._pending: list[dict[str, Any]] = []  # results finished while not welcomed
        self._outbox: list[dict[str, Any]] = []  # results held to go out together (see _step_tasks)
        self._outbox_since = 0.0  # when the oldest of them was put there
        self._exit_reason: str | None = None
        self._wake_r = -1
        self._wake_w = -1
        self._old_handlers: dict[int, Any] = {}
        self._old_wakeup = -1
        self._signals = False
        # the parent to watch: the one the provisioner names (the master may be gone already, and
        # the worker then a child of init), else whoever started this process
        named = os.environ.pop(PARENT_ENV, "")
        self._parent = int(named) if named.isdigit() else os.getppid()
        self.tasks_done = 0
        self.reconnects = 0
        self._watcher: SpotWatcher | None = None
        self._notice_sent = False
        self._told_to_wait = False  # by a master with no seat open for this worker (started by hand)
        # CurveZMQ: one fresh client key pair for the life of the process, so a reconnect is the
        # same client to the master (which binds this machine to the key that first used its token)
        self._client_keys = zmq.curve_keypair() if options.server_key else None

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> int:
        """Serve the master until stopped; return the process exit code (0)."""
        self._install_signals()
        if self.opts.spot_notice:
            from bats.worker.spot import SpotWatcher

            self._watcher = SpotWatcher(self.opts.spot_notice, self.opts.spot_poll_s)
            self._poller.register(self._watcher.read_fd, zmq.POLLIN)
            self._watcher.start()
        try:
            now = time.monotonic()
            self._open_socket()
            self._hello(now)
            self._loop()
            return 0
        finally:
            self._leave()
            self._restore_signals()

    def _loop(self) -> None:
        poll = self._poller.poll
        while self._exit_reason is None:
            if self.opts.exit_with_parent and os.getppid() != self._parent:
                log.warning("parent process %d is gone; leaving", self._parent)
                self._exit_reason = "parent exited"
                break
            events = poll(self._poll_timeout_ms(time.monotonic()))
            now = time.monotonic()
            for item, _ in events:
                if item is self._sock:
                    self._drain_socket(now)
                elif item == self._wake_r:
                    self._drain_wakeups()
                elif self._watcher is not None and item == self._watcher.read_fd:
                    self._watcher.drain()
                    self._send_notice(now)
                else:
                    for run in self._running:
                        if item in run.fds:
                            run.read(item)
                            break
                if self._exit_reason is not None:
                    return
            self._step_tasks(now)
            if self._welcomed and now - self._last_sent >= self.heartbeat_s:
                self._send(encode("heartbeat"), now)
            if now - self._last_recv >= self.liveness_s:
                self._reconnect(now)

    def _poll_timeout_ms(self, now: float) -> int:
        deadline = self._last_recv + self.liveness_s
        if self._welcomed:
            deadline = min(deadline, self._last_sent + self.heartbeat_s)
        if self._outbox:
            deadline = min(deadline, self._outbox_since + OUTBOX_MAX_S)
        for run in self._running:
            task_deadline = run.next_deadline()
            if task_deadline is not None:
                deadline = min(deadline, task_deadline)
            if not self._signals and run.process_alive:
                deadline = min(deadline, now + NO_SIGCHLD_POLL_S)
        if self.opts.exit_with_parent:
            deadline = min(deadline, now + PARENT_CHECK_S)
        # round up: waking a hair early would only spin through a zero-timeout poll
        return max(0, math.ceil((deadline - now) * 1000.0))

    # -- socket ------------------------------------------------------------------------------

    def _open_socket(self) -> None:
        sock = self._ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        # a random connection id: the ROUTER's own are predictable, and the master ties this
        # connection's id to this machine until the connection is gone
        sock.setsockopt(zmq.ROUTING_ID, b"w" + os.urandom(15))
        try:
            if self._client_keys is not None:
                sock.setsockopt(zmq.CURVE_SERVERKEY, self.opts.server_key.encode("ascii"))  # type: ignore[union-attr]
                sock.setsockopt(zmq.CURVE_PUBLICKEY, self._client_keys[0])
                sock.setsockopt(zmq.CURVE_SECRETKEY, self._client_keys[1])
            sock.connect(self.opts.master)
        except zmq.ZMQError as exc:
            sock.close()
            raise BadEndpoint(f"cannot connect to master endpoint {self.opts.master!r}: {exc}") from None
        self._sock = sock
        self._poller.register(sock, zmq.POLLIN)

    def _close_socket(self, linger_ms: int = 0) -> None:
        if self._sock is None:
            return
        with contextlib.suppress(KeyError):
            self._poller.unregister(self._sock)
        self._sock.close(linger=linger_ms)
        self._sock = None

    def _send(self, frame: bytes, now: float) -> None:
        if self._outgoing is not None:  # inside _drain_socket: sent together at its end
            self._outgoing.append(frame)
            return
        try:
            self._sock.send(frame, zmq.NOBLOCK)  # type: ignore[union-attr]
        except zmq.Again:
            log.warning("send queue to the master is full; a message was dropped")
            return
        self._last_sent = now

    def _hello(self, now: float) -> None:
        self._welcomed = False
        self._pending += self._outbox  # sent after the welcome, as results finished meanwhile are
        self._outbox = []
        self._last_recv = now  # the liveness clock restarts with every hello
        o = self.opts
        self._send(encode("hello", machine=o.machine, token=o.token, cluster=o.cluster,
                          host=socket.gethostname(), cpus=os.cpu_count() or 1, version=__version__), now)

    def _reconnect(self, now: float) -> None:
        self.reconnects += 1
        log.warning("no word from the master for %.1fs; reconnecting to %s (reconnect #%d)",
                    now - self._last_recv, self.opts.master, self.reconnects)
        self._close_socket()
        self._open_socket()
        self._hello(now)

    def _drain_socket(self, now: float) -> None:
        """Handle every frame waiting; what the handling sends (results of no-op tasks, say) goes
        out as one frame at the end, see ``protocol.decode_all``."""
        sock = self._sock
        self._outgoing = outgoing = cast(list[bytes], [])
        try:
            for _ in range(MAX_FRAMES_PER_WAKE):
                try:
                    frame = sock.recv(zmq.NOBLOCK)  # type: ignore[union-attr]
                except zmq.Again:
                    return
                self._last_recv = now
                try:
                    messages = decode_all(frame, MASTER_TYPES)
                except ProtocolError as exc:
                    log.warning("dropped a frame from the master: %s", exc)
                    continue
                for msg in messages:
                    try:
                        self._handle(msg, now)
                    except Exception:  # a bug handling one message must not take the worker down
                        log.exception("dropped a %r message that could not be handled", msg.get("type"))
                    if self._exit_reason is not None or self._sock is not sock:
                        return
        finally:
            self._outgoing = None
            if outgoing and self._sock is sock:
                for frame in frames(outgoing):  # as few frames as the master's limits allow
                    self._send(frame, now)

    # -- messages ----------------------------------------------------------------------------

    def _handle(self, msg: dict[str, Any], now: float) -> None:
        kind = msg["type"]
        if kind == "task":
            self._on_task(msg, now)
        elif kind == "welcome":
            self._on_welcome(msg, now)
        elif kind == "unknown":
            if self._welcomed:
                log.warning("the master does not know this worker (restarted?); saying hello again")
                self._hello(now)
            else:
                log.debug("'unknown' while waiting for welcome; hello already sent")
        elif kind == "wait" and not self._welcomed:  # started by hand before a seat opened: try again soon
            if not self._told_to_wait:
                self._told_to_wait = True
                log.warning("the master has no seat for this worker yet; saying hello every %g s until it has",
                            JOIN_RETRY_S)
            self._last_recv = now - self.liveness_s + JOIN_RETRY_S
        elif kind == "stop":
            log.warning("stopped by the master: %s", msg["reason"])
            self._exit_reason = "stopped"
        elif kind == "cancel":
            self._on_cancel(msg["task"], msg["attempt"], now)
        # "wait": the master will push a task later; "heartbeat": only proves the master lives

    def _on_welcome(self, msg: dict[str, Any], now: float) -> None:
        if msg["machine"] != self.opts.machine:
            log.warning("welcomed as %r, not %r", msg["machine"], self.opts.machine)
        for name in ("heartbeat_s", "liveness_s"):
            value = float(msg[name])
            if value > 0 and math.isfinite(value):
                setattr(self, name, value)
            else:
                log.warning("ignored welcome %s=%r", name, msg[name])
        self.slots = msg["slots"]
        self.capacity = self.slots + msg["prefetch"]
        self.shell = msg["shell"]
        if shutil.which(self.shell) is None:  # every task would fail with 127: this machine cannot serve
            log.error("[master] shell %s: not installed on this machine; leaving", self.shell)
            self._exit_reason = f"[master] shell {self.shell}: not installed on this machine"
            return
        # sessions need the subreaper (a task's leftovers are found among the worker's children); a
        # master restarted with another shell gets a pool of its own, the old one's tasks end as they are
        if self.shell not in self._shells and self.opts.reap_detached and takes_sessions(self.shell):
            self._shells[self.shell] = ShellPool(self.shell)
        self._start_queued(now)  # a reconnect's welcome may give more slots
        if self._welcomed:
            log.debug("welcome while already welcomed; nothing more to ask")
            return
        self._welcomed = True
        log.info("welcomed by %s (heartbeat %.3gs, liveness %.3gs)",
                 self.opts.master, self.heartbeat_s, self.liveness_s)
        self._send_notice(now)
        pending, self._pending = self._pending, []
        for fields in pending:  # the slots these tasks held are asked for below
            self._send(encode("result", ask=False, **fields), now)
        free = self.capacity - self._held()
        if free > 0:
            self._send(encode("ask", n=free), now)

    def _on_task(self, msg: dict[str, Any], now: float) -> None:
        if self.opts.noop:
            self._deliver({"task": msg["task"], "attempt": msg["attempt"], "exit_code": 0,
                           "runtime_s": 0.0, "timed_out": False, "stdout": b"", "stderr": b""}, now)
            return
        run = TaskRun.from_message(msg, self.opts.slowdown, self.shell)
        if len(self._running) < self.slots:
            self._start(run, now)
        else:
            if self._held() >= self.capacity:
                log.warning("task %d arrived with %d tasks held; queueing it anyway", run.task, self._held())
            self._queue.append(run)

    def _on_cancel(self, task: int, attempt: int, now: float) -> None:
        """Stop one attempt (running or queued) without a result and ask for a task in its place; an
        attempt that already ended (its result is on the way) is not here and nothing happens."""
        run = next((r for r in self._running if (r.task, r.attempt) == (task, attempt)), None)
        if run is not None:
            log.info("task %d: stopped by the master (another copy ended first)", task)
            run.abort()
            self._running.remove(run)
            self._sweep_leftovers()
            self._start_queued(now)
        else:
            kept = collections.deque(r for r in self._queue if (r.task, r.attempt) != (task, attempt))
            if len(kept) == len(self._queue):
                return
            self._queue = kept
        if self._welcomed:
            self._send(encode("ask", n=1), now)

    def _send_notice(self, now: float) -> None:
        """Tell the master about a spot interruption notice (once, when welcomed)."""
        notice = self._watcher.notice if self._watcher is not None else None
        if notice is None or self._notice_sent or not self._welcomed:
            return
        self._notice_sent = True
        self._send(encode("interruption", action=notice[0], time=notice[1]), now)

    def _held(self) -> int:
        return len(self._running) + len(self._queue)

    # -- tasks -------------------------------------------------------------------------------

    def _start(self, run: TaskRun, now: float) -> None:
        self._running.append(run)
        run.start(now, self._poller, self._shells.get(run.shell))

    def _start_queued(self, now: float) -> None:
        while self._queue and len(self._running) < self.slots:
            self._start(self._queue.popleft(), now)

    def _sweep_leftovers(self, ended: TaskRun | None = None) -> int:
        """With no task running any more, kill what the tasks left running outside their process
        groups (see :mod:`bats.worker.reaper`). While another task runs, an orphan may be its own
        (started with ``setsid``) and cannot be told apart: the sweep waits for the slots to empty."""
        if not self.opts.reap_detached or self._running:
            return 0
        keep = {ended.proc.pid} if ended is not None and ended.proc is not None else set()  # Popen reaps it
        for pool in self._shells.values():
            keep |= pool.pids()
        return reaper.kill_leftovers(keep)

    def _step_tasks(self, now: float) -> None:
        while True:
            ended = [run for run in self._running if run.step(now)]
            if not ended:
                break
            for run in ended:
                self._running.remove(run)
                self.tasks_done += 1
                if self._sweep_leftovers(run):
                    run.stderr += b"\nbats-worker: killed what this task left running outside its process group\n"
            # the next tasks start before the results go out: the slot is busy again while they are sent
            self._start_queued(now)
            if not self._welcomed:
                self._pending += (run.result_fields() for run in ended)
                continue
            if not self._outbox:
                self._outbox_since = now
            self._outbox += (run.result_fields() for run in ended)
            # Results wait in the outbox while the worker still holds at least as many queued tasks as
            # the results ask for: a short task's result then shares one frame (one wake-up, one
            # decode, one send each side) with the next ones', and the tasks those results ask for
            # arrive while the queue still has work. A worker sent one task beyond its slots (tasks
            # of 10 ms and more) has none queued once one ends: its result goes at once, as before.
            if len(self._queue) <= len(self._outbox) or not self._running:
                self._flush_outbox(now)
        if self._outbox and now - self._outbox_since >= OUTBOX_MAX_S:
            self._flush_outbox(now)

    def _flush_outbox(self, now: float) -> None:
        """Send the held results, each asking for a task, in as few frames as the master allows."""
        outbox, self._outbox = self._outbox, []
        if not outbox:
            return
        if not self._welcomed:
            self._pending += outbox
            return
        for frame in frames([encode("result", ask=True, **fields) for fields in outbox]):
            self._send(frame, now)

    def _deliver(self, fields: dict[str, Any], now: float) -> None:
        """Send a result with ``ask=True``, or hold it until the master welcomes us again."""
        if self._welcomed:
            self._send(encode("result", ask=True, **fields), now)
        else:
            self._pending.append(fields)

    # -- leaving -----------------------------------------------------------------------------

    def _leave(self) -> None:
        reason = self._exit_reason or "error"
        if self._watcher is not None:
            with contextlib.suppress(KeyError):
                self._poller.unregister(self._watcher.read_fd)
            self._watcher.stop()
        for run in self._running:
            log.warning("killing task %d on the way out", run.task)
            run.abort()
        self._running = []
        for pool in self._shells.values():
            pool.close()
        if self.opts.reap_detached:
            reaper.kill_leftovers(keep=set())
        self._queue.clear()
        if self._sock is not None:
            self._flush_outbox(time.monotonic())  # finished tasks' results are not thrown away
            self._send(encode("bye", reason=reason), time.monotonic())
            self._close_socket(linger_ms=BYE_LINGER_MS)
        if self._own_ctx:
            self._ctx.term()
        log.info("worker %s left (%s) after %d tasks", self.opts.machine, reason, self.tasks_done)

    # -- signals -----------------------------------------------------------------------------

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # embedded in a thread: no handlers, poll a running task instead
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._old_wakeup = signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            # the handlers do nothing: the wake-up pipe carries the signal numbers to the loop
            self._old_handlers[signum] = signal.signal(signum, _noop_handler)
        self._poller.register(self._wake_r, zmq.POLLIN)
        self._signals = True

    def _drain_wakeups(self) -> None:
        while True:
            try:
                data = os.read(self._wake_r, 256)
            except BlockingIOError:
                return
            if not data:
                return
            for signum in data:
                if signum in (signal.SIGTERM, signal.SIGINT):
                    log.warning("got %s; leaving", signal.Signals(signum).name)
                    self._exit_reason = "signal"

    def _restore_signals(self) -> None:
        if not self._signals:
            return
        for signum, handler in self._old_handlers.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(self._old_wakeup)
        with contextlib.suppress(KeyError):
            self._poller.unregister(self._wake_r)
        os.close(self._wake_r)
        os.close(self._wake_w)
        self._signals = False


def _noop_handler(signum: int, frame: object) -> None:
    """Signal handler placeholder; the wake-up fd does the work."""


# -- command line ----------------------------------------------------------------------------


def _positive_duration(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text!r}")
    return seconds


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text!r}")
    return value


def _endpoint(text: str) -> str:
    if "://" not in text:
        raise argparse.ArgumentTypeError(f"expected a ZeroMQ endpoint such as tcp://host:5555, got {text!r}")
    return text


def _z85_key(text: str) -> str:
    try:
        if len(text) != 40 or len(z85.decode(text)) != 32:
            raise ValueError
    except (ValueError, KeyError, IndexError, TypeError):
        raise argparse.ArgumentTypeError("expected a CurveZMQ public key: 40 Z85 characters") from None
    return text


def build_parser() -> argparse.ArgumentParser:
    """The ``bats-worker`` argument parser."""
    p = argparse.ArgumentParser(
        prog="bats-worker",
        description="Run shell tasks for a BaTS master and report their runtimes.",
    )
    p.add_argument("--version", action="version", version=f"bats-worker {__version__}")
    p.add_argument("--master", required=True, type=_endpoint, metavar="ENDPOINT",
                   help="the master's ZeroMQ endpoint, e.g. tcp://10.0.0.5:5555")
    p.add_argument("--machine", required=True, metavar="ID", help="this machine's id (from the provisioner)")
    p.add_argument("--token", default=None, help=argparse.SUPPRESS)  # visible in ps: kept for old images only
    p.add_argument("--token-file", metavar="PATH",
                   help="read this machine's one-time token from PATH (keep it 0600); default: the "
                        "environment variable BATS_TOKEN, which the provisioners set. A token is never "
                        "passed on the command line, where other local users could read it")
    p.add_argument("--cluster", default="default", metavar="NAME", help="the cluster this machine belongs to")
    p.add_argument("--server-key", type=_z85_key, default=os.environ.get("BATS_SERVER_KEY") or None, metavar="KEY",
                   help="the master's CurveZMQ public key (40 Z85 characters, from the provisioner; "
                        "default $BATS_SERVER_KEY); without it the connection is not encrypted")
    p.add_argument("--heartbeat", type=_positive_duration, default=2.0, metavar="SECONDS",
                   help="heartbeat interval until the master's welcome says otherwise (default 2)")
    p.add_argument("--liveness", type=_positive_duration, default=15.0, metavar="SECONDS",
                   help="silence from the master after which the worker reconnects (default 15)")
    p.add_argument("--slowdown", type=_positive_float, default=1.0, metavar="FACTOR",
                   help="emulate a slower machine: report FACTOR x each runtime, after that long")
    p.add_argument("--exit-with-parent", action="store_true", help="exit when the parent process dies")
    p.add_argument("--noop", action="store_true",
                   help="benchmark mode: do not run commands, report exit 0 and runtime 0 at once")
    p.add_argument("--spot-notice", metavar="URL",
                   help="watch this instance metadata service (e.g. http://169.254.169.254) for a spot "
                        "interruption notice and tell the master at once")
    p.add_argument("--spot-poll", type=_positive_duration, default=5.0, metavar="SECONDS",
                   help="how often to look for the notice (default 5)")
    p.add_argument("--files-from", metavar="S3_URL",
                   help="[files] on a cloud machine: fetch the inputs (and setup) staged there before joining, "
                        "through the URLs the master signed ($BATS_FILES_GRANT, never on the command line)")
    p.add_argument("--files-to", metavar="S3_URL", help="[files]: upload each task's outputs under this location")
    p.add_argument("--files-dir", metavar="DIR", default="/var/tmp/bats-files",
                   help="this machine's files folder, $BATS_FILES (default /var/tmp/bats-files)")
    p.add_argument("--log-level", default="WARNING", type=str.upper,
                   choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], help="default WARNING")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``bats-worker`` and ``python -m bats.worker``; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    token = os.environ.pop(TOKEN_ENV, "")  # popped: the tasks this worker runs do not inherit it
    grant = os.environ.pop(FILES_GRANT_ENV, "")  # [files]' signed URLs: a secret too
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as exc:
            parser.error(f"--token-file {args.token_file}: {exc.strerror or exc}")
    elif args.token is not None:
        token = args.token
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        stream=sys.stderr,
        format=f"%(asctime)s bats-worker[{args.machine}] %(levelname)s %(message)s",
    )
    options = WorkerOptions(
        master=args.master, machine=args.machine, token=token, cluster=args.cluster,
        heartbeat_s=args.heartbeat, liveness_s=args.liveness, slowdown=args.slowdown,
        exit_with_parent=args.exit_with_parent, noop=args.noop, server_key=args.server_key,
        spot_notice=args.spot_notice, spot_poll_s=args.spot_poll,
        reap_detached=reaper.become_subreaper(),
    )
    if args.files_from or args.files_to:  # before hello: a machine that cannot get its files never joins
        from bats.worker import s3files  # urllib only with [files]

        try:
            s3files.prepare(args.files_from, args.files_to, args.files_dir, args.machine, grant)
        except s3files.FilesError as exc:
            log.error("%s", exc)
            return 1
    if not args.server_key:
        log.warning("no --server-key: connecting to %s without encryption (the master must run --insecure)",
                    args.master)
    try:
        return Worker(options).run()
    except BadEndpoint as exc:
        log.error("%s", exc)
        return 2
