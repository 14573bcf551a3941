"""What fewer sampling machines on dear clusters buy: the execution study's random pools, each bag
run twice by the simulator with the same seed, once with every cluster sampling on
``[sampling] initial_workers`` (7) machines and once with ``initial_workers = 2`` on the clusters
dearer per second than the pool's median. Prints, for `cheapest` and `fastest` runs that completed
both ways: the median sampling share of the total cost either way, and the medians of the total
cost and of the wall time (start to last result) of the second against the first.

    python bench/sampling_probe.py [--pools 60] [--seed 1] [--dear-workers 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from execution_study import random_pool  # noqa: E402  (the same pools as the study)

from bats.common.config import Config  # noqa: E402
from bats.master.core.bats.policy import Choice  # noqa: E402
from bats.master.sim.driver import simulate  # noqa: E402
from bats.master.sim.runtimes import parse_runtimes  # noqa: E402

SCHEDULES = ("cheapest", "fastest")


def with_dear_workers(config: Config, workers: int) -> Config:
    """``config`` with ``initial_workers = workers`` on the clusters dearer per second than the median."""
    median = statistics.median(cl.price / cl.atu_s for cl in config.clusters.values())
    return dataclasses.replace(config, clusters={
        name: dataclasses.replace(cl, initial_workers=workers) if cl.price / cl.atu_s > median else cl
        for name, cl in config.clusters.items()})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dear-workers", type=int, default=2)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    runs: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    for p in range(args.pools):
        config, tasks, runtimes = random_pool(rng, 5000)
        seed = rng.randrange(2**31)
        for schedule in SCHEDULES:
            for variant in (config, with_dear_workers(config, args.dear_workers)):
                sim = simulate(variant, tasks, parse_runtimes(runtimes), seed,
                               choice=Choice(policy="bats", schedule=schedule, cushion=True))
                report = sim.report()
                if report["status"] != "done" or sim.core.last_finish_at is None:
                    break
                cost = report["cost"]
                runs.setdefault((schedule, p), []).append((cost["sampling"], cost["total"], sim.core.last_finish_at))
    print(f"{args.pools} pools (seed {args.seed}); initial_workers = {args.dear_workers} on the dearer half:")
    for schedule in SCHEDULES:
        pairs = [v for (s, _p), v in runs.items() if s == schedule and len(v) == 2]
        if not pairs:
            continue
        share = [statistics.median(v[i][0] / v[i][1] for v in pairs) for i in (0, 1)]
        cost = statistics.median(v[1][1] / v[0][1] for v in pairs)
        wall = sorted(v[1][2] / v[0][2] for v in pairs)
        print(f"  {schedule}: {len(pairs)} runs, sampling share {100 * share[0]:.1f} % -> {100 * share[1]:.1f} %, "
              f"total cost x{cost:.3f}, wall time x{statistics.median(wall):.3f} (p90 x{wall[int(0.9 * len(wall))]:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
