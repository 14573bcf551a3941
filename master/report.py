"""The run's report: ``report.json`` for programs and a short summary for people.

The core knows the current session's machines; machines of earlier sessions (before a
``--resume``) come from the journal, so the money already spent is counted once and in full.
"""

from __future__ import annotations

import json
import os
import resource
from pathlib import Path
from typing import Any

from bats.common.config import Config
from bats.common.durations import format_duration
from bats.master.core import Core, Finish
from bats.master.journal import Journal


def build_report(core: Core, finish: Finish, journal: Journal, config: Config, session: int,
                 now: float, state_dir: str) -> dict[str, Any]:
    figures = core.report(now)
    earlier = [row for row in journal.machines() if row["session"] < session]
    machines = [
        {"id": row["machine_id"], "cluster": row["cluster"], "session": row["session"], "nt": row["nt"],
         "rt_s": row["rt_s"], "uptime_s": row["uptime_s"], "atus": row["atus"], "cost": row["cost"],
         "state": "gone", "release_reason": "master stopped" if row["released_at"] is None else row["state"]}
        for row in earlier
    ]
    machines += [{**m, "session": session} for m in figures["machines"]]
    by_cluster: dict[str, float] = {name: 0.0 for name in config.clusters}
    for m in machines:
        by_cluster[m["cluster"]] = by_cluster.get(m["cluster"], 0.0) + m["cost"]
    started_at = journal.meta.get("started_at", core.started_at or now)
    end = now if core.remaining else (core.last_finish_at or now)
    total = sum(m["cost"] for m in machines)
    cost: dict[str, Any] = {"total": total, "by_cluster": by_cluster}
    bats = {key: value for key, value in figures.items() if key not in ("tasks", "makespan_s", "cost", "machines")}
    if "sampling" in figures["cost"]:
        plan = journal.meta.get("plan") or {}
        # a plan chosen in an earlier session after a sampling phase: that phase's cost counts too
        chosen_before = plan.get("session", session) < session and not plan.get("implicit")
        earlier_sampling = (plan.get("sampling_cost") or 0.0) if chosen_before else 0.0
        cost["sampling"] = earlier_sampling + figures["cost"]["sampling"]
        cost["execution"] = total - cost["sampling"]
    return {
        "run_id": journal.run_id,
        "status": finish.status,
        "reason": finish.reason,
        "state_dir": state_dir,
        "bag": {"path": journal.meta.get("bag_path"), "sha256": journal.meta.get("bag_sha256")},
        "sessions": session,
        "tasks": figures["tasks"],
        "started_at": started_at,
        "finished_at": now,
        "makespan_s": max(0.0, end - started_at),
        "cost": cost,
        **bats,
        "clusters": {
            name: {"provisioner": cl.provisioner, "max": cl.max, "price": cl.price, "atu_s": cl.atu_s}
            for name, cl in config.clusters.items()
        },
        "machines": machines,
        "master": _master_usage(),
    }


def _master_usage() -> dict[str, float]:
    """The master process's own CPU time and peak memory, for operators and ``make bench``."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu_s": round(usage.ru_utime + usage.ru_stime, 3), "peak_rss_mib": round(usage.ru_maxrss / 1024, 1)}


def write_report(report: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Write atomically: a reader never sees half a report."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, target)


def summary(report: dict[str, Any], report_path: str) -> str:
    tasks = report["tasks"]
    lines = [
        f"{report['status'].upper()}: {report['reason']}",
        f"  tasks     {tasks['done']} done, {tasks['failed']} failed, {tasks['not_run']} not run, of {tasks['total']}",
        f"  makespan  {format_duration(report['makespan_s'])} ({report['makespan_s']:.1f} s)",
        f"  cost      {report['cost']['total']:.4f}",
    ]
    lines.extend(_budget_lines(report))
    lines.extend(_policy_lines(report))
    per_cluster: dict[str, list[int]] = {}
    for m in report["machines"]:
        entry = per_cluster.setdefault(m["cluster"], [0, 0])
        entry[0] += 1
        entry[1] += m["nt"]
    for name, (count, nt) in per_cluster.items():
        lines.append(f"  {name:<9} {count} machine(s), {nt} task run(s)")
    not_run = tasks.get("not_run_ids")
    if not_run:
        shown = ", ".join(map(str, not_run[:10])) + (f" and {len(not_run) - 10} more" if len(not_run) > 10 else "")
        lines.append(f"  not run   task(s) {shown} (bag line numbers)")
    lines.append(f"  report    {report_path}")
    return "\n".join(lines)


def _budget_lines(report: dict[str, Any]) -> list[str]:
    """BaTS's figures: what was chosen, the budget, where the money went."""
    if report.get("policy") != "bats":
        return []
    lines = []
    cost = report["cost"]
    if "sampling" in cost:
        lines.append(f"            sampling {cost['sampling']:.4f}, execution {cost['execution']:.4f}")
    selected = report.get("selected")
    if selected is not None:
        machines = ", ".join(f"{n} x {name}" for name, n in selected["machines"].items() if n)
        label = f"option {selected['id']} ({selected['label']})" if selected["id"] else selected["label"]
        lines.append(f"  plan      {label}: {machines}, estimated {format_duration(selected['makespan_s'])} "
                     f"for {selected['cost']:.4f}")
    if report.get("budget") is not None:
        cushion = f" + cushion {report['cushion']:.4f}" if report.get("cushion") else ""
        lines.append(f"  budget    {report['budget']:.4f}{cushion}")
    changes = report.get("reconfigurations") or []
    if changes:
        lines.append(f"  re-plans  {len(changes)} (last: {changes[-1]['reason']})")
    return lines


def _policy_lines(report: dict[str, Any]) -> list[str]:
    """The deadline plan (seed 004), the adaptive heuristic's hosts (seed 001) or the offers composed (seed 002)."""
    policy = report.get("policy")
    if policy == "deadline":
        info = report["deadline"]
        cost = report["cost"]
        lines = [f"            sampling {cost.get('sampling', 0.0):.4f}, execution {cost.get('execution', 0.0):.4f}",
                 f"  deadline  {format_duration(info['deadline_s'])}"
                 + {True: " met", False: " missed"}.get(info.get("met"), "")]
        plans = info.get("plans") or []
        if plans:
            first = plans[0]
            lines.append(f"  plan      {first['text']} (from {format_duration(first['at_s'])}), "
                         f"estimated cost {first['cost']:.4f}")
        if len(plans) > 1:
            lines.append(f"  re-plans  {len(plans) - 1} (last: {plans[-1]['reason']})")
        return lines
    if policy == "adaptive":
        info = report["adaptive"]
        return [f"  adaptive  {info['hosts']} host(s) of {info['cluster']} (at most {info['peak_hosts']} at once), "
                f"{info['renewals']} renewal(s); creation_ratio {info['creation_ratio']:g}, "
                f"increase_ratio {info['increase_ratio']:g}"]
    if policy == "offers":
        info = report["offers"]
        comp = info.get("composite")
        lines = [f"  deadline  {format_duration(info['deadline_s'])}"
                 + {True: " met", False: " missed"}.get(info.get("met"), "")]
        if comp is not None:
            shares = ", ".join(f"{n} to {pool}" for pool, n in comp["assigned"].items())
            lines.append(f"  offers    {comp['policy']}: {shares} (offered completion "
                         f"{format_duration(comp['completion_s'])}, {len(info['offers'])} offer(s) in all)")
        return lines
    return []
