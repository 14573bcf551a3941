"""The ``libcloud`` provisioner: machines from any Apache Libcloud compute driver.

How this works. ``driver`` names a Libcloud provider (``"ec2"``, ``"openstack"``, ``"gce"``,
``"azure_arm"``, ``"dummy"``, …; see ``libcloud.compute.types.Provider``) and ``driver_args`` its
constructor's keyword arguments; ``driver_env`` names environment variables to read more of them
from, so secrets stay out of the config (``driver_env = { secret = "AWS_SECRET_ACCESS_KEY" }``).
Each machine is one ``create_node(name, size, image, location, …)`` call; ``size``, ``image`` and
``location`` are looked up once, at the first acquisition: sizes and locations by id or name in
the driver's lists, the image by id (``get_image``).
The user data (:mod:`bats.provisioners.cloud`) goes in the keyword ``userdata_arg`` names
(``ex_userdata`` for EC2 and OpenStack; ``""`` for a driver without one) and the tags in
``tags_arg`` (``ex_metadata`` for EC2 and OpenStack). ``create_args`` adds any other keyword
(``ex_keyname``, ``ex_security_groups``, …) and, for a spot cluster, ``spot_args`` too (default
``{ ex_spot = true }``, EC2's; GCE's would be ``{ ex_preemptible = true }``).

Nodes are named ``bats-RUN-MACHINE``, so whatever tags a cloud keeps, :meth:`cleanup` finds a
run's nodes of a cluster by their tags or, failing that, their names. :meth:`release` destroys
the node; :meth:`status` lists nodes at most every ``status_poll`` and maps Libcloud's
``NodeState`` onto :class:`NodeState` through :data:`NODE_STATES`. Refusals (rate limits,
capacity, quotas) are retried with backoff and, when persistent, lower ``usable_max``, as for ec2.

Every driver call goes through :meth:`LibcloudProvisioner._api`, so tests point it at moto's EC2
server (``driver_args = { host = "127.0.0.1", port = … }``) or at Libcloud's DummyNodeDriver.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from typing import Any, ClassVar

from bats.common import clock
from bats.common.config import ClusterConfig, OptionSpec
from bats.provisioners import cloud
from bats.provisioners.base import MachineHandle, NodeState, Provisioner, ProvisionerError

log = logging.getLogger(__name__)

# libcloud.compute.types.NodeState values (strings since Libcloud 2.0)
NODE_STATES = {
    "running": NodeState.RUNNING,
    "pending": NodeState.BOOTING,
    "starting": NodeState.BOOTING,
    "rebooting": NodeState.BOOTING,
    "reconfiguring": NodeState.RUNNING,
    "migrating": NodeState.RUNNING,
    "updating": NodeState.RUNNING,
    "normal": NodeState.RUNNING,
    "stopping": NodeState.GONE,
    "stopped": NodeState.GONE,
    "suspended": NodeState.GONE,
    "paused": NodeState.GONE,
    "terminated": NodeState.GONE,
    "error": NodeState.FAILED,
    "unknown": NodeState.UNKNOWN,
}
_TAG_PLACES = ("tags", "metadata", "labels")  # where drivers put a node's tags in ``node.extra``


class LibcloudProvisioner(Provisioner):
    OPTIONS: ClassVar[OptionSpec] = {
        "driver": ("str", None),  # required: a libcloud Provider name
        "driver_args": ("any", {}),  # the driver constructor's keyword arguments
        "driver_env": ("any", {}),  # more of them from environment variables: {argument: VARIABLE}
        "size": ("str", None),  # required: a size id or name
        "image": ("str", None),  # required: an image id
        "location": ("str", None),
        "userdata_arg": ("any", "ex_userdata"),  # "" for a driver without user data
        "tags_arg": ("any", "ex_metadata"),  # "" for a driver without tags
        "create_args": ("any", {}),
        "spot_args": ("any", {"ex_spot": True}),  # added for market = "spot"
        "user_data": ("str", None),
        "install": ("str", ""),
        "worker_command": ("str", "bats-worker"),
        "metadata_url": ("str", None),  # spot: where workers watch for an EC2-style interruption notice
        "tags": ("any", {}),
        "status_poll": ("duration", 10.0),  # at most one node listing this often
        "api_retries": ("count", 4),
        "api_backoff": ("duration", 0.5),
    }
    REQUIRES: ClassVar[dict[str, str]] = {"libcloud": "bats[libcloud]"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.opts = self.cluster.options
        self.user_data = cloud.UserData.load(self.opts.get("user_data"))
        self.tags = cloud.string_table(self.opts.get("tags") or {}, "tags")
        self._driver: Any = None
        self._lock = threading.Lock()
        self._resolved: dict[str, Any] | None = None
        self._held: dict[str, MachineHandle] = {}
        self._listing: tuple[float, dict[str, Any]] = (-1e18, {})  # (monotonic time, node id -> node)
        self.sleep = time.sleep

    @classmethod
    def check_config(cls, cluster: ClusterConfig) -> None:
        o = cluster.options
        for key in ("driver", "size", "image"):
            if not o.get(key):
                raise ValueError(key, "required for the libcloud provisioner")
        for key in ("driver_args", "create_args", "spot_args"):
            value = o.get(key)
            if not isinstance(value, dict):
                raise ValueError(key, f"expected a table of keyword arguments, got {value!r}")
        env = o.get("driver_env")
        if not isinstance(env, dict) or not all(isinstance(v, str) and v for v in env.values()):
            raise ValueError("driver_env", f"expected a table of environment variable names, got {env!r}")
        for key in ("userdata_arg", "tags_arg"):
            if not isinstance(o.get(key), str):
                raise ValueError(key, f"expected a keyword argument name or \"\", got {o.get(key)!r}")
        cloud.string_table(o.get("tags") or {}, "tags")
        try:
            cloud.UserData.load(o.get("user_data"))
        except ValueError as exc:
            raise ValueError("user_data", str(exc)) from None

    # ------------------------------------------------------------ the one door to the cloud
    def _api(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call one method of the Libcloud driver."""
        with self._lock:
            if self._driver is None:
                self._driver = self._make_driver()
        return getattr(self._driver, method)(*args, **kwargs)

    def _make_driver(self) -> Any:
        try:
            from libcloud.compute.providers import get_driver
        except ImportError:
            raise ProvisionerError(f"cluster {self.cluster.name}: the libcloud provisioner needs apache-libcloud: "
                                   "pip install 'bats[libcloud]'") from None
        name = self.opts["driver"]
        try:
            driver_class = get_driver(name)
        except AttributeError:
            raise ProvisionerError(f"cluster {self.cluster.name}: driver: Libcloud has no compute driver "
                                   f"{name!r}") from None
        kwargs = dict(self.opts.get("driver_args") or {})
        for argument, variable in (self.opts.get("driver_env") or {}).items():
            if variable not in os.environ:
                raise ProvisionerError(f"cluster {self.cluster.name}: driver_env: {argument} comes from "
                                       f"${variable}, which is not set")
            kwargs[argument] = os.environ[variable]
        return driver_class(**kwargs)

    def _call(self, what: str, method: str, *args: Any, **kwargs: Any) -> Any:
        return cloud.call_with_retries(lambda: self._api(method, *args, **kwargs),
                                       f"cluster {self.cluster.name}: {what}",
                                       self.opts.get("api_retries", 4), self.opts.get("api_backoff", 0.5),
                                       sleep=self.sleep)

    # ------------------------------------------------------------ acquire
    def _resolve(self) -> dict[str, Any]:
        """The size, image and location objects, matched once by id or name."""
        if self._resolved is not None:
            return self._resolved
        o = self.opts
        location = None
        if o.get("location"):
            locations = self._call("list_locations", "list_locations")
            location = _match(locations, o["location"], "location", self.cluster.name)
        sizes = self._call("list_sizes", "list_sizes", location) if location else self._call("list_sizes", "list_sizes")
        size = _match(sizes, o["size"], "size", self.cluster.name)
        try:  # by id: listing images would fetch every public image of some clouds
            image = self._call("get_image", "get_image", o["image"])
        except Exception as exc:  # not known to the driver's lookup (or no lookup): the id as given
            log.debug("cluster %s: get_image(%s): %s; using the id as given", self.cluster.name, o["image"], exc)
            from libcloud.compute.base import NodeImage

            image = NodeImage(id=o["image"], name=o["image"], driver=self._driver)
        self._resolved = {"size": size, "image": image, "location": location}
        return self._resolved

    def machine_cpus(self) -> int | None:
        """The size's vCPUs where the driver says them (OpenStack ``vcpus``, EC2 ``vcpu``, GCE
        ``guestCpus``); None otherwise (the worker's hello tells)."""
        return size_cpus(self._resolve()["size"])

    def acquire(self, n: int) -> list[MachineHandle]:
        launched: list[MachineHandle] = []
        for _ in range(n):
            handle = self.new_handle()
            try:
                self._launch(handle)
            except cloud.ApiRefused as exc:
                self.usable_max = len(self._held)
                log.warning("cluster %s: %s; %d machine(s) launched of %d", self.cluster.name, exc, len(launched), n)
                if not launched:
                    raise
                break
            except Exception as exc:
                if not launched:
                    raise ProvisionerError(f"cluster {self.cluster.name}: create_node failed: {exc}") from exc
                log.error("cluster %s: create_node failed: %s", self.cluster.name, exc)
                break
            self._held[handle.machine_id] = handle
            launched.append(handle)
        return launched

    def _launch(self, handle: MachineHandle) -> None:
        o = self.opts
        resolved = self._resolve()
        extra: list[str] = []
        if self.cluster.spot and o.get("metadata_url"):
            extra = ["--spot-notice", o["metadata_url"]]
        argv = cloud.worker_argv(self.bootstrap, self.bootstrap_argv(handle, tuple(extra)),
                                 o.get("worker_command", "bats-worker"))
        kwargs: dict[str, Any] = dict(o.get("create_args") or {})
        if self.cluster.spot:
            kwargs.update(o.get("spot_args") or {})
        if o.get("userdata_arg"):
            kwargs[o["userdata_arg"]] = self.user_data.render(self.bootstrap, handle, argv, o.get("install", ""))
        if o.get("tags_arg"):
            tags = cloud.tags_for(self.bootstrap, handle, self.tags)
            tags.pop("Name")  # the node's name says it (EC2 makes the name its Name tag)
            kwargs[o["tags_arg"]] = tags
        if resolved["location"] is not None:
            kwargs["location"] = resolved["location"]
        handle.data["launched_at"] = clock.now()
        node = self._call("create_node", "create_node", name=self._node_name(handle),
                          size=resolved["size"], image=resolved["image"], **kwargs)
        if isinstance(node, list):  # some drivers answer a list (EC2 with ex_mincount)
            if not node:
                raise ProvisionerError("the driver created no node")
            node = node[0]
        handle.native_id = str(node.id)
        handle.data["node"] = node
        log.info("%s: node %s", handle.machine_id, handle.native_id)

    def _node_name(self, handle: MachineHandle) -> str:
        return f"bats-{self.bootstrap.run_id}-{handle.machine_id}"

    # ------------------------------------------------------------ release, status, cleanup
    def release(self, handles: list[MachineHandle]) -> None:
        for handle in handles:
            self._held.pop(handle.machine_id, None)
            node = handle.data.get("node")
            if node is not None:
                self._call("destroy_node", "destroy_node", node)
                log.info("cluster %s: destroyed node %s", self.cluster.name, handle.native_id)

    def _nodes(self, fresh: bool = False) -> dict[str, Any]:
        """Every node the driver lists, by id; cached for ``status_poll``."""
        at, nodes = self._listing
        now = time.monotonic()
        if fresh or now - at >= self.opts.get("status_poll", 10.0):
            nodes = {str(node.id): node for node in self._call("list_nodes", "list_nodes")}
            self._listing = (now, nodes)
        return nodes

    def status(self, handles: list[MachineHandle]) -> dict[str, NodeState]:
        nodes = self._nodes()
        states = {}
        for handle in handles:
            node = nodes.get(handle.native_id)
            if node is None:
                young = clock.now() - handle.data.get("launched_at", 0.0) < 120.0
                states[handle.machine_id] = NodeState.UNKNOWN if young else NodeState.GONE
            else:
                states[handle.machine_id] = NODE_STATES.get(str(node.state).lower(), NodeState.UNKNOWN)
        return states

    def cleanup(self) -> dict[str, str]:
        """Destroy every node of this run and cluster that is not gone already."""
        name_pattern = re.compile(rf"bats-{re.escape(self.bootstrap.run_id)}-"
                                  rf"({re.escape(self.cluster.name)}-s\d+-\d+)")
        found: dict[str, str] = {}
        for node_id, node in self._nodes(fresh=True).items():
            if NODE_STATES.get(str(node.state).lower()) is NodeState.GONE:
                continue
            tags = next((t for t in (node.extra.get(p) for p in _TAG_PLACES) if isinstance(t, dict)), {})
            if tags.get(cloud.TAG_RUN) == self.bootstrap.run_id and tags.get(cloud.TAG_CLUSTER) == self.cluster.name:
                machine = tags.get(cloud.TAG_MACHINE, "")
            else:
                match = name_pattern.fullmatch(node.name or "")
                if match is None:
                    continue
                machine = match.group(1)
            self._call("destroy_node", "destroy_node", node)
            found[node_id] = machine
        self._held.clear()
        return found


def _match(items: list[Any], wanted: str, what: str, cluster: str) -> Any:
    for item in items:
        if str(item.id) == wanted or getattr(item, "name", None) == wanted:
            return item
    known = ", ".join(sorted({str(getattr(i, "name", None) or i.id) for i in items})[:12])
    raise ProvisionerError(f"cluster {cluster}: {what}: {wanted!r} is not offered (some that are: {known})")


def size_cpus(size: Any) -> int | None:
    """The vCPUs a libcloud ``NodeSize`` names, in the attribute or ``extra`` key its driver uses."""
    for value in (getattr(size, "vcpus", None),
                  *((getattr(size, "extra", None) or {}).get(k) for k in ("vcpus", "vcpu", "cpu", "cpus", "guestCpus"))):
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float, str)):
            continue
        try:
            cpus = int(value)  # some drivers give "4"
        except (TypeError, ValueError):
            continue
        if cpus > 0:
            return cpus
    return None
