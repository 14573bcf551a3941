"""The real-time driver: a ZeroMQ ROUTER socket, provisioner plugins and the journal around the core.

How this works. One thread, one loop: poll the ROUTER socket, decode and validate each frame
(:mod:`bats.common.protocol`), turn it into a core event stamped with ``clock.now()``, and carry out
the actions the core answers with: send a task, ask a provisioner for machines or give them back,
journal a result. Every ``TICK_S`` the loop also commits the journal, sends heartbeats, declares
workers lost that were silent past the liveness limit or whose process the provisioner reports
gone, and lets the core check boot timeouts. A frame that fails validation, comes from a peer that
never said hello, or carries a bad token is logged and dropped; it never changes state.

Cloud hooks (see :mod:`bats.provisioners.base`): a provisioner with a ``price_poll_s`` is asked for
its cluster's price that often (and once before the run starts); a price that differs from the
core's is fed as ``PriceChanged``, next to the CSV traces of emulated spot markets. A worker's
``interruption`` (a spot interruption notice) makes its machine lost at once, so the core re-queues
its tasks, and the machine is given back before the cloud takes it. After every acquisition, a
provisioner's ``usable_max`` below the cluster's ``max`` lowers the ``max`` the core plans with.

No dollar goes unrecorded. Before an acquisition is asked for, its intent (cluster, count, time) is
committed to the journal (meta ``acquiring``); it is removed, in the same commit as the machines
it brought or later, only once no attempt of it can still answer. A ``--resume`` (or
``bats-master cleanup``) that finds a machine of this run the journal never heard of bills it
from its intent's time (:mod:`bats.master.state.leftovers`). A machine that comes after its acquisition
was given up on is fed to the core as ``MachineCameLate``: charged, journaled, released.

Provisioner calls (acquire, release, status) never run on this thread: :mod:`bats.master.server.calls`
runs them on daemon threads with a timeout and retries with backoff, one call of each kind at a
time per provisioner (never two acquisitions at once), and the loop picks up their
outcomes every tick, so a failing or hanging back end never holds up dispatch. At the end
(:meth:`Fleet.shutdown` in :mod:`.fleet`, also after SIGTERM/Ctrl-C, and after a second signal without waiting
for the run to stop) every machine still held is released, the master waits up to
``SHUTDOWN_WAIT_S`` for the releases, and logs which machines were released, which were kept
(``--keep-machines``) and which could not be released.
"""

from __future__ import annotations

import hmac
import logging
import signal
import time
from collections.abc import Callable
from typing import cast

import zmq

from bats.common import clock
from bats.common.config import Config
from bats.common.protocol import (
    MAX_FRAME_BYTES,
    OUTPUT_TAIL_BYTES,
    WORKER_TYPES,
    ProtocolError,
    decode_all,
    decode_first,
    encode,
    encode_task,
    frames,
)
from bats.provisioners.base import MachineHandle, Provisioner

from .. import core as c
from ..choosing import Chooser, RaiseBudget, StopRun
from ..core.offers.compose import Offer
from ..core.view import OFFERING
from ..driver import Driver, carries_out
from ..state.bag import Bag
from ..state.events import EventLog
from ..state.journal import Journal, JournalError
from .door import Door, DoorKeeper
from .fleet import Fleet
from .peer import Peer
from .records import PlanRecords
from .security import MasterKeys, PreHelloBudget, overdue, secure_router

log = logging.getLogger(__name__)
progress = logging.getLogger("bats.progress")

TICK_S = 0.2  # loop housekeeping period: journal commit, liveness, heartbeats
STATUS_POLL_S = 1.0  # how often provisioners are asked about their machines
MACHINE_SNAPSHOT_S = 2.0  # how often live machines' uptime is journaled (cost survives a crash)
DRAIN_BATCH = 2000  # frames handled before housekeeping gets a turn ...
DRAIN_BATCH_S = 0.05  # ... or seconds spent on them, whichever comes first: heartbeats and liveness
# keep their period however slow a frame is to handle (each is then late by at most this much)
# An unadmitted peer (no valid hello yet) gets at most one reply per this many seconds, and one
# dropped message per frame is looked at: what such a peer can make the master hold or send is bounded
UNADMITTED_REPLY_S = 1.0
# dropped frames: the first ones are logged one by one, then one line per this many seconds at most,
# so a peer that floods the master cannot flood the operator's log (or a pipe nobody reads) as well
DROPS_LOGGED = 100
DROP_SUMMARY_S = 10.0
UNADMITTED_REMEMBERED = 4096  # identities whose last reply time is kept; the oldest are forgotten
# per-peer queue limits sized to the protocol: a worker holds at most 16 tasks, the master answers each
# peer with one frame per drain batch, so an honest peer never has more than a few dozen frames queued
PEER_HWM = 1000
# frames libzmq holds per connection before the master reads them: each may be up to a MiB, so this
# bounds what one connection that never says hello makes the master hold (an honest worker's sends
# wait in its own queue meanwhile)
PEER_RCVHWM = 16
# plain ints: pyzmq's flag enums cost an enum construction per ``|`` on the hot path
_NOBLOCK = int(zmq.NOBLOCK)
_SNDMORE_NOBLOCK = int(zmq.SNDMORE) | int(zmq.NOBLOCK)
_RCVMORE = int(zmq.RCVMORE)


class Server(Driver):
    """Runs one session of a bag: see the module docstring."""

    def __init__(
        self,
        core: c.Core,
        bag: Bag,
        config: Config,
        journal: Journal,
        provisioners: dict[str, Provisioner],
        socket: zmq.Socket,
        session: int,
        task_timeout_s: float | None = None,
        on_tick: Callable[[Server], None] | None = None,
        chooser: Chooser | None = None,
        secure: bool = False,
        keep_machines: bool = False,
        door: Door | None = None,
        events: EventLog | None = None,
    ) -> None:
        self.core = core
        self.events = events  # every event fed to the core and its answer, for bats-sim --replay
        self.bag = bag
        self.config = config
        self.journal = journal
        self.socket = socket
        self.session = session
        self.task_timeout_s = task_timeout_s
        self.on_tick = on_tick
        self.chooser = chooser
        self._plan_journaled = False
        self._records = PlanRecords()  # the options, the choice and the sample, for the reports
        self.peers: dict[bytes, Peer] = {}  # zmq identity -> peer
        self.peer_of: dict[str, Peer] = {}  # machine id -> its current peer
        self.finish: c.Finish | None = None
        self.stop_reason: str | None = None
        self.dropped_frames = 0
        self._drops_logged_at = (0, 0.0)  # (dropped_frames, monotonic time) at the last summary line
        # CurveZMQ: each machine is bound to the client key of the first connection that presented
        # its token; a hello from another key is refused (see bats.master.server.security)
        self.secure = secure
        self.bound_keys: dict[str, str] = {}
        self._frame_key: str | None = None  # client key of the frame being handled (secure)
        self._frame: zmq.Frame | None = None  # and the frame itself (libzmq says which connection sent it)
        self.door = door  # connections without a hello, counted and capped (secure; see .door)
        self.keep_machines = keep_machines  # on a stop by signal, leave machines running
        # hellos with a token the provisioner issued that came before their acquisition returned
        self._early: dict[str, tuple[bytes, dict, str | None]] = {}
        self._replied: dict[bytes, float] = {}  # unadmitted identity -> when it was last answered
        self._pre_hello = PreHelloBudget()  # what a connection may send before a hello admits it
        self.fleet = Fleet(self, provisioners)  # the provisioner side: acquisitions, releases, polls
        self._price_feed: list[tuple[float, str, float]] = []  # spot price traces: (time, cluster, price)
        self._outbox: dict[bytes, list[bytes]] | None = None  # per peer, while draining
        Driver.__init__(self)

    # ------------------------------------------------------------ the loop
    def run(self) -> c.Finish:
        """Run until the core finishes; returns its :class:`~bats.master.core.base.Finish`."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.fleet.poll_prices(clock.now(), time.monotonic())  # the clouds' prices before anything is bought
            started = clock.now()
            self._feed(c.RunStarted(started))
            # spot price traces (emulation): (time, cluster, price), fed as they come due
            self._price_feed = sorted((started + offset, name, price)
                                      for name, cl in self.config.clusters.items() if cl.price_trace is not None
                                      for offset, price in zip(cl.price_trace.offsets, cl.price_trace.prices))
            # Waiting happens inside libzmq: a blocking receive that gives up after a tick. That is
            # cheaper per wake-up than a Python-level poller (measured: about 1.2x the throughput).
            self.socket.setsockopt(zmq.RCVTIMEO, int(TICK_S * 1000))
            next_tick = time.monotonic()
            timers = {"status": 0.0, "snapshot": 0.0, "heartbeat": 0.0}
            while self.finish is None:
                if self.stop_reason is not None:
                    self._feed(c.StopRequested(clock.now(), self.stop_reason))
                    break
                self._drain()
                mono = time.monotonic()
                if mono >= next_tick:
                    next_tick = mono + TICK_S
                    self._housekeeping(mono, timers)
        except KeyboardInterrupt:  # a second signal: stop now, but still give every machine back
            log.warning("stopping at once; releasing machines")
            if self.finish is None:
                self.finish = c.Finish("incomplete", self.stop_reason or "interrupted")
        self._records.update(self.core, self.journal, self.session, self.chooser, clock.now())
        try:
            self.fleet.shutdown()
        finally:  # the handlers stay while machines are given back: a third signal does not cut that short
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        assert self.finish is not None
        return self.finish

    def _on_signal(self, signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        if self.fleet.shutting_down:
            log.warning("%s: already stopping; still giving machines back", name)
            return
        if self.stop_reason is not None:
            raise KeyboardInterrupt  # a second signal: stop waiting politely
        self.stop_reason = f"stopped by {name}"
        log.warning("%s: stopping; machines will be %s", name,
                    "kept running (--keep-machines)" if self.keep_machines else "released")

    def _drain(self) -> None:
        """Wait up to a tick for a frame, handle it and every frame already waiting (up to a batch of
        ``DRAIN_BATCH`` frames or ``DRAIN_BATCH_S`` seconds), then send the replies: one frame per
        peer holding all its messages of the batch (split at the protocol's limits), so a burst of
        short tasks costs one ZeroMQ message instead of one each."""
        sock = self.socket
        recv, more = sock.recv, sock.getsockopt
        secure, peers = self.secure, self.peers
        outbox: dict[bytes, list[bytes]] = {}
        self._outbox = outbox
        flags = 0  # the first receive blocks (up to RCVTIMEO); the rest take only what is there
        monotonic = time.monotonic
        until = 0.0
        try:
            for _ in range(DRAIN_BATCH):
                try:
                    identity = recv(flags)
                except zmq.Again:
                    break
                if not flags:
                    flags = _NOBLOCK
                    until = monotonic() + DRAIN_BATCH_S
                if secure:  # every frame carries its connection's client key (the ZAP User-Id)
                    body = recv(_NOBLOCK, copy=False)
                    key = self._frame_key = cast(str | None, body.get("User-Id"))
                    self._frame = body
                    parts = [identity, body.bytes]
                    peer = peers.get(identity)
                    if peer is not None and peer.key != key:
                        self._impostor(peer)
                else:
                    parts = [identity, recv(_NOBLOCK)]  # a ROUTER message always has a body after the identity
                while more(_RCVMORE):
                    parts.append(recv(_NOBLOCK))
                self._on_frame(parts)
                if self.finish is not None or monotonic() >= until:
                    break
        finally:
            self._outbox = None
            send = sock.send
            for identity, messages in outbox.items():
                # all of a peer's messages of this batch in as few frames as its limits allow
                for frame in frames(messages):
                    try:
                        send(identity, _SNDMORE_NOBLOCK)
                        send(frame, _NOBLOCK)
                    except zmq.Again:
                        log.warning("send queue full for peer %s; frame dropped", identity.hex())

    def _feed(self, event: c.Event) -> None:
        """Hand an event to the core and carry out its actions at once (an action may feed more
        events, e.g. an acquisition feeds ``MachineAcquired``; those are handled depth-first)."""
        actions = self.handle(event)  # the base driver times the planning step
        if self.events is not None:
            self.events.record(event, actions)
        self.carry_out(actions)

    # ------------------------------------------------------------ frames in
    def _drop(self, peer: str, reason: str) -> None:
        self.dropped_frames += 1
        if self.dropped_frames <= DROPS_LOGGED:
            log.warning("dropped frame from %s: %s (%d dropped so far)", peer, reason, self.dropped_frames)
            self._drops_logged_at = (self.dropped_frames, time.monotonic())
            return
        count, at = self._drops_logged_at
        now = time.monotonic()
        if now - at >= DROP_SUMMARY_S:
            log.warning("dropped %d more frame(s) in %.0f s, the last from %s: %s (%d dropped so far)",
                        self.dropped_frames - count, now - at, peer, reason, self.dropped_frames)
            self._drops_logged_at = (self.dropped_frames, now)

    def _on_frame(self, parts: list[bytes]) -> None:
        identity = parts[0]
        if len(parts) != 2:
            peer = self.peers.get(identity)
            self._drop(peer.machine if peer else f"peer {identity.hex()}", f"expected 1 frame, got {len(parts) - 1}")
            return
        peer = self.peers.get(identity)
        if peer is None:
            refused = self._pre_hello.spend(identity, len(parts[1]), time.monotonic())
            if refused:  # dropped unread: past the connection's small budget before its hello
                self._drop(f"peer {identity.hex()}", refused)
                self._door_says("evict")  # and its connection shut down
                return
        mono = time.monotonic()  # when the frame came: its messages' peer was last seen then
        try:
            if peer is None:  # not admitted: one message is read, the rest only once a hello admits it
                first, more = decode_first(parts[1], WORKER_TYPES)
                if not self._on_message(identity, first, mono) or not more:
                    return
                messages = decode_all(parts[1], WORKER_TYPES)[1:]
            else:
                messages = decode_all(parts[1], WORKER_TYPES)
        except ProtocolError as exc:
            self._drop(peer.machine if peer else f"peer {identity.hex()}", str(exc))
            return
        on_message = self._on_message
        for msg in messages:
            if not on_message(identity, msg, mono):
                break  # the peer was refused or forgotten: the rest of its frame is not looked at

    def _on_message(self, identity: bytes, msg: dict, mono: float) -> bool:
        """Handle one message of a frame that came at ``mono`` (``time.monotonic()``); False when its
        peer is not admitted and the rest of its frame is dropped unread (one hello per frame is
        looked at, at most). Each event is stamped when it is fed (``clock.now()``), so the core's
        time never runs back even when handling one message feeds it others."""
        kind = msg["type"]
        if kind == "hello":
            return self._on_hello(identity, msg)
        peer = self.peers.get(identity)  # looked up per message: a hello earlier in the frame counts
        if peer is None:
            if kind == "bye":  # a worker the master released (and forgot) saying goodbye
                log.debug("bye from released peer %s", identity.hex())
                return False
            self._drop(f"peer {identity.hex()}", f"{kind} before hello")
            self._answer_unadmitted(identity, encode("unknown"))
            return False
        peer.last_seen = mono
        if kind == "result":
            now = clock.now()
            runtime_s = float(msg["runtime_s"])
            if runtime_s > 1.0:  # at most 1 s always passes (see _believable_runtime)
                runtime_s = self._believable_runtime(peer.machine, runtime_s, now)
            out, err = msg["stdout"], msg["stderr"]
            if type(out) is not bytes or len(out) > OUTPUT_TAIL_BYTES:
                out = _tail(out)
            if type(err) is not bytes or len(err) > OUTPUT_TAIL_BYTES:
                err = _tail(err)
            self._feed(c.TaskFinished(now, peer.machine, msg["task"], msg["attempt"], msg["exit_code"], runtime_s,
                                      msg["timed_out"], msg["ask"], out, err))
        elif kind == "ask":
            self._feed(c.WorkerAsked(clock.now(), peer.machine, msg["n"]))
        elif kind == "bye":  # it left on its own (a signal, its shell missing): the machine is no use, let it go
            reason = f"worker left ({msg['reason']})"
            log.warning("%s: %s; its tasks go back into the bag", peer.machine, reason)
            self._forget(peer)
            self.fleet.lose(peer.machine, reason, clock.now())
        elif kind == "interruption":  # the cloud takes the machine soon: its tasks go elsewhere now
            reason = f"spot interruption notice ({msg['action'][:20]} at {msg['time'][:40]})"
            log.warning("%s: %s; its tasks go back into the bag", peer.machine, reason)
            self._send(peer.identity, encode("stop", reason=reason))
            self._forget(peer)
            self.fleet.lose(peer.machine, reason, clock.now())
        # heartbeat: last_seen is all it updates
        return True

    def _answer_unadmitted(self, identity: bytes, frame: bytes) -> None:
        """Reply to a peer that is not admitted, at most once per ``UNADMITTED_REPLY_S``: a peer that
        sends and never reads must not grow the master's send queues with answers."""
        now = time.monotonic()
        last = self._replied.get(identity)
        if last is not None and now - last < UNADMITTED_REPLY_S:
            return
        if len(self._replied) >= UNADMITTED_REMEMBERED:
            for old in list(self._replied)[:UNADMITTED_REMEMBERED // 2]:  # insertion order: oldest first
                del self._replied[old]
        self._replied.pop(identity, None)
        self._replied[identity] = now
        self._send(identity, frame)

    def _believable_runtime(self, machine_id: str, runtime_s: float, now: float) -> float:
        """A worker's runtime, at most the time its machine has been up: a peer's number does not
        enter the estimates (and the plan) past what the master itself has seen."""
        machine = self.core.machines.get(machine_id)
        if machine is None:
            return runtime_s
        limit = machine.uptime(now) + 1.0  # the worker's and the master's clocks start apart
        if runtime_s > limit:
            log.warning("%s reported a runtime of %.0fs after %.0fs up; counted as %.0fs",
                        machine_id, runtime_s, limit - 1.0, limit)
            return limit
        return runtime_s

    def _on_hello(self, identity: bytes, msg: dict, key: str | None = None) -> bool:
        """Admit a worker, or hold its hello until the acquisition that started it returns, or refuse
        it. True when the peer is admitted (or held): the rest of its frame is then read."""
        machine_id = msg["machine"]
        handle = self.fleet.handles.get(machine_id)
        from_frame = key is None  # not a held hello answered later (its connection was admitted then)
        if self.secure and key is None:
            key = self._frame_key
        if handle is None and self._issued(msg):
            self.fleet.collect_calls()  # the acquisition that started this worker may have just returned
            handle = self.fleet.handles.get(machine_id)
            if handle is None and self.fleet.calls.busy("acquire", msg["cluster"]):
                return self._hold_early(identity, msg, key)
        if (handle is None or msg["cluster"] != handle.cluster
                or not hmac.compare_digest(msg["token"].encode(), handle.token.encode())):
            handle = self._join(msg)  # a worker started by hand (manual) may take a seat
        if handle is None:
            if self._may_join(msg):  # a worker started by hand before its seat opened: it says hello again
                self._answer_unadmitted(identity, encode("wait"))
                return False
            self._drop(f"peer {identity.hex()}", f"hello from unknown machine {machine_id!r} or bad token")
            self._answer_unadmitted(identity, encode("stop", reason="unknown machine or bad token"))
            return False
        machine_id = handle.machine_id  # a worker started by hand is known by the seat it took
        if self.secure:
            if identity[:1] == b"\0":  # ROUTER-assigned ids are predictable: see _impostor
                self._drop(f"peer {identity.hex()}", f"hello for {machine_id} from a connection without a random id")
                self._answer_unadmitted(identity, encode("stop", reason="connect with a random routing id (bats-worker does)"))
                return False
            if not key or self.bound_keys.setdefault(machine_id, key) != key:
                # no client key, or the token was first used by a connection with another key
                self._drop(f"peer {identity.hex()}", f"hello for {machine_id} from a second client key; "
                           "its token is bound to the connection that used it first")
                self._answer_unadmitted(identity, encode("stop", reason="token already used by another connection"))
                return False
        machine = self.core.machines.get(machine_id)
        if machine is None or machine.state is c.MachineState.GONE:
            self._send(identity, encode("stop", reason="machine is no longer part of the run"))
            return False
        old = self.peer_of.get(machine_id)
        if old is not None:
            self.peers.pop(old.identity, None)
        peer = Peer(machine_id, identity, time.monotonic(), key)
        self.peers[identity] = peer
        self._pre_hello.forget(identity)
        if from_frame:
            self._door_says("admit")
        self.peer_of[machine_id] = peer
        slots = self.core.clusters[machine.cluster].slots_for(msg["cpus"])
        log.info("%s joined from %s (%d cpus, %d slot(s), worker %s)", machine_id, msg["host"], msg["cpus"], slots,
                 msg["version"])
        self._send(identity, encode("welcome", machine=machine_id, heartbeat_s=self.config.master.heartbeat_s,
                                    liveness_s=self.config.master.liveness_s,
                                    prefetch=self.config.master.worker_capacity - 1, slots=slots,
                                    shell=self.config.master.shell))
        self._feed(c.MachineUp(clock.now(), machine_id, slots))
        return True

    def _issued(self, msg: dict) -> bool:
        """Whether a hello's machine id and token are ones its cluster's provisioner issued (checked
        before the acquisition returns: a peer cannot make a held hello up)."""
        provisioner = self.fleet.provisioners.get(msg["cluster"])
        token = provisioner.issued_token(msg["machine"]) if provisioner is not None else None
        return token is not None and hmac.compare_digest(msg["token"].encode(), token.encode())

    def _hold_early(self, identity: bytes, msg: dict, key: str | None) -> bool:
        """Keep a valid hello whose acquisition has not returned; it is answered when it has. Only
        the connection that presented the token first is kept (its reconnects replace it)."""
        held = self._early.get(msg["machine"])
        if held is not None and self.secure and held[2] != key:
            self._drop(f"peer {identity.hex()}", f"hello for {msg['machine']} from a second client key")
            self._answer_unadmitted(identity, encode("stop", reason="token already used by another connection"))
            return False
        self._early[msg["machine"]] = (identity, msg, key)
        self._door_says("admit")  # its token is one the provisioner issued
        return True

    def _door_says(self, what: str) -> None:
        """Tell the door that the connection of the frame being handled is admitted, or is to be
        shut down (see :mod:`.door`)."""
        if self.door is None or self._frame is None:
            return
        fd = self._frame.get(zmq.SRCFD)
        if fd >= 0:
            if what == "admit":
                self.door.admit(fd)
            else:
                self.door.evict(fd, self._frame_key, time.monotonic())

    def _join(self, msg: dict) -> MachineHandle | None:
        """A worker no provisioner started (``manual``): its cluster's provisioner may seat it in one
        of the machines it was asked for."""
        provisioner = self.fleet.provisioners.get(msg["cluster"])
        if provisioner is None:
            return None
        try:
            handle = provisioner.join(msg["machine"], msg["token"])
        except Exception as exc:  # a plugin's failure must not take the master down
            log.error("cluster %s: join of %r failed: %s", msg["cluster"], msg["machine"], exc)
            return None
        return handle if handle is not None and self.fleet.handles.get(handle.machine_id) is handle else None

    def _may_join(self, msg: dict) -> bool:
        provisioner = self.fleet.provisioners.get(msg["cluster"])
        try:
            return provisioner is not None and provisioner.may_join(msg["token"])
        except Exception as exc:  # a plugin's failure must not take the master down
            log.error("cluster %s: join check of %r failed: %s", msg["cluster"], msg["machine"], exc)
            return False

    def _impostor(self, peer: Peer) -> None:
        """A frame from a known peer's identity but another client key: a new connection took the
        identity of one that dropped (libzmq's own ids are predictable; bats-worker picks a random
        one, and hellos from the predictable ones are refused). Nothing more goes to that identity:
        the real worker reconnects and says hello again with its own key."""
        log.warning("%s: a connection with another client key took its connection id; forgetting it",
                    peer.machine)
        self._forget(peer)

    def _forget(self, peer: Peer) -> None:
        self.peers.pop(peer.identity, None)
        if self.peer_of.get(peer.machine) is peer:
            del self.peer_of[peer.machine]

    # ------------------------------------------------------------ actions out
    def _send(self, identity: bytes, frame: bytes) -> None:
        if self._outbox is not None:  # inside _drain: sent at the end of the batch
            self._outbox.setdefault(identity, []).append(frame)
            return
        try:
            self.socket.send(identity, _SNDMORE_NOBLOCK)
            self.socket.send(frame, _NOBLOCK)
        except zmq.Again:
            log.warning("send queue full for peer %s; frame dropped", identity.hex())

    @carries_out(c.Acquire)
    def _do_acquire(self, action: c.Acquire) -> None:
        self.fleet.acquire(action)

    @carries_out(c.Release)
    def _do_release(self, action: c.Release) -> None:
        self.fleet.release(action)

    @carries_out(c.Dispatch)
    def _do_dispatch(self, action: c.Dispatch) -> None:
        peer = self.peer_of.get(action.machine)
        if peer is None:  # cannot happen: the core dispatches only to machines that asked
            log.error("dispatch of task %d to %s, which is not connected", action.task, action.machine)
            return
        self._send(peer.identity, encode_task(action.task, action.attempt, self.bag.command(action.task),
                                              self.task_timeout_s))

    @carries_out(c.Cancel)
    def _do_cancel(self, action: c.Cancel) -> None:
        """Another copy of the task ended first: the worker stops this attempt and asks again."""
        peer = self.peer_of.get(action.machine)
        log.info("stopping task %d (attempt %d) on %s: %s", action.task, action.attempt, action.machine,
                 action.reason)
        if peer is not None:  # a worker gone meanwhile has nothing to stop; its late result is ignored
            self._send(peer.identity, encode("cancel", task=action.task, attempt=action.attempt))

    @carries_out(c.RecordResult)
    def _do_record(self, action: c.RecordResult) -> None:
        self.journal.record_result(
            action.task, action.status, action.exit_code, action.runtime_s, action.machine,
            action.attempts, action.timed_out, action.stdout, action.stderr, clock.now(),
        )
        if action.status == "failed":
            log.info("task %d failed on %s (exit %d%s)", action.task, action.machine, action.exit_code,
                     ", timed out" if action.timed_out else "")

    @carries_out(c.IgnoreResult)
    def _do_ignore(self, action: c.IgnoreResult) -> None:
        log.info("ignored result of task %d from %s: %s", action.task, action.machine, action.reason)

    @carries_out(c.Finish)
    def _do_finish(self, action: c.Finish) -> None:
        self.finish = action

    @carries_out(c.OfferOptions)
    def _do_offer(self, action: c.OfferOptions) -> None:
        """Sampling is over: record the options, let the chooser answer (now, or on a later tick)."""
        self.journal.set_meta("options_offered_at", clock.now())
        if action.samples and "sample" not in self.journal.meta:  # a resumed run keeps the first one
            view = self.core.view()
            self.journal.set_meta("sample", {"session": self.session, "cost": view.sampling_cost or 0.0,
                                             "sets": {name: list(v) for name, v in action.samples.items()}})
        self._checkpoint()  # the end of sampling: what it learned is safe even without the WAL
        if self.chooser is None:
            self.stop_reason = "options offered but nobody can choose"
            return
        self.chooser.offer(self.core, action)
        self._take_choice()

    def _take_choice(self) -> None:
        if self.chooser is None or self.core.view().phase != OFFERING:
            return
        answer = self.chooser.poll(self.core)
        if answer is None:
            return
        if isinstance(answer, StopRun):
            if self.stop_reason is None:
                self.stop_reason = answer.reason
            return
        self._feed(c.ScheduleChosen(clock.now(), answer.option, answer.cushion_accepted))

    def _journal_plan(self) -> None:
        """Once a plan is being executed, journal its budget, so that ``--resume`` goes on with
        the money left instead of sampling and asking again."""
        view = self.core.view()
        selected = view.selected
        if selected is None or self._plan_journaled:
            return
        self._plan_journaled = True
        self.journal.set_meta("plan", {
            "option": selected.id, "label": selected.label, "machines": selected.machines,
            "budget": view.budget, "cushion": view.cushion, "cushion_accepted": view.cushion_accepted,
            "sampling_cost": view.sampling_cost, "implicit": view.budget_up_front,
            "session": self.session,
        })
        self._checkpoint()  # a phase change: the plan and every result so far go into the main file

    def _checkpoint(self) -> None:
        try:
            self.journal.checkpoint()
        except JournalError as exc:  # the next flush says it again, and keeps the rows until it works
            log.warning("journal checkpoint: %s", exc)

    @carries_out(c.WakeAt)
    def _do_wake(self, action: c.WakeAt) -> None:
        pass  # the loop ticks every TICK_S; the release margin is longer than that

    @carries_out(c.Notify)
    def _do_notify(self, action: c.Notify) -> None:
        if action.warning:
            log.warning("%s", action.message)
        else:
            progress.info("%s", action.message)  # the plan, re-plans: routine, shown unless --quiet

    @carries_out(c.WarnShort)
    def _do_warn_short(self, action: c.WarnShort) -> None:
        """The early warning: said in the log (the live view, ``status`` and the report read it from
        the core), then asked of the chooser (on a terminal, the operator; else ``--when-short``)."""
        log.warning("%s", action.message)
        if self.chooser is not None:
            self.chooser.warn_short(action)
            self._take_short()

    def _take_short(self) -> None:
        if self.chooser is None or self.core.finished is not None:
            return
        answered, answer = self.chooser.poll_short()
        if not answered:
            return
        if isinstance(answer, StopRun):
            self._feed(c.StopRequested(clock.now(), answer.reason))
        elif isinstance(answer, RaiseBudget):
            self._feed(c.BudgetRaised(clock.now(), answer.amount))

    @carries_out(c.AskOffers)
    def _do_ask_offers(self, action: c.AskOffers) -> None:
        """Seed 002 steps 1-3: every cluster's provisioner offers (or not); the core composes."""
        offers: list[Offer] = []
        for name, provisioner in self.fleet.provisioners.items():
            try:
                made = provisioner.offers(action.tasks, action.task_runtime_s, action.deadline_s)
            except Exception as exc:  # a pool that cannot answer makes no offer; the others still may
                log.warning("cluster %s: no offers (%s)", name, exc)
                continue
            for tasks, completion in made or ():
                offers.append(Offer(name, int(tasks), float(completion)))
        log.info("offers: %s", ", ".join(f"{o.pool} {o.tasks} in {o.completion:.0f}s" for o in offers) or "none")
        self._feed(c.OffersMade(clock.now(), tuple(offers)))

    # ------------------------------------------------------------ housekeeping
    def _housekeeping(self, mono: float, timers: dict[str, float]) -> None:
        master = self.config.master
        self.fleet.collect_calls()
        self._pre_hello.give_back(mono)
        now = clock.now()
        for peer in list(self.peers.values()):
            silent = mono - peer.last_seen
            if silent > master.liveness_s:
                log.warning("%s silent for %.0fs: declared lost", peer.machine, silent)
                self._forget(peer)
                self.fleet.lose(peer.machine, f"silent for {silent:.0f}s", now)
        if self.task_timeout_s is not None:  # a machine that holds tasks and never answers lets them go
            for machine_id, task, held in overdue(self.core.live_machines(), now, self.task_timeout_s,
                                                  master.liveness_s):
                reason = f"held task {task} for {held:.0f}s, past --task-timeout {self.task_timeout_s:g}s"
                log.warning("%s %s: declared lost; its tasks go back into the bag", machine_id, reason)
                holder = self.peer_of.get(machine_id)
                if holder is not None:
                    self._send(holder.identity, encode("stop", reason="held a task past the task timeout"))
                    self._forget(holder)
                self.fleet.lose(machine_id, reason, now)
        if mono - timers["status"] >= STATUS_POLL_S:
            timers["status"] = mono
            self.fleet.poll_provisioners(now)
        if mono - timers["heartbeat"] >= master.heartbeat_s:
            timers["heartbeat"] = mono
            beat = encode("heartbeat")
            for peer in self.peers.values():
                self._send(peer.identity, beat)
        while self._price_feed and self._price_feed[0][0] <= now:
            _at, cluster, price = self._price_feed.pop(0)
            log.warning("cluster %s: price per ATU is now %g", cluster, price)
            self._feed(c.PriceChanged(now, cluster, price))
        self.fleet.poll_prices(now, mono)
        self._feed(c.Tick(now))
        self._take_choice()
        self._take_short()
        self._journal_plan()
        self._records.update(self.core, self.journal, self.session, self.chooser, now)
        if mono - timers["snapshot"] >= MACHINE_SNAPSHOT_S:
            timers["snapshot"] = mono
            for machine in self.core.live_machines():
                self._journal_machine(machine, now)
        self._flush_journal()
        if self.on_tick is not None:
            self.on_tick(self)

    def _flush_journal(self) -> bool:
        """Commit the journal; if it cannot be written (disk full), stop the run cleanly: results
        not committed stay in memory, and their tasks simply run again after ``--resume``."""
        if self.events is not None:
            self.events.flush()
        try:
            self.journal.flush()
            return True
        except JournalError as exc:
            if self.stop_reason is None:
                log.error("%s; stopping the run and releasing machines", exc)
                self.stop_reason = "the journal could not be written"
            else:
                log.debug("journal still not writable: %s", exc)
            return False

    def _journal_machine(self, machine: c.Machine, now: float) -> None:
        atus, cost = self.core.machine_cost(machine, now)
        self.journal.record_machine(
            machine.id, machine.cluster, self.session, machine.acquired_at, machine.up_at,
            machine.released_at, machine.nt, machine.rt, machine.uptime(now), atus, cost,
            machine.state.value, machine.release_reason,
        )

def _as_bytes(blob: bytes | str) -> bytes:
    return blob if isinstance(blob, bytes) else blob.encode("utf-8", errors="replace")


def _tail(blob: bytes | str) -> bytes:
    """An output tail as the master keeps it: the last ``OUTPUT_TAIL_BYTES``, whatever a worker sends
    (the worker keeps only that much too; the master does not rely on it)."""
    data = _as_bytes(blob)
    return data if len(data) <= OUTPUT_TAIL_BYTES else data[-OUTPUT_TAIL_BYTES:]


def bind_router(endpoint: str, keys: MasterKeys | None = None
                ) -> tuple[zmq.Context, zmq.Socket, str, DoorKeeper | None]:
    """Bind the master's ROUTER socket; ``tcp://HOST:*`` picks a free port. Returns the bound endpoint.

    With ``keys`` the socket is a CurveZMQ server and the returned ZAP handler (a thread) must
    be stopped after the socket is closed; without them (``--insecure``) it is plain TCP."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    sock = context.socket(zmq.ROUTER)
    auth = secure_router(context, sock, keys) if keys is not None else None
    sock.setsockopt(zmq.LINGER, 500)
    sock.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES + 1024)  # larger frames drop the peer, not us
    sock.setsockopt(zmq.SNDHWM, PEER_HWM)
    sock.setsockopt(zmq.RCVHWM, PEER_RCVHWM)
    try:
        sock.bind(endpoint)
    except zmq.ZMQError:
        sock.close(linger=0)
        if auth is not None:
            auth.stop()
        raise
    bound = sock.getsockopt_string(zmq.LAST_ENDPOINT)
    return context, sock, bound, auth

