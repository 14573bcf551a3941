"""The ``ssh`` provisioner: a fixed pool of hosts, each with a number of worker slots.

How this works. The hosts come from ``hosts`` (strings ``[user@]host[:port]`` or tables ``{ host,
slots, user, port, key }``) and/or ``hosts_file`` (one ``[user@]host[:port] [slots]`` a line, ``#``
comments); ``user``, ``port``, ``key`` and ``slots`` are the defaults. A machine is one slot:
:meth:`SshProvisioner.acquire` takes the host with the most free slots and, with the system
``ssh`` client through :meth:`_run`, starts a detached worker there (``nohup setsid bats-worker …
&``, output in ``log_dir/MACHINE.log`` on that host) and keeps the pid it echoes as the handle's
``native_id``. :meth:`release` sends that pid SIGTERM, after checking that it is still this
machine's worker (its command line names the machine id). One multiplexed connection per host
(``ControlMaster``, closed by :meth:`close` or after 5 idle minutes) makes each later command cheap.

:meth:`status` probes the hosts in background threads (at most every ``poll_interval``): one ``ps``
per host lists which of its workers still run. A worker that is not running is ``GONE``; a host
that fails ``LOST_AFTER`` probes in a row (ssh cannot connect, or it does not answer within
``connect_timeout``) has stopped answering, and its machines are ``FAILED``: the master counts them
lost, and their tasks go back into the bag to run elsewhere. A worker that stops talking to the
master is also caught by the master's own liveness limit.

The workers are detached, so they outlive a master that is killed (and, reconnecting to an address
nobody listens on any more, would run on for good). Each start therefore also appends ``PID
MACHINE`` to a list of this run's workers on the host, ``log_dir/bats-RUN-CLUSTER-HOST.workers``;
:meth:`cleanup` (at the start of a ``--resume``d session, and ``bats-master cleanup``) sends
SIGTERM to those listed that still run as their machine, on every host, and removes the list.
"""

from __future__ import annotations

import base64
import concurrent.futures
import io
import logging
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import threading
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlsplit

from bats.common.config import ClusterConfig, OptionSpec
from bats.common.textfiles import UnreadableText, read_utf8
from bats.provisioners.base import (
    TOKEN_ENV,
    Bootstrap,
    MachineHandle,
    NodeState,
    ProvisionerConfigError,
    ProvisionerError,
)
from bats.provisioners.commands import COMMON_OPTIONS, CommandProvisioner, Probe, one_line, seen_by, stamp

log = logging.getLogger(__name__)

LOST_AFTER = 2  # probes in a row a host may fail before its machines are reported lost
SSH_FAILED = 255  # ssh's exit status when it could not connect or the connection broke
_HOST_KEYS = {"host": "str", "slots": "count", "user": "str", "port": "int", "key": "str"}
_EXPECTED = {"str": "a non-empty string", "count": "a positive integer", "int": "a port number"}


@dataclass(frozen=True)
class Host:
    address: str
    port: int
    user: str | None
    key: str | None
    slots: int

    @property
    def label(self) -> str:
        """``user@host:port``, how messages name the host."""
        return f"{self.user + '@' if self.user else ''}{self.address}:{self.port}"


def _parse_address(text: str) -> tuple[str, str | None, int | None]:
    """``[user@]host[:port]`` (IPv6 in brackets) -> (host, user, port); ValueError with the reason."""
    parts = urlsplit("ssh://" + text.strip())
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"bad port in {text!r}") from None
    if not parts.hostname or parts.path or parts.query or parts.fragment or parts.password is not None:
        raise ValueError(f"expected [user@]host[:port], got {text!r}")
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"bad port in {text!r}")
    return parts.hostname, parts.username, port


def _resolve(path: str | None, config_dir: str) -> str | None:
    if not path:
        return None
    return os.path.join(config_dir, os.path.expanduser(path))


def parse_hosts(options: dict[str, Any], config_dir: str) -> list[Host]:
    """The pool, from ``hosts`` and ``hosts_file``; ProvisionerConfigError naming the key (and the
    file and line for ``hosts_file``)."""
    default_port = options.get("port") or 22
    if not 0 < default_port < 65536:
        raise ProvisionerConfigError(f"port: must be 1-65535, got {default_port}")
    defaults: dict[str, Any] = {"user": options.get("user"), "port": default_port,
                "key": _resolve(options.get("key"), config_dir), "slots": options.get("slots") or 1}
    hosts: list[Host] = []

    def add(text: str, where: str, **given: Any) -> None:
        try:
            address, user, port = _parse_address(text)
        except ValueError as exc:
            raise ProvisionerConfigError(f"{where}: {exc}") from None
        values = {**defaults, **{k: v for k, v in given.items() if v is not None}}
        hosts.append(Host(address, port or values["port"], user or values["user"], values["key"], values["slots"]))

    for i, entry in enumerate(options.get("hosts") or [], 1):
        where = f"hosts: entry {i}"
        if isinstance(entry, str):
            add(entry, where)
        elif isinstance(entry, dict):
            for key, value in entry.items():
                kind = _HOST_KEYS.get(key)
                if kind is None:
                    raise ProvisionerConfigError(f"{where}: unknown key {key!r} (known: {', '.join(_HOST_KEYS)})")
                is_int = isinstance(value, int) and not isinstance(value, bool)
                ok = (isinstance(value, str) and value) if kind == "str" else (
                    is_int and value >= 1 if kind == "count" else is_int and 0 < value < 65536)
                if not ok:
                    raise ProvisionerConfigError(f"{where}: {key}: expected {_EXPECTED[kind]}, got {value!r}")
            if "host" not in entry:
                raise ProvisionerConfigError(f"{where}: host: required")
            add(entry["host"], where, slots=entry.get("slots"), user=entry.get("user"),
                port=entry.get("port"), key=_resolve(entry.get("key"), config_dir))
        else:
            raise ProvisionerConfigError(f"{where}: expected \"[user@]host[:port]\" or a table, got {entry!r}")
    if options.get("hosts_file"):
        path = _resolve(options["hosts_file"], config_dir)
        assert path is not None
        try:
            text = read_utf8(path)
        except UnreadableText as exc:
            raise ProvisionerConfigError(f"hosts_file: {exc}") from None
        for number, line in enumerate(text.splitlines(), 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            where = f"hosts_file: {path}:{number}"
            if len(words) > 2 or (len(words) == 2 and not (words[1].isdigit() and int(words[1]) > 0)):
                raise ProvisionerConfigError(f"{where}: expected \"[user@]host[:port] [slots]\", got {line.strip()!r}")
            add(words[0], where, slots=int(words[1]) if len(words) == 2 else None)
    seen: set[tuple[str, int, str | None]] = set()
    for host in hosts:
        if (host.address, host.port, host.user) in seen:
            raise ProvisionerConfigError(f"hosts: {host.label} is listed twice (give it more slots instead)")
        seen.add((host.address, host.port, host.user))
    return hosts


class SshProvisioner(CommandProvisioner):
    OPTIONS: ClassVar[OptionSpec] = {
        **COMMON_OPTIONS,
        "poll_interval": ("duration", 5.0),
        "hosts": ("list", []),
        "hosts_file": ("str", None),  # relative to the config file
        "user": ("str", None),  # default: ssh's (the config's User, else the local user)
        "port": ("int", 22),
        "key": ("str", None),  # identity file; relative to the config file
        "slots": ("count", 1),  # workers per host unless the host says otherwise
        "known_hosts": ("str", None),  # a known_hosts file instead of ssh's default
        "ssh_options": ("list", []),  # more ssh arguments, e.g. ["-o", "ProxyJump=bastion"]
        "connect_timeout": ("duration", 10.0),
        "log_dir": ("str", "/tmp"),  # worker logs on the hosts
    }
    COMMANDS = ("ssh",)
    PACKAGE = "openssh-client"

    @classmethod
    def preflight(cls, cluster: ClusterConfig, config_dir: str) -> None:
        super().preflight(cluster, config_dir)
        options = cluster.options
        hosts = parse_hosts(options, config_dir)
        if not hosts:
            raise ProvisionerConfigError("hosts: no host given (set hosts = [\"user@host\", …] or hosts_file)")
        slots = sum(h.slots for h in hosts)
        if cluster.max > slots:
            raise ProvisionerConfigError(f"max: {cluster.max} machines, but the hosts have {slots} slot(s) in all")
        for key in ("known_hosts",):
            path = _resolve(options.get(key), config_dir)
            if path and not os.path.isfile(path):
                raise ProvisionerConfigError(f"{key}: {path}: no such file")
        for host in hosts:
            if host.key and not os.path.isfile(host.key):
                raise ProvisionerConfigError(f"key: {host.key}: no such file (host {host.label})")
        if not all(isinstance(a, str) for a in options.get("ssh_options") or []):
            raise ProvisionerConfigError(f"ssh_options: expected a list of strings, got {options['ssh_options']!r}")

    def __init__(self, cluster: ClusterConfig, bootstrap: Bootstrap) -> None:
        super().__init__(cluster, bootstrap)
        self.hosts = parse_hosts(cluster.options, bootstrap.config_dir)
        self._known_hosts = _resolve(cluster.options.get("known_hosts"), bootstrap.config_dir)
        self._control_dir = tempfile.mkdtemp(prefix="bats-ssh-")
        self._lock = threading.Lock()
        self._on: dict[str, Host] = {}  # machine id -> its host
        self._held: dict[str, MachineHandle] = {}
        self._unanswered: dict[str, int] = {h.label: 0 for h in self.hosts}
        self._used_hosts: set[str] = set()
        self._shipped: set[str] = set()  # hosts sent the [files] inputs by this master
        self._probe: Probe[dict[str, set[str] | None]] = Probe(
            self._probe_round, cluster.options.get("poll_interval", 5.0), f"cluster {cluster.name}: host check")

    # ------------------------------------------------------------ ssh command lines
    def ssh_argv(self, host: Host, script: str, *extra: str) -> list[str]:
        """``ssh`` running ``script`` with /bin/sh on ``host`` (whatever its login shell)."""
        options = self.cluster.options
        timeout = max(1, round(options.get("connect_timeout", 10.0)))
        argv = ["ssh", "-p", str(host.port), "-o", "BatchMode=yes", "-o", f"ConnectTimeout={timeout}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=2",
                "-o", "ControlMaster=auto", "-o", f"ControlPath={self._control_dir}/%C", "-o", "ControlPersist=5m"]
        if host.key:
            argv += ["-i", host.key, "-o", "IdentitiesOnly=yes"]
        if self._known_hosts:
            argv += ["-o", f"UserKnownHostsFile={self._known_hosts}"]
        if host.user:
            argv += ["-l", host.user]
        argv += [*(options.get("ssh_options") or []), *extra, "--", host.address]
        if script:
            argv.append(shlex.join(["/bin/sh", "-c", script]))
        return argv

    def _on_host(self, host: Host, script: str, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``script`` with /bin/sh on ``host``; the script goes on ssh's standard input, so what
        it carries (a worker's token) is on no command line, here or there."""
        self._used_hosts.add(host.label)
        proc = self._run([*self.ssh_argv(host, ""), "/bin/sh -s"], input=script, check=False,
                         timeout=timeout or self.cluster.options.get("connect_timeout", 10.0) + 20)
        return proc

    def _log_dir(self) -> str:
        return (self.cluster.options.get("log_dir") or "/tmp").rstrip("/") or "/"

    def _registry(self, host: Host) -> str:
        """The host's list of this run's workers of this cluster (see the module docstring); named
        after the host too, for a ``log_dir`` that several hosts share (NFS)."""
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"bats-{self.bootstrap.run_id}-{self.cluster.name}-{host.label}")
        return f"{self._log_dir()}/{name}.workers"

    # ------------------------------------------------------------ [files] (common/files.py)
    def _files_dir(self) -> str:
        """The host's files folder for this run's machines of this cluster (``$BATS_FILES``)."""
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"bats-{self.bootstrap.run_id}-{self.cluster.name}-files")
        return f"{self._log_dir()}/{name}"

    def _ship_inputs(self, host: Host) -> None:
        """The inputs to ``host``'s files folder, unless it holds the same set (by SHA-256) already:
        a tar archive, base64 on the script's standard input (no second channel, no scp)."""
        files = self.bootstrap.files
        assert files is not None
        q = shlex.quote
        folder = self._files_dir()
        wanted = files.input_set()
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            for path in files.inputs:
                tar.add(path, arcname=os.path.basename(path), recursive=False)
        payload = base64.encodebytes(archive.getvalue()).decode("ascii")
        script = "\n".join([
            f"d={q(folder)}",
            'mkdir -p "$d/inputs" "$d/tasks" "$d/outputs" || exit 1',
            f'if [ "$(cat "$d/inputs/.bats-set" 2>/dev/null)" = {q(wanted)} ]; then exit 0; fi',
            "base64 -d > \"$d/inputs/.bats-in.tar\" <<'BATS_INPUTS'",
            payload.rstrip("\n"),
            "BATS_INPUTS",
            'tar xf "$d/inputs/.bats-in.tar" -C "$d/inputs" || exit 1',
            'rm -f "$d/inputs/.bats-in.tar"',
            f'echo {q(wanted)} > "$d/inputs/.bats-set"',
        ])
        proc = self._on_host(host, script, timeout=max(60.0, len(payload) / 1e6))
        if proc.returncode != 0:
            raise ProvisionerError(f"cluster {self.cluster.name}: sending the [files] inputs to {host.label} failed "
                                   f"(exit {proc.returncode}): {one_line(proc.stderr or proc.stdout) or 'no message'}")

    def _files_lines(self, handle: MachineHandle) -> list[str]:
        """The start script's [files] lines: the folder in the worker's environment, then the setup
        (its failure stops the start, with the setup's last line of output)."""
        files = self.bootstrap.files
        if files is None:
            return []
        q = shlex.quote
        lines = [f"BATS_FILES={q(self._files_dir())}; export BATS_FILES"]
        if files.setup:
            log_path = f"$BATS_FILES/setup-{handle.machine_id}.log"
            lines += [
                f'(cd "$BATS_FILES/inputs" && BATS_MACHINE={q(handle.machine_id)} /bin/sh -c {q(files.setup)}) '
                f'>"{log_path}" 2>&1 || {{ rc=$?; echo "[files] setup failed on {handle.machine_id} (exit $rc): '
                f'$(tail -n 1 "{log_path}")" >&2; exit 1; }}',
            ]
        return lines

    def _fetch_outputs(self, host: Host) -> None:
        """The outputs the host's tasks left in its files folder, into ``STATE_DIR/files/outputs``
        (moved aside there first, so an output a task moves in meanwhile waits for the next fetch)."""
        q = shlex.quote
        script = "\n".join([
            f"d={q(self._files_dir())}",
            'test -d "$d/outputs" || exit 0',
            'f="$d/fetch.$$"; mkdir -p "$f" || exit 1',
            'for o in "$d/outputs"/*; do if [ -e "$o" ]; then mv "$o" "$f/"; fi; done',
            '(cd "$f" && tar cf - .) | base64',
            'rm -rf "$f"',
        ])
        proc = self._on_host(host, script, timeout=600.0)
        if proc.returncode != 0:
            raise ProvisionerError(f"cluster {self.cluster.name}: bringing the [files] outputs back from {host.label} "
                                   f"failed (exit {proc.returncode}): {one_line(proc.stderr) or 'no message'}")
        data = base64.decodebytes(proc.stdout.encode("ascii")) if proc.stdout.strip() else b""
        if not data:
            return
        target = os.path.join(self.bootstrap.state_dir or ".", "files", "outputs")
        os.makedirs(target, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            tar.extractall(target, filter="data")  # a hostile archive cannot write outside the folder

    def _start_script(self, handle: MachineHandle, host: Host) -> str:
        log_dir = self._log_dir()
        log_path = f"{log_dir}/{handle.machine_id}.log"
        program = self.bootstrap.worker_command[0]
        q = shlex.quote
        shell = self.bootstrap.task_shell
        return "\n".join([
            f"command -v {q(program)} >/dev/null 2>&1 || "
            f"{{ echo {q(program + ': command not found')} >&2; exit 127; }}",
            # a shell the host lacks would fail every task with 127: the host is refused instead
            f"command -v {q(shell)} >/dev/null 2>&1 || "
            f"{{ echo {q(f'[master] shell {shell}: not installed on this host')} >&2; exit 127; }}",
            f"mkdir -p {q(log_dir)} || exit 1",
            *self._files_lines(handle),
            "if command -v setsid >/dev/null 2>&1; then s=setsid; else s=; fi",
            self.token_export(handle),
            f"nohup $s {self.bootstrap_shell(handle)} </dev/null >>{q(log_path)} 2>&1 &",
            f"unset {TOKEN_ENV}",
            f"{{ echo \"$! \"{q(handle.machine_id)} >>{q(self._registry(host))}; }} 2>/dev/null",
            "echo $!",
        ])

    # ------------------------------------------------------------ the interface
    def _free(self, host: Host) -> int:
        return host.slots - sum(1 for h in self._on.values() if h == host)

    def acquire(self, n: int) -> list[MachineHandle]:
        handles: list[MachineHandle] = []
        failed: set[str] = set()
        error: ProvisionerError | None = None
        while len(handles) < n:
            with self._lock:
                candidates = [h for h in self.hosts if h.label not in failed and self._free(h) > 0]
            if not candidates:
                break
            host = max(candidates, key=self._free)  # spread the machines over the hosts
            handle = stamp(self.new_handle())
            try:
                if self.bootstrap.files is not None and host.label not in self._shipped:
                    self._ship_inputs(host)
                    self._shipped.add(host.label)
                proc = self._on_host(host, self._start_script(handle, host))
                pid = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
                if proc.returncode != 0 or not pid.isdigit():
                    said = one_line(proc.stderr or proc.stdout) or "no message"
                    raise ProvisionerError(f"cluster {self.cluster.name}: starting a worker on {host.label} failed "
                                           f"(exit {proc.returncode}): {said}")
            except ProvisionerError as exc:
                log.error("%s", exc)
                error = exc
                failed.add(host.label)
                continue
            handle.native_id = f"{host.label}/{pid}"
            handle.data["pid"] = int(pid)
            with self._lock:
                self._on[handle.machine_id] = host
                self._held[handle.machine_id] = handle
            log.info("cluster %s: %s started on %s (pid %s)", self.cluster.name, handle.machine_id, host.label, pid)
            handles.append(handle)
        if not handles and error is not None:
            raise error
        return handles

    def release(self, handles: list[MachineHandle]) -> None:
        by_host: dict[Host, list[MachineHandle]] = {}
        with self._lock:
            for handle in handles:
                host = self._on.pop(handle.machine_id, None)
                self._held.pop(handle.machine_id, None)
                if host is not None and "pid" in handle.data:
                    by_host.setdefault(host, []).append(handle)
        errors = []
        for host, mine in by_host.items():
            # kill a pid only while its command line still names this machine (pids are reused)
            script = "\n".join(
                f'case " $(ps -o args= -p {h.data["pid"]} 2>/dev/null) " in '
                f'*" --machine "{shlex.quote(h.machine_id)}" "*) kill -TERM {h.data["pid"]};; esac'
                for h in mine) + "\nexit 0"
            try:
                proc = self._on_host(host, script)
            except ProvisionerError as exc:
                errors.append(str(exc))
                continue
            if proc.returncode != 0:
                errors.append(f"cluster {self.cluster.name}: stopping {', '.join(h.machine_id for h in mine)} on "
                              f"{host.label} failed (exit {proc.returncode}): {one_line(proc.stderr) or 'no message'}")
            if self.bootstrap.files is not None and self.bootstrap.files.outputs:
                try:
                    self._fetch_outputs(host)
                except (ProvisionerError, OSError, tarfile.TarError, ValueError) as exc:
                    errors.append(str(exc))
        if errors:
            raise ProvisionerError("; ".join(errors))

    def status(self, handles: list[MachineHandle]) -> dict[str, NodeState]:
        self._probe.poke()
        latest = self._probe.latest()
        states = {}
        for handle in handles:
            host = self._on.get(handle.machine_id)
            if host is None:
                states[handle.machine_id] = NodeState.GONE
                continue
            if latest is None or not seen_by(handle, latest[0]) or host.label not in latest[1]:
                states[handle.machine_id] = NodeState.UNKNOWN
                continue
            alive = latest[1][host.label]
            if alive is None:
                states[handle.machine_id] = (NodeState.FAILED if self._unanswered[host.label] >= LOST_AFTER
                                             else NodeState.UNKNOWN)
            else:
                states[handle.machine_id] = NodeState.RUNNING if handle.machine_id in alive else NodeState.GONE
        return states

    def cleanup(self) -> dict[str, str]:
        """Stop the workers of this run and cluster that still run on the hosts (see the module
        docstring); a host that cannot be reached is logged, and an error only if none could be."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(self.hosts))) as pool:
            answers = list(pool.map(self._cleanup_host, self.hosts))
        found = {}
        errors = []
        for host, answer in zip(self.hosts, answers):
            if isinstance(answer, str):
                errors.append(answer)
                continue
            for pid, machine in answer:
                found[f"{host.label}/{pid}"] = machine
        if errors and len(errors) == len(self.hosts):
            raise ProvisionerError("; ".join(errors))
        for error in errors:
            log.error("%s; workers of an earlier session may still run there", error)
        return found

    def _cleanup_host(self, host: Host) -> list[tuple[str, str]] | str:
        """(pid, machine) of each worker stopped on ``host``, or why the host could not be asked."""
        registry = shlex.quote(self._registry(host))
        script = "\n".join([
            f"[ -f {registry} ] || exit 0",
            "while read -r pid machine; do",
            '  case "$pid" in *[!0-9]*|"") continue;; esac',
            '  case " $(ps -o args= -p "$pid" 2>/dev/null) " in',
            '    *" --machine $machine "*) kill -TERM "$pid" && echo "$pid $machine";;',
            "  esac",
            f"done < {registry}",
            f"rm -f {registry}",
        ])
        try:
            proc = self._on_host(host, script)
        except ProvisionerError as exc:
            return str(exc)
        if proc.returncode != 0:
            return (f"cluster {self.cluster.name}: stopping workers left on {host.label} failed "
                    f"(exit {proc.returncode}): {one_line(proc.stderr) or 'no message'}")
        return [(words[0], words[1]) for words in (line.split(None, 1) for line in proc.stdout.splitlines())
                if len(words) == 2]

    def _probe_round(self) -> dict[str, set[str] | None]:
        """Host label -> the machine ids whose worker runs there, or None if the host did not answer."""
        with self._lock:
            work: dict[Host, list[MachineHandle]] = {}
            for machine_id, host in self._on.items():
                work.setdefault(host, []).append(self._held[machine_id])
        if not work:
            return {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(work))) as pool:
            answers = dict(zip(work, pool.map(lambda item: self._check_host(*item), work.items())))
        result: dict[str, set[str] | None] = {}
        with self._lock:
            for host, alive in answers.items():
                if alive is None:
                    self._unanswered[host.label] += 1
                    log.warning("cluster %s: host %s did not answer (%d time(s) in a row)", self.cluster.name,
                                host.label, self._unanswered[host.label])
                else:
                    self._unanswered[host.label] = 0
                result[host.label] = alive
        return result

    def _check_host(self, host: Host, handles: list[MachineHandle]) -> set[str] | None:
        pids = ",".join(str(h.data["pid"]) for h in handles)
        try:
            proc = self._on_host(host, f"ps -o pid= -o args= -p {pids}\nexit 0",
                                 timeout=self.cluster.options.get("connect_timeout", 10.0) + 5)
        except ProvisionerError as exc:  # timed out: the host hangs
            log.debug("%s", exc)
            return None
        if proc.returncode != 0:
            log.debug("cluster %s: checking %s: exit %d: %s", self.cluster.name, host.label, proc.returncode,
                      proc.stderr.strip())
            return None
        running = {}
        for line in proc.stdout.splitlines():
            words = line.split()
            if words and words[0].isdigit():
                running[int(words[0])] = words[1:]
        alive = set()
        for handle in handles:
            args = running.get(handle.data["pid"], [])
            if any(a == "--machine" and b == handle.machine_id for a, b in zip(args, args[1:])):
                alive.add(handle.machine_id)
        return alive

    def close(self) -> None:
        """Close the shared connections (each ``ssh -O exit``) and remove their sockets."""
        self._probe.wait(self.cluster.options.get("connect_timeout", 10.0) + 5)
        for host in self.hosts:
            if host.label in self._used_hosts:
                try:
                    self._run(self.ssh_argv(host, "", "-O", "exit"), check=False, timeout=10)
                except ProvisionerError as exc:
                    log.debug("%s", exc)
        shutil.rmtree(self._control_dir, ignore_errors=True)
