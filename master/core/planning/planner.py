"""Budget estimates and schedules: the bounded-knapsack planner of seed 000 "BaTS" §2.3 and §4.3.

Pure math, no I/O, no clock, no randomness. Input: per cluster its mean task runtime T_i (seconds,
from :mod:`bats.master.core.planning.estimate`), price c_i per ATU per machine, ATU length, optional minimum
charge and maximum machine count A_i; and the number of tasks N.

Estimates (§2.3, seed lines ~365-385). For a configuration {a_i}:

    T_e = N / sum_i (a_i / T_i)                      (makespan, seconds)
    B_e = sum_i a_i * c_i * u_i(T_e)                 (cost)
    u_i(t) = ceil(max(t, min_charge_i) / atu_i)      (ATUs a machine of cluster i starts in t > 0)

The paper assumes one ATU for all clusters, where B_e = ceil(T_e/ATU) * sum_i a_i c_i exactly as
printed. Real clouds differ, so each cluster is billed in its own ATUs for the makespan; the
scalar ``makespan_atu`` is ceil(T_e / ATU) for the *longest* ATU among the clusters in use (the
paper's number when all ATUs agree) and ``atus`` gives u_i per cluster in use.

Fastest configuration within a budget (the paper's modified bounded knapsack, seed lines
~387-470): maximise the speed S = sum_i a_i/T_i subject to B_e <= B, 0 <= a_i <= A_i. The paper
runs a 0-1 knapsack DP over the cost per ATU W = sum_i a_i c_i keeping the best speed P(W) per cost
level, then filters the candidates (W, P(W)) by W * ceil(N / (ATU * P(W))) <= B and takes the
fastest. We keep that idea and its exactness argument, in a form that also covers per-cluster
ATUs and float prices:

* Clusters are grouped by billing rule (atu, min_charge); within a group the cost is
  W_g * u_g(T_e). For each group we build the exact frontier of (W_g, S_g): every configuration
  of the group's clusters whose speed is strictly higher than that of every cheaper-per-ATU one.
  The bounded items are split in binary (1, 2, 4, ..., rest machines: the 0-1 reduction the paper
  cites) and merged one at a time, keeping only non-dominated points (Nemhauser-Ullmann lists):
  the list replaces the DP table over all cost levels, with the same result P(W) at every level
  where P improves.
* Why this is exact: take any configuration a. Its group parts a_g lie on or below the frontier:
  there is a frontier point with W'_g <= W_g and S'_g >= S_g. Using those, the total speed is no
  lower, so T_e and every u_g(T_e) are no higher, and the cost sum_g W'_g u_g is no higher. So an
  optimal (fastest-within-B) configuration and every Pareto point of (makespan, cost) is found
  among the combinations of group frontier points; we evaluate those exactly and filter.
* With one billing rule (the paper's setting) the candidates are that one frontier. With several,
  they are the product of the group frontiers (capped at ``MAX_CANDIDATES``; ValueError beyond).
* A cluster is never given more machines than there are tasks: A_i is taken as min(max_i, N).

An overall machine limit K (``max_machines``; seed 003 §3.1, "a limit on the overall number of
machines"): every configuration the planner returns - fastest_within, the schedules (cases a and b),
options, pareto, all_machines - has sum_i a_i <= K (:meth:`Planner.estimate` evaluates whatever it
is given). When K >= sum_i A_i it cannot bind and planning is the above, same code and speed.
Otherwise each A_i is also capped at K and:

* The (W, S) pruning is no longer safe: the point beating another may use more machines, and
  only the other may still fit beside the rest under K. So each group keeps the points that no
  other beats in all of W (lower or equal), S (higher or equal) and machine count c (lower or
  equal), and drops a point as soon as c > K (adding machines only raises c). The prune sweeps
  the counts upwards: a point is kept when its speed beats the points of its own count with
  lower-or-equal W and a staircase (the best S at or below each W) of the points kept at lower
  counts; both merged lists are already sorted, so each merge is one linear-time stable sort.
* Why this is exact: W, S and c are sums over the items, so a point beaten in all three stays
  beaten after adding any further items (the Nemhauser-Ullmann argument with one more
  coordinate), and one above K stays above it. Hence for any configuration a with sum a_i <= K
  each group has a kept point with W' <= W_g, S' >= S_g, c' <= c_g; together they use no more
  than sum c_g <= K machines, run at least as fast, so T_e and every u_g are no higher and the
  cost is no higher: the argument above with the count carried along. The candidates are the
  combinations of group points whose counts sum to at most K (counted from the groups' count
  histograms before any is built, against ``MAX_CANDIDATES``). With one billing rule, once every
  point is within K the plain (W, S) prune is safe again and is applied to the final list.
* Clamped counts: while R machines are still to come (items of the group not merged yet, plus
  what the other groups can add), a point with c' <= K - R machines fits beside every completion
  that fits beside any other point, so for pruning each count is read as max(c, K - R): a point
  beaten in W and S by one whose clamped count is no higher is dropped. Early on (R >= K) this is
  the plain rule; in the last merges most counts collapse into one, which keeps the fronts small.
* "Every machine in use" (:attr:`Planner.all_machines`, B_fastest, the "fastest" schedule, where
  case (a) stops and case (b)'s alternative) is the fastest configuration within the cap, the
  cheapest of equally fast ones; it uses exactly K machines.
* Cost: up to K + 1 points per cost level instead of one. Seed 003's pools (its six EC2 types,
  on-demand and spot at $0.003-$0.13/h, 1,000 tasks) plan exactly in 0.1-0.2 s with K = 100
  (20-100 and 40-60-100), the paper's two-cluster scenarios in 15-20 ms with K = 40.

Showing a large front: :func:`spread` picks at most 15 options (seed 003's threshold), always
with the cheapest, the fastest and the four labelled schedules, the rest farthest-first.

Complexity: sum_i ceil(log2(A_i + 1)) merges, each O(F log F) for a frontier of F points, where
F <= min(prod_i (A_i + 1), 1 + sum_i A_i c_i / delta) (delta: the money resolution below) - in
practice a few hundred to a few thousand points, against the paper's
O(sum_i A_i * sum_i c_i A_i) table. Every query (fastest within B, Pareto set) is then O(F) over
numpy arrays. Speeds are floats; two speeds within a relative 1e-12 count as equal.

Reuse across re-plans: a run plans again and again with new runtime estimates and fewer tasks
left, and with per-second or per-minute billing every cluster is often its own billing group
(boots differ), whose frontier is every count up to its limit whatever its speed. The product of
the group frontiers (which point of each group every candidate combines, and its machines) is
kept for the latest few sets of frontier configurations (:func:`_shape_of`); a planner whose
frontiers hold the same configurations takes it and only sums the speeds, in the same order as
building it anew (the same floats), and prices the makespans one group (one column) at a time.
The Pareto set first sifts out the candidates that cost as much as one in a faster makespan bin,
sorts the rest and walks only the rows that cost less than every faster one (a running minimum).

Money resolution: every price is turned into an integer number of units of 10^-k currency, with k
the smallest in 0..9 for which all prices are whole (prices typed with up to 9 decimals are
therefore exact; finer ones are rounded to 1e-9), divided by the prices' common divisor. Costs and
budgets are compared in these integer units, so 1632 <= 0.85 * 1920 never fails on float noise; a
budget is converted through its shortest decimal form and rounded down to a whole unit.

The rounding problem (§2.3, seed lines ~480-560). For a configuration with makespan T_e a machine
of cluster k is paid for M_k = u_k(T_e) * atu_k seconds (the paper's M ATUs), in which it runs on
average n_k = floor(M_k / T_k) tasks; dN = N - sum_k a_k n_k. (M is the schedule's *output*
makespan, the ATUs its configuration is paid for, not the possibly longer time floor(B / W) the
budget would buy; Theorem 1's proof uses N <= sum_k a_k M / T_k, which holds for both.) Theorem
1: dN <= sum_k a_k (as M_k >= T_e it holds per cluster ATU too; tested as a property). An
extension: a cluster's boot time b_k (``ClusterPlan.boot_s``: the time a new machine is billed
before it runs a task) comes out of M_k, n_k = floor((M_k - b_k) / T_k), and dN may then pass
Theorem 1's bound. When dN > 0:

* case (a), the configuration does not yet use every machine of every cluster ("has not reached
  the upper limit of machines on all participating types": we read "participating types" as all
  configured clusters, so (32, 0) of S4-1 is case a): raise the budget in steps of 1 % of the
  schedule's reference budget - B_min1 for the cheap schedules, B_fastest for the fast ones, as
  in §4.3 "in 1% increments from 80% of B_fastest ... at 0.85*B_fastest" - and re-solve, until
  dN <= 0 or the threshold (``max_raise``, 20 % of the reference by default; the paper names a
  threshold but no value) is reached, or the solution uses every machine (no more money helps).
  The cushion is the raise, B_i - B: Table 2 lists S3-4's Sched1 as B_min1 = $513 with a $11
  cushion for the (0, 29) configuration found at 1.02 * B_min1 = $523.26 (the paper rounds up to
  whole dollars; we keep the exact raise, $10.26).
* case (b), every machine is in use, or case (a) found nothing within the threshold (then the
  *original* configuration is kept): the cushion pays for running the dN tasks that do not fit,
  one each on dN machines of the configuration (Theorem 1 guarantees there are enough), each
  extended by the ATUs it needs to run one more task, ceil((b_k + (n_k + 1) T_k) / atu_k) - u_k
  (>= 1), choosing the cheapest machines first (past the bound, further passes add one more
  task per slot, at the ATUs it adds). This is §4.3's S4-1 Sched4: dN = 3 on (32, 32) gives
  "3 machines from cluster1 running for at most one more ATU", $9.

The four schedules of §4.3 (seed lines ~1612-1645): B_min1 is "the budget needed for the bag's
execution on 1 machine of the most profitable type"; we take the cluster whose single machine runs
the bag for the least money, min_i c_i u_i(N T_i) (the most profitable by 1/(T_i c_i) up to ATU
rounding). B_fastest is the cost of the configuration using all machines (under an overall cap, the
fastest one within it). The schedules are the
fastest configurations within B_min1 ("cheapest"), 1.2 B_min1 ("+20%"), 0.8 B_fastest
("fastest-20%") and B_fastest ("fastest"), each refined for dN as above. :func:`options` adds
every Pareto-optimal configuration of (makespan_s, cost) ("pareto"); a Pareto option *is* a
configuration (raising its budget would give another Pareto point), so its cushion is case (b)'s.
Options that come out as the same configuration are merged (first label kept, the others in
``also``), sorted by cost then makespan and numbered from 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from fractions import Fraction

import numpy as np

from .. import billing
from ..option import Option
from . import DEFAULT_MAX_RAISE, frontier
from .clusters import ClusterPlan

RAISE_STEP = Fraction(1, 100)  # case (a) steps: 1 % of the reference budget
MAX_CANDIDATES = 4_000_000  # product of group frontiers beyond which planning refuses
_MAX_DECIMALS = 9
_SPEED_TOL = 1e-12  # relative: speeds (and makespans) this close are equal
_INT_LIMIT = 2**62
_BINS = 4096  # makespan bins that sift the candidates before the Pareto set's sort


@dataclass(frozen=True)
class Estimate:
    """A configuration and what it is expected to take: T_e, B_e, dN."""

    machines: dict[str, int]  # every cluster, 0 included
    makespan_s: float  # T_e
    makespan_atu: int  # ceil(T_e / longest ATU in use)
    atus: dict[str, int]  # u_i per cluster in use
    cost: float  # B_e
    delta_n: int  # N - sum a_k floor(M_k / T_k); <= 0 means no rounding risk


class Planner:
    """All planning questions for one set of clusters and N tasks; builds the candidates once."""

    def __init__(self, clusters: Sequence[ClusterPlan], n_tasks: int, max_machines: int | None = None) -> None:
        if isinstance(n_tasks, bool) or not isinstance(n_tasks, int) or n_tasks < 1:
            raise ValueError(f"the number of tasks must be an integer >= 1, got {n_tasks!r}")
        if max_machines is not None:
            if isinstance(max_machines, bool) or not isinstance(max_machines, (int, np.integer)) or max_machines < 0:
                raise ValueError(f"the overall machine limit must be an integer >= 0, got {max_machines!r}")
            max_machines = int(max_machines)
        names = [c.name for c in clusters]
        if not names:
            raise ValueError("no clusters to plan with")
        if len(set(names)) != len(names):
            raise ValueError(f"cluster names repeat: {names}")
        self.clusters = tuple(clusters)
        self.n_tasks = n_tasks
        self._index = {name: i for i, name in enumerate(names)}
        self._scale, self._unit_div, self._units = _money_units([c.price for c in clusters])
        # A cluster never needs more machines than there are tasks, nor than the overall limit.
        self.max_machines = max_machines
        cap = n_tasks if max_machines is None else min(n_tasks, max_machines)
        self._limits = [min(c.max, cap, -(-n_tasks // c.slots)) for c in clusters]  # no machine without a task
        # The overall limit matters only when it is below the sum of the limits; otherwise it is
        # planned exactly as without one (same code, same speed).
        self._cap = max_machines if max_machines is not None and max_machines < sum(self._limits) else None
        self._top = list(self._limits)  # "every machine in use"; under a binding cap set when built
        self._built = False  # the candidates are built on the first question that needs them

    def cluster(self, name: str) -> ClusterPlan:
        """The cluster called ``name``."""
        return self.clusters[self._index[name]]

    # ---------------------------------------------------------------- money units
    def money(self, units: int | Fraction) -> float:
        """Units -> currency."""
        if isinstance(units, Fraction):
            return float(units * self._unit_div / self._scale)
        return int(units) * self._unit_div / self._scale  # int / int: correctly rounded

    def to_units(self, amount: float | Fraction) -> Fraction:
        """Currency -> units, exact (a float through its shortest decimal form)."""
        if not isinstance(amount, Fraction) and not math.isfinite(amount):
            raise ValueError(f"a budget must be a finite amount, got {amount!r}")
        value = amount if isinstance(amount, Fraction) else Fraction(Decimal(repr(float(amount))))
        return value * self._scale / self._unit_div

    # ---------------------------------------------------------------- one configuration
    def _config(self, machines: Mapping[str, int]) -> list[int]:
        config = [0] * len(self.clusters)
        for name, count in machines.items():
            if name not in self._index:
                raise ValueError(f"unknown cluster {name!r} (known: {', '.join(self._index)})")
            if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
                raise ValueError(f"cluster {name!r}: machine count must be an integer >= 0, got {count!r}")
            config[self._index[name]] = int(count)
        return config

    def _cost_units(self, config: Sequence[int]) -> tuple[float, list[int], int]:
        """(T_e, u_i per cluster, B_e in units) of a configuration."""
        speed = math.fsum(a * c.speed for a, c in zip(config, self.clusters))
        if speed <= 0:
            raise ValueError("a configuration needs at least one machine")
        makespan = self.n_tasks / speed
        atus = [c.units(makespan + c.priced_overhead_s) if a else 0 for a, c in zip(config, self.clusters)]
        cost = sum(a * w * u for a, w, u in zip(config, self._units, atus))
        return makespan, atus, cost

    def _delta_n(self, config: Sequence[int], atus: Sequence[int]) -> int:
        done = sum(a * c.tasks_in(u * c.atu_s) for a, u, c in zip(config, atus, self.clusters) if a)
        return self.n_tasks - done

    def estimate(self, machines: Mapping[str, int]) -> Estimate:
        """T_e, B_e, the ATUs and dN of a configuration (missing clusters count 0 machines)."""
        config = self._config(machines)
        makespan, atus, cost = self._cost_units(config)
        in_use = [i for i, a in enumerate(config) if a]
        longest = max(self.clusters[i].atu_s for i in in_use)
        return Estimate(
            machines={c.name: a for c, a in zip(self.clusters, config)},
            makespan_s=makespan,
            makespan_atu=billing.atus_spanning(makespan, longest),
            atus={self.clusters[i].name: atus[i] for i in in_use},
            cost=self.money(cost),
            delta_n=self._delta_n(config, atus),
        )

    def _cushion_units(self, config: Sequence[int], atus: Sequence[int], delta_n: int) -> int:
        """Case (b): the cheapest dN one-task extensions of the configuration's machines.

        Each slot may end one more task for the ATUs that task needs past the u_i paid (at least
        one); by Theorem 1 one pass covers dN. A boot that comes out of the paid time can leave
        more than one task per slot over, so further passes extend each slot by one more task,
        priced at the ATUs it adds to the pass before."""
        if delta_n <= 0:
            return 0
        total, left = 0, delta_n
        added = [0] * len(config)  # per cluster, the ATUs each slot's extensions have added so far
        extra_tasks = 0
        while left > 0:
            extra_tasks += 1
            extensions = []  # (price per slot, slots, cluster, ATUs added); each slot ends one task more
            for i, (a, u, w, c) in enumerate(zip(config, atus, self._units, self.clusters)):
                if a:
                    n_k = c.tasks_in(u * c.atu_s) // c.slots
                    needed = c.units(c.overhead_s + (n_k + extra_tasks) * c.mean_s) - u
                    needed = max(added[i] + (extra_tasks == 1), needed)
                    extensions.append((w * (needed - added[i]), a * c.slots, i, needed))
            extensions.sort(key=lambda extension: extension[0])
            for price, count, i, needed in extensions:
                take = min(count, left)
                total += take * price
                left -= take
                added[i] = needed
                if not left:
                    break
        return total

    # ---------------------------------------------------------------- candidates
    def _build_candidates(self) -> None:
        if self._built:
            return
        groups: dict[tuple[float, float, float], list[int]] = {}
        for i, c in enumerate(self.clusters):
            groups.setdefault(_billing_group(c), []).append(i)
        self._groups = list(groups)
        self._group_of = [self._groups.index(_billing_group(c)) for c in self.clusters]
        if self._cap is not None:
            matrix, speed, config = self._capped_candidates(list(groups.values()))
            keep = speed > 0
            self._speed, self._machines, matrix = speed[keep], config[keep], matrix[keep]
            weights = [matrix[:, g] for g in range(len(self._groups))]
        else:
            fronts = [frontier.group_frontier(members, self.clusters, self._units, self._limits, len(self.clusters))
                      for members in groups.values()]
            shape = _shape_of(fronts)
            # S of each candidate, summed over the groups in their order: the same floats as
            # adding the group frontiers one by one
            speed = fronts[0][1][shape.parts[0]]
            for (_w, s, _cfg), part in zip(fronts[1:], shape.parts[1:]):
                speed += s[part]
            parts, self._machines = shape.parts, shape.machines
            if not (speed > 0).all():  # a speed too small for a float: no candidate
                rows = np.flatnonzero(speed > 0)
                parts, self._machines, speed = tuple(part[rows] for part in parts), self._machines[rows], speed[rows]
            self._speed = speed
            weights = [w[part] for (w, _s, _cfg), part in zip(fronts, parts)]
        # per group, one column at a time: W_g of every candidate, and u_g at its makespan
        makespan = self.n_tasks / self._speed
        units = [billing.units_array(makespan + overhead, atu, min_charge)
                 for atu, min_charge, overhead in self._groups]
        top = max((int(w.max(initial=0)) for w in weights), default=0)
        bound = top * max((int(u.max(initial=0)) for u in units), default=0) * len(self._groups)
        if bound < _INT_LIMIT:
            cost = np.zeros(len(makespan), dtype=np.int64)
            for w, u in zip(weights, units):
                cost += w * u
        else:  # exact Python integers when int64 could overflow
            cost = (np.column_stack(weights).astype(object) * np.column_stack(units).astype(object)).sum(axis=1)
        self._makespan = makespan
        self._group_units = units
        self._cost = cost
        self._built = True
        if self._cap is not None:  # "every machine in use": the fastest configuration at the cap
            near = np.flatnonzero(self._speed >= self._speed.max() * (1 - _SPEED_TOL))
            row = int(near[np.argmin(self._cost[near])]) if len(near) > 1 else int(near[0])
            self._top = [int(a) for a in self._machines[row]]

    def _units_at(self, rows: np.ndarray) -> np.ndarray:
        """u_i of the candidates ``rows``, per cluster (that of its billing group)."""
        return np.column_stack([units[rows] for units in self._group_units])[:, self._group_of]

    def _capped_candidates(self, groups: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(W per group, S, configuration) of the candidates under the overall cap (module doc)."""
        cap = self._cap
        assert cap is not None
        n = len(self.clusters)
        # The front is the same in any merge order; the most profitable clusters first (least
        # money per task) keep the intermediate fronts smaller: about 15 % faster on seed 003's mix.
        room = [min(cap, sum(self._limits[i] for i in members)) for members in groups]
        fronts = [frontier.group_frontier_capped(sorted(members, key=lambda i: self._units[i] / self.clusters[i].speed),
                                         self.clusters, self._units, self._limits, n, cap, sum(room) - room[g])
                  for g, members in enumerate(groups)]
        # The exact number of combinations within the cap, before building any: convolve the
        # fronts' histograms of machine counts (floats: only compared with MAX_CANDIDATES).
        within = np.zeros(cap + 1)
        within[0] = 1.0
        for front in fronts:
            within = np.convolve(within, np.bincount(front[3], minlength=cap + 1).astype(float))[:cap + 1]
        size = within.sum()
        if size > MAX_CANDIDATES:
            raise ValueError(f"{len(fronts)} different billing rules (ATU, min_charge) make {size:.0f} candidate "
                             f"configurations (at most {MAX_CANDIDATES}); use fewer distinct ATUs")
        weight, speed, config, count = fronts[0]
        if len(fronts) == 1:
            # One billing rule and every point within the cap: now a point with lower-or-equal W
            # and higher-or-equal S does make the other one useless (cost = W * u(T_e)).
            keep = frontier.front2(weight, speed)
            return weight[keep][:, None], speed[keep], config[keep]
        weights = weight[:, None]
        for w, s, cfg, cnt in fronts[1:]:
            order = np.argsort(cnt, kind="stable")
            w, s, cfg, cnt = w[order], s[order], cfg[order], cnt[order]
            per_left = np.searchsorted(cnt, cap - count, side="right")  # partners that keep the sum <= cap
            left = np.repeat(np.arange(len(speed)), per_left)
            starts = np.cumsum(per_left) - per_left
            right = np.arange(int(per_left.sum())) - np.repeat(starts, per_left)
            weights = np.column_stack([weights[left], w[right]])
            speed = speed[left] + s[right]
            config = config[left] + cfg[right]
            count = count[left] + cnt[right]
        return weights, speed, config

    @property
    def candidate_count(self) -> int:
        self._build_candidates()
        return len(self._speed)

    def _fastest_index(self, budget_units: Fraction) -> int | None:
        self._build_candidates()
        limit = math.floor(budget_units)
        if self._cost.dtype != object:
            limit = min(limit, _INT_LIMIT)  # every int64 cost is below it; keeps numpy from overflowing
        feasible = np.flatnonzero(self._cost <= limit)
        if not len(feasible):
            return None
        speeds = self._speed[feasible]
        best = speeds.max()
        near = feasible[speeds >= best * (1 - _SPEED_TOL)]
        return int(near[np.argmin(self._cost[near])]) if len(near) > 1 else int(near[0])

    def _config_dict(self, row: int) -> dict[str, int]:
        return {c.name: int(a) for c, a in zip(self.clusters, self._machines[row])}

    def fastest_within(self, budget: float) -> dict[str, int] | None:
        """The fastest configuration whose estimated cost B_e is within ``budget`` (None: none is).

        Among equally fast configurations the cheapest is returned."""
        row = self._fastest_index(self.to_units(budget))
        return None if row is None else self._config_dict(row)

    def fastest_fitting(self, budget: float) -> dict[str, int] | None:
        """The fastest configuration whose cost B_e is within ``budget`` and whose whole tasks fit
        in the ATUs it pays (dN <= 0: no cushion needed for the rounding problem); among equally
        fast ones the cheapest. None when none does. What an option whose budget was raised for
        its last tasks (case a) runs when the operator declines that raise."""
        self._build_candidates()
        limit = math.floor(self.to_units(budget))
        if self._cost.dtype != object:
            limit = min(limit, _INT_LIMIT)
        feasible = np.flatnonzero(self._cost <= limit)
        if not len(feasible):
            return None
        machines = self._machines[feasible].astype(np.int64)
        atus = np.where(machines > 0, self._units_at(feasible), 0)
        mean = np.array([c.mean_s for c in self.clusters])
        slots = np.array([c.slots for c in self.clusters], dtype=np.int64)
        atu = np.array([c.atu_s for c in self.clusters])
        boot = np.array([c.overhead_s for c in self.clusters])
        done = (billing.whole_array(atus * atu - boot, mean).astype(np.int64) * slots * machines).sum(axis=1)
        fits = feasible[done >= self.n_tasks]
        if not len(fits):
            return None
        speeds = self._speed[fits]
        near = fits[speeds >= speeds.max() * (1 - _SPEED_TOL)]
        return self._config_dict(int(near[np.argmin(self._cost[near])]))

    def slowest_by(self, deadline_s: float, budget: float,
                   at_least: Mapping[str, int] | None = None) -> dict[str, int] | None:
        """The slowest configuration whose makespan T_e is at most ``deadline_s`` and whose cost
        B_e is within ``budget``, with at least ``at_least`` machines on every cluster (None: none
        is); among equally slow ones the cheapest. What a run that must end by a moment moves to:
        the fewest machines that do it, not the most the money pays."""
        self._build_candidates()
        limit = math.floor(self.to_units(budget))
        if self._cost.dtype != object:
            limit = min(limit, _INT_LIMIT)
        fits = (self._cost <= limit) & (self._makespan <= deadline_s * (1 + _SPEED_TOL))
        if at_least:
            fits &= (self._machines >= np.array(self._config(at_least))).all(axis=1)
        feasible = np.flatnonzero(fits)
        if not len(feasible):
            return None
        speeds = self._speed[feasible]
        near = feasible[speeds <= speeds.min() * (1 + _SPEED_TOL)]
        return self._config_dict(int(near[np.argmin(self._cost[near])]))

    # ---------------------------------------------------------------- schedules
    @property
    def all_machines(self) -> dict[str, int]:
        """"Every machine in use": each cluster's limit; under a binding overall cap, the fastest
        configuration within it (the cheapest of equally fast ones)."""
        return {c.name: a for c, a in zip(self.clusters, self._top_config())}

    def _top_config(self) -> list[int]:
        if self._cap is not None:
            self._build_candidates()
        return self._top

    def min_budget(self) -> float | None:
        """B_min1: the bag on one machine of the cluster that runs it for the least money."""
        units = self._min_budget_units()
        return None if units is None else self.money(units)

    def _min_budget_units(self) -> int | None:
        costs = [w * c.units(self.n_tasks / c.speed + c.priced_overhead_s)  # its boot and release paid too
                 for w, c, limit in zip(self._units, self.clusters, self._limits) if limit]
        return min(costs) if costs else None

    def fastest_budget(self) -> float | None:
        """B_fastest: the cost of running the bag on all available machines (:attr:`all_machines`)."""
        if not any(self._limits):
            return None
        return self.estimate(self.all_machines).cost

    def schedule_within(self, budget: float, *, reference: float | None = None,
                        max_raise: float = DEFAULT_MAX_RAISE, label: str = "budget") -> Option | None:
        """The fastest configuration within ``budget``, refined for dN (cases a and b).

        Case (a) raises the budget in steps of 1 % of ``reference`` (default: ``budget``) up to
        ``max_raise`` times it. Returns None when no configuration fits the budget.
        """
        budget_units = self.to_units(budget)
        ref_units = budget_units if reference is None else self.to_units(reference)
        return self._schedule(budget_units, ref_units, Fraction(repr(float(max_raise))), label)

    def _schedule(self, budget_units: Fraction, ref_units: Fraction, max_raise: Fraction, label: str) -> Option | None:
        row = self._fastest_index(budget_units)
        if row is None:
            return None
        config = [int(a) for a in self._machines[row]]
        _makespan, atus, _cost = self._cost_units(config)
        delta_n = self._delta_n(config, atus)
        cushion: Fraction | int = 0
        rounding = ""
        if delta_n > 0:
            top = self._top_config()
            raised = self._raise_budget(budget_units, ref_units, max_raise) if config != top else None
            if raised is not None:
                config, cushion = raised
                rounding = "a"
            else:
                cushion = self._cushion_units(config, atus, delta_n)
                rounding = "b"
                if config != top:  # more money leads to every machine: is that cheaper in all?
                    _m, all_atus, all_cost = self._cost_units(top)
                    all_cushion = self._cushion_units(top, all_atus, self._delta_n(top, all_atus))
                    if all_cost + all_cushion < _cost + cushion and all_cost + all_cushion <= (1 + max_raise) * ref_units:
                        config, cushion = list(top), all_cost + all_cushion - budget_units
                        rounding = "a" if all_cost + all_cushion > budget_units else "b"
        estimate = self.estimate(self._as_dict(config))
        return Option(id=0, label=label, machines=estimate.machines, makespan_s=estimate.makespan_s,
                      makespan_atu=estimate.makespan_atu, cost=estimate.cost, cushion=self.money(cushion),
                      budget=self.money(budget_units), delta_n=estimate.delta_n, rounding=rounding, pareto=False)

    def _raise_budget(self, budget_units: Fraction, ref_units: Fraction,
                      max_raise: Fraction) -> tuple[list[int], Fraction] | None:
        """Case (a): B_i = B + i * 1 % * reference until dN <= 0; (configuration, B_i - B) or None."""
        step = ref_units * RAISE_STEP
        if step <= 0:
            return None
        i = 1
        while i * step <= max_raise * ref_units:
            row = self._fastest_index(budget_units + i * step)
            if row is not None:
                config = [int(a) for a in self._machines[row]]
                _makespan, atus, _cost = self._cost_units(config)
                if self._delta_n(config, atus) <= 0:
                    return config, i * step
                if config == self._top_config():
                    return None  # every machine in use: more money cannot help
            i += 1
        return None

    def _as_dict(self, config: Sequence[int]) -> dict[str, int]:
        return {c.name: a for c, a in zip(self.clusters, config)}

    def pareto(self) -> list[Estimate]:
        """Every Pareto-optimal (makespan_s, cost) configuration, fastest first; one per point."""
        self._build_candidates()
        rows = self._maybe_points()
        makespan, cost = self._makespan[rows], self._cost[rows]
        order = rows[np.lexsort((cost.astype(float), makespan))] if len(rows) else np.array([], int)
        # by makespan, then cost: a row is a point only when it costs less than every row before it
        costs = self._cost[order]
        before = np.minimum.accumulate(costs)
        cheaper = np.ones(len(order), dtype=bool)
        cheaper[1:] = costs[1:] < before[:-1]
        kept: list[int] = []
        for row in order[cheaper]:  # O(points) after the sort
            if kept and self._makespan[row] <= self._makespan[kept[-1]] * (1 + _SPEED_TOL):
                kept.pop()  # the same makespan (to float noise) for less money
            kept.append(int(row))
        return self._row_estimates(np.array(kept, dtype=np.int64))

    def _maybe_points(self) -> np.ndarray:
        """The candidates that may be Pareto points, in their order: all but those that cost as much
        as one with a strictly shorter makespan, found by binning the makespans (a row of a lower
        bin is strictly faster) and comparing each row with the cheapest of the bins below its
        own. What is left is sorted and walked by :meth:`pareto`: the running minimum of the cost
        before each row left is the same as over all rows (it is reached at rows that are left)."""
        n = len(self._cost)
        if n < _BINS or self._cost.dtype == object:
            return np.arange(n)
        low, high = float(self._makespan.min()), float(self._makespan.max())
        if not high > low:
            return np.arange(n)
        bins = np.minimum(((self._makespan - low) * (_BINS / (high - low))).astype(np.int64), _BINS - 1)
        cheapest = np.full(_BINS + 1, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(cheapest, bins + 1, self._cost)
        below = np.minimum.accumulate(cheapest)  # [b]: the least cost in the bins below bin b
        return np.flatnonzero(self._cost < below[bins])

    def _row_estimates(self, rows: np.ndarray) -> list[Estimate]:
        """:meth:`estimate` of many candidates at once, from the candidate arrays (same formulas)."""
        machines = self._machines[rows].astype(np.int64)
        in_use = machines > 0
        atus = np.where(in_use, self._units_at(rows), 0)
        mean = np.array([c.mean_s for c in self.clusters])
        slots = np.array([c.slots for c in self.clusters], dtype=np.int64)
        atu = np.array([c.atu_s for c in self.clusters])
        boot = np.array([c.overhead_s for c in self.clusters])
        done = (billing.whole_array(atus * atu - boot, mean).astype(np.int64) * slots * machines).sum(axis=1)
        makespan = self._makespan[rows]
        longest = np.where(in_use, atu, 0.0).max(axis=1)
        makespan_atu = billing.atus_spanning_array(makespan, longest).astype(np.int64)
        names = [c.name for c in self.clusters]
        result = []
        for r in range(len(rows)):
            counts = machines[r].tolist()
            result.append(Estimate(
                machines=dict(zip(names, counts)),
                makespan_s=float(makespan[r]),
                makespan_atu=int(makespan_atu[r]),
                atus={name: int(u) for name, u, a in zip(names, atus[r], counts) if a},
                cost=self.money(self._cost[rows[r]]),
                delta_n=self.n_tasks - int(done[r]),
            ))
        return result

    def options(self, max_raise: float = DEFAULT_MAX_RAISE, front: Sequence[Estimate] | None = None) -> list[Option]:
        """The four schedules of §4.3 and the Pareto set, merged by configuration, numbered from 1.

        ``front`` replaces the exact Pareto set by another estimate of it (seed 003's genetic
        algorithm, :func:`bats.master.core.planning.ga.ga_front`); ``pareto`` then means "on that front"."""
        b_min = self._min_budget_units()
        if b_min is None:
            return []
        b_fast = Fraction(self._cost_units(self._top_config())[2])
        raise_by = Fraction(repr(float(max_raise)))
        named = [("cheapest", Fraction(b_min), Fraction(b_min)),
                 ("+20%", Fraction(6, 5) * b_min, Fraction(b_min)),
                 ("fastest-20%", Fraction(4, 5) * b_fast, b_fast),
                 ("fastest", b_fast, b_fast)]
        merged: dict[tuple[int, ...], Option] = {}
        for label, budget, ref in named:
            option = self._schedule(budget, ref, raise_by, label)
            if option is None:
                continue
            key = tuple(option.machines.values())
            if key in merged:  # one configuration, several labels: the tightest budget that buys it
                first = merged[key]
                merged[key] = replace(first, also=first.also + (label,),
                                      budget=min(first.budget, option.budget),
                                      cushion=first.cushion if first.budget <= option.budget else option.cushion)
            else:
                merged[key] = option
        for estimate in self.pareto() if front is None else front:
            key = tuple(estimate.machines.values())
            if key in merged:
                merged[key] = replace(merged[key], pareto=True)
                continue
            cushion = 0
            if estimate.delta_n > 0:
                config = list(key)
                _makespan, atus, _cost = self._cost_units(config)
                cushion = self._cushion_units(config, atus, estimate.delta_n)
            merged[key] = Option(id=0, label="pareto", machines=estimate.machines, makespan_s=estimate.makespan_s,
                                 makespan_atu=estimate.makespan_atu, cost=estimate.cost,
                                 cushion=self.money(cushion), budget=estimate.cost, delta_n=estimate.delta_n,
                                 rounding="b" if cushion else "", pareto=True)
        ordered = sorted(merged.values(), key=lambda o: (o.cost, o.makespan_s))
        return [replace(option, id=i) for i, option in enumerate(ordered, start=1)]


@dataclass(frozen=True)
class _Shape:
    """Which point of each group's frontier every candidate combines, and its machines per cluster:
    all that the candidates share between two planners whose group frontiers hold the same
    configurations (the runtimes and N only move the speeds, makespans and costs)."""

    parts: tuple[np.ndarray, ...]  # per group, each candidate's row in that group's frontier
    machines: np.ndarray  # (candidates, clusters), read-only


_SHAPES: dict[tuple[bytes, ...], _Shape] = {}  # the latest few shapes, oldest first
_SHAPES_KEPT = 2


def _shape_of(fronts: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> _Shape:
    """The product of the group frontiers (W, S, configuration), the first group varying slowest,
    without the configuration of no machine at all; reused while the frontiers' configurations
    repeat, which they do at every re-plan of a run whose clusters each bill alike (each its own
    group: the frontier is every count up to the limit, whatever the runtimes)."""
    key = tuple(np.ascontiguousarray(cfg).tobytes() + bytes(str(cfg.shape), "ascii") for _w, _s, cfg in fronts)
    shape = _SHAPES.pop(key, None)
    if shape is None:
        size = math.prod(len(cfg) for _w, _s, cfg in fronts)
        if size > MAX_CANDIDATES:
            raise ValueError(f"{len(fronts)} different billing rules (ATU, min_charge) make {size} candidate "
                             f"configurations (at most {MAX_CANDIDATES}); use fewer distinct ATUs")
        parts = np.unravel_index(np.arange(size), [len(cfg) for _w, _s, cfg in fronts])
        machines = fronts[0][2][parts[0]]
        for (_w, _s, cfg), part in zip(fronts[1:], parts[1:]):
            machines = machines + cfg[part]
        rows = np.flatnonzero(machines.any(axis=1))
        shape = _Shape(parts=tuple(part[rows] for part in parts), machines=machines[rows])
        for array in (*shape.parts, shape.machines):
            array.setflags(write=False)
        while len(_SHAPES) >= _SHAPES_KEPT:
            del _SHAPES[next(iter(_SHAPES))]
    _SHAPES[key] = shape
    return shape


def _billing_group(c: ClusterPlan) -> tuple[float, float, float]:
    """Clusters billed alike for any makespan: the same ATU, minimum charge and unworked paid time."""
    return (c.atu_s, c.min_charge_s, c.priced_overhead_s)


def _money_units(prices: Sequence[float]) -> tuple[int, int, list[int]]:
    """(10^k, common divisor g, price units): price_i = units_i * g / 10^k, see the module doc."""
    scale = 10**_MAX_DECIMALS
    for k in range(_MAX_DECIMALS + 1):
        scaled = [p * 10**k for p in prices]
        if all(abs(s - round(s)) <= 1e-9 * max(1.0, s) for s in scaled):
            scale = 10**k
            break
    units = [round(Decimal(repr(float(p))) * scale) for p in prices]
    divisor = math.gcd(*units) or 1
    return scale, divisor, [u // divisor for u in units]


# ---------------------------------------------------------------- showing a large front
LABELLED = ("cheapest", "+20%", "fastest-20%", "fastest")  # the four schedules of §4.3
SPREAD_SIZE = 15  # seed 003 §3: "a minimum number of configurations from which the user has to choose"


def spread(options: Sequence[Option], k: int = SPREAD_SIZE) -> list[Option]:
    """At most ``k`` of ``options``, well spread along the front, for showing a large Pareto set.

    Always kept: the cheapest option (least cost, then least makespan), the fastest (least
    makespan, then least cost) and every option labelled with one of the four schedules of §4.3
    (its ``label`` or one of its ``also`` in cheapest, +20%, fastest-20%, fastest). When those
    alone are ``k`` or more they are all returned and nothing else, even past ``k`` (from
    :meth:`Planner.options` that is at most 6 options).

    The rest are added one at a time, farthest first (Gonzalez's traversal): each step takes the
    option whose distance to the nearest option already kept is largest, distances being
    Euclidean in (makespan, cost), each divided by its range over ``options`` (a range of 0
    counts 0); ties go to the earlier option in ``options``. So it is deterministic, the largest
    gap along the front is always the next one halved, crowded stretches of the front get no
    more than their share, and options at a point already kept come last.

    The options are returned unchanged (ids included, not renumbered), in their order in
    ``options``. Fewer than ``k + 1`` options are returned as they are.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be an integer >= 0, got {k!r}")
    options = list(options)
    if len(options) <= k:
        return options
    positions = range(len(options))
    required = {min(positions, key=lambda i: (options[i].cost, options[i].makespan_s, i)),
                min(positions, key=lambda i: (options[i].makespan_s, options[i].cost, i))}
    required.update(i for i in positions if {options[i].label, *options[i].also} & set(LABELLED))
    if len(required) < k:
        points = np.array([(o.makespan_s, o.cost) for o in options], dtype=float)
        span = points.max(axis=0) - points.min(axis=0)
        points = (points - points.min(axis=0)) / np.where(span > 0, span, 1.0)
        chosen = sorted(required)
        nearest = np.min(np.linalg.norm(points[:, None, :] - points[None, chosen, :], axis=2), axis=1)
        nearest[chosen] = -1.0  # never picked again
        while len(chosen) < k:
            pick = int(np.argmax(nearest))  # the first of equally far ones
            chosen.append(pick)
            nearest = np.minimum(nearest, np.linalg.norm(points - points[pick], axis=1))
            nearest[pick] = -1.0
        required = set(chosen)
    return [options[i] for i in sorted(required)]


# ---------------------------------------------------------------- what the table shows
NO_CUSHION = " (no cushion)"  # the row an option runs when its cushion is declined: "cheapest (no cushion)"
_FIGURE_TOL = 1e-9  # relative: figures this close are equal


def _figures(option: Option) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """What the table shows of an option: its makespan figures and its cost figures (the odds'
    quantiles too when it has them)."""
    odds = option.odds
    if odds is None:
        return (option.makespan_s,), (option.cost,)
    return ((option.makespan_s, odds.makespan_p50_s, odds.makespan_p90_s),
            (option.cost, odds.cost_p50, odds.cost_p99))


def _at_most(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(x <= y + _FIGURE_TOL * max(1.0, abs(y)) for x, y in zip(a, b))


def _same(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return _at_most(a, b) and _at_most(b, a)


def dominates(a: Option, b: Option) -> bool:
    """Whether ``a`` is as fast as ``b`` for less, or faster for no more: every figure shown of
    ``a`` at most ``b``'s, and ``a`` not the same point; at the same point, ``a`` holds the run
    to less money (budget and cushion: the machines up can make every option cost the same)."""
    (time_a, cost_a), (time_b, cost_b) = _figures(a), _figures(b)
    if not (_at_most(time_a, time_b) and _at_most(cost_a, cost_b)):
        return False
    if not (_same(time_a, time_b) and _same(cost_a, cost_b)):
        return True
    held_a, held_b = a.budget + a.cushion, b.budget + b.cushion
    return held_a < held_b - _FIGURE_TOL * max(1.0, abs(held_b))


def _dominance(rows: Sequence[Option]) -> tuple[np.ndarray, np.ndarray]:
    """(same makespan figures, dominates) over every pair of ``rows``, as two boolean matrices
    whose ``[a, b]`` is :func:`_same` of their makespan figures and :func:`dominates` of ``a``
    over ``b``: the same comparisons, in the same floating point, done by numpy at once."""
    n = len(rows)
    has_odds = np.array([o.odds is not None for o in rows], dtype=bool)
    times = np.zeros((n, 3))
    costs = np.zeros((n, 3))
    for i, o in enumerate(rows):
        (t, c) = _figures(o)
        times[i, :len(t)] = t
        costs[i, :len(c)] = c
    # a figure counts only when both rows show it (zip's truncation in _at_most)
    both = has_odds[:, None] & has_odds[None, :]

    def at_most(v: np.ndarray) -> np.ndarray:  # [a, b]: every figure of a at most b's
        bound = v + _FIGURE_TOL * np.maximum(1.0, np.abs(v))
        ok = v[:, None, 0] <= bound[None, :, 0]
        for k in (1, 2):
            ok &= (v[:, None, k] <= bound[None, :, k]) | ~both
        return ok

    time_le, cost_le = at_most(times), at_most(costs)
    same_time = time_le & time_le.T
    same = same_time & cost_le & cost_le.T
    held = np.array([o.budget + o.cushion for o in rows], dtype=float)
    held_less = held[:, None] < (held - _FIGURE_TOL * np.maximum(1.0, np.abs(held)))[None, :]
    return same_time, time_le & cost_le & (~same | held_less)


def shown(options: Sequence[Option], *, apart: frozenset[str] = frozenset()) -> list[Option]:
    """The options as the table shows them, true to their figures (the makespans and costs the
    options carry once the machines up, the boots and the longest sampled task count, which the
    planner's Pareto set did not see):

    - a row with a twin as fast for less (the same makespan figures, a lower cost) is merged into
      the cheapest such twin: its labels go there (``fastest`` then names that row) and the row
      goes, since choosing it would pay more for nothing; a row that is what an option runs without
      its cushion (a ``NO_CUSHION`` label) stays;
    - ``pareto`` (the ``*``) means no other row is as fast for less: every row is marked afresh,
      and a row that only the Pareto set put in the table and that another row now dominates goes;
    - the rows are sorted by cost, then makespan, and numbered from 1.

    ``fastest`` goes further: a row that another row dominates is no fastest, and the label moves
    to the fastest row that dominates it. A row carrying a label of ``apart`` is not merged yet:
    before their odds, two rows the whole-task model ties (every machine, and fewer that end the
    same rounds) may still part once the odds replay varying runtimes.

    The rows are merged in their order, each once, as if every merge started the table over: a
    merge only relabels the row merged into, and removes the other, so no row before it gains a
    twin, and only the relabelled row is looked at again. Every pair is compared once, by numpy
    (:func:`_dominance`).
    """
    rows = list(options)
    if not rows:
        return []
    same_time, dom = _dominance(rows)
    np.fill_diagonal(dom, False)
    twin_of = same_time & dom  # [a, b]: a is b's twin as fast for less
    alive = np.ones(len(rows), dtype=bool)
    i = 0
    while i < len(rows):  # twins: merge each dearer one into the cheapest row of the same makespan
        row = rows[i]
        labels_here = (row.label, *row.also)
        if not alive[i] or any(label.endswith(NO_CUSHION) or label in apart for label in labels_here):
            i += 1
            continue
        if "fastest" in labels_here:
            better = np.nonzero(dom[:, i] & alive)[0]
            pick = (int(min(better, key=lambda k: (*_figures(rows[k]), rows[k].id))) if len(better) else None)
        else:
            twins = np.nonzero(twin_of[:, i] & alive)[0]
            pick = int(min(twins, key=lambda k: (_figures(rows[k])[1], rows[k].id))) if len(twins) else None
        if pick is None:
            i += 1
            continue
        best = rows[pick]
        labels = [label for label in labels_here if label != "pareto"]
        if labels:
            if best.label == "pareto" or best.label.endswith(NO_CUSHION):  # a schedule names the row now
                kept = () if best.label == "pareto" else (best.label,)
                best = replace(best, label=labels[0], also=(*labels[1:], *kept, *best.also))
            else:
                best = replace(best, also=(*best.also, *(x for x in labels if x not in (best.label, *best.also))))
        rows[pick] = best
        alive[i] = False
        i = min(i + 1, pick)  # the row merged into may now carry fastest: looked at again
    dominated = np.asarray((dom & alive[:, None]).any(axis=0), dtype=bool)
    marked = [replace(rows[i], pareto=not bool(dominated[i])) for i in np.nonzero(alive)[0]]
    marked = [o for o in marked if o.pareto or o.also or o.label != "pareto"]
    ordered = sorted(marked, key=lambda o: (o.cost, o.makespan_s))
    return [replace(option, id=i) for i, option in enumerate(ordered, start=1)]


# ---------------------------------------------------------------- module-level conveniences
def estimate(config: Mapping[str, int], clusters: Sequence[ClusterPlan], n_tasks: int) -> Estimate:
    """T_e = N / sum a_i/T_i, makespan in seconds and ATUs, B_e and dN of one configuration."""
    return Planner(clusters, n_tasks).estimate(config)


def fastest_within(budget: float, clusters: Sequence[ClusterPlan], n_tasks: int,
                   max_machines: int | None = None) -> dict[str, int] | None:
    """The bounded-knapsack solution: the fastest configuration whose B_e fits ``budget``
    (and, with ``max_machines``, that uses at most that many machines in all)."""
    return Planner(clusters, n_tasks, max_machines).fastest_within(budget)


def options(clusters: Sequence[ClusterPlan], n_tasks: int, max_raise: float = DEFAULT_MAX_RAISE,
            max_machines: int | None = None) -> list[Option]:
    """The four schedules of §4.3 plus the Pareto set, numbered from 1 by cost."""
    return Planner(clusters, n_tasks, max_machines).options(max_raise)


def with_estimate_cushion(option: Option, upper: Planner) -> Option:
    """The option with a cushion that also pays for the estimate's own error: its configuration
    costed by ``upper``, the planner at the upper ends of the means' confidence intervals. A run
    whose tasks take a little longer than the sample said then still finishes when the operator
    accepts the cushion, instead of ending with tasks left and the money gone; the operator sees
    it as part of the cushion and may refuse it."""
    extra = upper.estimate(option.machines).cost - (option.budget + option.cushion)
    if extra <= 1e-9:
        return option
    return replace(option, cushion=option.cushion + extra)
