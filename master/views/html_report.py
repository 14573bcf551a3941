"""``bats-master report --html FILE``: one self-contained HTML page about a finished run.

The page holds the summary (status, tasks, predicted against actual makespan and cost), four
figures inlined as base64 PNG (the options offered with the chosen one circled, progress over
time, spend over time against the budget line, machines over time per cluster) and the options,
per-cluster and per-machine tables. Nothing is fetched when it is opened: no scripts, no styles or
images from elsewhere.

Where the figures come from (the journal, ``STATE_DIR/journal.sqlite``, plus ``report.json``):

- progress: each result's ``finished_at``;
- spend: each machine's ATUs, begun at ``acquired_at + k * ATU``, each costing the machine's
  journaled cost over its ATUs (so the curve ends at the run's total, spot price changes included);
- machines: each machine's ``acquired_at`` and ``released_at`` (still held: the report's end);
- options: the journal's ``options`` meta key (written when they are offered; older journals
  without it fall back to the report's ``options``), and the chosen option from the report.
"""

from __future__ import annotations

import base64
import html
import json
import time
from pathlib import Path
from typing import Any

from bats.common.durations import format_duration

from ..core.option import odds_from_record
from ..core.planning.planner import Option
from ..state.journal import Journal
from . import plots as plots
from .options_table import format_options
from .report import slot_busy_s


class ReportError(Exception):
    """The page cannot be made; one line."""


def load_report(state_dir: str | Path) -> dict[str, Any]:
    path = Path(state_dir) / "report.json"
    if not Path(state_dir).is_dir():
        raise ReportError(f"{state_dir}: no such state dir")
    if not path.is_file():
        raise ReportError(f"{path}: no report yet (is the run still going? 'bats-master status' tells; "
                          "a run whose master died writes one after --resume)")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: unreadable report: {exc}") from None


def _option(record: dict[str, Any]) -> Option:
    return Option(**{**record, "also": tuple(record.get("also", ())), "machines": dict(record["machines"]),
                     "odds": odds_from_record(record.get("odds"))})


def series(journal: Journal, report: dict[str, Any]) -> dict[str, Any]:
    """The time series of the run, in seconds since its start (see the module docstring)."""
    start = float(report["started_at"])
    end = float(report["finished_at"])
    finished = sorted((r["finished_at"], r["status"]) for r in journal.results())
    times, done, failed = [0.0], [0], [0]
    for at, status in finished:
        times.append(at - start)
        done.append(done[-1] + (status == "done"))
        failed.append(failed[-1] + (status == "failed"))
    machines = journal.machines()
    atu_of = {name: float(cl["atu_s"]) for name, cl in report.get("clusters", {}).items()}
    charges: list[tuple[float, float]] = []
    changes: dict[str, list[tuple[float, int]]] = {name: [] for name in report.get("clusters", {})}
    for m in machines:
        atus = int(m["atus"])
        if atus > 0:
            each = float(m["cost"]) / atus
            atu_s = atu_of.get(m["cluster"], 3600.0)
            charges.extend((m["acquired_at"] + k * atu_s - start, each) for k in range(atus))
        changes.setdefault(m["cluster"], []).append((m["acquired_at"] - start, +1))
        gone = m["released_at"] if m["released_at"] is not None else end
        changes[m["cluster"]].append((gone - start, -1))
    spend_t, spend = [0.0], [0.0]
    for at, money in sorted(charges):
        spend_t.append(max(0.0, at))
        spend.append(spend[-1] + money)
    spend_t.append(end - start)
    spend.append(spend[-1])
    stamps = sorted({0.0, end - start, *(at for events in changes.values() for at, _ in events)})
    per_cluster: dict[str, list[int]] = {}
    for name, events in changes.items():
        counts, held, ordered, i = [], 0, sorted(events), 0
        for stamp in stamps:
            while i < len(ordered) and ordered[i][0] <= stamp:
                held += ordered[i][1]
                i += 1
            counts.append(held)
        per_cluster[name] = counts
    return {"times": times, "done": done, "failed": failed, "spend_t": spend_t, "spend": spend,
            "machine_t": stamps, "machines": per_cluster}


def _png(fig: Any, alt: str) -> str:
    data = base64.b64encode(plots.png_bytes(fig)).decode("ascii")
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"><figcaption>{html.escape(alt)}</figcaption></figure>'


def _table(headers: list[str], rows: list[list[Any]], css: str) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _d(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(seconds)


def _money(amount: float | None) -> str:
    return "-" if amount is None else f"{amount:,.4f}"


def render(report: dict[str, Any], journal: Journal) -> str:
    """The page as a string."""
    data = series(journal, report)
    meta = journal.meta
    offered = meta.get("options") or {}
    records = offered.get("options") or report.get("options") or []
    options = [_option(r) for r in records]
    selected = report.get("selected")
    tasks = report["tasks"]
    figures = []
    if options:
        figures.append(_png(plots.options_figure(options, selected["id"] if selected else None,
                                                 offered.get("tasks") or report.get("tasks_at_plan")),
                            "options offered: makespan against cost, the Pareto front, the chosen option circled"))
    chosen_at = meta.get("plan_chosen_at")
    planned_end = (chosen_at - report["started_at"] + selected["makespan_s"]) if selected and chosen_at else None
    figures.append(_png(plots.progress_figure(data["times"], data["done"], data["failed"], tasks["total"],
                                              planned_end), "progress over time"))
    budget = report.get("budget")
    apart = 0.0
    if budget is not None and report.get("sampling_apart"):
        apart = report["cost"].get("sampling", 0.0)  # chosen after sampling: the budget starts above it
    figures.append(_png(plots.spend_figure(data["spend_t"], data["spend"],
                                           None if budget is None else budget + apart, report.get("cushion") or 0.0,
                                           None if not selected else selected["cost"] + apart),
                        "spend over time against the budget line" + (" (sampling cost added to the budget line, "
                                                                     "paid apart from it)" if apart else "")))
    figures.append(_png(plots.machines_figure(data["machine_t"], data["machines"]), "machines over time per cluster"))
    pva = report.get("predicted_vs_actual") or {}
    summary_rows = [["status", f"{report['status']}: {report['reason']}"],
                    ["tasks", f"{tasks['done']} done, {tasks['failed']} failed, {tasks['not_run']} not run, "
                              f"of {tasks['total']}"],
                    ["makespan", _d(report["makespan_s"])],
                    ["cost", _money(report["cost"]["total"])]]
    cost = report["cost"]
    if "sampling" in cost:
        summary_rows.append(["", f"sampling {_money(cost['sampling'])}, execution {_money(cost['execution'])}"])
    if budget is not None:
        against = report.get("against_budget")
        summary_rows.append(["budget", _money(budget) + (f" + cushion {_money(report['cushion'])}"
                                                         if report.get("cushion") else "")
                             + ("" if against is None else f", {_money(against)} spent against it"
                                + (" (the sampling paid apart)" if report.get("sampling_apart")
                                   else " (the sampling included)"))])
    if selected:
        machines = ", ".join(f"{n} x {name}" for name, n in selected["machines"].items() if n)
        summary_rows.append(["plan", f"option {selected['id']} ({selected['label']}): {machines}"])
        odds = selected.get("odds")
        if odds:
            summary_rows.append(["odds", f"makespan P50 {_d(odds['makespan_p50_s'])}, P90 {_d(odds['makespan_p90_s'])}; "
                                 f"cost P50 {_money(odds['cost_p50'])}, P99 {_money(odds['cost_p99'])} "
                                 f"({odds['replays']} replays)"])
    for warning in report.get("warnings") or []:
        summary_rows.append(["warning", f"at {_d(warning['at_s'])}: {100 * warning['chance']:.0f} % chance to end "
                             f"within {_money(warning['money'])} ({_money(warning['spent'])} spent); "
                             f"{_money(warning['needed'])} more would make it {100 * warning['threshold']:.0f} %"])
    sections = [f"<h2>Summary</h2>{_table(['', ''], summary_rows, 'summary')}"]
    if pva and report["status"] == "incomplete":
        sections.append(f"<h2>Predicted against actual</h2><p>not compared: the run stopped with {tasks['not_run']} "
                        "task(s) not run</p>")
    elif pva:
        rows = []
        for phase, figs in pva.items():
            rows.append([phase, "makespan", _d(figs["makespan_s"]["predicted"]), _d(figs["makespan_s"]["actual"])])
            rows.append([phase, "cost", _money(figs["cost"]["predicted"]), _money(figs["cost"]["actual"])])
        sections.append("<h2>Predicted against actual</h2>"
                        + _table(["phase", "figure", "predicted", "actual"], rows, "predicted"))
    sections.append("<h2>Figures</h2>" + "".join(figures))
    if options:
        profit = offered.get("profitability")
        text = format_options(options, None, offered.get("tasks") or report.get("tasks_at_plan"), profit=profit)
        sections.append(f"<h2>Options offered</h2><pre>{html.escape(text)}</pre>")
    clusters = report.get("by_cluster") or {}
    if clusters:
        rows = [[name, r["machines"], r["tasks"], _d(r["mean_task_s"]), _d(r["estimated_mean_s"]),
                 "-" if r["utilisation"] is None else f"{100 * r['utilisation']:.0f}%", r["atus"], _money(r["cost"])]
                for name, r in clusters.items()]
        sections.append("<h2>Per cluster</h2>" + _table(
            ["cluster", "machines", "tasks", "mean task", "estimated mean", "busy", "ATUs", "cost"], rows, "clusters"))
    rows = [[m["id"], m["cluster"], m.get("session", ""), m["nt"], _d(slot_busy_s(m)), _d(m["uptime_s"]), m["atus"],
             _money(m["cost"]), m.get("release_reason") or m.get("state", "")] for m in report["machines"]]
    sections.append("<h2>Per machine</h2>" + _table(
        ["machine", "cluster", "session", "tasks", "busy", "uptime", "ATUs", "cost", "why it went"], rows, "machines"))
    title = f"BaTS run {report.get('run_id', '')}"
    made = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; max-width: 60em; margin: 2em auto; padding: 0 1em; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 0.2em 0.6em; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
figure {{ margin: 1em 0; }} img {{ max-width: 100%; }} figcaption {{ color: #555; font-size: 0.9em; }}
pre {{ background: #f6f6f6; padding: 0.8em; overflow-x: auto; }}
</style></head>
<body><h1>{html.escape(title)}</h1>
<p>state dir {html.escape(str(report.get('state_dir', '')))}, page made {made}</p>
{''.join(sections)}
</body></html>
"""


def write_html(state_dir: str | Path, target: str | Path) -> None:
    """Write the page for the run in ``state_dir`` to ``target`` (atomically)."""
    report = load_report(state_dir)
    journal = Journal.open(state_dir)
    try:
        page = render(report, journal)
    finally:
        journal.close()
    out = Path(target)
    tmp = out.with_name(out.name + ".tmp")
    try:
        tmp.write_text(page)
        tmp.replace(out)
    except OSError as exc:
        raise ReportError(f"{target}: cannot write the page: {exc.strerror or exc}") from None
