"""The master's machines on the provisioner side: acquisitions, releases, status polls and prices.

How this works. :class:`Fleet` is the part of :class:`~.loop.Server` (``Server.fleet``) that talks to provisioner
plugins (:mod:`bats.provisioners`): it carries out the core's ``Acquire`` and ``Release``, asks the
back ends about their machines and their prices, and gives every machine back at the end. Every
call runs off the loop's thread (:mod:`.calls`: a timeout on each, retries with backoff, one call of
each kind at a time per provisioner); the loop collects the outcomes every tick and feeds the core
what they mean (``MachineAcquired``, ``AcquireFailed``, ``MachineLost``, ``MachineCameLate``,
``PriceChanged``). What it needs of the server (the core, the journal, the peers to tell a machine
given back to stop) is :class:`Host`.

No dollar goes unrecorded: before an acquisition is asked for, its intent is committed to the
journal, and it is closed only once no attempt of it can still answer (see :mod:`.loop`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from bats.common import clock
from bats.common.protocol import encode
from bats.provisioners.base import MachineHandle, NodeState, Provisioner

from .. import core as c
from ..state.journal import Journal
from .calls import Calls, Outcome
from .peer import Peer

log = logging.getLogger(__name__)

SHUTDOWN_WAIT_S = 60.0  # how long the master waits for the last provisioner calls (releases) at exit
ACQUIRE_ATTEMPTS = 5  # an acquisition is tried this often (backoff 1, 2, 4, 8 s) before the core hears it failed


class Host(Protocol):
    """What the fleet asks of the server that owns it: the core and the journal, the peers (a
    machine given back is told to stop), and how the run is ending."""

    core: c.Core
    journal: Journal
    session: int
    finish: c.Finish | None
    stop_reason: str | None
    keep_machines: bool
    peers: dict[bytes, Peer]
    peer_of: dict[str, Peer]
    _early: dict[str, tuple[bytes, dict, str | None]]

    def _feed(self, event: c.Event) -> None: ...
    def _flush_journal(self) -> bool: ...
    def _journal_machine(self, machine: c.Machine, now: float) -> None: ...
    def _send(self, identity: bytes, frame: bytes) -> None: ...
    def _on_hello(self, identity: bytes, msg: dict, key: str | None = None) -> bool: ...
    def _forget(self, peer: Peer) -> None: ...


class Fleet:
    """The provisioner side of the server; see the module docstring. :class:`~.loop.Server` owns
    one (``Server.fleet``) and hands it the core's ``Acquire`` and ``Release``."""

    def __init__(self, server: Host, provisioners: dict[str, Provisioner]) -> None:
        self.server = server
        self.provisioners = provisioners
        self.handles: dict[str, MachineHandle] = {}
        self._price_polled: dict[str, float] = {}  # cluster -> time.monotonic() of its last price_now()
        self.calls = Calls()
        # one call of each kind at a time per provisioner: a hung status query never holds up a release
        self._locks = {(name, kind): threading.Lock() for name in provisioners
                       for kind in ("acquire", "release", "status")}
        self.released: list[str] = []  # "machine (native id)" given back, for the summary at exit
        self.kept: list[str] = []
        self.release_failed: list[str] = []
        self.shutting_down = False
        self._intents: dict[int, dict] = {}  # acquisitions some attempt of which may still bring machines
        self._intents_done: set[int] = set()  # ... of those, the ones no attempt can answer any more
        self._intent_ids = itertools.count(1)
        self._on_outcome = {"acquire": self._acquired, "release": self._released, "status": self._statuses}

    def _call(self, kind: str, cluster: str, fn: Callable[[Provisioner], object], context: object = None,
              attempts: int | None = 1, late: Callable[[object], None] | None = None,
              quiet: Callable[[], None] | None = None) -> None:
        """Run ``fn(provisioner)`` off this thread (see :mod:`bats.master.server.calls`); its outcome comes
        back through ``_on_outcome[kind]`` on a later tick."""
        provisioner = self.provisioners[cluster]
        self.calls.submit(kind, cluster, lambda: fn(provisioner), context=context,
                          timeout_s=provisioner.call_timeout_s(), attempts=attempts, late=late,
                          lock=self._locks[cluster, kind], quiet=quiet)

    def collect_calls(self) -> None:
        for outcome in self.calls.poll():
            self._on_outcome[outcome.kind](outcome)
        self._close_intents()
        for machine_id, early in list(self.server._early.items()):  # no acquisition left that could know them
            if not self.calls.busy("acquire", early[1]["cluster"]) and self.server._early.pop(machine_id, None) is not None:
                self.server._on_hello(*early)

    def acquire(self, action: c.Acquire) -> None:
        if self.shutting_down:
            return
        n, cluster, asked_at = action.n, action.cluster, clock.now()
        intent = next(self._intent_ids)
        self._intents[intent] = {"session": self.server.session, "cluster": cluster, "n": n, "asked_at": asked_at}
        self.server.journal.set_meta("acquiring", list(self._intents.values()))
        if not self.server._flush_journal():  # on disk before anything is launched, or nothing is launched
            self.server._feed(c.AcquireFailed(asked_at, cluster, n, "the journal could not be written"))
            return
        self._call("acquire", cluster, lambda p: p.acquire(n), context=(n, asked_at), attempts=ACQUIRE_ATTEMPTS,
                   late=lambda handles: self._release_unwanted(cluster, handles, asked_at),
                   quiet=lambda: self._intents_done.add(intent))

    def _close_intents(self) -> None:
        """Forget the acquisitions that can bring no more machines (after their machines are journaled)."""
        if self._intents_done:
            for intent in self._intents_done:
                self._intents.pop(intent, None)
            self._intents_done.clear()
            self.server.journal.set_meta("acquiring", list(self._intents.values()))

    def _release_unwanted(self, cluster: str, handles: object, asked_at: float) -> None:
        """Machines that came after the run stopped wanting them (a timed-out acquisition that
        answered late, or one that answered after the run ended): charged, journaled, given back."""
        if not isinstance(handles, list) or not handles:
            return
        log.warning("cluster %s: %d machine(s) came after they were given up on; releasing them: %s",
                    cluster, len(handles), ", ".join(_describe(h) for h in handles))
        now = clock.now()
        for handle in handles:
            self.handles[handle.machine_id] = handle
            self.server._feed(c.MachineCameLate(now, handle.machine_id, handle.cluster, asked_at))
        self.server._flush_journal()

    def _acquired(self, outcome: Outcome) -> None:
        cluster, (n, asked_at) = outcome.cluster, outcome.context
        if self.server.core.finished is not None or self.shutting_down:
            self._release_unwanted(cluster, outcome.value, asked_at)
            return
        self._limit_cluster(cluster, self.provisioners[cluster].usable_max)
        if not outcome.ok:
            log.error("cluster %s: acquiring %d machine(s) failed after %d attempt(s): %s", cluster, n,
                      outcome.attempts, outcome.error)
            self.server._feed(c.AcquireFailed(clock.now(), cluster, n, str(outcome.error)))
            return
        handles = outcome.value
        assert isinstance(handles, list)
        now = clock.now()
        for handle in handles:
            self.handles[handle.machine_id] = handle
            self.server._feed(c.MachineAcquired(now, handle.machine_id, handle.cluster))
            self.server._journal_machine(self.server.core.machines[handle.machine_id], now)
        if handles:  # money is being spent: on disk now, not at the next tick, so a crash cannot lose it
            self.server._flush_journal()
        missing = n - len(handles)
        if missing > 0:
            self.server._feed(c.AcquireFailed(now, cluster, missing, "provisioner returned fewer machines"))
        log.info("cluster %s: acquired %d machine(s)", cluster, len(handles))
        for handle in handles:  # workers that said hello before the acquisition returned
            early = self.server._early.pop(handle.machine_id, None)
            if early is not None:
                self.server._on_hello(*early)

    def _limit_cluster(self, name: str, usable: int | None) -> None:
        """The back end cannot give ``name`` more than ``usable`` machines (capacity, quotas): the
        core plans and acquires with that ``max`` from now on. The core gets a new clusters dict;
        the config, which the report shows, keeps the configured ``max``."""
        cluster = self.server.core.clusters[name]
        if usable is None or usable >= cluster.max:
            return
        log.warning("cluster %s: the provisioner can give at most %d machine(s) now (max %d); planning with that",
                    name, usable, cluster.max)
        self.server.core.clusters = {**self.server.core.clusters, name: dataclasses.replace(cluster, max=max(0, usable))}

    def poll_prices(self, now: float, mono: float) -> None:
        """Ask each provisioner with a price hook for its cluster's price when its poll is due."""
        for name, provisioner in self.provisioners.items():
            every = provisioner.price_poll_s
            if every is None or mono - self._price_polled.get(name, -math.inf) < every:
                continue
            self._price_polled[name] = mono
            try:
                price = provisioner.price_now()
            except Exception as exc:  # a plugin's failure must not take the master down
                log.warning("cluster %s: price query failed: %s", name, exc)
                continue
            if price is None or not math.isfinite(price) or price < 0 or price == self.server.core.prices.get(name):
                continue
            log.warning("cluster %s: price per ATU is now %g (quoted by its provisioner)", name, price)
            self.server._feed(c.PriceChanged(now, name, price))

    def release(self, action: c.Release) -> None:
        peer = self.server.peer_of.get(action.machine)
        if peer is not None:
            if not (self.server.keep_machines and self.server.stop_reason is not None):
                self.server._send(peer.identity, encode("stop", reason=action.reason))
            self.server._forget(peer)
        self._give_back(action.machine, clock.now())

    def lose(self, machine_id: str, reason: str, now: float) -> None:
        self.server._feed(c.MachineLost(now, machine_id, reason))
        self._give_back(machine_id, now)

    def _give_back(self, machine_id: str, now: float) -> None:
        """Hand a machine back to its provisioner (retried until it succeeds, off this thread) and
        journal its final figures. With ``--keep-machines``, a stop by signal leaves it running."""
        handle = self.handles.get(machine_id)
        if handle is not None:
            if self.server.keep_machines and self.server.stop_reason is not None:
                self.kept.append(_describe(handle))
            else:
                self._call("release", handle.cluster, lambda p: p.release([handle]), context=[handle],
                           attempts=None)
        machine = self.server.core.machines.get(machine_id)
        if machine is not None:
            self.server._journal_machine(machine, now)

    def poll_provisioners(self, now: float) -> None:
        by_cluster: dict[str, list[MachineHandle]] = {}
        for machine in self.server.core.live_machines():
            handle = self.handles.get(machine.id)
            if handle is not None:
                by_cluster.setdefault(handle.cluster, []).append(handle)
        for cluster, handles in by_cluster.items():
            if not self.calls.busy("status", cluster):  # a slow back end is not asked again meanwhile
                self._call("status", cluster, functools.partial(_ask_status, handles=handles))

    def _released(self, outcome: Outcome) -> None:
        handles = outcome.context
        assert isinstance(handles, list)
        if outcome.ok:
            self.released.extend(_describe(h) for h in handles)
        else:
            self.release_failed.extend(_describe(h) for h in handles)
            log.error("cluster %s: releasing %s failed: %s", outcome.cluster,
                      ", ".join(_describe(h) for h in handles), outcome.error)

    def _statuses(self, outcome: Outcome) -> None:
        if self.shutting_down:
            return  # everything is being released anyway
        if not outcome.ok:
            log.warning("cluster %s: status query failed: %s", outcome.cluster, outcome.error)
            return
        now = clock.now()
        states = outcome.value
        assert isinstance(states, dict)
        for machine_id, state in states.items():
            machine = self.server.core.machines.get(machine_id)
            if machine is None or machine.state is c.MachineState.GONE:
                continue  # lost or released since the query was sent
            if state in (NodeState.GONE, NodeState.FAILED):
                peer = self.server.peer_of.get(machine_id)
                if peer is not None:
                    self.server._forget(peer)
                log.warning("%s: the provisioner reports it %s", machine_id, state.value)
                self.lose(machine_id, f"provisioner reports {state.value}", now)

    def shutdown(self) -> None:
        """Release whatever is still held, tell connected workers to stop, wait for the provisioner
        calls still open (releases above all), say what was released, commit the journal."""
        self.shutting_down = True
        now = clock.now()
        for machine in self.server.core.machines.values():
            self.server._journal_machine(machine, now)
        keep = self.server.keep_machines and self.server.stop_reason is not None
        if not keep:
            stop = encode("stop", reason=self.server.finish.reason if self.server.finish else "master exiting")
            for peer in list(self.server.peers.values()):
                self.server._send(peer.identity, stop)
        for name in self.provisioners:
            held = [self.handles[m.id] for m in self.server.core.live_machines(name) if m.id in self.handles]
            if not held:
                continue
            if keep:
                self.kept.extend(_describe(h) for h in held)
            else:
                self._call("release", name, functools.partial(_ask_release, handles=held), context=held,
                           attempts=None)
        for outcome in self.calls.cancel_waiting("acquire"):
            self._acquired(outcome)
        deadline = time.monotonic() + SHUTDOWN_WAIT_S
        self.calls.hurry()
        while self.calls.pending or self.calls.late_pending():
            for outcome in self.calls.wait(deadline):
                self._on_outcome[outcome.kind](outcome)
            self._close_intents()
            if time.monotonic() >= deadline:
                break
            if self.calls.late_pending() and not self.calls.pending:
                time.sleep(0.05)
        self._close_intents()  # those settled without a wait above
        self._say_what_was_released()
        if not keep:
            for name, provisioner in self.provisioners.items():
                try:
                    provisioner.close()
                except Exception as exc:  # a plugin's failure must not take the master down
                    log.error("cluster %s: closing the provisioner failed: %s", name, exc)
        self.server._flush_journal()

    def _say_what_was_released(self) -> None:
        stopped = self.server.stop_reason is not None
        level = logging.WARNING if stopped else logging.INFO
        if self.released:
            log.log(level, "released %d machine(s): %s", len(self.released), ", ".join(self.released))
        if self.kept:
            log.warning("kept %d machine(s) running (--keep-machines); they cost money until you stop them: %s",
                        len(self.kept), ", ".join(self.kept))
        if self.release_failed:
            log.error("could NOT release %d machine(s); they may still be running and costing money: %s",
                      len(self.release_failed), ", ".join(self.release_failed))


def _describe(handle: MachineHandle) -> str:
    return f"{handle.machine_id} ({handle.native_id})" if handle.native_id else handle.machine_id


def _ask_status(provisioner: Provisioner, handles: list[MachineHandle]) -> Any:
    return provisioner.status(handles)


def _ask_release(provisioner: Provisioner, handles: list[MachineHandle]) -> Any:
    return provisioner.release(handles)
