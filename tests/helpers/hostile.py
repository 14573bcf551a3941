"""Runs of the real master under attack or with a damaged clock, for the tests and for
``make reliability`` (``bench/reliability.py``), which repeats them and writes the figures.

- :func:`flood_run`: a bag on local workers while hostile peers that know only the master's public
  key (no secret: it is on every worker's command line) send frames of 256 hellos with made-up
  machine ids and tokens (``"hellos"``, while the workers' acquisition is still in flight), of 256
  heartbeats without ever reading (``"heartbeats"``), or of 1 MiB each (``"megabytes"``, with
  :data:`BIG_FLOOD`'s run), or nothing at all (``"idle"``: connections that never say hello);
  ``None`` is the same run without a flood, to compare with. Returns the exit code, wall time, the
  master's peak memory, the tasks done, how many answers admitting a hostile peer (``welcome`` or
  ``task``) came back, and how many of the hostile connections' handshakes succeeded or were refused.
- :func:`clock_step_run`: a BaTS run whose ``time.time()`` jumps by ``step`` seconds two seconds in.
- :func:`state_dir_refusals`: a second master on a live state directory, then an edited bag and an
  edited config on ``--resume``: how many of those attempts were refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import zmq
from zmq.utils.monitor import parse_monitor_message

from bats.common.protocol import MASTER_TYPES, MAX_FRAME_BYTES, ProtocolError, decode_all, encode
from bats.master.server import security
from helpers.configs import CONFIG
from helpers.runs import MASTER, free_port, results, wait_for, write_bag

MEMORY_GUARD = 2 << 30  # a master past this is killed: a failed run, not a machine out of memory


def _hellos(n: int) -> bytes:
    return b"".join(encode("hello", machine=f"slow-s1-{n}{k}", token="0" * 32, cluster="slow",
                           host="flood", cpus=1, version="0") for k in range(256))


def _heartbeats(_n: int) -> bytes:
    return encode("heartbeat") * 256


def _megabytes(_n: int) -> bytes:
    return b"\xc6" + (MAX_FRAME_BYTES - 5).to_bytes(4, "big") + os.urandom(64) * ((MAX_FRAME_BYTES - 5) // 64)


def _nothing(_n: int) -> bytes:
    return b""


FLOODS = {"hellos": _hellos, "heartbeats": _heartbeats, "megabytes": _megabytes, "idle": _nothing}
# the 1 MiB flood's run: 4 peers for 8 s, then they leave while the bag goes on (its own baseline)
BIG_FLOOD = {"peers": 4, "tasks": 40, "command": "sleep 0.5", "flood_for_s": 8.0}
# the same flood from more connections than the master lets in without a hello from one address
WIDE_FLOOD = {**BIG_FLOOD, "peers": 80}
# the early-hello flood needs an acquisition in flight while the real workers start
_CLUSTER = ('[clusters.slow]\nprovisioner = "flaky"\nfail_rate = 0\nacquire_delay = "3s"\n'
            'call_timeout = "60s"\nmax = 2\n')


class _Flooder(threading.Thread):
    """One hostile DEALER: the right server key, a fresh client key, ``frame`` as fast as the master
    takes it (an empty one: nothing); with ``read`` it also reads what comes back and counts
    admissions. Its monitor counts the handshakes that succeeded and those refused."""

    def __init__(self, context: zmq.Context, port: int, server_key: bytes, frame: bytes, read: bool,
                 go: threading.Event) -> None:
        super().__init__(daemon=True)
        self.go = go  # every flooder starts at once: a spinning one would slow the start of the next
        self.sock = context.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SNDHWM, 1000)  # bounded here too: the flooder waits, never grows
        self.sock.setsockopt(zmq.ROUTING_ID, b"f" + os.urandom(15))
        public, secret = zmq.curve_keypair()
        self.sock.curve_serverkey, self.sock.curve_publickey, self.sock.curve_secretkey = server_key, public, secret
        self.monitor = self.sock.get_monitor_socket(
            zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
            | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        self.handshakes = {"succeeded": 0, "refused": 0}
        self.sock.connect(f"tcp://127.0.0.1:{port}")
        self.frame, self.read = frame, read
        self.stop = threading.Event()
        self.admitted = 0

    def count_handshakes(self) -> None:
        while self.monitor.poll(0):
            event = parse_monitor_message(self.monitor.recv_multipart())["event"]
            self.handshakes["succeeded" if event == zmq.EVENT_HANDSHAKE_SUCCEEDED else "refused"] += 1

    def run(self) -> None:
        self.go.wait()
        if not self.frame:
            self.stop.wait()
            return
        while not self.stop.is_set():
            try:
                self.sock.send(self.frame, zmq.NOBLOCK, copy=False)
            except zmq.Again:
                self.stop.wait(0.001)
            while self.read and self.sock.poll(0):
                try:
                    kinds = [m["type"] for m in decode_all(self.sock.recv(), MASTER_TYPES)]
                except ProtocolError:
                    continue
                self.admitted += sum(kind in ("welcome", "task") for kind in kinds)


def flood_run(root: Path, kind: str | None, peers: int = 2, tasks: int = 20, command: str = "sleep 0.2",
              flood_for_s: float | None = None, after_first_result: bool = False) -> dict[str, Any]:
    """See the module docstring; ``kind`` is a key of :data:`FLOODS` or None. With ``flood_for_s`` the
    flooders leave after that long and ``after_mib`` is the master's memory at its last sample (the
    run goes on meanwhile: a bag longer than the flood). With ``after_first_result`` the flood starts
    once the workers have sent a result (they connect from the flood's address, 127.0.0.1)."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    bag = write_bag(root / "tasks.txt", [command] * tasks)
    (root / "clusters.toml").write_text(f'[master]\nlisten = "tcp://127.0.0.1:{port}"\n\n{_CLUSTER}')
    started = time.perf_counter()
    # the master's output goes to files: a pipe read only at the end fills up and blocks the master
    err_path = root / "master.err"
    with (root / "master.out").open("w") as out, err_path.open("w") as err_file:
        master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", "clusters.toml"],
                                  cwd=root, stdout=out, stderr=err_file)
    state = root / "bats-run"
    context = zmq.Context()
    flooders: list[_Flooder] = []
    peak = after = 0
    flood_until = None
    try:
        if kind is not None:
            wait_for(lambda: (state / security.SECRET_FILE).exists(), 30, "the master's key")
            server_key = security.load_keys(state).public
            if after_first_result:
                wait_for(lambda: (state / "journal.sqlite").exists() and results(state), 60, "a first result")
            go = threading.Event()
            for n in range(peers):
                flooder = _Flooder(context, port, server_key, FLOODS[kind](n), read=kind == "hellos", go=go)
                flooder.start()
                flooders.append(flooder)
            go.set()
            flood_until = None if flood_for_s is None else time.monotonic() + flood_for_s
        process = psutil.Process(master.pid)
        while master.poll() is None:
            if flood_until is not None and time.monotonic() >= flood_until:
                flood_until = None
                for flooder in flooders:
                    flooder.stop.set()
                for flooder in flooders:
                    flooder.join(timeout=5)
                    flooder.count_handshakes()
                    flooder.sock.close(linger=0)  # the connection goes: what it cost should too
            try:
                after = process.memory_info().rss
                peak = max(peak, after)
            except psutil.Error:
                break
            if peak > MEMORY_GUARD:
                master.kill()
                break
            try:
                master.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
        master.wait(timeout=120)
    finally:
        for flooder in flooders:
            flooder.go.set()
            flooder.stop.set()
        for flooder in flooders:
            flooder.join(timeout=5)
            if not flooder.sock.closed:
                flooder.count_handshakes()
        master.kill()
        context.destroy(linger=0)
    master.wait(timeout=30)
    err = err_path.read_text(errors="replace")
    done = sorted(r["id"] for r in results(state)) if (state / "journal.sqlite").exists() else []
    return {"code": master.returncode, "stderr": err, "wall_s": time.perf_counter() - started,
            "peak_mib": peak / 2**20, "after_mib": after / 2**20, "done": len(done), "tasks": tasks,
            "admitted": sum(f.admitted for f in flooders),
            "handshakes": sum(f.handshakes["succeeded"] for f in flooders),
            "refused": sum(f.handshakes["refused"] for f in flooders)}


# time.time() stepped by STEP seconds two seconds into the run, as NTP or `date -s` would; set before
# anything of bats is imported, so every module sees the stepped wall clock
_STEPPED = """
import runpy, sys, time
real, start, step = time.time, time.time(), float(sys.argv.pop(1))
time.time = lambda: real() + (step if real() - start > 2.0 else 0.0)
sys.argv[0] = "bats-master"
runpy.run_module("bats.master.cli", run_name="__main__")
"""


def clock_step_run(root: Path, step: float, budget: float = 40.0, tasks: int = 30) -> dict[str, Any]:
    """A BaTS run on two emulated clouds within ``budget`` while its wall clock jumps by ``step``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "clusters.toml").write_text(CONFIG)
    bag = write_bag(root / "tasks.txt", ["sleep 0.3"] * tasks)
    run = subprocess.run([sys.executable, "-c", _STEPPED, str(step), "--quiet", "--bag", str(bag),
                          "--config", "clusters.toml", "--budget", str(budget)],
                         cwd=root, capture_output=True, text=True, timeout=240)
    report_path = root / "bats-run" / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    return {"code": run.returncode, "stderr": run.stderr, "budget": budget,
            "cost": (report.get("cost") or {}).get("total"), "tasks": tasks,
            "done": (report.get("tasks") or {}).get("done", 0),
            "max_uptime_s": max((m["uptime_s"] for m in report.get("machines", [])), default=0.0)}


def state_dir_refusals(root: Path) -> dict[str, Any]:
    """Four attempts on one run's state directory that must each be refused (exit 2) and leave it
    whole: a second ``--resume`` and a fresh start on it while its master lives, then, once it has
    ended, ``--resume`` with its bag edited and with its config edited."""
    root.mkdir(parents=True, exist_ok=True)
    config = '[clusters.local]\nprovisioner = "local"\nmax = 2\n'
    (root / "clusters.toml").write_text(config)
    bag = write_bag(root / "tasks.txt", ["sleep 1"] * 4)
    state = root / "bats-run"
    first = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", "clusters.toml"], cwd=root,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    codes = []
    try:
        wait_for(lambda: (state / "journal.sqlite").exists(), 30, "the run to start")
        for args in (["--resume"], ["--bag", str(bag), "--config", "clusters.toml"]):
            codes.append(subprocess.run([*MASTER, "--quiet", *args], cwd=root, capture_output=True,
                                        timeout=60).returncode)
        first_code = first.wait(timeout=120)
    finally:
        first.kill()
    kept = (state / "bag.txt").read_bytes()
    (state / "bag.txt").write_bytes(kept.replace(b"sleep 1", b"sleep 2", 1))
    codes.append(subprocess.run([*MASTER, "--quiet", "--resume"], cwd=root, capture_output=True,
                                timeout=60).returncode)
    (state / "bag.txt").write_bytes(kept)
    (state / "config.toml").write_text(config.replace("max = 2", "max = 9"))
    codes.append(subprocess.run([*MASTER, "--quiet", "--resume"], cwd=root, capture_output=True,
                                timeout=60).returncode)
    whole = first_code == 0 and sorted(r["id"] for r in results(state)) == [1, 2, 3, 4]
    return {"attempts": len(codes), "refused": sum(code == 2 for code in codes), "run_whole": whole}
