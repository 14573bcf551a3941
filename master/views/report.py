"""The run's report: ``report.json`` for programs and a short summary for people.

The core knows the current session's machines; machines of earlier sessions (before a
``--resume``) come from the journal, so the money already spent is counted once and in full.
"""

from __future__ import annotations

import json
import os
import resource
import shlex
from pathlib import Path
from typing import Any

from bats.common.atomic import replace_whole
from bats.common.config import Config
from bats.common.durations import format_duration

from ..core import Core, Finish
from ..state.journal import Journal
from .money import account, earlier
from .option_ids import OptionIds
from .option_ids import machines_key as _machines_key
from .shell_hints import shell_lines


def build_report(core: Core, finish: Finish, journal: Journal, config: Config, session: int,
                 now: float, state_dir: str) -> dict[str, Any]:
    figures = core.report(now)
    earlier_rows = [row for row in journal.machines() if row["session"] < session]
    machines = [
        {"id": row["machine_id"], "cluster": row["cluster"], "session": row["session"],
         "slots": core.cluster_slots.get(row["cluster"], 1), "nt": row["nt"],
         "rt_s": row["rt_s"], "uptime_s": row["uptime_s"], "atus": row["atus"], "cost": row["cost"],
         "state": "gone",
         "release_reason": row["reason"] or ("master stopped" if row["released_at"] is None else row["state"])}
        for row in earlier_rows
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
    if "sampling" in figures["cost"]:  # BaTS: the one account of the money (views/money.py)
        before = earlier(journal.meta, journal.machines(), session)
        money = account(core.view(), figures["cost"]["total"], figures["cost"]["sampling"], before)
        cost["sampling"], cost["execution"] = money["sampling"], money["execution"]
        bats.update(budget=money["budget"], cushion=money["cushion"],
                    sampling_apart=money["sampling_apart"], against_budget=money["against_budget"])
        ids = OptionIds(journal.meta.get("option_ids"))  # the ids the operator read in the tables
        if ids.ids:
            bats["options"] = [{**o, "id": ids.ids.get(_machines_key(o["machines"]), o["id"]) if o["id"] else 0}
                               for o in bats.get("options") or []]
            if bats.get("selected") and bats["selected"]["id"]:
                chosen = bats["selected"]
                chosen["id"] = ids.ids.get(_machines_key(chosen["machines"]), chosen["id"])
        if before.plan is not None:  # the run keeps the plan an earlier session chose
            bats["resumed_with"] = {"session": session, "selected": bats.get("selected"),
                                    "budget_left": figures.get("budget"), "phase": figures.get("phase")}
            bats["selected"] = dict(before.plan["option"])
            bats["cushion_accepted"] = before.plan.get("cushion_accepted", bats.get("cushion_accepted"))
    report = {
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
            name: {"provisioner": cl.provisioner, "max": cl.max, "price": cl.price, "atu_s": cl.atu_s,
                   "slots": core.cluster_slots.get(name, cl.slots or 1)}
            for name, cl in config.clusters.items()
        },
        "machines": machines,
        "master": _master_usage(),
    }
    add_analysis(report, journal.meta.get("plan_chosen_at"), end)
    return report


def add_analysis(report: dict[str, Any], chosen_at: float | None, end: float | None) -> None:
    """Add ``by_cluster`` (one row per cluster) and, once a plan was executed, ``predicted_vs_actual``:
    the chosen option's makespan and cost (the execution phase, seed 000 §4.3) against what the
    execution took (from the choice, ``chosen_at``, to ``end``, the last result) and cost."""
    estimates = report.get("estimates") or {}
    rows: dict[str, dict[str, Any]] = {}
    empty = {"machines": 0, "tasks": 0, "busy_s": 0.0, "uptime_s": 0.0, "slot_s": 0.0, "atus": 0, "cost": 0.0}
    for name in report.get("clusters", {}):
        rows[name] = dict(empty)
    for m in report["machines"]:
        row = rows.setdefault(m["cluster"], dict(empty))
        row["machines"] += 1
        row["tasks"] += m["nt"]
        row["busy_s"] += m["rt_s"]
        row["uptime_s"] += m["uptime_s"]
        # busy is slot-seconds: a machine of k slots has k seconds of room per second of uptime
        row["slot_s"] += m["uptime_s"] * max(1, int(m.get("slots") or 1))
        row["atus"] += m["atus"]
        row["cost"] += m["cost"]
    for name, row in rows.items():
        row["mean_task_s"] = row["busy_s"] / row["tasks"] if row["tasks"] else None
        row["estimated_mean_s"] = (estimates.get(name) or {}).get("mean_s")
        room = row.pop("slot_s")
        row["utilisation"] = min(1.0, row["busy_s"] / room) if room else None
    report["by_cluster"] = rows
    selected = report.get("selected")
    if not selected:
        return
    cost = report["cost"]
    actual_cost = cost.get("execution", cost["total"])
    sampling = cost.get("sampling", 0.0) if "execution" in cost else 0.0
    actual_makespan = max(0.0, end - chosen_at) if chosen_at is not None and end is not None else None
    report["predicted_vs_actual"] = {
        "execution": {"makespan_s": {"predicted": selected["makespan_s"], "actual": actual_makespan},
                      "cost": {"predicted": selected["cost"], "actual": actual_cost}},
        "run": {"makespan_s": {"predicted": None if actual_makespan is None
                               else report["makespan_s"] - actual_makespan + selected["makespan_s"],
                               "actual": report["makespan_s"]},
                "cost": {"predicted": sampling + selected["cost"], "actual": cost["total"]}},
    }


def _master_usage() -> dict[str, float]:
    """The master process's own CPU time and peak memory, for operators and ``make bench``."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "peak_rss_mib": round((_peak_since_exec_kib() or usage.ru_maxrss) / 1024, 1)}


def _peak_since_exec_kib() -> int | None:
    """Linux's ``VmHWM``: the peak resident memory of this program. ``ru_maxrss`` also keeps the
    peak of the process it was started from (Linux carries it across ``exec``), so a master started
    by a large process (a benchmark, an IDE) reported that process's size. None elsewhere."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def write_report(report: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Write atomically: a reader never sees half a report."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    replace_whole(target, (json.dumps(report, indent=2) + "\n").encode("utf-8"))


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
    lines.extend(_predicted_lines(report))
    lines.extend(_endgame_lines(report))
    lines.extend(_cluster_table(report))
    lines.extend(_machine_table(report))
    for label, ids in (("failed", tasks.get("failed_ids")), ("not run", tasks.get("not_run_ids"))):
        if ids:
            shown = ", ".join(map(str, ids[:10])) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
            lines.append(f"  {label:<9} task(s) {shown} (bag line numbers)")
    lines.extend(shell_lines(report))
    if tasks.get("failed"):
        state_dir = report.get("state_dir") or "bats-run"
        lines.append(f"  why       bats-master results --failed --state-dir {shlex.quote(state_dir)} "
                     "(exit codes and output tails)")
    if report["status"] != "done" and tasks.get("not_run") and "budget is spent" not in str(report.get("reason")):
        state_dir = report.get("state_dir") or "bats-run"
        if "--plan-only" in str(report.get("reason")):
            lines.append(f"  resume    bats-master --resume --state-dir {shlex.quote(state_dir)} --schedule ID "
                         "(runs the option of that id, from the sample already paid for)")
        else:
            lines.append(f"  resume    bats-master --resume --state-dir {shlex.quote(state_dir)} "
                         "(runs the tasks not run; the money spent stays counted)")
    lines.append(f"  report    {report_path}")
    return "\n".join(lines)


def _predicted_lines(report: dict[str, Any]) -> list[str]:
    """The plan's prediction against what happened (the execution phase)."""
    pva = (report.get("predicted_vs_actual") or {}).get("execution")
    if not pva:
        return []
    if report.get("status") == "incomplete":  # a stopped run did not take the plan's time or money: no comparison
        return [f"  predicted {format_duration(pva['makespan_s']['predicted'])} for "
                f"{pva['cost']['predicted']:.4f} (execution phase); not compared: the run stopped with "
                f"{report['tasks'].get('not_run', 0)} task(s) not run"]
    ms, cost = pva["makespan_s"], pva["cost"]
    actual_ms = format_duration(ms["actual"]) if ms["actual"] is not None else "-"
    return ["  predicted against actual (execution phase):",
            f"            makespan {format_duration(ms['predicted'])} -> {actual_ms}, "
            f"cost {cost['predicted']:.4f} -> {cost['actual']:.4f}"]


def _endgame_lines(report: dict[str, Any]) -> list[str]:
    """The end of the bag: copies on idle paid machines, and tasks cut off by a release."""
    lines = []
    endgame = report.get("endgame") or {}
    if endgame.get("copies_started"):
        lines.append(f"  end-game  {endgame['copies_started']} copy(ies) started, {endgame['copies_won']} won, "
                     f"{format_duration(endgame['copy_paid_s'])} of paid machine time used")
    killed = report.get("killed") or {}
    if killed.get("tasks"):
        lines.append(f"  killed    {killed['tasks']} running task(s) cut off by a release, "
                     f"{format_duration(killed['paid_s'])} of paid work thrown away")
    return lines


def _table(headers: list[str], rows: list[list[str]], indent: str = "    ") -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def render(cells: list[str]) -> str:
        return indent + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                  for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [render(headers), *(render(r) for r in rows)]


def _seconds(value: float | None) -> str:
    return "-" if value is None else format_duration(value)


def _cluster_table(report: dict[str, Any]) -> list[str]:
    clusters = report.get("by_cluster") or {}
    if not clusters or not any(row["machines"] for row in clusters.values()):
        return []
    rows = [[name, str(r["machines"]), str(r["tasks"]), _seconds(r["mean_task_s"]), _seconds(r["estimated_mean_s"]),
             "-" if r["utilisation"] is None else f"{100 * r['utilisation']:.0f}%", str(r["atus"]), f"{r['cost']:.4f}"]
            for name, r in clusters.items() if r["machines"]]
    return ["  per cluster:", *_table(["cluster", "machines", "tasks", "mean task", "estimated", "busy", "ATUs",
                                       "cost"], rows)]


MACHINES_SHOWN = 12


def slot_busy_s(machine: dict[str, Any]) -> float:
    """A machine's busy time per slot (its task-seconds over its slots): never more than its uptime."""
    return float(machine["rt_s"]) / max(1, int(machine.get("slots") or 1))


def _machine_table(report: dict[str, Any]) -> list[str]:
    machines = report["machines"]
    if not machines:
        return []
    rows = [[m["id"], m["cluster"], str(m["nt"]), _seconds(slot_busy_s(m)), _seconds(m["uptime_s"]), str(m["atus"]),
             f"{m['cost']:.4f}", str(m.get("release_reason") or m.get("state") or "")]
            for m in machines[:MACHINES_SHOWN]]
    lines = ["  per machine:", *_table(["machine", "cluster", "tasks", "busy", "uptime", "ATUs", "cost", "why it went"],
                                       rows)]
    if len(machines) > MACHINES_SHOWN:
        lines.append(f"    ... and {len(machines) - MACHINES_SHOWN} more in the report")
    return lines


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
        odds = selected.get("odds")
        if odds:
            lines.append(f"  odds      makespan P50 {format_duration(odds['makespan_p50_s'])}, P90 "
                         f"{format_duration(odds['makespan_p90_s'])}; cost P50 {odds['cost_p50']:.4f}, "
                         f"P99 {odds['cost_p99']:.4f}")
    for warning in report.get("warnings") or []:
        lines.append(f"  warned    at {format_duration(warning['at_s'])}: {100 * warning['chance']:.0f} % chance to end "
                     f"within {warning['money']:.4f} ({warning['spent']:.4f} spent); {warning['needed']:.4f} more "
                     f"would make it {100 * warning['threshold']:.0f} %")
    if report.get("budget") is not None:
        cushion = f" + cushion {report['cushion']:.4f}" if report.get("cushion") else ""
        against = report.get("against_budget")
        paid = "" if against is None else (f", {against:.4f} spent against it"
                                           + (" (the sampling paid apart)" if report.get("sampling_apart")
                                              else " (the sampling included)"))
        lines.append(f"  budget    {report['budget']:.4f}{cushion}{paid}")
    resumed = report.get("resumed_with")
    if resumed and resumed.get("selected"):
        now = resumed["selected"]
        machines = ", ".join(f"{n} x {name}" for name, n in now["machines"].items() if n)
        lines.append(f"  resumed   session {resumed['session']} went on with {machines} "
                     f"within the {resumed['budget_left']:.4f} left")
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
