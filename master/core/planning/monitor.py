"""Monitoring the plan's execution and keeping the budget a ceiling (seed 000 "BaTS", §3.1).

Pure math: no I/O, no clock (every uptime is measured by the caller at its ``now``), no
randomness; stdlib and numpy only.

How this works. Every monitoring interval the core describes each live machine as a
:class:`MachineView` (its uptime up, the tasks it executed nt, the seconds it spent on them rt,
the elapsed time tau of the task it is running, the ATUs the plan still gives it, and whether it
is marked for release) and asks :func:`check` whether the paid-for time plus the time the plan
still buys covers the bag. A per-cluster :class:`Billing` (ATU, price, optional minimum charge)
turns uptimes into money, and ``tau_e(cluster, elapsed)`` estimates the full runtime of a task
that has run ``elapsed`` seconds: any callable, e.g. ``lambda c, e: estimates[c].tail_estimate(e)``
over :class:`bats.master.core.planning.estimate.RuntimeEstimate`, or :class:`TailEstimates`, the same tail rule
with a ``many`` method that estimates a whole cluster's running tasks in one numpy call.

Speed. :func:`outlook` computes one machine in plain Python and is the readable reference;
:func:`check` and :func:`plan_releases` compute the same formulas for all machines at once in
numpy over a :class:`MachineTable` (one column per field), built from the views when given
those. For 1,000 machines most of the time goes into reading the views' attributes; a core that
keeps its counters in arrays can pass a table directly.

The formulas of §3.1 (seed lines ~1085-1180; their layout was lost in conversion, so here is how
each one is read, the prose deciding where the layout is ambiguous):

* ``up_mje = up_mj + (tau_e - tau)``: the uptime at which the running task is expected to end.
  tau_e is taken as at least tau (a task already ran that long). A machine running nothing has
  up_mje = up_mj.
* ``v_mj = (nt_mj + 1) / (rt_mj + tau_e)``: tasks per second, the running task counted with its
  estimate. A machine running nothing counts a fresh task, tau_e(cluster, 0), as its "+1": one
  pseudo-observation of the cluster's mean, which also gives a booting machine a speed. A speed
  with no time behind it (rt + tau_e <= 0) is unknown and counts as 0 (no tasks expected).
* ``delta_mj = ATU - up_mje mod ATU``: the paid span left after the running task, up to the end
  of the ATU in which that task ends. With per-cluster billing this is ``paid_until(up_mje) -
  up_mje`` (:meth:`Billing.paid_until`), which is the same number except that a minimum charge
  moves the first edge, and that exactly on an edge the next ATU has not begun (as
  :func:`bats.master.core.billing.atus_begun` counts it), so delta is 0 there instead of a whole ATU.
* ``ft_mj = floor(delta_mj * v_mj)``: the tasks the machine is expected to take from the bag in
  its paid time (:func:`expected_in_paid_time`).
* ``N_e = N_r - sum ft_mj``: the tasks left once every machine's paid time has run out. N_r is
  read as the tasks *in the bag*, not yet started: each running task is accounted for by the
  up_mje of its machine (so tasks prefetched but not started belong to N_r).
* ``eta_mj = delta_mj - ft_mj / v_mj``: "the time left of the previous ATU which could not
  accommodate the execution of a task"; the flattened ``ceil(up_mje / ATU) - ft / v`` is read as
  ``ceil(up_mje / ATU) * ATU - up_mje - ft / v``, i.e. delta minus the time ft tasks take.
* ``nr_mj``: the ATUs the plan still gives the machine after the one it is in
  (``MachineView.planned_atus_left``, counted from the current uptime); ATUs the running task
  carries it into are taken off: nr = max(0, planned_atus_left - (atus_paid(up_mje) -
  atus_paid(up_mj))).
* ``N_p = sum floor((nr_mj * ATU + eta_mj) * v_mj)`` (:func:`potential`): what the machines can
  still do in the time the plan still pays for.
* The plan holds while ``N_e <= N_p``, or ``N_e <= N_p + dN`` when the operator accepted the
  cushion for the rounding problem (§2.3); otherwise the core re-plans.
* Machines marked for release (the plan let them go, or :func:`plan_releases` did) contribute
  only their current ATU: ft counts what fits between up_mje and the moment they are let go,
  ``paid_until(up_mj) - release margin``; their N_p term is 0 (eta is "useful since the machine
  is not preempted", and this one is). A running task that would end after that moment is cut
  off and goes back into the bag, so it is added to N_e.
* Money (§3.1, "including machines no longer active ... a task still running we use again its
  tau_ke"): ``spent`` is the cost of every ATU begun so far; ``committed`` also counts the ATUs a
  running task on a machine that is not marked will start before it ends (the cost at up_mje).

The budget as a ceiling. A machine may start another ATU only if the money spent so far plus
that ATU stays within budget + accepted cushion (:func:`may_start_next_atu`). :func:`plan_releases`
decides, for all live machines at once, which ones keep going: each machine not marked for
release needs its next ATU (and, with a ``horizon_s``, every ATU it starts before the next
decision, which matters for per-second billing) reserved out of budget + cushion - spent.
Machines are considered cheapest per task first, a task costing ``price / (atu_s * v)``; each
keeps going if the money left after the reservations already made pays its own, and is released
otherwise. So the machines that are most expensive per unit of speed go first; a machine is
released only when its own reservation does not fit in what the cheaper-per-task machines
left (a dearer one with a smaller ATU price may still fit), and the reservations never exceed
the money left. A released machine is let go ``release_margin_s`` before its next edge (at once
when that moment has passed). Decisions are redone every tick; as each tick reserves every ATU
a kept machine can start before the next tick (plus the margin), the money spent never passes
budget + cushion as long as ticks come at least every ``horizon_s``.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from ..billing import EPS as _EPS
from ..billing import Billing, atus_begun_array

_MONEY_TOL = 1e-9  # relative tolerance of money comparisons (0.1 + 0.2 fits in 0.3)

TauE = Callable[[str, float], float]
"""tau_e(cluster, elapsed_s): the expected full runtime of a task that has run ``elapsed_s``."""


@dataclass(frozen=True, slots=True)
class MachineView:
    """One live machine at a monitoring tick, as the core's counters give it."""

    machine: str
    cluster: str
    uptime_s: float  # up_mj
    nt: int  # tasks executed
    rt_s: float  # seconds spent executing them
    running_elapsed_s: float | None = None  # tau of the running task; None: running nothing
    planned_atus_left: int = 0  # ATUs the plan still gives it after the current one
    marked_for_release: bool = False


@dataclass(frozen=True, slots=True)
class MachineOutlook:
    """The §3.1 quantities of one machine (see the module docstring)."""

    expected_end_s: float  # up_mje
    speed: float  # v_mj, tasks per second
    paid_span_s: float  # delta_mj (marked: up to the release moment)
    in_paid_time: int  # ft_mj
    leftover_s: float  # eta_mj (0 when marked)
    atus_left: int  # nr_mj (0 when marked)
    potential: int  # floor((nr_mj * ATU + eta_mj) * v_mj) (0 when marked)
    cut_off: bool  # marked, and its running task ends after it is let go
    spent: float  # cost of the ATUs begun so far
    committed: float  # spent plus the ATUs the running task will start (not marked)


@dataclass(frozen=True, slots=True)
class MonitorResult:
    n_e: int  # tasks left after the paid time (cut-off tasks included), >= 0
    n_p: int  # tasks the plan's remaining ATUs can still run
    ok: bool  # n_e <= n_p + delta_n
    spent: float  # money of every ATU begun (spent_before included)
    committed: float  # spent plus the ATUs running tasks will start before they end
    cut_off: int = 0  # running tasks on marked machines that will come back into the bag


def outlook(m: MachineView, billing: Billing, tau_e: TauE, release_margin_s: float = 0.0) -> MachineOutlook:
    """Every §3.1 quantity of machine ``m`` (the formulas are in the module docstring)."""
    up = max(0.0, float(m.uptime_s))
    tau = m.running_elapsed_s
    if tau is None:
        up_e = up
        fresh = float(tau_e(m.cluster, 0.0))  # the "+1" of v: a task it would start now
    else:
        tau = max(0.0, float(tau))
        fresh = max(float(tau_e(m.cluster, tau)), tau)
        up_e = up + (fresh - tau)
    time_seen = m.rt_s + fresh
    speed = (m.nt + 1) / time_seen if time_seen > 0 else 0.0
    spent = billing.cost(up)
    if m.marked_for_release:
        let_go = billing.paid_until(up) - release_margin_s
        cut_off = tau is not None and up_e > let_go
        span = max(0.0, let_go - up_e) if not cut_off else 0.0
        ft = math.floor(span * speed + _EPS)
        return MachineOutlook(up_e, speed, span, ft, 0.0, 0, 0, cut_off, spent, spent)
    span = billing.paid_until(up_e) - up_e
    ft = math.floor(span * speed + _EPS)
    leftover = max(0.0, span - ft / speed) if speed > 0 else 0.0
    crossed = billing.atus_paid(up_e) - billing.atus_paid(up)
    atus_left = max(0, m.planned_atus_left - crossed)
    np_term = math.floor((atus_left * billing.atu_s + leftover) * speed + _EPS)
    return MachineOutlook(up_e, speed, span, ft, leftover, atus_left, np_term, False, spent,
                          billing.cost(up_e))


def expected_in_paid_time(m: MachineView, billing: Billing, tau_e: TauE, release_margin_s: float = 0.0) -> int:
    """ft_mj: the tasks ``m`` is expected to take from the bag in the time already paid for."""
    return outlook(m, billing, tau_e, release_margin_s).in_paid_time


def potential(m: MachineView, billing: Billing, tau_e: TauE) -> int:
    """The machine's N_p term, floor((nr_mj * ATU + eta_mj) * v_mj); 0 when marked for release."""
    return outlook(m, billing, tau_e).potential


@dataclass(frozen=True, eq=False)
class MachineTable:
    """The same snapshot as a sequence of :class:`MachineView`, one numpy column per field (a
    core that keeps its counters in arrays can build it directly and skip the conversion)."""

    machine: tuple[str, ...]
    clusters: tuple[str, ...]  # the distinct cluster names
    cluster_code: np.ndarray  # per machine: its index into ``clusters``
    uptime_s: np.ndarray
    nt: np.ndarray
    rt_s: np.ndarray
    running_elapsed_s: np.ndarray  # NaN: running nothing
    planned_atus_left: np.ndarray
    marked_for_release: np.ndarray  # bool

    @classmethod
    def from_views(cls, machines: Sequence[MachineView]) -> MachineTable:
        n = len(machines)
        cluster_names = list(map(attrgetter("cluster"), machines))
        code_of = dict.fromkeys(cluster_names, 0)
        for k, name in enumerate(code_of):
            code_of[name] = k
        elapsed = (math.nan if x is None else x for x in map(attrgetter("running_elapsed_s"), machines))
        return cls(
            machine=tuple(map(attrgetter("machine"), machines)),
            clusters=tuple(code_of),
            cluster_code=np.fromiter(map(code_of.__getitem__, cluster_names), np.intp, n),
            uptime_s=_column(machines, "uptime_s", n),
            nt=_column(machines, "nt", n),
            rt_s=_column(machines, "rt_s", n),
            running_elapsed_s=np.fromiter(elapsed, float, n),
            planned_atus_left=_column(machines, "planned_atus_left", n),
            marked_for_release=np.fromiter(map(attrgetter("marked_for_release"), machines), bool, n),
        )

    def __len__(self) -> int:
        return len(self.machine)


def _column(machines: Sequence[MachineView], name: str, n: int) -> np.ndarray:
    return np.fromiter(map(attrgetter(name), machines), float, n)


@dataclass(frozen=True, eq=False)
class _Columns:
    """:class:`MachineOutlook` for every machine of a table, plus its billing, as arrays."""

    atu_s: np.ndarray
    price: np.ndarray
    min_charge_s: np.ndarray
    uptime_s: np.ndarray
    atus_now: np.ndarray
    speed: np.ndarray
    in_paid_time: np.ndarray
    potential: np.ndarray
    cut_off: np.ndarray
    spent: np.ndarray
    committed: np.ndarray
    crossing: np.ndarray  # not marked, and its running task is expected to end past its edge less the margin


def _assess(table: MachineTable, billings: Mapping[str, Billing], tau_e: TauE,
            release_margin_s: float) -> _Columns:
    """:func:`outlook`'s formulas over all machines at once (kept line for line alike)."""
    n = len(table)
    codes = table.cluster_code
    cluster_billings = [billings[name] for name in table.clusters]
    atu = np.array([b.atu_s for b in cluster_billings])[codes]
    price = np.array([b.price for b in cluster_billings])[codes]
    min_charge = np.array([b.min_charge_s for b in cluster_billings])[codes]
    up = np.maximum(0.0, table.uptime_s)
    marked = table.marked_for_release
    running = ~np.isnan(table.running_elapsed_s)
    tau = np.where(running, np.maximum(table.running_elapsed_s, 0.0), 0.0)
    fresh = np.empty(n)  # tau_e of the running task, or of a fresh one on an idle machine
    many = getattr(tau_e, "many", None)
    for k, name in enumerate(table.clusters):
        in_cluster = codes == k
        run_k = in_cluster & running
        if run_k.any():
            elapsed = tau[run_k]
            fresh[run_k] = many(name, elapsed) if many is not None else [tau_e(name, float(e)) for e in elapsed]
        idle_k = in_cluster & ~running
        if idle_k.any():
            fresh[idle_k] = float(tau_e(name, 0.0))
    fresh = np.where(running, np.maximum(fresh, tau), fresh)
    up_e = up + np.where(running, fresh - tau, 0.0)  # an idle machine: its uptime
    time_seen = table.rt_s + fresh
    speed = np.divide(table.nt + 1.0, time_seen, out=np.zeros(n), where=time_seen > 0)
    atus_now = atus_begun_array(up, atu, min_charge)
    atus_end = atus_begun_array(up_e, atu, min_charge)
    let_go = atus_now * atu - release_margin_s  # when a marked machine is let go
    cut_off = marked & running & (up_e > let_go)
    span = np.where(marked, np.where(cut_off, 0.0, np.maximum(0.0, let_go - up_e)), atus_end * atu - up_e)
    ft = np.floor(span * speed + _EPS)
    time_per_task = np.divide(1.0, speed, out=np.zeros(n), where=speed > 0)
    leftover = np.maximum(0.0, span - ft * time_per_task)
    atus_left = np.maximum(0.0, table.planned_atus_left - (atus_end - atus_now))
    potential_terms = np.where(marked, 0.0, np.floor((atus_left * atu + leftover) * speed + _EPS))
    spent = atus_now * price
    committed = np.where(marked, spent, atus_end * price)
    crossing = ~marked & running & (up_e > atus_now * atu - release_margin_s)
    return _Columns(atu, price, min_charge, up, atus_now, speed, ft, potential_terms, cut_off, spent, committed,
                    crossing)


def _as_table(machines: Sequence[MachineView] | MachineTable) -> MachineTable:
    return machines if isinstance(machines, MachineTable) else MachineTable.from_views(machines)


def check(
    machines: Sequence[MachineView] | MachineTable,
    n_remaining: int,
    billings: Mapping[str, Billing],
    tau_e: TauE,
    delta_n: int = 0,
    *,
    spent_before: float = 0.0,
    release_margin_s: float = 0.0,
) -> MonitorResult:
    """N_e <= N_p + delta_n for the live ``machines`` (§3.1), all machines at once in numpy.

    ``n_remaining`` is N_r, the tasks not yet started; ``delta_n`` the rounding problem's dN when
    the operator accepted the cushion (0 otherwise); ``spent_before`` the money of machines no
    longer active (and of earlier phases); ``release_margin_s`` how long before its edge a marked
    machine is let go. The numbers are those of :func:`outlook` summed over the machines; when
    ``tau_e`` has a ``many(cluster, elapsed_array)`` method (:class:`TailEstimates` does) the
    running tasks of a cluster are estimated in one call.
    """
    table = _as_table(machines)
    spent = committed = float(spent_before)
    in_paid = n_p = n_cut = 0
    if len(table):
        cols = _assess(table, billings, tau_e, release_margin_s)
        in_paid, n_p, n_cut = int(cols.in_paid_time.sum()), int(cols.potential.sum()), int(cols.cut_off.sum())
        spent += float(cols.spent.sum())
        committed += float(cols.committed.sum())
    n_e = max(0, n_remaining + n_cut - in_paid)
    return MonitorResult(n_e, n_p, n_e <= n_p + delta_n, spent, committed, n_cut)


@dataclass(frozen=True, eq=False)
class TailEstimates:
    """tau_e from each cluster's sample runtimes, by §2.1's tail rule: a task that has run
    ``elapsed`` seconds is estimated as the mean of the sample runtimes longer than ``elapsed``
    (``elapsed`` itself when none is longer, as :meth:`RuntimeEstimate.tail_estimate`), for one
    task (``__call__``) or for many at once (:meth:`many`, which :func:`check` uses)."""

    sorted_samples: Mapping[str, np.ndarray]
    tail_sums: Mapping[str, np.ndarray]  # tail_sums[k] = sum(sorted[k:]), k = 0..n

    @classmethod
    def from_samples(cls, samples: Mapping[str, Sequence[float]]) -> TailEstimates:
        sorted_samples, tail_sums = {}, {}
        for name, values in samples.items():
            ordered = np.sort(np.asarray(values, dtype=float))
            sorted_samples[name] = ordered
            tail_sums[name] = np.concatenate([np.cumsum(ordered[::-1])[::-1], [0.0]])
        return cls(sorted_samples, tail_sums)

    def many(self, cluster: str, elapsed: np.ndarray) -> np.ndarray:
        ordered = self.sorted_samples[cluster]
        elapsed = np.asarray(elapsed, dtype=float)
        first_longer = np.searchsorted(ordered, elapsed, side="right")
        longer = len(ordered) - first_longer
        mean_longer = self.tail_sums[cluster][first_longer] / np.maximum(longer, 1)
        return np.where(longer > 0, mean_longer, np.maximum(elapsed, 0.0))

    def __call__(self, cluster: str, elapsed: float) -> float:
        ordered = self.sorted_samples[cluster]
        first_longer = bisect.bisect_right(ordered, elapsed)
        longer = len(ordered) - first_longer
        if longer == 0:
            return max(float(elapsed), 0.0)
        return float(self.tail_sums[cluster][first_longer]) / longer


# ---------------------------------------------------------------- the budget as a ceiling
def fits(amount: float, limit: float) -> bool:
    """``amount <= limit`` up to float noise in money (a relative 1e-9)."""
    return amount <= limit + _MONEY_TOL * max(1.0, abs(limit))


def may_start_next_atu(spent_total: float, next_atu_cost: float, budget: float, cushion: float = 0.0) -> bool:
    """Whether the money spent plus one more ATU stays within the budget plus the accepted cushion."""
    return fits(spent_total + next_atu_cost, budget + cushion)


@dataclass(frozen=True, slots=True)
class ReleaseDue:
    """A machine that must not start another ATU: let it go at ``release_at_uptime_s``."""

    machine: str
    release_at_uptime_s: float  # max(uptime, edge - margin): at once when that moment has passed
    edge_uptime_s: float  # where its next ATU would begin


@dataclass(frozen=True, slots=True)
class ReleasePlan:
    keep: tuple[str, ...]  # machines whose next ATU(s) are paid for, cheapest per task first
    release: tuple[ReleaseDue, ...]  # the others, the ones already marked included
    money_left: float  # budget + cushion - spent
    reserved: float  # what the kept machines' next ATUs cost; <= money_left (free ATUs aside)


def atus_to_reserve(m: MachineView, billing: Billing, horizon_s: float = 0.0, release_margin_s: float = 0.0) -> int:
    """ATUs ``m`` may start before a later decision can still let it go in time: the next one,
    and every one beginning within ``horizon_s + release_margin_s`` from now."""
    up = max(0.0, float(m.uptime_s))
    return max(1, billing.atus_paid(up + horizon_s + release_margin_s) - billing.atus_paid(up))


def plan_releases(
    machines: Sequence[MachineView] | MachineTable,
    billings: Mapping[str, Billing],
    tau_e: TauE,
    budget: float,
    cushion: float = 0.0,
    *,
    spent_before: float = 0.0,
    release_margin_s: float = 0.0,
    horizon_s: float | Mapping[str, float] = 0.0,
    running_first: bool = False,
    last: np.ndarray | None = None,
) -> ReleasePlan:
    """Which live machines keep going and which are let go before their next edge, so that the
    money spent plus the kept machines' next ATUs never exceeds budget + cushion.

    Rule (module docstring): cheapest per task first, each kept if its reservation still fits,
    released otherwise; machines marked for release are always released, and an ATU that costs
    nothing is always kept. ``horizon_s`` is the time to the next decision: every ATU a kept
    machine starts within it (and the release margin) is reserved; a mapping gives it per cluster
    (0 where the ceiling is checked at every machine's edge less the margin). With ``running_first``, the
    machines whose running task is expected to end past their edge less the margin (it was
    handed out on the promise that the machine is renewed) come first, so that releasing a
    machine cuts off a running task only when the money cannot keep even those. ``last`` (per
    machine, bool): machines kept only with the money the others leave (a machine the plan let go
    that ends its running task first).
    """
    table = _as_table(machines)
    spent = float(spent_before)
    if not len(table):
        return ReleasePlan((), (), budget + cushion - spent, 0.0)
    cols = _assess(table, billings, tau_e, release_margin_s)
    spent += float(cols.spent.sum())
    money_left = budget + cushion - spent
    if isinstance(horizon_s, Mapping):
        horizon = np.array([float(horizon_s.get(name, 0.0)) for name in table.clusters])[table.cluster_code]
    else:
        horizon = float(horizon_s)
    atus_ahead = atus_begun_array(cols.uptime_s + horizon + release_margin_s, cols.atu_s,
                                  cols.min_charge_s) - cols.atus_now
    reservation = np.maximum(1.0, atus_ahead) * cols.price
    per_task = np.divide(cols.price, cols.atu_s * cols.speed, out=np.full(len(table), math.inf),
                         where=cols.speed > 0)
    edge = cols.atus_now * cols.atu_s
    release_at = np.maximum(cols.uptime_s, edge - release_margin_s)
    marked = table.marked_for_release
    first = cols.crossing if running_first else np.zeros(len(table), dtype=bool)
    after = np.zeros(len(table), dtype=bool) if last is None else last
    order = sorted((bool(after[i]), not first[i], float(per_task[i]), table.machine[i], i)
                   for i in np.flatnonzero(~marked).tolist())
    reserved = 0.0
    keep: list[str] = []
    released = np.flatnonzero(marked).tolist()
    for _after, _first, _per_task, name, i in order:
        cost = float(reservation[i])
        if cost == 0.0 or fits(reserved + cost, money_left):
            reserved += cost
            keep.append(name)
        else:
            released.append(i)
    release = tuple(ReleaseDue(table.machine[i], float(release_at[i]), float(edge[i])) for i in released)
    return ReleasePlan(tuple(keep), release, money_left, reserved)
