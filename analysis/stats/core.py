"""Statistics computed from raw samples: two-level intervals over processes and blocks, verdicts.

The process is the unit of repetition (docs/measurement.md). A cell timed in P >= 2 fresh
processes gets its interval from the processes: each process gives one paired estimate
(ln eager median, ln compiled median) from its own blocks, so the spread between processes
carries the noise inside each process as well as the noise between them (Kalibera & Jones
2013: the top level's variance includes the levels below it). The estimate is the mean over
processes (a geometric mean of medians; speedup = eager / compiled); its interval is Student's
t with P - 1 degrees of freedom, drawn as replicates from the multivariate t of the pair so
that every ratio built from them (speedup, a change between runs, a geometric mean over
cells) comes from one set of replicates. Why not a bootstrap over processes: with P = 3 a
percentile bootstrap cannot produce the t distribution's tails and covers far less than 95%
(benchmarks/interval_coverage.py measures each method).

A cell timed in one process (data collected before replicates existed, or PROCESSES=1) keeps
the paired block bootstrap: eager and compiled are timed in alternating blocks, block indices
are resampled with replacement taking both sides' block i together. That interval covers the
noise within the process only, and the report says so.
"""
from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.data.load import sql
from analysis.stats import estimates
from analysis.stats.tdist import LogDist, exact_t_interval, mean as _tdist_mean, t_cdf, t_quantile, welch  # noqa: F401 (stats.t_cdf, ... for callers)
from collector.record import contract

DEFAULT_REPS = 1000


def replicates(text: str) -> int:
    """argparse type of --reps: a whole number of at least 20 (a 95% percentile interval needs them)."""
    import argparse

    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number of replicates, at least 20 (got {text!r})") from None
    if n < 20:
        raise argparse.ArgumentTypeError(f"at least 20 replicates (got {n})")
    return n


def _number(text: str, ok, what: str) -> float:
    """`text` as a finite float that `ok` accepts, else argparse's error saying `what` it takes."""
    import argparse

    try:
        x = float(text)
    except ValueError:
        x = float("nan")
    if not (math.isfinite(x) and ok(x)):
        raise argparse.ArgumentTypeError(f"{what} (got {text!r})")
    return x


def fraction(text: str) -> float:
    """argparse type of --min-effect: a finite fraction from 0 up to 1 (0.02 = 2%)."""
    return _number(text, lambda x: 0 <= x < 1, "a fraction from 0 up to 1, e.g. 0.02 for 2%")


def positive_fraction(text: str) -> float:
    """argparse type of --noise: a finite fraction above 0 (0.10 = an IQR 10% of the median)."""
    return _number(text, lambda x: x > 0, "a fraction above 0, e.g. 0.10 for an IQR of 10% of the median")
NOISE_THRESHOLD = 0.10  # IQR / median above which a side is "noisy"
MIN_EFFECT = 0.02  # a change smaller than 2% is not called (cf. asv --factor, the PyTorch dashboard's 5%)
# the largest change of a launch-bound side between two one-process screens of one torch on one machine,
# interleaved: rs-h100-a against rs-h100-b (an H100, 2026-12-05: GPT-2 bs8's compiled step +83.9%, its
# eager step +81.5%); wh-a against wh-b (an H200, 2026-12-04: RoBERTa's eager step -40.5%). GPU-bound
# sides moved at most 2.0% in both (docs/validation.md): below it a screen cannot tell a change from the
# host's own spread there
LAUNCH_BOUND_AA = 0.84
DISAGREE = contract.DISAGREE  # processes "disagree" when their speedups span more than 5% (max / min - 1)


@dataclass(frozen=True)
class CellSamples:
    """Raw samples of one cell (ms), in time order, and its block layout."""

    key: tuple
    eager_ms: np.ndarray
    compiled_ms: np.ndarray
    blocks: int
    steps_per_block: int
    processes: int = 1


def run_samples(loaded, run_id: str) -> list[tuple[CellSamples, bool]]:
    """Every cell of a run as CellSamples (an eager-only cell carries its eager samples on both
    sides) with whether it has a compiled side: loaded once per run and kept on `loaded`, for the
    run report's intervals and the comparison alike."""
    key = ("samples", run_id)
    if key not in loaded.cache:
        rows = loaded.con.execute(sql("samples_all"), {"run_id": run_id}).fetchall()
        loaded.cache[key] = [(CellSamples(cell_id, np.asarray(eager, float), np.asarray(compiled or eager, float),
                                          int(blocks or 1), int(spb or 1), int(processes or 1)), bool(compiled))
                             for _, cell_id, blocks, spb, eager, compiled, processes in rows]
    return loaded.cache[key]


@dataclass(frozen=True)
class RunStats:
    """A run's per-cell statistics, computed once and read by the run report (its intervals and
    verdicts), the verdict over groups and the comparison (A's intervals for the A/A check):
    the samples, each compiled cell's speedup replicates and its 95% interval."""

    run_id: str
    reps: int
    speedup: dict  # cell id -> LogDist of ln speedup (t over processes, or block-bootstrap replicates)
    intervals: dict  # cell id -> (lo, hi): the exact t bound over processes (exact_t_interval), or for a
    # cell of one process the 95% percentile interval of its block-bootstrap replicates


def log_process_speedups(c: CellSamples) -> np.ndarray:
    """A cell's per-process log speedups (ln of eager / compiled median of each process)."""
    return np.log(process_medians(c.eager_ms, c.processes) / process_medians(c.compiled_ms, c.processes))


def run_stats(loaded, run_id: str, reps: int = DEFAULT_REPS) -> RunStats:
    """The run's RunStats, computed on first use and kept on `loaded` (the first computation of a
    run stands for every reader of it, as the report's own intervals do)."""
    key = ("run_stats", run_id)
    if key not in loaded.cache:
        cells = [c for c, compiled in run_samples(loaded, run_id) if compiled]  # eager-only: no speedup
        dist = {k: d["speedup"] for k, d in cell_dists(cells, reps).items()}
        own = {k: tuple(math.exp(v) for v in d.interval()) for k, d in dist.items()}
        loaded.cache[key] = RunStats(run_id, reps, dist, own)
    return loaded.cache[key]


def cell_dists(cells: list[CellSamples], reps: int = DEFAULT_REPS, seed: int = 0) -> dict[tuple, dict]:
    """Per cell, the LogDist (analysis/stats/tdist.py) of ln eager, ln compiled and ln speedup: the t
    model over processes for a cell of P >= 2 processes (exact; the three share one set of
    processes), the paired block bootstrap's replicates for a cell of one process (`seed`)."""
    single = [c for c in cells if c.processes < 2]
    boot = bootstrap_medians(single, reps, seed) if single else {}
    out = {}
    for c in cells:
        if c.processes >= 2:
            e = np.log(process_medians(c.eager_ms, c.processes))
            k = np.log(process_medians(c.compiled_ms, c.processes))
            out[c.key] = {"eager": LogDist.of_processes(e), "compiled": LogDist.of_processes(k),
                          "speedup": LogDist.of_processes(e - k)}
        else:
            be, bk = (np.log(x) for x in boot[c.key])
            out[c.key] = {"eager": LogDist.of_replicates(be), "compiled": LogDist.of_replicates(bk),
                          "speedup": LogDist.of_replicates(be - bk)}
    return out


def missing(v) -> bool:
    """A null value as the loaded rows carry it: None, a float NaN or pandas' NA."""
    return v is None or v is pd.NA or (isinstance(v, float) and v != v)


def _blocked(x: np.ndarray, blocks: int, spb: int) -> np.ndarray:
    """Reshape to [blocks, steps]; samples that do not fit the layout are one block each."""
    if blocks * spb == len(x):
        return x.reshape(blocks, spb)
    return x.reshape(-1, 1)


def _median_last(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Median along the last axis; sorting short rows is ~3x faster than np.median's partition."""
    x = np.sort(x, axis=-1)
    n = x.shape[-1]
    return (x[..., (n - 1) // 2] + x[..., n // 2]) / 2


def bootstrap_speedups(cells: list[CellSamples], reps: int = DEFAULT_REPS, seed: int = 0,
                       chunk: int = 256) -> dict[tuple, np.ndarray]:
    """Bootstrap replicates (length `reps`) of the speedup of each cell, keyed by cell key."""
    return {k: e / c for k, (e, c) in bootstrap_medians(cells, reps, seed, chunk).items()}


def bootstrap_medians(cells: list[CellSamples], reps: int = DEFAULT_REPS, seed: int = 0,
                      chunk: int = 256) -> dict[tuple, tuple[np.ndarray, np.ndarray]]:
    """Replicates of (eager median, compiled median) per cell, keyed by cell key: the process-level
    t replicates for cells of P >= 2 processes (`process_replicates`), the paired block bootstrap
    for cells of one process. Vectorised over cells that share a block layout; memory is bounded
    by `chunk`.
    """
    rng = np.random.default_rng(seed)
    out: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    multi = [c for c in cells if c.processes >= 2]
    out.update(process_replicates(multi, reps, rng))
    groups: dict[tuple, list[tuple]] = {}
    for c in cells:
        if c.processes >= 2:
            continue
        e = _blocked(np.asarray(c.eager_ms, float), c.blocks, c.steps_per_block)
        k = _blocked(np.asarray(c.compiled_ms, float), c.blocks, c.steps_per_block)
        if e.shape != k.shape:  # unpaired layout: fall back to independent single-sample blocks
            e, k = e.reshape(-1, 1), k.reshape(-1, 1)
            if e.shape != k.shape:
                n = min(len(e), len(k))
                e, k = e[:n], k[:n]
        groups.setdefault(e.shape, []).append((c.key, e, k))
    jobs = []
    for (nb, spb), members in groups.items():
        for start in range(0, len(members), chunk):
            part = members[start:start + chunk]
            jobs.append((part, nb, spb, rng.integers(0, nb, size=(len(part), reps, nb))))

    def run(job) -> list[tuple]:
        part, nb, spb, idx = job
        E = np.stack([m[1] for m in part]).astype(np.float32)  # [cells, blocks, steps]
        K = np.stack([m[2] for m in part]).astype(np.float32)
        cell_ix = np.arange(len(part))[:, None, None]
        med = np.nanmedian if np.isnan(E).any() or np.isnan(K).any() else _median_last  # samples left out
        e_med = med(E[cell_ix, idx].reshape(len(part), reps, nb * spb), axis=-1)
        k_med = med(K[cell_ix, idx].reshape(len(part), reps, nb * spb), axis=-1)
        return [(m[0], (e.astype(np.float64), k.astype(np.float64))) for m, e, k in zip(part, e_med, k_med)]

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # numpy releases the GIL
        for pairs in pool.map(run, jobs):
            out.update(pairs)
    return out


def process_medians(x: np.ndarray, processes: int) -> np.ndarray:
    """Median of each process's samples (the samples are stored process after process), as an
    array: collector.record.contract.process_medians, the one implementation."""
    return np.asarray(contract.process_medians(np.asarray(x, float).tolist(), processes), float)


def process_replicates(cells: list[CellSamples], reps: int, rng) -> dict[tuple, tuple[np.ndarray, np.ndarray]]:
    """Replicates of (eager, compiled) for cells timed in P >= 2 processes: the pair
    x_p = (ln eager median, ln compiled median) of each process, mean m and covariance S over
    processes; replicate r = m + sqrt(df / chi2_df) * (g @ (x - m)) / sqrt(P (P - 1)) with g
    standard normal, i.e. a draw from the multivariate t with P - 1 degrees of freedom and
    scale S / P. Any linear combination of the two logs (ln speedup) then has exactly the
    t interval of its per-process values."""
    out = {}
    for c in cells:
        P = c.processes
        e = np.log(process_medians(c.eager_ms, P))
        k = np.log(process_medians(c.compiled_ms, P))
        x = np.stack([e, k], axis=1)  # [P, 2]
        m = x.mean(axis=0)
        d = x - m
        g = rng.standard_normal((reps, P))
        w = np.sqrt((P - 1) / rng.chisquare(P - 1, size=reps))
        r = m + w[:, None] * (g @ d) / np.sqrt(P * (P - 1))
        out[c.key] = (np.exp(r[:, 0]), np.exp(r[:, 1]))
    return out


def intervals(replicates: np.ndarray, level: float = 0.95) -> np.ndarray:
    """Percentile intervals for many cells at once: replicates [cells, reps] -> [cells, 2]."""
    a = (1 - level) / 2
    return np.quantile(replicates, [a, 1 - a], axis=1).T


def interval(replicates: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates."""
    a = (1 - level) / 2
    lo, hi = np.quantile(replicates, [a, 1 - a])
    return float(lo), float(hi)


def geomean_interval(dists: list, level: float = 0.95) -> tuple[float, float]:
    """Interval of the geometric mean over cells, from each cell's LogDist of its ln figure
    (exact where every cell has processes: analysis/stats/tdist.py)."""
    lo, hi = _tdist_mean(dists).interval(level)
    return math.exp(lo), math.exp(hi)


def verdict(lo: float, hi: float, point: float | None = None, min_effect: float = 0.0) -> str:
    """'faster' / 'slower' for a speedup (or a ratio where larger is better): the one call rule of
    analysis/stats/estimates.py (the interval excludes 1 and the point is at least `min_effect` away from
    1 on the log scale), else 'no clear difference'. Without a point, the interval alone decides."""
    if point is None or not point > 0:
        point = float(np.sqrt(lo * hi)) if lo > 0 and hi > 0 else None
        min_effect = 0.0
    call = estimates.call_rule(point, lo, hi, min_effect, higher_is_better=True)
    return {estimates.IMPROVED: "faster", estimates.REGRESSED: "slower"}.get(call, "no clear difference")


def is_noisy(*iqr_rel: float | None, threshold: float = NOISE_THRESHOLD) -> bool:
    """True when any side's IQR/median exceeds the threshold."""
    return any(v is not None and v == v and v > threshold for v in iqr_rel)


def benjamini_hochberg(pvalues: list[float]) -> list[float]:
    """BH-adjusted p-values (q-values), in the input order: controls the false discovery rate."""
    p = np.asarray(pvalues, float)
    if not len(p):
        return []
    order = np.argsort(p)
    ranked = p[order] * len(p) / np.arange(1, len(p) + 1)
    q = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty_like(q)
    out[order] = np.minimum(q, 1.0)
    return out.tolist()
