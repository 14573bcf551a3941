"""[files] on EC2 through S3, against moto's server (EC2 and S3 on 127.0.0.1) with the harness playing
the cloud: the master stages the inputs in the bucket once, each real worker fetches them and runs
the setup before joining and uploads its tasks' outputs, and the outputs are in the state dir
afterwards; a failing setup gives its machine up, saying so. The machines' credentials are their
own (here the environment, on EC2 an instance profile): none is on a command line or in user data."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers.cloud_harness import AWS_ENV, MASTER, WORKER, CloudPlayer, master_env, results, user_data

pytestmark = pytest.mark.e2e

BUCKET = "bats-files"


@pytest.fixture
def aws(moto, monkeypatch):
    for key, value in AWS_ENV.items():
        monkeypatch.setenv(key, value)
    moto.reset()
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto.endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    moto.s3 = s3
    return moto


def config(tmp_path: Path, endpoint: str, files: str, max_: int = 2) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(f"""
[master]
heartbeat = "0.5s"
liveness = "5s"
boot_timeout = "30s"

[files]
{files}

[clusters.od]
provisioner = "ec2"
max = {max_}
price = 0.5
instance_type = "t3.micro"
image = "ami-12345678"
region = "us-east-1"
endpoint_url = "{endpoint}"
worker_command = "{WORKER}"
status_poll = "0.5s"
api_backoff = "0.05s"
files_s3 = "s3://{BUCKET}/runs"
files_endpoint_url = "{endpoint}"
files_dir = "{tmp_path / 'machines'}"
""")
    return path


def run(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MASTER, "--quiet", "--policy", "self", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=timeout, env=master_env(), stdin=subprocess.DEVNULL)


def keys(s3, prefix: str) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", []))


def test_a_bag_reads_its_shipped_input_on_ec2_and_every_output_is_in_the_state_dir(aws, tmp_path):
    (tmp_path / "ref.txt").write_text("reference\n")
    path = config(tmp_path, aws.endpoint, 'inputs = ["ref.txt"]\nsetup = "echo ready > ready.txt"\n'
                                          'outputs = ["out-{id}.txt"]\nmax_output = "1KB"')
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f'test "$PWD" != {tmp_path}; sleep 0.2; cat ref.txt ready.txt > out-{i}.txt\n'
                           for i in range(1, 13)))
    with CloudPlayer(aws, tmp_path / "cloud") as cloud:
        done = run(tmp_path, "--bag", str(bag), "--config", str(path), "--state-dir", "run")
        assert done.returncode == 0, done.stderr
        assert not cloud.errors
        secret = AWS_ENV["AWS_SECRET_ACCESS_KEY"]
        assert cloud.commands and all(secret not in " ".join(argv) for argv in cloud.commands.values())
        assert all("--files-from" in argv for argv in cloud.commands.values())
        assert all(secret not in user_data(aws, iid) for iid in cloud.commands)
    outputs = tmp_path / "run" / "files" / "outputs"
    for i in range(1, 13):
        assert (outputs / str(i) / f"out-{i}.txt").read_text() == "reference\nready\n", i
    rows = results(tmp_path / "run")
    assert len(rows) == 12 and all(r["status"] == "done" for r in rows)
    # the inputs were staged once, content-hashed, and the outputs passed through the run's folder
    run_id = json.loads((tmp_path / "run" / "report.json").read_text())["run_id"]
    staged = keys(aws.s3, "runs/inputs/")
    assert len({k.split("/")[2] for k in staged}) == 1 and staged[0].endswith("/.bats-set")
    assert {k.rsplit("/", 1)[1] for k in staged} == {".bats-set", ".bats-setup", "ref.txt"}
    assert len(keys(aws.s3, f"runs/{run_id}/outputs/")) == 12
    # each machine fetched the inputs into its own folder and ran the setup there
    machines = {r["machine"] for r in rows}
    for machine in machines:
        assert (tmp_path / "machines" / machine / "inputs" / "ready.txt").read_text() == "ready\n"


def test_the_same_inputs_are_not_staged_again(aws, tmp_path):
    from bats.common.config import ClusterConfig
    from bats.common.files import FilesConfig
    from bats.provisioners.base import Bootstrap
    from bats.provisioners.ec2 import Ec2Provisioner

    (tmp_path / "ref.txt").write_text("one\n")
    opts = {key: default for key, (_kind, default) in Ec2Provisioner.OPTIONS.items()}
    opts.update(instance_type="t3.micro", image="ami-12345678", endpoint_url=aws.endpoint, region="us-east-1",
                files_s3=f"s3://{BUCKET}/p", files_endpoint_url=aws.endpoint)
    cluster = ClusterConfig(name="c", provisioner="ec2", max=1, price=0.1, atu_s=3600.0, options=opts)

    def stage() -> str:
        p = Ec2Provisioner(cluster, Bootstrap("tcp://127.0.0.1:9", "r", files=FilesConfig(inputs=(str(tmp_path / "ref.txt"),))))
        p._stage_inputs()
        return p._staged or ""

    first = stage()
    modified = aws.s3.head_object(Bucket=BUCKET, Key=first.split("/", 3)[3] + "/ref.txt")["LastModified"]
    assert stage() == first
    assert aws.s3.head_object(Bucket=BUCKET, Key=first.split("/", 3)[3] + "/ref.txt")["LastModified"] == modified
    (tmp_path / "ref.txt").write_text("two\n")
    second = stage()
    assert second != first
    body = aws.s3.get_object(Bucket=BUCKET, Key=second.split("/", 3)[3] + "/ref.txt")["Body"].read()
    assert body == b"two\n"


def test_a_failing_setup_on_ec2_gives_the_machine_up_saying_why(aws, tmp_path):
    path = config(tmp_path, aws.endpoint, 'setup = "echo no compiler here >&2; exit 3"', max_=1)
    bag = tmp_path / "tasks.txt"
    bag.write_text("true\n")
    with CloudPlayer(aws, tmp_path / "cloud"):
        done = run(tmp_path, "--bag", str(bag), "--config", str(path), "--state-dir", "run")
    assert done.returncode == 1, done.stderr
    assert "cluster od: [files] setup failed on od-s1-1 (exit 3): no compiler here; the machine is given up" in done.stderr


def test_an_ec2_cluster_without_a_bucket_is_refused_with_files(tmp_path):
    path = config(tmp_path, "http://127.0.0.1:9", 'setup = "true"')
    path.write_text(path.read_text().replace(f'files_s3 = "s3://{BUCKET}/runs"\n', ""))
    (tmp_path / "tasks.txt").write_text("true\n")
    done = run(tmp_path, "--bag", "tasks.txt", "--config", str(path), "--state-dir", "run", timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "[clusters.od] files_s3: required with [files]" in done.stderr


def test_outputs_a_machine_put_outside_a_tasks_folder_or_over_the_limit_stay_in_s3(aws, tmp_path):
    """The bucket is written by the machines: a key that would land outside STATE_DIR/files/outputs/ID,
    or a file larger than max_output, is not brought back (and named in the log)."""
    from bats.common.config import ClusterConfig
    from bats.common.files import FilesConfig
    from bats.provisioners.base import Bootstrap
    from bats.provisioners.ec2 import Ec2Provisioner

    opts = {key: default for key, (_kind, default) in Ec2Provisioner.OPTIONS.items()}
    opts.update(instance_type="t3.micro", image="ami-12345678", endpoint_url=aws.endpoint, region="us-east-1",
                files_s3=f"s3://{BUCKET}/p", files_endpoint_url=aws.endpoint)
    cluster = ClusterConfig(name="c", provisioner="ec2", max=1, price=0.1, atu_s=3600.0, options=opts)
    state = tmp_path / "state"
    p = Ec2Provisioner(cluster, Bootstrap("tcp://127.0.0.1:9", "r", state_dir=str(state),
                                          files=FilesConfig(outputs=("out-{id}.txt",), max_output=10)))
    for key, body in [("p/r/outputs/4/out-4.txt", b"fine"), ("p/r/outputs/5/../../../../escape.txt", b"x"),
                      ("p/r/outputs/abc/out.txt", b"x"), ("p/r/outputs/6/out-6.txt", b"x" * 11),
                      ("p/r/outputs/7//etc/passwd", b"x")]:
        aws.s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    p._fetch_outputs()
    kept = sorted(path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*") if path.is_file())
    assert kept == ["state/files/outputs/4/out-4.txt"]
    p._fetch_outputs()  # each key once: nothing is fetched again
    assert (state / "files" / "outputs" / "4" / "out-4.txt").read_bytes() == b"fine"
