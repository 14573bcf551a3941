"""The ``ec2`` provisioner: Amazon EC2 instances, on-demand and spot, through boto3.

How this works. Each machine is one instance whose user data (:mod:`bats.provisioners.cloud`)
starts ``bats-worker`` with the machine's id and one-time token, so every machine is launched by
its own call: ``run_instances`` (on-demand; spot too, with ``InstanceMarketOptions``, the default)
or ``request_spot_instances`` (``spot_api = "request_spot_instances"``; the instance id is learned
when the request is fulfilled, and the instance is tagged then). A cluster is spot when its
``market = "spot"``; its ``bid`` (per ATU, like ``price``) becomes EC2's hourly ``MaxPrice``.
Launches of one acquisition run side by side in a few threads (boto3 clients are thread-safe).

Every instance is tagged with the run, cluster, machine id and session
(:func:`~bats.provisioners.cloud.tags_for`). :meth:`Ec2Provisioner.cleanup` finds instances and
spot requests by those tags and terminates or cancels them: ``bats-master cleanup`` and every
``--resume`` use it. :meth:`~Ec2Provisioner.release` terminates at once (the master decides when:
just before an ATU edge); :meth:`~Ec2Provisioner.status` maps EC2's instance and spot request
states onto :class:`NodeState` through :data:`INSTANCE_STATES` and :data:`REQUEST_STATES`.

For a spot cluster, :meth:`~Ec2Provisioner.price_now` reads ``describe_spot_price_history`` every
``price_poll``: the latest price in ``zone`` (else the subnet's zone, else the dearest zone, so a
budget is never under-counted), converted from per hour to per ATU. Spot workers are started with
``--spot-notice`` so they report an interruption notice from the instance metadata.

Throttling, capacity and limit errors are retried with backoff (``api_retries``, ``api_backoff``);
when they persist the launch stops, the machines launched so far are returned and
``usable_max`` drops to the machines this cluster holds, which the master's planner then uses.

``[files]`` pass through S3 (``files_s3 = "s3://bucket/prefix"``): before the first launch the
master stages the inputs and the setup under ``prefix/inputs/SET/`` (content-hashed: a set already
there is not sent again), each worker fetches them and runs the setup before it joins and uploads
each task's outputs to ``prefix/RUN/outputs/ID/`` before reporting the task
(:mod:`bats.worker.s3files`), a failed setup shows in :meth:`~Ec2Provisioner.status` as a failed
machine named in the log, and every release brings the outputs not yet fetched to
``STATE_DIR/files/outputs``. The machines need neither AWS credentials nor boto3: at each launch the
master signs, with its own credentials, the machine's URLs (:meth:`~Ec2Provisioner._files_grant`:
GETs of the inputs and setup through a manifest at ``RUN/grants/ID.json``, a PUT of its
``RUN/setup-failed/ID``, a POST policy held to ``RUN/outputs/`` and ``max_output``), good for
``files_url_expiry`` (default and most: 7 days, what S3 honours), and hands them over in the
machine's user data beside its token, never on its command line. The URLs are signed in the bucket's
own region (asked with ``head_bucket``) at that region's endpoint.

Every call to EC2 goes through :meth:`Ec2Provisioner._api`, so tests point it at moto's server
(``endpoint_url``) or replace it with a stand-in that raises ``ClientError``.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from bats.common import clock
from bats.common.config import ClusterConfig, OptionSpec
from bats.provisioners import cloud
from bats.provisioners.base import MachineHandle, NodeState, Provisioner, ProvisionerError
from bats.worker import s3files

log = logging.getLogger(__name__)

INSTANCE_STATES = {
    "pending": NodeState.BOOTING,
    "running": NodeState.RUNNING,
    "shutting-down": NodeState.GONE,
    "terminated": NodeState.GONE,
    "stopping": NodeState.GONE,
    "stopped": NodeState.GONE,
}
# a spot request without an instance yet
REQUEST_STATES = {
    "open": NodeState.BOOTING,
    "active": NodeState.BOOTING,  # fulfilled: the instance's own state is what counts
    "closed": NodeState.GONE,
    "cancelled": NodeState.GONE,
    "failed": NodeState.FAILED,
}
SPOT_APIS = ("run_instances", "request_spot_instances")
LAUNCH_THREADS = 8
NOT_FOUND_GRACE_S = 120.0  # EC2 is eventually consistent: a new instance may be missing from answers
LIVE_STATES = ["pending", "running", "stopping", "stopped"]
MAX_USER_DATA = 16384  # bytes EC2 takes, before its base64
MAX_URL_EXPIRY_S = 7 * 86400.0  # the longest S3 honours a signature version 4 URL


class Ec2Provisioner(Provisioner):
    OPTIONS: ClassVar[OptionSpec] = {
        "instance_type": ("str", None),  # required, e.g. "c7g.large"
        "image": ("str", None),  # required: an AMI id, ideally one baked with deploy/image/
        "region": ("str", None),  # default: boto3's (AWS_DEFAULT_REGION, ~/.aws/config)
        "endpoint_url": ("str", None),  # another EC2 endpoint (a test server, a private endpoint)
        "subnet": ("str", None),
        "security_groups": ("list", []),  # security group ids
        "key_name": ("str", None),
        "zone": ("str", None),  # availability zone to launch in (and to read the spot price of)
        "profile": ("str", None),  # a named profile from ~/.aws
        "instance_profile": ("str", None),  # IAM instance profile name for the machines
        "spot_api": ("str", "run_instances"),  # or "request_spot_instances"
        "product": ("str", "Linux/UNIX"),  # the spot price history's product description
        "price_poll": ("duration", 300.0),  # spot: how often the price is read
        "user_data": ("str", None),  # a user-data template file (default: the built-in one)
        "install": ("str", ""),  # shell commands the user data runs before starting the worker
        "worker_command": ("str", "bats-worker"),  # the worker command on the machine
        "metadata_url": ("str", "http://169.254.169.254"),  # where spot workers watch for a notice
        "notice_poll": ("duration", 5.0),
        "tags": ("any", {}),  # extra tags for every instance
        "status_poll": ("duration", 10.0),  # at most one describe_instances this often
        "api_retries": ("count", 4),  # attempts of a call refused by throttling, capacity or limits
        "api_backoff": ("duration", 0.5),  # first pause between them (doubling, with jitter)
        "files_s3": ("str", None),  # [files]: where the inputs and outputs pass, "s3://bucket/prefix"
        "files_endpoint_url": ("str", None),  # another S3 endpoint (a test server, a private endpoint)
        "files_dir": ("str", "/var/tmp/bats-files"),  # [files]: the machines' files folder (one per machine)
        "files_url_expiry": ("duration", MAX_URL_EXPIRY_S),  # [files]: how long a machine's signed URLs last
    }
    REQUIRES: ClassVar[dict[str, str]] = {"boto3": "bats[aws]"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        o = self.cluster.options
        self.opts = o
        self.user_data = cloud.UserData.load(o.get("user_data"))
        self.tags = cloud.string_table(o.get("tags") or {}, "tags")
        if self.cluster.spot:
            self.price_poll_s = o.get("price_poll", 300.0)
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._held: dict[str, MachineHandle] = {}  # machine id -> handle, until released
        self._zone: str | None = o.get("zone")
        self._states: tuple[float, dict[str, str]] = (-1e18, {})  # (monotonic time, instance id -> state)
        self.sleep = time.sleep  # tests make the backoff instant
        self._s3_client: Any = None
        self._signer_client: Any = None
        self._staged: str | None = None  # [files]: the S3 folder the inputs were staged in
        self._staged_set: tuple[str, str] = ("", "")  # [files]: (the set's hash, its folder's key)
        self._fetched: dict[str, str] = {}  # [files]: output key -> ETag brought back
        self._failures_seen: dict[str, str] = {}  # machine -> its setup failure, named in the log once
        self._failures_read_at = -1e18  # monotonic time of the last look for them

    @classmethod
    def check_config(cls, cluster: ClusterConfig) -> None:
        o = cluster.options
        for key in ("instance_type", "image"):
            if not o.get(key):
                raise ValueError(key, "required for the ec2 provisioner")
        if o.get("spot_api") not in SPOT_APIS:
            raise ValueError("spot_api", f"expected one of {', '.join(SPOT_APIS)}, got {o.get('spot_api')!r}")
        if o.get("files_s3"):
            try:
                s3files.split_url(o["files_s3"])
            except ValueError as exc:
                raise ValueError("files_s3", str(exc)) from None
        expiry = o.get("files_url_expiry", MAX_URL_EXPIRY_S)
        if not 60.0 <= expiry <= MAX_URL_EXPIRY_S:
            raise ValueError("files_url_expiry", f"expected between 1m and 7d (S3 honours a signed URL 7 days "
                                                 f"at most), got {expiry:g} s")
        if not all(isinstance(g, str) and g for g in o.get("security_groups") or []):
            raise ValueError("security_groups", "expected a list of security group ids")
        cloud.string_table(o.get("tags") or {}, "tags")
        try:
            cloud.UserData.load(o.get("user_data"))
        except ValueError as exc:
            raise ValueError("user_data", str(exc)) from None

    # ------------------------------------------------------------ the one door to AWS
    def _api(self, operation: str, **params: Any) -> dict[str, Any]:
        """Call one EC2 operation (boto3's snake_case name) and return its answer."""
        with self._client_lock:
            if self._client is None:
                self._client = self._make_client()
        return getattr(self._client, operation)(**params)

    def _make_client(self) -> Any:
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise ProvisionerError(f"cluster {self.cluster.name}: the ec2 provisioner needs boto3: "
                                   "pip install 'bats[aws]'") from None
        session = boto3.session.Session(profile_name=self.opts.get("profile"), region_name=self.opts.get("region"))
        # botocore's own retries cover dropped connections; BaTS retries refusals itself (cloud.py)
        return session.client("ec2", endpoint_url=self.opts.get("endpoint_url"),
                              config=Config(retries={"max_attempts": 2, "mode": "standard"}))

    def _call(self, operation: str, **params: Any) -> dict[str, Any]:
        return cloud.call_with_retries(lambda: self._api(operation, **params),
                                       f"cluster {self.cluster.name}: {operation}",
                                       self.opts.get("api_retries", 4), self.opts.get("api_backoff", 0.5),
                                       sleep=self.sleep)

    # ------------------------------------------------------------ acquire
    def acquire(self, n: int) -> list[MachineHandle]:
        if self._files_used() and self._staged is None:
            self._stage_inputs()
        handles = [self.new_handle() for _ in range(n)]
        launched: list[MachineHandle] = []
        refused: cloud.ApiRefused | None = None
        failed: Exception | None = None
        with ThreadPoolExecutor(max_workers=max(1, min(n, LAUNCH_THREADS))) as pool:
            for handle, outcome in zip(handles, pool.map(self._launch_or_error, handles)):
                if outcome is None:
                    launched.append(handle)
                    self._held[handle.machine_id] = handle
                elif isinstance(outcome, cloud.ApiRefused):
                    refused = refused or outcome
                else:
                    failed = failed or outcome
        if refused is not None:
            self.usable_max = len(self._held)
            log.warning("cluster %s: %s; %d machine(s) launched of %d", self.cluster.name, refused,
                        len(launched), n)
        if not launched and (refused or failed):
            raise refused or failed  # type: ignore[misc]
        if failed is not None:
            log.error("cluster %s: %d launch(es) failed: %s", self.cluster.name, n - len(launched), failed)
        return launched

    def _launch_or_error(self, handle: MachineHandle) -> Exception | None:
        try:
            self._launch(handle)
        except Exception as exc:  # reported per machine; the caller decides
            return exc
        return None

    def _launch(self, handle: MachineHandle) -> None:
        o = self.opts
        spot = self.cluster.spot
        extra: list[str] = []
        if spot:
            extra = ["--spot-notice", o.get("metadata_url", "http://169.254.169.254"),
                     "--spot-poll", f"{o.get('notice_poll', 5.0):g}"]
        extra += self._files_args(handle)
        argv = cloud.worker_argv(self.bootstrap, self.bootstrap_argv(handle, tuple(extra)),
                                 o.get("worker_command", "bats-worker"))
        user_data = self.user_data.render(self.bootstrap, handle, argv, o.get("install", ""),
                                          env=self._files_grant(handle))
        if len(user_data.encode()) > MAX_USER_DATA:
            raise ProvisionerError(f"cluster {self.cluster.name}: the user data of {handle.machine_id} is "
                                   f"{len(user_data.encode())} bytes, over EC2's {MAX_USER_DATA} (a shorter "
                                   "install or user_data template; [files]' signed URLs take about 6 KB with "
                                   "temporary credentials)")
        tags = [{"Key": k, "Value": v} for k, v in cloud.tags_for(self.bootstrap, handle, self.tags).items()]
        spec: dict[str, Any] = {"ImageId": o["image"], "InstanceType": o["instance_type"]}
        if o.get("key_name"):
            spec["KeyName"] = o["key_name"]
        if o.get("security_groups"):
            spec["SecurityGroupIds"] = list(o["security_groups"])
        if o.get("subnet"):
            spec["SubnetId"] = o["subnet"]
        if o.get("zone"):
            spec["Placement"] = {"AvailabilityZone": o["zone"]}
        if o.get("instance_profile"):
            spec["IamInstanceProfile"] = {"Name": o["instance_profile"]}
        handle.data["launched_at"] = clock.now()
        if spot and o.get("spot_api") == "request_spot_instances":
            params: dict[str, Any] = {
                "InstanceCount": 1, "Type": "one-time",
                "LaunchSpecification": {**spec, "UserData": base64.b64encode(user_data.encode()).decode()},
                "TagSpecifications": [{"ResourceType": "spot-instances-request", "Tags": tags}],
            }
            if self._max_price() is not None:
                params["SpotPrice"] = self._max_price()
            request = self._call("request_spot_instances", **params)["SpotInstanceRequests"][0]
            handle.data["request"] = request["SpotInstanceRequestId"]
            if request.get("InstanceId"):
                self._fulfilled(handle, request["InstanceId"])
            log.info("%s: spot request %s", handle.machine_id, handle.data["request"])
            return
        params = {**spec, "MinCount": 1, "MaxCount": 1, "UserData": user_data,
                  "TagSpecifications": [{"ResourceType": "instance", "Tags": tags}],
                  "InstanceInitiatedShutdownBehavior": "terminate"}
        if spot:
            options: dict[str, Any] = {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}
            if self._max_price() is not None:
                options["MaxPrice"] = self._max_price()
            params["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": options}
        instance = self._call("run_instances", **params)["Instances"][0]
        handle.native_id = instance["InstanceId"]
        log.info("%s: instance %s (%s%s)", handle.machine_id, handle.native_id, o["instance_type"],
                 ", spot" if spot else "")

    def _max_price(self) -> str | None:
        """The cluster's bid (per ATU) as EC2's MaxPrice (per hour); None: EC2's default, the
        on-demand price."""
        if self.cluster.bid is None:
            return None
        return f"{self.cluster.bid * 3600.0 / self.cluster.atu_s:.6f}"

    def _fulfilled(self, handle: MachineHandle, instance_id: str) -> None:
        """A spot request got its instance: remember and tag it (tags of requests do not carry over)."""
        handle.native_id = instance_id
        tags = cloud.tags_for(self.bootstrap, handle, self.tags)
        try:
            self._call("create_tags", Resources=[instance_id], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
        except Exception as exc:  # cleanup still finds it through its request's tags
            log.warning("%s: tagging %s failed: %s", handle.machine_id, instance_id, exc)

    # ------------------------------------------------------------ release, status, cleanup
    def release(self, handles: list[MachineHandle]) -> None:
        instances = []
        for handle in handles:
            self._held.pop(handle.machine_id, None)
            request = handle.data.get("request")
            if request and not handle.native_id:
                instance = self._request_instance(request)
                self._call("cancel_spot_instance_requests", SpotInstanceRequestIds=[request])
                instance = instance or self._request_instance(request)  # fulfilled meanwhile
                handle.native_id = instance or ""
            if handle.native_id:
                instances.append(handle.native_id)
        if instances:
            self._call("terminate_instances", InstanceIds=instances)
            log.info("cluster %s: terminated %s", self.cluster.name, ", ".join(instances))
        if self._files_used() and self.bootstrap.files is not None and self.bootstrap.files.outputs:
            try:
                self._fetch_outputs()
            except Exception as exc:  # the instances are gone; the outputs stay in S3 for the next fetch
                log.error("cluster %s: bringing the [files] outputs back from %s failed: %s", self.cluster.name,
                          self.opts["files_s3"], exc)

    def _request_instance(self, request: str) -> str | None:
        try:
            answer = self._api("describe_spot_instance_requests", SpotInstanceRequestIds=[request])
        except Exception:  # gone (moto forgets cancelled requests): nothing launched from it that we know
            return None
        found = answer.get("SpotInstanceRequests") or [{}]
        return found[0].get("InstanceId")

    def status(self, handles: list[MachineHandle]) -> dict[str, NodeState]:
        states: dict[str, NodeState] = {}
        waiting = [h for h in handles if not h.native_id and h.data.get("request")]
        if waiting:
            answer = self._call("describe_spot_instance_requests",
                                Filters=[{"Name": "spot-instance-request-id",
                                          "Values": [h.data["request"] for h in waiting]}])
            by_id = {r["SpotInstanceRequestId"]: r for r in answer.get("SpotInstanceRequests", [])}
            for handle in waiting:
                request = by_id.get(handle.data["request"])
                if request is None:
                    states[handle.machine_id] = self._missing(handle)
                elif request.get("InstanceId"):
                    self._fulfilled(handle, request["InstanceId"])
                else:
                    states[handle.machine_id] = REQUEST_STATES.get(request.get("State", ""), NodeState.UNKNOWN)
        for machine_id in self._setup_failures(handles):
            states[machine_id] = NodeState.FAILED
        known = [h for h in handles if h.native_id and h.machine_id not in states]
        if known:
            seen = self._instance_states([h.native_id for h in known])
            for handle in known:
                state = seen.get(handle.native_id)
                if state is None:
                    states[handle.machine_id] = self._missing(handle)
                else:
                    states[handle.machine_id] = INSTANCE_STATES.get(state, NodeState.UNKNOWN)
        return states

    def _instance_states(self, ids: list[str]) -> dict[str, str]:
        """EC2's state name of each instance; one describe_instances at most every ``status_poll``
        (the server asks every second; a real account would be throttled)."""
        at, states = self._states
        now = time.monotonic()
        if now - at < self.opts.get("status_poll", 10.0) and all(i in states for i in ids):
            return states
        states = {i["InstanceId"]: i["State"]["Name"]
                  for i in self._instances([{"Name": "instance-id", "Values": ids}])}
        self._states = (now, states)
        return states

    def _missing(self, handle: MachineHandle) -> NodeState:
        young = clock.now() - handle.data.get("launched_at", 0.0) < NOT_FOUND_GRACE_S
        return NodeState.UNKNOWN if young else NodeState.GONE

    def _instances(self, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Every instance matching ``filters``, over all pages."""
        found: list[dict[str, Any]] = []
        params: dict[str, Any] = {"Filters": filters}
        while True:
            answer = self._call("describe_instances", **params)
            for reservation in answer.get("Reservations", []):
                found.extend(reservation.get("Instances", []))
            token = answer.get("NextToken")
            if not token:
                return found
            params["NextToken"] = token

    def _ours(self) -> list[dict[str, Any]]:
        return [{"Name": f"tag:{cloud.TAG_RUN}", "Values": [self.bootstrap.run_id]},
                {"Name": f"tag:{cloud.TAG_CLUSTER}", "Values": [self.cluster.name]}]

    def cleanup(self) -> dict[str, str]:
        """Cancel this run's open spot requests and terminate its instances in this cluster."""
        machine_of: dict[str, str] = {}  # instance or request id -> machine id
        for instance in self._instances([*self._ours(), {"Name": "instance-state-name", "Values": LIVE_STATES}]):
            machine_of[instance["InstanceId"]] = _tag(instance, cloud.TAG_MACHINE)
        requests = self._call("describe_spot_instance_requests", Filters=self._ours()).get("SpotInstanceRequests", [])
        open_requests = [r["SpotInstanceRequestId"] for r in requests if r.get("State") in ("open", "active")]
        if open_requests:
            self._call("cancel_spot_instance_requests", SpotInstanceRequestIds=open_requests)
        for request in requests:  # an instance launched from a request carries tags only once BaTS saw it
            if request.get("InstanceId"):
                machine_of.setdefault(request["InstanceId"], _tag(request, cloud.TAG_MACHINE))
            elif request["SpotInstanceRequestId"] in open_requests:
                machine_of[request["SpotInstanceRequestId"]] = _tag(request, cloud.TAG_MACHINE)
        instances = sorted(k for k in machine_of if k.startswith("i-"))
        if instances:
            alive = {i["InstanceId"] for i in self._instances(
                [{"Name": "instance-id", "Values": instances},
                 {"Name": "instance-state-name", "Values": LIVE_STATES}])}
            if alive:
                self._call("terminate_instances", InstanceIds=sorted(alive))
            machine_of = {k: v for k, v in machine_of.items() if k in alive or not k.startswith("i-")}
        self._held.clear()
        return machine_of

    def machine_cpus(self) -> int | None:
        """The instance type's default vCPUs (``describe_instance_types``)."""
        types = self._call("describe_instance_types", InstanceTypes=[self.opts["instance_type"]]).get("InstanceTypes", [])
        vcpus = types[0].get("VCpuInfo", {}).get("DefaultVCpus") if types else None
        return int(vcpus) if isinstance(vcpus, int) and vcpus > 0 else None

    # ------------------------------------------------------------ [files] through S3 (worker/s3files.py)
    def _files_used(self) -> bool:
        return self.bootstrap.files is not None and bool(self.opts.get("files_s3"))

    def _s3(self) -> Any:
        with self._client_lock:
            if self._s3_client is None:
                import boto3

                session = boto3.session.Session(profile_name=self.opts.get("profile"),
                                                region_name=self.opts.get("region"))
                self._s3_client = session.client("s3", endpoint_url=self.opts.get("files_endpoint_url"))
        return self._s3_client

    def _where(self) -> tuple[str, str]:
        return s3files.split_url(self.opts["files_s3"])

    def _run_url(self) -> str:
        bucket, prefix = self._where()
        return f"s3://{bucket}/{s3files.join_key(prefix, self.bootstrap.run_id)}"

    def _stage_inputs(self) -> None:
        """The inputs and the setup to ``PREFIX/inputs/SET/`` (``SET``: their SHA-256 and the
        setup's), unless that folder is complete already (its ``.bats-set`` mark is written last)."""
        import hashlib

        files = self.bootstrap.files
        assert files is not None
        bucket, prefix = self._where()
        wanted = hashlib.sha256(f"{files.input_set()}\0{files.setup or ''}".encode()).hexdigest()
        folder = s3files.join_key(prefix, f"inputs/{wanted}")
        s3 = self._s3()
        try:
            try:
                s3.head_object(Bucket=bucket, Key=f"{folder}/{s3files.SET_MARK}")
                log.info("cluster %s: the [files] inputs are in s3://%s/%s already", self.cluster.name, bucket, folder)
            except Exception as exc:
                if cloud.error_code(exc) not in ("404", "NoSuchKey", "NotFound"):
                    raise
                for path in files.inputs:
                    s3.upload_file(path, bucket, f"{folder}/{os.path.basename(path)}")
                if files.setup:
                    s3.put_object(Bucket=bucket, Key=f"{folder}/{s3files.SETUP_KEY}", Body=files.setup.encode())
                s3.put_object(Bucket=bucket, Key=f"{folder}/{s3files.SET_MARK}", Body=wanted.encode())
                log.info("cluster %s: [files] inputs staged in s3://%s/%s", self.cluster.name, bucket, folder)
        except Exception as exc:
            raise ProvisionerError(f"cluster {self.cluster.name}: staging the [files] inputs in "
                                   f"s3://{bucket}/{folder} failed: {exc}") from None
        self._staged = f"s3://{bucket}/{folder}"
        self._staged_set = (wanted, folder)

    def _files_args(self, handle: MachineHandle) -> list[str]:
        """The worker's [files] flags: where its inputs are, where its outputs go, its folder."""
        if not self._files_used():
            return []
        return ["--files-from", self._staged or "", "--files-to", self._run_url(),
                "--files-dir", f"{self.opts.get('files_dir') or '/var/tmp/bats-files'}/{handle.machine_id}"]

    def _signer(self) -> Any:
        """The S3 client that signs the machines' URLs: signature version 4, in the bucket's own
        region (a URL signed for another region is refused), at that region's endpoint."""
        with self._client_lock:
            if self._signer_client is not None:
                return self._signer_client
        import boto3
        from botocore.config import Config

        endpoint, region = self.opts.get("files_endpoint_url"), self.opts.get("region")
        if not endpoint:
            bucket, _prefix = self._where()
            try:
                answer = self._s3().head_bucket(Bucket=bucket)
            except Exception as exc:  # a bucket elsewhere answers 301 with its region
                answer = getattr(exc, "response", {})
            region = answer.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("x-amz-bucket-region") or region
            if region:
                endpoint = f"https://s3.{region}.amazonaws.com"
        session = boto3.session.Session(profile_name=self.opts.get("profile"), region_name=region)
        client = session.client("s3", endpoint_url=endpoint, config=Config(signature_version="s3v4"))
        credentials = session.get_credentials()
        if credentials is not None and credentials.get_frozen_credentials().token:
            log.warning("cluster %s: the master's AWS credentials are temporary (%s): the URLs it signs for "
                        "the machines' [files] stop working when those expire, which may come before "
                        "files_url_expiry", self.cluster.name, credentials.method)
        with self._client_lock:
            self._signer_client = self._signer_client or client
            return self._signer_client

    def _files_grant(self, handle: MachineHandle) -> dict[str, str]:
        """The machine's signed URLs (see :mod:`bats.worker.s3files`), for its environment: a GET of
        its manifest (itself GETs of the inputs and the setup, put at ``RUN/grants/ID.json``), a PUT
        of ``RUN/setup-failed/ID`` and a POST policy held to ``RUN/outputs/`` and ``max_output``
        bytes a file, all good for ``files_url_expiry`` from now."""
        files = self.bootstrap.files
        if not self._files_used() or files is None:
            return {}
        import json

        expiry = int(self.opts.get("files_url_expiry") or MAX_URL_EXPIRY_S)
        bucket, prefix = self._where()
        run = s3files.join_key(prefix, self.bootstrap.run_id)
        signer = self._signer()

        def get(key: str) -> str:
            url: str = signer.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key},
                                                     ExpiresIn=expiry)
            return url

        grant: dict[str, Any] = {"expires": int(time.time()) + expiry, "outputs": f"{run}/outputs/"}
        wanted, folder = self._staged_set
        if folder:
            manifest = {"set": wanted, "setup": get(f"{folder}/{s3files.SETUP_KEY}") if files.setup else None,
                        "inputs": {os.path.basename(p): get(f"{folder}/{os.path.basename(p)}") for p in files.inputs}}
            key = f"{run}/grants/{handle.machine_id}.json"
            try:
                self._s3().put_object(Bucket=bucket, Key=key, Body=json.dumps(manifest).encode(),
                                      ContentType="application/json")
            except Exception as exc:
                raise ProvisionerError(f"cluster {self.cluster.name}: writing s3://{bucket}/{key} failed: "
                                       f"{exc}") from None
            grant["manifest"] = get(key)
        if files.setup:
            grant["failed"] = signer.generate_presigned_url(
                "put_object", Params={"Bucket": bucket, "Key": f"{run}/setup-failed/{handle.machine_id}"},
                ExpiresIn=expiry)
        if files.outputs:
            # "${filename}": boto3 then holds the key to what comes before it (["starts-with", "$key", ...])
            post = signer.generate_presigned_post(bucket, f"{run}/outputs/${{filename}}", ExpiresIn=expiry,
                                                  Conditions=[["content-length-range", 0, files.max_output]])
            grant["post"] = {"url": post["url"], "fields": {k: v for k, v in post["fields"].items() if k != "key"}}
        return {s3files.GRANT_ENV: json.dumps(grant, separators=(",", ":"))}

    def _setup_failures(self, handles: list[MachineHandle]) -> dict[str, str]:
        """The machines among ``handles`` whose setup failed (they wrote ``RUN/setup-failed/ID``),
        each named once in the log with the setup's status and last line."""
        if not self._files_used() or self.bootstrap.files is None or not self.bootstrap.files.setup:
            return {}
        now = time.monotonic()
        if now - self._failures_read_at < self.opts.get("status_poll", 10.0):
            return {m: why for m, why in self._failures_seen.items() if m in {h.machine_id for h in handles}}
        self._failures_read_at = now  # one list at most every status_poll, like describe_instances
        bucket, prefix = self._where()
        run = s3files.join_key(prefix, self.bootstrap.run_id)
        s3 = self._s3()
        held = {h.machine_id for h in handles}
        failed: dict[str, str] = {}
        answer = s3.list_objects_v2(Bucket=bucket, Prefix=f"{run}/setup-failed/")
        for item in answer.get("Contents", []):
            machine = item["Key"].rsplit("/", 1)[-1]
            if machine not in held:
                continue
            body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read(1000)
            said = " ".join(body.decode("utf-8", "replace").split())  # one line, no terminal controls
            failed[machine] = "".join(ch for ch in said if ch.isprintable())[:500]
            if machine not in self._failures_seen:
                log.error("cluster %s: %s; the machine is given up", self.cluster.name, failed[machine])
            self._failures_seen[machine] = failed[machine]
        return failed

    def _fetch_outputs(self) -> None:
        """The outputs this run's machines uploaded, into ``STATE_DIR/files/outputs/ID/`` (each key
        once; one that is no task's output path, or larger than ``max_output``, is left in S3 and
        named in the log: a machine cannot write outside that folder)."""
        files = self.bootstrap.files
        assert files is not None
        bucket, prefix = self._where()
        outputs = f"{s3files.join_key(prefix, self.bootstrap.run_id)}/outputs/"
        target = os.path.join(self.bootstrap.state_dir or ".", "files", "outputs")
        s3 = self._s3()
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=outputs):
            for item in page.get("Contents", []):
                key, etag = item["Key"], item.get("ETag", "")
                if self._fetched.get(key) == etag:
                    continue
                task, _, rel = key[len(outputs):].partition("/")
                parts = rel.split("/")
                if not task.isdigit() or not rel or any(p in ("", ".", "..") for p in parts):
                    log.warning("cluster %s: s3://%s/%s is no task's output; left there", self.cluster.name,
                                bucket, key)
                elif item.get("Size", 0) > files.max_output:
                    log.warning("cluster %s: s3://%s/%s is larger than max_output (%d bytes); left there",
                                self.cluster.name, bucket, key, files.max_output)
                else:
                    path = os.path.join(target, task, *parts)
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    s3.download_file(bucket, key, path + ".part")
                    os.replace(path + ".part", path)
                self._fetched[key] = etag

    # ------------------------------------------------------------ the spot price
    def price_now(self) -> float | None:
        """The current spot price per ATU (see the module docstring); None for on-demand."""
        if not self.cluster.spot:
            return None
        zone = self._price_zone()
        params: dict[str, Any] = {"InstanceTypes": [self.opts["instance_type"]],
                                  "ProductDescriptions": [self.opts.get("product", "Linux/UNIX")],
                                  "StartTime": dt.datetime.now(dt.UTC)}
        if zone:
            params["AvailabilityZone"] = zone
        history = self._call("describe_spot_price_history", **params).get("SpotPriceHistory", [])
        latest: dict[str, tuple[Any, float]] = {}  # zone -> (timestamp, hourly price)
        for row in history:
            if zone and row.get("AvailabilityZone") != zone:
                continue
            at, price = row.get("Timestamp"), float(row["SpotPrice"])
            key = row.get("AvailabilityZone", "")
            if key not in latest or (at is not None and latest[key][0] is not None and at > latest[key][0]):
                latest[key] = (at, price)
        if not latest:
            return None
        hourly = max(price for _at, price in latest.values())
        return hourly * self.cluster.atu_s / 3600.0

    def _price_zone(self) -> str | None:
        if self._zone is None and self.opts.get("subnet"):
            subnets = self._call("describe_subnets", SubnetIds=[self.opts["subnet"]]).get("Subnets", [])
            self._zone = subnets[0].get("AvailabilityZone") if subnets else ""
        return self._zone or None


def _tag(resource: dict[str, Any], key: str) -> str:
    return next((t["Value"] for t in resource.get("Tags", []) if t.get("Key") == key), "")
