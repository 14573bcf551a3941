"""An option's makespan with the time that machines already up have paid for.

How this works. Seed 000 "BaTS" §2.3 estimates a configuration {a_i} by the fluid makespan
T_e = N / S, S = sum_i a_i k_i / T_i, as if every machine started at the choice. At the choice the
sampling machines are up, each inside an ATU already paid (§3.2 marks them for release at its end),
and the run hands them tasks until then whether or not the option keeps them. A machine the option
keeps is one of its a_i; one it lets go still runs the whole tasks that fit in the l_m seconds it
has left (it is handed no other), floor(l_m / T_i) T_i seconds of work at its speed s_m = k_i / T_i.
With l_m so rounded, the tasks done by time t are

    C(t) = S t + sum_m s_m min(t, l_m)

and the makespan is the t with C(t) = N: piecewise linear in t, solved exactly below. Of a
cluster's machines up, the option keeps those with the most paid time left (the execution keeps
first the ones whose running task would be cut off, which are mostly those) and lets the others
go. Only the makespan changes: the option's cost and budget stay those of the configuration,
which pays whole ATUs from the choice for every machine and so already covers the kept ones.
Pure: no I/O, no clock; the paid time left is passed in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from .planner import ClusterPlan, Option

_EPS = 1e-9


def makespan_with_paid_time(n_tasks: float, speed: float, extra: Sequence[tuple[float, float]]) -> float:
    """The t with S t + sum s_m min(t, l_m) = ``n_tasks``, for ``speed`` S > 0 and ``extra`` the
    (s_m, l_m) of the machines let go."""
    if n_tasks <= 0:
        return 0.0
    pairs = sorted((left, s) for s, left in extra if s > 0 and left > 0)
    rate = speed + sum(s for _left, s in pairs)  # every machine works until the first l_m
    done = 0.0  # tasks done by ``at``
    at = 0.0
    for left, s in pairs:
        reach = done + rate * (left - at)
        if reach >= n_tasks - _EPS:
            break
        done, at, rate = reach, left, rate - s
    return at + (n_tasks - done) / rate


def with_paid_time(option: Option, clusters: Sequence[ClusterPlan], n_tasks: int,
                   paid_left: Mapping[str, Sequence[float]]) -> Option:
    """``option`` with its makespan counting the tasks the machines up that it lets go still run
    in the time they have paid (``paid_left``: per cluster, the seconds each machine up has left
    before it would be released). Unchanged when it lets none go."""
    speed = 0.0
    extra: list[tuple[float, float]] = []
    longest = 0.0
    for c in clusters:
        a = option.machines.get(c.name, 0)
        speed += a * c.speed
        if a:
            longest = max(longest, c.atu_s)
        lefts = sorted(paid_left.get(c.name, ()), reverse=True)[a:]  # kept: the most time left
        # a machine let go is handed only tasks that end before its release: whole ones
        extra.extend((c.speed, math.floor(left / c.mean_s + _EPS) * c.mean_s) for left in lefts)
    if not extra or speed <= 0:
        return option
    makespan = makespan_with_paid_time(n_tasks, speed, extra)
    if makespan >= option.makespan_s:
        return option
    return replace(option, makespan_s=makespan, makespan_atu=max(1, math.ceil(makespan / longest - _EPS)))
