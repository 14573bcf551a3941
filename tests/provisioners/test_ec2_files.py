"""[files] on EC2 through S3, against moto's server (EC2 and S3 on 127.0.0.1) with the harness playing
the cloud: the master stages the inputs in the bucket once, each real worker fetches them and runs
the setup before joining and uploads its tasks' outputs, and the outputs are in the state dir
afterwards; a failing setup gives its machine up, saying so. The machines hold no AWS credentials
and no boto3 (the harness's ``bare`` workers): the master signs their URLs, which reach them in the
environment (user data) as the token does, never on a command line. moto accepts any signature and
does not check a POST policy's conditions, so the policy the master signs is checked here as S3
would check it."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import stat
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from helpers.cloud_harness import AWS_ENV, MASTER, WORKER, CloudPlayer, master_env, results, user_data

pytestmark = pytest.mark.e2e

BUCKET = "bats-files"
# the master's own credentials: unlike the harness's "testing", nothing else in a user data spells them
MASTER_KEYS = {"AWS_ACCESS_KEY_ID": "AKIAMASTERONLY", "AWS_SECRET_ACCESS_KEY": "master-secret-never-on-a-machine"}


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
    env = master_env(**MASTER_KEYS)
    env.pop("AWS_SESSION_TOKEN")  # long-term keys: a session token would ride in every signed URL
    return subprocess.run([*MASTER, "--quiet", "--policy", "self", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def keys(s3, prefix: str) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", []))


def test_a_bag_reads_its_shipped_input_on_ec2_and_every_output_is_in_the_state_dir(aws, tmp_path):
    (tmp_path / "ref.txt").write_text("reference\n")
    path = config(tmp_path, aws.endpoint, 'inputs = ["ref.txt"]\nsetup = "echo ready > ready.txt"\n'
                                          'outputs = ["out-{id}.txt"]\nmax_output = "1KB"')
    bag = tmp_path / "tasks.txt"
    # a task sees neither the signed URLs nor any AWS credential
    bag.write_text("".join(f'test "$PWD" != {tmp_path}; test -z "${{BATS_FILES_GRANT-}}${{AWS_ACCESS_KEY_ID-}}"; '
                           f'sleep 0.2; cat ref.txt ready.txt > out-{i}.txt\n' for i in range(1, 13)))
    with CloudPlayer(aws, tmp_path / "cloud", bare=True) as cloud:
        done = run(tmp_path, "--bag", str(bag), "--config", str(path), "--state-dir", "run")
        assert done.returncode == 0, done.stderr
        assert not cloud.errors
        secret = MASTER_KEYS["AWS_SECRET_ACCESS_KEY"]
        assert cloud.commands and all(secret not in " ".join(argv) for argv in cloud.commands.values())
        assert all("--files-from" in argv for argv in cloud.commands.values())
        assert all(secret not in user_data(aws, iid) for iid in cloud.commands)
        # the signed URLs are in each worker's environment, from its user data, and in no argv
        assert all("signature" not in " ".join(argv).lower() for argv in cloud.commands.values())
        assert all("X-Amz-Signature" in env["BATS_FILES_GRANT"] for env in cloud.environments.values())
        # the machines fetched and uploaded with no AWS credentials and no boto3
        assert all(not any(k.startswith("AWS_") for k in env) for env in cloud.environments.values())
        assert all("no-boto" in env["PYTHONPATH"] for env in cloud.environments.values())
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
        # the uploads' policy waits in a file only the worker's user reads; the push command names its path
        grant = tmp_path / "machines" / machine / ".grant"
        assert stat.S_IMODE(grant.stat().st_mode) == 0o600 and "x-amz-signature" in grant.read_text()
        assert "http" not in (tmp_path / "machines" / machine / "push").read_text()


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
    with CloudPlayer(aws, tmp_path / "cloud", bare=True):  # the failure is told through a signed PUT
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


def provisioner(aws, tmp_path: Path, files, **options):
    from bats.common.config import ClusterConfig
    from bats.provisioners.base import Bootstrap
    from bats.provisioners.ec2 import Ec2Provisioner

    opts = {key: default for key, (_kind, default) in Ec2Provisioner.OPTIONS.items()}
    opts.update(instance_type="t3.micro", image="ami-12345678", endpoint_url=aws.endpoint, region="us-east-1",
                files_s3=f"s3://{BUCKET}/p", files_endpoint_url=aws.endpoint, **options)
    cluster = ClusterConfig(name="c", provisioner="ec2", max=1, price=0.1, atu_s=3600.0, options=opts)
    return Ec2Provisioner(cluster, Bootstrap("tcp://127.0.0.1:9", "r", state_dir=str(tmp_path / "state"), files=files))


def signing_key(secret: str, scope: str) -> bytes:
    """Signature version 4's key for ``scope`` (``DATE/REGION/SERVICE/aws4_request``)."""
    key = ("AWS4" + secret).encode()
    for part in scope.split("/"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def s3_would_accept(policy: dict, fields: dict[str, str], size: int) -> bool:
    """Whether S3 takes a POST of these form fields and a file of ``size`` bytes under ``policy``:
    every condition must hold (AWS's 'Creating a POST policy'; moto checks none of them)."""
    for condition in policy["conditions"]:
        if isinstance(condition, dict):
            ((name, value),) = condition.items()
            if fields.get(name) != value:
                return False
        elif condition[0] == "starts-with":
            if not fields.get(condition[1].lstrip("$"), "").startswith(condition[2]):
                return False
        elif condition[0] == "content-length-range":
            if not condition[1] <= size <= condition[2]:
                return False
        elif fields.get(condition[1].lstrip("$")) != condition[2]:  # ["eq", "$name", value]
            return False
    return True


def test_the_upload_policy_holds_a_machine_to_the_runs_outputs_and_max_output(aws, tmp_path, monkeypatch):
    from bats.common.files import FilesConfig
    from bats.provisioners.base import MachineHandle

    for key, value in MASTER_KEYS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN")
    (tmp_path / "ref.txt").write_text("one\n")
    p = provisioner(aws, tmp_path, FilesConfig(inputs=(str(tmp_path / "ref.txt"),), setup="true",
                                               outputs=("out-{id}.txt",), max_output=100), files_url_expiry=3600.0)
    p._stage_inputs()
    handle = MachineHandle(machine_id="c-s1-1", cluster="c", token="t0k")
    before = time.time()
    grant = json.loads(p._files_grant(handle)["BATS_FILES_GRANT"])
    after = time.time()
    fields = grant["post"]["fields"]
    policy = json.loads(base64.b64decode(fields["policy"]))
    # signed with the master's secret: a machine that changes a condition breaks the signature
    scope = fields["x-amz-credential"].split("/", 1)[1]
    assert fields["x-amz-credential"].startswith(MASTER_KEYS["AWS_ACCESS_KEY_ID"] + "/")
    assert fields["x-amz-signature"] == hmac.new(signing_key(MASTER_KEYS["AWS_SECRET_ACCESS_KEY"], scope),
                                                 fields["policy"].encode(), hashlib.sha256).hexdigest()
    assert ["starts-with", "$key", "p/r/outputs/"] in policy["conditions"]
    assert ["content-length-range", 0, 100] in policy["conditions"]
    assert grant["outputs"] == "p/r/outputs/"

    def accepted(key: str, size: int = 10) -> bool:
        return s3_would_accept(policy, {**fields, "key": key, "bucket": BUCKET}, size)

    assert accepted("p/r/outputs/4/out-4.txt")
    assert not accepted("p/r/outputs/4/out-4.txt", size=101)  # over max_output
    for elsewhere in ("p/r/grants/c-s1-1.json", "p/r/setup-failed/c-s1-2", "p/inputs/x/ref.txt",
                      "p/r2/outputs/4/out-4.txt", "q/r/outputs/4/out-4.txt", "p/r/outputs"):
        assert not accepted(elsewhere), elsewhere
    assert not s3_would_accept(policy, {**fields, "key": "p/r/outputs/1/x", "bucket": "another"}, 10)
    # the expiry: files_url_expiry from now, in the grant, the policy and every URL
    assert before + 3600 - 1 <= grant["expires"] <= after + 3600
    expiration = dt.datetime.strptime(policy["expiration"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    assert abs(expiration.timestamp() - grant["expires"]) <= 2
    assert "X-Amz-Expires=3600" in grant["manifest"] and "X-Amz-Expires=3600" in grant["failed"]
    # the PUT names one key, this machine's failure record
    assert urllib.parse.urlsplit(grant["failed"]).path == f"/{BUCKET}/p/r/setup-failed/c-s1-1"
    # the manifest lists a GET of each input and of the setup, which answer with no credentials
    with urllib.request.urlopen(grant["manifest"], timeout=30) as answer:
        manifest = json.loads(answer.read())
    assert set(manifest["inputs"]) == {"ref.txt"} and manifest["set"] == p._staged.rsplit("/", 1)[1]
    with urllib.request.urlopen(manifest["inputs"]["ref.txt"], timeout=30) as answer:
        assert answer.read() == b"one\n"
    with urllib.request.urlopen(manifest["setup"], timeout=30) as answer:
        assert answer.read() == b"true"


def test_a_url_expiry_beyond_what_s3_honours_is_refused():
    from bats.common.config import ClusterConfig
    from bats.provisioners.ec2 import Ec2Provisioner

    opts = {key: default for key, (_kind, default) in Ec2Provisioner.OPTIONS.items()}
    opts.update(instance_type="t3.micro", image="ami-12345678", files_url_expiry=8 * 86400.0)
    with pytest.raises(ValueError, match="files_url_expiry"):
        Ec2Provisioner.check_config(ClusterConfig(name="c", provisioner="ec2", max=1, price=0.1, atu_s=3600.0,
                                                  options=opts))


def test_user_data_over_ec2s_limit_is_refused_before_the_launch_saying_so(aws, tmp_path):
    from bats.common.files import FilesConfig
    from bats.provisioners.base import MachineHandle, ProvisionerError

    p = provisioner(aws, tmp_path, FilesConfig(outputs=("out-{id}.txt",)), install="echo " + "x" * 16000)
    p._stage_inputs()
    with pytest.raises(ProvisionerError, match=r"^cluster c: the user data of c-s1-1 is \d+ bytes, over EC2's 16384"):
        p._launch(MachineHandle(machine_id="c-s1-1", cluster="c", token="t0k"))
    assert not aws.client().describe_instances()["Reservations"]


def test_temporary_credentials_of_the_master_are_named_once_in_the_log(aws, tmp_path, caplog):
    """URLs signed with a session token end with it: the operator is told (the fixture's keys have one)."""
    from bats.common.files import FilesConfig
    from bats.provisioners.base import MachineHandle

    p = provisioner(aws, tmp_path, FilesConfig(outputs=("out-{id}.txt",)))
    p._stage_inputs()
    with caplog.at_level("WARNING", logger="bats.provisioners.ec2"):
        for n in (1, 2):
            assert p._files_grant(MachineHandle(machine_id=f"c-s1-{n}", cluster="c", token="t"))
    said = [r.getMessage() for r in caplog.records if "temporary" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("cluster c: the master's AWS credentials are temporary (env)")
