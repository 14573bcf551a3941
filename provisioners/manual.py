"""The ``manual`` provisioner: no provisioning; workers started by hand join the cluster.

How this works. The cluster has one *join token*, a secret kept in a file (``token_file``, default
``STATE_DIR/join/CLUSTER.token``, mode 0600): made on the run's first start, read again on every
``--resume``, so hand-started workers keep working across master restarts. An operator starts, on
any machine that can reach the master,

    bats-worker --master tcp://MASTER:PORT --cluster CLUSTER --token-file TOKEN_FILE --machine NAME

(the exact line, with the master's address, is logged when the master wants workers). When the
master asks this cluster for ``n`` machines, :meth:`ManualProvisioner.acquire` opens ``n`` *seats*:
handles the master counts (and pays for, at the cluster's price) as machines booting. A worker
that says hello with this cluster's name and its join token takes a free seat through
:meth:`join` (the same seat again when it reconnects); the master then knows it by the seat's id
(the worker logs that it was welcomed under that name). A worker that finds no free seat is told
to wait (:meth:`may_join`): it says hello again every few seconds until one opens, so workers
started before the master has asked for any (or while all seats are taken) join as soon as
there is room. Releasing a seat forgets it; the master tells its worker to stop. Seats are
``BOOTING`` until taken, ``RUNNING`` after, ``GONE`` once released; a seat not taken within
``[master] boot_timeout`` is given up and another opened, like a machine that never booted.

The one touch with the outside world is :meth:`_token`, reading or creating the token file.
"""

from __future__ import annotations

import logging
import os
import secrets
import shlex
from pathlib import Path
from typing import ClassVar

from bats.common.config import ClusterConfig, OptionSpec
from bats.provisioners.base import (
    Bootstrap,
    MachineHandle,
    NodeState,
    Provisioner,
    ProvisionerConfigError,
)

log = logging.getLogger(__name__)

MIN_TOKEN_CHARS = 16


def token_path(cluster: ClusterConfig, bootstrap: Bootstrap) -> Path:
    given = cluster.options.get("token_file")
    if given:
        return Path(bootstrap.config_dir, os.path.expanduser(given))
    base = bootstrap.state_dir or (str(Path(bootstrap.log_dir).parent) if bootstrap.log_dir else ".")
    return Path(base, "join", f"{cluster.name}.token")


class ManualProvisioner(Provisioner):
    OPTIONS: ClassVar[OptionSpec] = {
        "token_file": ("str", None),  # the join token's file (relative to the config); made if missing
    }

    @classmethod
    def preflight(cls, cluster: ClusterConfig, config_dir: str) -> None:
        given = cluster.options.get("token_file")
        if not given:
            return
        path = Path(config_dir, os.path.expanduser(given))
        if path.exists():
            try:
                token = path.read_text().strip()
            except (OSError, UnicodeDecodeError) as exc:
                raise ProvisionerConfigError(f"token_file: {path}: cannot read: {exc}") from None
            if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
                raise ProvisionerConfigError(
                    f"token_file: {path}: expected one word of at least {MIN_TOKEN_CHARS} characters")
        elif not path.parent.is_dir():
            raise ProvisionerConfigError(f"token_file: {path.parent}: no such directory")

    def __init__(self, cluster: ClusterConfig, bootstrap: Bootstrap) -> None:
        super().__init__(cluster, bootstrap)
        self.token_file = token_path(cluster, bootstrap)
        self.join_token = self._token(self.token_file)
        self._open: list[MachineHandle] = []  # seats no worker has taken
        self._taken: dict[str, MachineHandle] = {}  # worker's own name -> its seat
        self._released: set[str] = set()

    def _token(self, path: Path) -> str:
        """The cluster's join token: read from ``path``, or made and written there (0600)."""
        if path.exists():
            return path.read_text().strip()
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        token = secrets.token_urlsafe(24)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(token + "\n")
        return token

    def join_command(self) -> str:
        """The command to paste on a machine, every value shell-quoted (a Z85 key may hold ``&``,
        ``>``, ``)`` or ``$``); NAME is the operator's to fill in."""
        argv = ["bats-worker", "--master", self.bootstrap.master_endpoint]
        if self.bootstrap.server_key:
            argv.append(f"--server-key={self.bootstrap.server_key}")  # public
        argv += ["--cluster", self.cluster.name, "--token-file", str(self.token_file.resolve())]
        return shlex.join(argv) + " --machine NAME"

    def acquire(self, n: int) -> list[MachineHandle]:
        seats = []
        for _ in range(n):
            seat = self.new_handle()
            seat.token = secrets.token_hex(16)  # never shown: a seat is taken only through join()
            seats.append(seat)
        self._open.extend(seats)
        log.warning("cluster %s: waiting for %d more worker(s) started by hand: %s", self.cluster.name, n,
                    self.join_command())
        return seats

    def join(self, worker_machine: str, token: str) -> MachineHandle | None:
        if not secrets.compare_digest(token.encode(), self.join_token.encode()):
            return None
        seat = self._taken.get(worker_machine)
        if seat is not None and seat.machine_id not in self._released:
            return seat  # the same worker again (it reconnected)
        if not self._open:
            log.warning("cluster %s: worker %r has the join token, but no seat is open (the master wants no more "
                        "machines of this cluster now)", self.cluster.name, worker_machine)
            return None
        seat = self._open.pop(0)
        seat.native_id = worker_machine
        self._taken[worker_machine] = seat
        log.info("cluster %s: worker %r takes seat %s", self.cluster.name, worker_machine, seat.machine_id)
        return seat

    def may_join(self, token: str) -> bool:
        return secrets.compare_digest(token.encode(), self.join_token.encode())

    def release(self, handles: list[MachineHandle]) -> None:
        ids = {h.machine_id for h in handles}
        self._released |= ids
        self._open = [s for s in self._open if s.machine_id not in ids]
        for name in [w for w, s in self._taken.items() if s.machine_id in ids]:
            del self._taken[name]

    def status(self, handles: list[MachineHandle]) -> dict[str, NodeState]:
        taken = {s.machine_id for s in self._taken.values()}
        return {h.machine_id: NodeState.GONE if h.machine_id in self._released
                else NodeState.RUNNING if h.machine_id in taken else NodeState.BOOTING
                for h in handles}
