"""The cheapest plan that finishes a bag by a deadline: seed 004's integer linear program (§V-A).

How this works (seed ``004_a72da6d749083844.txt`` §V-A, eqs. 18-25). Pure math: no I/O, no clock,
no randomness; numpy and ``scipy.optimize.milp`` (HiGHS).

Time from now to the deadline H is cut into intervals of length L (10 minutes by default, as the
paper), the last one shorter when H is not a multiple of L (the paper would drop it; "nothing in
our model precludes us from using an arbitrary division of time"). For every interval i and
cluster j the program has:

* ``x[i,j]``: integer, the machines of cluster j active in interval i, ``0 <= x <= max_j``
  (eq. 20, AVAILABILITY); and ``sum_j x[0,j] <= max_machines`` (the overall limit; with eq. 22
  it holds in every interval).
* eq. 22, ``x[i,j] >= x[i+1,j]``: counts never grow. A machine slot is active for a prefix of the
  intervals, so it is started once, at the beginning, and stopped once.
* work (eqs. 19, 21): a machine of cluster j does ``L_i / T_j`` tasks in interval i (T_j: the mean
  runtime sampled on it). Two corrections make the float work a bound on whole tasks:
  - boot delay (the paper's "first intervals ... capacity zero or lower"): a new machine works only
    from ``boot_j`` on. Machines already up (``live_j``, when re-planning) need no boot: with
    ``y[i,j] >= x[i,j] - live_j``, ``y >= 0`` (the new machines in interval i), the work of the
    intervals that start before ``boot_j`` is reduced by ``y[i,j] * (lost seconds) / T_j``.
  - whole tasks (``tail_tasks``, default 1): a machine active for t seconds finishes at least
    ``t / T_j - 1`` tasks, so one task per machine slot, ``x[0,j]``, is taken off (the paper's
    eq. 31 takes an initialisation penalty per machine the same way).
  - a machine with ``slots`` k_j runs k_j tasks at once: its work is k_j t / T_j, and it gives up
    k_j tail tasks.
  ``sum work >= N`` (eq. 21).
* cost: per cluster, by its ATU a_j:
  - ``a_j >= L``: billing variables per ATU (eqs. 23-24). ``bill[h,j] >= x[i,j]`` for every
    interval i that overlaps ATU h = [h a_j, (h+1) a_j); cost ``sum price_j bill[h,j]``. As counts
    only fall, ``max_{i in h} x[i,j]`` is exactly the number of slots that begin ATU h, so the cost
    is the bill of the machines (each ATU begun paid in full). A minimum charge adds
    ``bill[h,j] >= x[0,j]`` for the ATUs it covers.
  - ``a_j < L`` (per-minute or per-second billing): eq. 25, ``price_j * ceil(L_i / a_j) * x[i,j]``
    per interval (exact when L is a multiple of a_j). A minimum charge is added for the slots that
    end before it: ``(x[k-1,j] - x[k,j])`` slots are active for exactly k intervals.
  - price 0 (local machines, an SSH or SGE pool): no cost, so they are used next to the paid ones
    (the paper's hybrid case).
* objective (eq. 18): minimum cost. Among the plans of that cost a second solve takes the one that
  does its work earliest (maximum ``sum_i (I - i) * L_i / T_j * x[i,j]``): the free machines run from
  the start and machines paid for an ATU work to its end, so the bag is done as soon as the money
  allows (eq. 22's purpose in the paper: "our ILP solver finds the fastest solution").

:func:`cheapest_plan` answers a :class:`DeadlinePlan` (None when infeasible);
:func:`earliest_deadline` binary-searches the shortest horizon that is feasible; and
:func:`most_work_within` is the same model with objective and constraint swapped (the most work
for a budget), which the tests use to cross-check the bounded-knapsack planner of seed 000
(:mod:`bats.master.core.planning.planner`; the paper's §V-B reduction from bounded knapsack is this swap).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bats.common.durations import format_duration

from .. import billing
from ..billing import EPS as _EPS

if TYPE_CHECKING:
    from scipy.optimize import LinearConstraint

DEFAULT_INTERVAL_S = 600.0  # the paper's 10 minutes
# HiGHS stops within 0.1 % of the optimum: proving the last fraction optimal took minutes on long
# horizons with identical clusters (symmetry), seconds-long stalls of every re-plan for nothing.
MIP_OPTIONS = {"time_limit": 30.0, "mip_rel_gap": 1e-3}


@dataclass(frozen=True)
class DeadlineCluster:
    """One cluster as the program sees it. ``live``: machines already up (no boot delay)."""

    name: str
    mean_s: float
    price: float
    atu_s: float
    max: int
    min_charge_s: float = 0.0
    boot_s: float = 0.0
    live: int = 0
    slots: int = 1  # tasks a machine runs at once: its speed is slots / mean_s

    @property
    def speed(self) -> float:
        return self.slots / self.mean_s

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mean_s) and self.mean_s > 0):
            raise ValueError(f"cluster {self.name!r}: mean runtime must be > 0, got {self.mean_s!r}")
        if not (math.isfinite(self.price) and self.price >= 0):
            raise ValueError(f"cluster {self.name!r}: price must be >= 0, got {self.price!r}")
        if not (math.isfinite(self.atu_s) and self.atu_s > 0):
            raise ValueError(f"cluster {self.name!r}: ATU must be > 0 seconds, got {self.atu_s!r}")
        if self.max < 0 or self.live < 0 or self.boot_s < 0 or self.min_charge_s < 0:
            raise ValueError(f"cluster {self.name!r}: max, live, boot and min_charge must be >= 0")


def interval_bounds(horizon_s: float, interval_s: float) -> tuple[float, ...]:
    """(0, L, 2L, ..., H): whole intervals and a shorter last one when H is not a multiple of L."""
    if not (horizon_s > 0 and interval_s > 0):
        raise ValueError("the horizon and the interval must be longer than 0 seconds")
    whole = int(math.floor(horizon_s / interval_s + _EPS))
    bounds = [k * interval_s for k in range(whole + 1)]
    if horizon_s - bounds[-1] > _EPS * max(1.0, horizon_s):
        bounds.append(horizon_s)
    return tuple(bounds)


@dataclass(frozen=True)
class DeadlinePlan:
    """A solution: machines per cluster per interval (times from the plan's start)."""

    clusters: tuple[DeadlineCluster, ...]
    bounds: tuple[float, ...]
    counts: dict[str, tuple[int, ...]]
    cost: float
    finish_s: float  # when the plan expects the work done
    n_tasks: int
    tail_tasks: float = 1.0

    @property
    def horizon_s(self) -> float:
        return self.bounds[-1]

    def count_at(self, name: str, t: float) -> int:
        """Machines of ``name`` the plan has at time ``t`` (0 before the start and after the end)."""
        if t < 0 or t >= self.horizon_s:
            return 0
        i = int(np.searchsorted(self.bounds, t, side="right")) - 1
        return self.counts[name][min(i, len(self.counts[name]) - 1)]

    def slot_end(self, name: str, rank: int) -> float:
        """When the ``rank``-th machine of ``name`` (1-based) stops: the end of the last interval
        with at least ``rank`` machines (0 if it never runs)."""
        end = 0.0
        for i, n in enumerate(self.counts[name]):
            if n >= rank:
                end = self.bounds[i + 1]
        return end

    def initial(self) -> dict[str, int]:
        return {name: counts[0] if counts else 0 for name, counts in self.counts.items()}

    def segments(self, name: str) -> list[tuple[int, float, float]]:
        """(count, start, end) runs of equal counts, up to the interval where the work is done."""
        out: list[tuple[int, float, float]] = []
        for i, n in enumerate(self.counts[name]):
            start, end = self.bounds[i], self.bounds[i + 1]
            if start >= self.finish_s - _EPS:
                break
            if out and out[-1][0] == n:
                out[-1] = (n, out[-1][1], end)
            else:
                out.append((n, start, end))
        return [s for s in out if s[0] > 0]

    def describe(self) -> str:
        """``18 x c2 until 1h00m, 16 x local throughout``: what the operator reads."""
        parts = []
        for cl in self.clusters:
            segs = self.segments(cl.name)
            if not segs:
                continue
            last = self.bounds[next(i for i, b in enumerate(self.bounds) if b >= self.finish_s - _EPS)] \
                if self.finish_s < self.horizon_s else self.horizon_s
            texts = []
            for n, start, end in segs:
                if start <= _EPS and end >= last - _EPS:
                    texts.append(f"{n} x {cl.name} throughout")
                elif start <= _EPS:
                    texts.append(f"{n} x {cl.name} until {format_duration(end)}")
                else:
                    texts.append(f"{n} x {cl.name} from {format_duration(start)} to {format_duration(end)}")
            parts.append(", then ".join(texts))
        return "; ".join(parts) if parts else "no machines"

    def record(self) -> dict:
        """The plan as the report holds it."""
        return {"intervals_s": [round(b, 6) for b in self.bounds], "cost": self.cost,
                "finish_s": self.finish_s, "tasks": self.n_tasks,
                "machines": {name: list(c) for name, c in self.counts.items()},
                "text": self.describe()}


# ---------------------------------------------------------------- the model
@dataclass
class _Model:
    """Variables [x (cluster-major), y, bill]; the work row and cost vector are kept apart so that
    either can be the objective and the other a constraint."""

    clusters: tuple[DeadlineCluster, ...]
    bounds: tuple[float, ...]
    n_vars: int
    x0: int  # index of x[0, 0]
    cost: np.ndarray
    cost_const: float
    work: np.ndarray  # sum work = work @ v (tail taken off)
    early: np.ndarray  # the second objective: work weighted towards the early intervals
    rows: list[np.ndarray]
    lo: list[float]
    hi: list[float]
    upper: np.ndarray
    integral: np.ndarray

    def x(self, j: int, i: int) -> int:
        return self.x0 + j * (len(self.bounds) - 1) + i

    def constraints(self) -> list[LinearConstraint]:
        if not self.rows:
            return []
        return [_constraint(np.vstack(self.rows), np.array(self.lo), np.array(self.hi))]


def _build(clusters: Sequence[DeadlineCluster], horizon_s: float, interval_s: float,
           max_machines: int | None, tail_tasks: float) -> _Model:
    clusters = tuple(clusters)
    bounds = interval_bounds(horizon_s, interval_s)
    n_int = len(bounds) - 1
    lengths = np.diff(bounds)
    per_cluster_x = n_int
    # count the variables: x, then y (boot intervals), then billing (ATU-billed clusters)
    y_index: dict[tuple[int, int], int] = {}
    bill_index: dict[tuple[int, int], int] = {}
    n = len(clusters) * per_cluster_x
    for j, cl in enumerate(clusters):
        for i in range(n_int):
            if bounds[i] < cl.boot_s - _EPS:
                y_index[(j, i)] = n
                n += 1
    for j, cl in enumerate(clusters):
        if cl.price > 0 and cl.atu_s >= interval_s - _EPS:
            n_atus = max(billing.atus_spanning(horizon_s, cl.atu_s), billing.atus_spanning(cl.min_charge_s, cl.atu_s))
            for h in range(n_atus):
                bill_index[(j, h)] = n
                n += 1
    cost = np.zeros(n)
    work = np.zeros(n)
    early = np.zeros(n)
    upper = np.full(n, np.inf)
    integral = np.zeros(n)
    integral[len(clusters) * per_cluster_x + len(y_index):] = 1  # bills: whole machines, exact money
    model = _Model(clusters, bounds, n, 0, cost, 0.0, work, early, [], [], [], upper, integral)
    rows, lo, hi = model.rows, model.lo, model.hi

    def row() -> np.ndarray:
        return np.zeros(n)

    for j, cl in enumerate(clusters):
        for i in range(n_int):
            k = model.x(j, i)
            upper[k] = cl.max
            integral[k] = 1
            cap = lengths[i] * cl.speed
            work[k] += cap
            early[k] = (n_int - i) * cap
            if i + 1 < n_int:  # eq. 22: counts never grow
                r = row()
                r[k], r[model.x(j, i + 1)] = 1.0, -1.0
                rows.append(r)
                lo.append(0.0)
                hi.append(np.inf)
        work[model.x(j, 0)] -= tail_tasks * cl.slots  # whole tasks: one per machine slot
        for (jj, i), k in y_index.items():  # boot delay: new machines lose the seconds before boot_s
            if jj != j:
                continue
            lost = min(bounds[i + 1], cl.boot_s) - bounds[i]
            work[k] -= lost * cl.speed
            r = row()
            r[k], r[model.x(j, i)] = 1.0, -1.0
            rows.append(r)
            lo.append(-float(cl.live))
            hi.append(np.inf)
        if cl.price <= 0:
            continue
        if cl.atu_s >= interval_s - _EPS:  # eqs. 23-24
            n_min = billing.atus_spanning(cl.min_charge_s, cl.atu_s)
            for (jj, h), k in bill_index.items():
                if jj != j:
                    continue
                cost[k] = cl.price
                start, end = h * cl.atu_s, (h + 1) * cl.atu_s
                covered = [i for i in range(n_int) if bounds[i] < end - _EPS and bounds[i + 1] > start + _EPS]
                if h < n_min and 0 not in covered:
                    covered.append(0)
                for i in covered:
                    r = row()
                    r[k], r[model.x(j, i)] = 1.0, -1.0
                    rows.append(r)
                    lo.append(0.0)
                    hi.append(np.inf)
        else:  # eq. 25, and the minimum charge of slots shorter than it
            units = [billing.atus_spanning(lengths[i], cl.atu_s) for i in range(n_int)]
            n_min = billing.atus_spanning(cl.min_charge_s, cl.atu_s)
            for i in range(n_int):
                cost[model.x(j, i)] += cl.price * units[i]
            used = 0
            for span in range(1, n_int + 1):  # (x[span-1] - x[span]) slots are active for span intervals
                used += units[span - 1]
                extra = n_min - used
                if extra <= 0:
                    break
                cost[model.x(j, span - 1)] += cl.price * extra
                if span < n_int:
                    cost[model.x(j, span)] -= cl.price * extra
    if max_machines is not None:
        r = row()
        for j in range(len(clusters)):
            r[model.x(j, 0)] = 1.0
        rows.append(r)
        lo.append(-np.inf)
        hi.append(float(max_machines))
    return model


def _constraint(rows: Any, lo: Any, hi: Any) -> LinearConstraint:
    """scipy's linear constraint; scipy is imported by the first run that plans with it, not by
    every run that imports the policies (it took about half a second of a short run's start)."""
    from scipy.optimize import LinearConstraint

    return LinearConstraint(rows, lo, hi)


def __getattr__(name: str) -> Any:
    """``ilp.milp``: scipy's solver, imported the first time it is asked for (tests replace it)."""
    if name == "milp":
        from scipy.optimize import milp

        return milp
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _run(model: _Model, objective: np.ndarray, extra: list[LinearConstraint]):
    from scipy.optimize import Bounds

    milp = globals().get("milp") or __getattr__("milp")  # a replacement set on the module wins
    return milp(objective, integrality=model.integral, bounds=Bounds(np.zeros(model.n_vars), model.upper),
                constraints=model.constraints() + extra, options=MIP_OPTIONS)


def _solve(model: _Model, objective: np.ndarray, extra: list[LinearConstraint]):
    res = _run(model, objective, extra)
    # scipy's statuses: 0 optimal, 1 stopped at the time (or node) limit, 2 infeasible, 3 unbounded.
    # A limit reached with a feasible point found is a plan (within the gap, not proven optimal):
    # only a proof (2) or no point at all means none is known.
    return res if res.status in (0, 1) and res.x is not None else None


def _plan(model: _Model, v: np.ndarray, n_tasks: int, tail_tasks: float) -> DeadlinePlan:
    n_int = len(model.bounds) - 1
    counts = {cl.name: tuple(int(round(v[model.x(j, i)])) for i in range(n_int))
              for j, cl in enumerate(model.clusters)}
    cost = math.fsum(float(c) * float(round(x)) for c, x in zip(model.cost, v) if c) if model.n_vars else 0.0
    finish = _finish_time(model.clusters, model.bounds, counts, n_tasks, tail_tasks)
    return DeadlinePlan(model.clusters, model.bounds, counts, round(cost, 9), float(finish), n_tasks, tail_tasks)


def plan_work(clusters: Sequence[DeadlineCluster], bounds: Sequence[float], counts: dict[str, Sequence[int]],
              tail_tasks: float = 1.0) -> np.ndarray:
    """Tasks done per interval by ``counts`` (boot delays and the whole-task tail counted: the tail
    at the start, so a cumulative sum reaching N means done)."""
    lengths = np.diff(bounds)
    work = np.zeros(len(lengths))
    for cl in clusters:
        xs = counts[cl.name]
        for i, length in enumerate(lengths):
            new = max(0, xs[i] - cl.live)
            lost = max(0.0, min(bounds[i + 1], cl.boot_s) - bounds[i])
            work[i] += (xs[i] * length - new * lost) * cl.speed
        if len(xs):
            work[0] -= tail_tasks * cl.slots * xs[0]
    return work


def _finish_time(clusters, bounds, counts, n_tasks: int, tail_tasks: float) -> float:
    work = plan_work(clusters, bounds, counts, tail_tasks)
    done = 0.0
    for i, w in enumerate(work):
        if done + w >= n_tasks - 1e-6:
            frac = 0.0 if w <= 0 else max(0.0, (n_tasks - done) / w)
            return bounds[i] + min(1.0, frac) * (bounds[i + 1] - bounds[i])
        done += w
    return bounds[-1]


# ---------------------------------------------------------------- the questions
def cheapest_plan(clusters: Sequence[DeadlineCluster], n_tasks: int, horizon_s: float, *,
                  interval_s: float = DEFAULT_INTERVAL_S, max_machines: int | None = None,
                  tail_tasks: float = 1.0) -> DeadlinePlan | None:
    """The cheapest plan that does ``n_tasks`` within ``horizon_s`` seconds, the earliest-finishing
    of equally cheap ones; None when no plan can (eq. 18 with eqs. 19-25)."""
    if n_tasks <= 0:
        raise ValueError("the number of tasks must be >= 1")
    model = _build(clusters, horizon_s, interval_s, max_machines, tail_tasks)
    need = _constraint(model.work.reshape(1, -1), [float(n_tasks)], [np.inf])
    first = _solve(model, model.cost, [need])
    if first is None:
        return None
    best = float(model.cost @ first.x)
    within = _constraint(model.cost.reshape(1, -1), [-np.inf], [best + 1e-7 * max(1.0, abs(best))])
    second = _solve(model, -model.early, [need, within])
    return _plan(model, (second if second is not None else first).x, n_tasks, tail_tasks)


def feasible(clusters: Sequence[DeadlineCluster], n_tasks: int, horizon_s: float, *,
             interval_s: float = DEFAULT_INTERVAL_S, max_machines: int | None = None,
             tail_tasks: float = 1.0) -> bool:
    """Whether any plan does ``n_tasks`` within ``horizon_s`` (the same constraints, no objective)."""
    model = _build(clusters, horizon_s, interval_s, max_machines, tail_tasks)
    need = _constraint(model.work.reshape(1, -1), [float(n_tasks)], [np.inf])
    return _solve(model, np.zeros(model.n_vars), [need]) is not None


def proven_infeasible(clusters: Sequence[DeadlineCluster], n_tasks: int, horizon_s: float, *,
                      interval_s: float = DEFAULT_INTERVAL_S, max_machines: int | None = None,
                      tail_tasks: float = 1.0) -> bool:
    """Whether the solver proves that no plan does ``n_tasks`` within ``horizon_s``; False when it
    finds one, and when it stops at its time limit with none (not a proof)."""
    model = _build(clusters, horizon_s, interval_s, max_machines, tail_tasks)
    need = _constraint(model.work.reshape(1, -1), [float(n_tasks)], [np.inf])
    return bool(_run(model, np.zeros(model.n_vars), [need]).status == 2)


def earliest_deadline(clusters: Sequence[DeadlineCluster], n_tasks: int, *, interval_s: float = DEFAULT_INTERVAL_S,
                      max_machines: int | None = None, tail_tasks: float = 1.0, start_s: float | None = None,
                      resolution_s: float | None = None, limit_s: float = 400 * 86400.0) -> float | None:
    """The shortest feasible horizon, by binary search (feasibility only grows with the horizon);
    within ``resolution_s`` (default: a tenth of an interval, at least 1 s and at most 1 min).
    None when even ``limit_s`` is not enough (no machines, or far too few)."""
    if not any(cl.max > 0 for cl in clusters):
        return None
    res = resolution_s if resolution_s is not None else max(1.0, min(60.0, interval_s / 10.0))
    kw: dict[str, Any] = {"interval_s": interval_s, "max_machines": max_machines, "tail_tasks": tail_tasks}
    lo = 0.0
    hi = max(res, start_s or interval_s)
    while not feasible(clusters, n_tasks, hi, **kw):
        lo = hi
        hi *= 2.0
        if hi > limit_s:
            return None
    while hi - lo > res:
        mid = (lo + hi) / 2.0
        if feasible(clusters, n_tasks, mid, **kw):
            hi = mid
        else:
            lo = mid
    return hi


def most_work_within(clusters: Sequence[DeadlineCluster], horizon_s: float, budget: float, *,
                     interval_s: float | None = None, max_machines: int | None = None,
                     tail_tasks: float = 0.0) -> tuple[float, dict[str, tuple[int, ...]]] | None:
    """The same program with objective and constraint swapped: the most work (tasks) done within
    ``horizon_s`` for at most ``budget``; (work, counts) or None. One interval by default."""
    model = _build(clusters, horizon_s, interval_s or horizon_s, max_machines, tail_tasks)
    money = _constraint(model.cost.reshape(1, -1), [-np.inf], [budget + 1e-9 * max(1.0, budget)])
    res = _solve(model, -model.work, [money])
    if res is None:
        return None
    n_int = len(model.bounds) - 1
    counts = {cl.name: tuple(int(round(res.x[model.x(j, i)])) for i in range(n_int))
              for j, cl in enumerate(model.clusters)}
    return float(model.work @ res.x), counts


def billed_cost(plan: DeadlinePlan) -> float:
    """What the plan's machines are billed when each slot runs from the start to the end of its
    last interval and every ATU begun is paid (with the minimum charge): the check of eqs. 23-25."""
    total = 0.0
    for cl in plan.clusters:
        for rank in range(1, max(plan.counts[cl.name], default=0) + 1):
            span = plan.slot_end(cl.name, rank)
            if span > 0:
                total += cl.price * billing.atus_begun(span, cl.atu_s, cl.min_charge_s)
    return total
