"""A machine the master admitted (it has the cluster's join token) turned hostile, speaking the real
protocol to a real master next to an honest local worker: it claims a million CPUs, takes every task
it can and never answers, and sends heartbeats carrying arrays nested 1,000 deep. The run still ends
with every task done once, the hoarder's tasks reclaimed and the hoarder released."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import threading
import time

import msgpack
import pytest
import zmq
import zmq.auth
from helpers.runs import MASTER, free_port, wait_for, write_bag
from helpers.runs import results as export

from bats.common.protocol import MASTER_TYPES, ProtocolError, decode_all, encode


def _nested(depth: int, width: int) -> list:
    deep: list = []
    for _ in range(depth):
        deep = [deep, *([0] * width)]
    return deep


def test_nested_containers_are_refused_before_they_are_built():
    from bats.common.protocol import WORKER_TYPES

    arrays = msgpack.packb({"v": 1, "type": "heartbeat", "extra": _nested(1000, 900)})
    assert len(arrays) > 900_000
    with pytest.raises(ProtocolError):
        decode_all(arrays, WORKER_TYPES)
    maps: dict = {}
    for _ in range(1000):
        maps = {"n": maps, **{f"k{i}": i for i in range(20)}}
    with pytest.raises(ProtocolError, match="a map inside a message"):
        decode_all(msgpack.packb({"v": 1, "type": "heartbeat", "extra": maps}), WORKER_TYPES)
    with pytest.raises(ProtocolError, match="a map inside a message"):  # also behind a first message
        decode_all(encode("heartbeat") + msgpack.packb({"v": 1, "type": "heartbeat", "x": {"y": 1}}), WORKER_TYPES)
    wide = {"v": 1, "type": "heartbeat", **{f"f{i}": i for i in range(40)}}
    with pytest.raises(ProtocolError):
        decode_all(msgpack.packb(wide), WORKER_TYPES)
    # unknown scalar fields pass (and are not read); the messages of the protocol are unchanged
    assert decode_all(encode("ask", n=2, later="x") * 3, WORKER_TYPES)[2]["n"] == 2


def test_a_hoarding_machine_is_released_and_its_tasks_run_elsewhere(tmp_path):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    config = tmp_path / "c.toml"
    config.write_text(f'[master]\nlisten = "{endpoint}"\nheartbeat = "0.5s"\nliveness = "3s"\n\n'
                      '[clusters.local]\nprovisioner = "local"\nmax = 1\n\n'
                      '[clusters.hand]\nprovisioner = "manual"\nmax = 1\nslots = "auto"\n')
    bag = write_bag(tmp_path / "tasks.txt", [f"sleep 0.1; echo {i}" for i in range(40)])
    state = tmp_path / "run"
    with (tmp_path / "master.err").open("w") as err:
        master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--policy", "self",
                                   "--task-timeout", "2s", "--state-dir", str(state)], cwd=tmp_path,
                                  stdout=subprocess.DEVNULL, stderr=err)
    context = zmq.Context()
    try:
        token_file = state / "join" / "hand.token"
        wait_for(token_file.exists, 30, "the join token")
        public, _ = zmq.auth.load_certificate(str(state / "master.key"))
        sock = context.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.ROUTING_ID, b"h" + os.urandom(15))
        sock.curve_serverkey = public
        sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
        sock.connect(endpoint)
        hello = encode("hello", machine="hoarder", token=token_file.read_text().strip(), cluster="hand",
                       host="hoarder", cpus=1 << 20, version="0")
        junk = msgpack.packb({"v": 1, "type": "heartbeat", "extra": _nested(1000, 900)})
        got: list[dict] = []

        def welcomed() -> bool:
            sock.send(hello)
            if sock.poll(500):
                while sock.poll(0):
                    got.extend(decode_all(sock.recv(), MASTER_TYPES))
            return any(m["type"] == "welcome" for m in got)

        wait_for(welcomed, 60, "a seat for the hoarder")
        welcome = next(m for m in got if m["type"] == "welcome")
        got = got[got.index(welcome) + 1:]
        sock.send(encode("ask", n=64 + welcome["prefetch"]))
        stopped = False
        for _ in range(400):  # heartbeats (honest ones and ones too costly to decode), never a result
            sock.send(encode("heartbeat"))
            sock.send(junk)
            while sock.poll(0):
                got.extend(decode_all(sock.recv(), MASTER_TYPES))
            if any(m["type"] == "stop" for m in got):
                stopped = True
                break
            if master.poll() is not None:
                break
            sock.poll(100)
        hoarded = [m["task"] for m in got if m["type"] == "task"]
        assert hoarded, got
        assert stopped, "the hoarder was never told to stop"
        assert master.wait(timeout=120) == 0, (tmp_path / "master.err").read_text()
    finally:
        if master.poll() is None:
            master.kill()
            master.wait()
        context.destroy(linger=0)
    log = (tmp_path / "master.err").read_text()
    assert "past --task-timeout" in log
    assert sorted(r["id"] for r in export(state)) == list(range(1, 41))  # every task once, hoarded ones too
    report = json.loads((state / "report.json").read_text())
    hoarder = next(m for m in report["machines"] if m["cluster"] == "hand")
    assert hoarder["nt"] == 0
    # checked last, so that the hoard itself (the run hung on the code before) is what fails first there
    assert welcome["slots"] == 64  # slots = "auto": what it claims, at most max_slots


def _done(state) -> int:
    """Tasks done so far, read from the journal (read-only; no process started per look)."""
    try:
        with sqlite3.connect(f"file:{state / 'journal.sqlite'}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT COUNT(DISTINCT task_id) FROM results WHERE status = 'done'").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_nested_heartbeats_from_an_admitted_machine_neither_starve_the_run_nor_deafen_it_to_sigterm(tmp_path):
    # the attack of the report: heartbeats whose unknown field is arrays nested 1,000 deep (~1M
    # objects a frame), sent without pause by a machine holding the join token (it holds two tasks
    # and never answers), beside an honest worker. Before, the honest worker did 13 of 300 tasks in
    # 35 s and the master did not stop on SIGTERM for over a minute. The flood runs in a thread of
    # its own for as long as the test looks (a flood sent only between looks let the master drain
    # it and catch up), and every wait here has a bound. The tasks take 50 ms each, as the report's
    # did (300 in 18.5 s unflooded), so that the flood, which starts once the nester has its seat,
    # covers most of the run: 300 `true` were done in about a second, mostly before it began
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    config = tmp_path / "c.toml"
    config.write_text(f'[master]\nlisten = "{endpoint}"\nliveness = "600s"\n\n'
                      '[clusters.local]\nprovisioner = "local"\nmax = 1\n\n'
                      '[clusters.hand]\nprovisioner = "manual"\nmax = 1\n')
    bag = write_bag(tmp_path / "tasks.txt", ["sleep 0.05"] * 300)
    state = tmp_path / "run"
    with (tmp_path / "master.err").open("w") as err:
        master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--policy", "self",
                                   "--state-dir", str(state)], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err)
    context = zmq.Context()
    stop = threading.Event()
    flood: threading.Thread | None = None
    sent = 0
    try:
        token_file = state / "join" / "hand.token"
        wait_for(lambda: token_file.exists() or master.poll() is not None, 30, "the join token")
        assert master.poll() is None, (tmp_path / "master.err").read_text()
        public, _ = zmq.auth.load_certificate(str(state / "master.key"))
        sock = context.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.ROUTING_ID, b"n" + os.urandom(15))
        sock.setsockopt(zmq.SNDHWM, 8)  # a few frames queued here: the flood keeps pace with the master
        sock.curve_serverkey = public
        sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
        sock.connect(endpoint)
        hello = encode("hello", machine="nester", token=token_file.read_text().strip(), cluster="hand",
                       host="nester", cpus=1, version="0")
        got: list[dict] = []

        def welcomed() -> bool:
            sock.send(hello)
            if sock.poll(500):
                while sock.poll(0):
                    got.extend(decode_all(sock.recv(), MASTER_TYPES))
            return any(m["type"] == "welcome" for m in got)

        wait_for(welcomed, 60, "a seat for the nester")
        sock.send(encode("ask", n=2))
        junk = msgpack.packb({"v": 1, "type": "heartbeat", "extra": _nested(1000, 900)})

        def nest() -> None:  # the socket is this thread's from here on
            nonlocal sent
            deadline = time.monotonic() + 180  # never past the test's own bounds, whatever happens
            while not stop.is_set() and time.monotonic() < deadline:
                if sock.poll(100, zmq.POLLOUT):  # as fast as the master takes them
                    sock.send(junk, zmq.NOBLOCK)
                    sent += 1
                while sock.poll(0):
                    sock.recv()  # its tasks are never answered

        flood = threading.Thread(target=nest, name="nester", daemon=True)
        flood.start()
        early = _done(state)
        wait_for(lambda: _done(state) >= 298 or master.poll() is not None, 60,
                 "the honest worker's 298 tasks under the flood")
        assert master.poll() is None, (tmp_path / "master.err").read_text()[-2000:]
        assert sent >= 10, sent  # each ~1M objects
        assert early < 200, early  # most of the honest worker's tasks ran under the flood
        master.terminate()  # while the flood goes on
        try:
            code = master.wait(timeout=20)
        except subprocess.TimeoutExpired:
            raise AssertionError("the master did not stop within 20 s of SIGTERM under the flood") from None
        assert code != 0  # stopped with two tasks not run
        assert flood.is_alive()  # it flooded until the master was gone
    finally:
        stop.set()
        if flood is not None:
            flood.join(timeout=10)
        if master.poll() is None:
            master.kill()
            master.wait()
        context.destroy(linger=0)
    report = json.loads((state / "report.json").read_text())
    assert report["tasks"]["done"] == 298, report["tasks"]
    assert "SIGTERM" in (tmp_path / "master.err").read_text()
