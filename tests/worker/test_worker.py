"""Tests of ``bats.worker``: the real worker process against a fake master on a ROUTER socket.

Each test starts ``python -m bats.worker`` as a subprocess connected to a ROUTER the test binds on
a random localhost port, and drives it with the real protocol (``encode`` / ``decode``).
"""

from __future__ import annotations

import collections
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import psutil
import pytest
import zmq
from helpers.runs import wait_for

import bats.common
from bats.common.protocol import OUTPUT_TAIL_BYTES, WORKER_TYPES, decode_all, encode
from bats.worker.shell import shell_kind, takes_sessions

pytestmark = pytest.mark.timeout(30)

MACHINE = "m-1"
TOKEN = "tok-123"
CLUSTER = "c1"


class FakeMaster:
    """A ROUTER socket speaking the master's side of the protocol, one step at a time."""

    def __init__(self, ctx: zmq.Context, port: int | None = None) -> None:
        self.ctx = ctx
        self.sock = ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        if port is None:
            self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        else:
            self.port = port
            deadline = time.monotonic() + 5
            while True:  # the old socket's port may take a moment to free up
                try:
                    self.sock.bind(f"tcp://127.0.0.1:{port}")
                    break
                except zmq.ZMQError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        self.endpoint = f"tcp://127.0.0.1:{self.port}"
        self.peer = b""
        self.inbox: collections.deque[dict[str, Any]] = collections.deque()
        self.frames = 0  # frames received

    def recv(self, timeout: float = 5.0) -> dict[str, Any]:
        """The next message from any worker (heartbeats included); a frame may carry several."""
        if not self.inbox:
            if not self.sock.poll(int(timeout * 1000)):
                raise AssertionError(f"no message from the worker within {timeout}s")
            ident, frame = self.sock.recv_multipart()
            self.peer = ident
            self.frames += 1
            self.inbox.extend(decode_all(frame, WORKER_TYPES))
        return self.inbox.popleft()

    def expect(self, kind: str, timeout: float = 5.0) -> dict[str, Any]:
        """The next message other than a heartbeat, which must be of type ``kind``."""
        deadline = time.monotonic() + timeout
        while True:
            msg = self.recv(max(0.0, deadline - time.monotonic()))
            if msg["type"] != "heartbeat":
                assert msg["type"] == kind, f"expected {kind}, got {msg}"
                return msg

    def send(self, kind: str, **fields: Any) -> None:
        self.sock.send_multipart([self.peer, encode(kind, **fields)])

    def send_raw(self, frame: bytes) -> None:
        self.sock.send_multipart([self.peer, frame])

    def welcome(self, heartbeat_s: float = 0.2, liveness_s: float = 10.0, slots: int = 1,
                shell: str = "/bin/sh", prefetch: int = 1) -> None:
        self.send("welcome", machine=MACHINE, heartbeat_s=heartbeat_s, liveness_s=liveness_s, prefetch=prefetch,
                  slots=slots, shell=shell)

    def handshake(self, heartbeat_s: float = 0.2, liveness_s: float = 10.0, shell: str = "/bin/sh") -> dict[str, Any]:
        """hello → welcome → ask; returns the hello."""
        hello = self.expect("hello", timeout=10)
        self.welcome(heartbeat_s, liveness_s, shell=shell)
        ask = self.expect("ask")
        assert ask["n"] == 2
        return hello

    def task(self, task: int, command: str, timeout_s: float | None = None, attempt: int = 0) -> None:
        self.send("task", task=task, attempt=attempt, command=command, timeout_s=timeout_s)

    def close(self) -> None:
        self.sock.close(linger=0)


@pytest.fixture
def zctx() -> Iterator[zmq.Context]:
    ctx = zmq.Context()
    yield ctx
    ctx.destroy(linger=0)


@pytest.fixture
def master(zctx: zmq.Context) -> Iterator[FakeMaster]:
    m = FakeMaster(zctx)
    yield m
    m.close()


def worker_argv(endpoint: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "bats.worker", "--master", endpoint, "--machine", MACHINE,
            "--token", TOKEN, "--cluster", CLUSTER, "--heartbeat", "0.2", *extra]  # the old flag still works


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Any]:
    """Start workers; kill any still running at the end; show their logs on failure."""
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []

    def _spawn(endpoint: str, *extra: str) -> subprocess.Popen[bytes]:
        log_path = tmp_path / f"worker-{len(procs)}.log"
        with open(log_path, "wb") as log_file:
            proc = subprocess.Popen(worker_argv(endpoint, "--log-level", "DEBUG", *extra),
                                    stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file)
        procs.append(proc)
        logs.append(log_path)
        return proc

    yield _spawn
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    for path in logs:
        sys.stderr.write(f"--- {path.name}\n{path.read_text(errors='replace')[-4000:]}\n")


def wait_exit(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> int:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"worker pid {proc.pid} did not exit within {timeout}s") from None


def group_alive(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``."""
    alive = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return alive


def pid_gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# -- handshake -------------------------------------------------------------------------------


def test_hello_fields_and_ask_two_after_welcome(master: FakeMaster, spawn: Any) -> None:
    spawn(master.endpoint)
    hello = master.expect("hello", timeout=10)
    assert hello["machine"] == MACHINE
    assert hello["token"] == TOKEN
    assert hello["cluster"] == CLUSTER
    assert hello["host"] == socket.gethostname()
    assert hello["cpus"] == os.cpu_count()
    assert hello["version"] == bats.common.__version__
    master.welcome()
    assert master.expect("ask")["n"] == 2
    # the welcome's heartbeat (0.2 s) is adopted: heartbeats keep coming while idle
    assert master.recv(2)["type"] == "heartbeat"


def test_bad_flags_exit_2(master: FakeMaster) -> None:
    for extra in (["--heartbeat", "abc"], ["--slowdown", "0"], ["--bogus"]):
        done = subprocess.run(worker_argv(master.endpoint, *extra), check=False, capture_output=True, timeout=10)
        assert done.returncode == 2, extra
    done = subprocess.run([sys.executable, "-m", "bats.worker", "--master", master.endpoint],
                          check=False, capture_output=True, timeout=10)
    assert done.returncode == 2
    assert b"--machine" in done.stderr
    done = subprocess.run(worker_argv("tcp://127.0.0.1:notaport"), check=False, capture_output=True, timeout=10)
    assert done.returncode == 2
    assert b"notaport" in done.stderr


@pytest.mark.parametrize("module", ["bats.worker.main", "bats.worker.s3files"])
def test_worker_imports_stay_light(module: str) -> None:
    """Nor does [files] through S3 (s3files) load boto3: the master signs its URLs, urllib fetches."""
    done = subprocess.run([sys.executable, "-c", f"import {module}, sys; print(sorted(sys.modules))"],
                          capture_output=True, text=True, timeout=20, check=True)
    modules = eval(done.stdout)  # a printed list of str
    heavy = ("numpy", "scipy", "boto3", "botocore", "libcloud", "rich", "bats.master", "bats.provisioners",
             "bats.common.config")
    loaded = [m for m in modules if any(m == h or m.startswith(h + ".") for h in heavy)]
    assert loaded == []
    if module == "bats.worker.main":
        assert "zmq" in modules


# -- running tasks ---------------------------------------------------------------------------


def test_task_result_exit_code_runtime_and_output(master: FakeMaster, spawn: Any) -> None:
    spawn(master.endpoint)
    master.handshake()
    master.task(7, "sleep 0.2; echo out; echo err >&2", attempt=2)
    res = master.expect("result")
    assert (res["task"], res["attempt"], res["exit_code"], res["timed_out"]) == (7, 2, 0, False)
    assert res["stdout"] == b"out\n"
    assert res["stderr"] == b"err\n"
    assert isinstance(res["stdout"], bytes)
    assert 0.2 <= res["runtime_s"] < 1.5
    assert res["ask"] is True


def test_nonzero_exit(master: FakeMaster, spawn: Any) -> None:
    spawn(master.endpoint)
    master.handshake()
    master.task(1, "echo failing >&2; exit 7")
    res = master.expect("result")
    assert res["exit_code"] == 7
    assert res["timed_out"] is False
    assert res["stderr"] == b"failing\n"
    master.task(2, "kill -TERM $$")
    assert master.expect("result")["exit_code"] == -signal.SIGTERM


def test_output_tail_capped_at_64k(master: FakeMaster, spawn: Any) -> None:
    spawn(master.endpoint)
    master.handshake()
    master.task(1, "head -c 204800 /dev/zero | tr '\\0' a; printf END; "
                   "head -c 204800 /dev/zero | tr '\\0' b >&2; printf FIN >&2")
    res = master.expect("result")
    assert res["exit_code"] == 0
    assert len(res["stdout"]) == OUTPUT_TAIL_BYTES
    assert res["stdout"].endswith(b"aaaEND")
    assert len(res["stderr"]) == OUTPUT_TAIL_BYTES
    assert res["stderr"].endswith(b"bbbFIN")


def test_timeout_kills_the_task_group(master: FakeMaster, spawn: Any) -> None:
    spawn(master.endpoint)
    master.handshake()
    start = time.monotonic()
    master.task(3, "echo $$; sleep 30 & sleep 30", timeout_s=0.5)
    res = master.expect("result")
    assert time.monotonic() - start < 3
    assert res["timed_out"] is True
    assert res["exit_code"] == -9
    assert 0.45 <= res["runtime_s"] < 2
    pgid = int(res["stdout"].split()[0])
    wait_for(lambda: not group_alive(pgid), 3, "the task's process group to end")


def test_background_child_holding_the_pipe_does_not_hold_the_result(master: FakeMaster, spawn: Any) -> None:
    spawn(master.endpoint)
    master.handshake()
    start = time.monotonic()
    master.task(4, "echo $$; sleep 30 & echo main")
    res = master.expect("result")
    assert time.monotonic() - start < 3
    assert res["exit_code"] == 0
    pid, main = res["stdout"].split()
    assert main == b"main"
    wait_for(lambda: not group_alive(int(pid)), 3, "the leftover sleep to be cleaned up")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreapers are a Linux feature")
@pytest.mark.parametrize("timeout_s", [None, 0.5])
def test_a_process_a_task_detached_from_its_group_does_not_outlive_it(master: FakeMaster, spawn: Any,
                                                                      tmp_path: Path, timeout_s: float | None) -> None:
    spawn(master.endpoint)
    master.handshake()
    pidfile = tmp_path / "detached.pid"
    # setsid puts the sleeper in a session (and group) of its own: the group kill cannot reach it
    master.task(5, f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 60' & sleep 0.3; "
                   f"{'sleep 30' if timeout_s else 'true'}", timeout_s=timeout_s)
    res = master.expect("result")
    assert res["timed_out"] is (timeout_s is not None)
    assert b"left running outside its process group" in res["stderr"]  # reported with the task
    detached = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 5, "the detached pid"))
    wait_for(lambda: pid_gone(detached), 5, "the detached sleeper to be killed")


def test_slowdown_stretches_runtime_while_serving_heartbeats(master: FakeMaster, spawn: Any) -> None:
    spawn(master.endpoint, "--slowdown", "3")
    master.handshake(heartbeat_s=0.1)
    start = time.monotonic()
    master.task(5, "sleep 0.2")
    heartbeats = 0
    while True:
        msg = master.recv(5)
        if msg["type"] == "heartbeat":
            heartbeats += 1
            continue
        assert msg["type"] == "result"
        break
    elapsed = time.monotonic() - start
    assert 0.55 <= msg["runtime_s"] < 1.2
    assert elapsed >= 0.55
    assert heartbeats >= 2  # the padding does not block the loop


def test_prefetch_runs_tasks_one_after_the_other(master: FakeMaster, spawn: Any, tmp_path: Path) -> None:
    spawn(master.endpoint)
    master.handshake()
    mark = shlex.quote(str(tmp_path / "mark"))
    master.task(10, f"sleep 0.3; echo first > {mark}")
    master.task(11, f"cat {mark}")
    first = master.expect("result")
    second = master.expect("result")
    assert first["task"] == 10 and first["exit_code"] == 0
    assert second["task"] == 11 and second["exit_code"] == 0
    assert second["stdout"] == b"first\n"  # the second started after the first ended
    assert first["ask"] is True and second["ask"] is True


def test_results_of_short_tasks_share_frames_while_tasks_are_queued(master: FakeMaster, spawn: Any) -> None:
    # a worker holding 8 tasks sends a finished task's result with the next ones' while it still has
    # as many tasks queued as the held results ask for; the last results go out as the queue empties
    spawn(master.endpoint, "--heartbeat", "30")
    master.expect("hello", timeout=10)
    master.welcome(heartbeat_s=30, prefetch=7)
    assert master.expect("ask")["n"] == 8
    frames = master.frames
    for i in range(8):
        master.task(i, f"exit {i}")
    seen = [master.expect("result") for _ in range(8)]
    assert sorted((r["task"], r["exit_code"], r["ask"]) for r in seen) == [(i, i, True) for i in range(8)]
    assert master.frames - frames < 8


def test_noop_mode_answers_every_task_at_once(master: FakeMaster, spawn: Any, tmp_path: Path) -> None:
    spawn(master.endpoint, "--noop")
    master.handshake()
    marker = tmp_path / "ran"
    for i in range(200):
        master.task(i, f"touch {shlex.quote(str(marker))}")
    seen = [master.expect("result") for _ in range(200)]
    assert [r["task"] for r in seen] == list(range(200))
    assert all(r["exit_code"] == 0 and r["runtime_s"] == 0.0 and r["stdout"] == b"" and r["ask"] for r in seen)
    assert not marker.exists()


# -- control messages ------------------------------------------------------------------------


def test_stop_kills_the_task_and_exits_zero(master: FakeMaster, spawn: Any) -> None:
    proc = spawn(master.endpoint)
    master.handshake()
    master.task(1, "sleep 30")
    wait_for(lambda: psutil.Process(proc.pid).children(), 5, "the task's process to start")
    child = psutil.Process(proc.pid).children()[0]
    master.send("stop", reason="done")
    assert master.expect("bye")["reason"] == "stopped"
    assert wait_exit(proc, 3) == 0
    wait_for(lambda: pid_gone(child.pid), 3, "the task's child to be gone")


def test_cancel_kills_the_running_attempt_sends_no_result_and_starts_the_queued_one(master: FakeMaster,
                                                                                   spawn: Any) -> None:
    proc = spawn(master.endpoint)
    master.handshake()
    master.task(1, "sleep 30")
    master.task(2, "echo second")
    wait_for(lambda: psutil.Process(proc.pid).children(), 5, "the task's process to start")
    child = psutil.Process(proc.pid).children()[0]
    master.send("cancel", task=1, attempt=0)
    assert master.expect("ask")["n"] == 1  # the stopped attempt's slot, and no result for it
    second = master.expect("result")
    assert (second["task"], second["stdout"]) == (2, b"second\n")
    wait_for(lambda: pid_gone(child.pid), 3, "the cancelled task's process to be gone")
    master.send("cancel", task=7, attempt=1)  # nothing of that name: nothing happens
    master.task(3, "true")
    assert master.expect("result")["task"] == 3


def test_sigterm_sends_bye_and_exits_zero(master: FakeMaster, spawn: Any) -> None:
    proc = spawn(master.endpoint)
    master.handshake()
    master.task(1, "sleep 30")
    wait_for(lambda: psutil.Process(proc.pid).children(), 5, "the task's process to start")
    child = psutil.Process(proc.pid).children()[0]
    proc.send_signal(signal.SIGTERM)
    assert master.expect("bye")["reason"] == "signal"
    assert wait_exit(proc, 3) == 0
    wait_for(lambda: pid_gone(child.pid), 3, "the task's child to be gone")


def test_a_welcome_naming_a_shell_this_machine_lacks_makes_the_worker_leave_saying_so(master: FakeMaster,
                                                                                       spawn: Any) -> None:
    proc = spawn(master.endpoint)
    master.expect("hello", timeout=10)
    master.welcome(shell="/nonexistent/zsh")
    assert master.expect("bye")["reason"] == "[master] shell /nonexistent/zsh: not installed on this machine"
    wait_exit(proc, 5)


def test_a_machine_stopped_from_outside_does_not_fail_its_task(master: FakeMaster, spawn: Any) -> None:
    """A batch scheduler stopping a job signals every process of it, the task possibly a moment
    before the worker: the worker leaves without reporting the task, which goes back into the bag."""
    proc = spawn(master.endpoint)
    master.handshake()
    master.task(1, "sleep 30")
    wait_for(lambda: psutil.Process(proc.pid).children(), 5, "the task's process to start")
    child = psutil.Process(proc.pid).children()[0]
    os.killpg(child.pid, signal.SIGTERM)  # the task's whole process group, as a scheduler does
    time.sleep(0.6)
    proc.send_signal(signal.SIGTERM)
    assert master.expect("bye")["reason"] == "signal"  # no result before it
    assert wait_exit(proc, 3) == 0


def test_unknown_triggers_hello_and_asks_for_free_slots(master: FakeMaster, spawn: Any) -> None:
    spawn(master.endpoint)
    master.handshake()
    master.send("unknown")
    master.expect("hello")
    master.welcome()
    assert master.expect("ask")["n"] == 2
    master.task(1, "sleep 0.5; echo done")
    master.send("wait")
    master.send("unknown")
    master.expect("hello")
    master.welcome()
    assert master.expect("ask")["n"] == 1  # one slot is held by the running task
    res = master.expect("result")
    assert res["task"] == 1 and res["stdout"] == b"done\n" and res["ask"] is True


def test_master_restart_worker_says_hello_again(zctx: zmq.Context, spawn: Any) -> None:
    first = FakeMaster(zctx)
    port = first.port
    spawn(first.endpoint, "--liveness", "1")
    first.handshake(heartbeat_s=0.2, liveness_s=1.0)
    first.close()
    time.sleep(0.3)
    second = FakeMaster(zctx, port)
    try:
        start = time.monotonic()
        second.expect("hello", timeout=3)
        assert time.monotonic() - start < 2.5
        second.welcome(heartbeat_s=0.2, liveness_s=1.0)
        assert second.expect("ask")["n"] == 2
    finally:
        second.close()


def test_results_finished_while_disconnected_follow_the_new_welcome(zctx: zmq.Context, spawn: Any) -> None:
    first = FakeMaster(zctx)
    port = first.port
    spawn(first.endpoint)
    first.handshake(heartbeat_s=0.2, liveness_s=0.6)
    first.task(42, "sleep 1.2; echo late")
    first.close()  # down for longer than the liveness: the worker reconnects meanwhile
    time.sleep(1.6)
    second = FakeMaster(zctx, port)
    try:
        second.expect("hello", timeout=3)
        second.welcome(heartbeat_s=0.2, liveness_s=5.0)
        res = second.expect("result")
        assert res["task"] == 42 and res["stdout"] == b"late\n"
        assert res["ask"] is False  # the free slots are asked for explicitly
        assert second.expect("ask")["n"] == 2
    finally:
        second.close()


def test_garbage_from_the_master_is_dropped(master: FakeMaster, spawn: Any) -> None:
    proc = spawn(master.endpoint)
    master.handshake()
    garbage = [
        os.urandom(64),
        b"",
        b"\xc1",  # never valid msgpack
        msgpack.packb([1, 2, 3]),
        msgpack.packb({"v": 99, "type": "task", "task": 1, "attempt": 0, "command": "true", "timeout_s": None}),
        encode("bogus"),
        encode("hello", machine="x", token="", cluster="", host="", cpus=1, version="0"),  # a worker type
        encode("task", task=1),
        encode("task", task=True, attempt=0, command="true", timeout_s=None),
        encode("task", task=1, attempt=0, command=b"true", timeout_s=None),
        encode("welcome", machine=MACHINE, heartbeat_s="fast", liveness_s=1, prefetch=1, slots=1, shell="/bin/sh"),
        b"\x00" * (2 << 20),
    ]
    for frame in garbage:
        master.send_raw(frame)
    master.sock.send_multipart([master.peer, b"part one", encode("wait")])
    master.task(9, "echo still here")
    res = master.expect("result")
    assert res["task"] == 9 and res["stdout"] == b"still here\n"
    assert proc.poll() is None


def test_exit_with_parent(master: FakeMaster, tmp_path: Path) -> None:
    argv = shlex.join(worker_argv(master.endpoint, "--exit-with-parent"))
    script = f"{argv} >/dev/null 2>&1 & echo $!; sleep 1"
    parent = subprocess.Popen(["/bin/sh", "-c", script], stdout=subprocess.PIPE)
    worker_pid = 0
    try:
        assert parent.stdout is not None
        worker_pid = int(parent.stdout.readline())
        master.handshake()
        assert parent.wait(5) == 0
        assert master.expect("bye", timeout=3)["reason"] == "parent exited"
        wait_for(lambda: pid_gone(worker_pid), 3, "the worker to exit")
    finally:
        parent.kill()
        parent.wait(5)
        if worker_pid and not pid_gone(worker_pid):
            os.kill(worker_pid, signal.SIGKILL)


def test_a_worker_whose_named_parent_is_gone_before_it_starts_leaves_at_once(tmp_path: Path):
    """--exit-with-parent with the master's pid in BATS_PARENT_PID: a worker started after its master
    died (an orphan of a start-up shell) does not reconnect forever."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    proc = subprocess.Popen([sys.executable, "-m", "bats.worker", "--master", "tcp://127.0.0.1:9", "--machine", "m",
                             "--cluster", "c", "--exit-with-parent"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "BATS_PARENT_PID": str(gone.pid),
                                                                     "BATS_TOKEN": "t"})
    assert proc.wait(timeout=20) == 0
    assert "parent process" in proc.stderr.read()


# -- several slots -----------------------------------------------------------------------------


def test_a_worker_with_three_slots_runs_three_tasks_at_once_and_asks_for_slots_plus_prefetch(
        master: FakeMaster, spawn: Any, tmp_path: Path) -> None:
    spawn(master.endpoint)
    master.expect("hello", timeout=10)
    master.welcome(slots=3)
    assert master.expect("ask")["n"] == 4  # three slots and one prefetched
    gate = shlex.quote(str(tmp_path / "gate"))
    for task in (1, 2, 3):  # each waits until all three have started: only possible side by side
        master.task(task, f"echo {task} >> {gate}; while [ $(wc -l < {gate}) -lt 3 ]; do sleep 0.05; done",
                    timeout_s=10)
    master.task(4, f"wc -l < {gate}")  # queued until a slot frees
    results = {r["task"]: r for r in (master.expect("result", timeout=10) for _ in range(4))}
    assert all(results[t]["exit_code"] == 0 and not results[t]["timed_out"] for t in (1, 2, 3))
    assert results[4]["stdout"].strip() == b"3"


def test_a_timeout_or_cancel_on_one_slot_leaves_the_others_running(master: FakeMaster, spawn: Any,
                                                                    tmp_path: Path) -> None:
    spawn(master.endpoint)
    master.expect("hello", timeout=10)
    master.welcome(slots=3)
    master.expect("ask")
    master.task(1, "sleep 30", timeout_s=0.5)
    master.task(2, "sleep 30")
    master.task(3, "sleep 1; echo three")
    first = master.expect("result")
    assert (first["task"], first["timed_out"]) == (1, True)
    master.send("cancel", task=2, attempt=0)
    assert master.expect("ask")["n"] == 1  # no result for the cancelled attempt
    third = master.expect("result")
    assert (third["task"], third["stdout"], third["exit_code"]) == (3, b"three\n", 0)


# -- plain lines exec'd without the shell ----------------------------------------------------


def _script(folder: Path, name: str, body: str, mode: int = 0o755) -> Path:
    path = folder / name
    path.write_text(body)
    path.chmod(mode)
    return path


@pytest.mark.skipif(os.path.basename(os.path.realpath("/bin/sh")) != "dash", reason="direct exec follows dash")
def test_a_plain_line_runs_without_the_shell_exactly_as_through_it(master: FakeMaster, spawn: Any, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # each line runs twice in the same worker: as written (exec'd directly when plain) and with a
    # trailing ';', which means the same to the shell but makes the worker hand it to the shell
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir, "show", '#!/bin/sh\necho "$0|$*|$(pwd)|$PWD"; echo to-err >&2; exit 3\n')
    _script(bin_dir, "ppid", "#!/bin/sh\necho $PPID\n")
    _script(bin_dir, "crash", "#!/bin/sh\nkill -SEGV $$\n")
    _script(bin_dir, "noshebang", "echo run by the shell; exit 4\n")
    _script(bin_dir, "detach", "#!/bin/sh\nsetsid sleep 60 &\n")  # out of the group: the sweep's
    _script(bin_dir, "notexec", "#!/bin/sh\necho never\n", mode=0o644)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("PWD", "/nonexistent/dir")  # stale: the shell sets it to the working directory
    monkeypatch.setenv("not-a-shell-name", "1")  # the shell does not pass it on
    proc = spawn(master.endpoint)
    master.handshake()
    lines = ["env", "show a b=c x,y@z:1+2%3", "bin/show ./rel", "./bin/noshebang", "bin/notexec",
             "no-such-command-here arg", "ls /no/such/dir", "crash", "printenv PWD", "  show  spaced  ",
             "echo builtin", "true", "detach", "setsid sleep 0.1"]
    results: dict[str, dict[str, Any]] = {}
    for i, line in enumerate(lines):
        for variant in (line, line + ";"):
            master.task(i, variant)
            results[variant] = master.expect("result", timeout=10)
    fields = ("exit_code", "timed_out", "stdout", "stderr")
    for line in lines:
        direct, shell = results[line], results[line + ";"]
        if line == "env":  # the same variables (dash lists them in an order of its own)
            assert sorted(direct["stdout"].splitlines()) == sorted(shell["stdout"].splitlines())
            assert b"not-a-shell-name" not in direct["stdout"]
            assert f"PWD={tmp_path}".encode() in direct["stdout"].splitlines()
            continue
        assert [direct[f] for f in fields] == [shell[f] for f in fields], line
    assert results["show a b=c x,y@z:1+2%3"]["exit_code"] == 3
    assert results["no-such-command-here arg"]["exit_code"] == 127
    assert b"not found" in results["no-such-command-here arg"]["stderr"]
    assert results["bin/notexec"]["exit_code"] == 126
    assert results["./bin/noshebang"]["stdout"] == b"run by the shell\n"
    assert results["crash"]["exit_code"] == 128 + signal.SIGSEGV
    assert b"left running outside its process group" in results["detach"]["stderr"]
    # the plain line's command is the worker's own child; through the shell, the shell's
    master.task(100, "ppid")
    assert int(master.expect("result")["stdout"]) == proc.pid
    master.task(101, "ppid;")
    assert int(master.expect("result")["stdout"]) != proc.pid


@pytest.mark.skipif(os.path.basename(os.path.realpath("/bin/sh")) != "dash", reason="direct exec follows dash")
def test_a_plain_line_that_times_out_is_killed_as_through_the_shell(master: FakeMaster, spawn: Any) -> None:
    spawn(master.endpoint)
    master.handshake()
    for i, line in enumerate(("sleep 30", "sleep 30;")):
        master.task(i, line, timeout_s=0.3)
        res = master.expect("result")
        assert (res["timed_out"], res["exit_code"]) == (True, -signal.SIGKILL), line


@pytest.mark.parametrize(("line", "plain"), [
    ("sleep 1", True), ("  ls  -l /tmp ", True), ("env A=1", True), ("python3 -c pass", True),
    ("A=1 env", False), ("cd /tmp", False), ("exit 3", False), ("export A", False), ("exec ls", False),
    (". ./x", False), ("set -e", False), ("ulimit -n", False), ("umask 0", False), ("if", False),
    ("true", False), ("echo hi", False), ("setsid sleep 1", False), ("ls *", False), ("ls ~", False), ("ls $HOME", False),
    ("ls 'a b'", False), ("ls > f", False), ("ls | wc", False), ("ls; ls", False), ("ls &", False),
    ("ls `pwd`", False), ("ls\nls", False), ("ls\tx", False), ("ls # c", False), ("", False),
    ("no-such-command-anywhere", False),
])
def test_which_lines_are_exec_d_without_the_shell(line: str, plain: bool) -> None:
    from bats.worker.task import direct_argv

    if os.path.basename(os.path.realpath("/bin/sh")) != "dash":
        assert direct_argv(line, "/bin/sh") is None
        return
    argv = direct_argv(line, "/bin/sh")
    assert (argv is not None) is plain
    if argv is not None:
        assert argv[1] == line.split()
        assert os.access(argv[0], os.X_OK)
    assert direct_argv(line, "bash") is None  # only dash's start-up is reproduced


# -- shell lines in a session shell (bats.worker.shell) -----------------------------------------

# every shell a session stands in for that this machine has (/bin/sh is one of them, or bash itself)
SESSION_SHELLS = [shell for shell in ("/bin/sh", "bash")
                  if sys.platform.startswith("linux") and shutil.which(shell) and takes_sessions(shell)]
if "bash" in SESSION_SHELLS and shell_kind("/bin/sh") != "bash":
    SESSION_SHELLS.append("bash as sh")  # Fedora's, RHEL's and Amazon Linux's /bin/sh: bash in POSIX mode


def _session_tasks(log: Path) -> int:
    return log.read_text().count("(session shell ")


def _as_under_sh_c(stderr: bytes) -> bytes:
    """A session task's stderr with what differs from ``sh -c`` taken out: the shell's messages name
    ``eval`` (where bash's name ``-c``); bash's quote of a line it cannot parse shows the session's
    preamble before the line; bash reports a command a signal killed, which ``bash -c`` had exec'd."""
    stderr = re.sub(rb"`BASH_EXECUTION_STRING=[^`']*?; : [^;]*; ", b"`", stderr.replace(b"eval: ", b""))
    return re.sub(rb"(?m)^\S+: line 1: +\d+ Aborted .*\n", b"", stderr)


def _as_forked(code: int) -> int:
    return 128 - code if code < 0 else code


@pytest.mark.parametrize("shell", SESSION_SHELLS)
def test_a_shell_line_sees_in_a_session_what_sh_c_gives_it(master: FakeMaster, spawn: Any, tmp_path: Path,
                                                            shell: str) -> None:
    """Each line runs twice in one worker: as written (in the slot's session shell) and with ``# $$``
    after it, which the shell ignores but which sends the line through ``sh -c``. The lines that
    change the shell's state come first: a task after them must not see it. bash's own variables
    (its line, its subshell depth, ``$_``) read as under ``bash -c``."""
    if shell == "bash as sh":
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "sh").symlink_to(shutil.which("bash") or "bash")
        shell = str(tmp_path / "bin" / "sh")
    proc = spawn(master.endpoint)
    master.handshake(shell=shell)
    lines = [
        "cd /; umask 077; x=1; export Y=2; ulimit -n 64; trap 'echo trapped' EXIT; alias ll=ls; f() { :; }",
        'pwd; echo "${x-unset} ${Y-unset}"; umask; ulimit -n; alias; type f >/dev/null 2>&1; echo f=$?',
        'echo "$0|$#|$*|$-"', "set | grep -c '^_bats_' || true", "env | grep -c _bats || true",
        "echo out; echo err >&2; exit 3", "read x; echo \"read:$x:$?\"", "ls /no/such/dir; echo $?",
        "exec echo replaced", "sleep 0.1 & wait; echo waited", "echo $PPID", "exit 300",
        f"{sys.executable} -c 'import os; os.abort()'", "no-such-command-here", "if then",
        'echo "${BASH_EXECUTION_STRING%% #*}|${BASH_SUBSHELL-}|$_"; (echo "${BASH_SUBSHELL-}")',
    ]
    results: dict[str, dict[str, Any]] = {}
    for i, line in enumerate(lines):
        for variant in (line, f"{line} # $$"):
            master.task(i, variant)
            results[variant] = master.expect("result", timeout=10)
    log = tmp_path / "worker-0.log"
    assert _session_tasks(log) == len(lines)
    for line in lines:
        mine, theirs = results[line], results[f"{line} # $$"]
        # a command a signal killed reads 128 + N in a session, -N where bash -c had exec'd it
        assert (mine["exit_code"], mine["timed_out"], mine["stdout"]) == \
               (_as_forked(theirs["exit_code"]), theirs["timed_out"], theirs["stdout"]), line
        # (bash quotes a line it cannot parse: the ``sh -c`` one has its `` # $$``)
        assert _as_under_sh_c(mine["stderr"]) == theirs["stderr"].replace(b"-c: ", b"").replace(b" # $$", b""), line
    assert results[lines[1]]["stdout"].split(b"\n")[:4] == [os.getcwd().encode(), b"unset unset",
                                                            f"{_umask():04o}".encode(), _nofile()]
    assert results["set | grep -c '^_bats_' || true"]["stdout"] == b"0\n"  # no variable of the loop
    assert results["echo $PPID"]["stdout"] == f"{proc.pid}\n".encode()
    assert results[f"{sys.executable} -c 'import os; os.abort()'"]["exit_code"] == 128 + signal.SIGABRT
    assert b"not found" in results["no-such-command-here"]["stderr"]
    if shell_kind(shell) == "bash":  # its line (up to " #"), depth 0, and 1 in a subshell of it
        out = results[lines[-1]]["stdout"]
        assert out.startswith(b'echo "${BASH_EXECUTION_STRING%%|0|') and out.endswith(b"\n1\n"), out


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _nofile() -> bytes:
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return b"unlimited" if soft == resource.RLIM_INFINITY else str(soft).encode()


@pytest.mark.parametrize("shell", [s for s in SESSION_SHELLS if s != "bash as sh"])
def test_what_a_session_task_leaves_running_is_killed_and_never_writes_into_the_next_task(
        master: FakeMaster, spawn: Any, tmp_path: Path, shell: str) -> None:
    spawn(master.endpoint)
    master.expect("hello", timeout=10)
    master.welcome(slots=2, shell=shell)
    master.expect("ask")
    pidfile = tmp_path / "leftover.pid"
    # in the session's process group: killed as the task ends
    master.task(1, f"sh -c 'echo $$ > {pidfile}; exec sleep 30' & echo main")
    res = master.expect("result")
    assert (res["exit_code"], res["stdout"]) == (0, b"main\n")
    leftover = int(pidfile.read_text())
    wait_for(lambda: pid_gone(leftover), 3, "the leftover sleep to be killed")
    # out of the group (setsid) while the other slot runs, so the sweep waits: it writes late, into
    # the FIFO its task had, which the next task on that slot no longer shares
    master.task(2, "sleep 2.5")
    master.task(3, "setsid sh -c 'sleep 1; echo late; echo late >&2' & echo main")
    res = master.expect("result")
    assert (res["task"], res["stdout"]) == (3, b"main\n")
    master.task(4, "sleep 1.5; echo next")
    results = {r["task"]: r for r in (master.expect("result", timeout=10) for _ in range(2))}
    assert (results[4]["stdout"], results[4]["stderr"]) == (b"next\n", b"")
    assert results[2]["exit_code"] == 0


@pytest.mark.parametrize("shell", [s for s in SESSION_SHELLS if s != "bash as sh"])
def test_a_session_task_that_times_out_is_cancelled_or_kills_its_shell_leaves_the_slot_working(
        master: FakeMaster, spawn: Any, tmp_path: Path, shell: str) -> None:
    proc = spawn(master.endpoint)
    master.handshake(shell=shell)
    master.task(1, "echo $PPID > /dev/null; sleep 30 & sleep 30", timeout_s=0.4)
    res = master.expect("result")
    assert (res["timed_out"], res["exit_code"]) == (True, -signal.SIGKILL)
    shells = [c for c in psutil.Process(proc.pid).children() if c.status() != psutil.STATUS_ZOMBIE]
    assert shells == []  # the timed-out task's shell went with its group
    master.task(2, "kill -TERM 0")  # the session's whole group, shell included, as under sh -c
    res = master.expect("result")
    assert res["exit_code"] == -signal.SIGTERM
    master.task(3, "sleep 30; :")
    master.task(4, "echo second; :")
    wait_for(lambda: psutil.Process(proc.pid).children(recursive=True), 5, "the task to start")
    master.send("cancel", task=3, attempt=0)
    assert master.expect("ask")["n"] == 1
    second = master.expect("result")
    assert (second["task"], second["stdout"]) == (4, b"second\n")
    assert _session_tasks(tmp_path / "worker-0.log") == 4

