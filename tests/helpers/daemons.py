"""Real back ends for the provisioner tests: an sshd on 127.0.0.1, a single-node Son of Grid Engine
and a single-node Slurm, started the way ``../shared/recipes/`` describes (Debian 12, as root, no
systemd). ``.ci/run`` installs the packages; these helpers start the daemons.

Grid Engine and Slurm are machine-wide: ``start_sge``/``start_slurm`` reuse daemons that already
answer (and then leave them running) and otherwise start them and return a ``stop`` that kills only
the processes they started. A missing package skips the test with the apt command that installs it,
unless ``BATS_REQUIRE_DAEMONS=1`` (set by ``.ci/run``), where it fails instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.runs import free_port, wait_for

SGE_ROOT = "/var/lib/gridengine"
SGE_ENV = {"SGE_ROOT": SGE_ROOT, "SGE_CELL": "default"}
SGE_PIDS = ("/var/spool/gridengine/qmaster/qmaster.pid", "/var/spool/gridengine/execd/localhost/execd.pid")
SLURM_CONF = Path("/etc/slurm/slurm.conf")


def missing(what: str, install: str) -> None:
    """Skip (locally) or fail (CI) because a component is not installed."""
    message = f"{what} is not installed; `{install}` as root installs it (.ci/run does)"
    if os.environ.get("BATS_REQUIRE_DAEMONS") == "1":
        pytest.fail(message)
    pytest.skip(message)


def _sh(*argv: str, env: dict[str, str] | None = None, input: str | None = None, check: bool = True,
        timeout: float = 60) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(argv, env=full_env, input=input, capture_output=True, text=True, check=check,
                          timeout=timeout)


def _kill_pidfile(path: str, grace_s: float = 0.0) -> None:
    """Kill the daemon whose pid ``path`` holds; with ``grace_s``, SIGTERM first, and SIGKILL only
    if it has not exited by then (slurmctld saves its job state on the way out; a SIGKILL can lose
    the last changes, and it came back with ended jobs it thought still ran, holding the CPUs)."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(Path(path).read_text().split()[0])
        if grace_s > 0:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline:
                os.kill(pid, 0)  # OSError once it has gone: nothing more to do
                time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------- sshd
@dataclass
class Sshd:
    port: int
    client_key: Path
    known_hosts: Path
    pid: int
    directory: Path


def start_sshd(directory: Path, address: str = "127.0.0.1", client_key: Path | None = None) -> Sshd:
    """An sshd on ``address`` and a free port, accepting for root one client key (generated unless
    given)."""
    if not Path("/usr/sbin/sshd").exists() or shutil.which("ssh") is None:
        missing("openssh-server", "apt-get install -y openssh-server")
    directory.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(exist_ok=True)
    host_key = directory / "hostkey"
    client_key = client_key or directory / "clientkey"
    for key in (host_key, client_key):
        if not key.exists():
            _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
    (directory / "authorized_keys").write_text(Path(f"{client_key}.pub").read_text())
    (directory / "authorized_keys").chmod(0o600)
    port = free_port()
    (directory / "sshd_config").write_text("\n".join([
        f"Port {port}", f"ListenAddress {address}", f"HostKey {host_key}", f"PidFile {directory}/sshd.pid",
        f"AuthorizedKeysFile {directory}/authorized_keys", "PermitRootLogin prohibit-password",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "PubkeyAuthentication yes",
        "UsePAM no", "StrictModes no", "MaxStartups 100", "MaxSessions 100", "",
    ]))
    known = directory / "known_hosts"
    host_pub = (directory / "hostkey.pub").read_text().split()
    known.write_text(f"[{address}]:{port} {host_pub[0]} {host_pub[1]}\n")
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-f", str(directory / "sshd_config"),
                             "-E", str(directory / "sshd.log")], start_new_session=True)
    ssh = ["ssh", "-p", str(port), "-i", str(client_key), "-o", "BatchMode=yes",
           "-o", f"UserKnownHostsFile={known}", f"root@{address}", "true"]
    wait_for(lambda: subprocess.run(ssh, capture_output=True, timeout=10).returncode == 0, 15,
               f"sshd on {address}:{port}")
    return Sshd(port, client_key, known, proc.pid, directory)


def stop_sshd(sshd: Sshd) -> None:
    """Kill the listening sshd and every session it serves (a host that stops answering)."""
    import psutil

    with contextlib.suppress(psutil.Error):
        parent = psutil.Process(sshd.pid)
        for child in parent.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if child.name().startswith("sshd"):
                    child.kill()
        parent.kill()
        parent.wait(5)


# ---------------------------------------------------------------- Son of Grid Engine
def _sge_answers() -> bool:
    if shutil.which("qstat") is None:
        return False
    out = _sh("qstat", "-f", "-q", "main.q", env=SGE_ENV, check=False, timeout=20)
    # a usable queue instance line: "main.q@vm  BIP  0/0/4  0.50  lx-amd64" with no state column
    return out.returncode == 0 and any(line.startswith("main.q@") and len(line.split()) == 5
                                       for line in out.stdout.splitlines())


def start_sge() -> Callable[[], None] | None:
    """A single-node Grid Engine with queue main.q; returns how to stop it (None: it was running)."""
    if _sge_answers():
        return None
    if not Path("/usr/sbin/sge_qmaster").exists() or shutil.which("qsub") is None:
        missing("Son of Grid Engine", "apt-get install -y gridengine-master gridengine-exec gridengine-client "
                "(debconf preseed: ../shared/recipes/sge.md)")
    host = socket.gethostname()
    common = Path(SGE_ROOT, "default", "common")
    (common / "host_aliases").write_text(f"{host} localhost\n")
    shutil.chown(common / "host_aliases", "sgeadmin", "sgeadmin")
    _sh("install", "-d", "-o", "sgeadmin", "-g", "sgeadmin", "/run/gridengine")
    if _sh("qconf", "-sh", env=SGE_ENV, check=False, timeout=10).returncode != 0:
        _sh("/usr/sbin/sge_qmaster", env=SGE_ENV)
        wait_for(lambda: _sh("qconf", "-sh", env=SGE_ENV, check=False, timeout=10).returncode == 0, 60,
                   "sge_qmaster")
    if _sh("qconf", "-sq", "main.q", env=SGE_ENV, check=False).returncode != 0:
        _configure_sge(host)
    # the smp parallel environment (allocation_rule $pe_slots) on main.q: jobs of several slots on one host
    if "smp" not in _sh("qconf", "-sq", "main.q", env=SGE_ENV).stdout.split("pe_list", 1)[-1].splitlines()[0]:
        _sh("qconf", "-aattr", "queue", "pe_list", "smp", "main.q", env=SGE_ENV)
    _sh("/usr/sbin/sge_execd", env=SGE_ENV)
    wait_for(_sge_answers, 60, "the main.q queue instance to come up")

    def stop() -> None:
        for path in SGE_PIDS:
            _kill_pidfile(path)

    return stop


def _configure_sge(host: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        conf = _sh("qconf", "-sconf", env=SGE_ENV).stdout
        conf = "\n".join("min_uid 0" if line.startswith("min_uid ") else
                         "min_gid 0" if line.startswith("min_gid ") else line for line in conf.splitlines())
        Path(d, "global").write_text(conf + "\n")  # qconf -Mconf wants the file named "global"
        _sh("qconf", "-Mconf", f"{d}/global", env=SGE_ENV)
        sched = {"schedule_interval": "0:0:1", "flush_submit_sec": "1", "flush_finish_sec": "1"}
        lines = [f"{line.split()[0]} {sched[line.split()[0]]}" if line.split() and line.split()[0] in sched else line
                 for line in _sh("qconf", "-ssconf", env=SGE_ENV).stdout.splitlines()]
        Path(d, "sched").write_text("\n".join(lines) + "\n")
        _sh("qconf", "-Msconf", f"{d}/sched", env=SGE_ENV)
        _sh("qconf", "-as", host, env=SGE_ENV)
        Path(d, "eh").write_text(f"hostname {host}\nload_scaling NONE\ncomplex_values NONE\nuser_lists NONE\n"
                                 "xuser_lists NONE\nprojects NONE\nxprojects NONE\nusage_scaling NONE\n"
                                 "report_variables NONE\n")
        _sh("qconf", "-Ae", f"{d}/eh", env=SGE_ENV, check=False)  # exists already after a restart
        Path(d, "hg").write_text(f"group_name @allhosts\nhostlist {host}\n")
        _sh("qconf", "-Ahgrp", f"{d}/hg", env=SGE_ENV, check=False)
        for pe in sorted(Path("/usr/share/gridengine/util/resources/pe").iterdir()):
            _sh("qconf", "-Ap", str(pe), env=SGE_ENV, check=False)
        _sh("qconf", "-aq", "main.q", env={**SGE_ENV, "EDITOR": "true"})
        _sh("qconf", "-mattr", "queue", "hostlist", "@allhosts", "main.q", env=SGE_ENV)
        _sh("qconf", "-mattr", "queue", "slots", "4", "main.q", env=SGE_ENV)
        _sh("qconf", "-rattr", "queue", "load_thresholds", "NONE", "main.q", env=SGE_ENV)


# ---------------------------------------------------------------- Slurm
def _slurm_answers() -> bool:
    if shutil.which("sinfo") is None:
        return False
    out = _sh("sinfo", "-h", "-o", "%T", check=False, timeout=20)
    return out.returncode == 0 and any(s.strip("*") in ("idle", "mixed", "allocated") for s in out.stdout.split())


def _slurm_conf(host: str) -> str:
    return "\n".join([
        "ClusterName=testcluster", f"SlurmctldHost={host}", "AuthType=auth/munge", "CryptoType=crypto/munge",
        "SlurmUser=root", "SlurmdUser=root", "StateSaveLocation=/var/spool/slurmctld",
        "SlurmdSpoolDir=/var/spool/slurmd", "SlurmctldPidFile=/run/slurmctld.pid", "SlurmdPidFile=/run/slurmd.pid",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log", "SlurmdLogFile=/var/log/slurm/slurmd.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
        "SchedulerType=sched/backfill", "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "ReturnToService=2", "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none", "JobCompType=jobcomp/none", "SlurmdParameters=config_overrides",
        f"NodeName={host} CPUs=8 RealMemory=1000 State=UNKNOWN",
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP", "",
    ])


def start_slurm() -> Callable[[], None] | None:
    """A single-node Slurm with partition ``debug``; returns how to stop it (None: it was running)."""
    if _slurm_answers():
        return None
    if not Path("/usr/sbin/slurmctld").exists() or not Path("/usr/sbin/munged").exists():
        missing("Slurm", "apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge")
    for d in ("/etc/slurm", "/var/spool/slurmctld", "/var/spool/slurmd", "/var/log/slurm"):
        Path(d).mkdir(parents=True, exist_ok=True)
    SLURM_CONF.write_text(_slurm_conf(socket.gethostname()))
    started: list[str] = []
    if _sh("pgrep", "-x", "munged", check=False).returncode != 0:
        _sh("install", "-d", "-o", "munge", "-g", "munge", "-m", "0755", "/run/munge")
        _sh("runuser", "-u", "munge", "--", "/usr/sbin/munged")
        started.append("/run/munge/munged.pid")
    _kill_pidfile("/run/slurmctld.pid")  # a half-started earlier run: start clean
    _kill_pidfile("/run/slurmd.pid")
    _sh("/usr/sbin/slurmctld")
    _sh("/usr/sbin/slurmd")
    started += ["/run/slurmd.pid", "/run/slurmctld.pid"]
    wait_for(_slurm_answers, 60, "the Slurm node to be idle")

    def stop() -> None:
        for path in started:
            _kill_pidfile(path, grace_s=10)

    return stop


@contextlib.contextmanager
def running(start: Callable[[], Callable[[], None] | None]) -> Iterator[None]:
    stop = start()
    try:
        yield
    finally:
        if stop is not None:
            stop()
