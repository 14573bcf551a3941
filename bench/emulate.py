"""Emulated workers for the scale benchmark: hundreds of machines in one process, each speaking the
real protocol to a real master.

How this works. ``python bench/emulate.py --master ENDPOINT --names a,b,... [--task-s S]`` opens one
ZeroMQ DEALER per name, each with its own CurveZMQ client keys (``--server-key``) and a random
routing id, and says ``hello`` with the cluster's join token (``--token-file``, the ``manual``
provisioner's): to the master these are that many machines. Everything goes through
:mod:`bats.common.protocol` (``encode``, ``decode_all``, ``frames``) as in ``bats-worker``; what is not
emulated is running a task: a task of a no-op run (``--task-s 0``) is answered at once, one of a
``sleep`` run ends ``--task-s`` seconds after it took a slot (a timer heap, one slot per machine).
Like ``bats-worker``, an emulated machine asks for its slots and prefetch after the ``welcome``,
asks again with every result, answers a burst with one frame (split at the protocol's limits), and
sends a heartbeat when it has sent nothing for the welcome's heartbeat period.

What it measures, written as JSON to ``--out`` when SIGTERM (or every machine's ``stop``) ends it:
the longest gap between two heartbeats of the master seen by any machine, and between any two
frames; how often a machine went the liveness period without a word (a worker would reconnect: the
master looked lost to it) or was told ``unknown``/``stop`` before the end (the master took it for
lost); results sent; machines welcomed.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import signal
import sys
import time
from collections import deque
from pathlib import Path

import zmq

from bats.common.protocol import MASTER_TYPES, ProtocolError, decode_all, encode, frames

SWEEP_S = 0.1  # how often every machine's heartbeat and liveness are looked at
PER_SOURCE = 50  # emulated machines per loopback address with --source-from (the master's door lets 64 wait)
JOIN_RETRY_S = 2.0  # told to wait for its seat, a machine says hello again after this long (as bats-worker)


class Emulated:
    """One emulated machine: its socket and what a worker would keep."""

    __slots__ = ("name", "sock", "welcomed", "capacity", "held", "queue", "busy", "last_sent", "last_recv",
                 "last_beat", "beat_gap", "frame_gap", "stopped", "out", "hello_at")

    def __init__(self, name: str, sock: zmq.Socket, now: float) -> None:
        self.name, self.sock = name, sock
        self.welcomed = False
        self.capacity = 2
        self.held = 0  # tasks received and not yet answered
        self.queue: deque[tuple[int, int]] = deque()  # tasks waiting for the slot (sleep runs)
        self.busy = False  # the slot runs a task (sleep runs)
        self.last_sent = self.last_recv = now
        self.last_beat: float | None = None
        self.beat_gap = self.frame_gap = 0.0
        self.stopped = False
        self.out: list[bytes] = []
        self.hello_at: float | None = None  # told to wait for its seat: when to say hello again


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/emulate.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--master", required=True)
    p.add_argument("--server-key", default=None)
    p.add_argument("--token-file", required=True)
    p.add_argument("--cluster", required=True)
    p.add_argument("--names", required=True, help="comma-separated machine names, one emulated machine each")
    p.add_argument("--task-s", type=float, default=0.0, help="0: no-op tasks; else each task takes this long")
    p.add_argument("--out", required=True)
    p.add_argument("--source-from", type=int, default=0, metavar="N",
                   help="connect from loopback addresses 127.0.0.N, N+1, ... (PER_SOURCE machines each), as "
                        "machines on separate hosts do: the master lets only so many connections of one address "
                        "wait for their hello; 0 (default): the system's choice")
    args = p.parse_args(argv)
    token = Path(args.token_file).read_text().strip()
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))

    ctx = zmq.Context()
    poller = zmq.Poller()
    now = time.monotonic()
    machines: dict[zmq.Socket, Emulated] = {}
    host = os.uname().nodename
    for number, name in enumerate(args.names.split(",")):
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.ROUTING_ID, b"w" + os.urandom(15))
        if args.server_key:
            public, secret = zmq.curve_keypair()
            sock.setsockopt(zmq.CURVE_SERVERKEY, args.server_key.encode("ascii"))
            sock.setsockopt(zmq.CURVE_PUBLICKEY, public)
            sock.setsockopt(zmq.CURVE_SECRETKEY, secret)
        if args.source_from:  # libzmq's "tcp://SOURCE:0;DESTINATION" connects from SOURCE
            source = f"127.0.0.{args.source_from + number // PER_SOURCE}"
            sock.connect(args.master.replace("tcp://", f"tcp://{source}:0;", 1))
        else:
            sock.connect(args.master)
        m = machines[sock] = Emulated(name, sock, now)
        sock.send(encode("hello", machine=name, token=token, cluster=args.cluster, host=host, cpus=1,
                         version="emulated"))
        poller.register(sock, zmq.POLLIN)

    heartbeat_s, liveness_s = 2.0, 15.0  # until a welcome says otherwise
    stats = {"machines": len(machines), "welcomed": 0, "results": 0, "tasks": 0, "silences": 0,
             "unknown": 0, "stopped": 0, "cancels": 0, "waits": 0, "first_result": None, "last_result": None}
    timers: list[tuple[float, int, int, int]] = []  # (end, machine index, task, attempt) for sleep runs
    index = {id(m): i for i, m in enumerate(machines.values())}
    by_index = list(machines.values())
    next_sweep = now + SWEEP_S

    def result(m: Emulated, task: int, attempt: int, runtime: float) -> None:
        m.out.append(encode("result", task=task, attempt=attempt, exit_code=0, runtime_s=runtime,
                            timed_out=False, stdout=b"", stderr=b"", ask=True))
        m.held -= 1
        stats["results"] += 1
        if stats["first_result"] is None:
            stats["first_result"] = now
        stats["last_result"] = now

    def start(m: Emulated, at: float) -> None:
        if m.queue and not m.busy:
            task, attempt = m.queue.popleft()
            m.busy = True
            heapq.heappush(timers, (at + args.task_s, index[id(m)], task, attempt))

    def flush(m: Emulated, at: float) -> None:
        if m.out:
            for frame in frames(m.out):
                try:
                    m.sock.send(frame, zmq.NOBLOCK)
                except zmq.Again:
                    pass
            m.out = []
            m.last_sent = at

    while not stopping and not all(m.stopped for m in by_index):
        timeout = max(0.0, min(next_sweep, timers[0][0] if timers else next_sweep) - time.monotonic())
        ready = poller.poll(timeout * 1000)
        now = time.monotonic()
        for sock, _ in ready:
            m = machines[sock]
            while True:
                try:
                    frame = sock.recv(zmq.NOBLOCK)
                except zmq.Again:
                    break
                if m.welcomed:  # the wait for the welcome (the join of the whole fleet) is not a silence
                    m.frame_gap = max(m.frame_gap, now - m.last_recv)
                m.last_recv = now
                try:
                    messages = decode_all(frame, MASTER_TYPES)
                except ProtocolError:
                    continue
                for msg in messages:
                    kind = msg["type"]
                    if kind == "task":
                        stats["tasks"] += 1
                        m.held += 1
                        if args.task_s <= 0:
                            result(m, msg["task"], msg["attempt"], 0.0)
                        else:
                            m.queue.append((msg["task"], msg["attempt"]))
                            start(m, now)
                    elif kind == "heartbeat":
                        if m.last_beat is not None:
                            m.beat_gap = max(m.beat_gap, now - m.last_beat)
                        m.last_beat = now
                    elif kind == "welcome":
                        heartbeat_s, liveness_s = float(msg["heartbeat_s"]), float(msg["liveness_s"])
                        if not m.welcomed:
                            stats["welcomed"] += 1
                        m.welcomed = True
                        m.last_beat = now
                        m.capacity = msg["slots"] + msg["prefetch"]
                        if m.capacity - m.held > 0:
                            m.out.append(encode("ask", n=m.capacity - m.held))
                    elif kind == "wait" and not m.welcomed:  # its seat is not open yet: hello again soon
                        stats["waits"] += 1
                        m.hello_at = now + JOIN_RETRY_S
                    elif kind == "cancel":
                        stats["cancels"] += 1
                    elif kind == "unknown":  # the master forgot this machine (took it for lost)
                        stats["unknown"] += 1
                        m.out.append(encode("hello", machine=m.name, token=token, cluster=args.cluster, host=host,
                                            cpus=1, version="emulated"))
                    elif kind == "stop":
                        stats["stopped"] += 1
                        m.stopped = True
            flush(m, now)
        while timers and timers[0][0] <= now:
            _end, i, task, attempt = heapq.heappop(timers)
            m = by_index[i]
            m.busy = False
            result(m, task, attempt, args.task_s)
            start(m, now)
            flush(m, now)
        if now >= next_sweep:
            next_sweep = now + SWEEP_S
            for m in by_index:
                if m.stopped:
                    continue
                if not m.welcomed and m.hello_at is not None and now >= m.hello_at:
                    m.hello_at = None
                    m.out.append(encode("hello", machine=m.name, token=token, cluster=args.cluster, host=host,
                                        cpus=1, version="emulated"))
                    flush(m, now)
                if m.welcomed and now - m.last_sent >= heartbeat_s:
                    m.out.append(encode("heartbeat"))
                    flush(m, now)
                if m.welcomed and now - m.last_recv >= liveness_s:  # a worker would reconnect: the master looked lost
                    stats["silences"] += 1
                    m.last_recv = now
    stats["beat_gap_s"] = max((m.beat_gap for m in by_index), default=0.0)
    stats["frame_gap_s"] = max((m.frame_gap for m in by_index if m.welcomed), default=0.0)
    Path(args.out).write_text(json.dumps(stats))
    for sock in machines:
        sock.close(linger=0)
    ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
