"""A worker connection the master has admitted: which machine it speaks for, and how to reach it.

How this works. The server (:mod:`.loop`) makes a :class:`Peer` when a worker's hello is accepted
and keys it two ways, by ZeroMQ routing identity (frames in) and by machine id (the core's actions
out). ``last_seen`` drives the liveness check; ``key`` is the CurveZMQ client key the connection
presented, to which the machine stays bound (:mod:`.security`). Plain data, no logic.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Peer:
    machine: str
    identity: bytes
    last_seen: float  # time.monotonic()
    key: str | None = None  # the connection's CurveZMQ client key (None without encryption)
