"""An option's makespan with the machines already up and the boot time of the new ones.

How this works. Seed 000 "BaTS" §2.3 estimates a configuration {a_i} by the fluid makespan
T_e = N / S, S = sum_i a_i k_i / T_i, as if every machine started work at the choice. At the
choice, though, the sampling machines are up, each inside an ATU already paid (§3.2 marks them
for release at its end), and the run hands them tasks until then whether or not the option keeps
them; and a machine the option adds starts work only once it has booted. So each machine m works
at its speed s_m = k_i / T_i from a start b_m to an end e_m:

- a machine up that the option keeps: from 0, for good (b_m = 0, e_m = inf);
- a machine the option adds: from its cluster's boot time b_i, for good;
- a machine up that the option lets go: from 0 until it is released, and only on the whole tasks
  that fit before then (it is handed no other): e_m = floor(l_m / T_i) T_i for l_m seconds left.

The tasks done by time t are C(t) = sum_m s_m clamp(t - b_m, 0, e_m - b_m), piecewise linear in
t, and the makespan is the t with C(t) = N, solved exactly below. Of a cluster's machines up, the
option keeps those with the most paid time left (the execution keeps first the ones whose running
task would be cut off, which are mostly those). Only the makespan changes: the option's cost and
budget stay the configuration's B_e (whole ATUs of T_e from the choice for every machine it keeps
or adds). The kept machines' paid time is money the run then does not spend; a boot that makes an
added machine begin one more ATU is not priced in, and the execution pays it within the budget
like any other lateness. Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from .planner import ClusterPlan, Option

_EPS = 1e-9


def makespan_of(n_tasks: float, machines: Sequence[tuple[float, float, float]]) -> float:
    """The t by which the ``machines``, each (speed, start, end), have done ``n_tasks`` tasks;
    inf when they never do."""
    if n_tasks <= 0:
        return 0.0
    working = [(s, b, e) for s, b, e in machines if s > 0 and e > b]
    points = sorted({0.0, *(b for _s, b, _e in working), *(e for _s, _b, e in working if math.isfinite(e))})
    done = 0.0
    for at, until in zip(points, [*points[1:], math.inf]):
        rate = sum(s for s, b, e in working if b <= at < e)
        if rate <= 0:
            continue
        if done + rate * (until - at) >= n_tasks - _EPS:
            return at + (n_tasks - done) / rate
        done += rate * (until - at)
    return math.inf


def with_machines_up(option: Option, clusters: Sequence[ClusterPlan], n_tasks: int,
                     paid_left: Mapping[str, Sequence[float]], boot_s: Mapping[str, float]) -> Option:
    """``option`` with its makespan counting the machines up (``paid_left``: per cluster, the
    seconds each has left before it would be released) and each cluster's boot time (``boot_s``)
    for the machines it adds; see the module docstring."""
    machines: list[tuple[float, float, float]] = []
    longest = 0.0
    for c in clusters:
        a = option.machines.get(c.name, 0)
        lefts = sorted(paid_left.get(c.name, ()), reverse=True)
        kept = min(a, len(lefts))
        if a:
            longest = max(longest, c.atu_s)
            machines.append((kept * c.speed, 0.0, math.inf))
            machines.append(((a - kept) * c.speed, max(0.0, boot_s.get(c.name, 0.0)), math.inf))
        # a machine let go is handed only tasks that end before its release: whole ones
        machines.extend((c.speed, 0.0, math.floor(left / c.mean_s + _EPS) * c.mean_s) for left in lefts[a:])
    makespan = makespan_of(n_tasks, machines)
    if not math.isfinite(makespan) or abs(makespan - option.makespan_s) <= _EPS * max(1.0, option.makespan_s):
        return option
    return replace(option, makespan_s=makespan, makespan_atu=max(1, math.ceil(makespan / longest - _EPS)))
