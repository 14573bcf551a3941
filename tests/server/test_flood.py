"""Peers that know only the master's public key (it is no secret: every worker's command line
carries it) and flood it: they may slow a run, never stop a real worker or take the master's memory.

Each test runs the real master with real local workers and one or more hostile DEALER sockets that
complete the CURVE handshake and then send what an unadmitted peer can send."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import psutil
import zmq
from helpers.runs import MASTER, free_port, wait_for, write_bag
from helpers.runs import results as export

from bats.common.protocol import encode
from bats.master.server import security


def _start(tmp_path: Path, port: int, cluster: str, tasks: int) -> tuple[subprocess.Popen, Path]:
    bag = write_bag(tmp_path / "tasks.txt", ["sleep 0.2"] * tasks)
    config = tmp_path / "clusters.toml"
    config.write_text(f'[master]\nlisten = "tcp://127.0.0.1:{port}"\n\n{cluster}')
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config)],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return master, tmp_path / "bats-run"


def _flooder(context: zmq.Context, port: int, server_key: bytes) -> zmq.Socket:
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, 1000)  # as fast as the master reads, no faster (bounded here too)
    sock.setsockopt(zmq.ROUTING_ID, b"f" + os.urandom(15))
    public, secret = zmq.curve_keypair()
    sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = server_key, public, secret
    sock.connect(f"tcp://127.0.0.1:{port}")
    return sock


def _flood(stop: threading.Event, send, frame: bytes) -> None:
    while not stop.is_set():
        try:
            send(frame, zmq.NOBLOCK)
        except zmq.Again:
            stop.wait(0.001)


def _run_under_flood(tmp_path: Path, cluster: str, frame_of, peers: int, tasks: int) -> tuple[int, str, int]:
    """Run a bag while ``peers`` hostile sockets send ``frame_of(n)`` as fast as they can; returns the
    master's exit code, its stderr and its peak resident memory in MiB."""
    port = free_port()
    master, state = _start(tmp_path, port, cluster, tasks)
    context = zmq.Context()
    stop = threading.Event()
    threads: list[threading.Thread] = []
    peak = 0
    try:
        wait_for(lambda: (state / security.SECRET_FILE).exists(), 30, "the master's key")
        server_key = security.load_keys(state).public
        for n in range(peers):
            sock = _flooder(context, port, server_key)
            thread = threading.Thread(target=_flood, args=(stop, sock.send, frame_of(n)), daemon=True)
            thread.start()
            threads.append(thread)
        process = psutil.Process(master.pid)
        while master.poll() is None:
            try:
                peak = max(peak, process.memory_info().rss)
            except psutil.Error:
                break
            if peak > 2 << 30:  # the test's own guard: fail, do not take the machine's memory
                master.kill()
                break
            try:
                master.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
        _, err = master.communicate(timeout=120)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=5)
        master.kill()
        context.destroy(linger=0)
    return master.returncode, err, peak >> 20


def test_an_early_hello_flood_does_not_stop_the_real_workers(tmp_path):
    # the acquisition answers 3 s after its workers started: their hellos come first and are held;
    # the flood claims machines of the same cluster with made-up ids and tokens meanwhile
    cluster = ('[clusters.slow]\nprovisioner = "flaky"\nfail_rate = 0\nacquire_delay = "3s"\n'
               'call_timeout = "60s"\nmax = 2\n')

    def hellos(n: int) -> bytes:
        return b"".join(encode("hello", machine=f"slow-s1-{n}{k}", token="0" * 32, cluster="slow",
                               host="flood", cpus=1, version="0") for k in range(256))

    code, err, _ = _run_under_flood(tmp_path, cluster, hellos, peers=2, tasks=20)
    assert code == 0, err
    assert sorted(r["id"] for r in export(tmp_path / "bats-run")) == list(range(1, 21))
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    assert sum(m["nt"] for m in report["machines"]) == 20


def test_pre_hello_frames_from_peers_that_never_read_cost_bounded_memory(tmp_path):
    cluster = '[clusters.local]\nprovisioner = "local"\nmax = 2\n'

    def heartbeats(_n: int) -> bytes:
        return encode("heartbeat") * 256

    code, err, peak_mib = _run_under_flood(tmp_path, cluster, heartbeats, peers=2, tasks=30)
    assert code == 0, err
    assert sorted(r["id"] for r in export(tmp_path / "bats-run")) == list(range(1, 31))
    assert peak_mib < 400, f"the master grew to {peak_mib} MiB under the flood"
