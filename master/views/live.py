"""What an operator watches while a bag runs: one snapshot of the run's figures, shown three ways.

:func:`snapshot` reads the core between two events (the server's tick) and returns plain,
JSON-able data: tasks done/failed/total, rate, the estimated finish against the plan's, money
spent and committed against the budget, machines per cluster with their ATU phase, the last
reconfiguration and why. The same dict is rendered

- on a terminal, live, by rich (:class:`LiveView`, :func:`rich_view`);
- without one, as one log line per monitoring interval (:func:`one_line`);
- as text by ``bats-master status`` (:func:`status_text`) and as JSON by the dashboard.

:class:`Watch` is the server's ``on_tick`` hook that keeps the latest snapshot, drives the view,
answers the control socket (:mod:`bats.master.views.status`); it changes nothing (the server journals
what the HTML report needs, :mod:`bats.master.server.records`).

Definitions (also in the README): *spent* is every ATU begun so far (what the bill says if
everything stopped now); *committed* is spent plus the ATUs the machines the plan keeps will still
begin until the plan's end at today's prices (an estimate; at most the budget plus the accepted
cushion under BaTS, which never starts an ATU it cannot pay). The *estimated finish* is now plus
the tasks left over the rate measured in this session; the *planned finish* is the end of the
current plan as the core computed it when it chose or last re-planned.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bats.common import clock
from bats.common.durations import format_duration

from ..core import MachineState, atus_begun
from ..core.option import odds_record
from .money import Earlier, account

if TYPE_CHECKING:
    from ..server.loop import Server
    from .status import ControlServer

log = logging.getLogger("bats.progress")
LOG_EVERY_S = 5.0  # without a budget (no monitoring interval): a log line this often
SNAPSHOT_EVERY_S = 0.5  # the figures are recomputed at most this often (the tick is 0.2 s)
def snapshot(server: Server, started_wall: float, already: int, now: float | None = None,
             earlier_run: Earlier | None = None, executing_since: tuple[float, int] | None = None) -> dict[str, Any]:
    """The run's live figures (see the module docstring); ``already`` tasks were finished by
    earlier sessions and do not count towards this session's rate; ``earlier_run`` is what earlier
    sessions paid and chose (:mod:`.money`); ``executing_since`` is (when, tasks finished then) at
    the start of the plan's execution: the estimated finish counts the plan's machines from then on,
    not the sampling's (until they have each finished a task, it is the plan's own finish)."""
    core = server.core
    now = clock.now() if now is None else now
    finished = core.done + core.failed
    chooser = server.chooser
    asking = chooser is not None and chooser.asking
    waited = chooser.waiting_s(now) if chooser is not None else 0.0
    elapsed = max(1e-9, now - started_wall - waited)  # the rate is the machines', not the operator's
    rate = (finished - already) / elapsed
    view = core.view()
    plan_end = view.plan_end
    planned_end = max(plan_end.values()) if plan_end else None
    if executing_since is not None:
        since, finished_then = executing_since
        slots = sum(m.slots for m in core.live_machines())
        if finished - finished_then >= max(1, slots) and now > since:
            rate = (finished - finished_then) / (now - since)
        elif planned_end is not None:  # too early to measure the plan's machines: the plan's figure
            rate = core.remaining / max(1e-9, planned_end - now) if planned_end > now else 0.0
    eta_s = core.remaining / rate if rate > 0 and core.remaining else (0.0 if not core.remaining else None)
    if asking:
        eta_s = None  # nothing runs on until the operator answers
    clusters: dict[str, Any] = {}
    committed_more = 0.0
    for name, cl in core.clusters.items():
        rows = []
        for m in core.live_machines(name):
            up = m.uptime(now)
            atus = atus_begun(up, cl.atu_s, cl.min_charge_s)
            into = up - (atus - 1) * cl.atu_s if up > 0 else 0.0
            rows.append({"id": m.id, "state": m.state.value, "nt": m.nt, "slots": m.slots, "busy": m.running,
                         "atu": atus,
                         "atu_elapsed_s": round(min(max(into, 0.0), cl.atu_s), 3), "atu_s": cl.atu_s,
                         "release_in_s": None if m.release_at is None else round(max(0.0, m.release_at - now), 3)})
            end = plan_end.get(name)
            if m.release_at is None and end is not None and end > now and m.state is not MachineState.GONE:
                more = atus_begun(end - m.acquired_at, cl.atu_s, cl.min_charge_s) - atus
                committed_more += max(0, more) * core.prices[name]
        clusters[name] = {"price": core.prices[name], "atu_s": cl.atu_s, "max": cl.max,
                          "slots": core.cluster_slots[name], "busy_slots": sum(r["busy"] for r in rows),
                          "up": sum(1 for r in rows if r["state"] == MachineState.UP.value),
                          "booting": sum(1 for r in rows if r["state"] == MachineState.BOOTING.value),
                          "machines": rows}
    spent = sum(core.machine_cost(m, now)[1] for m in core.machines.values())
    sampling_now = spent if view.sampling_cost is None else view.sampling_cost  # before the plan: all sampling
    money = account(view, spent, sampling_now, earlier_run or Earlier(), committed_more)
    changes = list(view.reconfigurations)
    selected = view.selected
    return {
        "run_id": server.journal.run_id,
        "pid": os.getpid(),
        "session": server.session,
        "now": now,
        "started_at": started_wall,
        "elapsed_s": round(elapsed, 3),
        "policy": core.name,
        "phase": view.phase,
        "waiting_for": "the operator's choice" if asking else None,
        "waited_s": round(waited, 3),
        "stopping": server.stop_reason,
        "tasks": {"total": core.total, "done": core.done, "failed": core.failed, "remaining": core.remaining,
                  "running": sum(m.running for m in core.live_machines())},  # busy slots; the rest of held is queued
        "rate_per_s": round(rate, 4),
        "eta_s": None if eta_s is None else round(eta_s, 3),
        "estimated_finish_at": None if eta_s is None else now + eta_s,
        "planned_finish_at": planned_end,
        "plan": None if selected is None else {"id": selected.id, "label": selected.label,
                                               "machines": dict(selected.machines),
                                               "makespan_s": selected.makespan_s, "cost": selected.cost,
                                               "odds": odds_record(selected.odds)},
        # the early warning while it holds: the chance of ending within the money fell below the threshold
        "short": None if view.short is None else dict(view.short),
        "money": money,
        "clusters": clusters,
        "reconfigurations": len(changes),
        "last_reconfiguration": changes[-1] if changes else None,
    }


# ---------------------------------------------------------------- text
def _money(amount: float | None) -> str:
    return "-" if amount is None else f"{amount:,.2f}" if amount >= 0.01 or amount == 0 else f"{amount:.6f}"


def _clock(at: float | None, now: float) -> str:
    if at is None:
        return "-"
    return f"{time.strftime('%H:%M:%S', time.localtime(at))} (in {format_duration(max(0.0, at - now))})"


def money_text(snap: dict[str, Any]) -> str:
    """Spent and committed; under a budget, what counts against it (the sampling may be apart)."""
    money = snap["money"]
    if money["budget"] is None:
        return f"spent {_money(money['spent'])}"
    cushion = f" + cushion {_money(money['cushion'])}" if money["cushion"] else ""
    text = (f"budget {_money(money['budget'])}{cushion}: {_money(money['against_budget'])} spent, "
            f"{_money(money['committed'])} committed")
    if money["sampling_apart"]:
        return text + f"; sampling {_money(money['sampling'])} apart"
    return text + (f" (sampling {_money(money['sampling'])} of it)" if money["sampling"] else "")


def one_line(snap: dict[str, Any]) -> str:
    """The log line written once per monitoring interval when there is no terminal."""
    t = snap["tasks"]
    up = sum(c["up"] for c in snap["clusters"].values())
    booting = sum(c["booting"] for c in snap["clusters"].values())
    slots = sum(c.get("slots", 1) * (c["up"] + c["booting"]) for c in snap["clusters"].values())
    eta = format_duration(snap["eta_s"]) if snap["eta_s"] else "-"
    text = (f"{t['done'] + t['failed']}/{t['total']} tasks finished, {t['failed']} failed, "
            f"{snap['rate_per_s']:.1f} tasks/s, {up} machines up" + (f", {booting} booting" if booting else "")
            + (f", {t['running']}/{slots} slots busy" if slots > up + booting else "") + f", eta {eta}")
    if snap["policy"] != "self":
        text += f", {snap['phase']}, {money_text(snap)}"
        if snap.get("waiting_for"):
            text += f", waiting for {snap['waiting_for']}"
        if snap["planned_finish_at"] is not None:
            text += f", plan ends in {format_duration(max(0.0, snap['planned_finish_at'] - snap['now']))}"
        if snap.get("short"):
            text += f", {short_text(snap['short'])}"
    return text


def short_text(short: dict[str, Any]) -> str:
    """The early warning in a few words."""
    return (f"WARNING: {100 * short['chance']:.0f} % chance to end within the money "
            f"({_money(short['money'])}); {_money(short['needed'])} more would make it {100 * short['threshold']:.0f} %")


def odds_text(odds: dict[str, Any] | None) -> str:
    """An option's odds in a few words (empty when it has none)."""
    if not odds:
        return ""
    return (f"; odds: makespan P50 {format_duration(odds['makespan_p50_s'])}, P90 "
            f"{format_duration(odds['makespan_p90_s'])}, cost P50 {_money(odds['cost_p50'])}, "
            f"P99 {_money(odds['cost_p99'])}")


def atu_mark(row: dict[str, Any]) -> str:
    """A machine's ATU phase in a few characters: ``2:30%`` is 30 % into its second ATU; ``v``
    marks a machine to be released at the end of this one."""
    through = 100 * row["atu_elapsed_s"] / row["atu_s"] if row["atu_s"] else 0
    return f"{row['atu']}:{through:.0f}%" + ("v" if row["release_in_s"] is not None else "")


def atu_phase(row: dict[str, Any]) -> str:
    text = f"ATU {row['atu']} {format_duration(row['atu_elapsed_s'])}/{format_duration(row['atu_s'])}"
    if row["release_in_s"] is not None:
        text += f", released in {format_duration(row['release_in_s'])}"
    return text


def status_text(snap: dict[str, Any], state_dir: str, max_machines: int = 8) -> str:
    """What ``bats-master status`` prints: the same figures as the live view, as plain text."""
    t, now = snap["tasks"], snap["now"]
    lines = [
        f"run {snap['run_id']} in {state_dir} (master pid {snap['pid']}, session {snap['session']}): {snap['phase']}"
        + (f", waiting for {snap['waiting_for']}" if snap.get("waiting_for") else "")
        + (f", stopping: {snap['stopping']}" if snap["stopping"] else ""),
        f"  tasks      {t['done']} done, {t['failed']} failed, {t['running']} running, {t['remaining']} left, "
        f"of {t['total']}",
        f"  rate       {snap['rate_per_s']:.2f} tasks/s over {format_duration(snap['elapsed_s'])}",
        f"  finish     estimated {_clock(snap['estimated_finish_at'], now)}"
        + (f", planned {_clock(snap['planned_finish_at'], now)}" if snap["planned_finish_at"] else ""),
        f"  money      {money_text(snap)}",
    ]
    if snap["plan"]:
        plan = snap["plan"]
        machines = ", ".join(f"{n} x {name}" for name, n in plan["machines"].items() if n)
        lines.append(f"  plan       option {plan['id']} ({plan['label']}): {machines}, "
                     f"estimated {format_duration(plan['makespan_s'])} for {_money(plan['cost'])}"
                     + odds_text(plan.get("odds")))
    if snap.get("short"):
        lines.append(f"  money      {short_text(snap['short'])}")
    for name, cl in snap["clusters"].items():
        slots = cl.get("slots", 1)
        busy = f", {cl.get('busy_slots', 0)} of {slots * (cl['up'] + cl['booting'])} slots busy" if slots > 1 else ""
        lines.append(f"  {name:<10} {cl['up']} up, {cl['booting']} booting{busy} (max {cl['max']}"
                     + (f" x {slots} slots" if slots > 1 else "") + f", {_money(cl['price'])} per {format_duration(cl['atu_s'])})")
        for row in cl["machines"][:max_machines]:
            lines.append(f"    {row['id']:<22} {row['state']:<8} {row['nt']:>5} tasks  {atu_phase(row)}"
                         + (f"  {row.get('busy', 0)}/{row['slots']} slots busy" if row.get("slots", 1) > 1 else ""))
        if len(cl["machines"]) > max_machines:
            lines.append(f"    ... and {len(cl['machines']) - max_machines} more")
    last = snap["last_reconfiguration"]
    if last:
        machines = ", ".join(f"{n} x {name}" for name, n in last["machines"].items() if n)
        lines.append(f"  re-planned {snap['reconfigurations']} time(s); last at {format_duration(last['at_s'])}: "
                     f"{last['reason']} -> {machines or 'no machines'}")
    return "\n".join(lines)


# ---------------------------------------------------------------- rich
def rich_view(snap: dict[str, Any]) -> Any:
    """The live terminal view: a progress bar line, the money, a table of machines per cluster."""
    from rich.console import Group, RenderableType
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    t, now = snap["tasks"], snap["now"]
    finished = t["done"] + t["failed"]
    head = Table.grid(padding=(0, 1))
    head.add_row(Text("bats", style="bold"), ProgressBar(total=max(1, t["total"]), completed=finished, width=20),
                 Text(f"{finished}/{t['total']}, {t['failed']} failed, {snap['rate_per_s']:.1f} tasks/s, "
                      f"{snap['phase']}, {format_duration(snap['elapsed_s'])}"))
    lines: list[RenderableType] = [head]
    finish = f"finish: estimated {_clock(snap['estimated_finish_at'], now)}"
    if snap["planned_finish_at"]:
        finish += f", planned {_clock(snap['planned_finish_at'], now)}"
    lines.append(Text(finish))
    if snap["policy"] != "self":
        lines.append(Text(f"money: {money_text(snap)}"))
    if snap.get("short"):
        lines.append(Text(short_text(snap["short"]), style="bold yellow"))
    table = Table(box=None, padding=(0, 1), show_edge=False)
    for column in ("cluster", "up", "booting", "busy slots", "tasks", "ATU:% through (v: released at its end)"):
        table.add_column(column, justify="left" if column.startswith(("cluster", "ATU")) else "right")
    for name, cl in snap["clusters"].items():
        rows = cl["machines"]
        phases = " ".join(atu_mark(r) for r in rows[:8]) + (f" +{len(rows) - 8}" if len(rows) > 8 else "")
        slots = cl.get("slots", 1)
        table.add_row(name + (f" x{slots}" if slots > 1 else ""), str(cl["up"]), str(cl["booting"]),
                      f"{cl.get('busy_slots', 0)}/{slots * (cl['up'] + cl['booting'])}",
                      str(sum(r["nt"] for r in rows)), phases or "-")
    lines.append(table)
    last = snap["last_reconfiguration"]
    if last:
        lines.append(Text(f"last re-plan at {format_duration(last['at_s'])}: {last['reason']}"))
    if snap["stopping"]:
        lines.append(Text(f"stopping: {snap['stopping']}", style="bold red"))
    return Group(*lines)


class LiveView:
    """On a terminal: :func:`rich_view` redrawn on every snapshot (rich's ``Live``, cleared at the
    end so the summary follows); otherwise :func:`one_line` logged every ``log_every_s``."""

    def __init__(self, live: bool | None = None, log_every_s: float = LOG_EVERY_S, console: Any = None) -> None:
        import sys

        self.live = sys.stderr.isatty() if live is None else live
        self.log_every_s = log_every_s
        self.last_log = time.monotonic()
        self._live: Any = None
        self._console = console  # a rich Console; None: one on standard error
        self._moved: list[tuple[logging.StreamHandler, Any]] = []  # log handlers sent through the view
        self.closed = False

    def _start(self) -> None:
        import sys

        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        self._live = Live(Text("bats: starting"), console=self._console or Console(stderr=True), transient=True,
                          auto_refresh=False, redirect_stdout=False, redirect_stderr=True)
        terminal = sys.stderr
        self._live.start()
        # a log line written straight to the terminal would land inside the drawing (the next redraw
        # then leaves a frozen copy of the view, or draws over the line): the handlers that write
        # to the terminal write through the view instead, which prints each line above itself
        if sys.stderr is terminal:
            return  # not a terminal after all: nothing was redirected
        for handler in logging.getLogger().handlers:
            if type(handler) is logging.StreamHandler and handler.stream is terminal:
                handler.setStream(sys.stderr)
                self._moved.append((handler, terminal))

    def show(self, snap: dict[str, Any]) -> None:
        if self.closed:
            return
        if self.live:
            if self._live is None:
                self._start()
            self._live.update(rich_view(snap), refresh=True)
            return
        mono = time.monotonic()
        if mono - self.last_log >= self.log_every_s:
            self.last_log = mono
            log.info("progress: %s", one_line(snap))

    def pause(self) -> None:
        """Clear the view (the options table and the prompt take the terminal); the next
        :meth:`show` brings it back."""
        if self._live is not None:
            for handler, stream in self._moved:
                handler.setStream(stream)
            self._moved = []
            self._live.stop()
            self._live = None

    def close(self) -> None:
        self.pause()
        self.closed = True


class Watch:
    """The server's ``on_tick``: keeps :attr:`latest` (read by the dashboard's thread), feeds the
    view and answers ``bats-master status``; it writes nothing (the server journals the plan)."""

    def __init__(self, started_wall: float, already: int, view: LiveView | None = None,
                 control: ControlServer | None = None, earlier_run: Earlier | None = None) -> None:
        self.started_wall = started_wall
        self.already = already
        self.view = view
        self.control = control
        self.earlier_run = earlier_run or Earlier()
        self._executing_since: tuple[float, int] | None = None
        self.latest: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._last = -math.inf
        self.listeners: list[Callable[[dict[str, Any]], None]] = []

    def current(self) -> dict[str, Any] | None:
        with self._lock:
            return self.latest

    def __call__(self, server: Server) -> None:
        mono = time.monotonic()
        if self.control is not None:
            self.control.serve(lambda: self.current() or self._take(server))
        if mono - self._last < SNAPSHOT_EVERY_S:
            return
        self._last = mono
        snap = self._take(server)
        if self.view is not None and not getattr(server.chooser, "asking", False):
            self.view.show(snap)  # not while the operator reads the options and types a choice

    def _take(self, server: Server) -> dict[str, Any]:
        if self._executing_since is None and server.core.view().phase == "executing":
            self._executing_since = (clock.now(), server.core.done + server.core.failed)
        snap = snapshot(server, self.started_wall, self.already, earlier_run=self.earlier_run,
                        executing_since=self._executing_since)
        with self._lock:
            self.latest = snap
        return snap

    def close(self) -> None:
        if self.view is not None:
            self.view.close()
        if self.control is not None:
            self.control.close()
