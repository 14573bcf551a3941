"""Measure the seed 000 §3.2 sampling rule of ``sampling-renewal.diff`` against the code without it.

Needs the patch applied (``git apply bench/trials/sampling-renewal.diff``): each pool of the
execution study runs twice with the same seed, once with the rule switched off (the patched
``BatsCore._decide_sampling_renewal`` replaced by one that never marks a machine) and once with
it. Prints, for ``cheapest`` and ``fastest``: the incomplete runs either way, how many runs' sampling
cost changed, and the new/old ratios of sampling cost, total cost and wall time.

    python bench/trials/sampling_renewal_probe.py [--pools 60] [--seed 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from random import Random

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from execution_study import random_pool  # noqa: E402  (the same pools as the study)

from bats.master.core.bats.policy import BatsCore, Choice  # noqa: E402
from bats.master.sim.driver import simulate  # noqa: E402
from bats.master.sim.runtimes import parse_runtimes  # noqa: E402

SCHEDULES = ("cheapest", "fastest")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rule = getattr(BatsCore, "_decide_sampling_renewal", None)
    if rule is None:
        print("apply bench/trials/sampling-renewal.diff first", file=sys.stderr)
        return 2
    rng = Random(args.seed)
    runs: dict[tuple[str, int], dict[str, tuple[float, float, float, bool]]] = {}
    for p in range(args.pools):
        config, tasks, runtimes = random_pool(rng, 5000)
        seed = rng.randrange(2**31)
        for schedule in SCHEDULES:
            for label, decide in (("old", lambda _self, _machine: []), ("new", rule)):
                BatsCore._decide_sampling_renewal = decide  # type: ignore[attr-defined]
                sim = simulate(config, tasks, parse_runtimes(runtimes), seed,
                               choice=Choice(policy="bats", schedule=schedule, cushion=True))
                report = sim.report()
                runs.setdefault((schedule, p), {})[label] = (
                    report["cost"]["sampling"], report["cost"]["total"], sim.core.last_finish_at or 0.0,
                    report["status"] == "done")
    BatsCore._decide_sampling_renewal = rule  # type: ignore[attr-defined]
    for schedule in SCHEDULES:
        rows = [v for (s, _p), v in runs.items() if s == schedule]
        incomplete = [sum(not v[label][3] for v in rows) for label in ("old", "new")]
        both = [v for v in rows if v["old"][3] and v["new"][3]]
        sampling = [v["new"][0] / v["old"][0] for v in both if v["old"][0] > 0]
        wall = sorted(v["new"][2] / v["old"][2] for v in both)
        changed = sum(abs(v["new"][0] - v["old"][0]) > 1e-9 for v in both)
        total = sum(v["new"][1] for v in both) / sum(v["old"][1] for v in both)
        print(f"{schedule}: {len(rows)} runs, incomplete {incomplete[0]} -> {incomplete[1]}, sampling cost changed "
              f"in {changed}, sampling cost x{statistics.mean(sampling):.3f} (mean), total cost x{total:.3f} "
              f"(sum), wall x{statistics.median(wall):.3f} (median), p90 x{wall[int(0.9 * len(wall))]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
