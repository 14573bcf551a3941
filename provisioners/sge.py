"""The ``sge`` provisioner: each machine is one worker job on a (Son of) Grid Engine cluster.

How this works. See :mod:`bats.provisioners.batch` for the shared part. Here: ``qsub -terse``
submits the job script from stdin (``-S /bin/sh``, ``-N bats-RUN-MACHINE``, output joined into
``log_dir/MACHINE.log`` or /dev/null) with the cluster's ``queue`` (``-q``), ``project`` (``-P``),
``resources`` (``-l``) and any ``qsub_args``; ``qdel`` cancels; ``qstat -xml`` lists this user's
jobs (read by :mod:`bats.provisioners.qstat`, as are the queue's offers), and each job's ``<state>``
code (a combination of the letters d(eleted), E(rror), h(old), r(unning), R(estarted), s/S/T
(suspended), t(ransferring), q(ueued), w(aiting)) maps to a :class:`NodeState` through ``_STATES``.

Grid Engine's job environment is not the submitter's: ``worker`` should be an absolute path (or on
the execution hosts' default PATH). The master needs the same environment as any ``qsub`` there
(``SGE_ROOT``/``SGE_CELL`` where the installation wants them).
"""

from __future__ import annotations

import logging
from typing import ClassVar

from bats.common.config import ClusterConfig, OptionSpec
from bats.provisioners.base import MachineHandle, NodeState, ProvisionerError
from bats.provisioners.batch import BatchProvisioner
from bats.provisioners.commands import COMMON_OPTIONS

from . import qstat

log = logging.getLogger(__name__)

B, R, G, F, U = (NodeState.BOOTING, NodeState.RUNNING, NodeState.GONE, NodeState.FAILED,
                 NodeState.UNKNOWN)
_STATES: dict[str, NodeState] = {
    # waiting in the queue, held, being sent to a host: still starting up
    "qw": B, "hqw": B, "hRwq": B, "Rq": B, "t": B, "Rt": B,
    "r": R, "Rr": R,
    # suspended: the worker cannot answer, the master's liveness limit decides
    "s": U, "S": U, "T": U, "ts": U, "tS": U, "tT": U, "Rs": U, "RS": U, "RT": U, "Rts": U, "RtS": U, "RtT": U,
    # the scheduler could not start it
    "Eqw": F, "Ehqw": F, "EhRqw": F,
    # being deleted
    "dr": G, "dt": G, "dqw": G, "dhqw": G, "dRr": G, "dRt": G, "ds": G, "dS": G, "dT": G, "dRs": G, "dRS": G,
    "dRT": G,
}


class SgeProvisioner(BatchProvisioner):
    OPTIONS: ClassVar[OptionSpec] = {
        **COMMON_OPTIONS,
        "queue": ("str", None),  # qsub -q
        "project": ("str", None),  # qsub -P
        "resources": ("str", None),  # qsub -l, e.g. "h_vmem=2G,h_rt=4:00:00"
        "qsub_args": ("list", []),  # anything else for qsub, e.g. ["-l", "h_vmem=2G"]
        "parallel_environment": ("str", None),  # with slots = K > 1: qsub -pe PE K (a PE with allocation_rule $pe_slots)
        "log_dir": ("str", None),  # worker logs on the execution hosts (absolute); default none
    }
    COMMANDS = ("qsub", "qstat", "qdel")
    PACKAGE = "gridengine-client"
    ARGS_KEY = "qsub_args"
    STATES = _STATES
    ALREADY_GONE = ("does not exist", "already in deletion")

    @classmethod
    def check_config(cls, cluster: ClusterConfig) -> None:
        super().check_config(cluster)
        asks_pe = "-pe" in (cluster.options.get("qsub_args") or [])
        if (cluster.slots or 1) > 1 and not cluster.options.get("parallel_environment") and not asks_pe:
            raise ValueError("slots", f"{cluster.slots} slots a job need a parallel environment that puts them on one "
                             "host: set parallel_environment (e.g. \"smp\", allocation_rule $pe_slots)")

    def _submit_argv(self, handle: MachineHandle, job_name: str, output: str) -> list[str]:
        options = self.cluster.options
        argv = ["qsub", "-terse", "-S", "/bin/sh", "-N", job_name, "-o", output, "-j", "y"]
        for flag, key in (("-q", "queue"), ("-P", "project"), ("-l", "resources")):
            if options.get(key):
                argv += [flag, options[key]]
        slots = self.cluster.slots or 1
        if slots > 1 and options.get("parallel_environment"):
            argv += ["-pe", options["parallel_environment"], str(slots)]
        return argv + list(options.get("qsub_args") or [])

    def _job_id(self, stdout: str) -> str:
        # -terse prints the job number ("123", or "123.1-4:1" for an array job)
        first = stdout.strip().split("\n", 1)[0].strip()
        job = first.split(".", 1)[0]
        if not job.isdigit():
            raise ProvisionerError(f"cluster {self.cluster.name}: qsub answered {first!r}, not a job number")
        return job

    def _cancel_argv(self, job_ids: list[str]) -> list[str]:
        return ["qdel", *job_ids]

    def _query_argv(self) -> list[str]:
        return ["qstat", "-xml"]

    def _jobs(self, stdout: str) -> list[qstat.QstatJob]:
        try:
            return qstat.jobs(stdout)
        except qstat.QstatError as exc:
            raise ProvisionerError(f"cluster {self.cluster.name}: {exc}") from None

    def _parse_query(self, stdout: str) -> dict[str, str]:
        """Job number -> state code of each job ``qstat -xml`` lists."""
        return {job.number: job.state for job in self._jobs(stdout) if job.number and job.state}

    def _job_names(self) -> dict[str, str]:
        return {job.number: job.name for job in self._jobs(self._run(self._query_argv()).stdout)
                if job.number and job.name}

    def offers(self, tasks: int, task_runtime_s: float, deadline_s: float) -> list[tuple[int, float]] | None:
        """Seed 002 §III-A offers from the real queue: every user's jobs (``qstat -xml -r -u *``)
        and the free slots (``qstat -g c``, of the cluster's ``queue`` if it has one), by EDF
        (:func:`bats.provisioners.sge_offers.offers_from_qstat`). None when the queue cannot be read."""
        from datetime import datetime

        from .sge_offers import offers_from_qstat

        try:
            listing = self._run(["qstat", "-xml", "-r", "-u", "*"]).stdout
            free = qstat.free_slots_from_gc(self._run(["qstat", "-g", "c"]).stdout, self.cluster.options.get("queue"))
            found = offers_from_qstat(listing, free_slots=free, now=datetime.now(), tasks=tasks,
                                      task_runtime_s=task_runtime_s, deadline_s=deadline_s, pool=self.cluster.name)
        except (ProvisionerError, qstat.QstatError) as exc:
            log.warning("cluster %s: no offers: %s", self.cluster.name, exc)
            return None
        return [(o.tasks, o.completion) for o in found]
