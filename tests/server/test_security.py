"""CurveZMQ by default: the master's keys, who may connect, and what a stolen token is worth.

The end-to-end cases run the real ``bats-master`` with real local workers on 127.0.0.1 and attack
it from this process: a plain-TCP peer, a CURVE peer with the wrong server key, and a CURVE peer
that copied a running worker's machine id and token from its command line.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import zmq
from helpers.runs import MASTER, free_port, wait_for, workers_of, write_bag
from helpers.runs import results as export

from bats.common.protocol import MASTER_TYPES, decode_all, encode
from bats.master.server import security
from bats.provisioners.base import Bootstrap, MachineHandle, Provisioner
from bats.worker.main import build_parser


# ------------------------------------------------------------------ units
@pytest.mark.parametrize("endpoint, loopback", [
    ("tcp://127.0.0.1:5555", True), ("tcp://127.3.2.1:*", True), ("tcp://localhost:5", True),
    ("tcp://[::1]:5555", True), ("ipc:///tmp/x", True), ("inproc://x", True),
    ("tcp://0.0.0.0:5555", False), ("tcp://*:5555", False), ("tcp://10.0.0.5:5555", False),
    ("tcp://eth0:5555", False), ("tcp://[::]:5555", False), ("udp://127.0.0.1:5", False),
])
def test_is_loopback(endpoint, loopback):
    assert security.is_loopback(endpoint) is loopback


def test_keys_round_trip_with_a_private_secret_file(tmp_path):
    keys = security.new_keys()
    security.save_keys(tmp_path, keys)
    assert stat.S_IMODE((tmp_path / security.SECRET_FILE).stat().st_mode) == 0o600
    assert security.load_keys(tmp_path) == keys
    assert keys.public_text in (tmp_path / security.PUBLIC_FILE).read_text()
    assert "secret-key" not in (tmp_path / security.PUBLIC_FILE).read_text()
    with pytest.raises(security.KeyFileError):  # never overwritten
        security.save_keys(tmp_path, security.new_keys())
    os.chmod(tmp_path / security.SECRET_FILE, 0o644)
    with pytest.raises(security.KeyFileError, match="readable by others"):
        security.load_keys(tmp_path)


def test_bootstrap_argv_carries_the_server_key():
    class Dummy(Provisioner):
        def acquire(self, n): return []
        def release(self, handles): pass
        def status(self, handles): return {}

    handle = MachineHandle("m-1", "c", "tok")
    key = "-" + "K" * 39  # Z85 keys may begin with "-": still one argument, still parsed as the key
    with_key = Dummy(None, Bootstrap("tcp://h:1", "run", server_key=key)).bootstrap_argv(handle)  # type: ignore[arg-type]
    assert f"--server-key={key}" in with_key
    assert build_parser().parse_args(with_key[with_key.index("--master"):]).server_key == key
    assert not any(a.startswith("--server-key") for a in
                   Dummy(None, Bootstrap("tcp://h:1", "run")).bootstrap_argv(handle))  # type: ignore[arg-type]


# ------------------------------------------------------------------ end to end
def _config(tmp_path: Path, port: int, listen_host: str = "127.0.0.1") -> Path:
    config = tmp_path / "clusters.toml"
    config.write_text(f'[master]\nlisten = "tcp://{listen_host}:{port}"\n\n'
                      '[clusters.local]\nprovisioner = "local"\nmax = 1\n')
    return config


def _worker_argv(master_pid: int) -> list[str]:
    workers = wait_for(lambda: workers_of(master_pid), 30, "a worker")
    return workers[0].cmdline()


def _worker_token(master_pid: int) -> str:
    """The token a worker was started with: in its environment (readable by its own user only),
    never on its command line."""
    workers = wait_for(lambda: workers_of(master_pid), 30, "a worker")
    return workers[0].environ()["BATS_TOKEN"]


def _arg(argv: list[str], flag: str) -> str:
    for k, arg in enumerate(argv):
        if arg == flag:
            return argv[k + 1]
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1:]
    raise AssertionError(f"{flag} not in {argv}")


def _replies(sock: zmq.Socket, wait_s: float) -> list[dict]:
    """Every message the master sent this socket within ``wait_s`` (an upper bound, not a timing check)."""
    got: list[dict] = []
    if sock.poll(int(wait_s * 1000)):
        while sock.poll(0):
            got.extend(decode_all(sock.recv(), MASTER_TYPES))
    return got


def test_stolen_token_and_plain_peers_get_nothing(tmp_path):
    port = free_port()
    marks = tmp_path / "ran"
    bag = write_bag(tmp_path / "tasks.txt", [f"echo {i} >> {marks}; sleep 0.3" for i in range(1, 9)])
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(_config(tmp_path, port))],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    context = zmq.Context()
    try:
        argv = _worker_argv(master.pid)
        server_key = _arg(argv, "--server-key").encode()
        hello = encode("hello", machine=_arg(argv, "--machine"), token=_worker_token(master.pid),
                       cluster=_arg(argv, "--cluster"), host="thief", cpus=64, version="0")
        wait_for(lambda: marks.exists(), 30, "the real worker to start a task")

        def dealer(curve_server_key: bytes | None, routing_id: bytes | None = None) -> zmq.Socket:
            sock = context.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.ROUTING_ID, routing_id or b"t" + os.urandom(15))
            if curve_server_key is not None:
                public, secret = zmq.curve_keypair()
                sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = curve_server_key, public, secret
            sock.connect(f"tcp://127.0.0.1:{port}")
            return sock

        plain = dealer(None)  # no CURVE handshake: the master never sees a frame
        plain.send(hello)
        wrong_key = dealer(zmq.curve_keypair()[0])  # a server key that is not the master's
        wrong_key.send(hello)
        thief = dealer(server_key)  # the right server key, a fresh client key, a copied token
        thief.send(hello)
        thief.send(encode("ask", n=2))
        stolen = _replies(thief, 5.0)
        assert [m["type"] for m in stolen][:1] == ["stop"], stolen
        assert "another connection" in stolen[0]["reason"]
        assert not any(m["type"] in ("welcome", "task") for m in stolen)
        assert _replies(plain, 0.5) == [] and _replies(wrong_key, 0.5) == []
        predictable = context.socket(zmq.DEALER)  # libzmq's own connection ids are predictable: refused
        predictable.setsockopt(zmq.LINGER, 0)
        predictable.curve_serverkey = server_key
        predictable.curve_publickey, predictable.curve_secretkey = zmq.curve_keypair()
        predictable.connect(f"tcp://127.0.0.1:{port}")
        predictable.send(hello)
        refused = _replies(predictable, 5.0)
        assert [m["type"] for m in refused] == ["stop"] and "random" in refused[0]["reason"]
        out, err = master.communicate(timeout=60)
    finally:
        master.kill()
        context.destroy(linger=0)
    assert master.returncode == 0, err
    assert "second client key" in err
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    assert len(report["machines"]) == 1 and report["machines"][0]["nt"] == 8  # the thief ran nothing
    assert sorted(r["id"] for r in export(tmp_path / "bats-run")) == list(range(1, 9))


def test_encrypted_by_default_and_the_key_survives_resume(tmp_path):
    bag = write_bag(tmp_path / "tasks.txt", ["true"] * 3)
    run = [*MASTER, "--quiet", "--workers", "1"]
    done = subprocess.run([*run, "--bag", str(bag)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    state = tmp_path / "bats-run"
    keys = security.load_keys(state)
    assert stat.S_IMODE((state / security.SECRET_FILE).stat().st_mode) == 0o600
    done = subprocess.run([*run, "--resume"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert security.load_keys(state) == keys


def test_insecure_only_on_loopback_and_loudly(tmp_path):
    bag = write_bag(tmp_path / "tasks.txt", ["true"] * 2)
    wide = subprocess.run([*MASTER, "--bag", str(bag), "--config", str(_config(tmp_path, free_port(), "0.0.0.0")),
                           "--insecure"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert wide.returncode == 2
    assert wide.stderr.count("\n") == 1 and "--insecure" in wide.stderr and "loopback" in wide.stderr
    assert not (tmp_path / "bats-run").exists()
    local = subprocess.run([*MASTER, "--quiet", "--bag", str(bag), "--workers", "1", "--insecure"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert local.returncode == 0, local.stderr
    assert "NOT encrypted" in local.stderr
    assert not (tmp_path / "bats-run" / security.SECRET_FILE).exists()


def test_worker_refuses_a_malformed_server_key(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bats.worker", "--master", "tcp://127.0.0.1:1", "--machine", "m",
                           "--server-key", "short"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "40 Z85 characters" in proc.stderr


def test_a_connection_that_takes_a_dropped_workers_id_gets_nothing(tmp_path):
    """A worker's connection drops; another connection (another client key) comes with the same
    connection id. The master stops talking to that id: no task, no state change."""
    port = free_port()
    config = tmp_path / "clusters.toml"
    config.write_text(f'[master]\nlisten = "tcp://127.0.0.1:{port}"\nheartbeat = "0.25s"\nliveness = "1.5s"\n\n'
                      '[clusters.local]\nprovisioner = "local"\nmax = 1\nstartup = "4s"\n')
    bag = write_bag(tmp_path / "tasks.txt", [f"echo {i}" for i in range(1, 6)])
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config)], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    context = zmq.Context()
    try:
        # the worker is still sleeping through its start-up: its command line shows the bootstrap
        shell = wait_for(lambda: [p for p in psutil.Process(master.pid).children(recursive=True)
                                  if "--machine" in " ".join(p.cmdline())], 30, "the bootstrap")[0]
        token = shell.environ()["BATS_TOKEN"]  # the token holder: the worker's own user
        argv = shlex.split(shell.cmdline()[-1].split("exec ", 1)[1])
        server_key = _arg(argv, "--server-key").encode()
        routing_id = b"t" + os.urandom(15)

        def connect(keys: tuple[bytes, bytes]) -> zmq.Socket:
            sock = context.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.ROUTING_ID, routing_id)
            sock.curve_serverkey = server_key
            sock.curve_publickey, sock.curve_secretkey = keys
            sock.connect(f"tcp://127.0.0.1:{port}")
            return sock

        first = connect(zmq.curve_keypair())  # plays the worker, with the token, before the real one
        first.send(encode("hello", machine=_arg(argv, "--machine"), token=token,
                          cluster=_arg(argv, "--cluster"), host="h", cpus=1, version="0"))
        assert [m["type"] for m in _replies(first, 10.0)][:1] == ["welcome"]
        first.close()  # the connection drops; the ROUTER frees its id (a live id cannot be taken)
        time.sleep(1.0)
        impostor = connect(zmq.curve_keypair())
        impostor.send(encode("ask", n=2))
        got = _replies(impostor, 3.0)
        assert not any(m["type"] in ("task", "welcome") for m in got), got
        out, err = master.communicate(timeout=90)
    finally:
        master.kill()
        context.destroy(linger=0)
    assert "took its connection id" in err
    assert sorted(r["id"] for r in export(tmp_path / "bats-run")) == list(range(1, 6))


def test_no_token_or_secret_key_is_on_any_command_line(tmp_path):
    """Every process of a run (the master, each worker, a worker still in its start-up shell) shows
    other local users its command line in ``ps`` and ``/proc/PID/cmdline``: none holds a token or
    the master's secret key."""
    port = free_port()
    config = tmp_path / "clusters.toml"
    config.write_text(f'[master]\nlisten = "tcp://127.0.0.1:{port}"\n\n'
                      '[clusters.local]\nprovisioner = "local"\nmax = 2\n\n'
                      '[clusters.late]\nprovisioner = "local"\nmax = 1\nstartup = "2s"\n')
    bag = write_bag(tmp_path / "tasks.txt", ["sleep 0.5"] * 12)
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config)], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        procs = wait_for(lambda: (lambda kids: kids if len(kids) >= 3 else None)(
            [p for p in psutil.Process(master.pid).children(recursive=True) if "--machine" in " ".join(p.cmdline())]),
            30, "three workers (one still in its start-up shell)")
        secrets_seen = {p.environ()["BATS_TOKEN"] for p in procs}
        assert len(secrets_seen) == 3 and all(len(s) >= 32 for s in secrets_seen)
        secret_key = (tmp_path / "bats-run" / "master.key_secret").read_text() if (
            tmp_path / "bats-run" / "master.key_secret").exists() else ""
        for proc in [psutil.Process(master.pid), *procs]:
            shown = (Path("/proc") / str(proc.pid) / "cmdline").read_bytes().decode(errors="replace")
            assert not any(s in shown for s in secrets_seen), shown
            assert "--token\x00" not in shown and "BATS_TOKEN" not in shown
            if secret_key:
                assert secret_key.strip() not in shown
        assert master.wait(timeout=120) == 0
    finally:
        if master.poll() is None:
            master.kill()
            master.wait()

