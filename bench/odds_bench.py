"""``make bench`` benchmark 12: how long BaTS takes to offer options with their odds.

A 5,000-task bag on 5 clusters is sampled in ``bats-sim``'s virtual time; the step timed is the
core's answer to the event that ends the sampling (the driver's ``plan_s``): the planner's
options, each replayed ``REPLAYS`` times on resampled runtimes for its P50/P90 makespan and
P50/P99 cost (``bats.master.core.planning.odds``), until ``OfferOptions``. Goal: within 5 s.

Then the odds' cost during an execution: ``bats-sim`` runs 50,000 tasks on 1,000 machines (S3-4's
clusters, 500 each, as benchmark 5's large run), whose monitoring re-estimates the odds of finishing
within the money every 5 virtual minutes; its wall time, CPU and peak RSS (``os.wait4``), against
54 MiB and 9 s before the odds existed (targets: 80 MiB, 10 s of CPU). Benchmark 5 runs the 1,000,000-task bag.

    python bench/odds_bench.py [--samples 3] [--no-sim]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sections import Section, fmt, verdict

from bats.common.config import ClusterConfig, Config, MasterConfig

TASKS = 5_000
T_ODDS_S = 5.0
SIM_TASKS = 50_000
T_SIM_RSS_MIB = 80.0  # before the odds: 54 MiB
T_SIM_CPU_S = 10.0  # process CPU (the wall time is what a shared machine leaves); before the odds: 9 s wall


def pool() -> Config:
    """Five clusters of 24 machines, hourly, speeds 1-5x, prices that make the faster dearer per task."""
    clusters = {}
    for k in range(5):
        speed = 1.0 + k
        clusters[f"c{k}"] = ClusterConfig(f"c{k}", "local", max=24, price=round(0.02 * speed * (1 + 0.15 * k), 4),
                                          atu_s=3600.0, options={"startup": 60.0}, speed=speed)
    return Config(MasterConfig(), clusters)


def one(seed: int) -> tuple[float, int, int, float]:
    """(seconds to offer, options, options with odds, CPU seconds of the whole simulated bag) of one
    sampled bag."""
    from bats.master.core.bats.policy import BatsCore, Choice
    from bats.master.sim.driver import simulate
    from bats.master.sim.runtimes import parse_runtimes

    cpu = time.process_time()
    sim = simulate(pool(), TASKS, parse_runtimes("levy:12m,45m"), seed, choice=Choice(plan_only=True))
    cpu = time.process_time() - cpu
    core = sim.core
    assert isinstance(core, BatsCore) and sim.plan_s is not None
    return sim.plan_s, len(core.options), sum(o.odds is not None for o in core.options), cpu


def bench_odds(samples: int, sim: Callable[[int], dict[str, Any]] | None = None) -> Section:
    """Section 12; ``sim(n)`` runs ``bats-sim`` on ``n`` tasks (``run.run_sim``'s figures), None: not run."""
    from bats.master.core.planning.odds import REPLAYS

    sec = Section("12. Options with odds")
    one(0)  # warm-up: imports, first numpy calls
    runs = [one(seed) for seed in range(1, samples + 1)]
    times = [r[0] for r in runs]
    med = statistics.median(times)
    ok = med <= T_ODDS_S
    sec.text += [
        (f"A {TASKS:,}-task bag (truncated Lévy runtimes, seed 003's LTB) on 5 clusters of 24 machines (hourly, "
         "speeds 1-5x), sampled by `bats-sim` in virtual time; timed (wall, in-process) is the core's answer to the "
         "result that ends the sampling: the planner's options and, for each, "
         f"{REPLAYS} replays of its plan on resampled runtimes (P50/P90 makespan, P50/P99 cost; "
         f"`bats.master.core.planning.odds`), until `OfferOptions`. One untimed warm-up, then {samples} bags "
         "(seeds 1..N). The CPU column is the process's CPU time for the whole simulated bag, sampling "
         "included (an upper bound of the planning's own): on a shared machine the wall time is what the "
         "other processes leave."),
        "",
        f"| bags | median s | min s | max s | CPU s (whole bag) | options (with odds) | ≤ {T_ODDS_S:.0f} s |",
        "|---|---|---|---|---|---|---|",
        (f"| {samples} | **{med:.2f}** | {min(times):.2f} | {max(times):.2f} "
         f"| {statistics.median(r[3] for r in runs):.2f} "
         f"| {statistics.median(r[1] for r in runs):.0f} ({statistics.median(r[2] for r in runs):.0f}) "
         f"| {verdict(ok)} |"),
        "",
    ]
    sec.summary.append((f"options with odds, {TASKS:,} tasks on 5 clusters", fmt(med, ".2f", " s"),
                        f"≤ {T_ODDS_S:.0f} s", verdict(ok)))
    sec.medians["odds_s"] = med
    if sim is not None:
        r = sim(SIM_TASKS)
        sec.text += [
            (f"**During the execution**: `bats-sim` on {SIM_TASKS:,} tasks, 1,000 machines (S3-4's clusters with "
             "`max = 500`, `--runtimes normal:15m,134s --seed 1 --schedule fastest`, as benchmark 5's large run), "
             "whose every 5-minute monitoring step replays the tasks left 50 or 100 times for the chance of "
             "finishing within the money. Before the odds existed this run took 54 MiB and 9 s; the first version "
             "of the odds took 1.1 GiB and 37 s. One run; wall from `time.perf_counter()`, CPU and peak RSS from "
             "`os.wait4`. The CPU time is the target, the wall time being what the machine's other processes "
             "leave."),
            "",
            f"| wall s | simulation s | process CPU s | peak RSS MiB | events | tasks done | ≤ {T_SIM_RSS_MIB:.0f} MiB "
            f"| CPU ≤ {T_SIM_CPU_S:.0f} s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        if not r["ok"]:
            sec.text.append(f"| error: {r['error']} | | | | | | **FAIL** | **FAIL** |")
            rss_ok = cpu_ok = False
            rss = wall = cpu = None
        else:
            rss, wall, cpu = r["rss"], r["wall"], r["cpu"]
            rss_ok, cpu_ok = rss <= T_SIM_RSS_MIB, cpu <= T_SIM_CPU_S
            sec.text.append(f"| {wall:.2f} | {r['sim_s']:.2f} | {cpu:.2f} | {rss:.0f} | {r['events']:,} "
                            f"| {r['done']:,} | {verdict(rss_ok)} | {verdict(cpu_ok)} |")
        sec.text.append("")
        sec.summary.append((f"bats-sim {SIM_TASKS:,} tasks on 1,000 machines, odds every step: peak RSS",
                            fmt(rss, ".0f", " MiB"), f"≤ {T_SIM_RSS_MIB:.0f} MiB", verdict(rss_ok)))
        sec.summary.append((f"bats-sim {SIM_TASKS:,} tasks on 1,000 machines, odds every step: process CPU",
                            fmt(cpu, ".2f", " s") + ("" if wall is None else f" ({wall:.2f} s wall)"),
                            f"≤ {T_SIM_CPU_S:.0f} s", verdict(cpu_ok)))
        sec.medians["sim_odds_rss_mib"] = rss
        sec.medians["sim_odds_cpu_s"] = cpu
    return sec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--no-sim", action="store_true", help="skip the 50,000-task bats-sim run")
    args = parser.parse_args(argv)
    if args.no_sim:
        sec = bench_odds(args.samples)
    else:
        from run import SIM_BIG_PER_CLUSTER, run_sim, write_sim_config

        with tempfile.TemporaryDirectory(prefix="bats-odds-bench-") as tmp:
            work = Path(tmp)
            config = write_sim_config(work / "sim-big.toml", SIM_BIG_PER_CLUSTER)
            sec = bench_odds(args.samples, lambda n: run_sim(work, config, n))
    sys.stdout.write("\n".join([f"## {sec.title}", "", *sec.text]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
