"""Pictures of the options and of a run: a compact text plot for the terminal, and PNG figures
(matplotlib, Agg backend, no display needed) for ``--plot FILE.png`` and the HTML report.

The options live in the makespan/cost plane: the fastest schedules top left, the cheapest bottom
right. Every option is a dot; the Pareto front is drawn as a line; the paper's four schedules
(seed 000 §4.3: cheapest, +20%, fastest-20%, fastest) are marked and labelled. No printing here:
functions return text or bytes, or write the file they are given.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from bats.common.atomic import replace_whole
from bats.common.durations import format_duration

from ..core.planning.planner import Option

# the paper's four schedules and their marks in the text plot, in the order a mark is chosen
PAPER_MARKS = {"fastest": "F", "cheapest": "C", "fastest-20%": "-", "+20%": "+"}
PARETO_MARK, OTHER_MARK = "*", "o"


def paper_labels(option: Option) -> list[str]:
    """The paper's schedule labels this option carries (a configuration may carry several)."""
    return [label for label in (option.label, *option.also) if label in PAPER_MARKS]


def _mark(option: Option) -> str:
    labels = paper_labels(option)
    for label, mark in PAPER_MARKS.items():
        if label in labels:
            return mark
    return PARETO_MARK if option.pareto else OTHER_MARK


def _scale(value: float, low: float, high: float, cells: int) -> int:
    if high <= low:
        return (cells - 1) // 2
    return round((value - low) / (high - low) * (cells - 1))


def text_plot(options: Sequence[Option], width: int = 48, height: int = 10) -> str:
    """The options in the makespan (x) / cost (y) plane as lines of text.

    ``C`` cheapest, ``+`` +20%, ``-`` fastest-20%, ``F`` fastest, ``*`` another Pareto-optimal option,
    ``o`` any other; where several fall in one cell the paper's marks win over ``*``, ``*`` over ``o``.
    Every line starts with spaces, so nothing in it reads as a row of the options table."""
    if not options:
        return ""
    xs = [o.makespan_s for o in options]
    ys = [o.cost for o in options]
    x_lo, x_hi, y_lo, y_hi = min(xs), max(xs), min(ys), max(ys)
    grid = [[" "] * width for _ in range(height)]
    rank = {mark: i for i, mark in enumerate([*PAPER_MARKS.values(), PARETO_MARK, OTHER_MARK])}
    for option in options:
        col = _scale(option.makespan_s, x_lo, x_hi, width)
        row = height - 1 - _scale(option.cost, y_lo, y_hi, height)
        mark, here = _mark(option), grid[row][col]
        if here == " " or rank[mark] < rank[here]:
            grid[row][col] = mark
    top, bottom = f"{y_hi:,.2f}", f"{y_lo:,.2f}"
    pad = max(len(top), len(bottom)) + 3
    lines = ["cost against makespan: C cheapest, + +20%, - fastest-20%, F fastest, "
             "* Pareto-optimal, o other"]
    for i, cells in enumerate(grid):
        label = top if i == 0 else bottom if i == height - 1 else ""
        lines.append(f"{label:>{pad}} {'┤' if label else '│'}{''.join(cells)}".rstrip())
    lines.append(" " * (pad + 1) + "└" + "─" * width)
    left, right = format_duration(x_lo), format_duration(x_hi)
    axis = left + right.rjust(width - len(left)) if x_hi > x_lo else left.center(width)
    lines.append(" " * (pad + 2) + axis + "  makespan")
    return "\n".join(line if line.startswith(" ") else "  " + line for line in lines)


# ---------------------------------------------------------------- PNG figures (matplotlib)
def _figure(width_in: float = 7.0, height_in: float = 4.5) -> Any:
    """A figure not tied to pyplot's global state or a display (safe in threads and servers)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def save_png(fig: Any, path: str | os.PathLike[str]) -> None:
    """Write the figure as a PNG (atomically: a viewer never shows half a file)."""
    replace_whole(path, png_bytes(fig))


def _unit(longest_s: float) -> tuple[float, str]:
    """Seconds, minutes or hours, whichever reads best for a span of ``longest_s``."""
    if longest_s >= 7200:
        return 3600.0, "hours"
    if longest_s >= 120:
        return 60.0, "minutes"
    return 1.0, "seconds"


def options_figure(options: Sequence[Option], chosen: int | None = None, tasks: int | None = None) -> Any:
    """The makespan/cost plane: every option, the Pareto front, the paper's four schedules
    labelled, the chosen option (by id) circled, and each option's odds (P50 marked, a line to the
    P90 makespan and one to the P99 cost) where it states them."""
    fig = _figure()
    ax = fig.add_subplot()
    div, unit = _unit(max([o.makespan_s for o in options], default=1.0))

    def _hours(seconds: float) -> float:
        return seconds / div

    others = [o for o in options if not o.pareto]
    front = sorted((o for o in options if o.pareto), key=lambda o: (o.makespan_s, o.cost))
    if others:
        ax.scatter([_hours(o.makespan_s) for o in others], [o.cost for o in others], s=14, color="0.65",
                   label="option (dominated)", zorder=2)
    if front:
        ax.step([_hours(o.makespan_s) for o in front], [o.cost for o in front], where="post", color="tab:blue",
                linewidth=1.2, zorder=1)
        ax.scatter([_hours(o.makespan_s) for o in front], [o.cost for o in front], s=18, color="tab:blue",
                   label="Pareto front", zorder=3)
    with_odds = [o for o in options if o.odds is not None]
    if with_odds:  # each option's odds: a bar from P50 to P90 makespan and from P50 to P99 cost
        for o in with_odds:
            assert o.odds is not None
            ax.plot([_hours(o.odds.makespan_p50_s), _hours(o.odds.makespan_p90_s)], [o.odds.cost_p50] * 2,
                    color="tab:purple", alpha=0.5, linewidth=1.0, zorder=1)
            ax.plot([_hours(o.odds.makespan_p50_s)] * 2, [o.odds.cost_p50, o.odds.cost_p99],
                    color="tab:purple", alpha=0.5, linewidth=1.0, zorder=1)
        ax.scatter([_hours(o.odds.makespan_p50_s) for o in with_odds if o.odds is not None],
                   [o.odds.cost_p50 for o in with_odds if o.odds is not None], s=10, marker="x",
                   color="tab:purple", label="odds: P50, to P90 makespan and P99 cost", zorder=2)
    colors = {"cheapest": "tab:green", "+20%": "tab:olive", "fastest-20%": "tab:orange", "fastest": "tab:red"}
    for option in options:
        labels = paper_labels(option)
        if not labels:
            continue
        x, y = _hours(option.makespan_s), option.cost
        ax.scatter([x], [y], s=70, marker="D", color=colors[labels[0]], zorder=4)
        ax.annotate(f"{', '.join(labels)} (#{option.id})", (x, y), textcoords="offset points", xytext=(6, 6),
                    fontsize=8, zorder=5)
    picked = next((o for o in options if o.id == chosen), None) if chosen is not None else None
    if picked is not None:
        ax.scatter([_hours(picked.makespan_s)], [picked.cost], s=260, facecolors="none", edgecolors="black",
                   linewidths=1.5, label=f"chosen (#{picked.id})", zorder=6)
    ax.set_xlabel(f"makespan ({unit})")
    ax.set_ylabel("cost")
    ax.set_title(f"options for {tasks} task(s)" if tasks is not None else "options")
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper right", fontsize=8)
    return fig


def write_options_png(path: str | os.PathLike[str], options: Sequence[Option], chosen: int | None = None,
                      tasks: int | None = None) -> None:
    save_png(options_figure(options, chosen, tasks), path)


def progress_figure(times_s: Sequence[float], done: Sequence[int], failed: Sequence[int], total: int,
                    planned_end_s: float | None = None) -> Any:
    """Tasks finished over time (hours since the start), with the plan's end when there is one."""
    fig = _figure(7.0, 3.5)
    ax = fig.add_subplot()
    div, unit = _unit(max([*times_s, planned_end_s or 0.0, 1.0]))
    hours = [t / div for t in times_s]
    ax.step(hours, done, where="post", label="done", color="tab:blue")
    if any(failed):
        ax.step(hours, failed, where="post", label="failed", color="tab:red")
    ax.axhline(total, color="0.4", linestyle=":", linewidth=1, label=f"bag ({total} tasks)")
    if planned_end_s is not None and math.isfinite(planned_end_s):
        ax.axvline(planned_end_s / div, color="tab:green", linestyle="--", linewidth=1, label="planned end")
    ax.set_xlabel(f"time since start ({unit})")
    ax.set_ylabel("tasks")
    ax.set_title("progress")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    return fig


def spend_figure(times_s: Sequence[float], spent: Sequence[float], budget: float | None,
                 cushion: float = 0.0, planned: float | None = None) -> Any:
    """Money spent over time (every ATU begun), against the budget line."""
    fig = _figure(7.0, 3.5)
    ax = fig.add_subplot()
    div, unit = _unit(max([*times_s, 1.0]))
    ax.step([t / div for t in times_s], spent, where="post", label="spent", color="tab:blue")
    if budget is not None:
        ax.axhline(budget, color="tab:red", linestyle="--", linewidth=1, label="budget")
        if cushion:
            ax.axhline(budget + cushion, color="tab:red", linestyle=":", linewidth=1, label="budget + cushion")
    if planned is not None:
        ax.axhline(planned, color="tab:green", linestyle="-.", linewidth=1, label="planned cost")
    ax.set_xlabel(f"time since start ({unit})")
    ax.set_ylabel("money")
    ax.set_title("spend")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    return fig


def machines_figure(times_s: Sequence[float], per_cluster: Mapping[str, Sequence[int]]) -> Any:
    """Machines held over time, one line per cluster."""
    fig = _figure(7.0, 3.5)
    ax = fig.add_subplot()
    div, unit = _unit(max([*times_s, 1.0]))
    styles = ["-", "--", ":", "-."]  # clusters that hold the same counts stay apart
    for i, (name, counts) in enumerate(per_cluster.items()):
        ax.step([t / div for t in times_s], counts, where="post", label=name, linestyle=styles[i % len(styles)],
                linewidth=1.5 + 0.5 * (i % 2))
    ax.set_xlabel(f"time since start ({unit})")
    ax.set_ylabel("machines")
    ax.set_title("machines per cluster")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if per_cluster:
        ax.legend(loc="upper right", fontsize=8)
    return fig
