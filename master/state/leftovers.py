"""What an earlier session left running: terminated, and every dollar of it on the books.

How this works. A master that crashed (``kill -9``, a lost host) could not give its machines back.
The next ``--resume``, and ``bats-master cleanup``, ask every cluster's provisioner to terminate
what the run still has there (:meth:`~bats.provisioners.base.Provisioner.cleanup`, by the run's
tags) and pass what was found to :func:`bill_leftovers`, which charges it in the journal:

- a machine the journal knows and had not seen released is charged the ATUs begun from its
  acquisition until now (seed 000 §3.1: every begun ATU of a machine's uptime is paid);
- a machine the journal never heard of was launched by an acquisition the master asked for but did
  not live to record. The server commits every acquisition's intent (session, cluster, count,
  time) before asking (``acquiring`` in the journal's meta, see :mod:`bats.master.server.loop`), so it
  is charged from the earliest open intent of its cluster: an upper bound, since the cloud started
  billing at launch, after the asking. Without such an intent (a journal of an older BaTS), from
  the start of the last earlier session, the earliest it can have been launched since that
  session's own clean-up.

The intents of the clusters that answered are then closed; those of a cluster whose back end did
not answer stay, for the next clean-up.

:func:`settle_earlier_sessions` then brings the earlier sessions' machine rows up to date: a master
killed between two journal writes leaves rows that miss the last tasks its machines ran (they are
counted again from the results, which are written first) and machines still marked up although
nothing of them is left (they are marked gone when the journal last saw them, with why).
"""

from __future__ import annotations

import logging
from typing import Any

from bats.common.config import Config

from ..core import atus_begun
from .journal import Journal

log = logging.getLogger(__name__)


def bill_leftovers(journal: Journal, config: Config, found: dict[str, dict[str, str]], now: float,
                   before_session: int) -> float:
    """Charge the machines ``found`` per cluster ({native id: machine id}, as ``cleanup`` returns
    them) that sessions before ``before_session`` left running; returns the money added."""
    rows = {row["machine_id"]: row for row in journal.machines()}
    intents: list[dict[str, Any]] = list(journal.meta.get("acquiring") or [])
    earlier = [started for number, started in journal.sessions() if number < before_session]
    added = 0.0
    for name, machines in found.items():
        cluster = config.clusters[name]
        open_intents = [i for i in intents if i["cluster"] == name and i["session"] < before_session]
        for native_id, machine_id in sorted(machines.items()):
            row = rows.get(machine_id) if machine_id else None
            if row is not None:
                if row["session"] >= before_session or row["released_at"] is not None:
                    continue
                uptime = max(row["uptime_s"], now - row["acquired_at"])
                atus = max(row["atus"], atus_begun(uptime, cluster.atu_s, cluster.min_charge_s))
                cost = row["cost"] + (atus - row["atus"]) * cluster.price
                journal.record_machine(machine_id, row["cluster"], row["session"], row["acquired_at"],
                                       row["ready_at"], now, row["nt"], row["rt_s"], uptime, atus, cost, "gone",
                                       row["reason"] or "left running by a master that stopped; terminated")
                added += cost - row["cost"]
                continue
            if open_intents:
                first = min(open_intents, key=lambda i: i["asked_at"])
                asked_at, session = float(first["asked_at"]), int(first["session"])
            elif earlier:
                asked_at, session = earlier[-1], before_session - 1
            else:
                continue  # no earlier session: nothing of this run can have been left behind
            uptime = max(0.0, now - asked_at)
            atus = atus_begun(uptime, cluster.atu_s, cluster.min_charge_s)
            cost = atus * cluster.price
            journal.record_machine(machine_id or native_id, name, session, asked_at, None, now, 0, 0.0, uptime,
                                   atus, cost, "gone", "launched for a master that stopped first; terminated")
            added += cost
            log.warning("cluster %s: %s was launched for this run but never journaled (the master stopped "
                        "first); charged %d ATU(s), %.4f, from when its acquisition was asked for",
                        name, machine_id or native_id, atus, cost)
    keep = [i for i in intents if i["session"] >= before_session or i["cluster"] not in found]
    if keep != intents:
        journal.set_meta("acquiring", keep)
    journal.flush()
    return added


def settle_earlier_sessions(journal: Journal, before_session: int, answered: set[str],
                            config: Config | None = None) -> int:
    """Bring the rows of machines of sessions before ``before_session`` up to date with the results
    they delivered, and mark those still up as gone where their cluster's clean-up ``answered`` (a
    cluster that did not may still have them running: they stay up, to be charged when it does);
    returns how many rows changed. A machine was up at least until its last result: its uptime
    reaches that far, and (with ``config``) every ATU begun until then is charged."""
    runs = journal.runs_by_machine()
    last = journal.last_result_by_machine()
    changed = 0
    for row in journal.machines():
        if row["session"] >= before_session:
            continue
        nt, rt = runs.get(row["machine_id"], (0, 0.0))
        nt, rt = max(nt, row["nt"]), max(rt, row["rt_s"])
        uptime, atus, cost = row["uptime_s"], row["atus"], row["cost"]
        if row["machine_id"] in last:
            uptime = max(uptime, last[row["machine_id"]] - row["acquired_at"])
        cluster = config.clusters.get(row["cluster"]) if config is not None else None
        if cluster is not None and uptime > row["uptime_s"]:
            atus = max(atus, atus_begun(uptime, cluster.atu_s, cluster.min_charge_s))
            cost = row["cost"] + (atus - row["atus"]) * cluster.price
        released_at, reason = row["released_at"], row["reason"]
        if released_at is None and row["cluster"] in answered:  # not released, and its back end has it no more
            released_at = row["acquired_at"] + uptime
            reason = reason or "its master stopped; gone when the run was resumed"
        if (nt, rt, uptime, released_at, reason) == (row["nt"], row["rt_s"], row["uptime_s"], row["released_at"],
                                                     row["reason"]):
            continue
        journal.record_machine(row["machine_id"], row["cluster"], row["session"], row["acquired_at"],
                               row["ready_at"], released_at, nt, rt, uptime, atus, cost,
                               "gone" if released_at is not None else row["state"], reason)
        changed += 1
    if changed:
        journal.flush()
        log.info("brought %d machine row(s) of earlier sessions up to date", changed)
    return changed
