"""An option's makespan in whole tasks, with the machines already up and the boot time of the new ones.

How this works. Seed 000 "BaTS" §2.3 estimates a configuration {a_i} by the fluid makespan
T_e = N / S, S = sum_i a_i k_i / T_i, as if every machine started work at the choice and tasks
could be split. At the choice, though, the sampling machines are up, each inside an ATU already
paid (§3.2 marks them for release at its end), and the run hands them tasks until then whether or
not the option keeps them; a machine the option adds starts work only once it has booted; and a
task runs whole on one slot. So each machine m runs k_i tasks at a time, each taking T_i, from a
start b_m to an end e_m:

- a machine up that the option keeps: from 0, for good (b_m = 0, e_m = inf);
- a machine the option adds: from its cluster's boot time b_i, for good;
- a machine up that the option lets go: from 0 until it is released, and only on the whole tasks
  that fit before then (it is handed no other): e_m = floor(l_m / T_i) T_i for l_m seconds left.

The tasks done by time t are W(t) = sum_m k_i floor(clamp(t - b_m, 0, e_m - b_m) / T_i), and the
makespan is the least t with W(t) >= N: each machine ends the tasks it will actually get (with
every task at its mean, handing each to the slot that ends it first, as the end-game does). It
lies between the fluid C(t) = N (C(t) = sum_m (k_i / T_i) clamp(t - b_m, 0, e_m - b_m), solved
exactly by :func:`makespan_of`) and one task later, and W steps only at some b_m + j T_i, so it is
found exactly among those. With many tasks per machine the two differ by a fraction of a task;
with few (28 tasks on 108 machines) W says one task length where the fluid T_e says a quarter of
one.

A bag also cannot end before its longest task. With every task at its mean, a few tasks per
machine of a skewed bag plan a fraction of what one long task takes (1.3 Lévy tasks per machine
ended 7 times later than planned), so when the caller knows each cluster's longest sampled
runtime, the makespan is at least the least of them over the clusters the option uses (a lower
bound: the longest of the N tasks left is at least as long as the sample's, on the fastest of
those clusters, started at once). With ten tasks per machine or more it rarely moves.

Tasks do not all take their mean, and the bag ends with its slowest last task. When the bag
runs dry at t_d every slot is busy with a task, of which it has a residual R_j left, and the
bag ends at t_d + max_j R_j. After a few tasks on each slot the residuals follow the renewal
(equilibrium) law of the slot's runtimes X_j, P(R_j <= r) = E[min(X_j, r)] / E[X_j], so
E[R_j] = E[X_j^2] / (2 E[X_j]); and since every task handed out runs whole,
sum_j (t_d - b_j + E[R_j]) / T_j = N: t_d lies the rate-weighted mean residual before the
fluid makespan. So the bag ends about (mean residual weighted by speed) before, and E[max_j
R_j] after, the fluid end. With every task at its mean the same reckoning gives the whole-task
model above (uniform residuals), so when the caller knows each cluster's sampled runtimes
(``shapes``) the option's makespan gets the difference of the two, :func:`tail_allowance`:
0 for fixed runtimes (the whole-task figure is exact there), a fraction of a task for a
normal bag, and most of a long task for a bimodal one with ten tasks per slot (a bimodal bag of
12 tasks per machine, 10 % of its tasks 9 times longer than the rest, ended 38 % after its
planned makespan without it). The cost is still that of the whole-task makespan: a machine
with nothing left to run is let go, so only the few running the last tasks pay for the tail.

Of a cluster's machines up, the option keeps those with the most paid time left (the execution
keeps first the ones whose running task would be cut off, which are mostly those). The
configurations are the planner's. The option's cost becomes what its machines are billed from
now on (:func:`cost_from_now`): a kept machine only the ATUs it begins past the time it has
paid, an added one every ATU from its acquisition (its boot within), each to the end of its
release, until this makespan; the machines let go nothing more. Billed by the second after a
minimum, the sampling machines' paid minute can do most of a small bag, and the planner's B_e
(every machine paid from the choice for T_e) was then many times what the run spent. The
option's budget, the ceiling the execution keeps to, stays the planner's: the difference is
room for the estimate's error. Pure: no I/O, no clock. The residuals' laws on the grid depend on
the clusters' means and sampled runtimes, not on their machine counts, so the latest few are kept
(:func:`_residual_laws`): the options of one plan share them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from .. import billing
from ..billing import EPS as _EPS
from .planner import ClusterPlan, Option

if TYPE_CHECKING:
    import numpy as np


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


def whole_tasks_makespan(n_tasks: int, groups: Sequence[tuple[int, float, float, float]]) -> float:
    """The t by which the machine ``groups``, each (tasks at once, seconds a task, start, end),
    have ended ``n_tasks`` whole tasks, each task taking its cluster's mean: a group ends
    ``at_once * floor((min(t, end) - start) / seconds)`` tasks by t. inf when they never do."""
    if n_tasks <= 0:
        return 0.0
    working = [(k, T, b, e) for k, T, b, e in groups if k > 0 and T > 0 and e > b]

    def done(t: float) -> int:
        return sum(k * math.floor((min(t, e) - b) / T + _EPS) for k, T, b, e in working if t > b)

    # whole tasks end no sooner than the fluid model's, and on a machine that works for good at
    # most one task later; done() steps only at some start + j * seconds, so the answer is the
    # least such step in between that ends the bag
    fluid = makespan_of(n_tasks, [(k / T, b, b + math.floor((e - b) / T + _EPS) * T if math.isfinite(e) else e)
                                  for k, T, b, e in working])
    if not math.isfinite(fluid):
        return math.inf
    high = fluid + max(T for _k, T, _b, _e in working)
    steps = sorted({b + j * T for _k, T, b, e in working
                    for j in range(max(1, math.floor((fluid - b) / T)), math.floor((min(high, e) - b) / T + _EPS) + 1)})
    return next((t for t in steps if done(t) >= n_tasks), high)


END_GAME_SLOWER = 2.0  # slots this many times slower than the fastest take no part in the end of the bag


def tail_allowance(groups: Sequence[tuple[int, float, float, float]],
                   shapes: Sequence[Sequence[float] | np.ndarray | None],
                   fluid_s: float) -> float:
    """How much later than the whole-task model the bag ends when its runtimes vary as sampled:
    the machine ``groups`` (tasks at once, mean seconds a task, start, end) working for good,
    each with its cluster's sampled runtimes (``shapes``, any scale: only their shape counts;
    None or all equal: the runtimes are fixed), against ``fluid_s``, the fluid makespan. The
    end of the bag from the renewal residuals (module docstring) with the sampled runtimes less
    the same with every runtime at its mean; never below 0. Slots that start after the bag
    would run dry take no part, nor slots END_GAME_SLOWER times slower than the fastest (the
    end-game leaves them idle at the end): a cluster that slow, added, never ends the bag later."""
    import numpy as np

    working = [(group, shape) for group, shape in zip(groups, shapes)
               if group[0] > 0 and group[1] > 0 and not math.isfinite(group[3]) and group[2] < fluid_s - group[1]]
    if not working:
        return 0.0
    # the end-game hands the last tasks to the slots expected to end them first: a slot at least
    # twice as slow as the fastest ends a task no sooner than a fast one free at once ends its
    # second, so it is left idle at the end rather than running on past the others
    fastest = min(group[1] for group, _shape in working)
    used = [(k, mean_s, shape) for (k, mean_s, _start, _end), shape in working
            if mean_s < END_GAME_SLOWER * fastest - 1e-12]
    if not used:
        return 0.0
    top, grid, logs = _residual_laws(tuple((mean_s, None if shape is None else np.asarray(shape, dtype=float).tobytes())
                                      for _k, mean_s, shape in used))
    rate = sum(k / m for k, m, _shape in used)
    log_var = np.zeros_like(grid)  # log P(max R <= r), runtimes as sampled
    log_fix = np.zeros_like(grid)  # the same with every runtime at its mean
    mean_var = mean_fix = 0.0
    for (k, m, _shape), (cdf_log, u_log, square) in zip(used, logs):
        log_var += k * cdf_log
        log_fix += k * u_log
        mean_var += (k / m) * m * square / 2.0
        mean_fix += (k / m) * m / 2.0

    def expected_max(log_cdf: np.ndarray) -> float:
        tail = 1.0 - np.exp(log_cdf)
        return float(np.sum((tail[1:] + tail[:-1]) * np.diff(grid)) / 2.0)

    extra = (expected_max(log_var) - mean_var / rate) - (expected_max(log_fix) - mean_fix / rate)
    return extra if extra > 1e-9 * max(1.0, top) else 0.0


_LAWS: dict[tuple, tuple] = {}  # the latest few residual laws, oldest first
_LAWS_KEPT = 16


def _residual_laws(parts: tuple[tuple[float, bytes | None], ...]) -> tuple[float, np.ndarray, list[tuple]]:
    """For :func:`tail_allowance`: the longest residual, the grid of residuals and, per part (a cluster's mean seconds a
    task and its sampled runtimes as float64 bytes, None for fixed), log P(R <= r) of one slot's
    residual with the runtimes as sampled and at their mean, on that grid, and E[Y^2] of the
    runtimes over their mean. They depend on the parts alone, not on the slots, so the options of
    one plan, which use the same clusters with other machine counts, share them (the latest few
    are kept)."""
    import numpy as np

    laws = _LAWS.pop(parts, None)
    if laws is None:
        scaled = []  # (mean, sorted runtimes / their mean)
        for mean_s, raw in parts:
            shape = np.frombuffer(raw, dtype=float) if raw is not None else np.zeros(0)
            y = np.sort(shape if len(shape) else np.ones(1))
            y = y[np.isfinite(y) & (y >= 0)]
            if not len(y) or y.mean() <= 0:
                y = np.ones(1)
            scaled.append((mean_s, y / y.mean()))
        # the grid of residuals: each part's sampled runtimes on its scale, and a fine even spread
        top = max(m * float(y[-1]) for m, y in scaled)
        grid = np.unique(np.concatenate([np.linspace(0.0, top, 4001),
                                         *(np.clip(m * y, 0.0, top) for m, y in scaled),
                                         [m for m, _y in scaled]]))
        logs = []
        for m, y in scaled:
            u = grid / m  # the residual in the part's means
            prefix = np.concatenate([[0.0], np.cumsum(y)])
            below = np.searchsorted(y, u, side="left")
            cdf = (prefix[below] + u * (len(y) - below)) / len(y)  # E[min(Y, u)] / E[Y], E[Y] = 1
            with np.errstate(divide="ignore"):
                logs.append((np.log(np.clip(cdf, 0.0, 1.0)), np.log(np.clip(u, 0.0, 1.0)), float(np.mean(y * y))))
        for array in (grid, *(a for law in logs for a in law[:2])):
            array.setflags(write=False)
        laws = (top, grid, logs)
        while len(_LAWS) >= _LAWS_KEPT:
            del _LAWS[next(iter(_LAWS))]
    _LAWS[parts] = laws
    return laws


def with_machines_up(option: Option, clusters: Sequence[ClusterPlan], n_tasks: int,
                     paid_left: Mapping[str, Sequence[float]], boot_s: Mapping[str, float],
                     longest_s: Mapping[str, float] | None = None,
                     shapes: Mapping[str, Sequence[float] | np.ndarray] | None = None,
                     ready_s: Mapping[str, Sequence[float]] | None = None) -> Option:
    """``option`` with its makespan counting the machines up (``paid_left``: per cluster, the
    seconds each has left before it would be released; ``ready_s``, in the same order: the
    seconds until each works, for a machine still booting), each cluster's boot time
    (``boot_s``) for the machines it adds and, when given, each cluster's longest sampled
    runtime (``longest_s``) and its sampled runtimes (``shapes``: the end of the bag,
    :func:`tail_allowance`), and with its cost what it is billed from now on (see the module
    docstring)."""
    named = _groups(option, clusters, paid_left, boot_s, ready_s)
    groups = [group for group, _name in named]
    makespan = whole_tasks_makespan(n_tasks, groups)
    billed_until = makespan  # machines with nothing left go: only the last few pay for the tail
    if shapes and math.isfinite(makespan) and n_tasks > 0:
        fluid = makespan_of(n_tasks, [(k / T, b, e) for k, T, b, e in groups if k > 0])
        if math.isfinite(fluid):
            makespan += tail_allowance(groups, [shapes.get(name) for _group, name in named], fluid)
    longest = max((c.atu_s for c in clusters if option.machines.get(c.name, 0)), default=0.0)
    if longest_s:
        used = [longest_s[c.name] for c in clusters if option.machines.get(c.name, 0) and c.name in longest_s]
        if used and n_tasks > 0:
            makespan = max(makespan, min(used))
    if not math.isfinite(makespan):
        return option
    billed = cost_from_now(option, clusters, paid_left, billed_until)
    if billed < option.cost - _EPS * max(1.0, option.cost):  # the machines up work in time already paid
        option = replace(option, cost=billed)  # the budget keeps the planner's figure: room for the error
    if abs(makespan - option.makespan_s) <= _EPS * max(1.0, option.makespan_s):
        return option
    return replace(option, makespan_s=makespan, makespan_atu=max(1, billing.atus_spanning(makespan, longest)))


def _groups(option: Option, clusters: Sequence[ClusterPlan], paid_left: Mapping[str, Sequence[float]],
            boot_s: Mapping[str, float], ready_s: Mapping[str, Sequence[float]] | None = None,
            ) -> list[tuple[tuple[int, float, float, float], str]]:
    """The option's machine groups (tasks at once, seconds a task, start, end), each with its
    cluster: per cluster the machines up it keeps (those with the most paid time left, each from
    when it works), the ones it adds (after their boot), and each machine up it lets go."""
    groups: list[tuple[tuple[int, float, float, float], str]] = []
    for c in clusters:
        a = option.machines.get(c.name, 0)
        lefts = list(paid_left.get(c.name, ()))
        ready = list((ready_s or {}).get(c.name, ()))
        ready += [0.0] * (len(lefts) - len(ready))
        order = sorted(range(len(lefts)), key=lambda i: (-lefts[i], ready[i]))
        kept, let_go = order[:a], order[a:]
        if a:
            starts: dict[float, int] = {}
            for i in kept:
                start = max(0.0, ready[i])
                starts[start] = starts.get(start, 0) + 1
            for start, n in sorted(starts.items()):
                groups.append(((n * c.slots, c.mean_s, start, math.inf), c.name))
            groups.append((((a - len(kept)) * c.slots, c.mean_s, max(0.0, boot_s.get(c.name, 0.0)), math.inf), c.name))
        # a machine let go is handed only tasks that end before its release
        groups.extend(((c.slots, c.mean_s, max(0.0, ready[i]), lefts[i]), c.name) for i in let_go)
    return groups


def cost_from_now(option: Option, clusters: Sequence[ClusterPlan], paid_left: Mapping[str, Sequence[float]],
                  makespan_s: float) -> float:
    """What the option's machines are billed from now until ``makespan_s``: a machine it keeps pays
    the ATUs it begins past the time it has paid (``paid_left``), one it adds every ATU from its
    acquisition (its boot within), and each is paid to the end of its release too; the machines
    it lets go cost nothing more (their paid time was the sampling's)."""
    total = 0.0
    for c in clusters:
        a = option.machines.get(c.name, 0)
        if not a:
            continue
        kept = sorted(paid_left.get(c.name, ()), reverse=True)[:a]
        total += c.price * sum(billing.atus_spanning(makespan_s + c.release_s - left, c.atu_s) for left in kept)
        total += c.price * (a - len(kept)) * c.units(makespan_s + c.release_s)
    return total
