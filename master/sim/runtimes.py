"""Task runtime distributions for ``bats-sim``: ``--runtimes SPEC``.

How this works. :func:`parse_runtimes` turns a spec into a distribution object whose
``sample(rng, n)`` draws the base runtimes of ``n`` tasks (seconds, on a cluster of speed 1) from a
seeded numpy ``Generator`` in one vectorised call, so a million tasks cost no per-task Python work.
Every value in a spec is a duration (:func:`bats.common.durations.parse_duration`): a bare number is
seconds, or ``90s``, ``15m``, ``1h``.

``normal:MEAN,SD``
    Normal distribution, e.g. ``normal:15m,134s`` (seed 000 §4.1, seed 003 §4.2 NDB: N(15 min,
    σ² = 5 min²)). Runtimes must be positive, so the normal is truncated at ``MIN_RUNTIME_S``:
    values below it are drawn again (a truncated normal, not a point mass at the minimum); after
    ``_MAX_REDRAWS`` rounds any value still below it is set to the minimum, which only happens when
    the mean is a few SDs below one second.
``levy:SCALE,MAX``
    Truncated Lévy distribution (seed 003 §4.2 LTB: scale τ = 12 min, maximum b = 45 min). The
    Lévy distribution with location 0 and scale τ has CDF F(x) = erfc(√(τ/2x)); it is the law of
    τ/Z² with Z standard normal. Truncating it to (0, b] is conditioning Z on |Z| ≥ z₀ = √(τ/b),
    and by symmetry |Z| given |Z| ≥ z₀ is the standard normal's tail beyond z₀. We draw that tail
    exactly with Robert's (1995) rejection sampler (proposal z₀ + Exp(λ), λ = (z₀ + √(z₀² + 4))/2,
    accepted with probability exp(−(x − λ)²/2); acceptance ≥ 76 % for every z₀), then return τ/x².
    Every sample lies in (0, b]; no value is clipped. The paper's τ = 12 min, b = 45 min give a
    mean of about 14.8 min (median 11.3 min, SD 11.1 min).
``mdb``
    The multi-modal bag of seed 003 §4.2 (the DACH supernova workload): a mixture of two Cauchy
    and three uniform distributions. The paper gives neither the weights nor the parameters (only
    Fig. 3 and the description: two Cauchy "hunches" that are the two modes, a tail made of two
    uniform pieces). **Our assumption** (minutes, weights in brackets), chosen to reproduce that
    shape on the 0–45 min scale of the other two bags and a mean near their 15 min:

    - Cauchy(location 5, scale 0.5) [0.25] — the first, sharp mode;
    - Cauchy(location 14, scale 1) [0.35] — the second, wider mode;
    - Uniform(2, 20) [0.20] — the body between and around the modes;
    - Uniform(20, 30) [0.12] and Uniform(30, 45) [0.08] — the two-step tail.

    Cauchy draws outside [1 min, 45 min] are drawn again, so the support is [1 min, 45 min].
    The mean is about 14.6 min, the SD about 9.6 min.
``bimodal:SHORT,LONG,SHARE``
    Two kinds of task in one bag: a share SHARE (a fraction, 0 to 1) of long tasks around LONG, the
    rest short ones around SHORT, each normal with a standard deviation of a tenth of its mean
    (truncated at the minimum as ``normal``), e.g. ``bimodal:2m,40m,0.1``: a sample of a few tasks
    may see no long one, which is what makes such bags hard to plan.
``fixed:T``
    Every task takes T.
``fewlong:SHORT,LONG,K``
    Few long tasks among many short ones: exactly K tasks (at random places in the bag; all of them
    when the bag has fewer) take about LONG, the others about SHORT, each normal with a standard
    deviation of a tenth of its mean (truncated at the minimum as ``normal``), e.g.
    ``fewlong:1m,4h,10``: a sample of a few dozen tasks out of thousands almost never sees one, and
    the bag cannot end before the first long task that starts late does.
``shape:NAME,MEAN``
    Six shapes of real workloads, scaled so that the distribution's mean is MEAN: **parametric
    mixtures we chose to mimic the kinds of shape that runtime traces of scientific applications
    show, not fitted to any trace** (none is downloaded or shipped). Each is a mixture of
    lognormal, normal and truncated Pareto parts (:data:`SHAPES` gives them, relative sizes
    before the scaling); their shape, with a large bag:

    - ``heavy``: a heavy tail: 55 % of the tasks short, 44 % around twice the mean, 1 % very
      long; the median is about a fiftieth of the mean and the longest 1 % of the tasks hold about
      a quarter of the work (``shape:heavy,10m``: a median near 11 s for a mean of 10 min);
    - ``wide``: one lognormal of sigma 1.2 (median about half the mean, the longest 1 % hold
      about 13 %);
    - ``stragglers``: a tight normal body (CV 0.15) and 3 % of the tasks about 4.5 times longer;
    - ``stages``: three kinds of task, 60 % short, 30 % medium and 10 % long (about 1:5:13);
    - ``powerlaw``: a Pareto tail of index 1.6 from its minimum to 300 times it (the longest 1 %
      hold about 15 %);
    - ``spiky``: 99.5 % short tasks and 0.5 % about 200 times longer, which hold half the work.
``file:PATH``
    One runtime per line (blank lines and ``#`` comments skipped); task k gets line k, cycling
    through the file when it has fewer lines than there are tasks.

A bad spec raises :class:`RuntimeSpecError` with a one-line reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from bats.common.durations import parse_duration
from bats.common.textfiles import UnreadableText, read_utf8

MIN_RUNTIME_S = 1.0  # the normal distribution is truncated here
_MAX_REDRAWS = 64
MINUTE = 60.0

# The MDB mixture (our assumption, see the module docstring): (kind, a, b, weight), minutes.
MDB_COMPONENTS: tuple[tuple[str, float, float, float], ...] = (
    ("cauchy", 5.0, 0.5, 0.25),
    ("cauchy", 14.0, 1.0, 0.35),
    ("uniform", 2.0, 20.0, 0.20),
    ("uniform", 20.0, 30.0, 0.12),
    ("uniform", 30.0, 45.0, 0.08),
)
MDB_RANGE_MIN = (1.0, 45.0)  # Cauchy draws outside are drawn again


class RuntimeSpecError(ValueError):
    """An unusable ``--runtimes`` spec; the message is one line."""


class RuntimeDistribution(Protocol):
    @property
    def spec(self) -> str:
        """The spec it was parsed from."""
        ...

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` base runtimes in seconds (float64), one per task."""
        ...


@dataclass(frozen=True)
class Normal:
    spec: str
    mean: float
    sd: float

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        values = rng.normal(self.mean, self.sd, n)
        for _ in range(_MAX_REDRAWS):
            low = np.flatnonzero(values < MIN_RUNTIME_S)
            if low.size == 0:
                return values
            values[low] = rng.normal(self.mean, self.sd, low.size)
        return np.maximum(values, MIN_RUNTIME_S)

    def clamped_share(self) -> float:
        """The share of draws below the 1 s minimum (drawn again, so the bag's mean is higher)."""
        if self.sd <= 0:
            return 1.0 if self.mean < MIN_RUNTIME_S else 0.0
        return 0.5 * (1.0 + math.erf((MIN_RUNTIME_S - self.mean) / (self.sd * math.sqrt(2.0))))


@dataclass(frozen=True)
class Levy:
    spec: str
    scale: float
    max: float

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        z = normal_tail(rng, math.sqrt(self.scale / self.max), n)
        return np.minimum(self.scale / (z * z), self.max)  # min() only guards the last ulp

    def cdf(self, x: float) -> float:
        """P(runtime <= x) of the truncated distribution (for tests and documentation)."""
        if x <= 0:
            return 0.0
        if x >= self.max:
            return 1.0
        return math.erfc(math.sqrt(self.scale / (2 * x))) / math.erfc(math.sqrt(self.scale / (2 * self.max)))


@dataclass(frozen=True)
class Bimodal:
    spec: str
    short: float
    long: float
    share: float

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        is_long = rng.random(n) < self.share
        return _normal_around(rng, np.where(is_long, self.long, self.short))


def normal_tail(rng: np.random.Generator, a: float, n: int) -> np.ndarray:
    """``n`` draws of a standard normal conditioned on being >= ``a`` (a >= 0): Robert's (1995)
    exponential rejection sampler, vectorised; each round keeps the accepted proposals."""
    lam = (a + math.sqrt(a * a + 4.0)) / 2.0
    out = np.empty(n)
    filled = 0
    while filled < n:
        want = n - filled
        batch = int(want * 1.35) + 16  # acceptance is at least ~0.76
        x = a + rng.exponential(1.0 / lam, batch)
        keep = x[rng.random(batch) <= np.exp(-0.5 * (x - lam) ** 2)][:want]
        out[filled:filled + keep.size] = keep
        filled += keep.size
    return out


@dataclass(frozen=True)
class Mdb:
    spec: str = "mdb"

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        weights = np.array([w for *_rest, w in MDB_COMPONENTS])
        counts = rng.multinomial(n, weights / weights.sum())
        parts = []
        low, high = MDB_RANGE_MIN
        for (kind, a, b, _w), count in zip(MDB_COMPONENTS, counts):
            if kind == "uniform":
                parts.append(rng.uniform(a, b, count))
                continue
            values = a + b * rng.standard_cauchy(count)
            while True:
                bad = np.flatnonzero((values < low) | (values > high))
                if bad.size == 0:
                    break
                values[bad] = a + b * rng.standard_cauchy(bad.size)
            parts.append(values)
        values = np.concatenate(parts) * MINUTE
        rng.shuffle(values)  # the components' draws must not come in blocks of task ids
        return values


@dataclass(frozen=True)
class FewLong:
    spec: str
    short: float
    long: float
    count: int

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        means = np.full(n, self.short)
        means[rng.choice(n, size=min(self.count, n), replace=False)] = self.long
        return _normal_around(rng, means)


# The real-like shapes (see the module docstring): name -> parts (weight, kind, a, b, c), sizes
# relative (the mixture is scaled to the spec's mean). Kinds: "lognormal" (median a, sigma b),
# "normal" (mean a, sd b, truncated at the minimum), "pareto" (minimum a, index b, at most c).
SHAPES: dict[str, tuple[tuple[float, str, float, float, float], ...]] = {
    "heavy": ((0.55, "lognormal", 1.0, 0.6, 0.0), (0.44, "lognormal", 160.0, 0.7, 0.0),
              (0.01, "lognormal", 2600.0, 0.4, 0.0)),
    "wide": ((1.0, "lognormal", 1.0, 1.2, 0.0),),
    "stragglers": ((0.97, "normal", 1.0, 0.15, 0.0), (0.03, "lognormal", 4.5, 0.2, 0.0)),
    "stages": ((0.6, "normal", 0.3, 0.06, 0.0), (0.3, "normal", 1.5, 0.3, 0.0), (0.1, "normal", 4.0, 0.8, 0.0)),
    "powerlaw": ((1.0, "pareto", 1.0, 1.6, 300.0),),
    "spiky": ((0.995, "lognormal", 1.0, 0.3, 0.0), (0.005, "lognormal", 200.0, 0.1, 0.0)),
}


def _part_mean(kind: str, a: float, b: float, c: float) -> float:
    if kind == "lognormal":
        return a * math.exp(b * b / 2.0)
    if kind == "normal":
        return a  # its truncation at the minimum moves it by far less than a second here
    # Pareto of minimum a and index b, truncated at c: the mean of the conditional law
    return b * a**b * (a ** (1.0 - b) - c ** (1.0 - b)) / ((b - 1.0) * (1.0 - (a / c) ** b))


@dataclass(frozen=True)
class Shape:
    spec: str
    name: str
    mean: float

    def scale(self) -> float:
        """The factor that takes the shape's relative sizes to seconds (its mean becomes ``mean``)."""
        parts = SHAPES[self.name]
        total = sum(w for w, *_ in parts)
        return self.mean / sum(w / total * _part_mean(kind, a, b, c) for w, kind, a, b, c in parts)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        parts = SHAPES[self.name]
        weights = np.array([w for w, *_ in parts])
        counts = rng.multinomial(n, weights / weights.sum())
        k = self.scale()
        drawn = []
        for (_w, kind, a, b, c), count in zip(parts, counts):
            if kind == "lognormal":
                drawn.append(k * a * np.exp(b * rng.standard_normal(count)))
            elif kind == "normal":
                drawn.append(_normal_around(rng, np.full(count, k * a), a / b))
            else:  # inverse CDF of the truncated Pareto
                u = rng.random(count)
                drawn.append(k * a * (1.0 - u * (1.0 - (a / c) ** b)) ** (-1.0 / b))
        values = np.maximum(np.concatenate(drawn), MIN_RUNTIME_S)
        rng.shuffle(values)  # the parts' draws must not come in blocks of task ids
        return values


def _normal_around(rng: np.random.Generator, means: np.ndarray, per_sd: float = 10.0) -> np.ndarray:
    """Normal draws around ``means`` with a standard deviation of each mean over ``per_sd``,
    truncated at the minimum as ``normal`` (a value below it is drawn again)."""
    values = rng.normal(means, means / per_sd)
    for _ in range(_MAX_REDRAWS):
        low = values < MIN_RUNTIME_S
        if not low.any():
            break
        values[low] = rng.normal(means[low], means[low] / per_sd)
    return np.maximum(values, MIN_RUNTIME_S)


@dataclass(frozen=True)
class Fixed:
    spec: str
    value: float

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.value)


@dataclass(frozen=True)
class FromFile:
    spec: str
    values: tuple[float, ...]

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.resize(np.array(self.values, dtype=float), n)  # np.resize repeats (cycles)


def _durations(kind: str, args: str, names: tuple[str, ...]) -> list[float]:
    parts = args.split(",") if args else []
    usage = f"{kind}:{','.join(names)}"
    if len(parts) != len(names):
        raise RuntimeSpecError(f"{kind}: expected {usage}, got {len(parts)} value(s)")
    values = []
    for name, part in zip(names, parts):
        try:
            values.append(parse_duration(part))
        except ValueError as exc:
            raise RuntimeSpecError(f"{kind}: {name}: {exc}") from None
    return values


def _read_file(path_text: str) -> tuple[float, ...]:
    if not path_text:
        raise RuntimeSpecError("file: expected file:PATH")
    shown = repr(path_text) if not path_text.isprintable() else path_text
    try:
        text = read_utf8(path_text, shown, bom=True)
    except UnreadableText as exc:
        raise RuntimeSpecError(str(exc)) from None
    values = []
    for number, line in enumerate(text.splitlines(), 1):
        item = line.split("#", 1)[0].strip()
        if not item:
            continue
        try:
            values.append(parse_duration(item))
        except ValueError as exc:
            raise RuntimeSpecError(f"{shown}:{number}: {exc}") from None
    if not values:
        raise RuntimeSpecError(f"{shown}: no runtimes in the file (one duration per line)")
    return tuple(values)


SPEC_FORMS = ("normal:MEAN,SD, levy:SCALE,MAX, bimodal:SHORT,LONG,SHARE, fewlong:SHORT,LONG,K, "
              "shape:NAME,MEAN, mdb, fixed:T or file:PATH")


def parse_runtimes(spec: str) -> RuntimeDistribution:
    """The distribution a ``--runtimes`` spec names; :class:`RuntimeSpecError` if it is unusable."""
    kind, sep, args = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "normal":
        mean, sd = _durations(kind, args, ("MEAN", "SD"))
        if mean <= 0:
            raise RuntimeSpecError(f"normal: MEAN must be longer than 0 seconds, got {args.split(',')[0]!r}")
        return Normal(spec, mean, sd)
    if kind == "levy":
        scale, top = _durations(kind, args, ("SCALE", "MAX"))
        if scale <= 0 or top <= 0:
            raise RuntimeSpecError("levy: SCALE and MAX must be longer than 0 seconds")
        return Levy(spec, scale, top)
    if kind == "bimodal":
        parts = args.split(",") if args else []
        if len(parts) != 3:
            raise RuntimeSpecError(f"bimodal: expected bimodal:SHORT,LONG,SHARE, got {len(parts)} value(s)")
        short, long = _durations(kind, ",".join(parts[:2]), ("SHORT", "LONG"))
        try:
            share = float(parts[2])
        except ValueError:
            raise RuntimeSpecError(f"bimodal: SHARE: expected a fraction from 0 to 1, got {parts[2]!r}") from None
        if not (short > 0 and long > 0 and 0.0 <= share <= 1.0):
            raise RuntimeSpecError("bimodal: SHORT and LONG must be longer than 0 seconds and SHARE from 0 to 1")
        return Bimodal(spec, short, long, share)
    if kind == "fewlong":
        parts = args.split(",") if args else []
        if len(parts) != 3:
            raise RuntimeSpecError(f"fewlong: expected fewlong:SHORT,LONG,K, got {len(parts)} value(s)")
        short, long = _durations(kind, ",".join(parts[:2]), ("SHORT", "LONG"))
        try:
            count = int(parts[2])
        except ValueError:
            raise RuntimeSpecError(f"fewlong: K: expected a whole number of long tasks, got {parts[2]!r}") from None
        if not (short > 0 and long > 0 and count >= 0):
            raise RuntimeSpecError("fewlong: SHORT and LONG must be longer than 0 seconds and K at least 0")
        return FewLong(spec, short, long, count)
    if kind == "shape":
        name, _sep, mean_text = args.partition(",")
        name = name.strip().lower()
        if name not in SHAPES:
            raise RuntimeSpecError(f"shape: unknown shape {name!r} (expected shape:NAME,MEAN, NAME one of "
                                   f"{', '.join(SHAPES)})")
        (mean,) = _durations(kind, mean_text, ("MEAN",))
        if mean <= 0:
            raise RuntimeSpecError(f"shape: MEAN must be longer than 0 seconds, got {mean_text!r}")
        return Shape(spec, name, mean)
    if kind == "mdb":
        if sep and args.strip():
            raise RuntimeSpecError(f"mdb: takes no parameters, got {args!r}")
        return Mdb()
    if kind == "fixed":
        (value,) = _durations(kind, args, ("T",))
        return Fixed(spec, value)
    if kind == "file":
        return FromFile(spec, _read_file(args))
    raise RuntimeSpecError(f"unknown runtime spec {spec!r} (expected {SPEC_FORMS})")
