"""The libcloud provisioner: Libcloud's EC2 driver against moto's EC2 server (with the two
adjustments of ``../shared/recipes/ec2-moto.md``), a whole bag through the real master, and
Libcloud's DummyNodeDriver as a smoke test of a driver without user data or tags."""

from __future__ import annotations

import json
import subprocess

import pytest
from helpers.cloud_harness import (
    LIBCLOUD_NAMESPACE,
    MASTER,
    WORKER,
    CloudPlayer,
    instances,
    master_env,
    tags,
    user_data,
)
from helpers.runs import results

from bats.common.config import ClusterConfig, ConfigError
from bats.master.cli.args import load_cluster_config
from bats.provisioners.base import Bootstrap, NodeState
from bats.provisioners.cloud import ApiRefused, error_code, worker_command, worker_environment
from bats.provisioners.libcloud import LibcloudProvisioner


@pytest.fixture
def aws(moto, monkeypatch):
    import libcloud.compute.drivers.ec2 as libcloud_ec2

    monkeypatch.setattr(libcloud_ec2, "NAMESPACE", LIBCLOUD_NAMESPACE)  # moto answers without the slash
    monkeypatch.setenv("TEST_EC2_SECRET", "testing")
    moto.reset()
    return moto


def driver_args(moto) -> dict:
    return {"key": "testing", "region": "us-east-1", "host": "127.0.0.1", "port": moto.port, "secure": False,
            "signature_version": "4"}


def make(options: dict, name: str = "lc", run: str = "run1", market: str = "on-demand") -> LibcloudProvisioner:
    opts = {key: default for key, (_kind, default) in LibcloudProvisioner.OPTIONS.items()}
    opts.update(status_poll=0.0, api_backoff=0.01)
    opts.update(options)
    cluster = ClusterConfig(name=name, provisioner="libcloud", max=4, options=opts, market=market)
    LibcloudProvisioner.check_config(cluster)
    return LibcloudProvisioner(cluster, Bootstrap("tcp://127.0.0.1:5555", run))


def ec2(moto, **options) -> LibcloudProvisioner:
    return make({"driver": "ec2", "driver_args": driver_args(moto), "driver_env": {"secret": "TEST_EC2_SECRET"},
                 "size": "t3.micro", "image": "ami-12345678", **options})


def test_nodes_carry_user_data_and_tags_and_are_destroyed_on_release(aws):
    p = ec2(aws, tags={"team": "science"})
    handles = p.acquire(2)
    found = instances(aws)
    for h in handles:
        instance = found[h.native_id]
        assert tags(instance) == {"Name": f"bats-run1-{h.machine_id}", "team": "science", "bats:run": "run1",
                                  "bats:cluster": "lc", "bats:machine": h.machine_id, "bats:session": "1"}
        text = user_data(aws, h.native_id)
        argv = worker_command(text)
        assert worker_environment(text) == {"BATS_TOKEN": h.token} and h.token not in " ".join(argv)
    assert set(p.status(handles).values()) == {NodeState.RUNNING}
    p.release(handles[:1])
    assert p.status(handles)[handles[0].machine_id] is NodeState.GONE


def test_spot_args_make_a_spot_instance_and_cleanup_finds_a_runs_nodes(aws):
    spot = ec2(aws, metadata_url="http://127.0.0.1:9")
    spot = make(spot.opts, market="spot")
    (h,) = spot.acquire(1)
    assert instances(aws)[h.native_id].get("InstanceLifecycle") == "spot"
    assert "--spot-notice" in worker_command(user_data(aws, h.native_id))
    other_run = make(ec2(aws).opts, run="run2").acquire(1)
    mine = ec2(aws).acquire(1)
    found = ec2(aws).cleanup()
    assert found == {h.native_id: h.machine_id, mine[0].native_id: mine[0].machine_id}
    states = {iid: i["State"]["Name"] for iid, i in instances(aws).items()}
    assert states[other_run[0].native_id] == "running"
    assert states[h.native_id] == states[mine[0].native_id] == "terminated"


def test_refusals_from_libcloud_are_retried_then_lower_the_max(aws):
    p = ec2(aws, api_retries=2)
    real = p._api
    p.sleep = lambda s: None

    def api(method, *args, **kwargs):
        if method == "create_node" and p._held:
            raise Exception("InsufficientInstanceCapacity: We currently do not have sufficient capacity")
        return real(method, *args, **kwargs)

    p._api = api
    assert len(p.acquire(3)) == 1 and p.usable_max == 1
    with pytest.raises(ApiRefused):
        p.acquire(1)
    assert error_code(Exception("RequestLimitExceeded: slow down")) == "RequestLimitExceeded"
    assert error_code(Exception("InvalidAMIID.NotFound: no")) is None


def test_the_dummy_driver_smoke():
    p = make({"driver": "dummy", "driver_args": {"creds": 0}, "size": "Small", "image": "1",
              "userdata_arg": "", "tags_arg": ""})
    handles = p.acquire(2)
    assert len(handles) == 2 and set(p.status(handles).values()) == {NodeState.RUNNING}
    p.release(handles)


def test_config_errors_are_one_line(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[clusters.x]\nprovisioner = "libcloud"\nmax = 1\ndriver = "ec2"\nimage = "ami-1"\n')
    with pytest.raises(ConfigError, match=r"\[clusters.x\] size: required for the libcloud provisioner$"):
        load_cluster_config(str(path), None)
    path.write_text('[clusters.x]\nprovisioner = "libcloud"\nmax = 1\ndriver = "ec2"\nimage = "ami-1"\n'
                    'size = "t3.micro"\ndriver_args = "key=abc"\n')
    with pytest.raises(ConfigError, match=r"driver_args: expected a table of keyword arguments"):
        load_cluster_config(str(path), None)
    p = make({"driver": "no-such-cloud", "size": "s", "image": "i"})
    with pytest.raises(Exception, match="driver: Libcloud has no compute driver 'no-such-cloud'"):
        p.acquire(1)


def test_a_bag_runs_through_libcloud(aws, tmp_path):
    args = ", ".join(f"{k} = {json.dumps(v)}" for k, v in driver_args(aws).items())
    config = tmp_path / "c.toml"
    config.write_text(f"""
[master]
listen = "tcp://127.0.0.1:*"
heartbeat = "0.5s"
liveness = "5s"

[clusters.lc]
provisioner = "libcloud"
max = 2
driver = "ec2"
driver_args = {{ {args} }}
driver_env = {{ secret = "TEST_EC2_SECRET" }}
size = "t3.micro"
image = "ami-12345678"
worker_command = "{WORKER}"
status_poll = "0.5s"
""")
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f"sleep 0.2; echo task {i}\n" for i in range(1, 21)))  # long enough for both to join
    with CloudPlayer(aws, tmp_path / "machines") as cloud:
        proc = subprocess.run([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--state-dir", "run"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=90,
                              env=master_env(BATS_TEST_LIBCLOUD_NAMESPACE="1", TEST_EC2_SECRET="testing"))
        assert proc.returncode == 0, proc.stderr
        assert not cloud.errors and len(cloud.workers) == 2
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["tasks"]["done"] == 20
    assert sorted(r["id"] for r in results(tmp_path / "run")) == list(range(1, 21))
    found = instances(aws)
    assert {tags(i)["bats:machine"] for i in found.values()} == {m["id"] for m in report["machines"]}
    assert all(i["State"]["Name"] == "terminated" for i in found.values())


def test_auto_slots_are_the_sizes_vcpus_where_the_driver_says_them(aws):
    assert ec2(aws, size="c5.4xlarge").machine_cpus() == 16  # libcloud's EC2 sizes carry extra["vcpu"]
    dummy = make({"driver": "dummy", "driver_args": {"creds": 0}, "size": "Small", "image": "1",
                  "userdata_arg": "", "tags_arg": ""})
    assert dummy.machine_cpus() is None  # the dummy's sizes say nothing: the worker's hello will
