"""``make paper``: the BaTS paper's Table 1 and Table 2 next to ours, in ``docs/paper-reproduction.md``.

    .venv/bin/python bench/paper.py [--seeds N] [--scenarios s4-1,s3-4,...] [--out FILE]

How this works (seed 000 "BaTS", §4 "Performance Evaluation"). The paper emulates two clusters of
32 machines each, billed per machine per ATU of 60 minutes; cluster1 costs $3 and runs a bag of
1,000 tasks with runtimes drawn from N(15 min, σ² = 5 min²); five scenarios (§4.1) vary cluster2's
price and speed. Our configs for them are ``deploy/examples/paper/s*-*.toml``; every run here is a
``bats-sim`` run of the real BaTS core in virtual time (``bats.master.sim.driver``), 1,000 tasks,
``--runtimes normal:15m,134s``, one seed per repetition.

- Table 1 (§4.2): for each scenario, the LR-based sampling phase once per seed with ``plan_only``:
  the sampling cost S, and the budget of the cheapest makespan B_min1 (C.M. = S + B_min1) and of
  the fastest one B_fastest (F.M. = S + B_fastest), read from the options BaTS offers. The
  paper's "without LR" columns describe the older BaTS of its reference [3], which this core does
  not implement; they are shown from the paper only.
- Table 2 (§4.3): for S4-1 and S3-4 the four proposed schedules Sched1..Sched4 (the options
  labelled ``cheapest``, ``+20%``, ``fastest-20%`` and ``fastest``), each executed with the
  cushion accepted (the paper's Fig. 6 runs: its S3-4 Sched1 and S4-1 Sched3 ran the raised
  configurations) and declined (Fig. 7 compares both for S4-1 Sched4). The paper's Table 2 lists
  the proposals only; the executed makespans come from the §4.3 text. Seeds give the same
  sampling with or without ``plan_only``, so an option id read from the plan-only run names the
  same option in the run that executes it.
- A small sensitivity check re-runs Table 2's executions with ``[master] prefetch = 0`` (a worker
  holds only the task it runs, even before its first result), against the default "auto".

Every figure of ours is the median over the seeds, with the range [min-max] where it varies.
The notes under each table are generated from the numbers (thresholds: "equal", "within 0.5 %",
"within 5 %", else "ours N % higher/lower"), so they cannot go stale. The document's header
(date, commit, machine, wall time) is the only part that changes between runs of the same code
with the same seeds (tests/bench/test_paper.py checks it).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sections import generated_by

from bats.common.config import Config
from bats.master import core as c
from bats.master.cli.args import load_cluster_config
from bats.master.core.bats import policy as b
from bats.master.core.bats.sampling import PAPER_SAMPLING_MACHINES
from bats.master.core.registry import build_core
from bats.master.sim.driver import Simulator, cluster_speed
from bats.master.sim.runtimes import parse_runtimes

log = logging.getLogger("bats.bench.paper")

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
CONFIG_DIR = REPO / "deploy" / "examples" / "paper"
DEFAULT_OUT = REPO / "docs" / "paper-reproduction.md"
SEED_FILE = "../shared/seeds/000_1c4e72a48af6e929.txt"

TASKS = 1000
RUNTIMES_SPEC = "normal:15m,134s"
TRUE_MEAN_S = 15 * 60.0  # the paper's bag: N(15 min, 5 min^2) on cluster1
TRUE_SD_S = math.sqrt(5.0) * 60.0
HEADER_END = "<!-- end of header: everything below depends only on the code and the seeds -->"
EPS = 1e-6  # money comparisons

# The paper's row order in Table 1 (by profitability).
SCENARIOS = ("s4-1", "s4-3", "s1-1", "s3-4", "s1-4")
TABLE2_SCENARIOS = ("s3-4", "s4-1")  # the paper's order in Table 2
SCHEDULES = (("Sched1", "cheapest"), ("Sched2", "+20%"), ("Sched3", "fastest-20%"), ("Sched4", "fastest"))


def scenario_title(name: str) -> str:
    return "S" + name[1:]


# ---------------------------------------------------------------- the paper's numbers
@dataclass(frozen=True)
class PaperTable1Row:
    profitability: str
    s: int  # with LR: sampling cost
    cm_exec: int  # with LR: C.M. = s + cm_exec
    fm_exec: int  # with LR: F.M. = s + fm_exec
    s_nolr: int  # without LR (BaTS of [3]): sampling, C.M., F.M. (sampling intertwined)
    cm_nolr: int
    fm_nolr: int
    line: int


# Seed 000, Table 1 (lines 1578-1591; columns reconstructed from the flattened PDF text:
# "profitability S C.M. F.M." with LR, then "S C.M. F.M." without LR).
PAPER_TABLE1: dict[str, PaperTable1Row] = {
    "s4-1": PaperTable1Row("0.25", 105, 732, 1920, 450, 1026, 2034, 1585),
    "s4-3": PaperTable1Row("0.75", 105, 696, 960, 450, 846, 1062, 1586),
    "s1-1": PaperTable1Row("1", 42, 732, 768, 180, 756, 810, 1588),
    "s3-4": PaperTable1Row("1.33", 84, 513, 768, 360, 594, 768, 1589),
    "s1-4": PaperTable1Row("4", 42, 171, 384, 180, 258, 384, 1591),
}


@dataclass(frozen=True)
class PaperSchedule:
    budget_text: str  # as printed
    budget: int
    cushion: int | None  # None: the table leaves the cell empty
    machines: tuple[int, int]  # (cluster1, cluster2)
    makespan_atu: int
    line: int


# Seed 000, Table 2 (lines 1682-1702): budget, cushion, machines (cluster1, cluster2), makespan.
PAPER_TABLE2: dict[tuple[str, str], PaperSchedule] = {
    ("s3-4", "Sched1"): PaperSchedule("B_min1 = $513", 513, 11, (0, 29), 2, 1686),
    ("s3-4", "Sched2"): PaperSchedule("⌈1.2·B_min1⌉ = $615", 615, None, (6, 32), 2, 1689),
    ("s3-4", "Sched3"): PaperSchedule("⌈0.8·B_fastest⌉ = $615", 615, None, (6, 32), 2, 1691),
    ("s3-4", "Sched4"): PaperSchedule("B_fastest = $768", 768, None, (32, 32), 2, 1692),
    ("s4-1", "Sched1"): PaperSchedule("B_min1 = $732", 732, None, (4, 0), 61, 1695),
    ("s4-1", "Sched2"): PaperSchedule("⌈1.2·B_min1⌉ = $872", 872, None, (32, 1), 8, 1698),
    ("s4-1", "Sched3"): PaperSchedule("⌈0.8·B_fastest⌉ = $1536", 1536, 97, (32, 19), 5, 1700),
    ("s4-1", "Sched4"): PaperSchedule("B_fastest = $1920", 1920, 9, (32, 32), 4, 1702),
}


@dataclass(frozen=True)
class PaperRun:
    with_cushion_min: int | None  # executed makespan, minutes (None: not run / not reported)
    without_cushion_min: int | None
    lines: str
    remark: str


# Seed 000 §4.3 text (Table 2 itself holds no executed figures): the executed makespans.
PAPER_RUNS: dict[tuple[str, str], PaperRun] = {
    ("s3-4", "Sched1"): PaperRun(118, None, "1676-1703", "ran (0, 29) after the 2 % raise (dN = 14 on (1, 28))"),
    ("s3-4", "Sched2"): PaperRun(108, None, "1707-1710", "the same run as Sched3"),
    ("s3-4", "Sched3"): PaperRun(108, None, "1707-1710", "the same run as Sched2"),
    ("s3-4", "Sched4"): PaperRun(95, None, "1711-1714", "all machines of both clusters"),
    ("s4-1", "Sched1"): PaperRun(None, None, "1659-1660", "not run (\"would run very long\")"),
    ("s4-1", "Sched2"): PaperRun(449, None, "1769-1773", "\"at a cost of 1.2*Bmin=$872\""),
    ("s4-1", "Sched3"): PaperRun(293, None, "1717-1729", "ran (32, 19) at 0.85·B_fastest (dN = 32 on (32, 17))"),
    ("s4-1", "Sched4"): PaperRun(236, 269, "1731-1760",
                                 "dN = 3, cushion $9; without it re-planned to (32, 22) in the first ATU"),
}


# ---------------------------------------------------------------- running the simulator
class _RecordingSimulator(Simulator):
    """The simulator, noting when the options were offered (the end of sampling), the estimates
    they were planned with, the configuration the chosen schedule started, and when the last task
    was handed out."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.offered_at: float | None = None
        self.offer: c.OfferOptions | None = None
        self.started_config: dict[str, int] | None = None
        self.last_dispatch = 0.0

    def _do_dispatch(self, action: Any) -> None:
        self.last_dispatch = self.now
        super()._do_dispatch(action)

    def _do_offer(self, action: c.OfferOptions) -> None:
        self.offered_at, self.offer = self.now, action
        super()._do_offer(action)  # feeds ScheduleChosen at once unless plan_only
        config = getattr(self.core, "config", None)
        if config:
            self.started_config = dict(config)


def load_scenario(scenario: str, prefetch: int | None | str = "config") -> Config:
    """The scenario's config; ``prefetch`` (an int or None for auto) overrides ``[master] prefetch``."""
    config = load_cluster_config(str(CONFIG_DIR / f"{scenario}.toml"), None)
    if prefetch != "config":
        config = dataclasses.replace(config, master=dataclasses.replace(config.master, prefetch=prefetch))
    return config


def run_sim(config: Config, seed: int, choice: b.Choice) -> _RecordingSimulator:
    """One ``bats-sim`` run of the paper's bag, built as :func:`bats.master.sim.driver.simulate` builds it
    (tests/bench/test_paper.py checks the two give the same report)."""
    base = parse_runtimes(RUNTIMES_SPEC).sample(np.random.default_rng(seed), TASKS)
    core = build_core(range(1, TASKS + 1), config, random.Random(seed), choice,
                        boot_timeout_s=config.master.boot_timeout_s, max_held=config.master.worker_capacity,
                        adaptive_prefetch=config.master.prefetch is None)
    sim = _RecordingSimulator(core, config, [0.0, *base.tolist()],
                              fail_rng=random.Random(f"bats-sim failures {seed}"), choice=choice)
    sim.run()
    return sim


@dataclass(frozen=True)
class Plan:
    """The sampling phase of one seed and the options it produced."""

    scenario: str
    seed: int
    sampling_cost: float
    tasks_at_plan: int
    sample_size: int  # n_s
    sampling_s: float
    estimates: dict[str, float]  # cluster -> mean runtime (s) the options were planned with
    true_means: dict[str, float]  # cluster -> the bag's mean runtime there (s)
    options: list[dict[str, Any]]
    prices: dict[str, float]
    maxima: dict[str, int]
    atu_s: float
    initial_workers: int

    def option(self, label: str) -> dict[str, Any]:
        """The option carrying ``label`` (its own label or merged into it, ``also``)."""
        for option in self.options:
            if option["label"] == label or label in option["also"]:
                return option
        raise LookupError(f"{self.scenario} seed {self.seed}: no option labelled {label!r}")

    def fluid_atus(self, option: dict[str, Any]) -> int:
        """The option's configuration in ATUs of seed 000's fluid T_e = N / Σ a_i/T_i (§2.3)."""
        speed = sum(a / self.estimates[name] for name, a in option["machines"].items() if a)
        return math.ceil(self.tasks_at_plan / speed / self.atu_s - 1e-9)

    @property
    def b_min1(self) -> float:
        return float(self.option("cheapest")["budget"])

    @property
    def b_fastest(self) -> float:
        return float(self.option("fastest")["cost"])  # the all-machines configuration's cost

    def b_min1_cluster(self) -> tuple[str, int]:
        """The cluster one machine of which runs the tasks left for the least money, and its ATUs."""
        best = None
        for name, mean in self.estimates.items():
            atus = math.ceil(self.tasks_at_plan * mean / self.atu_s - 1e-9)
            key = (self.prices[name] * atus, mean)
            if best is None or key < best[0]:
                best = (key, name, atus)
        assert best is not None
        return best[1], best[2]


def sample_plan(scenario: str, seed: int, prefetch: int | None | str = "config") -> Plan:
    """Sampling only (``plan_only``): the options BaTS offers for this seed."""
    config = load_scenario(scenario, prefetch)
    sim = run_sim(config, seed, b.Choice(policy="bats", plan_only=True))
    report = sim.report()
    if sim.offer is None or sim.offered_at is None:
        raise RuntimeError(f"{scenario} seed {seed}: sampling produced no options ({report['reason']})")
    mean_base = float(np.mean(sim.runtimes[1:]))
    return Plan(
        scenario=scenario, seed=seed,
        sampling_cost=float(report["cost"]["sampling"]),
        tasks_at_plan=int(report["tasks_at_plan"]),
        sample_size=int(report["sample_size"]),
        sampling_s=sim.offered_at,
        estimates={name: float(mean) for name, (mean, _sd) in sim.offer.estimates.items()},
        true_means={name: mean_base / cluster_speed(cl) for name, cl in config.clusters.items()},
        options=report["options"],
        prices={name: cl.price for name, cl in config.clusters.items()},
        maxima={name: cl.max for name, cl in config.clusters.items()},
        atu_s=max(cl.atu_s for cl in config.clusters.values()),
        initial_workers=config.sampling.initial_workers or PAPER_SAMPLING_MACHINES,  # hourly: the paper's 7
    )


@dataclass(frozen=True)
class Run:
    """One executed schedule."""

    plan: Plan
    schedule: str  # Sched1..Sched4
    cushion_accepted: bool
    prefetch: str  # "auto" (the configs' default) or "0"
    option: dict[str, Any]  # the option as offered
    started: tuple[int, ...]  # the configuration the run started with (machines per cluster)
    status: str
    makespan_s: float  # the whole run, sampling included
    execution_s: float  # from the choice to the end
    tail_s: float  # from the last hand-out of a task to the end
    sampling_cost: float
    execution_cost: float
    budget: float
    cushion: float  # the cushion the run may spend (0 when declined)
    reconfigurations: int
    reason: str  # why the run ended (the report's "reason")
    not_run: int  # tasks left undone

    @property
    def scenario(self) -> str:
        return self.plan.scenario

    @property
    def seed(self) -> int:
        return self.plan.seed

    @property
    def planned_s(self) -> float:
        return float(self.option["makespan_s"])

    @property
    def done(self) -> bool:
        return self.status == "done"

    @property
    def within_budget(self) -> bool:
        return self.execution_cost <= self.budget + self.cushion + EPS


def execute(plan: Plan, schedule: str, label: str, cushion: bool, prefetch: int | None | str = "config") -> Run:
    """Run the option ``label`` of ``plan`` to the end (``prefetch`` as for :func:`sample_plan`)."""
    option = plan.option(label)
    config = load_scenario(plan.scenario, prefetch)
    sim = run_sim(config, plan.seed, b.Choice(policy="bats", schedule=str(option["id"]), cushion=cushion))
    report = sim.report()
    # declining a raised cushion runs a row of its own ("cheapest (no cushion)"), which the report names
    moved = not cushion and report["selected"] is not None and option["rounding"] == "a"
    if report["selected"] is None or (report["selected"]["id"] != option["id"] and not moved) or sim.offered_at is None:
        raise RuntimeError(f"{plan.scenario} seed {plan.seed}: option ids are not stable across runs")
    started = tuple((sim.started_config or {}).get(name, 0) for name in config.clusters)
    return Run(
        plan=plan, schedule=schedule, cushion_accepted=cushion,
        prefetch="auto" if config.master.prefetch is None else str(config.master.prefetch),
        option=option, started=started, status=report["status"], makespan_s=float(report["makespan_s"]),
        execution_s=float(report["makespan_s"]) - sim.offered_at,
        tail_s=float(report["makespan_s"]) - sim.last_dispatch,
        sampling_cost=float(report["cost"]["sampling"]), execution_cost=float(report["cost"]["execution"]),
        budget=float(report["budget"]), cushion=float(report["cushion"]),
        reconfigurations=len(report["reconfigurations"]), reason=str(report["reason"]),
        not_run=int(report["tasks"].get("not_run", 0)),
    )


@dataclass
class Results:
    seeds: list[int]
    scenarios: list[str]
    plans: dict[str, list[Plan]]  # per scenario, one per seed (the configs as shipped)
    runs: list[Run]  # every executed schedule, both prefetch settings

    def runs_of(self, scenario: str, schedule: str, cushion: bool, prefetch: str = "auto") -> list[Run]:
        return [r for r in self.runs if r.scenario == scenario and r.schedule == schedule
                and r.cushion_accepted == cushion and r.prefetch == prefetch]


def collect(scenarios: Sequence[str], seeds: Sequence[int]) -> Results:
    """Every simulation the document needs: the plans of every scenario; for Table 2's scenarios
    every schedule executed with and without the cushion, and again with ``prefetch = 0``
    (cushion accepted)."""
    plans: dict[str, list[Plan]] = {}
    runs: list[Run] = []
    for scenario in scenarios:
        plans[scenario] = [sample_plan(scenario, seed) for seed in seeds]
        log.info("%s: sampled %d seed(s)", scenario, len(seeds))
        if scenario not in TABLE2_SCENARIOS:
            continue
        for plan in plans[scenario]:
            for schedule, label in SCHEDULES:
                for cushion in (True, False):
                    runs.append(execute(plan, schedule, label, cushion))
        for seed in seeds:
            plan0 = sample_plan(scenario, seed, prefetch=0)
            for schedule, label in SCHEDULES:
                runs.append(execute(plan0, schedule, label, True, prefetch=0))
        log.info("%s: executed the %d schedules of every seed", scenario, len(SCHEDULES))
    return Results(list(seeds), list(scenarios), plans, runs)


# ---------------------------------------------------------------- formatting
def money(x: float) -> str:
    if abs(x - round(x)) < 0.005:
        return f"${round(x):,}"
    return f"${x:,.2f}"


def hm(seconds: float) -> str:
    minutes = round(seconds / 60.0)
    return f"{minutes // 60}h{minutes % 60:02d}m"


def median(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


def spread(values: Sequence[float], fmt: Callable[[float], str], unit: str = "") -> str:
    """Median, and [min–max] when the values differ."""
    if not values:
        return "–"
    med, lo, hi = fmt(median(values)), fmt(min(values)), fmt(max(values))
    return f"{med}{unit}" if lo == hi else f"{med} [{lo}–{hi}]{unit}"


def cushion_cell(values: Sequence[float]) -> str:
    """'–' when no seed needs a cushion, else how many do and how much (median [range])."""
    needed = [v for v in values if v > EPS]
    if not needed:
        return "–"
    prefix = "" if len(needed) == len(values) else f"{len(needed)} of {len(values)}: "
    return prefix + spread(needed, money)


def config_text(config: Sequence[int]) -> str:
    return f"({', '.join(map(str, config))})"


def configs_text(configs: Sequence[tuple[int, ...]]) -> str:
    """One configuration, or each with the number of seeds that produced it."""
    counts = Counter(configs)
    if len(counts) == 1:
        return config_text(configs[0])
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{config_text(c)} ×{n}" for c, n in ordered)


def pct(paper: float, ours: float) -> float:
    return (ours - paper) / paper * 100.0


def diff_phrase(paper: float, ours: float) -> str:
    """'equal', 'within 0.5 %', 'within 5 % (+1.6 %)', or 'ours 12 % higher' (see the module docstring)."""
    if abs(ours - paper) < EPS:
        return "equal"
    d = pct(paper, ours)
    if abs(d) < 0.5:
        return f"within 0.5 % ({d:+.1f} %)"
    if abs(d) <= 5.0:
        return f"within 5 % ({d:+.1f} %)"
    return f"ours {abs(d):.0f} % {'higher' if d > 0 else 'lower'}"


def signed(value: float) -> str:
    """A rounded percentage with its sign, never '-0 %'."""
    rounded = round(value)
    return f"{'+' if rounded >= 0 else '-'}{abs(rounded):.0f} %"


def close(paper: float, ours: float, within: float = 5.0) -> bool:
    return abs(pct(paper, ours)) <= within


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def machines_tuple(option: dict[str, Any]) -> tuple[int, ...]:
    return tuple(int(n) for n in option["machines"].values())


# ---------------------------------------------------------------- the document
def header_lines(seeds: Sequence[int], wall_s: float, argv: Sequence[str] | None = None) -> list[str]:
    return generated_by("BaTS paper reproduction: Table 1 and Table 2", "bench/paper.py", "make paper",
                        f"{len(seeds)} seed(s)", wall_s, HEADER_END, argv)


def seeds_text(seeds: Sequence[int]) -> str:
    if len(seeds) > 1 and list(seeds) == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}–{seeds[-1]}"
    return "seed " + ", ".join(map(str, seeds))


def render(res: Results, header: Sequence[str]) -> str:
    """The whole document; everything after ``header`` depends on the results only."""
    has_table2 = any(s in res.plans for s in TABLE2_SCENARIOS)
    out: list[str] = list(header)
    out += [
        "",
        ("What is compared: the cost and schedule figures of the BaTS paper (seed 000, "
        f"`{SEED_FILE}`, §4 \"Performance Evaluation\": Table 1, Table 2 and the runs §4.3 describes) "
        "against the same experiments run through this repository's BaTS core in the simulator "
        "(`bats-sim`, virtual time). The paper ran its prototype once per schedule on emulated clusters "
        "of real machines (DAS-3, machines started through SGE); we run the core that `bats-master` "
        "runs, fed simulated machines, over several seeds."),
        "",
        "## Setup",
        "",
        ("- Two clusters of 32 machines each, billed per machine per ATU of 60 minutes; `cluster1` costs "
        "$3 per ATU. Five scenarios SP-S (§4.1): `cluster2` costs P times as much and runs S times as "
        "fast. Configs: `deploy/examples/paper/s1-1.toml`, `s1-4`, `s4-1`, `s3-4`, `s4-3`."),
        (f"- The bag: {TASKS:,} tasks, runtimes on `cluster1` drawn from N(15 min, σ² = 5 min²) "
        f"(`--runtimes {RUNTIMES_SPEC}`); on `cluster2` divided by its speed."),
        ("- Sampling (§2, Fig. 3): 7 machines per cluster (the paper's ideal iw = 7, seed lines 1247–1249), "
        "7 replicated tasks for the regression, a sample of n_s tasks; then the options are planned "
        "for the tasks left."),
        ("- Simulated machines start at once (no `startup`: the paper gives no figure for its SGE start-up "
        "times); `[master] prefetch` is \"auto\", the default, unless stated: once tasks are known to "
        "take a second or more a worker holds only the task it runs (before its first result it is sent "
        "one more)."),
        (f"- {len(res.seeds)} repetition(s), {seeds_text(res.seeds)}: a seed draws the runtimes and the "
        "core's random choices. Every figure of ours is the **median over the seeds**, with [min–max] "
        "where they differ; configurations list how many seeds produced each (×n). Differences are "
        "\"equal\", \"within 0.5 %\", \"within 5 %\" or \"ours N % higher/lower\" than the paper."),
        ("- Reproduce: `make paper` (`.venv/bin/python bench/paper.py --seeds N --scenarios s3-4,s4-1`); "
        f"one run: `.venv/bin/bats-sim --config deploy/examples/paper/s3-4.toml --tasks {TASKS} "
        f"--runtimes {RUNTIMES_SPEC} --seed 1 --schedule fastest --cushion yes`."),
        "",
    ]
    out += render_summary(res)
    out += render_table1(res)
    if has_table2:
        out += render_table2(res)
        out += render_executions(res)
        out += render_budget_check(res)
        out += render_prefetch(res)
    return "\n".join(out).rstrip() + "\n"


# ---------------------------------------------------------------- summary
def render_summary(res: Results) -> list[str]:
    scenarios = [s for s in SCENARIOS if s in res.plans]
    s_equal = sum(1 for s in scenarios
                  if abs(median(pl.sampling_cost for pl in res.plans[s]) - PAPER_TABLE1[s].s) < EPS)
    fm_equal = sum(1 for s in scenarios
                   if abs(median(pl.b_fastest for pl in res.plans[s]) - PAPER_TABLE1[s].fm_exec) < EPS)
    cm = [pct(PAPER_TABLE1[s].s + PAPER_TABLE1[s].cm_exec,
              median(pl.sampling_cost + pl.b_min1 for pl in res.plans[s])) for s in scenarios]
    out = ["## Summary", "",
           f"- Sampling cost S: equal to the paper's in {s_equal} of {len(scenarios)} scenario(s).",
           f"- Fastest makespan budget (F.M.): equal in {fm_equal} of {len(scenarios)}.",
           "- Cheapest makespan (C.M. = S + B_min1): ours "
           + (f"{min(cm):+.1f} % to {max(cm):+.1f} %" if len(cm) > 1 else f"{cm[0]:+.1f} %")
           + " against the paper (median over seeds)."]
    t2 = [s for s in TABLE2_SCENARIOS if s in res.plans]
    if t2:
        rows = [(s, sched, label) for s in t2 for sched, label in SCHEDULES]
        every = some = 0
        for s, sched, label in rows:
            paper_config = PAPER_TABLE2[(s, sched)].machines
            same = sum(1 for pl in res.plans[s] if machines_tuple(pl.option(label)) == paper_config)
            every += same == len(res.plans[s])
            some += 0 < same < len(res.plans[s])
        out.append(f"- Table 2 configurations: the paper's in every seed for {every} of {len(rows)} schedules, "
                   f"in some seeds for {some}, in none for {len(rows) - every - some}.")
        compared = [(s, sched) for s, sched, _ in rows if PAPER_RUNS[(s, sched)].with_cushion_min is not None]
        diffs = [pct(PAPER_RUNS[k].with_cushion_min * 60.0,  # type: ignore[operator]
                     median(r.execution_s for r in res.runs_of(*k, True) if r.done) if any(
                         r.done for r in res.runs_of(*k, True)) else math.nan) for k in compared]
        within = sum(1 for d in diffs if abs(d) <= 5.0)
        out.append(f"- Executed makespans (the {len(compared)} runs the paper reports, cushion accepted): "
                   f"within 5 % for {within}; ours {signed(min(diffs))} to {signed(max(diffs))}.")
        runs = res.runs
        over = sum(1 for r in runs if not r.within_budget)
        out.append(f"- Budget: {len(runs) - over} of {len(runs)} executed runs spent at most budget + accepted "
                   f"cushion; {sum(1 for r in runs if not r.done)} stopped with tasks left.")
    out.append("")
    return out


# ---------------------------------------------------------------- Table 1
def render_table1(res: Results) -> list[str]:
    scenarios = [s for s in SCENARIOS if s in res.plans]
    out = [
        "## Table 1: sampling cost and budget estimates",
        "",
        ("The paper's Table 1 (seed lines 1578–1591) gives, per scenario, the cost of the LR-based "
        "sampling phase S and the costs of the cheapest makespan (C.M.) and of the fastest makespan "
        "(F.M.), each as S plus the execution budget: C.M. = S + B_min1, F.M. = S + B_fastest (its "
        "Table 2 shows B_min1 = $513 and $732, B_fastest = $768 and $1920 for S3-4 and S4-1). Ours: "
        "S is the run's sampling cost, B_min1 the budget of the option labelled `cheapest`, "
        "B_fastest the cost of the option labelled `fastest` (all machines)."),
        "",
    ]
    rows = []
    for s in scenarios:
        p, plans = PAPER_TABLE1[s], res.plans[s]
        rows.append([
            f"{p.profitability} ({scenario_title(s)})",
            money(p.s), spread([pl.sampling_cost for pl in plans], money),
            f"{money(p.s)} + {money(p.cm_exec)} = {money(p.s + p.cm_exec)}",
            spread([pl.sampling_cost + pl.b_min1 for pl in plans], money),
            f"{money(p.s)} + {money(p.fm_exec)} = {money(p.s + p.fm_exec)}",
            spread([pl.sampling_cost + pl.b_fastest for pl in plans], money),
        ])
    out += table(["profitability (scenario)", "S paper", "S ours", "C.M. paper", "C.M. ours",
                  "F.M. paper", "F.M. ours"], rows)
    out += ["", "What our plans were made of (the paper shows its LR estimates only as the plot of Fig. 5):", ""]
    rows = []
    for s in scenarios:
        plans = res.plans[s]
        names = list(plans[0].estimates)
        est = " / ".join(spread([pl.estimates[c] / 60 for pl in plans], lambda v: f"{v:.2f}") for c in names)
        true = " / ".join(f"{median(pl.true_means[c] / 60 for pl in plans):.2f}" for c in names)
        rows.append([
            scenario_title(s),
            spread([pl.tasks_at_plan for pl in plans], lambda v: f"{v:.0f}"),
            spread([pl.sampling_s for pl in plans], hm),
            est, true,
            spread([pl.b_min1 for pl in plans], money),
            configs_text([machines_tuple(pl.option("cheapest")) for pl in plans]),
            spread([pl.b_fastest for pl in plans], money),
        ])
    out += table(["scenario", "tasks left at plan", "sampling time", "T1 / T2 estimated (min)",
                  "T1 / T2 of the bag (min)", "B_min1", "`cheapest` (c1, c2)", "B_fastest"], rows)
    out += ["", "Per row:", ""]
    for s in scenarios:
        out.append(f"- **{scenario_title(s)}**: " + table1_note(s, res.plans[s]))
    out += ["", ("The paper's \"without LR\" columns describe BaTS of its reference [3], which samples on "
            "every cluster inside the execution phase. This core does not implement it, so they are the "
            "paper's alone; the \"S is\" column checks that each S is a whole number of machines per "
            "cluster for one ATU."), ""]
    rows = []
    for s in scenarios:
        p, pl = PAPER_TABLE1[s], res.plans[s][0]
        per_atu = sum(pl.prices.values())
        rows.append([f"{p.profitability} ({scenario_title(s)})", money(p.s_nolr),
                     f"{p.s_nolr / per_atu:g} per cluster × {money(per_atu)}",
                     money(p.cm_nolr), money(p.fm_nolr),
                     diff_phrase(p.s + p.cm_exec, p.cm_nolr).replace("ours", "without LR"),
                     diff_phrase(p.s + p.fm_exec, p.fm_nolr).replace("ours", "without LR")])
    out += table(["profitability (scenario)", "S", "S is", "C.M.", "F.M.", "C.M. against with LR",
                  "F.M. against with LR"], rows)
    out.append("")
    return out


def table1_note(scenario: str, plans: list[Plan]) -> str:
    p = PAPER_TABLE1[scenario]
    first = plans[0]
    s_ours = median(pl.sampling_cost for pl in plans)
    per_atu = sum(first.prices.values())
    iw = first.initial_workers
    parts = []
    if abs(s_ours - p.s) < EPS and abs(p.s - iw * per_atu) < EPS:
        parts.append(f"S equal: {iw} machines per cluster for one ATU ({iw} × {money(per_atu)}) in both")
    else:
        parts.append(f"S {diff_phrase(p.s, s_ours)} (paper {money(p.s)}, ours {money(s_ours)}; "
                     f"{iw} machines per cluster for one ATU would be {money(iw * per_atu)})")
    # C.M.: B_min1 = one machine of the cluster that runs the tasks left for the least money
    cluster = Counter(pl.b_min1_cluster()[0] for pl in plans).most_common(1)[0][0]
    price = first.prices[cluster]
    ours_atus = median(pl.b_min1_cluster()[1] for pl in plans)
    paper_atus = p.cm_exec / price
    true_mean = median(pl.true_means[cluster] for pl in plans)  # the bag's mean on that cluster
    nominal = TRUE_MEAN_S * first.true_means[cluster] / first.true_means["cluster1"]  # 15 min / speed
    paper_tasks = paper_atus * first.atu_s / nominal
    est_mean = median(pl.estimates[cluster] for pl in plans)
    tasks = median(pl.tasks_at_plan for pl in plans)
    cm_ours = median(pl.sampling_cost + pl.b_min1 for pl in plans)
    est_err = pct(true_mean, est_mean)
    parts.append(
        f"C.M. {diff_phrase(p.s + p.cm_exec, cm_ours)}: B_min1 is one {cluster} machine for all the tasks "
        f"left; ours {ours_atus:.0f} ATUs = {tasks:.0f} tasks × {est_mean / 60:.2f} min estimated "
        f"({est_err:+.1f} % off the bag's {true_mean / 60:.2f} min), the paper's {money(p.cm_exec)} = "
        f"{paper_atus:g} ATUs, ≈ {paper_tasks:.0f} tasks at the nominal {nominal / 60:.2f} min (the paper "
        "prints neither its tasks left nor its estimate); " + b_min1_cause(paper_atus, ours_atus, paper_tasks,
                                                                            tasks, est_err, plans))
    fm_ours = median(pl.sampling_cost + pl.b_fastest for pl in plans)
    all_per_atu = sum(first.prices[c] * first.maxima[c] for c in first.prices)
    paper_fm_atus = p.fm_exec / all_per_atu
    ours_fm_atus = median(pl.b_fastest for pl in plans) / all_per_atu
    if abs(p.fm_exec - median(pl.b_fastest for pl in plans)) < EPS:
        parts.append(f"F.M. {diff_phrase(p.s + p.fm_exec, fm_ours)}: all {sum(first.maxima.values())} "
                     f"machines for {paper_fm_atus:g} ATU(s) in both")
    else:
        parts.append(f"F.M. {diff_phrase(p.s + p.fm_exec, fm_ours)}: all machines for {ours_fm_atus:g} "
                     f"ATU(s) in ours against {paper_fm_atus:g} in the paper (the estimated makespan "
                     "falls on the other side of an ATU edge)")
    dominated = [pl for pl in plans if cheapest_dominated(pl)]
    if dominated:
        pl = dominated[0]
        ch, fa = pl.option("cheapest"), pl.option("fastest")
        parts.append(
            f"in {len(dominated)} of {len(plans)} seed(s) `cheapest` is dominated by `fastest`, slower and "
            f"committing more money (seed {pl.seed}: {config_text(machines_tuple(ch))} for "
            f"{money(ch['budget'])} + {money(ch['cushion'])} cushion against {config_text(machines_tuple(fa))} "
            f"for {money(fa['cost'])} + {money(fa['cushion'])}): raising B_min1 reached all machines "
            "with dN still > 0, and the planner fell back to the first configuration's case (b) cushion")
    return "; ".join(parts) + "."


def committed(option: dict[str, Any]) -> float:
    """The most an option lets the run spend: its budget (or its configuration's cost when that is
    higher, the options of case (b)) plus its cushion."""
    return max(float(option["budget"]), float(option["cost"])) + float(option["cushion"])


def cheapest_dominated(plan: Plan) -> bool:
    ch, fa = plan.option("cheapest"), plan.option("fastest")
    return (ch["id"] != fa["id"] and ch["makespan_s"] > fa["makespan_s"]
            and committed(ch) > float(fa["cost"]) + float(fa["cushion"]))


def b_min1_cause(paper_atus: float, ours_atus: float, paper_tasks: float, tasks: float, est_err: float,
                 plans: Sequence[Plan]) -> str:
    if abs(paper_atus - ours_atus) < 0.5:
        return "the same number of ATUs."
    causes = []
    if abs(tasks - paper_tasks) >= 1:
        causes.append(f"we plan for {abs(tasks - paper_tasks):.0f} {'more' if tasks > paper_tasks else 'fewer'} "
                      "tasks (our sampling phase had finished a different number when it planned)")
    if abs(est_err) >= 0.5:
        n_s = int(median(pl.sample_size for pl in plans))
        se = TRUE_SD_S / TRUE_MEAN_S / math.sqrt(n_s) * 100.0  # the bag's coefficient of variation / sqrt(n_s)
        causes.append(f"our LR estimate of the mean is {abs(est_err):.1f} % {'high' if est_err > 0 else 'low'} "
                      f"(the standard error of a mean of n_s = {n_s} runtimes is {se:.1f} %)")
    direction = "more" if ours_atus > paper_atus else "fewer"
    return (f"ours has {abs(ours_atus - paper_atus):.0f} {direction} ATU(s) because "
            + (" and ".join(causes) if causes else "of rounding within one task"))


# ---------------------------------------------------------------- Table 2
def render_table2(res: Results) -> list[str]:
    scenarios = [s for s in TABLE2_SCENARIOS if s in res.plans]
    out = [
        "## Table 2: the proposed schedules",
        "",
        ("The paper's Table 2 (seed lines 1682–1702) lists, for S3-4 and S4-1, the four schedules its LR "
        "estimation phase proposes (§4.3): Sched1 at B_min1, Sched2 at 1.2·B_min1, Sched3 at "
        "0.8·B_fastest, Sched4 at B_fastest, each with the budget cushion BaTS asks for when dN > 0, "
        "the configuration (cluster1, cluster2) and the estimated makespan in ATUs. Ours: the options "
        "labelled `cheapest`, `+20%`, `fastest-20%` and `fastest` after sampling."),
        "",
    ]
    rows = []
    for s in scenarios:
        for schedule, label in SCHEDULES:
            paper = PAPER_TABLE2[(s, schedule)]
            opts = [pl.option(label) for pl in res.plans[s]]
            rows.append([
                f"{scenario_title(s)} {schedule}",
                paper.budget_text, spread([o["budget"] for o in opts], money),
                money(paper.cushion) if paper.cushion is not None else "–",
                cushion_cell([o["cushion"] for o in opts]),
                config_text(paper.machines),
                configs_text([machines_tuple(o) for o in opts]),
                f"{paper.makespan_atu} ATU",
                spread([o["makespan_atu"] for o in opts], lambda v: f"{v:g}", " ATU"),
            ])
    out += table(["schedule", "budget paper", "budget ours", "cushion paper", "cushion ours", "machines paper",
                  "machines ours", "makespan paper", "makespan ours"], rows)
    out += ["", "Per row:", ""]
    for s in scenarios:
        for schedule, label in SCHEDULES:
            out.append(f"- **{scenario_title(s)} {schedule}**: " + table2_note(s, schedule, label, res))
    out.append("")
    return out


def table2_note(scenario: str, schedule: str, label: str, res: Results) -> str:
    paper = PAPER_TABLE2[(scenario, schedule)]
    plans = res.plans[scenario]
    opts = [pl.option(label) for pl in plans]
    n = len(opts)
    budget = median(o["budget"] for o in opts)
    parts = [f"budget {diff_phrase(paper.budget, budget)}"]
    if schedule == "Sched1":
        parts[-1] += " (B_min1, the C.M. of Table 1)"
    elif schedule == "Sched2":
        b_min1 = PAPER_TABLE2[(scenario, "Sched1")].budget
        rounded = math.ceil(1.2 * b_min1 - 1e-9)
        if rounded != paper.budget:
            parts[-1] += (f"; the paper prints {money(paper.budget)} where ⌈1.2 × {money(b_min1)}⌉ = "
                          f"{money(rounded)}")
        parts[-1] += f"; ours is 1.2 × our B_min1 of {money(median(pl.b_min1 for pl in plans))}"
    else:
        b_fast = PAPER_TABLE2[(scenario, "Sched4")].budget
        exact = (0.8 if schedule == "Sched3" else 1.0) * b_fast
        if abs(budget - exact) < EPS and abs(paper.budget - exact) >= EPS:
            parts[-1] += f": ours keeps the exact {money(exact)}, the paper rounds up to whole dollars"
    same = sum(1 for o in opts if machines_tuple(o) == paper.machines)
    if same == n:
        parts.append(f"configuration {config_text(paper.machines)} in every seed, as in the paper")
    else:
        mode, count = Counter(machines_tuple(o) for o in opts).most_common(1)[0]
        text = (f"the paper's configuration in {same} of {n} seed(s)" if same
                else "the configuration differs from the paper's in every seed")
        text += f" (ours most often {config_text(mode)}, {count} of {n})"
        if not close(paper.budget, budget):
            text += f", as the budget differs by {signed(pct(paper.budget, budget))}"
        elif abs(budget - paper.budget) >= EPS:
            text += (f": with a budget {pct(paper.budget, budget):+.1f} % off and estimates of their own, "
                     "the fastest configuration within it and its ATU rounding change")
        else:
            text += ": the same budget buys a different configuration from different runtime estimates"
        parts.append(text)
    cushions = [o["cushion"] for o in opts]
    needed = [o for o in opts if o["cushion"] > EPS]
    paper_c = paper.cushion or 0
    if not needed and not paper_c:
        parts.append("no cushion in either")
    else:
        cases = Counter(o["rounding"] for o in needed)
        text = f"cushion: paper {money(paper_c) if paper_c else 'none'}, ours in {len(needed)} of {n} seed(s)"
        if needed:
            text += f" (median {money(median(c for c in cushions if c > EPS))}"
            if cases.get("a"):
                text += f"; {cases['a']} raise the budget in 1 % steps until dN ≤ 0, case (a)"
            if cases.get("b"):
                dns = [o["delta_n"] for o in needed if o["rounding"] == "b"]
                text += (f"; {cases['b']} pay one more ATU for each of dN = "
                         f"{spread(dns, lambda v: f'{v:.0f}')} tasks that do not fit, case (b)")
            text += ")"
        if paper_c and (scenario, schedule) == ("s3-4", "Sched1"):
            text += (f"; the paper's {money(paper_c)} is its 2 % raise of {money(paper.budget)}, "
                     f"{money(0.02 * paper.budget)}, rounded up to whole dollars")
        if paper_c and (scenario, schedule) == ("s4-1", "Sched3"):
            text += (f"; the paper's {money(paper_c)} is its raise to 0.85 × $1920 (printed as $1633; "
                     f"exactly {money(0.85 * 1920)}) minus $1536")
        if paper_c and (scenario, schedule) == ("s4-1", "Sched4"):
            text += f"; the paper's {money(paper_c)} is dN = 3 tasks × one more $3 ATU of a cluster1 machine"
        parts.append(text)
    atus = median(o["makespan_atu"] for o in opts)
    fluid = median(pl.fluid_atus(o) for pl, o in zip(plans, opts))
    if abs(atus - paper.makespan_atu) < EPS:
        parts.append(f"estimated makespan {paper.makespan_atu} ATU in both")
    elif abs(fluid - paper.makespan_atu) < EPS:
        parts.append(f"estimated makespan {atus:g} ATU against the paper's {paper.makespan_atu}: ours counts "
                     f"whole tasks (each at its cluster's mean) and the sampling machines' paid time; the "
                     f"paper's fluid T_e = N / Σ a_i/T_i of the same configuration gives {fluid:g} ATU")
    else:
        parts.append(f"estimated makespan {atus:g} ATU against the paper's {paper.makespan_atu} "
                     f"({diff_phrase(paper.makespan_atu, atus)}), following the configuration")
    return "; ".join(parts) + "."


# ---------------------------------------------------------------- executions
def done_runs(runs: Sequence[Run]) -> list[Run]:
    return [r for r in runs if r.done]


def render_executions(res: Results) -> list[str]:
    scenarios = [s for s in TABLE2_SCENARIOS if s in res.plans]
    keys = [(s, sched) for s in scenarios for sched, _ in SCHEDULES]
    out = [
        "## Executing the schedules (the paper's Fig. 6 and Fig. 7)",
        "",
        ("The paper's Table 2 holds only the proposals; §4.3's text gives the makespans of the runs "
        "(one per schedule; its Fig. 6 plots their costs). It executed the cushioned schedules (S3-4 "
        "Sched1 ran (0, 29) after the raise, S4-1 Sched3 ran (32, 19)) and, for S4-1 Sched4, also "
        "without the cushion (Fig. 7). We execute every schedule of every seed both ways. "
        "*Execution* is the time from the choice (the end of sampling) to the last task, which is what "
        "the paper's makespans measure (all of them are below the estimated ATUs, so they leave the "
        "sampling phase out); *total* adds the sampling phase. *Planned* is the chosen option's makespan: "
        "seed 000's T_e = N / Σ a_i/T_i counted in whole tasks, each at its cluster's mean, with the "
        "paid time of the sampling machines the option lets go and the boot of the machines it adds "
        "(`master/core/planning/paid_time.py`); a real run's tasks vary about their mean, and it ends "
        "when the last one held ends (a cluster1 task takes 15 minutes on average). Costs are the execution "
        "phase's (what the budget pays) and the total with sampling. Makespans and costs are over the "
        "runs that finished the bag."),
        "",
        "Cushion accepted (Fig. 6):",
        "",
    ]
    rows = []
    for key in keys:
        paper, ptab = PAPER_RUNS[key], PAPER_TABLE2[key]
        runs = res.runs_of(*key, True)
        ok = done_runs(runs)
        rows.append([
            f"{scenario_title(key[0])} {key[1]}",
            config_text(ptab.machines) if paper.with_cushion_min is not None else "–",
            configs_text([r.started for r in runs]),
            hm(paper.with_cushion_min * 60) if paper.with_cushion_min is not None else "not run",
            spread([r.planned_s for r in ok], hm),
            spread([r.execution_s for r in ok], hm),
            spread([r.makespan_s for r in ok], hm),
            spread([r.execution_cost for r in ok], money),
            spread([r.execution_cost + r.sampling_cost for r in ok], money),
            spread([r.budget + r.cushion for r in runs], money),
            f"{len(ok)}/{len(runs)}",
        ])
    out += table(["schedule", "machines paper", "machines ours (started)", "paper execution", "ours planned",
                  "ours execution", "ours total", "ours cost", "ours cost with sampling", "budget + cushion",
                  "bag done"], rows)
    out += ["", "Cushion declined (Fig. 7 for S4-1 Sched4):", ""]
    rows = []
    for key in keys:
        paper = PAPER_RUNS[key]
        runs = res.runs_of(*key, False)
        ok = done_runs(runs)
        rows.append([
            f"{scenario_title(key[0])} {key[1]}",
            hm(paper.without_cushion_min * 60) if paper.without_cushion_min is not None else "–",
            configs_text([r.started for r in runs]),
            spread([r.execution_s for r in ok], hm),
            spread([r.execution_cost for r in ok], money),
            spread([r.budget for r in runs], money),
            f"{sum(1 for r in runs if r.reconfigurations)}/{len(runs)}",
            f"{len(ok)}/{len(runs)}",
        ])
    out += table(["schedule", "paper execution", "machines ours (started)", "ours execution", "ours cost",
                  "budget", "re-planned", "bag done"], rows)
    out += ["", "Paper sources (seed lines): " + "; ".join(
        f"{scenario_title(s)} {sched} {PAPER_RUNS[(s, sched)].lines}: {PAPER_RUNS[(s, sched)].remark}"
        for s, sched in keys) + ".", "", "Per row:", ""]
    for key in keys:
        out.append(f"- **{scenario_title(key[0])} {key[1]}**: " + execution_note(key, res))
    out.append("")
    return out


def execution_note(key: tuple[str, str], res: Results) -> str:
    paper, ptab = PAPER_RUNS[key], PAPER_TABLE2[key]
    yes, no = res.runs_of(*key, True), res.runs_of(*key, False)
    ok = done_runs(yes)
    parts: list[str] = []
    if not ok:
        return "no cushioned run finished the bag."
    ex = median(r.execution_s for r in ok)
    over_plan = median(pct(r.planned_s, r.execution_s) for r in ok)
    zero = done_runs(res.runs_of(*key, True, prefetch="0"))
    zero_text = (f" (with prefetch 0: {signed(median(pct(r.planned_s, r.execution_s) for r in zero))})"
                 if zero else "")
    if paper.with_cushion_min is None:
        parts.append(f"the paper did not run it; ours took {hm(ex)}, {signed(over_plan)} against its plan")
    else:
        paper_s = paper.with_cushion_min * 60.0
        parts.append(f"execution {diff_phrase(paper_s, ex)} (paper {hm(paper_s)}, ours {hm(ex)})")
        other = [r for r in yes if r.started != ptab.machines]
        if other:
            parts.append(f"{len(other)} of {len(yes)} seed(s) ran another configuration than the paper's "
                         f"{config_text(ptab.machines)} ({configs_text([r.started for r in other])})")
        planned = median(r.planned_s for r in ok)
        plan_text = (f"ours planned {hm(planned)} ({signed(pct(paper_s, planned))} against the paper's run) "
                     f"and ran {signed(over_plan)} over its plan{zero_text}")
        tail = median(r.tail_s for r in ok)
        overrun = median(r.execution_s - r.planned_s for r in ok)
        tail_text = (f": of the {hm(overrun)} by which ours overran T_e, the last {hm(tail)} came after the "
                     "last task had been handed out"
                     + (f" ({hm(median(r.tail_s for r in zero))} with prefetch 0)" if zero else ""))
        if close(paper_s, ex):
            parts.append(f"ours ran {signed(over_plan)} against its own plan{zero_text}")
        elif ex > paper_s and close(paper_s, planned, 10.0):
            parts.append(plan_text + "; so the gap is our overrun of the plan" + tail_text
                         + " (the simulator's zero start-up time works the other way)")
        elif ex > paper_s and planned > paper_s:
            parts.append(plan_text + "; so most of the gap is planned: a slower configuration (or "
                         "estimate) than the paper's from the start")
        elif ex > paper_s:
            parts.append(plan_text + "; so the gap is our overrun of the plan" + tail_text)
        else:
            parts.append(plan_text + "; ours is shorter: the paper's machines started through SGE with "
                         "real start-up times, the simulator's start at once")
    replanned = sum(1 for r in yes if r.reconfigurations)
    if replanned:
        parts.append(f"{replanned} of {len(yes)} cushioned run(s) re-planned during execution")
    if key == ("s4-1", "Sched2"):
        cost = median(r.execution_cost for r in ok)
        parts.append(f"cost: the paper's run \"at a cost of\" $872 (its budget), ours {money(cost)} "
                     f"({diff_phrase(872, cost)})")
    if key == ("s4-1", "Sched4"):
        within = sum(1 for r in ok if r.execution_cost <= r.budget + EPS)
        parts.append(f"the paper's cushioned run stayed within the initial $1920; ours in {within} of "
                     f"{len(ok)} (the others spent part of the cushion)")
    no_ok = done_runs(no)
    if paper.without_cushion_min is not None and no_ok and paper.with_cushion_min:
        ex_no = median(r.execution_s for r in no_ok)
        parts.append(f"without the cushion the paper's run took {hm(paper.without_cushion_min * 60)} "
                     f"({signed(pct(paper.with_cushion_min, paper.without_cushion_min))} over its cushioned "
                     f"run), ours {hm(ex_no)} ({signed(pct(ex, ex_no))}), {sum(1 for r in no if r.reconfigurations)} "
                     f"of {len(no)} re-planned")
    if len(no_ok) < len(no):
        parts.append(f"without the cushion {len(no) - len(no_ok)} of {len(no)} run(s) ran out of money before "
                     "the bag was done (the \"possibly aborted run\" of §4.3)")
    unraised = [r for r in no if r.started != machines_tuple(r.option)]
    if unraised:
        parts.append(f"without the cushion {len(unraised)} of {len(no)} run(s) started the un-raised "
                     f"configuration ({configs_text([r.started for r in unraised])})")
    return "; ".join(parts) + "."


# ---------------------------------------------------------------- checks
def render_budget_check(res: Results) -> list[str]:
    runs = res.runs
    over = [r for r in runs if not r.within_budget]
    out = ["## Budget check", ""]
    if not over:
        use = max(r.execution_cost / (r.budget + r.cushion) for r in runs)
        out.append(f"Every one of the {len(runs)} executed runs (both scenarios, every schedule, seed, cushion "
                   "choice and prefetch setting) spent at most its budget + the accepted cushion on the "
                   f"execution phase (the most any run used: {use * 100:.1f} %).")
    else:
        out.append(f"{len(over)} of {len(runs)} executed runs spent more than budget + accepted cushion:")
        out.append("")
        out += table(["scenario", "schedule", "seed", "cushion", "prefetch", "execution cost",
                      "budget + cushion", "check"],
                     [[scenario_title(r.scenario), r.schedule, str(r.seed), "yes" if r.cushion_accepted else "no",
                       r.prefetch, money(r.execution_cost), money(r.budget + r.cushion), "OVER"] for r in over])
    stopped = [r for r in runs if not r.done]
    if stopped:
        out += ["", f"{len(stopped)} run(s) ended with tasks left, never over the money:", ""]
        rows = []
        for r in stopped:
            cl = r.plan.b_min1_cluster()[0]
            err = pct(r.plan.true_means[cl], r.plan.estimates[cl])
            unraised = r.started != machines_tuple(r.option)
            if unraised and not r.cushion_accepted:
                why = "its configuration has dN > 0 and the cushion covering it was declined"
            elif r.option["delta_n"] <= 0 and err < 0:
                why = (f"a slack of {-r.option['delta_n']} task(s) (dN = {r.option['delta_n']}) and an estimated "
                       f"mean {abs(err):.1f} % below the bag's")
            else:
                why = f"dN = {r.option['delta_n']} planned; the estimate is {err:+.1f} % off the bag's mean"
            rows.append([f"{scenario_title(r.scenario)} {r.schedule}", str(r.seed),
                         "yes" if r.cushion_accepted else "no", r.prefetch, config_text(r.started),
                         str(r.not_run), money(r.execution_cost), money(r.budget + r.cushion), r.reason, why])
        out += table(["schedule", "seed", "cushion", "prefetch", "machines", "tasks not run", "execution cost",
                      "budget + cushion", "the run's reason", "why"], rows)
    out.append("")
    return out


def render_prefetch(res: Results) -> list[str]:
    scenarios = [s for s in TABLE2_SCENARIOS if s in res.plans]
    out = [
        "## Sensitivity: worker prefetch",
        "",
        ("A task queued behind the running one on a slow machine can wait at the end of the bag while a "
        "fast machine idles. `[master] prefetch` \"auto\" therefore sends tasks of a second or more one "
        "at a time; only a worker's first ask, before any runtime is known, gets a second task. "
        "`prefetch = 0` never queues one. The same schedules with `prefetch = 0`, cushion accepted: "
        "what differs comes mostly from the sampling phase (another dispatch order draws another "
        "sample, so the options differ; the columns are over the runs that finished). *Tail*: from the "
        "moment the last task is handed out to the end of the run."),
        "",
    ]
    rows = []
    for s in scenarios:
        for schedule, _ in SCHEDULES:
            auto = done_runs(res.runs_of(s, schedule, True))
            zero = done_runs(res.runs_of(s, schedule, True, prefetch="0"))
            if not auto or not zero:
                continue
            paper = PAPER_RUNS[(s, schedule)].with_cushion_min
            ex_auto, ex_zero = median(r.execution_s for r in auto), median(r.execution_s for r in zero)
            rows.append([f"{scenario_title(s)} {schedule}", hm(paper * 60) if paper else "–",
                         hm(ex_auto), signed(median(pct(r.planned_s, r.execution_s) for r in auto)),
                         hm(median(r.tail_s for r in auto)),
                         hm(ex_zero), signed(median(pct(r.planned_s, r.execution_s) for r in zero)),
                         hm(median(r.tail_s for r in zero)),
                         signed(pct(ex_auto, ex_zero))])
    out += table(["schedule", "paper execution", "ours, prefetch auto", "over plan", "tail",
                  "ours, prefetch 0", "over plan", "tail", "prefetch 0 against auto"], rows)
    out.append("")
    return out


# ---------------------------------------------------------------- command line
def parse_scenarios(text: str) -> list[str]:
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    unknown = [t for t in names if t not in SCENARIOS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown scenario(s) {', '.join(unknown) or '(none)'}; "
                                         f"choose from {', '.join(SCENARIOS)}")
    return [s for s in SCENARIOS if s in names]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/paper.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5, metavar="N", help="repetitions, seeds 1..N (default 5)")
    p.add_argument("--first-seed", type=int, default=1, metavar="S", help="first seed (default 1)")
    p.add_argument("--scenarios", type=parse_scenarios, default=list(SCENARIOS), metavar="LIST",
                   help=f"comma-separated subset of {','.join(SCENARIOS)} (default: all)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="FILE",
                   help="where to write the document (default docs/paper-reproduction.md)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = p.parse_args(argv)
    if args.seeds < 1:
        p.error("--seeds: must be at least 1")
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="[paper %(asctime)s] %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    logging.getLogger("bats.sim").setLevel(logging.WARNING)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    started = time.perf_counter()
    results = collect(args.scenarios, seeds)
    wall = time.perf_counter() - started
    text = render(results, header_lines(seeds, wall, sys.argv[1:] if argv is None else argv))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    over = sum(1 for r in results.runs if not r.within_budget)
    print(f"wrote {args.out} ({len(results.runs)} executed runs, "
          f"{over} over budget, {wall:.1f} s)")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
