"""``make compare``: every policy of this repository on the same bags, in one table, ``docs/policies.md``.

    .venv/bin/python bench/compare.py [--settings s3-4,ndb,...] [--tasks N] [--seed S] [--out FILE]

How this works. Every run is a ``bats-sim`` run (:func:`bats.master.sim.driver.simulate`,
virtual time, the same cores as ``bats-master``) with one fixed seed, so the same code gives the
same table. The settings are

- the five scenarios of seed 000 §4.1 (``deploy/examples/paper/s*.toml``: two clusters of 32
  machines, $3 per hour for ``cluster1``, ``cluster2`` P times the price and S times the speed), with
  the BaTS paper's bag (1,000 tasks, N(15 min, 5 min²) on ``cluster1``);
- seed 003's three workloads (§4.2: NDB normal, LTB Lévy-truncated, MDB multi-modal; 1,000
  tasks) on its 20-100 pool (``mix-20-100.toml``: six EC2 types, on-demand and spot, at most 100
  machines in all).

On each setting the policies are

- BaTS (seed 000): sampling, then each of its four schedules (§4.3: Sched1 = cheapest, Sched2 =
  +20 %, Sched3 = fastest-20 %, Sched4 = fastest), cushion accepted; budget respected = the
  execution cost (sampling is paid before the choice) within budget + cushion, as seed 000 counts it;
- three more options of the exact Pareto set BaTS offered (``planner.spread`` over the front
  without the four schedules), executed by BaTS under their own budgets;
- the deadline ILP (seed 004, ``--deadline``) at each makespan BaTS's schedules achieved;
  respected = done by the deadline;
- the adaptive heuristic (seed 001, ``--policy adaptive``), conservative (0.5/0.5) and aggressive
  (0.75/0.75);
- self-scheduling on every machine (``--policy self``, budget-oblivious) and a naive fixed pool
  (half of every cluster's ``max``, rounded up, self-scheduled);
- offer composition (seed 002, ``--policy offers``): every cluster a pool without background load
  that makes offers (EDF, master/core/offers/generate.py), ``task_runtime`` the bag's mean runtime on a
  machine of speed 1 (each pool divides it by its speed), the deadline BaTS's Sched4 makespan.

Policies without a budget show "–" under "budget respected". The reading under each table is
generated from the numbers. The header (date, commit, machine, wall time) is the only part that
changes between runs of the same code (tests/bench/test_compare.py checks it).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sections import generated_by

from bats.common.config import Config
from bats.master.cli.args import load_cluster_config
from bats.master.core.bats.settings import Choice
from bats.master.core.offers.policy import offers_config
from bats.master.core.planning.planner import Option, spread
from bats.master.sim.driver import simulate
from bats.master.sim.runtimes import parse_runtimes

log = logging.getLogger("bats.bench.compare")

REPO = Path(__file__).resolve().parent.parent
PAPER_DIR = REPO / "deploy" / "examples" / "paper"
DEFAULT_OUT = REPO / "docs" / "policies.md"
HEADER_END = "<!-- end of header: everything below depends only on the code and the seed -->"
TASKS = 1000
EPS = 1e-6
SCHEDULES = (("Sched1", "cheapest"), ("Sched2", "+20%"), ("Sched3", "fastest-20%"), ("Sched4", "fastest"))
PARETO_EXTRA = 3  # Pareto options beyond the four schedules


@dataclass(frozen=True)
class Setting:
    key: str
    title: str
    config: str  # file under deploy/examples/paper
    runtimes: str  # bats-sim --runtimes
    source: str  # where the setting comes from


SETTINGS: tuple[Setting, ...] = (
    Setting("s4-1", "S4-1", "s4-1.toml", "normal:15m,134s", "seed 000 §4.1, profitability 0.25"),
    Setting("s4-3", "S4-3", "s4-3.toml", "normal:15m,134s", "seed 000 §4.1, profitability 0.75"),
    Setting("s1-1", "S1-1", "s1-1.toml", "normal:15m,134s", "seed 000 §4.1, profitability 1"),
    Setting("s3-4", "S3-4", "s3-4.toml", "normal:15m,134s", "seed 000 §4.1, profitability 1.33"),
    Setting("s1-4", "S1-4", "s1-4.toml", "normal:15m,134s", "seed 000 §4.1, profitability 4"),
    Setting("ndb", "NDB on 20-100", "mix-20-100.toml", "normal:15m,134s", "seed 003 §4.2, normal"),
    Setting("ltb", "LTB on 20-100", "mix-20-100.toml", "levy:12m,45m", "seed 003 §4.2, Lévy-truncated"),
    Setting("mdb", "MDB on 20-100", "mix-20-100.toml", "mdb", "seed 003 §4.2, multi-modal"),
)
BY_KEY = {s.key: s for s in SETTINGS}


@dataclass(frozen=True)
class Row:
    """One executed run of one policy on one setting."""

    setting: str
    policy: str  # the family: BaTS, Pareto, Deadline ILP, Adaptive, Self, Fixed pool, Offers
    label: str  # what the table prints
    status: str
    makespan_s: float
    cost: float
    limit: str  # "$B + $c", "deadline 2h05m" or "–"
    respected: bool | None  # None: no budget or deadline to respect
    done: int
    total: int
    machines: int  # machines the run ever had
    reason: str = ""  # why the run ended (the report's reason)


def _run(config: Config, setting: Setting, tasks: int, seed: int, choice: Choice) -> dict[str, Any]:
    sim = simulate(config, tasks, parse_runtimes(setting.runtimes), seed, choice=choice)
    return sim.report()


def _row(setting: Setting, policy: str, label: str, report: dict[str, Any], limit: str,
         respected: bool | None) -> Row:
    return Row(setting.key, policy, label, str(report["status"]), float(report["makespan_s"]),
               float(report["cost"]["total"]), limit, respected, int(report["tasks"]["done"]),
               int(report["tasks"]["total"]), len(report["machines"]), str(report.get("reason", "")))


def _bats_row(setting: Setting, label: str, report: dict[str, Any], policy: str = "BaTS") -> Row:
    budget, cushion = float(report["budget"]), float(report["cushion"] if report["cushion_accepted"] else 0.0)
    limit = money(budget) + (f" + {money(cushion)}" if cushion > EPS else "")
    ok = float(report["cost"]["execution"]) <= budget + cushion + EPS
    return _row(setting, policy, label, report, limit, ok)


def _option(report: dict[str, Any], label: str) -> dict[str, Any]:
    for option in report["options"]:
        if option["label"] == label or label in option["also"]:
            return option
    raise LookupError(f"no option labelled {label!r}")


def pareto_extra(options: Sequence[dict[str, Any]], k: int = PARETO_EXTRA) -> list[dict[str, Any]]:
    """``k`` well-spread Pareto options other than the four schedules (``planner.spread``)."""
    named = {label for _s, label in SCHEDULES}
    front = [o for o in options if o["pareto"] and o["label"] not in named and not named & set(o["also"])]
    as_options = [Option(o["id"], "pareto", o["machines"], o["makespan_s"], o["makespan_atu"], o["cost"],
                         o["cushion"], o["budget"], o["delta_n"], o["rounding"], True) for o in front]
    chosen = {o.id for o in spread(as_options, k)}
    return [o for o in front if o["id"] in chosen]


def fixed_pool(config: Config) -> Config:
    """The naive fixed pool: half of every cluster's ``max``, rounded up."""
    clusters = {name: dataclasses.replace(cl, max=math.ceil(cl.max / 2)) for name, cl in config.clusters.items()}
    return dataclasses.replace(config, clusters=clusters)


def adaptive_config(config: Config, ratio: float) -> Config:
    a = dataclasses.replace(config.policy.adaptive, creation_ratio=ratio, increase_ratio=ratio)
    return dataclasses.replace(config, policy=dataclasses.replace(config.policy, adaptive=a))


def offers_rows(setting: Setting, config: Config, tasks: int, seed: int, deadline_s: float,
                base_mean_s: float) -> list[Row]:
    """Seed 002's offer composition (``--policy offers``), pools without background load."""
    cfg = offers_config(config, task_runtime_s=base_mean_s)
    report = _run(cfg, setting, tasks, seed, Choice(policy="offers", deadline=deadline_s))
    composite = report.get("offers", {}).get("composite") or {}
    met = report.get("offers", {}).get("met")
    label = f"Offers, {composite.get('policy', 'no composite')}, deadline = Sched4's makespan"
    return [_row(setting, "Offers", label, report, f"deadline {hm(deadline_s)}", met)]


def run_setting(setting: Setting, tasks: int, seed: int) -> list[Row]:
    config = load_cluster_config(str(PAPER_DIR / setting.config), None)
    rows: list[Row] = []
    plan = _run(config, setting, tasks, seed, Choice(policy="bats", plan_only=True))
    bats_makespans: list[tuple[str, float, float]] = []  # (schedule, makespan, cost)
    for sched, label in SCHEDULES:
        try:
            option = _option(plan, label)
        except LookupError:  # e.g. S1-1 offers no fastest-20% option
            rows.append(Row(setting.key, "BaTS", f"BaTS {sched} ({label})", "not offered", 0.0, 0.0, "–", None,
                            0, tasks, 0))
            continue
        report = _run(config, setting, tasks, seed, Choice(policy="bats", schedule=str(option["id"]), cushion=True))
        rows.append(_bats_row(setting, f"BaTS {sched} ({label})", report))
        if report["status"] == "done":
            bats_makespans.append((sched, float(report["makespan_s"]), float(report["cost"]["total"])))
    for option in pareto_extra(plan["options"]):
        report = _run(config, setting, tasks, seed, Choice(policy="bats", schedule=str(option["id"]), cushion=True))
        machines = ", ".join(f"{n}" for n in option["machines"].values())
        rows.append(_bats_row(setting, f"Pareto option {option['id']} ({machines})", report, policy="Pareto"))
    seen: set[int] = set()
    for sched, makespan, _cost in bats_makespans:
        deadline = float(math.ceil(makespan))
        if int(deadline) in seen:
            continue
        seen.add(int(deadline))
        report = _run(config, setting, tasks, seed, Choice(policy="deadline", deadline=deadline))
        met = (report.get("deadline") or {}).get("met")
        rows.append(_row(setting, "Deadline ILP", f"Deadline ILP at {sched}'s makespan", report,
                         f"deadline {hm(deadline)}", bool(met)))
    for name, ratio in (("conservative", 0.5), ("aggressive", 0.75)):
        report = _run(adaptive_config(config, ratio), setting, tasks, seed, Choice(policy="adaptive"))
        rows.append(_row(setting, "Adaptive", f"Adaptive, {name} ({ratio}/{ratio})", report, "–", None))
    report = _run(config, setting, tasks, seed, Choice(policy="self"))
    rows.append(_row(setting, "Self", "Self-scheduling, every machine", report, "–", None))
    report = _run(fixed_pool(config), setting, tasks, seed, Choice(policy="self"))
    rows.append(_row(setting, "Fixed pool", "Fixed pool, half of each cluster", report, "–", None))
    fastest = [m for s, m, _c in bats_makespans if s == "Sched4"]
    if fastest:
        import numpy as np

        base = parse_runtimes(setting.runtimes).sample(np.random.default_rng(seed), tasks)
        rows.extend(offers_rows(setting, config, tasks, seed, float(math.ceil(fastest[0])), float(base.mean())))
    return rows


# ---------------------------------------------------------------- formatting
def money(x: float) -> str:
    if abs(x - round(x)) < 0.005 and abs(x) >= 10:
        return f"${round(x):,}"
    return f"${x:,.2f}" if abs(x) >= 0.995 else f"${x:.3f}"


def hm(seconds: float) -> str:
    minutes = round(seconds / 60.0)
    return f"{minutes // 60}h{minutes % 60:02d}m"


def yes_no(value: bool | None) -> str:
    return "–" if value is None else ("yes" if value else "**NO**")


def header_lines(seed: int, wall_s: float, argv: Sequence[str] | None = None) -> list[str]:
    return generated_by("The policies compared", "bench/compare.py", "make compare", f"seed {seed}", wall_s,
                        HEADER_END, argv)


def render(rows: Sequence[Row], settings: Sequence[Setting], tasks: int, seed: int, header: Sequence[str]) -> str:
    out = list(header)
    out += [
        "",
        ("Every policy of this repository on the same bags, in the simulator (`bats-sim`, virtual time, "
         f"the cores `bats-master` runs), one seed ({seed}), {tasks:,} tasks per bag. Makespan and cost "
         "are the whole run's (BaTS's and the deadline ILP's sampling included). \"Budget respected\" is "
         "BaTS's guarantee: the execution cost within the option's budget plus its cushion; for the "
         "deadline policies it is the deadline met; \"–\" where a policy has neither. Reproduce: "
         "`make compare` (`.venv/bin/python bench/compare.py`)."),
        "",
    ]
    for setting in settings:
        mine = [r for r in rows if r.setting == setting.key]
        out += [f"## {setting.title}", "",
                (f"{setting.source}; config `deploy/examples/paper/{setting.config}`, "
                 f"`--runtimes {setting.runtimes}`."), ""]
        out += ["| policy | makespan | cost | budget or deadline | respected | tasks done | machines used |",
                "|---|---|---|---|---|---|---|"]
        for r in mine:
            if r.status == "not offered":
                out.append(f"| {r.label} | not offered | | | | | |")
                continue
            out.append(f"| {r.label} | {hm(r.makespan_s)} | {money(r.cost)} | {r.limit} | {yes_no(r.respected)} "
                       f"| {r.done:,} of {r.total:,} | {r.machines} |")
        out += [""] + [f"- {s}" for s in reading(mine)] + [""]
    out += ["## Over all settings", ""] + [f"- {s}" for s in overall(rows)] + [""]
    return "\n".join(out).rstrip() + "\n"


def _pct(a: float, b: float) -> str:
    """a relative to b, as a phrase."""
    if abs(a - b) <= EPS * max(1.0, abs(b)):
        return "the same as"
    if b <= 0:
        return "more than"
    ratio = a / b
    if ratio >= 2:
        return f"{ratio:.1f}× as much as" if ratio < 10 else f"{ratio:.0f}× as much as"
    return f"{abs(ratio - 1) * 100:.0f} % {'more' if ratio > 1 else 'less'} than"


def _faster(a: float, b: float) -> str:
    if abs(a - b) < 30:
        return "as fast as"
    ratio = a / b
    if ratio >= 2:
        return f"{ratio:.1f}× as long as"
    return f"{abs(ratio - 1) * 100:.0f} % {'slower' if ratio > 1 else 'faster'} than"


def reading(rows: Sequence[Row]) -> list[str]:
    """Sentences about one setting, from its rows only."""
    out: list[str] = []
    done = [r for r in rows if r.status == "done"]
    absent = [r for r in rows if r.status == "not offered"]
    undone = [r for r in rows if r.status not in ("done", "not offered")]
    if done:
        cheapest = min(done, key=lambda r: (r.cost, r.makespan_s))
        fastest = min(done, key=lambda r: (r.makespan_s, r.cost))
        out.append(f"Cheapest complete run: {cheapest.label}, {money(cheapest.cost)} in {hm(cheapest.makespan_s)}; "
                   f"fastest: {fastest.label}, {hm(fastest.makespan_s)} for {money(fastest.cost)}.")
    if absent:
        out.append("BaTS offered no option for " + ", ".join(r.label.removeprefix("BaTS ") for r in absent)
                   + " (no option carries that label, so it was not run).")
    if undone:
        out.append("Not complete: " + "; ".join(f"{r.label} ({r.done:,} of {r.total:,} tasks, {r.status}: {r.reason})"
                                                  for r in undone) + ".")
    broken = [r for r in rows if r.respected is False]
    budgeted = [r for r in rows if r.respected is not None and r.policy in ("BaTS", "Pareto")]
    if budgeted:
        out.append(f"{sum(1 for r in budgeted if r.respected)} of {len(budgeted)} BaTS runs (schedules and "
                   "Pareto options) kept within budget plus cushion.")
    deadlines = [r for r in rows if r.policy in ("Deadline ILP", "Offers")]
    if deadlines:
        met = sum(1 for r in deadlines if r.respected)
        out.append(f"{met} of {len(deadlines)} deadline runs met their deadline.")
    if broken:
        out.append("Missed: " + "; ".join(f"{r.label} (limit {r.limit}, makespan {hm(r.makespan_s)}, cost "
                                          f"{money(r.cost)})" for r in broken) + ".")
    bats = {r.label.split()[1]: r for r in rows if r.policy == "BaTS"}
    for r in rows:
        if r.policy != "Deadline ILP" or r.status != "done":
            continue
        sched = r.label.split()[3].removesuffix("'s")
        ref = bats.get(sched)
        if ref is not None:
            out.append(f"{r.label}: {money(r.cost)}, {_pct(r.cost, ref.cost)} BaTS {sched}'s {money(ref.cost)}.")
    top = bats.get("Sched4")
    for r in rows:
        if r.policy == "Offers" and r.status == "done" and top is not None and top.status == "done":
            out.append(f"{r.label}: {money(r.cost)}, {_pct(r.cost, top.cost)} BaTS Sched4's {money(top.cost)}, "
                       f"{_faster(r.makespan_s, top.makespan_s)} it (offers ignore prices and "
                       "need no sampling phase).")
    base = bats.get("Sched1")
    for r in rows:
        if r.policy in ("Adaptive", "Self", "Fixed pool") and r.status == "done" and base is not None \
                and base.status == "done":
            out.append(f"{r.label}: {money(r.cost)}, {_pct(r.cost, base.cost)} BaTS Sched1; "
                       f"{_faster(r.makespan_s, base.makespan_s)} it.")
    return out


def overall(rows: Sequence[Row]) -> list[str]:
    out: list[str] = []
    families = list(dict.fromkeys(r.policy for r in rows))
    for family in families:
        mine = [r for r in rows if r.policy == family]
        mine = [r for r in mine if r.status != "not offered"]
        complete = sum(1 for r in mine if r.status == "done")
        limited = [r for r in mine if r.respected is not None]
        text = f"{family}: {len(mine)} run(s), {complete} complete"
        if limited:
            text += f", {sum(1 for r in limited if r.respected)} of {len(limited)} within their limit"
        out.append(text + ".")
    over = [r for r in rows if r.policy in ("BaTS", "Pareto") and r.respected is False]
    out.append("BaTS's guarantee held on every setting." if not over else
               f"BaTS's guarantee failed {len(over)} time(s): " + "; ".join(f"{r.setting} {r.label}" for r in over) + ".")
    return out


def parse_settings(text: str) -> list[Setting]:
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    unknown = [t for t in names if t not in BY_KEY]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown setting(s) {', '.join(unknown) or '(none)'}; "
                                         f"choose from {', '.join(BY_KEY)}")
    return [s for s in SETTINGS if s.key in names]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/compare.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--settings", type=parse_settings, default=list(SETTINGS), metavar="LIST",
                   help=f"comma-separated subset of {','.join(BY_KEY)} (default: all)")
    p.add_argument("--tasks", type=int, default=TASKS, metavar="N", help=f"tasks per bag (default {TASKS})")
    p.add_argument("--seed", type=int, default=1, metavar="S", help="the seed of every run (default 1)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="FILE",
                   help="where to write the document (default docs/policies.md)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = p.parse_args(argv)
    if args.tasks < 1:
        p.error("--tasks: must be at least 1")
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="[compare %(asctime)s] %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    for name in ("bats.sim", "bats.master"):
        logging.getLogger(name).setLevel(logging.ERROR)
    started = time.perf_counter()
    rows: list[Row] = []
    for setting in args.settings:
        rows.extend(run_setting(setting, args.tasks, args.seed))
        log.info("%s: %d runs", setting.title, sum(1 for r in rows if r.setting == setting.key))
    wall = time.perf_counter() - started
    header = header_lines(args.seed, wall, sys.argv[1:] if argv is None else argv)
    text = render(rows, args.settings, args.tasks, args.seed, header)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=args.out.parent, delete=False) as tmp:
        tmp.write(text)
    os.replace(tmp.name, args.out)
    over = [r for r in rows if r.policy in ("BaTS", "Pareto") and r.respected is False]
    print(f"wrote {args.out} ({len(rows)} runs, {len(over)} BaTS run(s) over budget, {wall:.1f} s)")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
