"""Coverage of a cell's 95% speedup interval under known between-process variance.

    python benchmarks/interval_coverage.py [--sims 400]

Simulates cells timed in P fresh processes (8 blocks x 10 samples each, 2% noise per sample,
every process and side at its own lognormal level with sd `between`), true speedup 1.5, and
counts how often each method's 95% interval covers the truth:
- one-level: today's paired block bootstrap over all samples pooled as one process;
- hierarchical bootstrap: resample processes, then blocks inside each (percentile interval);
- t over processes: analysis/stats.py (Student's t on the per-process estimates, P - 1 df).
Figures in docs/measurement.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from analysis import stats  # noqa: E402

TRUE = 1.5
BLOCKS, SPB = 8, 10


def simulate(rng, processes: int, between: float):
    n = BLOCKS * SPB
    e = np.stack([10.0 * np.exp(between * rng.standard_normal()) * (1 + 0.02 * rng.standard_normal(n))
                  for _ in range(processes)])
    c = np.stack([10.0 / TRUE * np.exp(between * rng.standard_normal()) * (1 + 0.02 * rng.standard_normal(n))
                  for _ in range(processes)])
    return e, c  # [P, n]


def hierarchical(rng, e, c, reps: int = 1000) -> tuple[float, float]:
    """Two-level percentile bootstrap: processes with replacement, then paired blocks inside each."""
    P = e.shape[0]
    eb, cb = e.reshape(P, BLOCKS, SPB), c.reshape(P, BLOCKS, SPB)
    out = np.empty(reps)
    for r in range(reps):
        ps = rng.integers(0, P, P)
        bs = rng.integers(0, BLOCKS, (P, BLOCKS))
        es = eb[ps[:, None], bs].reshape(P, -1)
        cs = cb[ps[:, None], bs].reshape(P, -1)
        out[r] = np.exp(np.mean(np.log(np.median(es, axis=1)) - np.log(np.median(cs, axis=1))))
    lo, hi = np.quantile(out, [0.025, 0.975])
    return float(lo), float(hi)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", type=int, default=400)
    args = ap.parse_args()
    print(f"{'processes':>9} {'between sd':>10} {'one-level':>10} {'hier. bootstrap':>16} {'t over processes':>17}")
    for processes in (3, 5):
        for between in (0.0, 0.01, 0.03):
            rng = np.random.default_rng(processes * 100 + int(between * 1000))
            sims = [simulate(rng, processes, between) for _ in range(args.sims)]
            one = [stats.CellSamples(i, e.ravel(), c.ravel(), BLOCKS * processes, SPB, 1) for i, (e, c) in enumerate(sims)]
            two = [stats.CellSamples(i, e.ravel(), c.ravel(), BLOCKS, SPB, processes) for i, (e, c) in enumerate(sims)]
            cover = []
            for cells in (one, two):
                b = stats.intervals(np.stack(list(stats.bootstrap_speedups(cells, reps=1000).values())))
                cover.append(np.mean((b[:, 0] <= TRUE) & (TRUE <= b[:, 1])))
            h = [hierarchical(rng, e, c) for e, c in sims]
            hier = np.mean([lo <= TRUE <= hi for lo, hi in h])
            print(f"{processes:>9} {between:>10.2f} {cover[0]:>10.1%} {hier:>16.1%} {cover[1]:>17.1%}")


if __name__ == "__main__":
    main()
