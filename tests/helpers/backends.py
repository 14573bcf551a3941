"""Where a fault scenario's cluster runs (``tests/helpers/faults.py``): ``local`` workers (children of the
master), workers the ``ssh`` provisioner starts through a real sshd on 127.0.0.1, or worker jobs on
a real single-node Grid Engine (``sge``).

:func:`up` is the context manager both ``tests/e2e/test_faults.py`` and ``bench/reliability.py`` go
through: it starts what the back end needs (an sshd of its own in the run's directory; Grid Engine
reused if it answers, else started and stopped afterwards, see ``tests/helpers/daemons.py``) and yields a
:class:`Backend` that says what to write in the cluster's table and how to find its workers. Remote
workers are not children of the master, so they are found by their unique cluster name on their
command line (they run on this same machine, so psutil can signal them); whatever is left of them
when the body ends is killed. A missing daemon skips the test (fails it under
``BATS_REQUIRE_DAEMONS=1``) through :func:`daemons.missing`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from helpers import daemons
from helpers.runs import wait_for

WORKER = str(Path(sys.executable).with_name("bats-worker"))
_names = itertools.count(1)


@dataclass(frozen=True)
class Backend:
    name: str = "local"
    cluster: str = "c"
    keys: str = ""  # the cluster table's lines beyond max/price/atu (the provisioner's included)
    master: str = ""  # lines for the [master] table

    @property
    def local(self) -> bool:
        return self.name == "local"

    def workers(self) -> list[psutil.Process]:
        """The live worker processes of this cluster, found by ``--cluster NAME`` on their command line."""
        found = []
        for proc in psutil.process_iter(["cmdline", "status"]):
            cmd = proc.info["cmdline"] or []
            if (proc.info["status"] not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD) and "--cluster" in cmd
                    and self.cluster in cmd and any("bats-worker" in part or "bats.worker" in part for part in cmd)):
                found.append(proc)
        return found


LOCAL = Backend()


def qdel(worker: psutil.Process) -> None:
    """Grid Engine kills the job this worker runs in, as an operator's ``qdel`` or a node failure would."""
    subprocess.run(["qdel", worker.environ()["JOB_ID"]], check=True, capture_output=True, timeout=30,
                   env={**os.environ, **daemons.SGE_ENV})


@contextlib.contextmanager
def up(name: str, root: Path, same_port: bool = False) -> Iterator[Backend]:
    """The back end ``name`` ready for one run in ``root``; see the module docstring. With
    ``same_port`` the master listens on one fixed port, so a resumed master is where the workers
    of a killed one reconnect to."""
    if name == "local":
        yield LOCAL
        return
    cluster = f"f{name}{os.getpid()}n{next(_names)}"  # unique: its workers are found by it
    logs = root / "worker-logs"
    logs.mkdir(parents=True, exist_ok=True)
    common = f'worker = "{WORKER}"\nlog_dir = "{logs}"\npoll_interval = "0.5s"\n'
    listen = f'listen = "tcp://127.0.0.1:{daemons.free_port() if same_port else "*"}"\n'
    with contextlib.ExitStack() as stack:
        if name == "ssh":
            sshd = daemons.start_sshd(root / "sshd")
            stack.callback(daemons.stop_sshd, sshd)
            keys = (f'provisioner = "ssh"\nhosts = [{{ host = "127.0.0.1:{sshd.port}", slots = 8 }}]\nuser = "root"\n'
                    f'key = "{sshd.client_key}"\nknown_hosts = "{sshd.known_hosts}"\n{common}')
        elif name == "sge":
            for key, value in daemons.SGE_ENV.items():
                os.environ.setdefault(key, value)
            stack.enter_context(daemons.running(daemons.start_sge))
            keys = f'provisioner = "sge"\n{common}'
        else:
            raise ValueError(f"unknown back end {name!r}")
        backend = Backend(name, cluster, keys, listen)
        try:
            yield backend
        finally:  # only matters when the run failed: leave no worker (and no job) behind
            for proc in backend.workers():
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            if name == "sge":  # and let Grid Engine see those jobs end before it may be stopped (its execd
                # reports them in its own time: on a loaded 2-core machine a resumed run's jobs took over 30 s)
                wait_for(lambda: cluster not in _sh_out("qstat", "-xml"), 90, "the jobs to end")


def _sh_out(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False,
                          env={**os.environ, **daemons.SGE_ENV}).stdout
