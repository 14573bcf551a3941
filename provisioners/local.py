"""The ``local`` provisioner: worker processes on this machine, and the cloud emulator.

Each machine is one ``bats-worker`` process started by :meth:`LocalProvisioner._spawn`. Its knobs
emulate other machine types, as seed 000 §4.1 emulated clouds on a cluster: ``slowdown`` makes the
worker stretch every task to ``slowdown ×`` its measured runtime (and report the stretched time),
``startup`` delays the worker's start, standing in for a cloud machine's boot time, and
``metadata_url`` makes the workers watch an instance metadata service for a spot interruption
notice every ``notice_poll`` (``--spot-notice``, as the ec2 provisioner's spot workers do; point it
at a :class:`bats.worker.spot_testing.MetadataStandIn`). Releasing a machine ends its worker
(SIGTERM to its process group), as a cloud terminates an interrupted one. Workers are started
with ``--exit-with-parent`` so a master that dies (even by ``kill -9``) leaves no orphans.

Offers (``--policy offers``, seed 002): a local cluster answers as a pool of ``max`` slots would,
by EDF over its ``background_trace`` as it stands since the provisioner started (an idle pool
without one), the task runtime stretched by ``slowdown`` (:mod:`bats.master.core.offers.generate`). Only the
offers are emulated: the workers do not really wait for the trace's jobs.
"""

from __future__ import annotations

import logging
import os
import select
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import IO, ClassVar

from bats.common.config import ClusterConfig, OptionSpec
from bats.provisioners.base import PARENT_ENV, MachineHandle, NodeState, Provisioner, ProvisionerError

log = logging.getLogger(__name__)

# Popen.poll() answers None while the process runs and its exit code afterwards.
_STATES: dict[int | None, NodeState] = {None: NodeState.RUNNING}


class LocalProvisioner(Provisioner):
    OPTIONS: ClassVar[OptionSpec] = {
        "slowdown": ("factor", 1.0),
        "startup": ("duration", 0.0),
        "noop": ("bool", False),  # benchmarks only: workers skip the command and report at once
        "metadata_url": ("str", None),  # spot emulation: workers watch it for an interruption notice
        "notice_poll": ("duration", 1.0),  # how often they look
    }

    @classmethod
    def check_config(cls, cluster: ClusterConfig) -> None:
        url = cluster.options.get("metadata_url")
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError("metadata_url", f"expected an http:// URL such as \"http://127.0.0.1:8080\", got {url!r}")
        if cluster.options.get("notice_poll", 1.0) <= 0:
            raise ValueError("notice_poll", "must be longer than 0s")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._procs: dict[str, subprocess.Popen] = {}
        self._started = time.monotonic()  # the background trace's time 0

    def offers(self, tasks: int, task_runtime_s: float, deadline_s: float) -> list[tuple[int, float]] | None:
        from bats.master.core.offers.generate import EdfPool, background_job, generate_offers, pool_at

        cl = self.cluster
        if cl.max <= 0:
            return None
        elapsed = time.monotonic() - self._started
        jobs = [background_job(j.submit_s, j.slots, j.runtime_s) for j in cl.background or ()]
        state = pool_at(cl.max, jobs, elapsed) if jobs else EdfPool(cl.max, elapsed)
        runtime = task_runtime_s * float(cl.options.get("slowdown", 1.0))
        return [(o.tasks, o.completion) for o in generate_offers(cl.name, state, tasks, runtime, deadline_s)]

    def _spawn(self, argv: list[str], log_path: str | None, env: dict[str, str] | None = None) -> subprocess.Popen:
        """The one place this provisioner touches the outside world."""
        out: IO[bytes] | int = open(log_path, "ab") if log_path else subprocess.DEVNULL
        try:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, close_fds=True,
                                    env={**os.environ, **env} if env else None)
        finally:
            if not isinstance(out, int):
                out.close()

    def _argv(self, handle: MachineHandle) -> list[str]:
        options = self.cluster.options
        extra = ["--exit-with-parent"]
        if options.get("slowdown", 1.0) != 1.0:
            extra += ["--slowdown", f"{options['slowdown']:g}"]
        if options.get("noop"):
            extra.append("--noop")
        if options.get("metadata_url"):
            extra += ["--spot-notice", options["metadata_url"], "--spot-poll", f"{options.get('notice_poll', 1.0):g}"]
        argv = self.bootstrap_argv(handle, tuple(extra))
        startup = options.get("startup", 0.0)
        if startup > 0:
            # the shell sleeps, then becomes the worker, so the master stays its parent
            return ["/bin/sh", "-c", f"sleep {startup:g}; exec {shlex.join(argv)}"]
        return argv

    def _files_dir(self) -> str:
        """This machine's files folder ([files]): the run's ``STATE_DIR/files``."""
        return os.path.abspath(os.path.join(self.bootstrap.state_dir or ".", "files"))

    def _ship_inputs(self) -> None:
        """[files] inputs into the files folder, once: a folder that holds the same set is left alone."""
        files = self.bootstrap.files
        assert files is not None
        folder = Path(self._files_dir())
        for name in ("inputs", "tasks", "outputs"):
            (folder / name).mkdir(parents=True, exist_ok=True)
        marker = folder / "inputs" / ".bats-set"
        wanted = files.input_set()
        if marker.exists() and marker.read_text().strip() == wanted:
            return
        for path in files.inputs:
            target = folder / "inputs" / os.path.basename(path)
            shutil.copyfile(path, str(target) + ".part")
            os.replace(str(target) + ".part", target)
        marker.write_text(wanted + "\n")

    def _setup(self, handle: MachineHandle) -> str | None:
        """[files] setup for one machine, in its inputs folder; None, or why it failed."""
        files = self.bootstrap.files
        if files is None or not files.setup:
            return None
        folder = self._files_dir()
        done = subprocess.run(["/bin/sh", "-c", files.setup], cwd=os.path.join(folder, "inputs"),
                              stdin=subprocess.DEVNULL, capture_output=True,
                              env={**os.environ, "BATS_FILES": folder, "BATS_MACHINE": handle.machine_id})
        if done.returncode == 0:
            return None
        said = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()
        return (f"cluster {self.cluster.name}: [files] setup failed on {handle.machine_id} (exit {done.returncode}): "
                f"{said[-1] if said else 'no message'}; the machine is given up")

    def acquire(self, n: int) -> list[MachineHandle]:
        handles = []
        log_dir = self.bootstrap.log_dir
        if log_dir:
            Path(log_dir).mkdir(mode=0o700, parents=True, exist_ok=True)  # the state dir's: the operator's alone
        if self.bootstrap.files is not None:
            self._ship_inputs()
        failed: list[str] = []
        for _ in range(n):
            handle = self.new_handle()
            reason = self._setup(handle)
            if reason is not None:
                log.error("%s", reason)
                failed.append(reason)
                continue
            log_path = os.path.join(log_dir, f"{handle.machine_id}.log") if log_dir else None
            # the worker watches this process: gone (even before the worker looks), the worker leaves
            env = {**self.bootstrap_env(handle), PARENT_ENV: str(os.getpid())}
            if self.bootstrap.files is not None:
                env["BATS_FILES"] = self._files_dir()
            proc = self._spawn(self._argv(handle), log_path, env)
            handle.native_id = str(proc.pid)
            self._procs[handle.machine_id] = proc
            handles.append(handle)
        if failed and not handles:
            raise ProvisionerError(failed[0])
        return handles

    def release(self, handles: list[MachineHandle]) -> None:
        for handle in handles:
            proc = self._procs.get(handle.machine_id)
            if proc is not None and proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

    def status(self, handles: list[MachineHandle]) -> dict[str, NodeState]:
        states = {}
        for handle in handles:
            proc = self._procs.get(handle.machine_id)
            code = proc.poll() if proc is not None else -1
            states[handle.machine_id] = _STATES.get(code, NodeState.GONE)
        return states

    def close(self) -> None:
        """Wait briefly for released workers, then kill any that are left."""
        for proc in self._procs.values():
            try:
                _wait_exit(proc, 3.0)
            except subprocess.TimeoutExpired:
                log.warning("worker pid %d did not stop; killing it", proc.pid)
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()


def _wait_exit(proc: subprocess.Popen, timeout_s: float) -> None:
    """``proc.wait(timeout_s)``, woken by the exit itself where Linux gives a process descriptor
    (``Popen.wait`` with a timeout polls with sleeps of up to 50 ms, which every run's end waited)."""
    if proc.poll() is None and hasattr(os, "pidfd_open"):
        try:
            fd = os.pidfd_open(proc.pid)
        except OSError:  # gone already, or no pidfd on this kernel: Popen's own wait below
            pass
        else:
            try:
                select.select([fd], [], [], timeout_s)
            finally:
                os.close(fd)
    proc.wait(timeout=timeout_s)
