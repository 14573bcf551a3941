"""The clusters config file (TOML): a ``[master]`` table and one ``[clusters.NAME]`` table each.

    [master]
    listen = "tcp://0.0.0.0:5555"      # endpoint the master binds
    advertise = "tcp://10.0.0.5:5555"  # address machines are told to connect to

    [clusters.fast]
    provisioner = "local"
    max = 4
    price = 0.10        # per ATU per machine
    atu = "1h"          # bare number = seconds, or "90s", "60m", "1h"
    speed = 1.0         # used by bats-sim: runtimes are divided by it (any provisioner)
    slowdown = 1.0      # provisioner-specific keys, declared by the provisioner

Every problem raises :class:`ConfigError` whose message names the file, the table and the key.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bats.common.background import BackgroundJob, BackgroundTraceError, load_background
from bats.common.durations import parse_duration
from bats.common.files import FilesConfig, parse_files
from bats.common.prices import PriceTrace, PriceTraceError, load_trace
from bats.common.protocol import MAX_SLOTS
from bats.common.retry import RetryRules, parse_retry
from bats.common.textfiles import UnreadableText, read_utf8


class ConfigError(ValueError):
    """An unusable config; the message reads ``FILE: [table] key: reason``."""


# A provisioner declares its own keys as {key: (kind, default)}; kind is one of the names below.
OptionSpec = dict[str, tuple[str, Any]]


DEFAULT_SHELL = "/bin/sh"


@dataclass(frozen=True)
class MasterConfig:
    listen: str | None = None
    advertise: str | None = None
    heartbeat_s: float = 2.0
    liveness_s: float = 15.0
    boot_timeout_s: float = 600.0
    # tasks a worker holds beyond the one it runs; None ("auto"): one, or up to AUTO_PREFETCH_MAX (15)
    # while the bag's tasks are very short (the core decides, see bats.master.core.base)
    prefetch: int | None = None
    monitor_interval_s: float | None = None  # BaTS monitoring; None: max(5 min, shortest ATU / 12)
    release_margin_s: float | None = None  # let a machine go this long before its ATU edge; None: see below
    max_machines: int | None = None  # at most this many machines over all clusters (None: each cluster's max)
    shell: str = DEFAULT_SHELL  # what the workers run each task with: SHELL -c COMMAND

    @property
    def worker_capacity(self) -> int:
        """The most tasks a worker may be sent at once (it is told 1 + prefetch)."""
        return 1 + (AUTO_PREFETCH_MAX if self.prefetch is None else self.prefetch)


MAX_PREFETCH = 15
AUTO_PREFETCH_MAX = MAX_PREFETCH  # under 10 ms a task, 15 queued are at most ~0.15 s of work


@dataclass(frozen=True)
class SamplingConfig:
    """BaTS's sampling phase (seed 000 §2.1-2.2): sample size from confidence and error level."""

    confidence: float = 0.95
    error: float = 0.25
    # machines per cluster during sampling (never more than its max); None: 7, or fewer where a
    # cluster bills by the second or minute (bats.master.core.bats.sampling.sampling_machines)
    initial_workers: int | None = None


@dataclass(frozen=True)
class AdaptiveConfig:
    """``[policy.adaptive]``: seed 001's host heuristic (§4, Fig. 3); the defaults are its
    conservative behaviour (0.5/0.5), 0.75/0.75 its aggressive one."""

    creation_ratio: float = 0.5  # the first damping of the hosts the formula asks for
    increase_ratio: float = 0.5  # how fast creation_ratio grows towards 1 with each result
    host_processing_time_s: float | None = None  # work per host per charging unit; None: the ATU
    cluster: str | None = None  # the host type; None: the cheapest per ATU (the first of equals)


@dataclass(frozen=True)
class DeadlineConfig:
    """``[policy.deadline]``: seed 004's ILP (§V-A)."""

    interval_s: float = 600.0  # the length of the ILP's time intervals (the paper's 10 minutes)


@dataclass(frozen=True)
class OffersConfig:
    """``[policy.offers]``: seed 002's offer composition (§III-IV, master/core/offers/policy.py)."""

    task_runtime_s: float | None = None  # the bag's estimated runtime per task, told to the pools
    publish_capacity: bool = False  # pools publish their total capacity: OffersWithDPLB, not PLB


@dataclass(frozen=True)
class PolicyConfig:
    adaptive: AdaptiveConfig = field(default_factory=AdaptiveConfig)
    deadline: DeadlineConfig = field(default_factory=DeadlineConfig)
    offers: OffersConfig = field(default_factory=OffersConfig)


@dataclass(frozen=True)
class ClusterConfig:
    name: str
    provisioner: str
    max: int
    price: float = 0.0
    atu_s: float = 3600.0
    options: dict[str, Any] = field(default_factory=dict)
    speed: float = 1.0  # used by bats-sim: runtimes are divided by it
    min_charge_s: float = 0.0  # a machine is billed for at least this long (EC2: atu 1s, min_charge 60s)
    market: str = "on-demand"  # or "spot": the price moves (price_trace) and a machine may be interrupted
    price_trace: PriceTrace | None = None  # spot: how the price moves from the start of the run
    bid: float | None = None  # spot: a machine is interrupted while the price is above it (None: never)
    background: tuple[BackgroundJob, ...] | None = None  # a shared pool's own jobs (offers, seed 002)
    # tasks one machine runs at once; None ("auto"): what the back end says a machine has (an EC2
    # instance type's vCPUs), else the cpus its worker reports when it says hello. Billing stays per machine.
    slots: int | None = 1
    # "auto" takes the cpus a worker reports at most up to this: a machine cannot claim the bag
    max_slots: int = 64
    contention: float = 1.0  # bats-sim: a task's runtime factor when it fills a machine's last free slot
    # machines while BaTS samples (seed 000 §2.2); None: ``[sampling] initial_workers``. Fewer on a cluster
    # dear per ATU make its sampling cheaper, at the price of more rounds of its replicated tasks.
    initial_workers: int | None = None

    @property
    def spot(self) -> bool:
        return self.market == "spot"

    def slots_for(self, cpus: int) -> int:
        """The tasks a machine of this cluster runs at once, its worker reporting ``cpus`` CPUs."""
        return self.slots if self.slots is not None else max(1, min(self.max_slots, cpus))


@dataclass(frozen=True)
class Config:
    master: MasterConfig
    clusters: dict[str, ClusterConfig]
    source: str = "<default>"
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    retry: RetryRules = field(default_factory=RetryRules)  # which failed attempts run again (common/retry.py)
    files: FilesConfig = field(default_factory=FilesConfig)  # inputs, setup and outputs (common/files.py)

    @property
    def monitor_interval_s(self) -> float:
        """BaTS's monitoring interval: ``[master] monitor_interval``, else max(5 min, ATU / 12) of
        the cluster with the shortest ATU (seed 000 §4 monitored every 5 minutes for 1 h ATUs)."""
        if self.master.monitor_interval_s is not None:
            return self.master.monitor_interval_s
        return max(300.0, min(c.atu_s for c in self.clusters.values()) / 12.0)

    @property
    def release_margin_s(self) -> float:
        """How long before its ATU edge a machine that must not start another ATU is let go:
        ``[master] release_margin``, else min(60 s, max(1 s, shortest ATU / 20))."""
        if self.master.release_margin_s is not None:
            return self.master.release_margin_s
        return min(60.0, max(1.0, min(c.atu_s for c in self.clusters.values()) / 20.0))

    @property
    def all_local(self) -> bool:
        return all(c.provisioner == "local" for c in self.clusters.values())


def default_config(workers: int | None = None) -> Config:
    """No ``--config``: one local cluster with one worker per core, price 0."""
    count = workers or os.cpu_count() or 1
    local = ClusterConfig(name="local", provisioner="local", max=count, price=0.0, atu_s=3600.0,
                          options={"slowdown": 1.0, "startup": 0.0})
    return Config(master=MasterConfig(), clusters={"local": local})


_MASTER_KEYS = {
    "listen": ("endpoint", None),
    "advertise": ("endpoint", None),
    "heartbeat": ("duration", 2.0),
    "liveness": ("duration", 15.0),
    "boot_timeout": ("duration", 600.0),
    "prefetch": ("prefetch", None),
    "monitor_interval": ("duration", None),
    "release_margin": ("duration", None),
    "max_machines": ("count", None),
    "shell": ("shell", DEFAULT_SHELL),
}
_SAMPLING_KEYS = {
    "confidence": ("fraction", 0.95),
    "error": ("fraction", 0.25),
    "initial_workers": ("count", None),
}
_ADAPTIVE_KEYS = {
    "creation_ratio": ("ratio", 0.5),
    "increase_ratio": ("ratio", 0.5),
    "host_processing_time": ("duration", None),
    "cluster": ("str", None),
}
_DEADLINE_KEYS = {
    "interval": ("duration", 600.0),
}
_OFFERS_KEYS = {
    "task_runtime": ("duration", None),
    "publish_capacity": ("bool", False),
}
_CLUSTER_KEYS = {
    "provisioner": ("str", None),
    "max": ("count", None),
    "price": ("money", 0.0),
    "atu": ("duration", 3600.0),
    "speed": ("factor", 1.0),  # used by bats-sim: runtimes are divided by it
    "min_charge": ("duration", 0.0),  # billed for at least this long
    "market": ("market", "on-demand"),  # "on-demand" or "spot"
    "price_trace": ("str", None),  # spot: CSV of offset, price (relative to this file)
    "bid": ("money", None),  # spot: interrupted while the price is above it
    "on_demand_price": ("money", None),  # spot: its on-demand twin's price, the default bid
    "background_trace": ("str", None),  # a shared pool's own jobs: CSV of submit, slots, runtime
    "slots": ("slots", 1),  # tasks one machine runs at once, or "auto"
    "max_slots": ("slots", 64),  # with slots = "auto": at most this many, whatever a worker reports
    "contention": ("factor", 1.0),  # used by bats-sim: runtime factor with all slots busy
    "initial_workers": ("count", None),  # machines while sampling; default [sampling] initial_workers
}


def _convert(kind: str, value: Any) -> Any:
    """Check one value against its kind; raise ValueError with the reason."""
    if kind == "str" or kind == "endpoint":
        if not isinstance(value, str) or not value:
            raise ValueError(f"expected a non-empty string, got {value!r}")
        if kind == "endpoint" and ("://" not in value or not value.isprintable() or " " in value):
            # it is written into machines' start scripts and cloud user data: one word, one line
            raise ValueError(f"expected a ZeroMQ endpoint such as \"tcp://0.0.0.0:5555\", got {value!r}")
        return value
    if kind == "duration":
        return parse_duration(value)
    if kind in ("count", "int"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {value!r}")
        if value < (1 if kind == "count" else 0):
            raise ValueError(f"must be at least {1 if kind == 'count' else 0}, got {value}")
        return value
    if kind in ("money", "float", "factor"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"expected a number, got {value!r}")
        try:
            number = float(value)
        except OverflowError:  # TOML integers are unbounded
            number = math.inf
        if kind == "factor" and not (math.isfinite(number) and number > 0):
            raise ValueError(f"must be a finite number > 0, got {value!r}")
        if not math.isfinite(number) or number < 0:
            raise ValueError(f"must be a finite number >= 0, got {value!r}")
        return number
    if kind == "market":
        if value not in ("on-demand", "spot"):
            raise ValueError(f"expected \"on-demand\" or \"spot\", got {value!r}")
        return value
    if kind == "fraction":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < float(value) < 1.0:
            raise ValueError(f"expected a number between 0 and 1 (exclusive), got {value!r}")
        return float(value)
    if kind == "ratio":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"expected a number from 0 to 1, got {value!r}")
        return float(value)
    if kind == "prefetch":
        if value == "auto":
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PREFETCH:
            raise ValueError(f"expected \"auto\" or an integer from 0 to {MAX_PREFETCH}, got {value!r}")
        return value
    if kind == "slots":
        if value == "auto":
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SLOTS:
            raise ValueError(f"expected \"auto\" or an integer from 1 to {MAX_SLOTS}, got {value!r}")
        return value
    if kind == "shell":
        if not isinstance(value, str) or not _SHELL.fullmatch(value):
            raise ValueError(f"expected a shell's name or path such as \"bash\" or \"/bin/bash\" (one word), "
                             f"got {value!r}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}")
        return value
    if kind == "list":
        if not isinstance(value, list):
            raise ValueError(f"expected a list, got {value!r}")
        return value
    if kind == "any":
        return value
    raise AssertionError(f"unknown option kind {kind}")


_SHELL = re.compile(r"[A-Za-z0-9_./+-]{1,200}")  # one word: the program the worker runs tasks with
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-]+")  # TOML bare keys
# a cluster name reaches machine ids, batch job names and scripts, cloud tags and user data, log and
# token file names, and the ssh liveness probe: one safe word, checked when the config is read
CLUSTER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,62}")


def _name(key: str) -> str:
    """A key or table name as the message shows it: quoted unless plain, so it stays one line."""
    return key if _PLAIN_NAME.fullmatch(key) else repr(key)


def _read_table(source: str, table: str, raw: dict[str, Any], spec: OptionSpec) -> dict[str, Any]:
    values = {}
    for key, value in raw.items():
        if key not in spec:
            known = ", ".join(sorted(spec))
            raise ConfigError(f"{source}: [{table}] {_name(key)}: unknown key (known keys: {known})")
        try:
            values[key] = _convert(spec[key][0], value)
        except ValueError as exc:
            raise ConfigError(f"{source}: [{table}] {_name(key)}: {exc}") from None
    return values


MAX_CONFIG_BYTES = 1 << 20  # a clusters config is a few hundred bytes; anything near this is not one
MAX_CONFIG_LINE_BYTES = 64 * 1024


def load_config(
    path: str | os.PathLike[str],
    provisioner_options: Callable[[str], OptionSpec],
) -> Config:
    """Read a config file. ``provisioner_options(name)`` returns the keys a provisioner accepts
    and raises ``KeyError`` for a provisioner that is not installed. Every error is one
    :class:`ConfigError` line that starts ``FILE:LINE:`` where the line is known."""
    source = str(path)
    try:
        text = read_utf8(path, bom=True)
    except UnreadableText as exc:
        raise ConfigError(str(exc)) from None
    _check_size(source, text)
    try:
        doc = tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError's message already carries "(at line L, column C)";
        # a plain ValueError comes from an integer too long to convert
        at = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        raise ConfigError(f"{source}{':' + at.group(1) if at else ''}: not valid TOML: {exc}") from None
    try:
        return _build(source, doc, provisioner_options)
    except ConfigError as exc:
        raise ConfigError(_with_line(str(exc), source, text)) from None


def _check_size(source: str, text: str) -> None:
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: {len(text)} characters is more than a config file may hold "
                          f"({MAX_CONFIG_BYTES} bytes)")
    for number, line in enumerate(text.split("\n"), 1):
        if len(line) > MAX_CONFIG_LINE_BYTES:
            raise ConfigError(f"{source}:{number}: line of {len(line)} characters exceeds the "
                              f"{MAX_CONFIG_LINE_BYTES}-byte limit")


_TABLE_MESSAGE = re.compile(r"^: \[([^\]]+)\](?:\s+([A-Za-z0-9_-]+))?")
_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')\s*=")


def _with_line(message: str, source: str, text: str) -> str:
    """``SOURCE: [table] key: …`` becomes ``SOURCE:LINE: [table] key: …``, LINE being where the key
    (or else the table) is written; left as it is when that cannot be found (inline tables)."""
    rest = message[len(source):] if message.startswith(source) else ""
    match = _TABLE_MESSAGE.match(rest)
    if match is None:
        return message
    table, key = match.group(1), match.group(2)
    table_line = key_line = None
    current = None
    for number, line in enumerate(text.split("\n"), 1):
        header = _HEADER.match(line)
        if header:
            current = ".".join(part.strip().strip("\"'") for part in header.group(1).split("."))
            first, _dot, rest_name = current.partition(".")
            shown = f"{first}.{_name(rest_name)}" if rest_name else current  # a quoted name, as messages show it
            if table in (current, shown) and table_line is None:
                table_line = number
            continue
        found = _KEY.match(line)
        if found and current == table and key is not None and found.group(1).strip("\"'") == key:
            key_line = number
            break
    line_no = key_line or table_line
    return message if line_no is None else f"{source}:{line_no}{rest}"


def _build(source: str, doc: dict[str, Any], provisioner_options: Callable[[str], OptionSpec]) -> Config:
    for key in doc:
        if key not in ("master", "clusters", "sampling", "policy", "retry", "files"):
            raise ConfigError(f"{source}: [{_name(key)}]: unknown top-level table "
                              "(expected [master], [sampling], [retry], [files], [policy.NAME] and [clusters.NAME])")
    try:
        retry = parse_retry(f"{source}: [retry]", doc.get("retry", {}))
        files = parse_files(f"{source}: [files]", doc.get("files", {}))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    master_raw = doc.get("master", {})
    if not isinstance(master_raw, dict):
        raise ConfigError(f"{source}: [master]: must be a table")
    values = _read_table(source, "master", master_raw, _MASTER_KEYS)
    master = MasterConfig(
        listen=values.get("listen"),
        advertise=values.get("advertise"),
        heartbeat_s=values.get("heartbeat", 2.0),
        liveness_s=values.get("liveness", 15.0),
        boot_timeout_s=values.get("boot_timeout", 600.0),
        prefetch=values.get("prefetch"),
        monitor_interval_s=values.get("monitor_interval"),
        release_margin_s=values.get("release_margin"),
        max_machines=values.get("max_machines"),
        shell=values.get("shell", DEFAULT_SHELL),
    )
    for key in ("heartbeat", "boot_timeout", "monitor_interval"):
        if key in values and values[key] <= 0:
            raise ConfigError(f"{source}: [master] {key}: must be longer than 0 seconds")
    if master.liveness_s <= master.heartbeat_s:
        raise ConfigError(f"{source}: [master] liveness: must be longer than heartbeat ({master.heartbeat_s:g}s)")
    sampling_raw = doc.get("sampling", {})
    if not isinstance(sampling_raw, dict):
        raise ConfigError(f"{source}: [sampling]: must be a table")
    sampled = _read_table(source, "sampling", sampling_raw, _SAMPLING_KEYS)
    sampling = SamplingConfig(**sampled)
    clusters_raw = doc.get("clusters")
    if not isinstance(clusters_raw, dict) or not clusters_raw:
        raise ConfigError(f"{source}: clusters: no [clusters.NAME] table; define at least one cluster")
    clusters = {}
    for name, raw in clusters_raw.items():
        table = f"clusters.{_name(name)}"
        if not CLUSTER_NAME.fullmatch(name):
            raise ConfigError(f"{source}: [{table}]: a cluster name is a letter followed by up to 62 letters, "
                              "digits, '-' or '_' (it names machines, jobs, log files and user data)")
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: [{table}]: must be a table")
        if "provisioner" not in raw:
            raise ConfigError(f"{source}: [{table}] provisioner: required (for example \"local\")")
        provisioner = raw["provisioner"]
        if not isinstance(provisioner, str) or not provisioner:
            raise ConfigError(f"{source}: [{table}] provisioner: expected a provisioner name such as "
                              f"\"local\", got {provisioner!r}")
        try:
            extra = provisioner_options(provisioner)
        except KeyError as exc:
            raise ConfigError(f"{source}: [{table}] provisioner: {exc.args[0] if exc.args else provisioner}") from None
        spec = {**_CLUSTER_KEYS, **extra}
        values = _read_table(source, table, raw, spec)
        if "max" not in values:
            raise ConfigError(f"{source}: [{table}] max: required (the most machines of this cluster)")
        options = {key: default for key, (_kind, default) in extra.items()}
        options.update({k: v for k, v in values.items() if k in extra})
        if values.get("atu", 3600.0) <= 0:
            raise ConfigError(f"{source}: [{table}] atu: must be longer than 0 seconds")
        market = values.get("market", "on-demand")
        for key in ("price_trace", "bid", "on_demand_price"):
            if key in values and market != "spot":
                raise ConfigError(f"{source}: [{table}] {key}: only for a spot cluster (market = \"spot\")")
        trace = None
        if "price_trace" in values:
            trace_path = os.path.join(os.path.dirname(os.path.abspath(source)), values["price_trace"])
            try:
                trace = load_trace(trace_path)
            except PriceTraceError as exc:
                raise ConfigError(f"{source}: [{table}] price_trace: {exc}") from None
        background = None
        if "background_trace" in values:
            trace_path = os.path.join(os.path.dirname(os.path.abspath(source)), values["background_trace"])
            try:
                background = load_background(trace_path)
            except BackgroundTraceError as exc:
                raise ConfigError(f"{source}: [{table}] background_trace: {exc}") from None
            wide = next((j for j in background if j.slots > values["max"]), None)
            if wide is not None:
                raise ConfigError(f"{source}: [{table}] background_trace: {trace_path}:{wide.line}: "
                                  f"{wide.slots} slots, more than the pool's max = {values['max']}")
        clusters[name] = ClusterConfig(
            name=name,
            provisioner=provisioner,
            max=values["max"],
            price=values.get("price", 0.0),
            atu_s=values.get("atu", 3600.0),
            options=options,
            speed=values.get("speed", 1.0),
            min_charge_s=values.get("min_charge", 0.0),
            market=market,
            price_trace=trace,
            bid=values.get("bid", values.get("on_demand_price")),
            background=background,
            slots=values.get("slots", 1),
            max_slots=values.get("max_slots") or 64,
            contention=values.get("contention", 1.0),
            initial_workers=values.get("initial_workers"),
        )
    policy = _read_policy(source, doc.get("policy", {}), clusters)
    return Config(master=master, clusters=clusters, source=source, sampling=sampling, policy=policy, retry=retry, files=files)


def _read_policy(source: str, raw: Any, clusters: dict[str, ClusterConfig]) -> PolicyConfig:
    """``[policy.adaptive]``, ``[policy.deadline]`` and ``[policy.offers]`` (master/core/adaptive/policy.py,
    master/core/deadline/policy.py, master/core/offers/policy.py)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: [policy]: must be a table of [policy.adaptive], [policy.deadline] "
                          "and [policy.offers]")
    tables: dict[str, dict[str, tuple[str, Any]]] = {"adaptive": _ADAPTIVE_KEYS, "deadline": _DEADLINE_KEYS, "offers": _OFFERS_KEYS}
    values: dict[str, dict[str, Any]] = {}
    for name, table in raw.items():
        if name not in tables or not isinstance(table, dict):
            raise ConfigError(f"{source}: [policy.{_name(name)}]: unknown policy table "
                              "(expected [policy.adaptive], [policy.deadline] or [policy.offers])")
        values[name] = _read_table(source, f"policy.{name}", table, tables[name])
    adaptive = values.get("adaptive", {})
    if adaptive.get("host_processing_time") == 0:
        raise ConfigError(f"{source}: [policy.adaptive] host_processing_time: must be longer than 0 seconds")
    if "cluster" in adaptive and adaptive["cluster"] not in clusters:
        raise ConfigError(f"{source}: [policy.adaptive] cluster: no cluster {adaptive['cluster']!r} "
                          f"(clusters: {', '.join(clusters)})")
    offers = values.get("offers", {})
    if offers.get("task_runtime") == 0:
        raise ConfigError(f"{source}: [policy.offers] task_runtime: must be longer than 0 seconds")
    deadline = values.get("deadline", {})
    if deadline.get("interval") == 0:
        raise ConfigError(f"{source}: [policy.deadline] interval: must be longer than 0 seconds")
    return PolicyConfig(
        adaptive=AdaptiveConfig(creation_ratio=adaptive.get("creation_ratio", 0.5),
                                increase_ratio=adaptive.get("increase_ratio", 0.5),
                                host_processing_time_s=adaptive.get("host_processing_time"),
                                cluster=adaptive.get("cluster")),
        deadline=DeadlineConfig(interval_s=deadline.get("interval", 600.0)),
        offers=OffersConfig(task_runtime_s=offers.get("task_runtime"),
                            publish_capacity=offers.get("publish_capacity", False)))
