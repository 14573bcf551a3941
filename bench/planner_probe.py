"""Timings until `make bench` has a section for them: seed 003's GA (population
2,000) and the exact Pareto front, 1,000 tasks, on a 3-type pool limited to 40/60/100 and on the
paper's six-type 40-60-100 mix (a pool of 100). Medians of 5 runs:

    .venv/bin/python bench/planner_probe.py
"""
import statistics
import sys
import time

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
from helpers.mixes import paper_mix, paper_six

from bats.master.core.planning.ga import ga_front
from bats.master.core.planning.planner import Planner


def med(f, k=5):
    ts = []
    for i in range(k):
        t = time.perf_counter()
        f(i)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1000


print(f"GA pop 2000, 3 types 40/60/100: {med(lambda s: ga_front(paper_mix(40, 60, 100), 1000, s)):.0f} ms")
print(f"exact front, 3 types 40/60/100: {med(lambda s: Planner(paper_mix(40, 60, 100), 1000).pareto()):.0f} ms")
print(f"exact front, six types 40-60-100, cap 100: {med(lambda s: Planner(paper_six(40, 60), 1000, max_machines=100).pareto()):.0f} ms")
print(f"GA pop 2000, six types, cap 100: {med(lambda s: ga_front(paper_six(40, 60), 1000, s, max_machines=100)):.0f} ms")
