"""The genetic algorithm of seed 003 (Vintila, Oprescu, Kielmann, ORMACloud'13): an approximate
Pareto front of (makespan, cost) machine configurations, the paper's baseline next to the exact
front of :meth:`bats.master.core.planning.planner.Planner.pareto`.

Pure: no I/O, no clock; randomness only from the ``numpy.random.Generator`` (or seed) passed in.

How it works (seed 003 §3, Algorithms 1-5, seed lines ~111-285; parameters §4.4, line 329):

* A chromosome is a configuration: one integer gene per cluster, the machines of that type
  (§3.1, Table 1). Gene i lies in 0..A_i with A_i = min(max_i, N, max_machines) (the planner's
  limits: no cluster is given more machines than there are tasks), the genes sum to at least 1 and,
  when ``max_machines`` is given, to at most ``max_machines`` (§3.1 "a limit on the overall number
  of machines"). The population is one (P, k) integer array; makespan and cost of every row come
  from :func:`evaluate`, the planner's cost model vectorised (T_e = N / sum_i a_i/T_i,
  B_e = sum_i a_i c_i u_i(T_e), u_i(t) = max(1, ceil(max(t, min_charge_i) / atu_i))); the
  returned front is re-evaluated with :meth:`Planner.estimate`, so its numbers are the planner's.
* Algorithm 1: each generation fills the population up to P with random valid chromosomes
  (every gene uniform in 0..A_i, then repaired, see below), computes the fitness (Algorithm 2) and
  selects the next population (Algorithm 3); after the fixed number of generations it builds the
  front (Algorithm 5). When the front has fewer than ``front_threshold`` (15) points, the loop
  runs again for the same number of generations on the same population ("go once to line 2",
  at most ``max_restarts`` times), and the biggest front found is returned.
* Algorithm 2 (fitness, lines ~153-163): clCost = (maxCost - C.cost + 1) / diffCost and the same
  for the makespan; fitness = max(clCost, clMsp) * clCost * clMsp, extremes over the population.
* Algorithm 3: sort by fitness (descending); the top p_e go to the intermediate population
  (elitism); p_x * P pairs of different parents are drawn by roulette wheel (fitness-proportional)
  and each pair gives two children by BLX-a (Algorithm 4) with bit-flip mutation; from the
  intermediate population the cheapest p_c are *moved* to the new population, then the fastest
  p_m of those left, then the best p_mc of those left by makespan + cost. The rest (10 % with the
  paper's numbers) is left behind and refilled with random chromosomes by Algorithm 1.
* Algorithm 4 (BLX-a): per gene, d = |P1g - P2g|, the child is uniform over the integers of
  [max(0, min - a d), min(A_i, max + a d)]; then, with probability p_f, one random bit of the gene
  (among the bits of A_i) is flipped.
* Algorithm 5 (line ~235): sort by makespan, keep a point when it is cheaper than every faster one.

Readings of the paper we had to decide:

* Fitness units (Algorithm 2 with §3.2 "we split the search space, by predefined numbers ... a
  grid structure ... relative cell distance", lines ~228-232): the "+1" only makes sense in grid
  cells, so costs and makespans are measured in cells: each range (max - min over the population)
  is split into G = ``grid_cells`` cells, d = floor(G (max - v) / (max - min)) in 0..G is the cell
  distance to the worst value and cl = (d + 1) / G. The paper gives no G; we take 100. When every
  individual has the same value (max == min, e.g. all prices 0) cl = 1 for all.
* "sort by msp + cost" (Algorithm 3 line 16): seconds plus dollars would be the makespan alone, so
  we add the two values each normalised to 0..1 over the intermediate population (as the fitness
  does).
* The percentages p_c, p_m, p_mc are of the intermediate population (§4.4 "percentages of the
  intermediate population"), whose size is round(p_e P) + 2 round(p_x P) (= P with the paper's
  values); counts are rounded to the nearest integer, and the new population is cut at P.
* Roulette wheel: probability fitness / sum(fitness) over the whole population; "different
  parents" means two different individuals (rows), which may still carry the same genes.
* BLX-a bounds are real numbers; the children are drawn among the integers inside them
  (Figure 2: parents 10 and 38, a = 0.3, maxM = 40 give "all integers between 2 and 40"), so the
  lower bound is rounded up and the upper one down. Equal parent genes (d = 0) give that gene.
* Mutation: the bit is drawn among the bit_length(A_i) low bits; a flip that exceeds A_i is
  clipped to A_i (a limit of 0 never mutates).
* Repair (§2.3 "convert invalid chromosomes to valid ones at a crossover level"; §3.3 "We ensure
  all created children are valid"): a child (or random chromosome) with more than
  ``max_machines`` machines is scaled down to exactly ``max_machines`` keeping its mix:
  a_i -> floor(a_i M / total), the M - sum left over going one each to the genes with the largest
  fractional parts (largest remainder; no gene grows and none exceeds A_i). A child with no
  machine at all gets one machine of a cluster drawn uniformly among those with A_i >= 1.
* Algorithm 5 sorts by makespan only; we sort by (makespan, cost) so that of two equally fast
  configurations the cheaper one is kept, and, as the planner does, makespans within a relative
  1e-12 count as equal. The front is built from the final population of a run (as in the paper:
  no archive of earlier generations).
* "go once to line 2": the population is kept (line 1 is not re-run), the generations run again
  and the bigger front is returned; on equal sizes the later, longer-evolved one.
* The number of generations is not given in the paper ("for fixed number of iterations"); we
  take 100: on the 3-type 40/60/100 mix 50 and 300 give the same hypervolume to within 0.5 %, and
  100 takes about 0.2 s for P = 2000 here.

What to expect (measured against the exact fronts, tests/core/test_ga.py; hypervolume ratios with the
reference at the exact front's nadir + 10 % of its ranges): the GA's front loses both *ends* of
the exact one. Algorithm 3's intermediate population holds only the elite and the children, and
Algorithm 2 gives the fastest individual (also the dearest) and the slowest one the lowest
closeness in one objective, so fitness ~ 1/G: they are neither elite nor likely parents, drop out
within a few generations, and the cost/makespan steps (p_c, p_m) never see them again. On the
3-type t1.micro/m1.small/m1.medium mix with limits 40, 60, 100 and 1000 tasks of 15 min, P = 2000,
seeds 0-9: 69-98 points against 518 exact, hypervolume 0.982-0.984 of the exact (0.964-0.974 in
log10), but no point slower than one ATU (the exact front runs on to 10 h at $5.00; the GA's
cheapest is $5.35-5.36 at 1 h) and a fastest point at 1,206-1,471 s (exact: 1,184 s, $17.70). On the paper's own
40-60-100 mix (six types, a pool of 100) the loss is larger: 0.85-0.90 (0.79-0.86 log10), with
front sizes (21-62 points against 328 exact) like the paper's Table 3 (18-54 against 155-278).

Comparing fronts: :func:`hypervolume` (2-D, both objectives minimised, optionally in log10 space as
the paper's log-log figures) and :func:`front_gap` (the worst normalised distance from an exact
point to the nearest approximate one).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import billing
from ..billing import EPS as _EPS
from .planner import ClusterPlan, Estimate, Planner

_SPEED_TOL = 1e-12  # relative: makespans this close are equal (as in the planner)


@dataclass(frozen=True)
class GAParams:
    """The GA's parameters; defaults are the paper's (seed 003 §4.4, line 329) unless noted."""

    population_size: int = 2000  # POPULATION_SIZE, "1000 (1k) and 2000 (2k)" (line 329; 2k in Tables 2-5)
    generations: int = 100  # "for fixed number of iterations" (Alg. 1 line 2, line 128): no value given; ours
    elite_fraction: float = 0.2  # p_e = 20 % (line 329; Alg. 3 line 3, line 189)
    crossover_fraction: float = 0.4  # p_x = 40 %: pairs drawn per generation (line 329; Alg. 3 line 5, line 191)
    cost_fraction: float = 0.2  # p_c = 20 % (line 329; Alg. 3 line 13)
    makespan_fraction: float = 0.2  # p_m = 20 % (line 329; Alg. 3 line 15)
    sum_fraction: float = 0.5  # p_mc = 50 % (line 329; Alg. 3 line 17)
    mutation_probability: float = 1 / 15000  # p_f per gene (line 329; Alg. 4 line 12, line 223)
    blx_alpha: float = 0.3  # a of BLX-a (line 329; Alg. 4 lines 7-8, Figure 2 line 267)
    front_threshold: int = 15  # minimum front size, "which we have set to 15" (line 280; Alg. 1 line 12)
    max_restarts: int = 1  # "go once to line 2" (Alg. 1 line 13, line 139)
    grid_cells: int = 100  # cells per objective range for the fitness (§3.2, line 230): no value given; ours

    def __post_init__(self) -> None:
        for name in ("population_size", "grid_cells", "front_threshold"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"GAParams.{name} must be an integer >= 1, got {value!r}")
        for name in ("generations", "max_restarts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"GAParams.{name} must be an integer >= 0, got {value!r}")
        for name in ("elite_fraction", "crossover_fraction", "cost_fraction", "makespan_fraction",
                     "sum_fraction", "mutation_probability"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value <= 1):
                raise ValueError(f"GAParams.{name} must be a number in [0, 1], got {value!r}")
        if not (isinstance(self.blx_alpha, (int, float)) and math.isfinite(self.blx_alpha) and self.blx_alpha >= 0):
            raise ValueError(f"GAParams.blx_alpha must be a number >= 0, got {self.blx_alpha!r}")
        if self.cost_fraction + self.makespan_fraction + self.sum_fraction > 1 + 1e-12:
            raise ValueError("GAParams: cost_fraction + makespan_fraction + sum_fraction must be <= 1")
        if self.crossover_fraction > 0 and self.population_size < 2:
            raise ValueError("GAParams: crossover needs a population of at least 2")


# ---------------------------------------------------------------- the cost model, vectorised
class _Model:
    """Limits and per-cluster constants of one problem; evaluates whole populations."""

    def __init__(self, clusters: Sequence[ClusterPlan], n_tasks: int, max_machines: int | None) -> None:
        self.n_tasks = n_tasks
        self.speed = np.array([c.speed for c in clusters])  # machines' speeds k_i / T_i
        self.price = np.array([float(c.price) for c in clusters])
        self.atu = np.array([c.atu_s for c in clusters])
        self.min_charge = np.array([c.min_charge_s for c in clusters])
        self.overhead = np.array([c.priced_overhead_s for c in clusters])  # paid seconds a new machine runs nothing
        cap = n_tasks if max_machines is None else min(n_tasks, max_machines)
        self.limits = np.array([min(c.max, cap, -(-n_tasks // c.slots)) for c in clusters], dtype=np.int64)
        self.max_machines = max_machines
        self.bits = np.array([int(a).bit_length() for a in self.limits], dtype=np.int64)
        self.usable = np.flatnonzero(self.limits > 0)

    def evaluate(self, pop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        speed = pop @ self.speed
        makespan = self.n_tasks / speed
        units = billing.atus_begun_array(makespan[:, None] + self.overhead, self.atu, self.min_charge)
        cost = (pop * self.price * units).sum(axis=1)
        return makespan, cost

    def repair(self, pop: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Make every row valid in place (see the module doc): total <= max_machines, total >= 1."""
        total = pop.sum(axis=1)
        if self.max_machines is not None:
            over = np.flatnonzero(total > self.max_machines)
            if len(over):
                m = self.max_machines
                exact = pop[over] * m / total[over, None]
                low = np.floor(exact + _EPS).astype(np.int64)
                low = np.minimum(low, pop[over])
                frac = exact - low
                left = m - low.sum(axis=1)
                order = np.argsort(-frac, axis=1, kind="stable")
                rank = np.empty_like(order)
                np.put_along_axis(rank, order, np.arange(pop.shape[1])[None, :], axis=1)
                low += (rank < left[:, None]) & (low < pop[over])
                pop[over] = low
                total[over] = low.sum(axis=1)
        empty = np.flatnonzero(total == 0)
        if len(empty):
            pop[empty, self.usable[rng.integers(0, len(self.usable), len(empty))]] = 1
        return pop

    def random(self, count: int, rng: np.random.Generator) -> np.ndarray:
        pop = rng.integers(0, self.limits + 1, size=(count, len(self.limits)), dtype=np.int64)
        return self.repair(pop, rng)


def evaluate(clusters: Sequence[ClusterPlan], n_tasks: int, machines: Any) -> tuple[np.ndarray, np.ndarray]:
    """(makespan_s, cost) of many configurations at once: ``machines`` is a (rows, clusters) array
    of machine counts, each row with at least one machine. The planner's formulas (see
    :mod:`bats.master.core.planning.planner`), in floats: equal to :meth:`Planner.estimate` up to float rounding."""
    pop = np.asarray(machines, dtype=np.int64)
    if pop.ndim != 2 or pop.shape[1] != len(clusters):
        raise ValueError(f"machines must be a (rows, {len(clusters)}) array, got shape {pop.shape}")
    if (pop < 0).any() or (pop.sum(axis=1) < 1).any():
        raise ValueError("every configuration needs machine counts >= 0 and at least one machine")
    return _Model(clusters, n_tasks, None).evaluate(pop)


# ---------------------------------------------------------------- the GA's steps
def _closeness(values: np.ndarray, cells: int) -> np.ndarray:
    """Algorithm 2's cl = (max - v + 1) / diff, in grid cells: (floor(G (max - v) / diff) + 1) / G."""
    top, low = values.max(), values.min()
    diff = top - low
    if not diff > 0:
        return np.ones_like(values)
    distance = np.floor((top - values) / diff * cells + _EPS)
    return (np.minimum(distance, cells) + 1.0) / cells


def fitness(makespan: np.ndarray, cost: np.ndarray, grid_cells: int = GAParams.grid_cells) -> np.ndarray:
    """Algorithm 2 over a population: max(clCost, clMsp) * clCost * clMsp (always > 0)."""
    cl_cost = _closeness(cost, grid_cells)
    cl_msp = _closeness(makespan, grid_cells)
    return np.maximum(cl_cost, cl_msp) * cl_cost * cl_msp


def _roulette(weights: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    cumulative = np.cumsum(weights)
    picks = np.searchsorted(cumulative, rng.random(count) * cumulative[-1], side="right")
    return np.minimum(picks, len(weights) - 1)


def _parents(weights: np.ndarray, pairs: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``pairs`` pairs of different rows, each row drawn by roulette wheel.

    A second parent equal to the first is drawn again (up to 20 times; should one row hold almost
    all the weight, it is then drawn uniformly among the other rows)."""
    first = _roulette(weights, pairs, rng)
    second = _roulette(weights, pairs, rng)
    same = np.flatnonzero(first == second)
    for _ in range(20):
        if not len(same):
            break
        redraw = _roulette(weights, len(same), rng)
        second[same] = redraw
        same = same[redraw == first[same]]
    if len(same):
        other = rng.integers(0, len(weights) - 1, len(same))
        second[same] = other + (other >= first[same])
    return first, second


def blx_children(p1: np.ndarray, p2: np.ndarray, limits: np.ndarray, alpha: float,
                 rng: np.random.Generator) -> np.ndarray:
    """Algorithm 4 lines 2-10 for rows of parents: one child per row, uniform over the integers in
    [max(0, min - a d), min(limit, max + a d)], d = |P1g - P2g|."""
    low = np.minimum(p1, p2)
    high = np.maximum(p1, p2)
    spread = alpha * (high - low)
    lo = np.ceil(np.maximum(0.0, low - spread) - _EPS).astype(np.int64)
    hi = np.floor(np.minimum(limits, high + spread) + _EPS).astype(np.int64)
    lo = np.minimum(lo, low)  # the parents' own range is always allowed (float guard)
    hi = np.maximum(hi, high)
    return rng.integers(lo, hi + 1, dtype=np.int64)


def _mutate(children: np.ndarray, model: _Model, probability: float, rng: np.random.Generator) -> None:
    """Algorithm 4 line 12: flip one random bit of a gene with probability p_f (clipped to A_i)."""
    if probability <= 0:
        return
    hit = (rng.random(children.shape) < probability) & (model.bits > 0)
    rows, cols = np.nonzero(hit)
    if not len(rows):
        return
    bit = np.floor(rng.random(len(rows)) * model.bits[cols]).astype(np.int64)
    flipped = children[rows, cols] ^ (np.int64(1) << bit)
    children[rows, cols] = np.minimum(flipped, model.limits[cols])


def _normalised(values: np.ndarray) -> np.ndarray:
    low, top = values.min(), values.max()
    return (values - low) / (top - low) if top > low else np.zeros_like(values)


def staircase(makespan: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Algorithm 5: indices of the non-dominated points, fastest first, one per point.

    Sorted by (makespan, cost); a point is kept when it is cheaper than every faster one; makespans
    within a relative 1e-12 count as equal (the cheaper one stays), as in ``Planner.pareto``."""
    order = np.lexsort((cost, makespan))
    kept: list[int] = []
    best = math.inf
    for row in order.tolist():
        c = cost[row]
        if c >= best:
            continue
        if kept and makespan[row] <= makespan[kept[-1]] * (1 + _SPEED_TOL):
            kept.pop()
        kept.append(row)
        best = c
    return np.array(kept, dtype=np.int64)


class _Run:
    """One problem's GA state: the population and its makespans/costs."""

    def __init__(self, model: _Model, params: GAParams, rng: np.random.Generator) -> None:
        self.model = model
        self.params = params
        self.rng = rng
        k = len(model.limits)
        self.pop = np.empty((0, k), dtype=np.int64)
        self.makespan = np.empty(0)
        self.cost = np.empty(0)
        size = params.population_size
        self.n_elite = min(size, round(params.elite_fraction * size))
        self.n_pairs = round(params.crossover_fraction * size)

    def fill(self) -> None:
        """Algorithm 1 lines 3-5: random valid chromosomes up to POPULATION_SIZE."""
        missing = self.params.population_size - len(self.pop)
        if missing > 0:
            fresh = self.model.random(missing, self.rng)
            ms, cost = self.model.evaluate(fresh)
            self.pop = np.concatenate([self.pop, fresh])
            self.makespan = np.concatenate([self.makespan, ms])
            self.cost = np.concatenate([self.cost, cost])

    def generation(self) -> None:
        self.fill()
        p = self.params
        fit = fitness(self.makespan, self.cost, p.grid_cells)  # Algorithm 1 lines 6-8
        # Algorithm 3: elitism
        order = np.argsort(-fit, kind="stable")
        elite = order[: self.n_elite]
        parts = [self.pop[elite]]
        ms_parts = [self.makespan[elite]]
        cost_parts = [self.cost[elite]]
        # crossover: roulette-wheel pairs, two BLX-a children each, mutation, repair
        if self.n_pairs and len(self.pop) >= 2:
            first, second = _parents(fit, self.n_pairs, self.rng)
            p1 = np.concatenate([self.pop[first], self.pop[first]])
            p2 = np.concatenate([self.pop[second], self.pop[second]])
            children = blx_children(p1, p2, self.model.limits, p.blx_alpha, self.rng)
            _mutate(children, self.model, p.mutation_probability, self.rng)
            self.model.repair(children, self.rng)
            ms, cost = self.model.evaluate(children)
            parts.append(children)
            ms_parts.append(ms)
            cost_parts.append(cost)
        inter = np.concatenate(parts)
        inter_ms = np.concatenate(ms_parts)
        inter_cost = np.concatenate(cost_parts)
        # Algorithm 3 lines 12-17: move the cheapest, then the fastest, then the best by the sum
        size = len(inter)
        free = np.ones(size, dtype=bool)
        chosen: list[np.ndarray] = []
        score = _normalised(inter_ms) + _normalised(inter_cost)
        for fraction, key, tie in ((p.cost_fraction, inter_cost, inter_ms),
                                   (p.makespan_fraction, inter_ms, inter_cost),
                                   (p.sum_fraction, score, inter_cost)):
            count = round(fraction * size)
            if not count:
                continue
            candidates = np.flatnonzero(free)
            ranked = candidates[np.lexsort((tie[candidates], key[candidates]))][:count]
            free[ranked] = False
            chosen.append(ranked)
        keep = np.concatenate(chosen)[: p.population_size] if chosen else np.empty(0, dtype=np.int64)
        self.pop = inter[keep]
        self.makespan = inter_ms[keep]
        self.cost = inter_cost[keep]

    def front_rows(self) -> np.ndarray:
        if not len(self.pop):
            return np.empty((0, self.pop.shape[1]), dtype=np.int64)
        return self.pop[staircase(self.makespan, self.cost)]


def _estimates(planner: Planner, rows: np.ndarray) -> list[Estimate]:
    """The planner's estimates of the rows, filtered again on the planner's own numbers."""
    names = [c.name for c in planner.clusters]
    unique = np.unique(rows, axis=0) if len(rows) else rows
    found = [planner.estimate({n: int(a) for n, a in zip(names, row)}) for row in unique]
    if not found:
        return []
    keep = staircase(np.array([e.makespan_s for e in found]), np.array([e.cost for e in found]))
    return [found[i] for i in keep]


def ga_front(clusters: Sequence[ClusterPlan], n_tasks: int, rng: np.random.Generator | int,
             params: GAParams = GAParams(), max_machines: int | None = None) -> list[Estimate]:
    """The GA's estimated Pareto front of (makespan_s, cost), fastest first (Algorithms 1-5).

    Every configuration has 0..min(max_i, N) machines of cluster i, at least one machine, and at
    most ``max_machines`` in total when given. The points are the planner's
    :meth:`~bats.master.core.planning.planner.Planner.estimate`, one configuration per point, none dominated by
    another. ``rng``: a numpy Generator (advanced by the call) or a seed.
    """
    planner = Planner(clusters, n_tasks)  # validates the clusters and N
    if max_machines is not None and (isinstance(max_machines, bool) or not isinstance(max_machines, int)
                                     or max_machines < 1):
        raise ValueError(f"max_machines must be an integer >= 1, got {max_machines!r}")
    if not isinstance(params, GAParams):
        raise TypeError(f"params must be a GAParams, got {type(params).__name__}")
    model = _Model(planner.clusters, n_tasks, max_machines)
    if not len(model.usable):
        raise ValueError("no cluster allows a machine (every max is 0)")
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    run = _Run(model, params, generator)
    best: list[Estimate] | None = None
    for _attempt in range(params.max_restarts + 1):
        for _ in range(params.generations):
            run.generation()
        if params.generations == 0:
            run.fill()
        front = _estimates(planner, run.front_rows())
        if best is None or len(front) >= len(best):
            best = front
        if len(front) >= params.front_threshold:
            break
    return best if best is not None else []


# ---------------------------------------------------------------- comparing fronts
def _points(front: Iterable[Any]) -> np.ndarray:
    """(n, 2) float array of (makespan, cost) from Estimates/Options or (makespan, cost) pairs."""
    rows = []
    for point in front:
        if hasattr(point, "makespan_s") and hasattr(point, "cost"):
            rows.append((float(point.makespan_s), float(point.cost)))
        else:
            makespan, cost = point
            rows.append((float(makespan), float(cost)))
    array = np.array(rows, dtype=float).reshape(-1, 2)
    if not np.isfinite(array).all():
        raise ValueError("front points must be finite")
    return array


def _log10(array: np.ndarray, what: str) -> np.ndarray:
    if (array <= 0).any():
        raise ValueError(f"log scale needs {what} > 0")
    return np.log10(array)


def hypervolume(front: Iterable[Any], reference: Sequence[float], *, log: bool = False) -> float:
    """The area dominated by ``front`` and bounded by ``reference`` = (makespan, cost), both
    minimised: the measure of {(m, c): some point p has p.m <= m <= ref.m and p.c <= c <= ref.c}.

    ``front``: Estimates (or anything with ``makespan_s`` and ``cost``) or (makespan, cost) pairs;
    dominated points and points not strictly better than the reference in both coordinates add
    nothing. ``log=True`` measures the area in log10(makespan), log10(cost) (every value > 0), as
    on the paper's log-log figures.
    """
    points = _points(front)
    ref = np.array(reference, dtype=float).reshape(2)
    if log:
        points = _log10(points, "makespans and costs")
        ref = _log10(ref, "the reference")
    points = points[(points[:, 0] < ref[0]) & (points[:, 1] < ref[1])]
    if not len(points):
        return 0.0
    points = points[np.lexsort((points[:, 1], points[:, 0]))]
    running = np.minimum.accumulate(points[:, 1])
    better = np.empty(len(points), dtype=bool)
    better[0] = True
    better[1:] = points[1:, 1] < running[:-1]  # cheaper than every point at least as fast
    steps = points[better]
    right = np.append(steps[1:, 0], ref[0])
    area = float(((right - steps[:, 0]) * (ref[1] - steps[:, 1])).sum())
    return float(area)


def reference_point(front: Iterable[Any], margin: float = 0.1, *, log: bool = False) -> tuple[float, float]:
    """A reference point for :func:`hypervolume`: the front's worst makespan and worst cost, each
    moved out by ``margin`` times the front's range in that coordinate (in log10 space when
    ``log``; a zero range moves by ``margin`` times the value, or by ``margin`` when that is 0)."""
    points = _points(front)
    if not len(points):
        raise ValueError("a reference point needs a non-empty front")
    if log:
        points = _log10(points, "makespans and costs")
    top = points.max(axis=0)
    span = top - points.min(axis=0)
    span = np.where(span > 0, span, np.where(top != 0, np.abs(top), 1.0))
    ref = top + margin * span
    if log:
        ref = 10.0 ** ref
    return float(ref[0]), float(ref[1])


def front_gap(approx: Iterable[Any], exact: Iterable[Any], *, log: bool = False) -> float:
    """The largest distance from a point of ``exact`` to the nearest point of ``approx``,
    normalised by the exact front's ranges:

        gap = max_{e in exact} min_{a in approx} sqrt(((a.m - e.m) / R_m)^2 + ((a.c - e.c) / R_c)^2)

    with R_m = max - min of the exact makespans and R_c the same for the costs (a zero range counts
    as 1). With ``log=True`` every makespan and cost is replaced by its log10 first (ranges
    included). 0 means every exact point is in ``approx``; 0.1 means some exact point is a tenth of
    the front's extent away from every approximate one. An empty ``approx`` gives inf.
    """
    exact_points = _points(exact)
    approx_points = _points(approx)
    if not len(exact_points):
        raise ValueError("front_gap needs a non-empty exact front")
    if not len(approx_points):
        return math.inf
    if log:
        exact_points = _log10(exact_points, "makespans and costs")
        approx_points = _log10(approx_points, "makespans and costs")
    span = exact_points.max(axis=0) - exact_points.min(axis=0)
    span = np.where(span > 0, span, 1.0)
    delta = (exact_points[:, None, :] - approx_points[None, :, :]) / span
    return float(np.sqrt((delta ** 2).sum(axis=2)).min(axis=1).max())
