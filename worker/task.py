"""One shell task run by the worker, driven from the worker's single-threaded poll loop.

A :class:`TaskRun` starts ``SHELL -c COMMAND`` (``/bin/sh`` unless the master's ``[master] shell``
names another) in a new session (so the task and everything it starts form one process group),
registers the two output pipes with the worker's ``zmq.Poller`` and reads them non-blockingly,
keeping only the last ``OUTPUT_TAIL_BYTES`` of each stream. The worker calls :meth:`TaskRun.step` on every loop iteration; it notices the exit (``Popen.poll``),
enforces the timeout (SIGKILL to the whole group), stops waiting for end-of-file 0.5 s after the
exit (a backgrounded grandchild may hold a pipe open), kills whatever is left of the group, and
then keeps the task "running" until ``slowdown x runtime`` has passed, which is how a slower
cloud machine is emulated (seed 000 §4.1). Nothing here blocks or sleeps: every wait is a
deadline the worker folds into its poll timeout (:meth:`TaskRun.next_deadline`).

Timeouts are in emulated time: with ``slowdown`` s, the command is killed after ``timeout_s / s``
real seconds and the result reports ``runtime_s = timeout_s``.

A command killed from outside by SIGTERM, SIGKILL, SIGINT or SIGHUP is reported a second late: when
a batch scheduler or the OS stops a whole machine, the worker's own SIGTERM can trail its task's by
a moment, and a worker that leaves meanwhile drops the result, so the task goes back into the bag
instead of counting as failed.

Other lines run in the slot's session shell when the worker has one (:mod:`bats.worker.shell`): no
new shell per task, and the task's processes in that shell's process group instead of a group of
their own (the session finds and kills what a task left there).

A line with no shell syntax at all is exec'd without the shell when the shell is dash (Debian's and
Ubuntu's ``/bin/sh``), which saves the shell's start and its fork of the command
(:func:`direct_argv`). The line qualifies when it is words of ``A-Za-z0-9_./:=,+@%-`` separated by
spaces (so no quoting, expansion, glob, redirection, pipe, list or comment can be in it), its first
word is not a builtin or keyword of the shell and holds no ``=`` (an assignment), and that word names
an executable regular file (by its path when it holds a ``/``, else on ``PATH`` as dash searches it).
The command then sees what dash would give it: the same argv (``argv[0]`` as written), the
environment dash exports (names that are not shell names dropped, ``PWD`` kept when it is absolute
and names the working directory, else set to it), the same fds, directory and process group. Every
case the rule does not cover (no ``PATH``, not found, cannot exec) goes through the shell, which
then gives its own message and status. The one difference left: the task's process is the command
itself, not a shell waiting for it, so a signal that kills it is seen directly; a crash signal
(SIGSEGV, SIGABRT...) is reported as the shell does (``128 + N`` and its line on stderr), while SIGTERM, SIGKILL, SIGINT
and SIGHUP stay ``-N`` as when the whole group is stopped (through the shell, such a signal sent to
the command alone, say by the kernel's OOM killer, would read ``128 + N``); and the command leads its
process group, so a program that calls ``setsid()`` itself without forking first is refused where
through the shell it is not (``setsid`` the program forks then and returns at once, so a line that
starts with it always goes through the shell).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import stat
import subprocess
from typing import TYPE_CHECKING, Any

import zmq

from bats.common.protocol import OUTPUT_TAIL_BYTES
from bats.worker.shell import runs_in_session, shell_kind

if TYPE_CHECKING:
    from bats.worker.shell import ShellPool, ShellSession

log = logging.getLogger("bats.worker")

EXIT_GRACE_S = 0.5  # after the command exits, how long to wait for its pipes to reach EOF
READ_CHUNK = 64 * 1024
DEFAULT_SHELL = "/bin/sh"
SPAWN_FAILED_EXIT = 127  # the shell's "cannot run" code, used when the shell itself cannot start
TIMEOUT_EXIT = -signal.SIGKILL
# a task killed by one of these signals is reported only after OUTSIDE_KILL_GRACE_S (see _end)
_STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGKILL, signal.SIGINT, signal.SIGHUP})
OUTSIDE_KILL_GRACE_S = 1.0


_DEVNULL = -1

# a line of plain words: nothing in it the shell would expand, split otherwise, quote or redirect
_PLAIN_LINE = re.compile(r" *[A-Za-z0-9_./:=,+@%-]+(?: +[A-Za-z0-9_./:=,+@%-]+)* *")
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# dash's builtins and the POSIX shell's keywords and special builtins (with bash's, to be safe):
# the shell runs these itself, so they must go through it
_NOT_DIRECT = frozenset("""
    . : [ alias bg break builtin cd chdir command continue declare echo eval exec exit export false fc fg
    getopts hash jobs kill let local printf pwd read readonly return set shift source test times trap
    true type typeset ulimit umask unalias unset wait
    if then else elif fi do done case esac while until for in function select time ! { } [[ ]]
""".split())


def is_dash(shell: str) -> bool:
    """Whether ``shell`` is dash, the shell whose start-up :func:`direct_argv` reproduces."""
    return shell_kind(shell) == "dash"


def _executable(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode) and os.access(path, os.X_OK)
    except (OSError, ValueError):
        return False


def direct_argv(command: str, shell: str) -> tuple[str, list[str]] | None:
    """The program and argv to exec ``command`` with, without ``shell``, when that is exactly what
    the shell would run (see the module's docstring); None when it must go through the shell."""
    if not _PLAIN_LINE.fullmatch(command) or not is_dash(shell):
        return None
    words = command.split()
    name = words[0]
    if name in _NOT_DIRECT or name == "setsid" or "=" in name:
        return None
    if "/" in name:
        return (name, words) if _executable(name) else None
    path = os.environ.get("PATH")
    if path is None:  # dash then searches its own default path: let it
        return None
    for folder in path.split(":"):
        # an empty entry is the working directory ("./": Popen searches PATH itself for a bare name)
        candidate = f"{folder}/{name}" if folder else f"./{name}"
        if _executable(candidate):
            return candidate, words
    return None


def _dash_environment() -> dict[str, str] | None:
    """The environment dash gives a command it runs; None when the working directory is unknown."""
    env = {k: v for k, v in os.environ.items() if _SHELL_NAME.fullmatch(k)}
    pwd = env.get("PWD")
    try:
        here = os.stat(".")
        if pwd is not None and pwd.startswith("/"):
            with contextlib.suppress(OSError, ValueError):
                there = os.stat(pwd)
                if (there.st_dev, there.st_ino) == (here.st_dev, here.st_ino):
                    return env
        env["PWD"] = os.getcwd()
    except (OSError, ValueError):
        return None
    return env


def _devnull() -> int:
    """One read-only /dev/null for every task's stdin, opened on first use and kept (close-on-exec:
    each child gets it only as its fd 0)."""
    global _DEVNULL
    if _DEVNULL < 0:
        _DEVNULL = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    return _DEVNULL


class TaskRun:
    """A task from the master: its process, output tails, deadlines and (once done) its result."""

    def __init__(self, task: int, attempt: int, command: str, timeout_s: float | None,
                 slowdown: float = 1.0, shell: str = DEFAULT_SHELL) -> None:
        self.task = task
        self.shell = shell
        self.attempt = attempt
        self.command = command
        self.timeout_s = timeout_s
        self.slowdown = slowdown
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.kill_at: float | None = None  # real (monotonic) time of the timeout kill
        self.ended: float | None = None  # when the command ended (exit or timeout kill)
        self.exited_at: float | None = None  # when the process was seen to have exited
        self.returncode: int | None = None
        self.timed_out = False
        self.report_at: float | None = None  # set once the command is over: when to report
        self.runtime_s = 0.0
        self.stdout = bytearray()
        self.stderr = bytearray()
        self._pipes: dict[int, bytearray] = {}  # the open read ends of stdout and stderr, and their tails
        self._poller: zmq.Poller | None = None
        self.direct = False  # exec'd without the shell (direct_argv)
        self.session: ShellSession | None = None  # the session shell running it (bats.worker.shell)
        self._shells: ShellPool | None = None
        self._status_fd = -1  # the session's status pipe, watched while the task runs
        self._shell_says = b""  # what the shell would have written to stderr after the command

    @classmethod
    def from_message(cls, msg: dict[str, Any], slowdown: float = 1.0, shell: str = DEFAULT_SHELL) -> TaskRun:
        """Build a run from a decoded ``task`` message, to run with ``shell``."""
        timeout = msg["timeout_s"]
        return cls(msg["task"], msg["attempt"], msg["command"],
                   None if timeout is None else float(timeout), slowdown, shell)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, now: float, poller: zmq.Poller, shells: ShellPool | None = None) -> None:
        """Spawn the command (in one of ``shells``' sessions when it may run there, see
        :mod:`bats.worker.shell`); a command that cannot even be spawned ends at once with code 127."""
        self.started = now
        self._poller = poller
        if self.timeout_s is not None:
            self.kill_at = now + self.timeout_s / self.slowdown
        direct = direct_argv(self.command, self.shell)
        if (direct is None and shells is not None and shells.usable and shells.shell == self.shell
                and runs_in_session(self.command)):
            try:
                self.session, out_r, err_r = shells.begin(self.command)
            except OSError as exc:
                log.info("task %d: no session shell (%s); running it with %s -c", self.task, exc, self.shell)
            else:
                self._shells = shells
                self._status_fd = self.session.status_fd
                poller.register(self._status_fd, zmq.POLLIN)
                self._watch(out_r, err_r)
                log.info("task %d attempt %d started (session shell %d)", self.task, self.attempt, self.session.pid)
                return
        out_r = out_w = err_r = err_w = -1
        try:
            # the pipes are plain fds, not the file objects Popen would wrap them in (the loop reads
            # them with os.read), and stdin is one /dev/null the worker keeps open
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            self.proc = self._spawn(out_w, err_w, direct)
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the command
            for fd in (out_r, err_r):
                if fd >= 0:
                    os.close(fd)
            log.error("task %d: cannot start %s: %s", self.task, self.shell, exc)
            self.stderr += f"bats-worker: cannot start the task with {self.shell}: {exc}\n".encode()
            self.returncode = SPAWN_FAILED_EXIT
            self.exited_at = now
            self.kill_at = None
            self._end(now)
            return
        finally:  # the child has its copies of the write ends (or there is no child)
            for fd in (out_w, err_w):
                if fd >= 0:
                    os.close(fd)
        self._watch(out_r, err_r)
        log.info("task %d attempt %d started (pid %d)", self.task, self.attempt, self.proc.pid)

    def _watch(self, out_r: int, err_r: int) -> None:
        """Read the task's stdout and stderr from these fds as the poller says they are ready."""
        assert self._poller is not None
        for fd, buf in ((out_r, self.stdout), (err_r, self.stderr)):
            os.set_blocking(fd, False)
            self._pipes[fd] = buf
            self._poller.register(fd, zmq.POLLIN)

    def _spawn(self, out_w: int, err_w: int, direct: tuple[str, list[str]] | None) -> subprocess.Popen[bytes]:
        """The command's process: exec'd directly when the shell would only run it (``direct``, from
        :func:`direct_argv`), else ``SHELL -c``."""
        env = _dash_environment() if direct is not None else None
        if direct is not None and env is not None:
            try:
                proc = subprocess.Popen(direct[1], executable=direct[0], env=env, stdin=_devnull(),
                                        stdout=out_w, stderr=err_w, start_new_session=True)
                self.direct = True
                return proc
            except OSError as exc:  # the shell says what is wrong in its own words (or runs a script)
                log.debug("task %d: exec of %s failed (%s); running it with %s", self.task, direct[0],
                          exc, self.shell)
        return subprocess.Popen([self.shell, "-c", self.command], stdin=_devnull(), stdout=out_w,
                                stderr=err_w, start_new_session=True)

    def _poll_direct(self) -> int | None:
        """A directly exec'd command's exit code as the shell would report it: a crash signal's
        ``128 + N``, and the shell's line about it (``Segmentation fault (core dumped)``) on stderr."""
        assert self.proc is not None
        try:
            pid, status = os.waitpid(self.proc.pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere: Popen knows the code
            return self.proc.poll()
        if pid == 0:
            return None
        code = self.proc.returncode = os.waitstatus_to_exitcode(status)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) not in _STOP_SIGNALS:
            sig = os.WTERMSIG(status)
            if sig not in (signal.SIGINT, signal.SIGPIPE):
                core = " (core dumped)" if os.WCOREDUMP(status) else ""
                self._shell_says = f"{signal.strsignal(sig) or sig}{core}\n".encode()
            code = 128 + sig
        return code

    @property
    def fds(self) -> tuple[int, ...]:
        """The fds the poller watches for this task: its output pipes still open, and while it runs
        in a session, the session's status pipe."""
        if self._status_fd >= 0:
            return (*self._pipes, self._status_fd)
        return tuple(self._pipes)

    @property
    def process_alive(self) -> bool:
        """True while the command's process has not been seen to exit."""
        return (self.proc is not None or self.session is not None) and self.exited_at is None

    def read(self, fd: int) -> None:
        """Read what is available on one pipe; keep the tail; close the pipe at end-of-file."""
        if fd == self._status_fd and self.session is not None:
            self.session.read()
            return
        buf = self._pipes.get(fd)
        if buf is None:
            return
        try:
            data = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError as exc:
            log.warning("task %d: reading its output failed: %s", self.task, exc)
            data = b""
        if not data:
            self._close(fd)
            return
        buf += data
        excess = len(buf) - OUTPUT_TAIL_BYTES
        if excess > 0:
            del buf[:excess]

    def step(self, now: float) -> bool:
        """Advance the run's state; return True once its result is due."""
        if self.report_at is None:
            proc, session = self.proc, self.session
            if (proc is not None or session is not None) and self.exited_at is None:
                code: int | None = None
                if session is not None:
                    code = session.poll()
                    if code is not None:
                        self._unwatch_status()
                elif proc is not None:
                    code = self._poll_direct() if self.direct else proc.poll()
                if code is not None:
                    self.exited_at = now
                    self.returncode = code
                    if self.ended is None:
                        self.ended = now
                elif self.kill_at is not None and now >= self.kill_at:
                    log.info("task %d: timed out after %.3gs; killing it", self.task, self.timeout_s)
                    self.timed_out = True
                    self.ended = now
                    self.kill_at = None
                    self.kill()
            if self.exited_at is not None and (not self._pipes or now >= self.exited_at + EXIT_GRACE_S):
                self._end(now)
        return self.report_at is not None and now >= self.report_at

    def next_deadline(self) -> float | None:
        """The next time :meth:`step` has something to do without any I/O event, if any."""
        if self.report_at is not None:
            return self.report_at
        if self.exited_at is not None:
            return self.exited_at + EXIT_GRACE_S
        return self.kill_at

    def kill(self) -> None:
        """SIGKILL the task's whole process group (the command and everything it started; in a
        session, the session's shell too)."""
        if self.session is not None:
            self._unwatch_status()  # before its fd is closed (and its number reused)
            self.session.kill()
            return
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def abort(self) -> None:
        """Kill the task and release its pipes, without a result (the worker is leaving)."""
        if self.session is not None and self.report_at is None:
            self._unwatch_status()
            self.session.kill()
            self._give_back()
        if self.proc is not None and self.report_at is None:
            self.kill()
            try:
                self.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                log.warning("task %d: pid %d did not die after SIGKILL", self.task, self.proc.pid)
        for fd in list(self._pipes):
            self._close(fd)

    def result_fields(self) -> dict[str, Any]:
        """The fields of the ``result`` message (without ``ask``)."""
        code = self.returncode if self.returncode is not None else TIMEOUT_EXIT
        return {
            "task": self.task,
            "attempt": self.attempt,
            "exit_code": TIMEOUT_EXIT if self.timed_out else code,
            "runtime_s": self.runtime_s,
            "timed_out": self.timed_out,
            "stdout": bytes(self.stdout),
            "stderr": bytes(self.stderr),
        }

    # -- internals ---------------------------------------------------------------------------

    def _end(self, now: float) -> None:
        """The command is over: clean up what is left of it and set the report time."""
        # background leftovers of the task would skew the next task's runtime
        if self.session is not None:
            self._unwatch_status()
            self._give_back()  # kills what the task left in the session's group
        elif self.proc is not None:
            self.kill()
        for fd in list(self._pipes):
            self._close(fd)
        if self._shell_says:
            self.stderr += self._shell_says
            del self.stderr[:max(0, len(self.stderr) - OUTPUT_TAIL_BYTES)]
        ended = self.ended if self.ended is not None else now
        self.runtime_s = self.slowdown * max(0.0, ended - self.started)
        self.report_at = self.started + self.runtime_s
        code = self.returncode
        if self.session is not None and code is not None and code > 128:
            code = 128 - code  # what the shell reports for a command a signal killed (see bats.worker.shell)
        if not self.timed_out and code is not None and -code in _STOP_SIGNALS:
            # killed from outside, as when a batch scheduler or the OS stops the whole machine: the
            # worker's own SIGTERM may be a moment behind, and then the task must go back into the
            # bag instead of counting as failed (the worker leaves without reporting it)
            self.report_at = max(self.report_at, now + OUTSIDE_KILL_GRACE_S)
        log.debug("task %d: command over (code %s, %.3fs real); reporting at +%.3fs",
                  self.task, self.returncode, ended - self.started, self.runtime_s)

    def _unwatch_status(self) -> None:
        if self._status_fd >= 0:
            if self._poller is not None:
                with contextlib.suppress(KeyError):
                    self._poller.unregister(self._status_fd)
            self._status_fd = -1

    def _give_back(self) -> None:
        """Return the session to its pool once (which kills the task's leftovers, or forgets a dead shell)."""
        shells, self._shells = self._shells, None
        if shells is not None and self.session is not None:
            shells.give_back(self.session, drained=not self._pipes)

    def _close(self, fd: int) -> None:
        del self._pipes[fd]
        if self._poller is not None:
            with contextlib.suppress(KeyError):
                self._poller.unregister(fd)
        os.close(fd)
