"""The provisioner interface: how the master gets and gives back machines.

A provisioner serves one cluster. The master calls :meth:`acquire` to start ``n`` machines, each
of which runs :meth:`Provisioner.bootstrap_argv` (``bats-worker --master … --machine …``, its token in the
environment: :meth:`Provisioner.bootstrap_env`) and joins
over ZeroMQ; :meth:`release` gives machines back; :meth:`status` maps each back end's native
states onto :class:`NodeState` through a table, the way Parsl's providers do. The bootstrap
carries the master's CurveZMQ public key (``--server-key``) unless the master runs ``--insecure``.

Each back end talks to the outside world through one method (``_spawn`` for local processes,
``_api`` for a cloud SDK, ``_run`` for a command line), so a test can point it at a real
component or a local stand-in.

Optional hooks, which do nothing by default. For shared pools (seed 002, ``--policy offers``):

- :meth:`Provisioner.offers`: the pool's offers for a bag, (number of tasks, completion in seconds
  from now); None (the default) means the pool makes no offers and gets no share of the bag.

Three serve the cloud back ends:

- :meth:`Provisioner.price_now`, polled by the server every ``price_poll_s``: the cluster's
  current price per ATU (an EC2 spot price), fed to the core as ``PriceChanged`` when it moves;
- :attr:`Provisioner.usable_max`: set when the back end keeps refusing machines (capacity,
  quotas); the server lowers the cluster's ``max`` the planner sees to it;
- :meth:`Provisioner.cleanup`: terminate every machine of this run and cluster the back end still
  has (``bats-master cleanup``, and the start of a ``--resume``d session).
"""

from __future__ import annotations

import enum
import importlib.util
import secrets
import shlex
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bats.common.config import ClusterConfig, OptionSpec
from bats.common.files import FilesConfig

TOKEN_ENV = "BATS_TOKEN"  # the worker reads its token from this variable (bats.worker.main)
PARENT_ENV = "BATS_PARENT_PID"  # a local worker's master, which it leaves with (--exit-with-parent)


class NodeState(enum.Enum):
    """A machine's state as its back end reports it (``status``), each back end's native states mapped
    onto these; the core's own bookkeeping of a machine is ``bats.master.core.MachineState``."""

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
    state_dir: str | None = None  # the run's state dir (``manual`` keeps its join token there)
    config_dir: str = "."  # relative paths in the cluster's table (hosts_file, key) start here
    worker_command: tuple[str, ...] = (sys.executable, "-m", "bats.worker")
    server_key: str | None = None  # the master's CurveZMQ public key (Z85); None: plain TCP (--insecure)
    task_shell: str = "/bin/sh"  # ``[master] shell``: what the worker runs tasks with (checked where it can be)
    files: FilesConfig | None = None  # ``[files]`` with its inputs resolved (common/files.py); None: none


class ProvisionerError(RuntimeError):
    """A back end refused or failed a call; the message says which cluster and why."""


class ProvisionerConfigError(ProvisionerError):
    """A cluster's table cannot work with this back end: ``KEY: reason`` (the caller adds the file
    and table), e.g. ``hosts_file: hosts.txt:3: bad port`` or ``provisioner: qsub is not on PATH``."""


class Provisioner(ABC):
    """One small class per back end; see the module docstring."""

    #: the keys this provisioner accepts in its ``[clusters.NAME]`` table: {key: (kind, default)}
    OPTIONS: ClassVar[OptionSpec] = {}
    #: optional packages it needs: {import name: what to pip install}
    REQUIRES: ClassVar[dict[str, str]] = {}

    #: how often (seconds) the server calls :meth:`price_now`; None: never
    price_poll_s: float | None = None

    @classmethod
    def preflight(cls, cluster: ClusterConfig, config_dir: str) -> None:
        """Check, before ``bats-master`` starts anything, that this back end can serve ``cluster``
        on this machine (its commands are on PATH, its files read); raise
        :class:`ProvisionerConfigError` if not. ``config_dir`` is where relative paths in the config
        are resolved from. (The keys themselves are :meth:`check_config`'s.)"""

    #: how long one acquire/release/status call may take before the master gives up on it and
    #: tries again. The master makes these calls off its dispatch thread: calls of different methods
    #: may run at the same time (each on its own thread), two calls of the same method never do.
    CALL_TIMEOUT_S: ClassVar[float] = 120.0

    def __init__(self, cluster: ClusterConfig, bootstrap: Bootstrap) -> None:
        self.cluster = cluster
        self.bootstrap = bootstrap
        self._serial = 0
        self._issued: dict[str, str] = {}  # machine id -> token, for every handle made (see issued_token)
        #: the most machines the back end can give this cluster now; None: the configured max
        self.usable_max: int | None = None

    @classmethod
    def check_config(cls, cluster: ClusterConfig) -> None:
        """Check the cluster's provisioner keys beyond their kinds (required keys, files) whenever
        the config is read, by ``bats-master`` or ``bats-sim``; raise ``ValueError(key, reason)``.
        Needs no optional package and looks at nothing outside the config (that is
        :meth:`preflight`)."""

    @classmethod
    def missing_packages(cls) -> list[str]:
        """The pip specs of the optional packages this provisioner needs and cannot import."""
        return [spec for module, spec in cls.REQUIRES.items() if importlib.util.find_spec(module) is None]

    def new_handle(self) -> MachineHandle:
        """A fresh machine id (unique within the run) and one-time token for the next machine."""
        self._serial += 1
        machine_id = f"{self.cluster.name}-s{self.bootstrap.session}-{self._serial}"
        handle = MachineHandle(machine_id=machine_id, cluster=self.cluster.name, token=secrets.token_hex(16))
        self._issued[machine_id] = handle.token
        return handle

    def issued_token(self, machine_id: str) -> str | None:
        """The token :meth:`new_handle` gave ``machine_id``, or None if it made no such machine. The
        master reads it while an acquisition is still running (a worker may say hello before the
        call that started it returns), so it can tell such a worker from a peer that made its id up."""
        return self._issued.get(machine_id)

    def bootstrap_argv(self, handle: MachineHandle, extra: tuple[str, ...] = ()) -> list[str]:
        """The command a machine runs to join the master as a worker."""
        return [
            *self.bootstrap.worker_command,
            "--master", self.bootstrap.master_endpoint,
            "--machine", handle.machine_id,
            "--cluster", handle.cluster,
            "--heartbeat", f"{self.bootstrap.heartbeat_s:g}",
            # one argument with "=": a Z85 key may begin with "-", which a separate argument would
            # make look like an option
            *((f"--server-key={self.bootstrap.server_key}",) if self.bootstrap.server_key else ()),
            *extra,
        ]

    def bootstrap_env(self, handle: MachineHandle) -> dict[str, str]:
        """What the worker's environment must add to :meth:`bootstrap_argv`: its one-time token.
        A token never goes on a command line (``ps`` and ``/proc/PID/cmdline`` show those to every
        local user); a provisioner hands it over in the environment, on standard input or in a
        file only the worker's user can read."""
        return {TOKEN_ENV: handle.token}

    def token_export(self, handle: MachineHandle) -> str:
        """Shell lines that put the token in the environment of what the script ``exec``s next (for
        scripts that reach the machine on standard input or in a private file, never in argv)."""
        return f"{TOKEN_ENV}={shlex.quote(handle.token)}; export {TOKEN_ENV}"

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
    def status(self, handles: list[MachineHandle]) -> dict[str, NodeState]:
        """The state of each machine, by machine id."""

    def offers(self, tasks: int, task_runtime_s: float, deadline_s: float) -> list[tuple[int, float]] | None:
        """Seed 002 §III-A: what this pool offers for ``tasks`` tasks of ``task_runtime_s`` each due
        in ``deadline_s``, as (tasks, completion in seconds from now); None: it makes no offers."""
        return None

    def price_now(self) -> float | None:
        """The cluster's price per ATU now, as the back end quotes it; None: no quote."""
        return None

    def machine_cpus(self) -> int | None:
        """The CPUs each machine of this cluster will have, when the back end can say so before
        acquiring one (an EC2 instance type's vCPUs): what ``slots = "auto"`` becomes at the start.
        None: known only when a worker says hello (it reports its CPUs)."""
        return None

    def cleanup(self) -> dict[str, str]:
        """Terminate every machine of this run and cluster the back end still has; return
        {native id: machine id} of those terminated (machine id "" when the back end lost it).
        Back ends whose machines cannot outlive the master have nothing to do."""
        return {}

    def join(self, worker_machine: str, token: str) -> MachineHandle | None:
        """A worker this provisioner did not start says hello with ``token``: the handle of the
        acquired machine it stands for, or None to refuse it (only ``manual`` accepts any)."""
        return None

    def may_join(self, token: str) -> bool:
        """Whether ``token`` would let a worker started by hand join once a seat is open: such a
        worker that finds none is told to wait and say hello again, not to stop."""
        return False

    def close(self) -> None:
        """Release anything the provisioner itself holds (connections, temp files)."""
