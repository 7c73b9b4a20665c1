"""The uncertainty of a log figure as the t model holds it, with intervals computed, not drawn.

A cell timed in P >= 2 processes gives, per side, P per-process log medians; their mean is the
estimate, and under the t model (docs/statistics.md) its uncertainty is loc + scale * T with
T ~ Student's t of P - 1 degrees of freedom and scale = sd / sqrt(P). Everything a report states
is a linear combination of such independent terms: a change between two runs is B - A, a
geometric mean over cells is their mean, a change of a geometric mean the mean of the changes.
`LogDist` holds such a combination exactly (its location and its terms), and its interval is the
exact quantile of the sum: one term by the closed form (t_quantile, below), several by numerical
convolution of the terms' distributions on a common grid (`_centred_cdf`). The same data give the
same interval, call and p-value on every machine and with any seed; the replicates the comparison
used to draw (stats.process_replicates, Monte Carlo of the same model) only approximated these.

A cell timed in one process has no t term: its uncertainty is the paired block bootstrap's
replicates (never called, docs/statistics.md), and a combination that includes one is drawn
(`reps`), with a fixed seed.
"""
from __future__ import annotations

import math
from functools import lru_cache
from dataclasses import dataclass

import numpy as np


def _t_cdf_real(t: float, df: float, n: int = 4000) -> float:
    """Student's t distribution function for any df > 0 (Welch's are not integers): the density
    integrated from 0 by Simpson's rule on the substitution x = tan(u), which maps the infinite
    tail onto a finite interval; within 1e-9 of the closed form at integer df (tests/test_stats.py)."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    top = math.atan(abs(t))

    def g(u):  # density at tan(u) times d tan(u)/du
        x = math.tan(u)
        return c * (1 + x * x / df) ** (-(df + 1) / 2) / math.cos(u) ** 2

    h = top / n
    acc = g(0.0) + g(top) + sum((4 if i % 2 else 2) * g(i * h) for i in range(1, n))
    half = acc * h / 3
    return 0.5 + half if t >= 0 else 0.5 - half


def t_cdf(t: float, df: float) -> float:
    """Student's t distribution function. Integer degrees of freedom: the closed form of Abramowitz
    & Stegun 26.7.3/26.7.4 (a finite sum, no special function needed); other df > 0: integrated."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if not float(df).is_integer():
        return _t_cdf_real(t, float(df))
    df = int(df)
    theta = math.atan2(t, math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:  # odd: A = (2/pi) (theta + sin cos (1 + 2/3 cos^2 + ...))
        term, acc = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 3) // 2 + 1):
            term *= c2 * (2 * k) / (2 * k + 1)
            acc += term
        a = (2 / math.pi) * (theta + (s * math.cos(theta) * acc if df > 1 else 0.0))
    else:  # even: A = sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
        term, acc = 1.0, 1.0
        for k in range(1, (df - 2) // 2 + 1):
            term *= c2 * (2 * k - 1) / (2 * k)
            acc += term
        a = s * acc
    return 0.5 + 0.5 * a


def welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """95% Welch interval of mean(b) - mean(a) (per-process values), with the exact t quantile at
    Welch's (non-integer) degrees of freedom (t_quantile; no scipy)."""
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se, d = np.sqrt(va + vb), b.mean() - a.mean()
    if se == 0:
        return d, d
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    t = t_quantile(0.975, float(df))
    return d - t * se, d + t * se


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The p quantile of Student's t with `df` degrees of freedom (bisection on t_cdf, to 1e-12);
    cached: a report asks the same few (0.975, P - 1) for every cell."""
    lo, hi = -1e6, 1e6
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, abs(mid)):
            break
    return (lo + hi) / 2


def exact_t_interval(log_values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """exp of the t interval of the mean of per-process logs (P >= 2 values): the bounds the
    process-level replicates approximate by Monte Carlo."""
    x = np.asarray(log_values, float)
    n = len(x)
    half = t_quantile(1 - (1 - level) / 2, n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
    m = float(x.mean())
    return math.exp(m - half), math.exp(m + half)


LEVEL = 0.95
GRID_STEPS = 50  # grid points per unit of the sum's central scale (sqrt of the summed squared scales)
REACH = {1: 400.0}  # how far (in scales) a term's grid reaches; its mass beyond sits at the ends
DEFAULT_REACH = 60.0  # P(|t_2| > 60) = 2.8e-4: mass that stays beyond any 95% bound wherever it sits
MAX_GRID = 1 << 20  # grid points a side, at most


def t_cdf_vec(x: np.ndarray, df: int) -> np.ndarray:
    """Student's t distribution function at every point of `x`, for an integer df >= 1: the closed
    form of Abramowitz & Stegun 26.7.3/26.7.4 (stats.t_cdf is its scalar form)."""
    x = np.asarray(x, float)
    # theta = atan(x / sqrt(df)): sin and cos^2 in closed form (one square root, no trigonometry;
    # the 10,000-cell report computes this for 39,000 grids)
    r = np.sqrt(x * x + df)
    with np.errstate(invalid="ignore"):
        s, c2 = x / r, df / (r * r)
    inf = np.isinf(x)
    if inf.any():  # x / r is inf / inf there: the limits
        s, c2 = np.where(inf, np.sign(x), s), np.where(inf, 0.0, c2)
    if df % 2:
        theta = np.arctan2(x, math.sqrt(df))
        acc, term = np.ones_like(x), np.ones_like(x)
        for k in range(1, (df - 3) // 2 + 1):
            term = term * c2 * (2 * k) / (2 * k + 1)
            acc = acc + term
        a = (2 / math.pi) * (theta + (s * (math.sqrt(df) / r) * acc if df > 1 else 0.0))
    else:
        acc = np.ones_like(x)
        if df > 2:
            term = np.ones_like(x)
            for k in range(1, (df - 2) // 2 + 1):
                term = term * c2 * (2 * k - 1) / (2 * k)
                acc = acc + term
        a = s * acc
    return 0.5 + 0.5 * a


def _term_pmf(scale: float, df: int, h: float, k: int) -> np.ndarray:
    """A centred scaled t term on the grid j*h (j = -k..k): each point holds the mass of its bin,
    the end points also the mass beyond them."""
    edges = (np.arange(-k, k + 2) - 0.5) * h / scale
    cdf = t_cdf_vec(edges, df)
    cdf[0], cdf[-1] = 0.0, 1.0
    return np.diff(cdf)


def _crop(p: np.ndarray, k: int) -> np.ndarray:
    """A centred pmf on j = -m..m cropped to -k..k, the mass beyond moved onto the end points."""
    m = (len(p) - 1) // 2
    if m <= k:
        return p
    out = p[m - k:m + k + 1].copy()
    out[0] += p[:m - k].sum()
    out[-1] += p[m + k + 1:].sum()
    return out


def _convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    n = len(a) + len(b) - 1
    size = 1 << (n - 1).bit_length()
    return np.clip(np.fft.irfft(np.fft.rfft(a, size) * np.fft.rfft(b, size), size)[:n], 0.0, None)


def _centred_cdf(terms: tuple, reach: float = 0.0) -> tuple[float, np.ndarray]:
    """The distribution function of the centred sum of `terms` ((scale, df) pairs) at the upper
    edges of its grid's bins: (h, cdf), bin j centred at (j - (len - 1) / 2) * h. The grid reaches
    the larger of `reach` and every term's REACH scales; mass beyond it (of a term, or of a partial
    sum as the terms are convolved one by one) sits at its ends, which must lie beyond the
    quantiles asked for (`_upper_quantile` makes sure)."""
    spread = math.sqrt(sum(s * s for s, _ in terms))
    h = spread / GRID_STEPS
    width = max([reach] + [REACH.get(d, DEFAULT_REACH) * s for s, d in terms])
    k = min(math.ceil(width / h), MAX_GRID)
    h = max(h, width / k)
    acc = None
    for s, d in sorted(terms, reverse=True):
        p = _term_pmf(s, d, h, k)
        acc = p if acc is None else _crop(_convolve(acc, p), k)
    cdf = np.cumsum(acc)
    return h, cdf / cdf[-1]


def _grid_quantile(h: float, cdf: np.ndarray, p: float) -> float:
    centre = (len(cdf) - 1) / 2
    j = int(np.searchsorted(cdf, p))  # first upper edge at or above p
    lo_cdf = cdf[j - 1] if j > 0 else 0.0
    frac = (p - lo_cdf) / (cdf[j] - lo_cdf) if cdf[j] > lo_cdf else 1.0
    return (j - centre - 0.5 + frac) * h


def _upper_quantile(terms: tuple, p: float) -> float:
    """The p quantile (p > 0.5) of the centred sum of `terms`."""
    live = tuple((s, d) for s, d in terms if s > 0)
    if not live:
        return 0.0
    if len(live) == 1:
        s, d = live[0]
        return s * t_quantile(p, d)
    # a term's grid must reach well beyond the sum's quantile, or the mass it keeps at its ends
    # (beyond REACH scales) would count below the quantile: widen until it does
    spread = math.sqrt(sum(s * s for s, _ in live))
    # a first guess; the sum's quantile grows past one term's (heavy tails) by about 0.4 ln(n)
    # spreads: from 100 terms on the guess includes that, so a group of 10,000 cells is not
    # convolved twice (under 100 the first guess holds where the terms' own reach does)
    guess = t_quantile(p, min(d for _, d in live))
    reach = 2 * (guess if len(live) < 100 else guess + 0.4 * math.log(len(live))) * spread
    for _ in range(4):
        q = _grid_quantile(*_centred_cdf(live, reach), p)
        if max([reach] + [REACH.get(d, DEFAULT_REACH) * s for s, d in live]) >= 2 * q:
            return q
        reach = 3 * q
    return q


def _centred_cdf_at(terms: tuple, x: float) -> float:
    """P(centred sum of `terms` <= x)."""
    live = tuple((s, d) for s, d in terms if s > 0)
    if not live:
        return 1.0 if x >= 0 else 0.0
    if len(live) == 1:
        s, d = live[0]
        return t_cdf(x / s, d)
    h, cdf = _centred_cdf(live, 2 * max(abs(x), _upper_quantile(live, 1 - 1e-3)))
    centre = (len(cdf) - 1) / 2
    pos = x / h + centre + 0.5  # in bins from the lower end of the grid
    edges = np.arange(len(cdf)) + 1.0
    return float(np.interp(pos, np.concatenate([[0.0], edges]), np.concatenate([[0.0], cdf])))


@dataclass(frozen=True, eq=False)
class LogDist:
    """A log figure's uncertainty: `loc` plus independent centred terms scale * T_df (exact), or,
    where any part rests on one process's blocks, replicates of the whole value (`reps`)."""

    loc: float
    terms: tuple = ()  # ((scale, df), ...)
    reps: np.ndarray | None = None

    @classmethod
    def of_processes(cls, values) -> "LogDist":
        """The mean of P >= 2 per-process log values under the t model."""
        x = np.asarray(values, float)
        if len(x) < 2:
            raise ValueError("a t term needs two or more processes")
        return cls(float(x.mean()), ((float(x.std(ddof=1)) / math.sqrt(len(x)), len(x) - 1),))

    @classmethod
    def of_replicates(cls, reps) -> "LogDist":
        r = np.asarray(reps, float)
        return cls(float(np.median(r)), (), r)

    @property
    def exact(self) -> bool:
        return self.reps is None

    def draws(self, n: int) -> np.ndarray:
        """`n` replicates of the value: its own, or drawn from its terms (seeded by the terms, so
        the same figure draws the same replicates and different figures independent ones)."""
        if self.reps is not None:
            return self.reps
        rng = np.random.default_rng(hash((self.loc, self.terms)) & 0xFFFFFFFF)
        out = np.full(n, self.loc)
        for s, d in self.terms:
            out = out + s * rng.standard_t(d, n)
        return out

    def __add__(self, other: "LogDist") -> "LogDist":
        if self.exact and other.exact:
            return LogDist(self.loc + other.loc, self.terms + other.terms)
        n = len(self.reps if self.reps is not None else other.reps)
        return LogDist.of_replicates(self.draws(n) + other.draws(n))

    def __neg__(self) -> "LogDist":
        return self.scaled(-1.0)

    def __sub__(self, other: "LogDist") -> "LogDist":
        return self + (-other)

    def scaled(self, w: float) -> "LogDist":
        if self.exact:
            return LogDist(w * self.loc, tuple((abs(w) * s, d) for s, d in self.terms))
        return LogDist(w * self.loc, (), w * self.reps)

    @property
    def centre(self) -> float:
        """The median: `loc` for exact terms (each symmetric), else the replicates' median."""
        return self.loc if self.exact else float(np.median(self.reps))

    def interval(self, level: float = LEVEL) -> tuple[float, float]:
        """The central `level` interval of the value (log scale)."""
        if not self.exact:
            lo, hi = np.quantile(self.reps, [(1 - level) / 2, (1 + level) / 2])
            return float(lo), float(hi)
        q = _upper_quantile(self.terms, (1 + level) / 2)
        return self.loc - q, self.loc + q

    def p_value(self) -> float:
        """Two-sided p-value for "no change" (value 0): exact for terms; from replicates at least 1/reps."""
        if not self.exact:
            n = len(self.reps)
            tail = min(np.mean(self.reps <= 0), np.mean(self.reps >= 0))
            return float(min(1.0, max(2 * tail, 1 / n)))
        return float(min(1.0, 2 * _centred_cdf_at(self.terms, -abs(self.loc))))


def mean(dists: list[LogDist]) -> LogDist:
    """The mean of independent log figures (a geometric mean's log)."""
    if not dists:
        raise ValueError("the mean of no figures")
    total = dists[0]
    for d in dists[1:]:
        total = total + d
    return total.scaled(1.0 / len(dists))
