"""Shell tasks without a new shell each: one long-lived shell per slot, one subshell per task.

How this works. ``sh -c COMMAND`` starts a fresh shell for every task: an exec, the dynamic linker,
the shell's start-up, about half a millisecond of CPU for dash, which for short tasks is most of
what a machine does. A :class:`ShellSession` is one ``SHELL -c LOOP`` started once for a slot. For
each task the worker opens the read ends of the session's two FIFOs (in its private folder, mode
0700), then writes their key and the command line to the shell's stdin; the shell opens the FIFOs' write
ends, runs the line in a subshell, ``( eval LINE ) </dev/null >FIFO 2>FIFO``, and writes the
subshell's exit status on its stdout. Forking a running dash costs much less than starting one
(``make bench`` section 10 times 10,000 ``true`` against ``xargs -P2 sh -c``).
The task's output arrives through the FIFOs as through ``sh -c``'s pipes: end-of-file once the task
and everything it started have closed them. The next task reuses the FIFOs only when both reached
end-of-file (nothing can write into them any more); otherwise the session makes a new pair, so
output a detached leftover writes late never lands in another task's.

When. Only for dash (Debian's and Ubuntu's ``/bin/sh``) and bash (``/bin/sh`` on Fedora, RHEL and
Amazon Linux, and ``[master] shell = "bash"``), whose behaviour this reproduces, only in a worker
that is a child subreaper (``bats-worker`` on Linux, see :mod:`bats.worker.reaper`), and only
for a line with no ``$$`` in it and no newline (:func:`runs_in_session`) that is not plain (a plain
line is exec'd without any shell, :func:`bats.worker.task.direct_argv`); everything else runs with
``sh -c`` as before. A session is ended and replaced when its task times out or is cancelled, when
the worker leaves, or when the task kills the session's shell.

What a task sees, against ``sh -c``. The same argv (``$0`` the shell's name, no positional
parameters), environment, working directory, file descriptors (0 from /dev/null, 1 and 2 the
output), umask and signal dispositions; no variable of the loop (the subshell unsets them). Three
differences are left, none of them in what a task computes:

* ``$$`` is the session's, the same for every task of the slot, so a line that names it (often a
  "unique" file name) goes through ``sh -c``;
* the shell's own messages name ``eval`` (``sh: 1: eval: foo: not found``) and a command killed by
  a signal reports ``128 + N``, as any command the shell forks does (the worker then waits the same
  second for a stop signal as for ``-N``, see :mod:`bats.worker.task`); bash also says so on the
  task's stderr (``bash: line 1: 4242 Aborted ...``), and its quote of a line it cannot parse
  shows the session's preamble before the line. bash's own variables read as under ``bash -c``:
  the line in ``BASH_EXECUTION_STRING``, ``BASH_SUBSHELL`` 0, ``$_`` what the shell started with;
* the task's processes are in the session's process group, not one of their own: at the task's
  end what it left running is found among the worker's children (a subreaper adopts a dead
  subshell's orphans) by that group, and killed (:meth:`ShellPool.give_back`); a timeout or a cancel
  kills the whole group, shell included. ``kill 0`` in a task stops the session's shell too; that
  task then reads as a group kill does under ``sh -c`` (``-N``), and the slot starts a new shell.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator

from bats.worker import reaper

log = logging.getLogger("bats.worker")

# One line (so the shell's messages say line 1, as under sh -c). $1 is the FIFO folder; the eval
# string is expanded before it runs, so its preamble clears the loop's names from the task's sight
# and leaves the line itself intact.
def _loop(preamble: str, start: str = "") -> str:
    return (f'{start}_bats_d=$1; shift; '
            'while IFS= read -r _bats_k && IFS= read -r _bats_c; do '
            'exec 3>"$_bats_d/$_bats_k.out" 4>"$_bats_d/$_bats_k.err"; '
            f'( eval "{preamble}$_bats_c" ) </dev/null >&3 2>&4 3>&- 4>&-; '
            '_bats_s=$?; exec 3>&- 4>&-; echo "$_bats_s"; '
            'done')


LOOP = _loop("unset _bats_d _bats_k _bats_c _bats_s; ")
# bash's: the task also finds what bash -c gives it in bash's own variables: its line in
# BASH_EXECUTION_STRING, BASH_SUBSHELL 0, and $_ as the shell started with it (kept quoted by printf %q,
# which every bash has, where ${x@Q} needs 4.4)
BASH_LOOP = _loop("BASH_EXECUTION_STRING=\\$_bats_c; BASH_SUBSHELL=0; unset _bats_d _bats_k _bats_c _bats_s _bats_q; "
                  ": $_bats_q; ", start='printf -v _bats_q %q "$_"; ')
# the shells a session stands in for (by the program a shell name resolves to): the loop each runs
LOOPS = {"dash": LOOP, "bash": BASH_LOOP}
WAIT_DEAD_S = 1.0  # how long to wait for a session's shell that closed its stdout to be reaped

_kinds: dict[str, str] = {}


def shell_kind(shell: str) -> str:
    """The program ``shell`` names, by the file it resolves to: ``sh`` is ``dash`` on Debian and
    Ubuntu, ``bash`` on Fedora, RHEL and Amazon Linux."""
    kind = _kinds.get(shell)
    if kind is None:
        path = shell if "/" in shell else (shutil.which(shell) or shell)
        kind = _kinds[shell] = os.path.basename(os.path.realpath(path))
    return kind


def takes_sessions(shell: str) -> bool:
    """Whether lines for ``shell`` may run in session shells (dash or bash)."""
    return shell_kind(shell) in LOOPS


def runs_in_session(command: str) -> bool:
    """Whether ``command`` may run in a session: no ``$$`` (see the module's docstring), and nothing
    that would break the session's line protocol (a newline; a NUL, which no shell line can hold)."""
    return "$$" not in command and "${$}" not in command and "\n" not in command and "\0" not in command


class ShellSession:
    """One long-lived shell that runs a slot's tasks one after another."""

    def __init__(self, shell: str, folder: str, keys: Iterator[int]) -> None:
        self.shell = shell
        self._folder = folder
        self._keys = keys  # the pool's: FIFO names unique in the folder
        # its own session and process group (the pgid is its pid), stderr the worker's (a failure
        # of the loop itself is the worker's to log); stdin the tasks, stdout their exit statuses
        self.proc = subprocess.Popen([shell, "-c", LOOPS[shell_kind(shell)], shell, folder], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, start_new_session=True, bufsize=0)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin = self.proc.stdin.fileno()
        self.status_fd = self.proc.stdout.fileno()
        os.set_blocking(self.status_fd, False)
        self._buffer = b""
        self._code: int | None = None
        self._key = ""
        self._fifos: tuple[str, ...] = ()  # the FIFO pair the next task writes to, once made
        self.dead = False

    @property
    def pid(self) -> int:
        """The shell's pid, which is also its process group's id."""
        return self.proc.pid

    def begin(self, command: str) -> tuple[int, int]:
        """Hand ``command`` to the shell; returns the read ends of the task's stdout and stderr.
        Raises OSError when the shell is gone (BrokenPipeError) or the FIFOs cannot be made."""
        if self.dead:  # (a shell that ended while idle fails the write below)
            raise BrokenPipeError(f"the session shell {self.pid} has ended")
        fds: list[int] = []
        try:
            if not self._fifos:
                self._key = str(next(self._keys))
                for stream in ("out", "err"):
                    path = f"{self._folder}/{self._key}.{stream}"
                    os.mkfifo(path, 0o600)
                    self._fifos += (path,)
            for path in self._fifos:
                # opened for reading first (non-blocking), so the shell's open for writing does not block
                fds.append(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))
            self._code = None
            self._buffer = b""
            data = f"{self._key}\n{command}\n".encode()
            while data:  # the shell is waiting in read: a blocking write of a long line drains as it reads
                data = data[os.write(self._stdin, data):]
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            self._unlink()
            # a broken pipe is the shell gone (it may not be reaped yet); anything else is the FIFOs'
            if isinstance(exc, BrokenPipeError) or self.proc.poll() is not None:
                self.dead = True
            raise
        return fds[0], fds[1]

    def read(self) -> None:
        """Read what the shell has written of the running task's status (non-blocking)."""
        try:
            data = os.read(self.status_fd, 64)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self._buffer += data
        else:
            self.dead = True  # end-of-file: the shell has ended

    def poll(self) -> int | None:
        """The running task's exit status once the shell has written it; if the shell itself ended
        first, the shell's own code (``-N`` when a signal killed it)."""
        if self._code is not None:
            return self._code
        if b"\n" not in self._buffer and not self.dead:
            self.read()
        if b"\n" in self._buffer:
            line, _, self._buffer = self._buffer.partition(b"\n")
            try:
                self._code = int(line)
            except ValueError:  # only the loop writes here; a broken line means a broken shell
                log.error("session shell %d wrote %r for a status; ending it", self.pid, line)
                self.kill()
                self._code = 2
        elif self.dead:
            try:
                self._code = self.proc.wait(WAIT_DEAD_S)
            except subprocess.TimeoutExpired:
                self.kill()
                self._code = -signal.SIGKILL
            if self._code >= 0:
                log.warning("session shell %d ended with code %d during a task", self.pid, self._code)
        return self._code

    def retire_fifos(self) -> None:
        """Make the next task write to a new FIFO pair: something may still hold this one open."""
        self._unlink()

    def kill(self) -> None:
        """SIGKILL the session's whole process group (the shell, the task and what it started) and
        reap the shell; the session is over."""
        self.dead = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        try:
            self.proc.wait(WAIT_DEAD_S)
        except subprocess.TimeoutExpired:
            log.warning("session shell %d did not die after SIGKILL", self.pid)
        self._unlink()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def _unlink(self) -> None:
        for path in self._fifos:
            with contextlib.suppress(OSError):
                os.unlink(path)
        self._fifos = ()


class ShellPool:
    """The worker's sessions for one shell: idle ones are reused, a dead one is replaced."""

    def __init__(self, shell: str) -> None:
        self.shell = shell
        self.usable = True  # False once the FIFOs cannot be made (tasks then run with sh -c)
        self._folder: str | None = None
        self._idle: list[ShellSession] = []
        self._live: dict[int, ShellSession] = {}  # by pid, idle or busy
        self._keys = itertools.count(1)

    def pids(self) -> set[int]:
        """The live sessions' shells (children of the worker that are not leftovers)."""
        return set(self._live)

    def begin(self, command: str) -> tuple[ShellSession, int, int]:
        """Start ``command`` in an idle session (a new one if none is); returns the session and the
        read ends of the task's stdout and stderr. Raises OSError when no session can run it; when
        the reason is the folder or its FIFOs (no room, no FIFOs on that file system), the pool is
        no longer :attr:`usable`, said once in the log."""
        try:
            if self._folder is None:
                import tempfile

                self._folder = tempfile.mkdtemp(prefix="bats-worker-")  # 0700: only this user opens the FIFOs
        except OSError as exc:
            self._give_up(exc)
            raise
        for _attempt in range(2):  # an idle shell may have died meanwhile: one new one is tried
            session = self._idle.pop() if self._idle else self._new()
            try:
                out_r, err_r = session.begin(command)
            except OSError as exc:
                if not session.dead:  # the shell is fine: its FIFOs are not
                    self._idle.append(session)
                    self._give_up(exc)
                    raise
                self._forget(session)
                continue
            return session, out_r, err_r
        raise BrokenPipeError("no session shell could take the task")

    def give_back(self, session: ShellSession, drained: bool) -> None:
        """The session's task is over: kill what it left in the session's process group, and keep
        the session for the next task (or forget it, if its shell has ended). ``drained``: both
        FIFOs reached end-of-file (else the next task gets a new pair)."""
        if session.dead:
            session.kill()
            self._forget(session)
            return
        killed = reaper.kill_group_strays(session.pid, keep=self._live)
        if killed:
            log.debug("killed %d process(es) the task left in session %d", killed, session.pid)
        if not drained:
            session.retire_fifos()
        self._idle.append(session)

    def _give_up(self, exc: OSError) -> None:
        self.usable = False
        log.warning("session shells off: cannot make their FIFOs (%s); tasks run with %s -c", exc, self.shell)

    def close(self) -> None:
        """End every session and remove the folder."""
        for session in list(self._live.values()):
            session.kill()
        self._live.clear()
        self._idle.clear()
        if self._folder is not None:
            import shutil

            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def _new(self) -> ShellSession:
        assert self._folder is not None
        session = ShellSession(self.shell, self._folder, self._keys)
        self._live[session.pid] = session
        log.debug("session shell %d started (%s)", session.pid, self.shell)
        return session

    def _forget(self, session: ShellSession) -> None:
        self._live.pop(session.pid, None)
        with contextlib.suppress(ValueError):
            self._idle.remove(session)
