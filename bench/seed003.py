"""Seed 003's experiments, shared by ``make paper`` (bench/paper_pareto.py) and ``make bench``
(bench/run.py, section 7): the two pool mixes, the three workloads, the paper's figures, and the
measurements (exact front, GA front, re-planning after a spot price change).

Seed 003 (Vintila, Oprescu, Kielmann, "Fast (re-)configuration of mixed on-demand and spot
instance pools", §4): six EC2 types (t1.micro, m1.small, m1.medium, on-demand and spot; §4.1),
pools 20-100 and 40-60-100, bags of 1,000 tasks drawn from NDB, LTB and MDB (§4.2), the GA with a
population of 2,000 (§4.4) against an exhaustive search (§4.3), Tables 2-5 (§4.5).

The planner sees each type with T_i = the bag's mean runtime / the type's speed: a bag is known
in full here (no sampling), so the fronts are those of the bag's true means, as in the paper's
offline comparison.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bats import provisioners
from bats.common.config import Config, load_config
from bats.master import core as c
from bats.master.core.bats.settings import Choice
from bats.master.core.planning.ga import GAParams, front_gap, ga_front, hypervolume, reference_point
from bats.master.core.planning.planner import ClusterPlan, Estimate, Planner
from bats.master.sim.driver import Simulator, cluster_speed, simulate
from bats.master.sim.runtimes import parse_runtimes

REPO = Path(__file__).resolve().parent.parent
PAPER_DIR = REPO / "deploy" / "examples" / "paper"
MIXES = ("20-100", "40-60-100")  # §4.1
WORKLOADS = {"NDB": "normal:15m,134s", "MDB": "mdb", "LTB": "levy:12m,45m"}  # §4.2, in Table 2's order
TASKS = 1_000  # §4.2: "Each workload contains 1000 tasks"
BAGS = 10  # §4.5: "ten different bag instances of each workload type"
POPULATION = 2_000  # §4.4, "2k" in Tables 2-5


@dataclass(frozen=True)
class PaperRow:
    """One row of Tables 2-5: average, min, max."""

    avg: float
    min: float
    max: float


# Tables 2 and 3 (front sizes) and 4 and 5 (seconds), exhaustive search then GA (2k), seed lines 350-386.
PAPER_SIZES: dict[str, dict[str, tuple[PaperRow, PaperRow]]] = {
    "20-100": {"NDB": (PaperRow(124.6, 84, 181), PaperRow(28.7, 17, 41)),
               "MDB": (PaperRow(157.7, 144, 184), PaperRow(35.5, 31, 39)),
               "LTB": (PaperRow(121.8, 93, 201), PaperRow(26.3, 19, 35))},
    "40-60-100": {"NDB": (PaperRow(188.0, 155, 204), PaperRow(42.7, 38, 50)),
                  "MDB": (PaperRow(247.9, 196, 278), PaperRow(31.5, 18, 44)),
                  "LTB": (PaperRow(193.3, 162, 214), PaperRow(39.5, 18, 54))},
}
PAPER_SECONDS: dict[str, dict[str, tuple[PaperRow, PaperRow]]] = {
    "20-100": {"NDB": (PaperRow(43.5, 10, 100), PaperRow(30.5, 30, 31)),
               "MDB": (PaperRow(72.2, 48, 84), PaperRow(30.6, 30, 31)),
               "LTB": (PaperRow(27.2, 12, 76), PaperRow(30.6, 30, 31))},
    "40-60-100": {"NDB": (PaperRow(2748.0, 1579, 4207), PaperRow(31.1, 31, 32)),
                  "MDB": (PaperRow(3655.0, 1937, 5798), PaperRow(31.0, 30, 32)),
                  "LTB": (PaperRow(2500.3, 1656, 3826), PaperRow(31.1, 31, 32))},
}


def mix_path(mix: str) -> Path:
    return PAPER_DIR / f"mix-{mix}.toml"


def load_mix(mix: str) -> Config:
    return load_config(mix_path(mix), provisioners.options_of)


def mix_plans(config: Config, base_mean_s: float) -> list[ClusterPlan]:
    """The planner's clusters: T_i = the base (t1.micro) mean / the type's speed."""
    return [ClusterPlan.from_config(cl, base_mean_s / cluster_speed(cl)) for cl in config.clusters.values()]


def bag_mean(workload: str, bag: int, tasks: int = TASKS) -> float:
    """The mean base runtime of bag number ``bag`` (a seed) of ``workload``."""
    runtimes = parse_runtimes(WORKLOADS[workload]).sample(np.random.default_rng([3, bag]), tasks)
    return float(runtimes.mean())


@dataclass
class FrontPair:
    """The exact front and the GA's for one bag."""

    mix: str
    workload: str
    bag: int
    mean_s: float
    exact: list[Estimate]
    exact_s: float  # CPU seconds
    ga: list[Estimate]
    ga_s: float
    hv_ratio: float  # GA hypervolume / exact hypervolume (reference: exact nadir + 10 % of its ranges)
    gap: float  # front_gap(GA, exact): largest normalised distance from an exact point to the GA's

    @property
    def ga_fastest_loss(self) -> float:
        """How much slower the GA's fastest option is than the exact fastest (0.1 = 10 %)."""
        return self.ga[0].makespan_s / self.exact[0].makespan_s - 1

    @property
    def ga_cheapest_loss(self) -> float:
        return min(e.cost for e in self.ga) / min(e.cost for e in self.exact) - 1


def compare_fronts(mix: str, workload: str, bag: int, config: Config | None = None,
                   params: GAParams | None = None) -> FrontPair:
    """Both fronts of one bag, timed in CPU time (``time.process_time``: the process's own CPU,
    so other load on a shared machine inflates it less than wall time)."""
    config = config or load_mix(mix)
    params = params or GAParams(population_size=POPULATION)
    mean = bag_mean(workload, bag)
    clusters = mix_plans(config, mean)
    cap = config.master.max_machines
    t0 = time.process_time()
    exact = Planner(clusters, TASKS, max_machines=cap).pareto()
    t1 = time.process_time()
    ga = ga_front(clusters, TASKS, np.random.default_rng([3, bag, 1]), params, max_machines=cap)
    t2 = time.process_time()
    ref = reference_point(exact)
    ratio = hypervolume(ga, ref) / hypervolume(exact, ref)
    return FrontPair(mix, workload, bag, mean, exact, t1 - t0, ga, t2 - t1, ratio, front_gap(ga, exact))


# ---------------------------------------------------------------- re-planning after a price change
@dataclass
class ReplanRun:
    """A simulated run whose spot prices move during the execution phase."""

    handle_s: list[float]  # CPU seconds of each PriceChanged the core handled while executing
    changed: int  # how many of them moved the pool to another configuration
    status: str
    cost: float
    budget: float
    tasks_done: int


class _TimedSim(Simulator):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handle_s: list[float] = []

    def _feed(self, event: c.Event) -> None:
        if isinstance(event, c.PriceChanged) and getattr(self.core, "phase", None) == "executing":
            t0 = time.process_time()
            actions = self.core.handle(event)
            self.handle_s.append(time.process_time() - t0)
            self.events += 1
            self.carry_out(actions)
            return
        super()._feed(event)


# spot m1.medium jumps towards its on-demand price and back every 20 minutes, spot m1.small the
# other way round; both stay below their bids (the on-demand prices), so nothing is interrupted
REPLAN_TRACES = {
    "spot-m1-medium": [(f"{20 * k}m", 0.11 if k % 2 else 0.013) for k in range(1, 40)],
    "spot-m1-small": [(f"{20 * k}m", 0.007 if k % 2 else 0.05) for k in range(1, 40)],
}


def replan_run(tasks: int = 20_000, seed: int = 1, schedule: str = "fastest") -> ReplanRun:
    """bats-sim on the 40-60-100 mix with the traces above: NDB tasks, the option ``schedule``."""
    text = mix_path("40-60-100").read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="bats-replan-") as tmp:
        for name, rows in REPLAN_TRACES.items():
            (Path(tmp) / f"{name}.csv").write_text("".join(f"{o}, {p}\n" for o, p in rows), encoding="utf-8")
            head = f"[clusters.{name}]\n"
            text = text.replace(head, f"{head}price_trace = \"{name}.csv\"\n")
        path = Path(tmp) / "mix.toml"
        path.write_text(text, encoding="utf-8")
        config = load_config(path, provisioners.options_of)
    sim = simulate(config, tasks, parse_runtimes(WORKLOADS["NDB"]), seed, choice=Choice(schedule=schedule),
                   simulator=_TimedSim)
    report = sim.report()
    changed = sum(1 for r in report.get("reconfigurations", []) if r["reason"].startswith("price of "))
    return ReplanRun(sim.handle_s, changed, report["status"], report["cost"]["total"],
                     report.get("budget") or 0.0, report["tasks"]["done"])


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1e3
