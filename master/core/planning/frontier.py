"""Pareto frontiers of one billing group's machine counts: the inner part of the bounded knapsack
(seed 000 "BaTS" §2.3, Theorem 1; seed 003 §3 for the Pareto set).

How this works. Clusters that share an ATU length form a billing group; for a group, every
configuration (machines per cluster, each up to its max) has a weight W (its price per ATU, in
integer money units) and a speed S (tasks per second, the sum of a_i / T_i). Only the points where
S beats every cheaper W can be on the fastest-within-budget frontier, and :func:`group_frontier`
keeps just those (:func:`front2`, or :func:`front3` when an overall machine limit also counts
machines); :func:`group_frontier_capped` does the same when the limit binds. The planner
(:mod:`.planner`) then combines the groups' frontiers. Pure numpy, no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .clusters import ClusterPlan

_SPEED_TOL = 1e-12  # relative: speeds (and makespans) this close are equal
_INT_LIMIT = 2**62


def group_frontier(members: Sequence[int], clusters: Sequence[ClusterPlan], units: Sequence[int],
                    limits: Sequence[int], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (W, S, configuration) points of one billing group where S beats every cheaper W."""
    weight = np.zeros(1, dtype=np.int64)
    speed = np.zeros(1)
    config = np.zeros((1, n), dtype=np.int32)
    if sum(units[i] * limits[i] for i in members) >= _INT_LIMIT:
        raise ValueError("prices times machine counts are too large to plan with")
    for i in members:
        left, chunk = limits[i], 1
        while left > 0:
            q = min(chunk, left)  # binary split of the bounded item: 1, 2, 4, ..., rest
            left -= q
            chunk *= 2
            added = config.copy()
            added[:, i] += q
            weight = np.concatenate([weight, weight + q * units[i]])
            speed = np.concatenate([speed, speed + q * clusters[i].speed])
            config = np.concatenate([config, added])
            order = np.lexsort((-speed, weight))  # cost per ATU up, speed down
            sorted_speed = speed[order]
            previous = np.empty_like(sorted_speed)
            previous[0] = -1.0
            previous[1:] = np.maximum.accumulate(sorted_speed)[:-1]
            keep = order[sorted_speed > previous * (1 + _SPEED_TOL)]
            weight, speed, config = weight[keep], speed[keep], config[keep]
    return weight, speed, config


def front2(weight: np.ndarray, speed: np.ndarray) -> np.ndarray:
    """Indices of the points whose speed beats every point with lower-or-equal W (cheapest first)."""
    order = np.lexsort((-speed, weight))
    sorted_speed = speed[order]
    previous = np.empty_like(sorted_speed)
    previous[0] = -1.0
    previous[1:] = np.maximum.accumulate(sorted_speed)[:-1]
    return order[sorted_speed > previous * (1 + _SPEED_TOL)]


def front3(weight: np.ndarray, speed: np.ndarray, count: np.ndarray,
            order: np.ndarray | None = None) -> np.ndarray:
    """Indices of the points that no other point beats in (W, S, machine count), see the module doc.

    One pass per machine count, smallest first: a point is kept when its speed beats every point
    of its own count with lower-or-equal W (as :func:`front2`) and the staircase of the points
    kept at smaller counts (the best speed for each W, found by a binary search); the kept ones
    are then merged into the staircase. ``order``: the points by count, then W, then speed
    down, when the caller knows it. The result is in that order, one point per (count, W)."""
    if order is None:
        order = np.lexsort((-speed, weight, count))
    w, s, c = weight[order], speed[order], count[order]
    edges = [0, *(np.flatnonzero(np.diff(c)) + 1).tolist(), len(c)]
    kept = np.zeros(len(c), dtype=bool)
    stair_w = np.zeros(0, dtype=w.dtype)  # increasing W, increasing S: the best S for W and below
    stair_s = np.zeros(0)
    for lo, hi in itertools.pairwise(edges):
        lw, ls = w[lo:hi], s[lo:hi]
        previous = np.empty_like(ls)
        previous[0] = -1.0
        previous[1:] = np.maximum.accumulate(ls)[:-1]
        if len(stair_w):
            at = np.searchsorted(stair_w, lw, side="right") - 1
            previous = np.maximum(previous, np.where(at >= 0, stair_s[np.maximum(at, 0)], -1.0))
        better = ls > previous * (1 + _SPEED_TOL)
        kept[lo:hi] = better
        if better.any() and hi < len(c):
            # Two runs sorted by W; at an equal W the new point is the faster (it beat the stair).
            merged_w = np.concatenate([stair_w, lw[better]])
            by_w = np.argsort(merged_w, kind="stable")
            merged_w, merged_s = merged_w[by_w], np.concatenate([stair_s, ls[better]])[by_w]
            previous = np.empty_like(merged_s)
            previous[0] = -1.0
            previous[1:] = np.maximum.accumulate(merged_s)[:-1]
            front = merged_s > previous * (1 + _SPEED_TOL)
            stair_w, stair_s = merged_w[front], merged_s[front]
    return order[kept]


def merge_order(weight: np.ndarray, speed: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The order of :func:`front3` for a front followed by a shifted copy of part of it.

    Both runs are sorted by (count, W, speed down) with one point per (count, W), so a stable
    sort on one integer key merges them in linear time; a key met twice (once per run) puts the
    faster point first."""
    span = int(weight.max()) + 1
    if (int(count.max()) + 1) * span >= _INT_LIMIT:
        return np.lexsort((-speed, weight, count))
    key = count * span + weight
    order = np.argsort(key, kind="stable")
    key, fast = key[order], speed[order]
    swap = np.flatnonzero((key[1:] == key[:-1]) & (fast[1:] > fast[:-1]))
    order[swap], order[swap + 1] = order[swap + 1], order[swap].copy()
    return order


def group_frontier_capped(members: Sequence[int], clusters: Sequence[ClusterPlan], units: Sequence[int],
                           limits: Sequence[int], n: int, cap: int,
                           outside: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`group_frontier` under an overall cap: the (W, S, configuration, machine count) points
    of one billing group that no other point beats in all of W, S and count, counts <= ``cap``.

    ``outside``: how many machines the other groups can add. Counts are compared clamped from
    below at ``cap - R``, R the machines still to come (this group's items not merged yet plus
    ``outside``): a point with c' <= cap - R machines can take any completion that fits beside any
    other point, so it beats points with more machines too (module doc)."""
    weight = np.zeros(1, dtype=np.int64)
    speed = np.zeros(1)
    config = np.zeros((1, n), dtype=np.int32)
    count = np.zeros(1, dtype=np.int64)
    if sum(units[i] * limits[i] for i in members) >= _INT_LIMIT:
        raise ValueError("prices times machine counts are too large to plan with")
    to_come = outside + sum(limits[i] for i in members)
    for i in members:
        left, chunk = limits[i], 1
        while left > 0:
            q = min(chunk, left)  # the same binary split as without a cap
            left -= q
            chunk *= 2
            to_come -= q
            fits = count + q <= cap  # more machines never bring a count back under the cap
            added = config[fits]
            added[:, i] += q  # (boolean indexing copies)
            weight = np.concatenate([weight, weight[fits] + q * units[i]])
            speed = np.concatenate([speed, speed[fits] + q * clusters[i].speed])
            count = np.concatenate([count, count[fits] + q])
            config = np.concatenate([config, added])
            if to_come < cap:  # clamped: many points share a (count, W) key, so no linear merge
                compared = np.maximum(count, cap - to_come)
                keep = front3(weight, speed, compared)
            else:
                keep = front3(weight, speed, count, merge_order(weight, speed, count))
            weight, speed, config, count = weight[keep], speed[keep], config[keep], count[keep]
    return weight, speed, config, count
