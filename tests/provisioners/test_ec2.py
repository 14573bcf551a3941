"""The ec2 provisioner against moto's EC2 server on 127.0.0.1, and whole bags through the real
master with the test harness playing the cloud (``cloud_harness.py``)."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from botocore.exceptions import ClientError
from helpers.cloud_harness import (
    AWS_ENV,
    MASTER,
    WORKER,
    CloudPlayer,
    instances,
    master_env,
    results,
    tags,
    user_data,
)

from bats import provisioners
from bats.common.config import ClusterConfig, ConfigError
from bats.master import core as c
from bats.master.cli.args import load_cluster_config
from bats.provisioners.base import Bootstrap, NodeState
from bats.provisioners.cloud import ApiRefused, call_with_retries, worker_command, worker_environment
from bats.provisioners.ec2 import Ec2Provisioner


@pytest.fixture
def aws(moto, monkeypatch):
    for key, value in AWS_ENV.items():
        monkeypatch.setenv(key, value)
    moto.reset()
    return moto


def make(moto, name="c", run="run1", market="on-demand", bid=None, atu_s=3600.0, **options) -> Ec2Provisioner:
    opts = {key: default for key, (_kind, default) in Ec2Provisioner.OPTIONS.items()}
    opts.update(instance_type="t3.micro", image="ami-12345678", endpoint_url=moto.endpoint, region="us-east-1",
                status_poll=0.0, api_backoff=0.01)
    opts.update(options)
    cluster = ClusterConfig(name=name, provisioner="ec2", max=4, price=0.1, atu_s=atu_s, options=opts,
                            market=market, bid=bid)
    Ec2Provisioner.check_config(cluster)
    return Ec2Provisioner(cluster, Bootstrap("tcp://127.0.0.1:5555", run))


# ---------------------------------------------------------------- the provisioner on its own
def test_on_demand_instances_are_tagged_start_the_worker_and_terminate_on_release(aws):
    p = make(aws, tags={"team": "science"})
    handles = p.acquire(2)
    assert len(handles) == 2 and len({h.native_id for h in handles}) == 2
    found = instances(aws)
    for h in handles:
        instance = found[h.native_id]
        assert instance["InstanceType"] == "t3.micro" and instance["ImageId"] == "ami-12345678"
        assert "InstanceLifecycle" not in instance
        assert tags(instance) == {"Name": f"bats-{h.machine_id}", "team": "science", "bats:run": "run1",
                                  "bats:cluster": "c", "bats:machine": h.machine_id, "bats:session": "1"}
        text = user_data(aws, h.native_id)
        argv = worker_command(text)
        assert argv[0] == "bats-worker" and worker_environment(text) == {"BATS_TOKEN": h.token}
        assert h.token not in " ".join(argv)
        assert argv[argv.index("--machine") + 1] == h.machine_id and "--spot-notice" not in argv
    assert set(p.status(handles).values()) == {NodeState.RUNNING}
    p.release(handles[:1])
    assert p.status(handles) == {handles[0].machine_id: NodeState.GONE, handles[1].machine_id: NodeState.RUNNING}
    assert p.price_now() is None  # on-demand: no price feed


def test_spot_through_instance_market_options_and_through_spot_requests(aws):
    bid = 0.25  # per ATU of 30 minutes: 0.5 an hour
    p = make(aws, name="spot", market="spot", bid=bid, atu_s=1800.0, metadata_url="http://127.0.0.1:9/x")
    (h,) = p.acquire(1)
    instance = instances(aws)[h.native_id]
    assert instance["InstanceLifecycle"] == "spot"
    argv = worker_command(user_data(aws, h.native_id))
    assert argv[argv.index("--spot-notice") + 1] == "http://127.0.0.1:9/x"
    assert p._max_price() == "0.500000"

    q = make(aws, name="req", market="spot", spot_api="request_spot_instances")
    (r,) = q.acquire(1)
    assert r.data["request"].startswith("sir-") and r.native_id
    assert q.status([r]) == {r.machine_id: NodeState.RUNNING}
    assert tags(instances(aws)[r.native_id])["bats:machine"] == r.machine_id
    q.release([r])
    assert instances(aws)[r.native_id]["State"]["Name"] == "terminated"


def test_cleanup_terminates_this_runs_machines_of_this_cluster_only(aws):
    mine = make(aws, name="a")
    other_cluster = make(aws, name="b")
    other_run = make(aws, name="a", run="run2")
    requests = make(aws, name="a", market="spot", spot_api="request_spot_instances")
    kept = other_cluster.acquire(1) + other_run.acquire(1)
    gone = mine.acquire(2) + requests.acquire(1)
    found = make(aws, name="a").cleanup()
    assert {k for k in found if k.startswith("i-")} == {h.native_id for h in gone}
    assert set(found.values()) >= {h.machine_id for h in gone}
    states = {iid: i["State"]["Name"] for iid, i in instances(aws).items()}
    assert all(states[h.native_id] == "terminated" for h in gone)
    assert all(states[h.native_id] == "running" for h in kept)
    assert {k for k in make(aws, name="a").cleanup() if k.startswith("i-")} == set()  # nothing left


def test_spot_price_comes_from_the_price_history_per_atu(aws):
    p = make(aws, market="spot", atu_s=60.0, price_poll=7.0)
    assert p.price_poll_s == 7.0
    assert p.price_now() == pytest.approx(0.00001 * 60 / 3600)  # moto quotes 0.00001 an hour everywhere

    now = dt.datetime.now(dt.UTC)
    history = [  # the latest row of each zone counts
        {"AvailabilityZone": "z-a", "SpotPrice": "0.30", "Timestamp": now - dt.timedelta(hours=2)},
        {"AvailabilityZone": "z-a", "SpotPrice": "0.10", "Timestamp": now - dt.timedelta(minutes=5)},
        {"AvailabilityZone": "z-b", "SpotPrice": "0.20", "Timestamp": now - dt.timedelta(hours=1)},
    ]
    p._api = lambda operation, **params: {"SpotPriceHistory": history}
    assert p.price_now() == pytest.approx(0.20 / 60)  # no zone given: the dearest zone
    z = make(aws, market="spot", atu_s=3600.0, zone="z-a")
    z._api = p._api
    assert z.price_now() == pytest.approx(0.10)


def test_the_worker_watches_the_metadata_for_the_notice():
    from bats.worker.spot import SpotWatcher
    from bats.worker.spot_testing import MetadataStandIn

    with MetadataStandIn() as metadata:
        watcher = SpotWatcher(metadata.url, poll_s=0.05)
        try:
            assert watcher.check() is None and watcher._token == "test-token"  # IMDSv2: a session token
            watcher.start()
            time.sleep(0.2)
            assert watcher.notice is None and metadata.asked >= 2
            metadata.arm()
            deadline = time.monotonic() + 5
            while watcher.notice is None:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            assert watcher.notice == ("terminate", "2030-01-01T00:02:00Z")
            assert os.read(watcher.read_fd, 8) == b"!"  # what wakes the worker's loop
        finally:
            watcher.stop()


# ---------------------------------------------------------------- refusals: retried, then a lower max
def refusing(p: Ec2Provisioner, code: str, succeed_first: int = 0, fail_times: int | None = None):
    """Make ``p._api`` a stand-in: launches fail with ``code`` after the first ``succeed_first``
    (``fail_times`` times, or for ever); every other call goes to moto."""
    real = p._api
    calls = {"launch": 0, "refused": 0}

    def api(operation, **params):
        if operation in ("run_instances", "request_spot_instances"):
            calls["launch"] += 1
            if calls["launch"] > succeed_first and (fail_times is None or calls["refused"] < fail_times):
                calls["refused"] += 1
                raise ClientError({"Error": {"Code": code, "Message": "injected"}}, "RunInstances")
        return real(operation, **params)

    p._api = api
    return calls


@pytest.mark.parametrize("code", ["RequestLimitExceeded", "InsufficientInstanceCapacity", "InstanceLimitExceeded"])
def test_refusals_are_retried_with_backoff(aws, code):
    p = make(aws, api_retries=4)
    pauses = []
    p.sleep = pauses.append
    calls = refusing(p, code, fail_times=2)
    (h,) = p.acquire(1)
    assert calls == {"launch": 3, "refused": 2} and len(pauses) == 2 and h.native_id in instances(aws)
    assert p.usable_max is None


def test_persistent_refusal_lowers_the_usable_max_instead_of_failing(aws):
    p = make(aws, api_retries=3)
    p.sleep = lambda s: None
    refusing(p, "InsufficientInstanceCapacity", succeed_first=1)
    handles = p.acquire(3)
    assert len(handles) == 1 and p.usable_max == 1
    with pytest.raises(ApiRefused, match="InsufficientInstanceCapacity after 3 attempt"):
        p.acquire(1)
    assert p.usable_max == 1


def test_other_errors_are_not_retried(aws):
    p = make(aws)
    calls = refusing(p, "InvalidAMIID.Malformed")
    with pytest.raises(ClientError):
        p.acquire(1)
    assert calls["launch"] == 1 and p.usable_max is None


def test_backoff_doubles_with_jitter_and_is_capped():
    pauses = []
    attempts = iter(range(10))

    def call():
        next(attempts)
        raise ClientError({"Error": {"Code": "Throttling", "Message": "x"}}, "X")

    with pytest.raises(ApiRefused):
        call_with_retries(call, "x", 8, 1.0, sleep=pauses.append, rng=random.Random(1))
    assert len(pauses) == 7 and all(0 <= p <= min(20.0, 2 ** k) for k, p in enumerate(pauses))


def test_the_server_plans_with_the_usable_max(tmp_path, monkeypatch):
    """A provisioner's lower usable_max reaches the core the planner reads; the report keeps the config."""
    from bats.common.config import Config, MasterConfig
    from bats.master.core.bats.policy import Choice
    from bats.master.core.registry import build_core
    from bats.master.server.loop import Server
    from bats.master.state.bag import load_bag
    from bats.master.state.journal import Journal
    from bats.provisioners.base import Provisioner

    class Stingy(Provisioner):
        def acquire(self, n):
            self.usable_max = 1
            raise ApiRefused("injected", "InsufficientInstanceCapacity")

        def release(self, handles):
            pass

        def status(self, handles):
            return {}

    clusters = {"a": ClusterConfig("a", "ec2", max=5, price=1.0)}
    config = Config(MasterConfig(), clusters)
    (tmp_path / "b.txt").write_text("true\n" * 10)
    core = build_core(range(1, 11), config, random.Random(1), Choice(budget=100.0))
    journal = Journal.create(tmp_path / "run", "r", {})
    server = Server(core, load_bag(tmp_path / "b.txt"), config, journal, {"a": Stingy(clusters["a"], Bootstrap("", "r"))},
                    socket=None, session=1)
    import bats.master.server.fleet as server_module

    monkeypatch.setattr(server_module, "ACQUIRE_ATTEMPTS", 1)  # the call runs off the loop: one try
    server._do_acquire(c.Acquire("a", 5))
    for _ in range(200):  # the outcome is collected on the loop's ticks
        server.fleet.collect_calls()
        if core.clusters["a"].max == 1:
            break
        time.sleep(0.05)
    assert core.clusters["a"].max == 1 and config.clusters["a"].max == 5
    journal.close()


def test_config_errors_are_one_line(tmp_path, monkeypatch):
    base = '[clusters.x]\nprovisioner = "ec2"\nmax = 2\ninstance_type = "t3.micro"\n'
    path = tmp_path / "c.toml"
    path.write_text(base)
    with pytest.raises(ConfigError, match=r"c.toml: \[clusters.x\] image: required for the ec2 provisioner$"):
        load_cluster_config(str(path), None)
    (tmp_path / "ud.sh").write_text("#!/bin/sh\necho $HOME\nexec ${command}\n")
    path.write_text(base + f'image = "ami-1"\nuser_data = "{tmp_path / "ud.sh"}"\n')
    with pytest.raises(ConfigError, match=r"user_data: .*ud.sh: unknown placeholder \$\{HOME\}"):
        load_cluster_config(str(path), None)
    path.write_text(base + 'image = "ami-1"\nspot_api = "fleet"\n')
    with pytest.raises(ConfigError, match="spot_api: expected one of run_instances, request_spot_instances"):
        load_cluster_config(str(path), None)
    monkeypatch.setattr(Ec2Provisioner, "REQUIRES", {"no_such_module_here": "bats[aws]"})
    with pytest.raises(KeyError, match="provisioner 'ec2' needs a package that is not installed: pip install 'bats.aws.'"):
        provisioners.check_installed(["ec2"])


# ---------------------------------------------------------------- whole bags through the real master
CONFIG = """
[master]
listen = "tcp://127.0.0.1:*"
heartbeat = "0.5s"
liveness = "5s"
boot_timeout = "60s"
"""


def cluster(name: str, endpoint: str, max_: int, extra: str = "") -> str:
    return f"""
[clusters.{name}]
provisioner = "ec2"
max = {max_}
instance_type = "t3.micro"
image = "ami-12345678"
region = "us-east-1"
endpoint_url = "{endpoint}"
worker_command = "{WORKER}"
status_poll = "0.5s"
api_backoff = "0.05s"
{extra}
"""


def run_master(tmp_path: Path, args: list[str], env: dict | None = None, timeout: float = 90):
    return subprocess.run([*MASTER, "--quiet", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=timeout, env=env or master_env())


def test_a_bag_runs_on_on_demand_and_spot_instances(aws, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(CONFIG + cluster("od", aws.endpoint, 2, "price = 0.5")
                      + cluster("spot", aws.endpoint, 2, 'price = 5.0\nmarket = "spot"\nprice_poll = "1s"'))
    bag = tmp_path / "tasks.txt"
    # tasks long enough that both clusters' acquisitions (each on its own thread) return before the
    # bag is done: a late one would be released unused
    bag.write_text("".join(f"sleep 0.3; echo task {i}\n" for i in range(1, 31)))
    with CloudPlayer(aws, tmp_path / "machines") as cloud:
        proc = run_master(tmp_path, ["--bag", str(bag), "--config", str(config), "--state-dir", "run",
                                     "--policy", "self"])
        assert proc.returncode == 0, proc.stderr
        time.sleep(0.3)  # the player's last look
        assert not cloud.errors
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["tasks"]["done"] == 30
    rows = results(tmp_path / "run")
    assert sorted(r["id"] for r in rows) == list(range(1, 31)) and all(r["status"] == "done" for r in rows)
    assert {m["cluster"] for m in report["machines"]} == {"od", "spot"}, proc.stderr
    found = instances(aws)
    assert len(found) == len(report["machines"]) == 4
    assert all(i["State"]["Name"] == "terminated" for i in found.values())  # nothing left running
    assert all(tags(i)["bats:run"] == report["run_id"] for i in found.values())
    by_machine = {tags(i)["bats:machine"]: i for i in found.values()}
    assert {m["id"] for m in report["machines"]} == set(by_machine)
    assert all((by_machine[m["id"]].get("InstanceLifecycle") == "spot") == (m["cluster"] == "spot")
               for m in report["machines"])
    # the spot price moto quotes (0.00001 an hour) reached the core as PriceChanged: ATUs at it, not at 5.0
    assert "cluster spot: price per ATU is now 1e-05 (quoted by its provisioner)" in proc.stderr
    assert 0 < report["cost"]["by_cluster"]["spot"] < 0.001
    assert report["cost"]["by_cluster"]["od"] == pytest.approx(1.0)


def test_a_spot_interruption_notice_sends_the_task_elsewhere(aws, tmp_path):
    from bats.worker.spot_testing import MetadataStandIn

    started = tmp_path / "started.txt"
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f"echo {i} >> {started}; sleep 0.4; echo task {i}\n" for i in range(1, 21)))
    with MetadataStandIn() as metadata, CloudPlayer(aws, tmp_path / "machines"):
        config = tmp_path / "c.toml"
        config.write_text(CONFIG + cluster("od", aws.endpoint, 1)
                          + cluster("spot", aws.endpoint, 1, f'market = "spot"\nspot_api = "request_spot_instances"\n'
                                                             f'metadata_url = "{metadata.url}"\nnotice_poll = "0.1s"'))
        master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config),
                                   "--state-dir", "run"], cwd=tmp_path, env=master_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not (started.exists() and len(started.read_text().split()) >= 4):
            assert time.monotonic() < deadline and master.poll() is None, "no task started"
            time.sleep(0.05)
        metadata.arm()  # the spot worker, busy, gets the notice at its next look
        _out, err = master.communicate(timeout=90)
        assert master.returncode == 0, err
    assert metadata.served, "no worker saw the notice"
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    interrupted = [m for m in report["machines"] if "spot interruption notice" in m["release_reason"]]
    assert len(interrupted) == 1 and interrupted[0]["cluster"] == "spot", report["machines"]
    assert "spot interruption notice (terminate at 2030-01-01T00:02:00Z)" in err
    rows = results(tmp_path / "run")
    assert sorted(r["id"] for r in rows) == list(range(1, 21)) and all(r["status"] == "done" for r in rows)
    assert report["tasks"] == {"total": 20, "done": 20, "failed": 0, "not_run": 0}
    starts = [int(x) for x in started.read_text().split()]
    again = {t for t in starts if starts.count(t) > 1}
    assert again, "the interrupted machine's task did not run again"
    for row in rows:  # a task that ran twice counts once, from the machine that finished it
        if row["id"] in again:
            assert row["machine"] != interrupted[0]["id"] and row["attempts"] >= 2
    spot_instances = [i for i in instances(aws).values() if tags(i)["bats:cluster"] == "spot"]
    assert len(spot_instances) == 2  # the interrupted one and its replacement
    assert all(i["State"]["Name"] == "terminated" for i in instances(aws).values())


def kill_master_once_running(aws, tmp_path: Path, args: list[str], running: int = 2, **env: str) -> None:
    """Start the master, wait until ``running`` of its instances run, then ``kill -9`` it."""
    master = subprocess.Popen([*MASTER, "--quiet", *args], cwd=tmp_path, env=master_env(**env),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while len([i for i in instances(aws).values() if i["State"]["Name"] == "running"]) < running:
        assert time.monotonic() < deadline, "no instances"
        time.sleep(0.1)
    master.send_signal(signal.SIGKILL)
    master.wait(timeout=10)


def test_cleanup_terminates_what_a_killed_master_left_running(aws, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(CONFIG + cluster("od", aws.endpoint, 2))
    bag = tmp_path / "tasks.txt"
    bag.write_text("sleep 30\n" * 4)
    with CloudPlayer(aws, tmp_path / "machines") as cloud:
        kill_master_once_running(aws, tmp_path, ["--bag", str(bag), "--config", str(config), "--state-dir", "run"])
        running = {iid for iid, i in instances(aws).items() if i["State"]["Name"] == "running"}
        assert len(running) == 2
        proc = subprocess.run([*MASTER, "cleanup", "--state-dir", "run"], cwd=tmp_path, env=master_env(),
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("cluster od (ec2): terminated 2: ")
        assert all(iid in proc.stdout for iid in running)
        assert all(i["State"]["Name"] == "terminated" for i in instances(aws).values())
        deadline = time.monotonic() + 10
        while any(w.poll() is None for w in cloud.workers.values()):  # the machines are gone
            assert time.monotonic() < deadline
            time.sleep(0.1)
    again = subprocess.run([*MASTER, "cleanup", "--state-dir", "run"], cwd=tmp_path, env=master_env(),
                           capture_output=True, text=True, timeout=60)
    assert again.stdout.strip() == "cluster od (ec2): terminated 0: nothing left"


def test_a_persistent_capacity_shortage_lowers_the_max_and_the_bag_still_runs(aws, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(CONFIG + cluster("od", aws.endpoint, 3, "api_retries = 2"))
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f"echo {i}\n" for i in range(1, 11)))
    with CloudPlayer(aws, tmp_path / "machines"):
        proc = run_master(tmp_path, ["--bag", str(bag), "--config", str(config), "--state-dir", "run"],
                          env=master_env(BATS_TEST_EC2_REFUSE="od:1:InsufficientInstanceCapacity"))
    assert proc.returncode == 0, proc.stderr
    assert "cluster od: the provisioner can give at most 1 machine(s) now (max 3)" in proc.stderr
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["tasks"]["done"] == 10 and len(report["machines"]) == 1
    assert all(i["State"]["Name"] == "terminated" for i in instances(aws).values())


def journaled_machines(state_dir) -> int:
    """Machines the master's journal holds (read-only; 0 while it is not there yet)."""
    import sqlite3

    try:
        with sqlite3.connect(f"file:{state_dir / 'journal.sqlite'}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT COUNT(*) FROM machines").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_resume_terminates_what_the_killed_session_left_and_counts_its_time(aws, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(CONFIG + cluster("od", aws.endpoint, 2, 'price = 0.01\natu = "1s"'))
    bag = tmp_path / "tasks.txt"
    bag.write_text("sleep 1\n" * 4)
    with CloudPlayer(aws, tmp_path / "machines") as cloud:
        master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config),
                                   "--state-dir", "run", "--policy", "self"], cwd=tmp_path, env=master_env(),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while len([w for w in cloud.workers.values() if w.poll() is None]) < 2:
            assert time.monotonic() < deadline, "no workers"
            time.sleep(0.1)
        # acquisitions return off the master's loop: kill it once both machines are on disk (a kill
        # before that is the next test's case: only the acquisition's intent is on disk)
        while journaled_machines(tmp_path / "run") < 2:
            assert time.monotonic() < deadline, "machines not journaled"
            time.sleep(0.1)
        master.send_signal(signal.SIGKILL)
        master.wait(timeout=10)
        first = {iid for iid, i in instances(aws).items() if i["State"]["Name"] == "running"}
        time.sleep(3)  # the machines run on, and cost, while nobody watches
        proc = run_master(tmp_path, ["--resume", "--state-dir", "run"])
        assert proc.returncode == 0, proc.stderr
    assert "cluster od: terminated 2 machine(s) an earlier session left running" in proc.stderr
    found = instances(aws)
    assert all(found[iid]["State"]["Name"] == "terminated" for iid in first)
    assert all(i["State"]["Name"] == "terminated" for i in found.values())
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    earlier = [m for m in report["machines"] if m["session"] == 1]
    assert len(earlier) == 2 and report["tasks"]["done"] == 4
    for m in earlier:  # billed until the resume terminated them, not until the master died
        assert m["uptime_s"] >= 3 and m["cost"] == pytest.approx(m["atus"] * 0.01)
    assert report["cost"]["total"] == pytest.approx(sum(m["cost"] for m in report["machines"]))


def test_instances_launched_but_never_journaled_are_charged_from_their_acquisitions_intent(aws, tmp_path):
    """The master dies after the cloud launched its instances and before their acquisition
    returned: the journal holds only the acquisition's intent. ``--resume`` terminates the
    instances (found by their tags) and charges them from when they were asked for."""
    import sqlite3

    config = tmp_path / "c.toml"
    config.write_text(CONFIG + cluster("od", aws.endpoint, 2, 'price = 0.01\natu = "1s"'))
    bag = tmp_path / "tasks.txt"
    bag.write_text("sleep 0.5\n" * 4)
    with CloudPlayer(aws, tmp_path / "machines"):
        kill_master_once_running(aws, tmp_path, ["--bag", str(bag), "--config", str(config), "--state-dir", "run",
                                                 "--policy", "self"], BATS_TEST_EC2_STALL="od:60")
        killed_at = time.time()
        with sqlite3.connect(f"file:{tmp_path / 'run' / 'journal.sqlite'}?mode=ro", uri=True) as db:
            assert db.execute("SELECT COUNT(*) FROM machines").fetchone()[0] == 0
            (intents,) = db.execute("SELECT value FROM meta WHERE key = 'acquiring'").fetchone()
        (intent,) = json.loads(intents)
        assert intent["cluster"] == "od" and intent["n"] == 2 and intent["session"] == 1
        launched = {iid for iid, i in instances(aws).items() if i["State"]["Name"] == "running"}
        time.sleep(2)  # the instances run on, and cost, while nobody knows them
        proc = run_master(tmp_path, ["--resume", "--state-dir", "run"])
        assert proc.returncode == 0, proc.stderr
    assert "cluster od: terminated 2 machine(s) an earlier session left running" in proc.stderr
    assert proc.stderr.count("was launched for this run but never journaled") == 2
    assert all(instances(aws)[iid]["State"]["Name"] == "terminated" for iid in launched)
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    unjournaled = [m for m in report["machines"] if m["session"] == 1]
    assert len(unjournaled) == 2 and report["tasks"]["done"] == 4
    for m in unjournaled:  # from the intent's time until the resume terminated them
        assert m["uptime_s"] >= killed_at + 2 - intent["asked_at"] - 0.5
        assert m["atus"] >= 3 and m["cost"] == pytest.approx(m["atus"] * 0.01)
    assert report["cost"]["total"] == pytest.approx(sum(m["cost"] for m in report["machines"]))
    with sqlite3.connect(f"file:{tmp_path / 'run' / 'journal.sqlite'}?mode=ro", uri=True) as db:
        (intents,) = db.execute("SELECT value FROM meta WHERE key = 'acquiring'").fetchone()
    assert json.loads(intents) == []  # settled: the resumed session's own acquisitions returned too


# ---------------------------------------------------------------- slots = "auto"
def test_auto_slots_are_the_instance_types_vcpus(aws):
    assert make(aws, instance_type="c5.4xlarge").machine_cpus() == 16
    assert make(aws, instance_type="t3.micro").machine_cpus() == 2


def test_a_run_with_auto_slots_plans_and_runs_with_the_instance_types_vcpus(aws, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(CONFIG + cluster("wide", aws.endpoint, 1, 'price = 0.5\nslots = "auto"'))
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f"sleep 0.3; echo task {i}\n" for i in range(1, 9)))
    with CloudPlayer(aws, tmp_path / "machines") as cloud:
        proc = subprocess.run([*MASTER, "--bag", str(bag), "--config", str(config), "--state-dir", "run",
                               "--policy", "self"], cwd=tmp_path, capture_output=True, text=True, timeout=90,
                              env=master_env())
        assert proc.returncode == 0, proc.stderr
        assert not cloud.errors
    assert 'cluster wide: slots = "auto": 2 per machine' in proc.stderr  # t3.micro: 2 vCPUs
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["clusters"]["wide"]["slots"] == 2
    (machine,) = report["machines"]
    assert machine["slots"] == 2 and machine["nt"] == 8
