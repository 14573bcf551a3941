"""The status control socket answers a bounded number of requests per tick, with one snapshot for
all of them, and advertises itself in a file only its owner can read."""

from __future__ import annotations

import json
import stat
import time

import zmq

from bats.master.views import status


def test_a_flood_of_requests_is_answered_a_few_per_tick_with_one_snapshot(tmp_path):
    server = status.ControlServer(tmp_path, "run-1")
    context = zmq.Context()
    askers = []
    try:
        info = json.loads((tmp_path / status.CONTROL_NAME).read_text())
        assert stat.S_IMODE((tmp_path / status.CONTROL_NAME).stat().st_mode) == 0o600
        for _ in range(3 * status.ANSWERS_PER_TICK):
            sock = context.socket(zmq.REQ)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(info["endpoint"])
            sock.send(b"")
            askers.append(sock)
        snapshots = []

        def figures() -> dict:
            snapshots.append(1)
            return {"done": len(snapshots)}

        answered: list[int] = []
        for _ in range(200):  # ticks; the requests arrive over the first few
            answered.append(server.serve(figures))
            if sum(answered) == len(askers):
                break
            time.sleep(0.01)
        assert max(answered) == status.ANSWERS_PER_TICK
        assert sum(answered) == len(askers)
        assert len(snapshots) == sum(1 for n in answered if n)  # one snapshot per tick that answered
        replies = [json.loads(sock.recv()) for sock in askers]
        assert all(reply["ok"] for reply in replies)
    finally:
        for sock in askers:
            sock.close(linger=0)
        context.destroy(linger=0)
        server.close()
    assert not (tmp_path / status.CONTROL_NAME).exists()
