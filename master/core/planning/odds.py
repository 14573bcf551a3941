"""An option's odds: its makespan and cost as a distribution, from what the run has learned.

How this works. The planner prices a configuration at each cluster's mean runtime (one number per
option). Here the same configuration is *replayed* many times on runtimes resampled from what the
run has seen, and the option states P50 and P90 of the makespan, P50 and P99 of the cost
(:class:`~..option.Odds`). Pure: numpy only, randomness from the ``numpy.random.Generator`` the
caller passes, no clock.

**What the runtimes are drawn from** (:class:`RuntimeModel`). Every runtime the run has measured,
on any cluster, is put on one scale by the clusters' speed ratios (the sampled ratios with the
corrections each cluster's own tasks earned, :class:`~.estimate.SharedEstimate`): ``observed`` are whole runtimes
(the sample, the tasks done), ``censored`` the elapsed times of tasks still running (a task that
has run 40 minutes takes at least that). Each replay then

1. imputes every running task: a value of the sample longer than its elapsed time, drawn at
   random, or (none is longer: it has outlived the sample) its elapsed time times a draw of the
   tail below, and at least the longest value seen times the replay's mode (below);
2. adds one more value for **what the sample cannot have seen**: a task that picks it takes the
   longest value seen times the larger of two Pareto factors, each capped at ``TAIL_CAP``:

   - its own draw, ``U ** -xi``, the sample's tail carried on. The tail index xi is drawn per
     replay from its posterior given the largest values seen (Hill's estimator over the
     ``TAIL_K`` largest: 1 / xi ~ Gamma(k, 1 / sum log(x_(i) / x_(k+1))), never below
     ``MIN_XI``): largest values far apart say "heavy tail" and the unseen tasks are long and
     uncertain, close together (a normal bag) say the next one is barely longer;
   - the replay's **mode**, ``U ** -MODE_XI`` drawn once per replay and shared by all its unseen
     tasks: a kind of long task the sample missed altogether, which its largest values cannot
     describe. A tight sample of 30 from a bag whose 1 task in 400 takes 40 times the others
     looks like a normal bag, and the tail index says the next task is barely longer; what
     the sample says is only that such tasks are rare. Each task's own draw averages out over
     a bag of thousands, so without the mode the P99 cost was the average allowance and
     covered such bags' true cost in about 1 in 4 (``tests/core/test_odds.py``): the mode makes
     the allowance move together in a replay, and the P99 then stands for a bag whose unseen
     tasks are long (it covers all 30 such bags there, for a P99 cost some 32 % above the P50
     instead of 5 %). Its tail index was 0.3 (9 bags in 10, 19 % above the P50); 0.45 took the
     execution study's runs that held their P99 cost and still ended incomplete from 46 of 410
     to 35 of 408 on its first 100 per-second and per-minute pools, few-long bags most (12 of
     59 to 3 of 58), with the cushion's floor lowered at the same time
     (``BatsSettings.cushion_confidence``) so that the median cushions barely moved. Values all
     equal (fixed runtimes) have neither.

   With n values it is picked 1/(n+1) of the time on average (the chance that the next task is
   longer than all n seen; the bootstrap below makes it vary between replays), so the
   allowance fades as the run learns;
3. resamples that pool with replacement (a bootstrap: the pool is one draw of the bag, and its
   mean is uncertain by as much as the sample is small), and draws the tasks left from the
   resampled pool.

A bag where 1 % of the tasks hold a quarter of the work shows the point: a sample of 30 misses
the long tasks three times in four. On such bags (2,000 tasks on 20 machines, samples of 30) the
stated P90 makespan covered the true one in 60 % of 40 bags without the allowance (``TAIL_CAP``
1) and in 97 % with it, its median 2.8 times the truth (a cap of 20 gave 100 % and 3.5 times):
the price of the tail a sample cannot see is a wide promise, which narrows as tasks end.
tests/core/test_odds.py holds the coverage on such bags.

What no allowance can promise at a bearable price: a mode that holds much of the work in very
few tasks. The execution study's ``spiky`` bags (0.5 % of the tasks 200 times the others, half
the work) look to a sample of 30 like a normal bag in 6 samples out of 7; odds that covered
them would double every bag's cushion. They end incomplete, with the early warning.

**The replay** (:func:`replay`). The tasks are whole and independent, so handing the bag's next
task to whichever slot frees first is, in distribution, the same as letting every slot draw its
own runtimes one after another: each slot's task starts are the cumulative sums of its draws
from its start (a new machine's boot, a busy slot's running task), and the bag's N tasks are the N
earliest starts over all slots. A slot of a machine the option lets go (a sampling machine in
paid time) takes a task only if its cluster's mean runtime fits before its release, as the
execution does; billed by the ATU, a task it is running that would end past its hard release
(its paid edge less a tenth of the release margin, as the execution keeps it) is cut off there and runs again from its start on the kept slot free first
(:func:`_rerun_cut`): counted as ending on the machine let go, a long task the sampling machines
were running cost nothing and ended early in the odds, and hours more in the run. The makespan is the last end among the tasks started; a machine is billed
(:mod:`..billing`, nothing else rounds by ATU) until its last task ends plus the release time: a
machine up pays the ATUs it begins past the time it has paid, a new one every ATU from its
acquisition (its boot within). Everything is numpy over (replays x slots x draws).

**A large bag** (more than ``WHOLE_NUMBERS`` numbers drawn at once; a smaller one is replayed as
above, number for number). Memory and time then stay independent of the bag's size and of the
sample's:

- the replays run in chunks of replays, each chunk's arrays within ``CHUNK_NUMBERS`` numbers;
- a slot's *head*, the tasks it surely takes, is one draw: the sum of that many runtimes, normal by
  the central limit with the replay's own pool's mean and variance. The first head stops
  ``HEAD_SDS`` standard deviations of the slot's task count short of the bag's expected end; from
  the heads' ends each replay places its own end and adds a second head that stops as far short
  of it (a few tasks' worth); only a window of whole tasks around the end is drawn, so the end of
  the bag, the machines' last tasks and their bills, stay whole-task. A head that would reach past
  the cut, or a window used up before it, is detected and the chunk replayed with wider windows
  (``HEAD_TRIES`` times), then with every task drawn (in bundles of k consecutive tasks of a slot,
  each the sum of k draws, when one replay's draws pass ``CHUNK_NUMBERS`` numbers);
- a sample of more than ``2 * POOL_GROUPS`` values (a run that has finished thousands of tasks)
  is resampled by groups of neighbouring sorted values (:class:`Grouped`): the Poisson bootstrap's
  counts per group, a task taking one of its group's values at random.

Against the replay that draws every task the odds agree within their Monte-Carlo noise
(``tests/core/test_odds.py``); against its bundles they are finer at the bag's end.

What the replay leaves out, on purpose: the execution's re-plans and the end-game's copies (both
shorten a late run, so the makespan odds lean long), and the money a re-plan would spend on
more machines (the ceiling keeps that within budget + cushion). ``tests/core/test_odds.py``
checks the replay against the simulator, which runs the whole core.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .. import billing
from ..option import Odds, Option
from .clusters import SHORT_ATU_S, ClusterPlan

REPLAYS = 200  # replays per option: P99 is then the 2nd largest cost
MONITOR_REPLAYS = 100  # replays of a check during the execution (P90 is what it asks)
TAIL_CAP = 5.0  # an unseen value is at most this many times the longest value seen
TAIL_K = 4  # the largest values the tail index is fitted to (fewer when the sample is smaller)
MAX_DRAWS = 4_000_000  # numbers drawn at once at most, every task drawn (a larger bag: in bundles of tasks)
MODE_XI = 0.45  # the tail index of a mode the sample missed (one draw per replay; 0: none)
MIN_XI = 0.05  # the tail index is drawn no lower: the next value is not taken to equal the largest
WHOLE_NUMBERS = 1 << 18  # numbers a replay draws at once at most (more: replays in chunks, heads summed)
CHUNK_NUMBERS = 1 << 17  # numbers an array of a chunk of replays holds at most
POOL_GROUPS = 1024  # a pool of more than twice this many values is resampled by groups of neighbouring values
HEAD_SDS = 4.5  # a slot's head ends this many standard deviations (of its task count) before the cut
HEAD_TRIES = 3  # head windows widened this many times (each doubled) before a chunk replays every task


@dataclass(frozen=True)
class RuntimeModel:
    """The runtimes a replay draws from, on the reference cluster's scale (see the module doc)."""

    observed: np.ndarray  # whole runtimes, sorted ascending
    censored: np.ndarray  # elapsed times of tasks still running

    @classmethod
    def of(cls, observed: Sequence[float] | np.ndarray, censored: Sequence[float] | np.ndarray = (),
           presorted: bool = False) -> RuntimeModel:
        """The model of these runtimes (``presorted``: ``observed`` is sorted ascending already)."""
        seen = np.asarray(observed, dtype=float) if presorted else np.sort(np.asarray(observed, dtype=float))
        running = np.asarray(censored, dtype=float)
        seen = seen[np.isfinite(seen) & (seen >= 0)]
        running = running[np.isfinite(running) & (running > 0)]
        if not len(seen) and not len(running):
            raise ValueError("no runtimes to estimate the odds from")
        return cls(seen, running)

    def tail_index(self) -> tuple[int, float]:
        """(k, S) of Hill's estimator over the largest values seen: 1 / xi ~ Gamma(k, 1 / S)."""
        # only the largest TAIL_K + 1 values count: those of the sorted sample's end and of the running
        total = int(np.count_nonzero(self.observed > 0)) + len(self.censored)
        k = min(TAIL_K, total - 1)
        if k < 1:
            return 0, 0.0
        running = self.censored
        if len(running) > k + 1:
            running = np.partition(running, len(running) - k - 1)[-k - 1:]
        values = np.concatenate([self.observed[-k - 1:], running])
        values = np.sort(values[values > 0])
        top = values[-k:]
        spread = float(np.log(top / values[-k - 1]).sum())
        return k, spread

    def xi(self, rng: np.random.Generator, replays: int) -> np.ndarray:
        """The tail index of every replay, from its posterior (see the module docstring)."""
        k, spread = self.tail_index()
        if k < 1:  # one value: nothing to fit, the floor
            return np.full(replays, MIN_XI)
        if spread <= 0:  # the largest values are equal: no tail beyond them
            return np.zeros(replays)
        alpha = rng.gamma(k, 1.0 / spread, size=replays)
        return np.maximum(MIN_XI, 1.0 / np.maximum(alpha, 1e-12))

    def tail(self, rng: np.random.Generator, replays: int) -> Tail:
        """Per replay, what lies beyond the longest value seen (see the module docstring)."""
        xi = self.xi(rng, replays)
        # values all equal (a bag of fixed runtimes): no tail and no mode beyond them
        mode = _pareto(rng, np.full(replays, MODE_XI)) if MODE_XI > 0 and xi.any() else np.ones(replays)
        return Tail(xi, mode, self.top)

    @property
    def top(self) -> float:
        """The longest runtime seen (or run so far by a task still running)."""
        return float(max(self.observed[-1] if len(self.observed) else 0.0,
                         self.censored.max() if len(self.censored) else 0.0))

    def pools(self, rng: np.random.Generator, replays: int, tail: Tail) -> np.ndarray | Grouped:
        """Per replay, the bootstrap pool the tasks are drawn from: (replays, values); ``nan``
        stands for the unseen value, drawn anew for each task that picks it (:meth:`draw`). A
        sample of more than ``2 * POOL_GROUPS`` values gives a :class:`Grouped` pool instead."""
        if len(self.observed) > 2 * POOL_GROUPS:
            return self.grouped(rng, replays, tail)
        columns = [np.broadcast_to(self.observed, (replays, len(self.observed))), np.full((replays, 1), np.nan)]
        if len(self.censored):
            columns.insert(1, self.impute(rng, self.censored, tail))
        base = np.concatenate(columns, axis=1)
        picks = rng.integers(0, base.shape[1], size=base.shape)
        return np.take_along_axis(base, picks, axis=1)

    def grouped(self, rng: np.random.Generator, replays: int, tail: Tail) -> Grouped:
        """The bootstrap pools of a large sample by groups (see :class:`Grouped`)."""
        n = len(self.observed)
        bounds = (np.arange(POOL_GROUPS + 1) * n) // POOL_GROUPS
        starts, sizes = bounds[:-1], np.diff(bounds)
        imputed = self.impute(rng, self.censored, tail) if len(self.censored) else np.zeros((replays, 0))
        counts = rng.poisson(np.concatenate([sizes, np.ones(len(self.censored) + 1)]), size=(replays, POOL_GROUPS
                                                                                               + len(self.censored) + 1))
        totals = counts.sum(axis=1)
        counts[totals == 0, 0] = 1  # a pool of nothing is not a pool (never, with thousands of values)
        totals = counts.sum(axis=1)
        sums = np.add.reduceat(self.observed, starts)
        squares = np.add.reduceat(self.observed * self.observed, starts)
        return Grouped(counts, totals, int(totals.max()), starts, sizes, imputed, sums / sizes, squares / sizes)

    def draw(self, rng: np.random.Generator, pools: np.ndarray | Grouped, tail: Tail, size: int) -> np.ndarray:
        """``size`` task runtimes per replay from its pool: (replays, size)."""
        if isinstance(pools, Grouped):
            return pools.draw(rng, self, tail, size)
        replays, width = pools.shape
        picks = rng.integers(0, width, size=(replays, size))
        picks += (np.arange(replays) * width)[:, None]
        runtimes = pools.ravel()[picks]
        unseen = np.isnan(runtimes)
        if unseen.any():
            rows = np.nonzero(unseen)[0]
            runtimes[unseen] = tail.values(rng, rows)
        return runtimes

    def impute(self, rng: np.random.Generator, elapsed: np.ndarray, tail: Tail) -> np.ndarray:
        """Per replay, a whole runtime for each task that has run ``elapsed``: (replays, tasks)."""
        # (replays x running tasks: a thousand machines' tasks, 200 replays, 1.6 MB an array; worked
        # in place, so that few such arrays live at once)
        replays = len(tail)
        seen = self.observed
        first = np.searchsorted(seen, elapsed, side="right")  # the values longer than each elapsed
        longer = len(seen) - first
        u = rng.random((replays, len(elapsed)))
        u *= longer
        index = u.astype(np.int64)
        del u
        index += first
        np.minimum(index, max(0, len(seen) - 1), out=index)
        imputed = seen[index] if len(seen) else np.zeros(index.shape)
        del index
        # a task that has outlived every value seen is one of the kind the sample missed: at least
        # the replay's mode, and its elapsed time times the tail's own draw
        beyond = _pareto(rng, tail.xi[:, None], (replays, len(elapsed)))
        beyond *= elapsed[None, :]
        np.maximum(beyond, tail.top * tail.mode[:, None], out=beyond)
        np.copyto(imputed, beyond, where=longer[None, :] <= 0)
        return imputed


@dataclass(frozen=True)
class Grouped:
    """Bootstrap pools of a sample too large to copy once per replay. The sample's sorted values
    are cut into ``POOL_GROUPS`` groups of neighbours; a replay's pool keeps only how many of its
    values came from each group (and from each running task, and the unseen value). The counts are
    the Poisson bootstrap's (each value in the pool a Poisson(1) number of times, so a group of m
    values Poisson(m) times): the plain bootstrap's but for the pool's size, which varies by one
    part in the square root of it, and many times cheaper to draw than a multinomial. A task that
    picks a group takes one of its values at random: only the resampling within a group (its
    values are neighbours in the sorted sample) is left out. Memory: replays x (groups + running
    tasks), whatever the size of the sample."""

    counts: np.ndarray  # (replays, columns): groups, running tasks, the unseen value
    totals: np.ndarray  # per replay: the values in its pool
    stride: int  # the largest total: row r's positions are offset by r * stride
    starts: np.ndarray  # per group: its first value in the sorted sample
    sizes: np.ndarray  # per group: its values
    imputed: np.ndarray  # (replays, running tasks): their whole runtimes
    mean: np.ndarray  # per group: the mean of its values
    square: np.ndarray  # per group: the mean of their squares

    def rows(self, sl: slice) -> Grouped:
        return dataclasses.replace(self, counts=self.counts[sl], imputed=self.imputed[sl], totals=self.totals[sl])

    @functools.cached_property
    def _index(self) -> tuple[np.ndarray, np.ndarray]:
        """(ends, guide): per replay and column the end of its values in the pool (cumulative counts,
        row r offset by r * stride, flat); per replay a guide of 2 bins a column, each bin's first
        column, so that finding a position's column takes a look-up and a step or two."""
        replays, columns = self.counts.shape
        rows = np.arange(replays)[:, None]
        ends = (np.cumsum(self.counts, axis=1) + rows * self.stride).ravel()
        bins = 2 * columns
        edges = (np.arange(bins)[None, :] * self.totals[:, None]) // bins
        guide = np.searchsorted(ends, (edges + rows * self.stride).ravel(), side="right")
        return ends, guide.reshape(replays, bins)

    def draw(self, rng: np.random.Generator, model: RuntimeModel, tail: Tail, size: int) -> np.ndarray:
        # every monitoring step of a long run draws here most of its numbers: the arithmetic works
        # in place on few arrays (the same operations, in the same order, as written out plainly)
        replays, columns = self.counts.shape
        ends, guide = self._index
        bins = guide.shape[1]
        rows = np.arange(replays)[:, None]
        totals = self.totals[:, None]
        offset = rows * self.stride
        position = rng.random((replays, size)) * totals  # where in its pool each task picks
        position += offset  # flat, as ``ends``
        whole = position.astype(np.int64)
        look = whole - offset  # the position's bin in its row's guide: (local * bins) // total
        look *= bins
        look //= totals
        look += rows * bins
        column = guide.ravel()[look].ravel()
        del look
        whole = whole.ravel()
        end = ends[column]  # the end of the column each position is in, once the steps below are done
        behind = np.flatnonzero(end <= whole)
        while len(behind):  # a column or more past the bin's first
            column[behind] += 1
            end[behind] = ends[column[behind]]
            behind = behind[end[behind] <= whole[behind]]
        del whole
        column = column.reshape(replays, size)
        count = self.counts.ravel()[column]
        # a group's value: the fraction of the way into its copies says which of its values
        end = end.reshape(replays, size)
        end -= count  # the column's first position
        within = position
        within -= end
        del end
        np.maximum(count, 1, out=count)
        within /= count
        del count
        column -= rows * columns
        groups = len(self.sizes)
        g = np.minimum(column, groups - 1)
        size_of = self.sizes[g]
        within *= size_of
        index = within.astype(np.int64)
        del within
        size_of -= 1
        np.minimum(index, size_of, out=index)
        del size_of
        index += self.starts[g]
        del g
        runtimes = model.observed[index]
        del index
        beyond = column >= groups
        if beyond.any():
            r, k = np.nonzero(beyond)
            picked = column[r, k] - groups
            running = picked < columns - 1 - groups
            runtimes[r[running], k[running]] = self.imputed[r[running], picked[running]]
            unseen = ~running
            if unseen.any():
                runtimes[r[unseen], k[unseen]] = tail.values(rng, r[unseen])
        return runtimes

    def moments(self, rng: np.random.Generator, model: RuntimeModel, tail: Tail) -> tuple[np.ndarray, np.ndarray]:
        """Per replay, the mean and standard deviation of its pool (the unseen value drawn once)."""
        groups = len(self.sizes)
        unseen = tail.values(rng, np.arange(len(tail)))
        n_g, n_run, n_unseen = self.counts[:, :groups], self.counts[:, groups:-1], self.counts[:, -1]
        mean = (n_g @ self.mean + (n_run * self.imputed).sum(axis=1) + n_unseen * unseen) / self.totals
        square = (n_g @ self.square + (n_run * self.imputed ** 2).sum(axis=1) + n_unseen * unseen ** 2) / self.totals
        return mean, np.sqrt(np.maximum(0.0, square - mean * mean))


@dataclass(frozen=True)
class Tail:
    """Per replay, what lies beyond the longest value seen: the tail index ``xi`` of a value
    beyond it, and the ``mode``, the least factor of it such a value takes (a mode of long tasks
    the sample missed, one draw per replay: its unseen tasks share it)."""

    xi: np.ndarray
    mode: np.ndarray
    top: float  # the longest value seen

    def __len__(self) -> int:
        return len(self.xi)

    def __getitem__(self, sl: slice) -> Tail:
        return Tail(self.xi[sl], self.mode[sl], self.top)

    def values(self, rng: np.random.Generator, rows: np.ndarray) -> np.ndarray:
        """An unseen value for each of ``rows`` (replays, any shape): the longest seen times the
        larger of the replay's mode and a Pareto draw of its own."""
        return self.top * np.maximum(self.mode[rows], _pareto(rng, self.xi[rows]))


def _pareto(rng: np.random.Generator, xi: np.ndarray, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """U ** -xi, capped at TAIL_CAP: how much longer than the longest seen an unseen value is.
    ``shape``: that many draws, ``xi`` broadcast to it (default: one per value of ``xi``)."""
    u = rng.random(np.shape(xi) if shape is None else shape)
    np.maximum(u, 1e-300, out=u)
    np.power(u, -xi, out=u)
    np.minimum(TAIL_CAP, u, out=u)
    return u


@dataclass(frozen=True)
class Fleet:
    """The machines of one replay, one row per slot (plus each slot's machine and its billing)."""

    ratio: np.ndarray  # per slot: its runtime over the reference scale
    start_s: np.ndarray  # per slot: when it can take its first task from now (boot)
    elapsed: np.ndarray  # per slot: reference-scale elapsed time of the task it runs (nan: idle)
    limit_s: np.ndarray  # per slot: it takes no task whose mean does not end by then (inf: none)
    mean_s: np.ndarray  # per slot: its cluster's mean runtime (for ``limit_s``)
    machine: np.ndarray  # per slot: its machine's row
    cut_s: np.ndarray  # per slot of a machine let go: when a task it runs is cut off (inf: never)
    price: np.ndarray  # per machine
    atu_s: np.ndarray
    min_charge_s: np.ndarray
    release_s: np.ndarray
    paid_left_s: np.ndarray  # per machine: paid seconds it has left (nan: new, billed from now)
    billed: np.ndarray  # per machine: whether it is billed from now (False: a machine let go)


def fleet_of(machines: Mapping[str, int], clusters: Sequence[ClusterPlan], ratio: Mapping[str, float],
             paid_left: Mapping[str, Sequence[float]] | None = None, boot_s: Mapping[str, float] | None = None,
             running: Mapping[str, Sequence[Sequence[float]]] | None = None, keep_first: bool = False) -> Fleet:
    """The fleet of configuration ``machines``: per cluster it keeps the machines up with the most
    paid time left (``paid_left``), adds new ones that start after the cluster's boot, and lets
    the other machines up work until their paid time ends. ``running``: per cluster, per machine
    up (in the order of ``paid_left``), the reference-scale elapsed times of its running tasks.
    ``keep_first``: the machines kept are the first ones of ``paid_left`` (the run's own choice),
    not those with the most paid time left."""
    paid_left = paid_left or {}
    boot_s = boot_s or {}
    running = running or {}
    # ratio, start, elapsed, limit, mean, machine, cut
    slots: list[tuple[float, float, float, float, float, int, float]] = []
    machine_rows: list[tuple[float, float, float, float, float, bool]] = []
    for c in clusters:
        a = int(machines.get(c.name, 0))
        lefts = list(paid_left.get(c.name, ()))
        busy = list(running.get(c.name, ()))
        order = list(range(len(lefts))) if keep_first else sorted(range(len(lefts)), key=lambda i: -lefts[i])
        r = float(ratio.get(c.name, 1.0))
        for rank, i in enumerate(order):
            keep = rank < a
            m = len(machine_rows)
            machine_rows.append((c.price, c.atu_s, c.min_charge_s, c.release_s, lefts[i], keep))
            tasks = list(busy[i]) if i < len(busy) else []
            cut = math.inf if keep or c.atu_s <= SHORT_ATU_S else lefts[i] + max(0.0, c.release_s - billing.release_guard_s(c.release_s))
            for s in range(c.slots):
                slots.append((r, 0.0, tasks[s] if s < len(tasks) else math.nan,
                              math.inf if keep else lefts[i], c.mean_s, m, cut))
        for _ in range(max(0, a - len(lefts))):
            m = len(machine_rows)
            machine_rows.append((c.price, c.atu_s, c.min_charge_s, c.release_s, math.nan, True))
            for _s in range(c.slots):
                slots.append((r, max(0.0, boot_s.get(c.name, 0.0)), math.nan, math.inf, c.mean_s, m, math.inf))
    table = np.array(slots, dtype=float).reshape(-1, 7)
    table = table[np.argsort(table[:, 4], kind="stable")]  # the fastest slots first: they take tasks tied at a moment
    mr = np.array([row[:5] for row in machine_rows], dtype=float).reshape(-1, 5)
    return Fleet(ratio=table[:, 0], start_s=table[:, 1], elapsed=table[:, 2], limit_s=table[:, 3], mean_s=table[:, 4],
                 machine=table[:, 5].astype(np.int64), cut_s=table[:, 6], price=mr[:, 0], atu_s=mr[:, 1], min_charge_s=mr[:, 2],
                 release_s=mr[:, 3], paid_left_s=mr[:, 4],
                 billed=np.array([row[5] for row in machine_rows], dtype=bool))


def replay(fleet: Fleet, n_tasks: int, model: RuntimeModel, rng: np.random.Generator,
           replays: int = REPLAYS) -> tuple[np.ndarray, np.ndarray]:
    """(makespan, cost) of ``replays`` replays of ``n_tasks`` tasks on ``fleet`` (see the module
    docstring): makespans in seconds from now (inf when the fleet cannot end the bag), costs the
    money billed from now."""
    n_slots = len(fleet.ratio)
    tail = model.tail(rng, replays)
    pools = model.pools(rng, replays, tail)
    working = np.isinf(fleet.limit_s) & (fleet.ratio > 0)
    if n_slots == 0 or (n_tasks > 0 and not working.any()):
        return np.full(replays, math.inf), np.zeros(replays)
    # a busy slot first ends its running task: a whole runtime longer than its elapsed time
    running = np.isfinite(fleet.elapsed)
    first_free = np.broadcast_to(fleet.start_s, (replays, n_slots)).copy()
    busy = np.repeat(running[None, :], replays, axis=0)  # per replay, the slots that end a task first
    lost = np.zeros(replays, dtype=bool)  # a task cut off with no machine kept to run it again
    floor = np.zeros((replays, n_slots))  # per slot, when the tasks it runs again end at the earliest
    if running.any():
        whole = model.impute(rng, fleet.elapsed[running], tail)
        first_free[:, running] += np.maximum(0.0, whole - fleet.elapsed[running]) * fleet.ratio[running]
        lost = _rerun_cut(fleet, first_free, busy, floor, np.nonzero(running)[0], whole, working)
    if n_tasks <= 0:
        ends = np.maximum(first_free, floor)
        makespan = np.where(lost, np.inf, np.where(busy, ends, 0.0).max(axis=1))
        return makespan, _cost(fleet, ends, busy, replays)
    speed = np.where(working, 1.0 / np.maximum(fleet.mean_s, 1e-12), 0.0)
    share = speed / speed.sum()
    # the slots in groups of one cluster (one mean, kept or let go), each drawing as many runtimes
    # as its share of the bag is likely to need (more when that falls short)
    keys = np.stack([fleet.mean_s, fleet.ratio, np.isinf(fleet.limit_s)], axis=1)
    _unique, group_of = np.unique(keys, axis=0, return_inverse=True)
    groups = [np.nonzero(group_of.ravel() == g)[0] for g in range(group_of.max() + 1)]
    groups.sort(key=lambda idx: idx[0])  # in slot order: the fastest slots first
    draws = []
    for idx in groups:
        if working[idx[0]]:
            expected = n_tasks * float(share[idx[0]])
        else:  # a slot let go takes tasks while their mean fits before its release
            expected = float(np.max(fleet.limit_s[idx] / np.maximum(fleet.mean_s[idx], 1e-12)))
        draws.append(int(min(n_tasks, math.ceil(1.2 * expected + 3.0 * math.sqrt(expected) + 4))))
    per_replay = sum(len(idx) * d for idx, d in zip(groups, draws))
    run = _Run(fleet, model, rng, groups, working, n_tasks)
    slot_end = np.empty((replays, n_slots))
    used = np.empty((replays, n_slots), dtype=bool)
    cut = np.empty(replays)
    if replays * per_replay <= WHOLE_NUMBERS:  # every task drawn at once
        slot_end[:], used[:], cut[:] = run.whole(first_free, busy, pools, tail, draws)
    else:  # in chunks of replays, the bulk of each slot's tasks summed (see the module docstring)
        mean, sd = _moments(rng, model, pools, tail)
        chunk = max(1, CHUNK_NUMBERS // max(1, run.head_numbers(first_free, mean, sd)))
        for lo in range(0, replays, chunk):
            sl = slice(lo, min(replays, lo + chunk))
            part = _rows(pools, sl)
            found = run.headed(first_free[sl], busy[sl], part, tail[sl], mean[sl], sd[sl])
            if found is not None:
                slot_end[sl], used[sl], cut[sl] = found
                continue
            # heads that missed the cut: every task drawn, in smaller chunks (in bundles if need be)
            step = max(1, CHUNK_NUMBERS // max(1, per_replay))
            for first in range(sl.start, sl.stop, step):
                sub = slice(first, min(sl.stop, first + step))
                slot_end[sub], used[sub], cut[sub] = run.whole(first_free[sub], busy[sub], _rows(pools, sub), tail[sub], draws,
                                                               mean[sub], sd[sub], CHUNK_NUMBERS)
    slot_end = np.maximum(slot_end, floor)
    makespan = np.where(np.isfinite(cut) & ~lost, slot_end.max(axis=1), np.inf)
    return makespan, _cost(fleet, slot_end, used, replays)


def _rerun_cut(fleet: Fleet, first_free: np.ndarray, busy: np.ndarray, floor: np.ndarray, slots: np.ndarray,
               whole: np.ndarray, working: np.ndarray) -> np.ndarray:
    """A task running on a machine let go that would not end before its release is cut off there
    (the execution lets it go at its paid edge) and runs again from its start: it goes back to the
    bag, ahead of the tasks not started, and a kept slot takes it. In place, per replay: such a
    slot ends at its release; the kept slot free first takes the task's whole runtime on top of
    its own work (busy), and ends no sooner than the cut plus that runtime (``floor``): the work is
    counted where it is done, not the time the slot waits for the cut, which it spends on the
    bag's other tasks. ``slots``: the busy slots, ``whole``: their tasks' whole runtimes (replays,
    slots), on the reference scale. Returns per replay whether a task was cut with no kept slot to
    run it again."""
    limit = fleet.cut_s[slots]
    cut = np.isfinite(limit)[None, :] & (first_free[:, slots] > limit[None, :] + 1e-9)
    lost = np.zeros(len(first_free), dtype=bool)
    if not cut.any():
        return lost
    if not working.any():
        first_free[:, slots] = np.where(cut, limit[None, :], first_free[:, slots])
        return cut.any(axis=1)
    kept = np.nonzero(working)[0]
    rows = np.arange(len(first_free))
    for j in np.argsort(limit, kind="stable"):  # in the order they are cut
        if not cut[:, j].any():
            continue
        r = rows[cut[:, j]]
        first_free[r, slots[j]] = limit[j]
        pick = kept[np.argmin(first_free[np.ix_(r, kept)], axis=1)]
        again = whole[r, j] * fleet.ratio[pick]
        first_free[r, pick] += again
        floor[r, pick] = np.maximum(floor[r, pick], limit[j] + again)
        busy[r, pick] = True
    return lost


def _rows(pools: np.ndarray | Grouped, sl: slice) -> np.ndarray | Grouped:
    return pools.rows(sl) if isinstance(pools, Grouped) else pools[sl]


def _moments(rng: np.random.Generator, model: RuntimeModel, pools: np.ndarray | Grouped,
             tail: Tail) -> tuple[np.ndarray, np.ndarray]:
    """Per replay, its pool's mean and standard deviation (each unseen value drawn)."""
    if isinstance(pools, Grouped):
        return pools.moments(rng, model, tail)
    filled = np.where(np.isnan(pools), tail.values(rng, np.repeat(np.arange(len(pools))[:, None], pools.shape[1], axis=1)),
                      pools)
    return filled.mean(axis=1), filled.std(axis=1)


def _nth(flat: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Per row, its k-th smallest value (1-based; inf when the row has fewer). Rows of different k
    are padded with -inf, as many as they fall short of the largest k, so that one partition
    finds them all."""
    top = int(k.max())
    if int(k.min()) < 1 or top > flat.shape[1]:
        out = np.full(len(flat), np.inf)
        ok = (k >= 1) & (k <= flat.shape[1])
        if ok.any():
            out[ok] = _nth(flat[ok], k[ok])
        return out
    short = top - k
    if short.max() > 0:
        pad = np.where(np.arange(int(short.max()))[None, :] < short[:, None], -np.inf, np.inf)
        flat = np.concatenate([flat, pad], axis=1)
    return np.partition(flat, top - 1, axis=1)[:, top - 1]


def _taken(flat: np.ndarray, cut: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The starts each replay takes: those up to its cut, ties at the cut kept in slot order, k in all."""
    taken = flat <= cut[:, None]
    extra = taken.sum(axis=1) - k
    if np.any(extra > 0):  # starts tied at the cut: keep the first ones in slot order, k in all
        at_cut = flat == cut[:, None]
        need = (at_cut.sum(axis=1) - extra)[:, None]
        taken &= ~(at_cut & (np.cumsum(at_cut, axis=1) > need))
    return taken


@dataclasses.dataclass
class _Run:
    """One replay's fixed parts, shared by its chunks."""

    fleet: Fleet
    model: RuntimeModel
    rng: np.random.Generator
    groups: list[np.ndarray]
    working: np.ndarray
    n_tasks: int

    def whole(self, first_free: np.ndarray, busy: np.ndarray, pools: np.ndarray | Grouped, tail: Tail, draws: list[int],
              mean: np.ndarray | None = None, sd: np.ndarray | None = None,
              limit: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(slot ends, slots used, cut) of replays that draw every task: each slot's task starts are
        the cumulative sums of its draws, the bag's tasks the earliest starts. More than ``limit``
        numbers (``MAX_DRAWS`` by default): bundles of tasks, each the sum of that many draws (normal)."""
        fleet, model, rng, groups, working, n_tasks = (self.fleet, self.model, self.rng, self.groups, self.working,
                                                      self.n_tasks)
        draws = list(draws)
        replays = len(first_free)
        # a large bag: each draw stands for ``bundle`` tasks in a row, its runtime the sum of that many
        # draws (normal by the central limit, with the replay's own pool's mean and variance), so the
        # arrays stay within MAX_DRAWS numbers whatever the bag's size
        limit = MAX_DRAWS if limit is None else limit
        bundle = max(1, math.ceil(replays * sum(len(idx) * d for idx, d in zip(groups, draws)) / limit))
        if bundle > 1:
            n_tasks = math.ceil(n_tasks / bundle)
            draws = [max(4, math.ceil(d / bundle)) for d in draws]
            if mean is None or sd is None:
                mean, sd = _moments(rng, model, pools, tail)
            pool_mean, pool_sd = mean, sd

        def runtimes_of(size: int) -> np.ndarray:
            if bundle == 1:
                return model.draw(rng, pools, tail, size)
            z = rng.standard_normal((replays, size))
            return np.maximum(0.0, bundle * pool_mean[:, None] + math.sqrt(bundle) * pool_sd[:, None] * z)

        while True:
            parts = []
            for idx, d in zip(groups, draws):
                runtimes = runtimes_of(len(idx) * d).reshape(replays, len(idx), d)
                runtimes *= fleet.ratio[idx][None, :, None]
                ends = first_free[:, idx, None] + np.cumsum(runtimes, axis=2)
                starts = ends - runtimes
                if not working[idx[0]]:  # a slot let go takes only a task whose mean ends before its release
                    late = starts + fleet.mean_s[idx][None, :, None] > fleet.limit_s[idx][None, :, None] + 1e-9
                    starts[late] = np.inf
                parts.append((starts, ends))
            flat = np.concatenate([st.reshape(replays, -1) for st, _e in parts], axis=1)
            if flat.shape[1] < n_tasks:
                cut = np.full(replays, np.inf)
            else:
                cut = np.partition(flat, n_tasks - 1, axis=1)[:, n_tasks - 1]  # the N-th earliest start
            # a group whose slots used every draw might have taken more: it draws half as many again
            short = [g for g, (st, _e) in enumerate(parts)
                     if draws[g] < n_tasks and np.any(st[:, :, -1] <= cut[:, None])]
            if not short:
                break
            for g in short:
                draws[g] = min(n_tasks, math.ceil(1.5 * draws[g]))
        taken_flat = _taken(flat, cut, np.full(replays, n_tasks))
        slot_end = np.where(busy, first_free, 0.0)
        used = busy.copy()
        self._ends(parts, taken_flat, slot_end, used)
        return slot_end, used, cut

    def _ends(self, parts: list[tuple[np.ndarray, np.ndarray]], taken_flat: np.ndarray, slot_end: np.ndarray,
              used: np.ndarray) -> None:
        offset = 0
        for idx, (starts, ends) in zip(self.groups, parts):
            size = starts.shape[1] * starts.shape[2]
            taken = taken_flat[:, offset:offset + size].reshape(starts.shape)
            offset += size
            took = taken.any(axis=2)
            slot_end[:, idx] = np.where(took, np.where(taken, ends, -np.inf).max(axis=2), slot_end[:, idx])
            used[:, idx] |= took

    # ------------------------------------------------------------ heads: the bulk of a slot's tasks summed
    def _cv(self, mean: np.ndarray, sd: np.ndarray) -> float:
        """The largest coefficient of variation of a runtime over the replays' pools."""
        return float(np.max(sd / np.maximum(mean, 1e-12)))

    def _end(self, start: np.ndarray, task_s: np.ndarray, left: np.ndarray) -> np.ndarray:
        """Per row (a replay), when its slots have started ``left`` tasks, expected: a working slot
        one per ``task_s`` from ``start``, a slot let go as many as start before its release less its
        cluster's mean (a bisection)."""
        fleet, working = self.fleet, self.working
        rate = 1.0 / np.maximum(task_s, 1e-12)
        fits = np.where(working, np.inf, np.floor((fleet.limit_s - fleet.mean_s - start) * rate) + 1)
        cap = np.maximum(0.0, np.nan_to_num(fits, nan=0.0, posinf=np.inf))
        lo = np.min(np.where(working, start, np.inf), axis=-1)
        hi = np.max(np.where(working, start, -np.inf), axis=-1) + left * np.max(np.where(working, task_s, 0.0), axis=-1)
        # one buffer for the per-slot counts of every step (28 steps over replays x slots each);
        # with every slot working no cap is finite, and min(inf, count) is the count
        capped = bool(np.isfinite(cap).any())
        counts = np.empty(np.broadcast_shapes(np.shape(lo) + (1,), np.shape(start), np.shape(rate)))
        # on a thousand slots a chunk holds a replay or two, so a step costs its numpy calls more
        # than its arithmetic: a row of slots or two is bisected alone, its bounds plain numbers,
        # and more rows at once in buffers worked in place (the same operations on the same values
        # either way)
        if np.ndim(lo) == 0:
            return np.asarray(self._bisect(start, rate, cap if capped else None, float(lo), float(hi), float(left),
                                           counts))
        if len(lo) <= 2:
            left = np.broadcast_to(left, lo.shape)
            return np.array([self._bisect(start[r], rate[r] if np.ndim(rate) == 2 else rate,
                                          (cap[r] if np.ndim(cap) == 2 else cap) if capped else None,
                                          float(lo[r]), float(hi[r]), float(left[r]), counts[r])
                             for r in range(len(lo))])
        mid = np.empty_like(lo)
        count = np.empty_like(lo)
        below = np.empty(np.shape(lo), dtype=bool)
        above = np.empty(np.shape(lo), dtype=bool)
        for _ in range(28):  # to a hundred-millionth of the span
            np.add(lo, hi, out=mid)
            mid *= 0.5
            np.subtract(mid[..., None], start, out=counts)
            counts *= rate
            np.maximum(0.0, counts, out=counts)
            if capped:
                np.minimum(cap, counts, out=counts)
            np.add.reduce(counts, axis=-1, out=count)
            np.less(count, left, out=below)
            np.logical_not(below, out=above)
            np.copyto(lo, mid, where=below)
            np.copyto(hi, mid, where=above)
        return hi

    @staticmethod
    def _bisect(start: np.ndarray, rate: np.ndarray, cap: np.ndarray | None, lo: float, hi: float, left: float,
                counts: np.ndarray) -> float:
        """:meth:`_end`'s bisection for one row of slots (``counts``: its buffer)."""
        for _ in range(28):  # to a hundred-millionth of the span
            mid = 0.5 * (lo + hi)
            np.subtract(mid, start, out=counts)
            counts *= rate
            np.maximum(0.0, counts, out=counts)
            if cap is not None:
                np.minimum(cap, counts, out=counts)
            if np.add.reduce(counts) < left:
                lo = mid
            else:
                hi = mid
        return hi

    def _first_heads(self, first_free: np.ndarray, mean: np.ndarray, sd: np.ndarray,
                     sds: float) -> tuple[np.ndarray, np.ndarray]:
        """(per slot its first head, per slot the margin of its second): the tasks each working slot
        surely takes, from the bag's expected end, ``sds`` standard deviations of its count short."""
        fleet, working = self.fleet, self.working
        cv = self._cv(mean, sd)
        task_s = float(np.mean(mean)) * fleet.ratio  # a slot's mean runtime in the replays' pools
        free = first_free.mean(axis=0)
        end = float(self._end(free, task_s, np.asarray(float(self.n_tasks))))
        expected = np.where(working, np.maximum(0.0, end - free) / np.maximum(task_s, 1e-12), 0.0)
        margin = sds * cv * np.sqrt(expected) + 4.0
        head = np.where(working, np.floor(np.maximum(0.0, expected - margin)), 0.0)
        # the second head is about the margin (twice it at most): it ends that many deviations of
        # its own count short, and the window reaches as far past
        second = sds * cv * np.sqrt(2.0 * margin) + 1.0
        return head, second

    def head_numbers(self, first_free: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> int:
        """The numbers one replay draws with heads (its windows of whole tasks), for the chunks' size."""
        _head, second = self._first_heads(first_free, mean, sd, HEAD_SDS)
        return int(np.sum(np.where(self.working, np.ceil(2.0 * second) + 2, self._let_go_draws())))

    def _let_go_draws(self) -> np.ndarray:
        """Per slot let go, the runtimes it draws (as many as :func:`replay` gives it); 0 for the others."""
        fleet = self.fleet
        expected = np.nan_to_num(fleet.limit_s / np.maximum(fleet.mean_s, 1e-12), posinf=0.0)
        fits = np.where(self.working, 0.0, np.ceil(1.2 * expected + 3.0 * np.sqrt(expected) + 4))
        return np.minimum(fits, self.n_tasks)

    def _sum_of(self, count: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
        """The runtime of ``count`` tasks in a row per replay and slot (normal by the central limit)."""
        z = self.rng.standard_normal(count.shape)
        return np.maximum(0.0, count * mean[:, None] + np.sqrt(count) * sd[:, None] * z) * self.fleet.ratio[None, :]

    def headed(self, first_free: np.ndarray, busy: np.ndarray, pools: np.ndarray | Grouped, tail: Tail, mean: np.ndarray,
               sd: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(slot ends, slots used, cut) of replays whose slots sum the bulk of their tasks (heads) and
        draw only a window of whole tasks around the bag's end; None when a head missed it."""
        sds = HEAD_SDS
        for _try in range(HEAD_TRIES):
            found = self._headed_once(first_free, busy, pools, tail, mean, sd, sds)
            if found is not None:
                return found
            sds *= 2.0
        return None

    def _headed_once(self, first_free: np.ndarray, busy: np.ndarray, pools: np.ndarray | Grouped, tail: Tail, mean: np.ndarray,
                     sd: np.ndarray, sds: float) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        fleet, model, rng, working, n_tasks = self.fleet, self.model, self.rng, self.working, self.n_tasks
        replays, n_slots = first_free.shape
        head, second = self._first_heads(first_free, mean, sd, sds)
        head = np.broadcast_to(head, (replays, n_slots))
        head_end = first_free + np.where(head > 0, self._sum_of(head, mean, sd), 0.0)
        # where each replay's bag ends, from its heads' ends and its slots' rates (the working ones
        # that have not passed it), then a second head each slot surely takes before it
        task_s = mean[:, None] * fleet.ratio[None, :]
        end = self._end(head_end, task_s, n_tasks - head.sum(axis=1))
        more = np.where(working[None, :],
                        np.floor(np.maximum(0.0, (end[:, None] - head_end) / np.maximum(task_s, 1e-12) - second[None, :])),
                        0.0)
        head = head + more
        if np.any(head.sum(axis=1) >= n_tasks):
            return None
        head_end = head_end + np.where(more > 0, self._sum_of(more, mean, sd), 0.0)
        widen = sds / HEAD_SDS  # a try after a miss widens every window
        window = [int(min(n_tasks, np.ceil(2.0 * float(np.max(second[idx]))) + 2)) if working[idx[0]]
                  else int(min(n_tasks, math.ceil(widen * float(np.max(self._let_go_draws()[idx])))))
                  for idx in self.groups]
        parts = []
        for idx, d in zip(self.groups, window):
            runtimes = model.draw(rng, pools, tail, len(idx) * d).reshape(replays, len(idx), d)
            runtimes *= fleet.ratio[idx][None, :, None]
            ends = head_end[:, idx, None] + np.cumsum(runtimes, axis=2)
            starts = ends - runtimes
            if not working[idx[0]]:
                late = starts + fleet.mean_s[idx][None, :, None] > fleet.limit_s[idx][None, :, None] + 1e-9
                starts[late] = np.inf
            parts.append((starts, ends))
        flat = np.concatenate([st.reshape(replays, -1) for st, _e in parts], axis=1)
        k = (n_tasks - head.sum(axis=1)).astype(np.int64)
        cut = _nth(flat, k)
        if not np.all(np.isfinite(cut)):
            return None
        # every head's tasks started by the cut, and no window used up before it
        if np.any((head > 0) & (head_end > cut[:, None])):
            return None
        for d, (st, _e) in zip(window, parts):
            if d < n_tasks and np.any(st[:, :, -1] <= cut[:, None]):
                return None
        taken_flat = _taken(flat, cut, k)
        headed = head > 0
        slot_end = np.where(headed, head_end, np.where(busy, first_free, 0.0))
        used = headed | busy
        self._ends(parts, taken_flat, slot_end, used)
        return slot_end, used, cut


def _cost(fleet: Fleet, slot_end: np.ndarray, used: np.ndarray, replays: int) -> np.ndarray:
    """The money each replay bills from now: per machine the ATUs up to its last task's end and
    its release (:mod:`..billing`)."""
    n_machines = len(fleet.price)
    end = np.zeros((replays, n_machines))
    np.maximum.at(end, (slice(None), fleet.machine), np.where(used, slot_end, 0.0))  # type: ignore[arg-type]
    end = end + fleet.release_s[None, :]
    new = np.isnan(fleet.paid_left_s)
    atus = np.where(new[None, :], billing.units_array(end, fleet.atu_s, fleet.min_charge_s),
                    billing.atus_spanning_array(end - np.nan_to_num(fleet.paid_left_s)[None, :], fleet.atu_s))
    atus = np.where(fleet.billed[None, :], atus, 0.0)
    return (atus * fleet.price[None, :]).sum(axis=1)


def odds_of(fleet: Fleet, n_tasks: int, model: RuntimeModel, rng: np.random.Generator,
            replays: int = REPLAYS) -> Odds:
    """P50/P90 makespan and P50/P99 cost of ``replays`` replays."""
    makespan, cost = replay(fleet, n_tasks, model, rng, replays)
    return summarize(makespan, cost)


def summarize(makespan: np.ndarray, cost: np.ndarray) -> Odds:
    m50, m90 = (float(v) for v in np.quantile(makespan, [0.5, 0.9], method="higher"))
    c50, c99 = (float(v) for v in np.quantile(cost, [0.5, 0.99], method="higher"))
    return Odds(makespan_p50_s=m50, makespan_p90_s=m90, cost_p50=c50, cost_p99=c99, replays=len(makespan))


def option_odds(option: Option, clusters: Sequence[ClusterPlan], n_tasks: int, model: RuntimeModel,
                ratio: Mapping[str, float], rng: np.random.Generator, *,
                paid_left: Mapping[str, Sequence[float]] | None = None, boot_s: Mapping[str, float] | None = None,
                running: Mapping[str, Sequence[Sequence[float]]] | None = None, replays: int = REPLAYS) -> Odds:
    """The odds of ``option``'s configuration for ``n_tasks`` tasks not started yet, besides the
    ones ``running`` on the machines up (see :func:`fleet_of`)."""
    fleet = fleet_of(option.machines, clusters, ratio, paid_left, boot_s, running)
    return odds_of(fleet, n_tasks, model, rng, replays)


def chance_within(cost: np.ndarray, money: float) -> float:
    """The share of replays whose cost fits ``money``."""
    return float(np.mean(cost <= money + 1e-9)) if len(cost) else 1.0
