"""The server loop's batch of frames ends after ``DRAIN_BATCH_S`` seconds as well as after
``DRAIN_BATCH`` frames, so heartbeats and liveness get their turn however slow frames are to handle.
The clock is a fake one that each handled frame moves on: no timed assertion."""

from __future__ import annotations

import types

import zmq

from bats.common.protocol import encode
from bats.master.server import loop


def test_a_batch_of_slow_frames_ends_after_its_time_and_leaves_the_rest_waiting(monkeypatch):
    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    # in-process: a frame sent is in the router's queue at once, so all 100 wait when the batch
    # starts (over TCP, a loaded machine had delivered 2 of them when _drain ran)
    router.bind("inproc://drain-test")
    dealer = context.socket(zmq.DEALER)
    dealer.connect("inproc://drain-test")
    try:
        clock = [100.0]
        monkeypatch.setattr(loop, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
        handled: list[list[bytes]] = []

        server = loop.Server.__new__(loop.Server)  # only what _drain touches
        server.socket, server.secure, server.peers, server.finish = router, False, {}, None

        def slow_frame(parts: list[bytes]) -> None:  # each frame takes 0.3 of the batch's time
            handled.append(parts)
            clock[0] += loop.DRAIN_BATCH_S * 0.3

        server._on_frame = slow_frame  # type: ignore[method-assign]
        for _ in range(100):
            dealer.send(encode("heartbeat"))
        router.poll(5000)
        server._drain()
        assert len(handled) == 4  # a frame count far below DRAIN_BATCH: the time ended the batch
        server._drain()
        assert len(handled) == 8  # the rest waited for the next batch
    finally:
        dealer.close(linger=0)
        router.close(linger=0)
        context.term()
