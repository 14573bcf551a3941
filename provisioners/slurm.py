"""The ``slurm`` provisioner: each machine is one worker job on a Slurm cluster.

How this works. See :mod:`bats.provisioners.batch` for the shared part. Here: ``sbatch
--parsable`` submits the job script from stdin (``--job-name bats-RUN-MACHINE``, one task, output to
``log_dir/MACHINE.log`` or /dev/null) with the cluster's ``partition``, ``account``, ``qos``,
``time_limit`` and any ``sbatch_args``; ``scancel`` cancels; ``squeue --states=all`` lists this
user's jobs with their state names (``PENDING``, ``RUNNING``, ``NODE_FAIL`` …), mapped to a
:class:`NodeState` through ``_STATES``. A job that finished long ago drops out of ``squeue``
and counts as ``GONE``.

``sbatch`` passes the submitter's environment to the job, so a ``worker`` on the master's PATH
works on a cluster whose nodes share the file system.
"""

from __future__ import annotations

import getpass
import math
from typing import ClassVar

from bats.common.config import OptionSpec
from bats.provisioners.base import MachineHandle, NodeState, ProvisionerError
from bats.provisioners.batch import BatchProvisioner
from bats.provisioners.commands import COMMON_OPTIONS

B, R, G, F, U = (NodeState.BOOTING, NodeState.RUNNING, NodeState.GONE, NodeState.FAILED,
                 NodeState.UNKNOWN)
_STATES: dict[str, NodeState] = {
    # waiting for resources, nodes booting, put back in the queue: still starting up
    "PENDING": B, "CONFIGURING": B, "REQUEUED": B, "REQUEUE_HOLD": B, "REQUEUE_FED": B, "RESV_DEL_HOLD": B,
    "RUNNING": R, "RESIZING": R, "SIGNALING": R,
    # suspended or stopped: the worker cannot answer, the master's liveness limit decides
    "SUSPENDED": U, "STOPPED": U,
    # ended (the worker exited, was cancelled or the time limit hit)
    "COMPLETING": G, "COMPLETED": G, "CANCELLED": G, "TIMEOUT": G, "PREEMPTED": G, "DEADLINE": G,
    "SPECIAL_EXIT": G, "REVOKED": G, "STAGE_OUT": G,
    # the scheduler or a node failed it
    "FAILED": F, "NODE_FAIL": F, "BOOT_FAIL": F, "OUT_OF_MEMORY": F,
}


class SlurmProvisioner(BatchProvisioner):
    OPTIONS: ClassVar[OptionSpec] = {
        **COMMON_OPTIONS,
        "partition": ("str", None),  # sbatch --partition
        "account": ("str", None),  # sbatch --account
        "qos": ("str", None),  # sbatch --qos
        "time_limit": ("duration", None),  # sbatch --time (rounded up to minutes)
        "sbatch_args": ("list", []),  # anything else for sbatch, e.g. ["--mem=2G", "--cpus-per-task=1"]
        "log_dir": ("str", None),  # worker logs on the compute nodes (absolute); default none
    }
    COMMANDS = ("sbatch", "squeue", "scancel")
    PACKAGE = "slurm-client"
    ARGS_KEY = "sbatch_args"
    STATES = _STATES
    ALREADY_GONE = ("Invalid job id", "already completing or completed")

    def _submit_argv(self, handle: MachineHandle, job_name: str, output: str) -> list[str]:
        options = self.cluster.options
        argv = ["sbatch", "--parsable", f"--job-name={job_name}", f"--output={output}", "--ntasks=1"]
        for key in ("partition", "account", "qos"):
            if options.get(key):
                argv.append(f"--{key}={options[key]}")
        if options.get("time_limit"):
            argv.append(f"--time={max(1, math.ceil(options['time_limit'] / 60))}")
        if (self.cluster.slots or 1) > 1:  # the worker's tasks run on the CPUs the job was given
            argv.append(f"--cpus-per-task={self.cluster.slots}")
        return argv + list(options.get("sbatch_args") or [])

    def _job_id(self, stdout: str) -> str:
        # --parsable prints "JOBID" or "JOBID;CLUSTER"
        first = stdout.strip().split("\n", 1)[0].strip()
        job = first.split(";", 1)[0]
        if not job.isdigit():
            raise ProvisionerError(f"cluster {self.cluster.name}: sbatch answered {first!r}, not a job id")
        return job

    def _cancel_argv(self, job_ids: list[str]) -> list[str]:
        return ["scancel", *job_ids]

    def _query_argv(self) -> list[str]:
        return ["squeue", "--noheader", "--states=all", f"--user={getpass.getuser()}", "--format=%i|%T"]

    def _job_names(self) -> dict[str, str]:
        # without --states: pending, running and the like, not jobs that have ended
        out = self._run(["squeue", "--noheader", f"--user={getpass.getuser()}", "--format=%i|%j"]).stdout
        return self._parse_query(out)

    def _parse_query(self, stdout: str) -> dict[str, str]:
        """Job id -> the second column (the state, or the name) of each ``squeue`` line."""
        jobs = {}
        for line in stdout.splitlines():
            job, sep, state = line.strip().partition("|")
            if sep:
                jobs[job] = state.strip()
        return jobs
