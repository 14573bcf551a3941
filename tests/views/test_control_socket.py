"""The status control socket answers a bounded number of requests per tick, with one snapshot for
all of them, and advertises itself in a file only its owner can read."""

from __future__ import annotations

import json
import stat
import subprocess
import time
from pathlib import Path

import zmq
from helpers.runs import MASTER, results, wait_for, write_bag

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
            sock.send(info["key"].encode())
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


def test_malformed_and_oversize_requests_to_a_real_master_do_not_stop_its_run(tmp_path):
    """A message of 2 parts (what made the old REP socket fail with EFSM and the master exit), one
    without the REQ envelope, one with a wrong key and a 1 MiB one: the run finishes, whole."""
    go = tmp_path / "go"
    bag = write_bag(tmp_path / "tasks.txt", [f"while [ ! -e {go} ]; do sleep 0.05; done; echo {i}" for i in range(6)])
    state = tmp_path / "run"
    with (tmp_path / "master.err").open("w") as err:
        master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--state-dir", str(state)],
                                  stdout=subprocess.DEVNULL, stderr=err)
    context = zmq.Context()
    try:
        wait_for(lambda: (state / status.CONTROL_NAME).exists(), 60, "the control socket")
        info = json.loads((state / status.CONTROL_NAME).read_text())
        socket_path = Path(info["endpoint"].removeprefix("ipc://"))
        hostile = context.socket(zmq.DEALER)
        hostile.setsockopt(zmq.LINGER, 0)
        hostile.connect(info["endpoint"])
        hostile.send_multipart([b"", b"status", b"status"])  # 2 parts after the envelope
        hostile.send_multipart([b"status", b"status"])  # no envelope
        hostile.send_multipart([b"", b"not the key"])
        assert hostile.poll(10_000)  # the wrong key is answered, with an error
        assert json.loads(hostile.recv_multipart()[1]) == {"ok": False, "error": "not a status request of this run"}
        big = context.socket(zmq.DEALER)
        big.setsockopt(zmq.LINGER, 0)
        big.connect(info["endpoint"])
        big.send_multipart([b"", b"x" * (1 << 20)])
        # the master still answers, and an honest request gets the figures
        assert status.ask(state)["tasks"]["total"] == 6
        # checked after the attack, which a master on a TCP port (readable in /proc/net/tcp by
        # every local user) also meets: only the operator gets in
        assert stat.S_IMODE(socket_path.stat().st_mode) == 0o600
        assert stat.S_IMODE(socket_path.parent.stat().st_mode) == 0o700
        go.touch()
        assert master.wait(timeout=120) == 0, (tmp_path / "master.err").read_text()
    finally:
        if master.poll() is None:
            master.kill()
            master.wait()
        context.destroy(linger=0)
    assert sorted(r["id"] for r in results(state)) == list(range(1, 7))
    assert not socket_path.exists()
