"""End-to-end: the real bats-master with real worker processes over real ZeroMQ sockets."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import signal
import subprocess
import time
from collections import Counter

import msgpack
import psutil
import pytest
import zmq
import zmq.auth
from helpers.runs import MASTER, free_port, run_master, wait_for, workers_of, write_bag
from helpers.runs import results as export

from bats.common.protocol import encode


def test_bag_runs_to_completion_with_report_and_results(tmp_path):
    bag = write_bag(tmp_path / "tasks.txt", ["# comment", "", *[f"echo out-$((3 * {i})); echo err-{i} >&2" for i in range(20)]])
    proc = run_master(["--bag", str(bag), "--workers", "2", "--state-dir", "run"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "DONE" in proc.stdout and "20 done" in proc.stdout
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["status"] == "done"
    assert report["tasks"] == {"total": 20, "done": 20, "failed": 0, "not_run": 0}
    assert report["makespan_s"] > 0 and report["cost"]["total"] == 0
    assert len(report["machines"]) == 2
    assert sum(m["nt"] for m in report["machines"]) == 20
    assert all(m["uptime_s"] >= m["rt_s"] >= 0 for m in report["machines"])
    rows = export(tmp_path / "run")
    assert [r["id"] for r in rows] == list(range(3, 23))  # ids are line numbers
    first = rows[0]
    assert first["command"].startswith("echo out-$((3 * 0))")
    assert (first["exit_code"], first["attempts"], first["stdout"], first["stderr"]) == (0, 1, "out-0\n", "err-0\n")
    assert {r["machine"] for r in rows} <= {m["id"] for m in report["machines"]}


def test_failures_retries_and_timeouts_give_exit_1(tmp_path):
    bag = write_bag(tmp_path / "tasks.txt", ["true", "exit 3", "sleep 30"])
    proc = run_master(["--bag", str(bag), "--workers", "2", "--retries", "1", "--task-timeout", "1s",
                       "--report", "r.json"], tmp_path, timeout=60)
    assert proc.returncode == 1, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["status"] == "failed"
    assert report["tasks"] == {"total": 3, "done": 1, "failed": 2, "not_run": 0, "failed_ids": [2, 3]}
    rows = {r["id"]: r for r in export(tmp_path / "bats-run")}
    assert rows[2]["exit_code"] == 3 and rows[2]["attempts"] == 2
    assert rows[3]["timed_out"] is True and rows[3]["runtime_s"] < 5
    failed = subprocess.run([*MASTER, "results", "--state-dir", str(tmp_path / "bats-run"), "--failed",
                             "--format", "csv"], capture_output=True, text=True, check=True).stdout
    header, *rows_csv = csv.reader(io.StringIO(failed))  # a field may hold newlines (a task's stderr)
    assert header[:2] == ["id", "command"] and [row[0] for row in rows_csv] == ["2", "3"], failed


def test_worker_killed_mid_task_reruns_elsewhere_and_counts_once(tmp_path):
    marks = tmp_path / "ran"
    bag = write_bag(tmp_path / "tasks.txt", [f"echo {i} >> {marks}; sleep 0.4" for i in range(1, 13)])
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--workers", "2"], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: marks.exists() and len(marks.read_text().split()) >= 3, 30, "tasks to start")
        victim = workers_of(master.pid)[0]
        victim.send_signal(signal.SIGKILL)
        out, err = master.communicate(timeout=60)
    finally:
        master.kill()
    assert master.returncode == 0, err
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    assert report["tasks"]["done"] == 12
    assert len(report["machines"]) == 3  # the killed one and its replacement
    rows = export(tmp_path / "bats-run")
    assert sorted(r["id"] for r in rows) == list(range(1, 13))
    ran = Counter(marks.read_text().split())
    assert set(ran) == {str(i) for i in range(1, 13)}


def test_master_killed_and_resumed_keeps_every_result_exactly_once(tmp_path):
    marks = tmp_path / "ran"
    n = 60
    bag = write_bag(tmp_path / "tasks.txt", [f"echo {i} >> {marks}; sleep 0.05; echo result-{i}" for i in range(1, n + 1)])
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--workers", "2", "--state-dir", "run"],
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: marks.exists() and len(marks.read_text().split()) >= 20, 30, "a third of the bag")
        workers = workers_of(master.pid)
        master.send_signal(signal.SIGKILL)
        master.wait(timeout=10)
    finally:
        master.kill()
    # workers notice their master died and leave: no orphans
    wait_for(lambda: not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers), 15,
             "orphaned workers to exit")
    committed = {r["id"] for r in export(tmp_path / "run")}
    assert 0 < len(committed) < n
    before = Counter(marks.read_text().split())

    proc = run_master(["--resume", "--state-dir", "run"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = export(tmp_path / "run")
    assert sorted(r["id"] for r in rows) == list(range(1, n + 1))
    assert all(r["stdout"] == f"result-{r['id']}\n" for r in rows)
    after = Counter(marks.read_text().split())
    for task in committed:  # a committed result is never run again
        assert after[str(task)] == before[str(task)]
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["status"] == "done" and report["sessions"] == 2
    assert {m["session"] for m in report["machines"]} == {1, 2}


def test_resume_of_a_finished_run_runs_nothing(tmp_path):
    bag = write_bag(tmp_path / "tasks.txt", ["true", "true"])
    assert run_master(["--bag", str(bag), "--workers", "1"], tmp_path).returncode == 0
    proc = run_master(["--resume"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    assert report["tasks"]["done"] == 2 and report["sessions"] == 1  # nothing to resume: no new session


def test_garbage_frames_are_dropped_and_the_bag_still_finishes(tmp_path):
    port = free_port()
    config = tmp_path / "clusters.toml"
    config.write_text(f'[master]\nlisten = "tcp://127.0.0.1:{port}"\n\n'
                      '[clusters.local]\nprovisioner = "local"\nmax = 2\nstartup = "1s"\n')
    bag = write_bag(tmp_path / "tasks.txt", [f"sleep 0.2; echo {i}" for i in range(10)])
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config)], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    context = zmq.Context()
    try:
        attacker = context.socket(zmq.DEALER)
        attacker.setsockopt(zmq.LINGER, 0)
        # it knows the master's public key (anyone can: it is public) but has no token
        key_file = tmp_path / "bats-run" / "master.key"
        wait_for(lambda: key_file.exists() and "public-key" in key_file.read_text(), 30, "the master's key")
        attacker.curve_serverkey = zmq.auth.load_certificate(key_file)[0]
        attacker.curve_publickey, attacker.curve_secretkey = zmq.curve_keypair()
        attacker.connect(f"tcp://127.0.0.1:{port}")
        garbage = [
            b"", b"\x00\xff\xfe", os.urandom(512), msgpack.packb([1, 2, 3]), msgpack.packb({"v": 99, "type": "ask"}),
            msgpack.packb({"v": 1, "type": "launch"}), msgpack.packb({"v": 1, "type": "ask", "n": "two"}),
            encode("ask", n=2), encode("heartbeat"),
            encode("result", task=1, attempt=1, exit_code=0, runtime_s=1.0, timed_out=False, stdout=b"",
                   stderr=b"", ask=True),
            encode("hello", machine="local-x-1", token="forged", cluster="local", host="evil", cpus=1, version="0"),
        ]
        for frame in garbage:
            attacker.send(frame)
        attacker.send_multipart([b"part1", b"part2", b"part3"])
        attacker.send(b"x" * (2 << 20))  # oversized: the transport drops this peer
        out, err = master.communicate(timeout=90)
    finally:
        master.kill()
        context.destroy(linger=0)
    assert master.returncode == 0, err
    assert "Traceback" not in err
    assert "dropped frame" in err
    assert len(export(tmp_path / "bats-run")) == 10


def test_sigterm_releases_every_worker_and_reports_incomplete(tmp_path):
    bag = write_bag(tmp_path / "tasks.txt", ["sleep 20"] * 6)
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--workers", "2"], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        workers = wait_for(lambda: len(workers_of(master.pid)) == 2 and workers_of(master.pid), 30, "workers")
        time.sleep(1.0)
        master.send_signal(signal.SIGTERM)
        out, err = master.communicate(timeout=30)
    finally:
        master.kill()
    assert master.returncode == 1
    assert "INCOMPLETE" in out
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    assert report["status"] == "incomplete" and report["tasks"]["not_run"] == 6


def test_emulated_slow_cluster_stretches_runtimes(tmp_path):
    config = tmp_path / "clusters.toml"
    config.write_text('[clusters.slow]\nprovisioner = "local"\nmax = 1\nslowdown = 3\nprice = 0.2\natu = "1m"\n')
    bag = write_bag(tmp_path / "tasks.txt", ["sleep 0.2"])
    proc = run_master(["--bag", str(bag), "--config", str(config), "--policy", "self"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    (row,) = export(tmp_path / "bats-run")
    assert 0.55 < row["runtime_s"] < 1.5
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    assert report["cost"]["total"] == pytest.approx(0.2)  # one begun ATU of one machine
    assert report["machines"][0]["atus"] == 1


def test_silent_worker_is_lost_after_liveness_and_its_task_reruns(tmp_path):
    config = tmp_path / "clusters.toml"
    config.write_text('[master]\nheartbeat = "0.3s"\nliveness = "1.5s"\n\n'
                      '[clusters.local]\nprovisioner = "local"\nmax = 2\n')
    marks = tmp_path / "ran"
    bag = write_bag(tmp_path / "tasks.txt", [f"echo {i} >> {marks}; sleep 1" for i in range(1, 7)])
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config)], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: marks.exists() and len(marks.read_text().split()) >= 2, 30, "tasks to start")
        victim = workers_of(master.pid)[0]
        victim.suspend()  # SIGSTOP: no heartbeats, no result
        out, err = master.communicate(timeout=60)
        with contextlib.suppress(psutil.NoSuchProcess):  # released (killed) by the master meanwhile
            victim.resume()
    finally:
        master.kill()
    assert master.returncode == 0, err
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    assert report["tasks"]["done"] == 6
    assert any(m["release_reason"].startswith("silent for") for m in report["machines"])
    assert sorted(r["id"] for r in export(tmp_path / "bats-run")) == list(range(1, 7))


@pytest.fixture
def tiny_disk(tmp_path):
    """A 2 MiB tmpfs, so the journal runs out of space mid-run (needs root, as in CI)."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_full_disk_stops_the_run_cleanly_with_the_journal_intact(tmp_path, tiny_disk):
    # 20 KB of output a task at about 40 tasks/s: each 0.2 s commit is small, the disk fills after a few
    bag = write_bag(tmp_path / "tasks.txt",
                    [f"sleep 0.05; head -c 20000 /dev/zero | tr '\\0' x; echo {i}" for i in range(400)])
    state = tiny_disk / "run"
    proc = run_master(["--bag", str(bag), "--workers", "2", "--state-dir", str(state),
                       "--report", str(tmp_path / "report.json")], tmp_path, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "disk full" in proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["status"] == "incomplete"
    rows = export(state)  # what was committed is readable and counted once
    assert 0 < len(rows) < 400
    assert len({r["id"] for r in rows}) == len(rows)
