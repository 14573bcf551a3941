"""Transport security of the master: CurveZMQ keys, the ZAP handler and the loopback check.

How this works. Every run has one CurveZMQ key pair, made by :func:`new_keys` when the run starts
and kept in the state directory (``master.key`` holds the public key, ``master.key_secret`` both,
created with mode 0600), so a ``--resume`` listens with the same key. The files use ZeroMQ's
certificate format and are read back with :func:`zmq.auth.load_certificate`.

The ROUTER socket is a CURVE server (:func:`secure_router`): every connection is encrypted, and a
peer that does not know the master's public key cannot complete the handshake, so it never gets a
frame through. Workers are not known in advance: each makes a fresh client key pair when it
starts, so the ZAP handler (:class:`.door.DoorKeeper`, around pyzmq's authenticator) accepts any
client key and hands it to the master as the ``User-Id`` of every frame of that connection; it also
keeps the number of connections without a hello bounded (:mod:`.door`).
Knowing the master's public key is not enough to take part: the master accepts a ``hello`` only
with the one-time token the provisioner gave that machine, and binds the machine to the client key
of the first connection that presents it (:class:`bats.master.server.loop.Server`). A second connection
with another key and the same token (a replay, a copied token) is refused; the real worker, which
keeps its key pair across reconnects, can say hello again. Every later frame is checked against
the key its peer said hello with: a connection id is only a name, and once a connection drops a
new one may present the same id (libzmq's own ids are predictable, so ``bats-worker`` picks a
random one and a hello from a predictable one is refused); a frame with the id of a known peer
and another key makes the master forget that peer, so nothing more is sent to that id.

Before its hello admits it, a connection may send little (:class:`PreHelloBudget`): frames of at
most ``PRE_HELLO_FRAME_BYTES`` (a hello is well under a KiB), ``PRE_HELLO_BURST`` of them at once and
then ``PRE_HELLO_RATE`` a second; the rest is dropped unread. libzmq holds at most ``PEER_RCVHWM``
frames per connection that the master has not read yet (:mod:`.loop`), so a connection that floods
1 MiB frames costs the master a few dozen MiB at most while it stays, and once frames have been
refused the budget gives freed memory back to the system (:meth:`PreHelloBudget.give_back`, at most
every ``GIVE_BACK_S``): glibc keeps what a flood freed otherwise.

An admitted machine is trusted with tasks, not with the bag: ``slots = "auto"`` gives it at most the
cluster's ``max_slots`` whatever CPUs it claims, and with ``--task-timeout`` a machine that holds a task
past the timeout plus a margin (:func:`overdue`; its worker should have killed the task and answered
by then) is declared lost, so its tasks go back into the bag and it is released.

``--insecure`` (plain TCP, the token alone) is accepted only on loopback endpoints
(:func:`is_loopback`), and the master logs a warning for it.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import zmq
import zmq.auth

from bats.common.atomic import replace_whole, write_beside

from .door import DoorKeeper

log = logging.getLogger(__name__)

PUBLIC_FILE = "master.key"
SECRET_FILE = "master.key_secret"
PRE_HELLO_FRAME_BYTES = 16 * 1024  # a hello, even with a few asks packed behind it, is far smaller
PRE_HELLO_BURST = 8  # frames a connection may send before its hello admits it, all at once
PRE_HELLO_RATE = 1.0  # and then per second (a worker whose seat is not open yet says hello again)
PRE_HELLO_REMEMBERED = 4096  # connections whose budget is kept; the oldest are forgotten
GIVE_BACK_S = 5.0  # how often, at most, freed memory is given back after frames were refused


class KeyFileError(RuntimeError):
    """The key files of a run cannot be written or read; the message names the file."""


@dataclass(frozen=True)
class MasterKeys:
    public: bytes  # Z85, 40 characters
    secret: bytes

    @property
    def public_text(self) -> str:
        return self.public.decode("ascii")


def new_keys() -> MasterKeys:
    public, secret = zmq.curve_keypair()
    return MasterKeys(public, secret)


def _certificate(public: bytes, secret: bytes | None) -> str:
    lines = ["#   ZeroMQ CURVE certificate of a BaTS master (written by bats.master.server.security)", "",
             "metadata", "curve", f'    public-key = "{public.decode("ascii")}"']
    if secret is not None:
        lines.append(f'    secret-key = "{secret.decode("ascii")}"')
    return "\n".join(lines) + "\n"


def save_keys(state_dir: str | Path, keys: MasterKeys) -> None:
    """Write the key files; the secret one is created 0600 and never overwritten. Each appears
    whole or not at all (written beside, then linked or renamed into place): a reader, or a
    ``--resume`` after a crash, never finds half a key."""
    state = Path(state_dir)
    secret_path = state / SECRET_FILE
    try:
        written = write_beside(secret_path, _certificate(keys.public, keys.secret).encode("ascii"), 0o600)
        try:
            os.link(written, secret_path)  # fails if the file exists: never overwritten
        finally:
            written.unlink()
        replace_whole(state / PUBLIC_FILE, _certificate(keys.public, None).encode("ascii"))
    except OSError as exc:
        raise KeyFileError(f"{secret_path}: cannot write the master's key: {exc.strerror or exc}") from None


def load_keys(state_dir: str | Path) -> MasterKeys:
    """The run's key pair, as :func:`save_keys` wrote it; refuses a secret readable by others."""
    path = Path(state_dir) / SECRET_FILE
    try:
        mode = path.stat().st_mode
        public, secret = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as exc:
        raise KeyFileError(f"{path}: cannot read the master's key: {getattr(exc, 'strerror', None) or exc}") from None
    if mode & 0o077:
        raise KeyFileError(f"{path}: the master's secret key is readable by others (mode {mode & 0o777:o}); "
                        "chmod 600 it")
    if secret is None or len(public) != 40 or len(secret) != 40:
        raise KeyFileError(f"{path}: not a CurveZMQ secret key file")
    return MasterKeys(public, secret)


def is_loopback(endpoint: str) -> bool:
    """Whether a ZeroMQ endpoint only listens on this machine: ``tcp://127.x.y.z:…``, ``tcp://[::1]:…``,
    ``tcp://localhost:…``, or ``ipc://`` / ``inproc://``."""
    scheme, _, rest = endpoint.partition("://")
    if scheme in ("ipc", "inproc"):
        return True
    if scheme != "tcp":
        return False
    host = rest.rpartition(":")[0].strip("[]")
    if ";" in host:  # tcp://source;dest: what counts is where it binds
        host = host.rpartition(";")[2]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # an interface name or a wildcard


def secure_router(context: zmq.Context, sock: zmq.Socket, keys: MasterKeys) -> DoorKeeper:
    """Make ``sock`` (not yet bound) a CURVE server with the run's keys, and start the ZAP handler
    that accepts any client key, reports it as each frame's ``User-Id`` and keeps the connections
    without a hello few (:mod:`.door`)."""
    sock.setsockopt(zmq.CURVE_SECRETKEY, keys.secret)
    sock.setsockopt(zmq.CURVE_PUBLICKEY, keys.public)
    sock.setsockopt(zmq.CURVE_SERVER, 1)
    sock.setsockopt(zmq.ZAP_DOMAIN, b"bats")
    keeper = DoorKeeper(context)
    keeper.watch(sock)
    return keeper


class PreHelloBudget:
    """What each connection not admitted yet may send: a token bucket of frames per connection id
    (``PRE_HELLO_BURST`` at once, ``PRE_HELLO_RATE`` a second after that), and no frame larger than
    ``PRE_HELLO_FRAME_BYTES``. :meth:`spend` says why a frame is refused, or None."""

    def __init__(self) -> None:
        self._left: dict[bytes, tuple[float, float]] = {}  # identity -> (frames left, when counted)
        self.refused = 0  # frames refused since memory was last given back
        self._given_back_at = 0.0

    def spend(self, identity: bytes, size: int, now: float) -> str | None:
        if size > PRE_HELLO_FRAME_BYTES:
            self.refused += 1
            return f"frame of {size} bytes before hello (at most {PRE_HELLO_FRAME_BYTES})"
        left, at = self._left.get(identity, (float(PRE_HELLO_BURST), now))
        left = min(float(PRE_HELLO_BURST), left + (now - at) * PRE_HELLO_RATE)
        if identity not in self._left and len(self._left) >= PRE_HELLO_REMEMBERED:
            for old in list(self._left)[:PRE_HELLO_REMEMBERED // 2]:  # insertion order: oldest first
                del self._left[old]
        if left < 1.0:
            self._left[identity] = (left, now)
            self.refused += 1
            return f"more than {PRE_HELLO_BURST} frames before hello"
        self._left[identity] = (left - 1.0, now)
        return None

    def forget(self, identity: bytes) -> None:
        """The connection said a valid hello: its frames are the protocol's to judge now."""
        self._left.pop(identity, None)


    def give_back(self, now: float) -> None:
        """After frames were refused, at most every ``GIVE_BACK_S``: hand the memory the flood left
        free back to the system (glibc's ``malloc_trim``; elsewhere nothing is done). Called from
        the loop's housekeeping, never per frame."""
        if not self.refused or now - self._given_back_at < GIVE_BACK_S:
            return
        self.refused = 0
        self._given_back_at = now
        import ctypes  # here: only a flood gets this far, and importing it costs every run's start

        try:
            ctypes.CDLL(None).malloc_trim(0)
        except (OSError, AttributeError):
            pass


class _Holder(Protocol):
    id: str
    held: list[tuple[int, int]]
    started: list[float]


def overdue(machines: Iterable[_Holder], now: float, task_timeout_s: float, liveness_s: float
            ) -> list[tuple[str, int, float]]:
    """(machine, task, seconds held) for each machine running a task for longer than
    ``task_timeout_s`` plus a margin (the liveness limit and a tenth of the timeout: the worker
    kills a task at its timeout and answers; a machine that has not, by then, will not)."""
    limit = task_timeout_s + liveness_s + task_timeout_s / 10
    found = []
    for machine in machines:
        if machine.started and now - machine.started[0] > limit:
            found.append((machine.id, machine.held[0][0], now - machine.started[0]))
    return found
