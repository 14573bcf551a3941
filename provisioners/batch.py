"""What the batch-system provisioners (``sge``, ``slurm``) share: one worker job per machine.

How this works. :meth:`BatchProvisioner.acquire` submits one job per machine, its script a
``#!/bin/sh`` that ``exec``s the worker (so the job lives exactly as long as the worker), piped to
the submit command (``qsub``/``sbatch``) through :meth:`_run`; the job id the scheduler answers is
the handle's ``native_id``. :meth:`release` cancels the jobs (``qdel``/``scancel``; a job that has
already ended is not an error). :meth:`status` asks the scheduler for this user's jobs in a
background :class:`~bats.provisioners.commands.Probe` round (at most every ``poll_interval``) and
maps each job's native state to a :class:`NodeState` through the subclass's ``STATES`` table: a
job still waiting in the queue is ``BOOTING`` (queue wait is start-up time, as when seed 000 §4
emulated clouds through SGE), a job in an error state is ``FAILED``, a job the scheduler no longer
lists has ended and is ``GONE``; the master then counts the machine lost and re-queues its task.

A job is named ``bats-RUN-MACHINE`` (the run id, then the machine id). Worker jobs outlive a master
that is killed, so :meth:`cleanup` (at the start of a ``--resume``d session, and ``bats-master
cleanup``) lists this user's jobs by name and cancels those of this run and cluster; left running
they would hold the queue's slots and the resumed run's jobs would wait behind them.

A cluster with ``slots = K`` (K > 1) asks the scheduler for K slots on one host for each worker
job (SGE: ``-pe PE K`` with the cluster's ``parallel_environment``; Slurm: ``--cpus-per-task=K``),
so the worker's K tasks run on what the job was given; ``slots = "auto"`` is refused here (a job
must say what it asks for).

A subclass supplies the command lines: ``_submit_argv``, ``_job_id``, ``_cancel_argv``,
``_query_argv`` and ``_parse_query``, plus its ``STATES`` table and options.
"""

from __future__ import annotations

import logging
import os
import re
from abc import abstractmethod
from typing import ClassVar

from bats.common.config import ClusterConfig
from bats.provisioners.base import (
    Bootstrap,
    MachineHandle,
    NodeState,
    ProvisionerConfigError,
    ProvisionerError,
)
from bats.provisioners.commands import CommandProvisioner, Probe, one_line, seen_by, stamp

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class BatchProvisioner(CommandProvisioner):
    """One worker job per machine on a batch scheduler; see the module docstring."""

    #: the scheduler's job states (as its status command prints them) -> NodeState
    STATES: ClassVar[dict[str, NodeState]] = {}
    #: what the cancel command says about a job that has already ended (not an error on release)
    ALREADY_GONE: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def check_config(cls, cluster: ClusterConfig) -> None:
        if cluster.slots is None:
            raise ValueError("slots", "a batch job must ask for its slots: give a number, not \"auto\"")

    @classmethod
    def preflight(cls, cluster: ClusterConfig, config_dir: str) -> None:
        log_dir = cluster.options.get("log_dir")
        if log_dir and not os.path.isabs(log_dir):
            raise ProvisionerConfigError(
                f"log_dir: must be an absolute path on the execution hosts, got {log_dir!r}")
        args = cluster.options.get(cls.ARGS_KEY) or []
        if not all(isinstance(a, str) for a in args):
            raise ProvisionerConfigError(f"{cls.ARGS_KEY}: expected a list of strings, got {args!r}")
        super().preflight(cluster, config_dir)  # then the commands this machine must have

    #: the option holding extra arguments for the submit command
    ARGS_KEY: ClassVar[str] = "submit_args"

    def __init__(self, cluster: ClusterConfig, bootstrap: Bootstrap) -> None:
        super().__init__(cluster, bootstrap)
        self._probe: Probe[dict[str, str]] = Probe(
            self._query, cluster.options.get("poll_interval", 10.0), f"cluster {cluster.name}: job status")

    # ------------------------------------------------------------ what a subclass supplies
    @abstractmethod
    def _submit_argv(self, handle: MachineHandle, job_name: str, output: str) -> list[str]:
        """The submit command; the job script comes on its stdin."""

    @abstractmethod
    def _job_id(self, stdout: str) -> str:
        """The job id in the submit command's output."""

    @abstractmethod
    def _cancel_argv(self, job_ids: list[str]) -> list[str]: ...

    @abstractmethod
    def _query_argv(self) -> list[str]:
        """A status command that lists this user's jobs."""

    @abstractmethod
    def _parse_query(self, stdout: str) -> dict[str, str]:
        """Job id -> native state, from the status command's output."""

    @abstractmethod
    def _job_names(self) -> dict[str, str]:
        """Job id -> job name of this user's jobs that have not ended."""

    # ------------------------------------------------------------ the interface
    def job_name(self, handle: MachineHandle) -> str:
        return _UNSAFE.sub("_", f"bats-{self.bootstrap.run_id}-{handle.machine_id}")

    def job_script(self, handle: MachineHandle) -> str:
        return (f"#!/bin/sh\n# BaTS worker {handle.machine_id} of run {self.bootstrap.run_id}\n"
                f"{self.token_export(handle)}\n"
                f"exec {self.bootstrap_shell(handle)}\n")

    def _output(self, handle: MachineHandle) -> str:
        log_dir = self.cluster.options.get("log_dir")
        return os.path.join(log_dir, f"{handle.machine_id}.log") if log_dir else "/dev/null"

    def acquire(self, n: int) -> list[MachineHandle]:
        handles: list[MachineHandle] = []
        for _ in range(n):
            handle = stamp(self.new_handle())
            try:
                proc = self._run(self._submit_argv(handle, self.job_name(handle), self._output(handle)),
                                 input=self.job_script(handle))
                handle.native_id = self._job_id(proc.stdout)
            except ProvisionerError as exc:
                if not handles:
                    raise
                log.error("%s; submitted %d of %d job(s)", exc, len(handles), n)
                break
            log.info("cluster %s: %s is job %s", self.cluster.name, handle.machine_id, handle.native_id)
            handles.append(handle)
        return handles

    def release(self, handles: list[MachineHandle]) -> None:
        self._cancel([h.native_id for h in handles if h.native_id])

    def cleanup(self) -> dict[str, str]:
        """Cancel the jobs of this run and cluster the scheduler still lists (see the module docstring)."""
        pattern = re.compile(re.escape(_UNSAFE.sub("_", f"bats-{self.bootstrap.run_id}-{self.cluster.name}-s"))
                             + r"(\d+-\d+)")
        found = {}
        for job, name in self._job_names().items():
            match = pattern.fullmatch(name)
            if match:
                found[job] = f"{self.cluster.name}-s{match.group(1)}"
        self._cancel(sorted(found))
        return found

    def _cancel(self, ids: list[str]) -> None:
        if not ids:
            return
        proc = self._run(self._cancel_argv(ids), check=False)
        if proc.returncode != 0:
            said = (proc.stderr or "") + (proc.stdout or "")
            gone = [line for line in said.splitlines() if any(m in line for m in self.ALREADY_GONE)]
            if len(gone) < len(ids):
                raise ProvisionerError(f"cluster {self.cluster.name}: cancelling job(s) {', '.join(ids)} failed "
                                       f"(exit {proc.returncode}): {one_line(said) or 'no message'}")

    def status(self, handles: list[MachineHandle]) -> dict[str, NodeState]:
        self._probe.poke()
        latest = self._probe.latest()
        states = {}
        for handle in handles:
            if latest is None or not seen_by(handle, latest[0]):
                states[handle.machine_id] = NodeState.UNKNOWN
                continue
            native = latest[1].get(handle.native_id)
            states[handle.machine_id] = (NodeState.GONE if native is None
                                         else self.STATES.get(native, NodeState.UNKNOWN))
        return states

    def _query(self) -> dict[str, str]:
        return self._parse_query(self._run(self._query_argv()).stdout)

    def close(self) -> None:
        self._probe.wait(self.COMMAND_TIMEOUT_S)
