"""The options table the operator chooses from (seed 000 §4.3): plain text, one row per option.

    id  schedule     cluster1  cluster2       makespan    cost  budget  cushion
     1  pareto *            0        30  2 ATU (1h59m)  540.00  540.00   270.00
     2  cheapest *          1        30  2 ATU (1h58m)  546.00  540.00   279.00
        profitability    1.00      1.33
    cheapest (option 2) is seed 000's B_min1 schedule: ...

A ``*`` marks an option no other row is as fast as for less (its figures as shown: the makespan
and cost counted with the machines up, and the odds when the options carry them); a schedule that
several of the paper's labels produced shows them all ("fastest-20%, +20%"), and a row labelled
"cheapest (no cushion)" is what the cheapest option runs when its cushion is declined. ``cost`` is what the configuration
is estimated to cost, ``budget`` what its execution is held to (a schedule's budget, which may be
below its cost when its budget was raised for the rounding problem; a Pareto point's is its cost),
``cushion`` what it may spend beyond the budget when the operator accepts it (at least the P99
cost above the budget, never less than the rounding problem's and the estimate's error's). When the options state their odds
(:mod:`bats.master.core.planning.odds`), two more columns give the makespan's P50/P90 and the
cost's P50/P99 over the replays of each plan ("-" for an option without them). When some option
costs less than the one labelled ``cheapest`` (the paper's B_min1 schedule is the fastest
configuration within that budget, and its refinement may pick a dearer configuration), a note
under the table says so. The last row is each cluster's profitability as seed 000 §4.1 defines it
(:func:`profitability`). Pure formatting, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bats.common.durations import format_duration

from ..core import Core
from ..core.planning.planner import Option


def option_label(option: Option) -> str:
    labels = [option.label, *option.also]
    text = ", ".join(labels)
    return text + (" *" if option.pareto else "")


def profitability(estimates: Mapping[str, tuple[float, float]],
                  prices: Mapping[str, float], slots: Mapping[str, int] | None = None) -> dict[str, float] | None:
    """Seed 000 §4.1: the profitability of cluster i relative to the cheapest cluster m is its speed
    gain over its cost gain, ``(T_m / T_i) * (c_m / c_i)``, with T the mean task runtime and c the
    price. ``prices`` are per second (price per ATU over the ATU's length), so clusters with
    different ATUs compare fairly; the paper's clusters share one ATU, where it is the same thing.
    None when no cluster has both an estimate and a price above zero (free machines have none).
    A machine with k ``slots`` runs k tasks at once: its T is the mean over k."""
    slots = slots or {}
    known = {name: (mean / slots.get(name, 1), prices[name]) for name, (mean, _sd) in estimates.items()
             if name in prices and prices[name] > 0 and mean > 0}
    if not known:
        return None
    base_mean, base_price = min(known.values(), key=lambda mc: mc[1])  # the cheapest: m
    return {name: (base_mean / mean) * (base_price / price) for name, (mean, price) in known.items()}


def format_options(options: Sequence[Option], estimates: Mapping[str, tuple[float, float]] | None = None,
                   tasks: int | None = None, hidden: int = 0,
                   profit: Mapping[str, float] | None = None, slots: Mapping[str, int] | None = None) -> str:
    """The table, preceded by the estimates it was planned from when given; ``hidden`` options
    left out of it (see :func:`bats.master.core.planning.planner.spread`) are counted under it; ``profit`` (from
    :func:`profitability`) adds the clusters' profitability as the last row; a cluster whose machines
    run several tasks at once (``slots``) is headed ``NAME xK``."""
    lines: list[str] = []
    if estimates:
        parts = [f"{name} {format_duration(mean)} (sd {format_duration(sd)})" for name, (mean, sd) in estimates.items()]
        lines.append(f"estimated mean task runtime: {'; '.join(parts)}")
    if tasks is not None:
        lines.append(f"options for the {tasks} task(s) left (* = Pareto-optimal):")
    if not options:
        return "\n".join(lines + ["  (no options)"])
    clusters = list(options[0].machines)
    slots = slots or {}
    with_odds = any(o.odds is not None for o in options)
    headers = ["id", "schedule", *(f"{n} x{slots[n]}" if slots.get(n, 1) > 1 else n for n in clusters),
               "makespan", "cost", "budget", "cushion", *(["makespan P50/P90", "cost P50/P99"] if with_odds else [])]
    rows = []
    places = money_places([o.cost for o in options] + [o.budget for o in options]
                          + [o.cushion for o in options if o.cushion])
    for o in options:
        odds = []
        if with_odds:
            odds = (["-", "-"] if o.odds is None else
                    [f"{format_duration(o.odds.makespan_p50_s)}/{format_duration(o.odds.makespan_p90_s)}",
                     f"{_money(o.odds.cost_p50, places)}/{_money(o.odds.cost_p99, places)}"])
        rows.append([
            str(o.id), option_label(o), *(str(o.machines.get(name, 0)) for name in clusters),
            f"{o.makespan_atu} ATU ({format_duration(o.makespan_s)})",
            _money(o.cost, places), _money(o.budget, places), _money(o.cushion, places) if o.cushion else "-", *odds,
        ])
    footer = (["", "profitability", *(f"{profit[name]:.2f}" if name in profit else "-" for name in clusters),
               "", "", "", "", *(["", ""] if with_odds else [])] if profit else None)
    widths = [max(len(h), *(len(r[i]) for r in [*rows, *([footer] if footer else [])]))
              for i, h in enumerate(headers)]
    left = {1}  # the schedule label is left-aligned, numbers right-aligned

    def render(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(w) if i in left else cell.rjust(w)
                         for i, (cell, w) in enumerate(zip(cells, widths))).rstrip()

    lines.append(render(headers))
    lines.extend(render(r) for r in rows)
    if footer:
        lines.append(render(footer))
    note = cheapest_note(options, places)
    if note:
        lines.append(note)
    raised = [o for o in options if o.rounding == "a" and o.budget < o.cost - 1e-9]
    if raised:
        ids = ", ".join(str(o.id) for o in raised)
        lines.append(f"note: option(s) {ids} cost more than their budget: the budget was raised to fit the last "
                     "tasks (seed 000's rounding, case a), and the row's machines run only with the cushion "
                     "(--cushion yes); without it the run takes the row labelled '... (no cushion)'")
    if hidden:
        lines.append(f"({hidden} more Pareto-optimal option(s) between these; --all-options shows them, "
                     "any id works with --schedule)")
    return "\n".join(lines)


def cheapest_note(options: Sequence[Option], places: int = 2) -> str | None:
    """One line under the table when options cost less than the one labelled ``cheapest``: what
    that label means (seed 000's B_min1 schedule), so the table does not mislead. None otherwise."""
    labelled = [o for o in options if o.label == "cheapest" or "cheapest" in o.also]
    if not labelled:
        return None
    cheapest = labelled[0]
    below = [o.id for o in options if o.cost < cheapest.cost - 1e-9]
    if not below:
        return None
    ids = ", ".join(map(str, below[:5])) + (f" and {len(below) - 5} more" if len(below) > 5 else "")
    return (f"note: 'cheapest' (option {cheapest.id}) is seed 000's B_min1 schedule, the fastest configuration "
            f"within the least budget ({_money(cheapest.budget, places)}: the bag on one machine of its cheapest "
            f"type), refined so its last tasks fit; option(s) {ids} cost less (--schedule takes any id)")


def money_places(amounts: Sequence[float], least: int = 2, most: int = 6) -> int:
    """The fewest decimal places (from ``least``, at most ``most``) at which amounts that differ
    print differently, so two options never show the same cost (0.347 and 0.354 are not both 0.35)."""
    distinct = {round(a, most) for a in amounts}
    for places in range(least, most + 1):
        if len({f"{a:.{places}f}" for a in distinct}) == len(distinct):
            return places
    return most


def _money(amount: float, places: int = 2) -> str:
    return f"{amount:,.{places}f}" if amount >= 0.01 or amount == 0 else f"{amount:.6f}"


def core_profitability(core: Core) -> dict[str, float] | None:
    """:func:`profitability` at a BaTS core's current prices and the estimates its options used."""
    prices = {name: core.prices[name] / cl.atu_s for name, cl in core.clusters.items()}
    return profitability(dict(core.view().plan_estimates), prices, core.cluster_slots)

