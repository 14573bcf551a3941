"""The test harness that plays the cloud for the ec2 and libcloud provisioners.

moto's EC2 server (``../shared/recipes/ec2-moto.md``) keeps instances as records and boots
nothing. :class:`CloudPlayer` makes them real: it polls moto, and for every instance that is
running it reads the instance's user data, finds the worker command in it (the ``exec`` line every
template has) and starts that command as a real ``bats-worker`` process; when the instance is
terminated it kills the worker at once, as a vanishing machine would. The stand-in for the
instance metadata service (spot interruption notices) ships beside the real watcher:
:mod:`bats.worker.spot_testing`.

Run as a program, this module is the master with test-only adjustments made in its process
(``BATS_TEST_*`` variables): the Libcloud EC2 namespace moto answers with, and injected EC2 errors.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from botocore.exceptions import ClientError

from bats.provisioners.ec2 import Ec2Provisioner

AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_SESSION_TOKEN": "testing"}
BATS_MASTER = [sys.executable, "-m", "bats.master.cli"]  # the real command
MASTER = [sys.executable, str(Path(__file__).resolve())]  # bats-master, through main() below
LIBCLOUD_NAMESPACE = "http://ec2.amazonaws.com/doc/2016-11-15"
WORKER = f"{sys.executable} -m bats.worker"  # the worker command the cloud tests' user data runs


class MotoServer:
    """moto's EC2 server on 127.0.0.1, in this process."""

    def __init__(self) -> None:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        _host, self.port = self.server.get_host_and_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def client(self):
        import boto3

        return boto3.client("ec2", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def reset(self) -> None:
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(self.endpoint + "/moto-api/reset", method="POST"), timeout=10)

    def stop(self) -> None:
        self.server.stop()


def moto_fixture():
    """A pytest fixture body: one moto server for a test module, reset after every test."""
    server = MotoServer()
    try:
        yield server
    finally:
        server.stop()


class CloudPlayer:
    """Starts a real worker for each running instance and kills it when the instance goes."""

    def __init__(self, moto: MotoServer, log_dir: Path, poll_s: float = 0.1, bare: bool = False) -> None:
        """``bare``: the workers run as on a machine without AWS credentials or boto3: no ``AWS_*``
        variable in their environment, and ``import boto3``/``botocore`` fails in them."""
        self.ec2 = moto.client()
        self.log_dir = log_dir
        self.poll_s = poll_s
        self.bare = bare
        self.workers: dict[str, subprocess.Popen] = {}  # instance id -> worker
        self.started_at: dict[str, float] = {}
        self.commands: dict[str, list[str]] = {}
        self.environments: dict[str, dict[str, str]] = {}  # instance id -> its worker's environment
        self.killed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cloud-player", daemon=True)
        self.errors: list[str] = []

    def __enter__(self) -> CloudPlayer:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for proc in self.workers.values():
            _kill(proc)

    def instances(self) -> list[dict]:
        found = []
        for page in self.ec2.get_paginator("describe_instances").paginate():
            for reservation in page["Reservations"]:
                found.extend(reservation["Instances"])
        return found

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._step()
            except Exception as exc:  # keep playing; the test sees the errors
                self.errors.append(repr(exc))
            self._stop.wait(self.poll_s)

    def _step(self) -> None:
        for instance in self.instances():
            iid, state = instance["InstanceId"], instance["State"]["Name"]
            if state == "running" and iid not in self.workers:
                attribute = self.ec2.describe_instance_attribute(InstanceId=iid, Attribute="userData")
                user_data = base64.b64decode(attribute["UserData"].get("Value", "")).decode()
                from bats.provisioners.cloud import worker_command, worker_environment

                argv = worker_command(user_data)
                if argv is None:
                    self.errors.append(f"{iid}: no worker command in its user data")
                    self.workers[iid] = subprocess.Popen(["true"])
                    continue
                self.commands[iid] = argv
                env = {**os.environ, **worker_environment(user_data)}
                if self.bare:
                    env = {k: v for k, v in env.items() if not k.startswith("AWS_")}
                    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self._no_boto()), env.get("PYTHONPATH")]))
                self.environments[iid] = env
                log = open(self.log_dir / f"{iid}.log", "ab")
                self.workers[iid] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                                     start_new_session=True, env=env)
                log.close()
                self.started_at[iid] = time.monotonic()
            elif state in ("shutting-down", "terminated", "stopped") and iid in self.workers:
                proc = self.workers[iid]
                if proc.poll() is None:
                    self.killed.append(iid)
                    _kill(proc)


    def _no_boto(self) -> Path:
        """A folder that, first on PYTHONPATH, makes ``import boto3`` and ``import botocore`` fail."""
        folder = self.log_dir / "no-boto"
        for name in ("boto3", "botocore"):
            (folder / name).mkdir(parents=True, exist_ok=True)
            (folder / name / "__init__.py").write_text(f"raise ImportError('no {name} on this machine')\n")
        return folder


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=10)


def _refuse_launches() -> None:
    """BATS_TEST_EC2_REFUSE="CLUSTER:AFTER:CODE": that cluster's instance launches after the first
    AFTER fail with the EC2 error CODE, every time (a capacity shortage that does not pass)."""
    spec = os.environ.get("BATS_TEST_EC2_REFUSE")
    if not spec:
        return
    cluster, after, code = spec.split(":")

    from bats.provisioners.ec2 import Ec2Provisioner

    real = Ec2Provisioner._api
    launches: dict[str, int] = {}

    def refusing(self, operation: str, **params):
        if self.cluster.name == cluster and operation in ("run_instances", "request_spot_instances"):
            launches[cluster] = launches.get(cluster, 0) + 1
            if launches[cluster] > int(after):
                raise ClientError({"Error": {"Code": code, "Message": "injected by the test"}}, operation)
        return real(self, operation, **params)

    Ec2Provisioner._api = refusing


def _stall_after_launch() -> None:
    """BATS_TEST_EC2_STALL="CLUSTER:SECONDS": that cluster's acquisitions launch their instances,
    then take SECONDS more before they return (a master killed meanwhile never journaled them)."""
    spec = os.environ.get("BATS_TEST_EC2_STALL")
    if not spec:
        return
    cluster, seconds = spec.split(":")

    real = Ec2Provisioner.acquire

    def stalling(self, n: int):
        handles = real(self, n)
        if self.cluster.name == cluster:
            time.sleep(float(seconds))
        return handles

    Ec2Provisioner.acquire = stalling


def main() -> int:
    if os.environ.get("BATS_TEST_LIBCLOUD_NAMESPACE"):
        import libcloud.compute.drivers.ec2 as libcloud_ec2

        libcloud_ec2.NAMESPACE = LIBCLOUD_NAMESPACE
    _refuse_launches()
    _stall_after_launch()
    from bats.master.cli.commands import main as master_main

    return master_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())


def instances(moto) -> dict[str, dict]:
    found = {}
    for reservation in moto.client().describe_instances()["Reservations"]:
        for instance in reservation["Instances"]:
            found[instance["InstanceId"]] = instance
    return found


def tags(instance: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags", [])}


def user_data(moto, instance_id: str) -> str:
    import base64

    answer = moto.client().describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
    return base64.b64decode(answer["UserData"]["Value"]).decode()


def master_env(**extra: str) -> dict[str, str]:
    return {**os.environ, **AWS_ENV, **extra}


def results(state_dir: Path) -> list[dict]:
    out = subprocess.run([*BATS_MASTER, "results", "--state-dir", str(state_dir)], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]
