"""Shared plumbing of the provisioners that drive command-line tools (``ssh``, ``sge``, ``slurm``).

How this works. Such a back end touches the outside world only through
:meth:`CommandProvisioner._run`: it runs one command line (stdin from ``input`` or /dev/null, in a
session of its own so a Ctrl-C at the master's terminal does not cut a ``qdel`` short) and returns
the finished process; a program that is not there, a timeout or a non-zero exit becomes a one-line
:class:`~bats.provisioners.base.ProvisionerError` naming the cluster, the command and what it
wrote to stderr. :meth:`CommandProvisioner.preflight` checks before a run starts that the
programs in ``COMMANDS`` are on PATH, so a missing ``qsub`` is bad input, not a failure later.

The worker these back ends start is ``[clusters.NAME] worker`` (default ``bats-worker``, i.e. on the
machine's PATH), followed by the usual ``--master … --machine … --token …``.

Status queries can be slow (a scheduler under load, a host that stopped answering) and the master
asks every second from its single loop, so :class:`Probe` runs a query in a background thread at
most every ``poll_interval`` and ``status`` answers from the latest finished round. A machine
acquired after that round began is not judged by it (it could not have been seen).
"""

from __future__ import annotations

import dataclasses
import logging
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from typing import ClassVar, Generic, TypeVar

from bats.common.config import ClusterConfig, OptionSpec
from bats.provisioners.base import (
    Bootstrap,
    MachineHandle,
    Provisioner,
    ProvisionerConfigError,
    ProvisionerError,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

#: keys every command-line back end accepts
COMMON_OPTIONS: OptionSpec = {
    "worker": ("str", "bats-worker"),  # the worker command on the machines (shell words)
    "poll_interval": ("duration", 10.0),  # how often the back end is asked about its machines
}


def one_line(text: str, limit: int = 300) -> str:
    """A command's message on one line: its non-empty lines joined with " / ", at most ``limit``
    characters (qsub's reason comes before its final "Exiting.", sbatch gives two error lines)."""
    joined = " / ".join(line.strip() for line in text.splitlines() if line.strip())
    return joined if len(joined) <= limit else joined[:limit - 3] + "..."


class CommandProvisioner(Provisioner):
    """A provisioner whose back end is a set of command-line programs; see the module docstring."""

    #: programs that must be on PATH for this back end to work
    COMMANDS: ClassVar[tuple[str, ...]] = ()
    #: the package that brings them, for the error message
    PACKAGE: ClassVar[str] = ""
    #: how long one command may take
    COMMAND_TIMEOUT_S: ClassVar[float] = 60.0

    @classmethod
    def preflight(cls, cluster: ClusterConfig, config_dir: str) -> None:
        # the config's own mistakes first: they are the same on every machine
        try:
            shlex.split(cluster.options.get("worker") or "bats-worker")
        except ValueError as exc:
            raise ProvisionerConfigError(f"worker: not a command line: {exc}") from None
        for program in cls.COMMANDS:
            if shutil.which(program) is None:
                hint = f" (install {cls.PACKAGE} on this machine)" if cls.PACKAGE else ""
                raise ProvisionerConfigError(
                    f"provisioner: {cluster.provisioner} needs {program!r}, which is not on PATH{hint}")

    def __init__(self, cluster: ClusterConfig, bootstrap: Bootstrap) -> None:
        worker = tuple(shlex.split(cluster.options.get("worker") or "bats-worker"))
        super().__init__(cluster, dataclasses.replace(bootstrap, worker_command=worker))

    def _run(self, argv: list[str], *, input: str | None = None, timeout: float | None = None,
             check: bool = True) -> subprocess.CompletedProcess[str]:
        """The one place these back ends touch the outside world (see the module docstring)."""
        timeout = self.COMMAND_TIMEOUT_S if timeout is None else timeout
        shown = shlex.join(argv)
        shown = shown if len(shown) <= 120 else shown[:117] + "..."
        # stderr goes to a file: ssh's connection-sharing master stays behind holding it open
        with tempfile.TemporaryFile("w+") as err:
            try:
                proc = subprocess.run(
                    argv, input=input, stdin=None if input is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=err, text=True, timeout=timeout, start_new_session=True)
            except FileNotFoundError:
                raise ProvisionerError(f"cluster {self.cluster.name}: {argv[0]!r} is not on PATH") from None
            except subprocess.TimeoutExpired:
                raise ProvisionerError(
                    f"cluster {self.cluster.name}: `{shown}` did not finish within {timeout:g}s") from None
            err.seek(0)
            stderr = err.read()
        proc.stderr = stderr
        if check and proc.returncode != 0:
            raise ProvisionerError(f"cluster {self.cluster.name}: `{shown}` failed (exit {proc.returncode}): "
                                   f"{one_line(stderr) or one_line(proc.stdout) or 'no message'}")
        return proc


class Probe(Generic[T]):
    """One background query at a time, at most every ``interval`` seconds: see the module docstring."""

    def __init__(self, query: Callable[[], T], interval_s: float, what: str) -> None:
        self._query = query
        self._interval_s = interval_s
        self._what = what
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._last_start = -float("inf")
        self._result: tuple[float, T] | None = None  # (monotonic start of the round, its answer)

    def poke(self) -> None:
        """Start a round unless one is running or the last one began less than ``interval`` ago."""
        with self._lock:
            now = time.monotonic()
            if (self._thread is not None and self._thread.is_alive()) or now - self._last_start < self._interval_s:
                return
            self._last_start = now
            self._thread = threading.Thread(target=self._round, args=(now,), name=f"probe {self._what}",
                                            daemon=True)
            self._thread.start()

    def _round(self, started: float) -> None:
        try:
            answer = self._query()
        except Exception as exc:  # a failed round is logged and simply has no answer
            log.warning("%s: %s", self._what, exc)
            return
        with self._lock:
            self._result = (started, answer)

    def latest(self) -> tuple[float, T] | None:
        with self._lock:
            return self._result

    def wait(self, timeout: float) -> None:
        """Tests and shutdown: let a running round finish."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)


def stamp(handle: MachineHandle) -> MachineHandle:
    """Note when a machine was acquired (monotonic), so a probe round older than it cannot judge it."""
    handle.data["acquired_mono"] = time.monotonic()
    return handle


def seen_by(handle: MachineHandle, round_started: float) -> bool:
    return handle.data.get("acquired_mono", 0.0) < round_started
