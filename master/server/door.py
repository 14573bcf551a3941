"""The door of the master's CurveZMQ socket: how many connections may be open without a hello.

How this works. A ROUTER socket takes every connection that completes the CURVE handshake, and
knowing the master's public key (it is on every worker's command line) is enough for that. Each
connection that has not said hello yet may send little (:class:`.security.PreHelloBudget`), but
libzmq still holds up to ``PEER_RCVHWM`` frames of up to a MiB for each one, so their number has
to be bounded too. :class:`Door` counts them per peer address, from the socket's monitor:
``EVENT_ACCEPTED`` gives a new connection's file descriptor (its peer address is read from it) and
``EVENT_DISCONNECTED`` its end; the master marks a connection admitted (:meth:`Door.admit`) when its
hello is accepted, by the descriptor libzmq reports for that frame (``ZMQ_SRCFD``).

:class:`DoorKeeper` is the ZAP handler (a thread answering on ZAP's ``inproc`` endpoint, RFC 27):
it accepts any CURVE client key and names it, in Z85, as the connection's ``User-Id`` (the master
binds a machine to it). Before a handshake completes it asks the door: past ``PER_ADDRESS``
connections without a hello from the same address, or ``TOTAL`` from everywhere, the handshake is
refused with ZAP's status 300 (a temporary failure: libzmq on the other side tries again after its
reconnect interval, so an honest worker that met a full door gets in once a seat frees).

A refused connection stops counting at once, though its end is seen only later: the count is of
connections still in their handshake or let in. Counting the refused ones too, a burst of more than
``TOTAL`` workers connecting together (a fleet's start) had every handshake refused, and those of
its reconnects, for as long as the burst stayed larger than the door; now the door lets ``TOTAL``
of them in and refuses the rest. A ZAP request names the peer's address, not its port, so which
connection was refused is not known: the refused are counted per address, and any end of a
connection without a hello from that address takes one off. The count may then stay high (never
low) until that address's refused connections are gone; libzmq may keep one until its handshake
times out (``ZMQ_HANDSHAKE_IVL``) before its peer tries again.

A connection that stays ``HELLO_WITHIN_S`` without an admitting hello, or that sent more before its
hello than its budget allows (:meth:`Door.evict`), is shut down under libzmq (``shutdown(2)`` on its
descriptor, after checking that the descriptor still belongs to the same peer address and port):
ZeroMQ has no call that drops one peer of a ROUTER, and this is one. A worker whose connection is
shut down reconnects on its own and says hello again. The client key of a connection shut down for
its budget is refused a new handshake (the same temporary status) for ``PENALTY_S``: libzmq
reconnects with the same key at once, and each reconnect of a flooder made the master decrypt a
fresh burst of large frames (an attacker can make new keys, at its own cost).

With ``--insecure`` there is no ZAP and no door (the master then listens on loopback only).
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass

import zmq
from zmq.utils import z85

log = logging.getLogger(__name__)

PER_ADDRESS = 64  # connections without a hello from one address (workers behind one NAT share one)
TOTAL = 512  # and from all addresses together
PENALTY_S = 2.0  # a client key whose connection was shut down for its budget waits this long
HELLO_WITHIN_S = 30.0  # a connection gets this long to be admitted (a worker waiting for its seat is
# shut down and reconnects: harmless)
_EVENTS = zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED
_ZAP_ENDPOINT = "inproc://zeromq.zap.01"
# a monitor event's first frame: the event (16 bits) and its value (32 bits, here the connection's
# descriptor), as libzmq writes it; read here rather than with zmq.utils.monitor, which imports
# asyncio (tens of milliseconds of every run's start-up)
_MONITOR_EVENT = struct.Struct("=hi")


@dataclass
class _Connection:
    address: str  # the peer's IP address ("" for ipc)
    port: int
    opened: float
    admitted: bool = False


class Door:
    """The open connections by descriptor, and which of them a hello admitted. Thread-safe: the
    keeper's thread feeds the monitor's events and asks :meth:`refuses`; the master's loop calls
    :meth:`admit` and :meth:`evict`."""

    def __init__(self, per_address: int = PER_ADDRESS, total: int = TOTAL) -> None:
        self.per_address, self.total = per_address, total
        self._lock = threading.Lock()
        self._open: dict[int, _Connection] = {}
        self._waiting: dict[str, int] = {}  # address -> connections not admitted
        self._refused: dict[str, int] = {}  # address -> of those, how many were refused a handshake
        self._evict: list[int] = []  # descriptors the master asked to shut down
        self._penalty: dict[str, float] = {}  # client key (Z85) -> until when its handshakes are refused
        self.refused = 0  # handshakes refused so far
        self.shut = 0  # connections shut down so far

    def opened(self, fd: int, address: str, port: int, now: float) -> None:
        with self._lock:
            old = self._open.pop(fd, None)  # a descriptor reused before its end was seen
            if old is not None and not old.admitted:
                self._left(old.address)
                self._forget_refused(old.address)
            self._open[fd] = _Connection(address, port, now)
            self._waiting[address] = self._waiting.get(address, 0) + 1

    def closed(self, fd: int) -> None:
        with self._lock:
            conn = self._open.pop(fd, None)
            if conn is not None and not conn.admitted:
                self._left(conn.address)
                self._forget_refused(conn.address)

    def _forget_refused(self, address: str) -> None:
        """A connection without a hello from ``address`` ended: if some from there were refused, it
        is taken for one of them (a refused one ends soon; taking another instead only keeps the
        count higher until the refused one ends too)."""
        refused = self._refused.get(address, 0)
        if refused > 1:
            self._refused[address] = refused - 1
        elif refused:
            del self._refused[address]

    def _left(self, address: str) -> None:
        left = self._waiting[address] - 1
        if left:
            self._waiting[address] = left
        else:
            del self._waiting[address]

    def admit(self, fd: int) -> None:
        """The connection behind ``fd`` said a hello that admitted it: it no longer counts."""
        with self._lock:
            conn = self._open.get(fd)
            if conn is not None and not conn.admitted:
                conn.admitted = True
                self._left(conn.address)

    def evict(self, fd: int, key: str | None, now: float) -> None:
        """Shut the connection behind ``fd`` down (if it is still one not admitted), from the
        keeper's thread: it spent its budget before a hello. Its client ``key`` waits ``PENALTY_S``."""
        with self._lock:
            conn = self._open.get(fd)
            if conn is not None and not conn.admitted:
                self._evict.append(fd)
                if key:
                    if len(self._penalty) > 4096:  # keys whose wait is over are forgotten
                        self._penalty = {k: t for k, t in self._penalty.items() if t > now}
                    self._penalty[key] = now + PENALTY_S

    def waiting(self, address: str | None = None) -> int:
        with self._lock:
            return self._waiting.get(address, 0) if address is not None else sum(self._waiting.values())

    def refuses(self, address: str, now: float, key: str = "") -> str | None:
        """Why a new handshake from ``address`` with client ``key`` is refused, or None. The
        connection asking is already counted (its ``EVENT_ACCEPTED`` comes before its handshake);
        those refused before it are not (see the module docstring)."""
        with self._lock:
            here = self._waiting.get(address, 0) - self._refused.get(address, 0)
            everywhere = sum(self._waiting.values()) - sum(self._refused.values())
            penalty = self._penalty.get(key)
            if penalty is not None and now < penalty:
                reason = f"a connection with this key from {address} sent past its budget before hello"
            elif here > self.per_address:
                reason = f"more than {self.per_address} connections from {address} without a hello"
            elif everywhere > self.total:
                reason = f"more than {self.total} connections without a hello"
            else:
                return None
            # never more refused than open: a ZAP request whose connection's accept was not seen
            self._refused[address] = min(self._refused.get(address, 0) + 1, self._waiting.get(address, 0))
            if not self._refused[address]:
                del self._refused[address]
            self.refused += 1
            return reason

    def to_shut(self, now: float) -> list[tuple[int, str, int]]:
        """(descriptor, address, port) of the connections to shut down now: those the master
        evicted and those not admitted within ``HELLO_WITHIN_S``."""
        with self._lock:
            fds = set(self._evict)
            self._evict.clear()
            fds.update(fd for fd, conn in self._open.items()
                       if not conn.admitted and now - conn.opened > HELLO_WITHIN_S)
            return [(fd, self._open[fd].address, self._open[fd].port) for fd in fds if fd in self._open]


def _peer(fd: int) -> tuple[str, int] | None:
    """The peer address and port of a descriptor libzmq owns (read through a duplicate)."""
    try:
        with socket.socket(fileno=os.dup(fd)) as sock:
            name = sock.getpeername()
    except OSError:
        return None
    if isinstance(name, tuple):
        return str(name[0]), int(name[1])
    return "", 0  # ipc: a path, or nothing


def _shut(fd: int, address: str, port: int) -> bool:
    """Shut a connection down under libzmq, if ``fd`` still is the same peer's: libzmq sees the end
    of its stream, closes the connection and frees what it held for it."""
    try:
        with socket.socket(fileno=os.dup(fd)) as sock:
            name = sock.getpeername()
            here = (str(name[0]), int(name[1])) if isinstance(name, tuple) else ("", 0)
            if here != (address, port) or not address:
                return False
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        return False
    return True


class DoorKeeper(threading.Thread):
    """The ZAP handler and the reader of the ROUTER's monitor (see the module docstring). Call
    :meth:`watch` with the ROUTER before it is bound, :meth:`stop` after it is closed."""

    POLL_MS = 20  # how soon a connection the master evicted is shut down

    def __init__(self, context: zmq.Context, door: Door | None = None) -> None:
        super().__init__(name="bats-door", daemon=True)
        self.context = context
        self.door = door if door is not None else Door()
        self._monitor_endpoint = f"inproc://bats.door.{id(self):x}"
        self._ready = threading.Event()
        self._stopping = threading.Event()
        self._failed: BaseException | None = None
        self._wake_r, self._wake_w = os.pipe()  # stop() wakes the thread's poll at once through it

    def watch(self, router: zmq.Socket) -> None:
        """Start the monitor of ``router`` and the thread, and wait until it answers ZAP requests."""
        router.monitor(self._monitor_endpoint, _EVENTS)
        self.start()
        self._ready.wait(10)
        if self._failed is not None:
            raise self._failed

    def stop(self) -> None:
        self._stopping.set()
        try:
            os.write(self._wake_w, b"\0")
        except OSError:  # stopped twice: the pipe is closed already
            pass
        if self.is_alive():
            self.join(timeout=5)
        if self.is_alive():  # still in its poll: its pipe stays open
            return
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._wake_r = self._wake_w = -1

    def run(self) -> None:
        try:
            zap = self.context.socket(zmq.REP)
            zap.setsockopt(zmq.LINGER, 0)
            zap.bind(_ZAP_ENDPOINT)
            monitor = self.context.socket(zmq.PAIR)
            monitor.setsockopt(zmq.RCVHWM, 0)  # no event lost: a lost end would count forever
            monitor.connect(self._monitor_endpoint)
        except BaseException as exc:  # the master's start-up reports it
            self._failed = exc
            self._ready.set()
            return
        poller = zmq.Poller()
        poller.register(zap, zmq.POLLIN)
        poller.register(monitor, zmq.POLLIN)
        poller.register(self._wake_r, zmq.POLLIN)
        self._ready.set()
        try:
            while not self._stopping.is_set():
                events = dict(poller.poll(self.POLL_MS))
                if monitor in events:
                    self._events(monitor)
                if zap in events:
                    self._events(monitor)  # connections accepted before this handshake count
                    zap.send_multipart(self._answer(zap.recv_multipart()))
                for fd, address, port in self.door.to_shut(time.monotonic()):
                    if _shut(fd, address, port):
                        self.door.shut += 1
                        if self.door.shut <= 10 or self.door.shut % 1000 == 0:
                            log.warning("connection from %s:%d shut down: no hello within its budget "
                                        "(%d shut so far)", address, port, self.door.shut)
        finally:
            monitor.close(linger=0)
            zap.close(linger=0)

    def _events(self, monitor: zmq.Socket) -> None:
        while True:
            try:
                frames = monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) != 2 or len(frames[0]) != _MONITOR_EVENT.size:
                continue  # not libzmq's event format: nothing to count
            event, fd = _MONITOR_EVENT.unpack(frames[0])
            if event == zmq.EVENT_ACCEPTED:
                peer = _peer(fd)
                if peer is not None:
                    self.door.opened(fd, peer[0], peer[1], time.monotonic())
            elif event == zmq.EVENT_DISCONNECTED:
                self.door.closed(fd)

    def _answer(self, request: list[bytes]) -> list[bytes]:
        """The reply to a ZAP request (version, id, domain, address, identity, mechanism, key)."""
        if len(request) < 7 or request[0] != b"1.0" or request[5] != b"CURVE" or len(request[6]) != 32:
            return [b"1.0", request[1] if len(request) > 1 else b"", b"400", b"only CURVE is spoken here", b"", b""]
        address = request[3].decode("ascii", "replace")
        key = z85.encode(request[6]).decode("ascii")
        reason = self.door.refuses(address, time.monotonic(), key)
        if reason is not None:
            if self.door.refused <= 10 or self.door.refused % 1000 == 0:
                log.warning("handshake refused: %s (%d refused so far)", reason, self.door.refused)
            return [b"1.0", request[1], b"300", reason.encode()[:200], b"", b""]
        return [b"1.0", request[1], b"200", b"OK", key.encode("ascii"), b""]
