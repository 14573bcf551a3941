"""Monitoring the plan's execution and keeping the budget a ceiling (seed 000 "BaTS", §3.1).

Pure math: no I/O, no clock (every uptime is measured by the caller at its ``now``), no
randomness; stdlib and numpy only.

How this works. Every monitoring interval the core describes each live machine as a
:class:`MachineView` (its uptime up, the tasks it executed nt, the seconds it spent on them rt,
the elapsed time tau of the task it is running, the ATUs the plan still gives it, and whether it
is marked for release) and asks :func:`check` whether the paid-for time plus the time the plan
still buys covers the bag. A per-cluster :class:`Billing` (ATU, price, optional minimum charge)
turns uptimes into money, and ``tau_e(cluster, elapsed)`` estimates the full runtime of a task
that has run ``elapsed`` seconds (plug in :meth:`RuntimeEstimate.tail_estimate`).

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
  :func:`bats.master.core.atus_begun` counts it), so delta is 0 there instead of a whole ATU.
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
otherwise. So the most expensive machines per unit of speed go first, a cheaper machine is never
released to keep a dearer one, and the reservations never exceed the money left. A released
machine is let go ``release_margin_s`` before its next edge (at once when that moment has
passed). Decisions are redone every tick; money only goes down, so a kept machine's next ATU
stays paid for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

_EPS = 1e-9  # guards ceil()/floor() against float noise on an exact integer
_MONEY_TOL = 1e-9  # relative tolerance of money comparisons (0.1 + 0.2 fits in 0.3)

TauE = Callable[[str, float], float]
"""tau_e(cluster, elapsed_s): the expected full runtime of a task that has run ``elapsed_s``."""


@dataclass(frozen=True, slots=True)
class Billing:
    """How one cluster charges: ``price`` per ATU of ``atu_s`` seconds, at least ``min_charge_s``.

    Every begun ATU is paid, the first one at once; with a minimum charge the machine is billed
    for at least ``min_charge_s`` seconds (EC2 per-second billing: ``Billing(1, p, 60)``).
    """

    atu_s: float
    price: float
    min_charge_s: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.atu_s) and self.atu_s > 0):
            raise ValueError(f"the ATU must be > 0 seconds, got {self.atu_s!r}")
        if not (math.isfinite(self.price) and self.price >= 0):
            raise ValueError(f"the price must be a finite number >= 0, got {self.price!r}")
        if not (math.isfinite(self.min_charge_s) and self.min_charge_s >= 0):
            raise ValueError(f"the minimum charge must be >= 0 seconds, got {self.min_charge_s!r}")

    def atus_paid(self, uptime_s: float) -> int:
        """ATUs paid for a machine up ``uptime_s``: ceil(max(uptime, min_charge) / ATU), >= 1."""
        billed = max(uptime_s, self.min_charge_s)
        return max(1, math.ceil(billed / self.atu_s - _EPS))

    def cost(self, uptime_s: float) -> float:
        return self.atus_paid(uptime_s) * self.price

    def paid_until(self, uptime_s: float) -> float:
        """The uptime up to which a machine up ``uptime_s`` is paid."""
        return self.atus_paid(uptime_s) * self.atu_s

    def next_edge(self, uptime_s: float) -> float:
        """The uptime at which the next paid ATU would start: the end of the paid time (exactly on
        an edge the next ATU has not begun yet, so that edge is returned)."""
        return self.paid_until(uptime_s)


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


def check(
    machines: Sequence[MachineView],
    n_remaining: int,
    billings: Mapping[str, Billing],
    tau_e: TauE,
    delta_n: int = 0,
    *,
    spent_before: float = 0.0,
    release_margin_s: float = 0.0,
) -> MonitorResult:
    """N_e <= N_p + delta_n for the live ``machines`` (§3.1).

    ``n_remaining`` is N_r, the tasks not yet started; ``delta_n`` the rounding problem's dN when
    the operator accepted the cushion (0 otherwise); ``spent_before`` the money of machines no
    longer active (and of earlier phases); ``release_margin_s`` how long before its edge a marked
    machine is let go.
    """
    in_paid = n_p = cut_off = 0
    spent = committed = float(spent_before)
    for m in machines:
        o = outlook(m, billings[m.cluster], tau_e, release_margin_s)
        in_paid += o.in_paid_time
        n_p += o.potential
        cut_off += o.cut_off
        spent += o.spent
        committed += o.committed
    n_e = max(0, n_remaining + cut_off - in_paid)
    return MonitorResult(n_e, n_p, n_e <= n_p + delta_n, spent, committed, cut_off)


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
    release_at_uptime_s: float  # max(uptime, edge - margin): at once when already past
    edge_uptime_s: float  # where its next ATU would begin


@dataclass(frozen=True, slots=True)
class ReleasePlan:
    keep: tuple[str, ...]  # machines whose next ATU(s) are paid for, cheapest per task first
    release: tuple[ReleaseDue, ...]  # the others, marked ones included
    money_left: float  # budget + cushion - spent
    reserved: float  # what the kept machines' next ATUs cost; <= money_left


def atus_to_reserve(m: MachineView, billing: Billing, horizon_s: float = 0.0, release_margin_s: float = 0.0) -> int:
    """ATUs ``m`` may start before a later decision can still let it go in time: the next one, and
    every one beginning within ``horizon_s + release_margin_s`` from now."""
    up = max(0.0, float(m.uptime_s))
    return max(1, billing.atus_paid(up + horizon_s + release_margin_s) - billing.atus_paid(up))


def plan_releases(
    machines: Sequence[MachineView],
    billings: Mapping[str, Billing],
    tau_e: TauE,
    budget: float,
    cushion: float = 0.0,
    *,
    spent_before: float = 0.0,
    release_margin_s: float = 0.0,
    horizon_s: float = 0.0,
) -> ReleasePlan:
    """Which live machines keep going and which are let go before their next edge, so that the
    money spent plus the kept machines' next ATUs never exceeds budget + cushion.

    Rule (module docstring): cheapest per task first, each kept if its reservation still fits,
    released otherwise; machines marked for release are always released. ``horizon_s`` is the
    time to the next decision: every ATU a kept machine starts within it is reserved.
    """
    spent = float(spent_before)
    candidates: list[tuple[float, str, int, float]] = []  # (cost per task, id, index, reservation)
    release: list[ReleaseDue] = []
    for index, m in enumerate(machines):
        billing = billings[m.cluster]
        spent += billing.cost(max(0.0, float(m.uptime_s)))
        if m.marked_for_release:
            release.append(_due(m, billing, release_margin_s))
            continue
        speed = outlook(m, billing, tau_e).speed
        per_task = billing.price / (billing.atu_s * speed) if speed > 0 else math.inf
        reservation = atus_to_reserve(m, billing, horizon_s, release_margin_s) * billing.price
        candidates.append((per_task, m.machine, index, reservation))
    money_left = budget + cushion - spent
    reserved = 0.0
    keep: list[str] = []
    for _per_task, name, index, reservation in sorted(candidates):
        if reservation == 0.0 or fits(reserved + reservation, money_left):  # a free ATU never hurts
            reserved += reservation
            keep.append(name)
        else:
            m = machines[index]
            release.append(_due(m, billings[m.cluster], release_margin_s))
    return ReleasePlan(tuple(keep), tuple(release), money_left, reserved)


def _due(m: MachineView, billing: Billing, release_margin_s: float) -> ReleaseDue:
    up = max(0.0, float(m.uptime_s))
    edge = billing.next_edge(up)
    return ReleaseDue(m.machine, max(up, edge - release_margin_s), edge)
