"""Every configuration of a small pool, priced from scratch: what the planner's tests compare
its exact answers with (seed 000 §2.3's cost model, seed 003's overall machine limit)."""

from __future__ import annotations

import itertools
import math

EPS = 1e-9


def configurations(clusters, units, n_tasks, cap=None):
    """(speed, makespan, cost in integer ``units`` per ATU, config) of every configuration with at
    least one machine, within each cluster's max (and at most ``cap`` machines in all)."""
    rows = []
    for config in itertools.product(*(range(min(c.max, n_tasks) + 1) for c in clusters)):
        if cap is not None and sum(config) > cap:
            continue
        speed = math.fsum(a / c.mean_s for a, c in zip(config, clusters))
        if speed == 0:
            continue
        makespan = n_tasks / speed
        cost = sum(a * m * math.ceil(max(makespan, c.min_charge_s) / c.atu_s - EPS)
                   for a, m, c in zip(config, units, clusters))
        rows.append((speed, makespan, cost, config))
    return rows


def pareto_points(rows):
    """The (makespan, cost) points no other row beats in both, fastest first."""
    points = []
    for _speed, makespan, cost, _config in sorted(rows, key=lambda r: (r[1], r[2])):
        if points and cost >= points[-1][1]:
            continue
        if points and makespan <= points[-1][0] * (1 + 1e-12):
            points.pop()
        points.append((makespan, cost))
    return points
