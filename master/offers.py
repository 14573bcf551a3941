"""Composing pools' offers for a deadline-constrained bag: seed 002 §IV (OffersNoLB, OffersWithPLB,
OffersWithDPLB, Algorithm 1). Pure math: no I/O, no clock, no randomness.

How this works (seed ``002_afdcd27f04e6421a.txt`` §III-A, §IV). A pool that does not reveal its
load answers a bag (tasks, runtime, deadline) with offers: (number of tasks, completion time),
e.g. for 100/75/50/25/10 % of the bag, the completion being the deadline when it can be met.
:func:`compose` turns the offers of every pool into one assignment of the bag's tasks:

* **OffersNoLB** (§IV-A, the deadline cannot be met): all offers, those that meet the deadline
  first by decreasing size, then the others by increasing completion; everything after the first
  offer that can take the whole bag is dropped; composites are built in that order, at most one
  offer per pool, each offer taking what is left of the bag up to its size; an offer whose pool is
  in a composite already forks a copy without that pool's offer (that is how Table I's second
  composite arises). The complete composite with the earliest completion is chosen, the first
  of equals.
* **OffersWithPLB** (§IV-B, the deadline can be met, nothing known about the pools): only the
  offers that meet the deadline (the largest per pool); each gets P = size / total offered of the
  bag.
* **OffersWithDPLB** (Algorithm 1, the pools publish their total capacity): per group of offers of
  the same size, P = the group's share of the offered tasks, split within the group by each
  pool's share of the group's capacity (DP), the largest pools first, capped at the offer's size.

Tasks are whole: shares are rounded down and the tasks left go, one each, to the offers with
room, largest share remainder first, so every assignment sums to the bag and never exceeds an
offer. This module is the policy only: generating offers (EDF over a pool's known jobs) and handing
each pool its share in the master and the simulator are not built yet.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Offer:
    pool: str
    tasks: int
    completion: float  # when the pool would finish that many tasks


@dataclass(frozen=True)
class Composite:
    """The chosen offers and how many tasks each pool gets."""

    policy: str  # "OffersNoLB", "OffersWithPLB" or "OffersWithDPLB"
    assigned: dict[str, int]  # pool -> tasks
    completion: float  # the latest completion among the offers used
    offers: tuple[Offer, ...]


def _sort_no_lb(offers: Sequence[Offer], deadline: float) -> list[Offer]:
    meets = sorted((o for o in offers if o.completion <= deadline), key=lambda o: -o.tasks)
    late = sorted((o for o in offers if o.completion > deadline), key=lambda o: o.completion)
    return meets + late  # sorted() is stable: equal offers keep the pools' order


def offers_no_lb(offers: Sequence[Offer], n_tasks: int, deadline: float) -> Composite | None:
    """§IV-A: the composite that finishes the bag earliest (None if no composite covers it)."""
    ordered = _sort_no_lb(offers, deadline)
    whole = next((k for k, o in enumerate(ordered) if o.tasks >= n_tasks), None)
    if whole is not None:
        ordered = ordered[:whole + 1]
    composites: list[list[Offer]] = [[]]
    for offer in ordered:
        for members in list(composites):
            if _covered(members, n_tasks) >= n_tasks:
                continue
            same = [m for m in members if m.pool == offer.pool]
            if not same:
                members.append(offer)
                continue
            fork = [m for m in members if m.pool != offer.pool] + [offer]
            if fork not in composites:
                composites.append(fork)
    best: Composite | None = None
    for members in composites:
        assigned = _fill(members, n_tasks)
        if sum(assigned.values()) < n_tasks:
            continue
        used = [m for m in members if assigned.get(m.pool, 0) > 0]
        completion = max(m.completion for m in used)
        if best is None or completion < best.completion:
            best = Composite("OffersNoLB", assigned, completion, tuple(used))
    return best


def _covered(members: Sequence[Offer], n_tasks: int) -> int:
    return min(n_tasks, sum(m.tasks for m in members))


def _fill(members: Sequence[Offer], n_tasks: int) -> dict[str, int]:
    """Each offer, in order, takes what is left of the bag up to its size."""
    left = n_tasks
    assigned: dict[str, int] = {}
    for m in members:
        take = min(m.tasks, left)
        if take > 0:
            assigned[m.pool] = take
            left -= take
    return assigned


def _meeting(offers: Sequence[Offer], deadline: float) -> list[Offer]:
    """The largest offer per pool that meets the deadline, in the pools' order."""
    best: dict[str, Offer] = {}
    for o in offers:
        if o.completion <= deadline and (o.pool not in best or o.tasks > best[o.pool].tasks):
            best[o.pool] = o
    return list(best.values())


def _whole(shares: Mapping[str, float], caps: Mapping[str, int], n_tasks: int) -> dict[str, int]:
    """Whole tasks from fractional shares: floors, then one each to the largest remainders with room."""
    assigned = {pool: min(caps[pool], math.floor(share + 1e-9)) for pool, share in shares.items()}
    left = n_tasks - sum(assigned.values())
    while left > 0:
        room = [p for p in shares if assigned[p] < caps[p]]
        if not room:
            break
        room.sort(key=lambda p: -(shares[p] - assigned[p]))
        for p in room:
            if left == 0:
                break
            assigned[p] += 1
            left -= 1
    return assigned


def offers_with_plb(offers: Sequence[Offer], n_tasks: int, deadline: float) -> Composite | None:
    """§IV-B: each offer meeting the deadline gets size / total offered of the bag."""
    meeting = _meeting(offers, deadline)
    total = sum(o.tasks for o in meeting)
    if total < n_tasks:
        return None
    shares = {o.pool: o.tasks * n_tasks / total for o in meeting}
    assigned = _whole(shares, {o.pool: o.tasks for o in meeting}, n_tasks)
    return _composite("OffersWithPLB", assigned, meeting)


def offers_with_dplb(offers: Sequence[Offer], n_tasks: int, deadline: float,
                     capacity: Mapping[str, float]) -> Composite | None:
    """Algorithm 1: P per group of equal offer sizes, DP by the pools' capacity within a group."""
    meeting = _meeting(offers, deadline)
    total = sum(o.tasks for o in meeting)
    if total < n_tasks:
        return None
    order = sorted(meeting, key=lambda o: (-o.tasks, -capacity.get(o.pool, 0.0)))
    shares: dict[str, float] = {}
    for size in sorted({o.tasks for o in order}, reverse=True):
        group = [o for o in order if o.tasks == size]
        p = sum(o.tasks for o in group) / total  # line 3
        left = p * n_tasks  # line 4
        power = sum(capacity.get(o.pool, 0.0) for o in group)  # line 5
        for k, o in enumerate(group):
            if k == len(group) - 1:  # lines 7-8
                n = left
            else:  # lines 10-12
                dp = capacity.get(o.pool, 0.0) / power if power > 0 else 1.0 / len(group)
                n = dp * p * n_tasks
            n = min(n, o.tasks)  # lines 13-14
            shares[o.pool] = n
            left -= n  # line 16
    assigned = _whole(shares, {o.pool: o.tasks for o in meeting}, n_tasks)
    return _composite("OffersWithDPLB", assigned, order)


def _composite(policy: str, assigned: dict[str, int], offers: Sequence[Offer]) -> Composite:
    used = tuple(o for o in offers if assigned.get(o.pool, 0) > 0)
    return Composite(policy, {p: n for p, n in assigned.items() if n > 0},
                     max((o.completion for o in used), default=0.0), used)


def compose(offers: Sequence[Offer], n_tasks: int, deadline: float,
            capacity: Mapping[str, float] | None = None) -> Composite | None:
    """§IV: OffersNoLB when the offers that meet the deadline cannot hold the bag, else
    OffersWithDPLB when the pools published their capacity, else OffersWithPLB."""
    if n_tasks <= 0:
        raise ValueError("the number of tasks must be >= 1")
    if sum(o.tasks for o in _meeting(offers, deadline)) < n_tasks:
        return offers_no_lb(offers, n_tasks, deadline)
    if capacity:
        return offers_with_dplb(offers, n_tasks, deadline, capacity)
    return offers_with_plb(offers, n_tasks, deadline)
