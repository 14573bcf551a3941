"""The ``manual`` provisioner: workers started by hand with the cluster's join token run a real bag
through ``bats-master`` over real ZeroMQ and are paid at the cluster's price; wrong tokens are refused and
workers beyond the seats the master wants wait for one; the token lives in the state dir."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.runs import MASTER, free_port, wait_for

from bats.common.config import ClusterConfig
from bats.provisioners.base import Bootstrap, NodeState, ProvisionerConfigError
from bats.provisioners.manual import ManualProvisioner

WORKER = [sys.executable, "-m", "bats.worker"]


def hand_worker(endpoint: str, name: str, token: str, cluster: str = "hand",
                state_dir: Path | None = None) -> subprocess.Popen:
    """A worker started by hand, as the master's log says: with the master's public key (the run's
    ``master.key`` in ``state_dir``) when the run is encrypted."""
    key = []
    if state_dir is not None and (state_dir / "master.key").exists():
        import zmq.auth

        public, _secret = zmq.auth.load_certificate(str(state_dir / "master.key"))
        key = [f"--server-key={public.decode()}"]
    return subprocess.Popen([*WORKER, "--master", endpoint, *key, "--cluster", cluster, "--machine",
                             name, "--heartbeat", "0.5"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "BATS_TOKEN": token})


def test_workers_started_by_hand_join_and_are_paid_at_the_cluster_price(tmp_path):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    config = tmp_path / "c.toml"
    config.write_text(f"""
[master]
listen = "{endpoint}"
heartbeat = "0.5s"

[clusters.hand]
provisioner = "manual"
max = 2
price = 1.5
atu = "1h"
""")
    marks = tmp_path / "ran"
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f"echo {i} >> {marks}; sleep 0.2; echo out-{i}\n" for i in range(1, 13)))
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--policy", "self",
                               "--state-dir", str(tmp_path / "run")], cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    token_file = tmp_path / "run" / "join" / "hand.token"
    workers: list[subprocess.Popen] = []
    try:
        wait_for(token_file.exists, 30, "the join token")
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        intruder = hand_worker(endpoint, "intruder", "not-the-token", state_dir=tmp_path / "run")
        assert intruder.wait(timeout=30) == 0  # told to stop
        workers = [hand_worker(endpoint, "node-a", token, state_dir=tmp_path / "run"),
                   hand_worker(endpoint, "node-b", token, state_dir=tmp_path / "run")]
        wait_for(lambda: marks.exists() and len(marks.read_text().split()) >= 4, 30, "tasks to run")
        # both seats are taken: it waits for one (none opens; the report below shows it ran nothing)
        workers.append(hand_worker(endpoint, "node-c", token, state_dir=tmp_path / "run"))
        out, err = master.communicate(timeout=60)
        for worker in workers[:2]:
            assert worker.wait(timeout=30) == 0  # the master told them to stop at the end
    finally:
        master.kill()
        for worker in workers:
            worker.kill()
    assert master.returncode == 0, err
    assert token not in err  # the token is in the file, never in the log
    import zmq.auth

    public, _secret = zmq.auth.load_certificate(str(tmp_path / "run" / "master.key"))
    assert shlex.join(["bats-worker", "--master", endpoint, f"--server-key={public.decode()}", "--cluster", "hand",
                       "--token-file", str(token_file.resolve())]) + " --machine NAME" in err
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["tasks"] == {"total": 12, "done": 12, "failed": 0, "not_run": 0}
    assert {m["id"] for m in report["machines"]} == {"hand-s1-1", "hand-s1-2"}
    assert all(m["nt"] > 0 and m["atus"] == 1 and m["cost"] == 1.5 for m in report["machines"])
    assert report["cost"]["total"] == 3.0
    assert sorted(marks.read_text().split(), key=int) == [str(i) for i in range(1, 13)]  # each task once


def manual(tmp_path: Path, **options) -> ManualProvisioner:
    opts = {"token_file": None, **options}
    cl = ClusterConfig(name="hand", provisioner="manual", max=2, price=0.0, atu_s=3600.0, options=opts)
    ManualProvisioner.preflight(cl, str(tmp_path))
    return ManualProvisioner(cl, Bootstrap(master_endpoint="tcp://10.0.0.1:5555", run_id="r",
                                           state_dir=str(tmp_path / "run"), config_dir=str(tmp_path)))


def test_seats_are_taken_by_token_and_kept_across_reconnects(tmp_path):
    prov = manual(tmp_path)
    token = (tmp_path / "run" / "join" / "hand.token").read_text().strip()
    assert len(token) >= 32 and manual(tmp_path).join_token == token  # a resumed master reads the same token
    assert prov.join("a", token) is None  # no seat open yet
    seats = prov.acquire(2)
    assert prov.status(seats) == {s.machine_id: NodeState.BOOTING for s in seats}
    assert prov.join("a", "wrong") is None
    a = prov.join("a", token)
    assert a is seats[0] and a.native_id == "a"
    assert prov.join("a", token) is a  # the same worker reconnecting keeps its seat
    assert prov.join("b", token) is seats[1]
    assert prov.join("c", token) is None
    assert prov.status(seats) == {s.machine_id: NodeState.RUNNING for s in seats}
    prov.release([a])
    assert prov.status([a]) == {a.machine_id: NodeState.GONE}
    assert prov.join("a", token) is None  # its seat is gone and no other is open
    [new] = prov.acquire(1)
    assert prov.join("a", token) is new


def test_token_file_option(tmp_path):
    (tmp_path / "shared.token").write_text("short\n")
    with pytest.raises(ProvisionerConfigError, match=r"^token_file: .*/shared.token: expected one word of at least 16"):
        manual(tmp_path, token_file="shared.token")
    (tmp_path / "shared.token").write_text("a-long-enough-shared-token\n")
    assert manual(tmp_path, token_file="shared.token").join_token == "a-long-enough-shared-token"
    with pytest.raises(ProvisionerConfigError, match=r"^token_file: .*/nodir: no such directory"):
        manual(tmp_path, token_file="nodir/t")
    made = manual(tmp_path, token_file="new.token")
    assert (tmp_path / "new.token").read_text().strip() == made.join_token
    assert not os.path.exists(tmp_path / "run" / "join")


def test_the_join_command_is_one_shell_command_whatever_the_key_holds(tmp_path):
    cl = ClusterConfig(name="hand", provisioner="manual", max=2, price=0.0, atu_s=3600.0, options={"token_file": None})
    key = "a&b>c)d$e|f;g" + "K" * 27  # Z85 uses & > ) $ and more that a shell would act on
    prov = ManualProvisioner(cl, Bootstrap(master_endpoint="tcp://10.0.0.1:5555", run_id="r", server_key=key,
                                           state_dir=str(tmp_path / "run dir"), config_dir=str(tmp_path)))
    command = prov.join_command()
    assert subprocess.run(["sh", "-n", "-c", command], capture_output=True).returncode == 0
    argv = shlex.split(command)
    assert f"--server-key={key}" in argv and argv[argv.index("--token-file") + 1] == str(prov.token_file.resolve())


def test_a_worker_without_a_seat_waits_and_takes_the_next_one(tmp_path):
    """A worker started by hand that finds no seat open (here: the one seat is taken) is told to
    wait and says hello again until one opens, instead of stopping for good."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    config = tmp_path / "c.toml"
    config.write_text(f'[master]\nlisten = "{endpoint}"\nheartbeat = "0.5s"\nliveness = "2s"\n\n'
                      '[clusters.hand]\nprovisioner = "manual"\nmax = 1\n')
    marks = tmp_path / "ran"
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f"echo {i} >> {marks}; sleep 0.3\n" for i in range(1, 13)))
    state = tmp_path / "run"
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--policy", "self",
                               "--state-dir", str(state)], cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    workers: list[subprocess.Popen] = []
    try:
        token_file = state / "join" / "hand.token"
        wait_for(token_file.exists, 30, "the join token")
        token = token_file.read_text().strip()
        workers.append(hand_worker(endpoint, "node-a", token, state_dir=state))
        wait_for(lambda: marks.exists() and len(marks.read_text().split()) >= 3, 30, "node-a to run tasks")
        workers.append(hand_worker(endpoint, "node-b", token, state_dir=state))  # the one seat is taken
        assert workers[1].stderr is not None
        assert "no seat for this worker yet" in workers[1].stderr.readline()  # told to wait, not to stop
        workers[0].kill()  # node-a dies: its seat is given up, a new one opens, node-b takes it
        _out, err = master.communicate(timeout=90)
        assert workers[1].wait(timeout=30) == 0  # told to stop at the end
    finally:
        master.kill()
        for worker in workers:
            worker.kill()
    assert master.returncode == 0, err
    report = json.loads((state / "report.json").read_text())
    assert report["tasks"]["done"] == 12
    assert {m["id"]: m["nt"] > 0 for m in report["machines"]} == {"hand-s1-1": True, "hand-s1-2": True}
