"""The provisioner interface: how the master gets and gives back machines.

A provisioner serves one cluster. The master calls :meth:`acquire` to start ``n`` machines, each
of which runs :meth:`Provisioner.bootstrap_argv` (``bats-worker --master … --token …``) and joins
over ZeroMQ; :meth:`release` gives machines back; :meth:`status` maps each back end's native
states onto :class:`MachineState` through a table, the way Parsl's providers do. The bootstrap
carries the master's CurveZMQ public key (``--server-key``) unless the master runs ``--insecure``.

Each back end talks to the outside world through one method (``_spawn`` for local processes,
``_api`` for a cloud SDK, ``_run`` for a command line), so a test can point it at a real
component or a local stand-in.
"""

from __future__ import annotations

import enum
import secrets
import shlex
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bats.common.config import ClusterConfig, OptionSpec


class MachineState(enum.Enum):
    BOOTING = "booting"  # asked for, not yet running (includes queue wait on a batch system)
    RUNNING = "running"
    GONE = "gone"  # terminated, exited or released
    FAILED = "failed"  # the back end reports an error for it
    UNKNOWN = "unknown"


@dataclass
class MachineHandle:
    """One acquired machine as the provisioner knows it."""

    machine_id: str  # the id the worker says hello with; unique within a run
    cluster: str
    token: str  # one-time token the worker presents in its hello
    native_id: str = ""  # the back end's own id: pid, instance id, job id, host
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Bootstrap:
    """What a new machine needs to reach the master."""

    master_endpoint: str  # the address workers connect to (``[master] advertise``)
    run_id: str
    session: int = 1  # master sessions of the run (each --resume adds one); part of machine ids
    heartbeat_s: float = 2.0
    log_dir: str | None = None  # where local stand-ins may write worker logs (the state dir)
    worker_command: tuple[str, ...] = (sys.executable, "-m", "bats.worker")
    server_key: str | None = None  # the master's CurveZMQ public key (Z85); None: plain TCP (--insecure)


class ProvisionerError(RuntimeError):
    """A back end refused or failed a call; the message says which cluster and why."""


class Provisioner(ABC):
    """One small class per back end; see the module docstring."""

    #: the keys this provisioner accepts in its ``[clusters.NAME]`` table: {key: (kind, default)}
    OPTIONS: ClassVar[OptionSpec] = {}
    #: how long one acquire/release/status call may take before the master gives up on it and
    #: tries again. The master makes these calls off its dispatch thread: calls of different methods
    #: may run at the same time (each on its own thread), two calls of the same method never do.
    CALL_TIMEOUT_S: ClassVar[float] = 120.0

    def __init__(self, cluster: ClusterConfig, bootstrap: Bootstrap) -> None:
        self.cluster = cluster
        self.bootstrap = bootstrap
        self._serial = 0

    def new_handle(self) -> MachineHandle:
        """A fresh machine id (unique within the run) and one-time token for the next machine."""
        self._serial += 1
        machine_id = f"{self.cluster.name}-s{self.bootstrap.session}-{self._serial}"
        return MachineHandle(machine_id=machine_id, cluster=self.cluster.name, token=secrets.token_hex(16))

    def bootstrap_argv(self, handle: MachineHandle, extra: tuple[str, ...] = ()) -> list[str]:
        """The command a machine runs to join the master as a worker."""
        return [
            *self.bootstrap.worker_command,
            "--master", self.bootstrap.master_endpoint,
            "--machine", handle.machine_id,
            "--token", handle.token,
            "--cluster", handle.cluster,
            "--heartbeat", f"{self.bootstrap.heartbeat_s:g}",
            # one argument with "=": a Z85 key may begin with "-", which a separate argument would
            # make look like an option
            *((f"--server-key={self.bootstrap.server_key}",) if self.bootstrap.server_key else ()),
            *extra,
        ]

    def call_timeout_s(self) -> float:
        """The timeout of each call of this provisioner (a back end may read it from its options)."""
        return self.CALL_TIMEOUT_S

    def bootstrap_shell(self, handle: MachineHandle, extra: tuple[str, ...] = ()) -> str:
        return shlex.join(self.bootstrap_argv(handle, extra))

    @abstractmethod
    def acquire(self, n: int) -> list[MachineHandle]:
        """Start ``n`` machines; return a handle for each one that was started."""

    @abstractmethod
    def release(self, handles: list[MachineHandle]) -> None:
        """Give the machines back (terminate, cancel, stop the worker)."""

    @abstractmethod
    def status(self, handles: list[MachineHandle]) -> dict[str, MachineState]:
        """The state of each machine, by machine id."""

    def close(self) -> None:
        """Release anything the provisioner itself holds (connections, temp files)."""
