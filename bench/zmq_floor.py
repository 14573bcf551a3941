"""The transport floor for benchmark 1: a bare pyzmq ROUTER echoing frames with W worker processes.

    python bench/zmq_floor.py --workers W --depth D --round-trips M     # the measuring process
    python bench/zmq_floor.py --worker ENDPOINT                          # one echo worker (spawned)

The measuring process binds a ROUTER on ``tcp://127.0.0.1:*`` (as ``bats-master`` does for a local
cluster) and starts W worker processes, each a DEALER in a tight loop: receive a frame, send back a
``FRAME_BYTES``-byte frame at once. After every worker has said hello, the ROUTER sends D frames to
each worker, then answers every echo with one new frame to the same worker, until M frames have gone
out and M echoes have come back. That is the shape of BaTS's dispatch with ``max = W`` and
``prefetch = D - 1``: every ``result`` (with ``ask``) comes in, one ``task`` goes out, and each
worker holds 1 + prefetch tasks. Nothing is decoded, looked up or written: it is the least work any
pyzmq master with this protocol could do per task.

Prints one JSON object: ``round_trips``, ``seconds`` (first send to last echo), ``rt_per_s``,
``cpu_s`` (``getrusage(RUSAGE_SELF)`` user + sys over the same span: the Python thread and
ZeroMQ's I/O thread, the way report.json's ``master.cpu_s`` counts the master; the workers are
other processes and not counted), ``us_cpu_per_rt`` and ``startup_s`` (spawning the workers and
waiting for their hellos; not part of the figures above).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import zmq

FRAME_BYTES = 60  # about one BaTS ``task`` frame (msgpack of task, attempt, command "true", timeout_s)
HELLO = b"hello"
STOP = b""  # an empty frame tells a worker to exit
RECV_TIMEOUT_MS = 30_000  # a lost worker fails the run instead of hanging it
_SNDMORE = int(zmq.SNDMORE)  # plain int: pyzmq's flag enums cost an enum construction per use


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker(endpoint: str) -> int:
    """Echo loop: one frame in, one ``FRAME_BYTES`` frame out, until an empty frame or silence."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 1000)
    sock.setsockopt(zmq.RCVTIMEO, RECV_TIMEOUT_MS * 2)
    sock.connect(endpoint)
    reply = b"r" * FRAME_BYTES
    recv, send = sock.recv, sock.send
    send(HELLO)
    try:
        while recv():
            send(reply)
    except zmq.Again:
        return 1  # the measuring process went away
    finally:
        sock.close()
        ctx.term()
    return 0


def measure(workers: int, depth: int, round_trips: int) -> dict[str, float | int]:
    """Run the echo benchmark once; see the module docstring."""
    if workers < 1 or depth < 1 or round_trips < 1:
        raise ValueError("workers, depth and round trips must all be at least 1")
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 500)
    sock.setsockopt(zmq.SNDHWM, 100_000)
    sock.setsockopt(zmq.RCVHWM, 100_000)
    sock.setsockopt(zmq.RCVTIMEO, RECV_TIMEOUT_MS)
    sock.bind("tcp://127.0.0.1:*")
    endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", endpoint]) for _ in range(workers)]
    try:
        t_spawn = time.perf_counter()
        identities = []
        while len(identities) < workers:
            identity, body = sock.recv_multipart()
            if body != HELLO:
                raise RuntimeError(f"expected a hello, got {body!r}")
            identities.append(identity)
        startup_s = time.perf_counter() - t_spawn

        payload = b"t" * FRAME_BYTES
        recv, send = sock.recv, sock.send
        cpu0, t0 = _cpu_s(), time.perf_counter()
        sent = 0
        for _ in range(depth):  # D frames in flight per worker, handed out round-robin
            for identity in identities:
                if sent < round_trips:
                    send(identity, _SNDMORE)
                    send(payload)
                    sent += 1
        received = 0
        while received < round_trips:
            identity = recv()
            recv()  # the echo's body: a DEALER's message is always [identity, one frame]
            received += 1
            if sent < round_trips:
                send(identity, _SNDMORE)
                send(payload)
                sent += 1
        seconds = time.perf_counter() - t0
        cpu = _cpu_s() - cpu0

        for identity in identities:
            sock.send_multipart([identity, STOP])
        for proc in procs:
            proc.wait(timeout=10)
            if proc.returncode != 0:
                raise RuntimeError(f"echo worker exited with {proc.returncode}")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        sock.close()
        ctx.term()
    return {
        "workers": workers, "depth": depth, "round_trips": round_trips, "frame_bytes": FRAME_BYTES,
        "seconds": round(seconds, 4), "rt_per_s": round(round_trips / seconds, 1), "cpu_s": round(cpu, 4),
        "us_cpu_per_rt": round(cpu / round_trips * 1e6, 3), "startup_s": round(startup_s, 4),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/zmq_floor.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=2, help="echo worker processes (W; default 2)")
    p.add_argument("--depth", type=int, default=2, help="frames in flight per worker (D = 1 + prefetch; default 2)")
    p.add_argument("--round-trips", type=int, default=100_000, help="total round trips (M; default 100,000)")
    p.add_argument("--worker", metavar="ENDPOINT", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args.worker)
    print(json.dumps(measure(args.workers, args.depth, args.round_trips)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
