"""Coverage of a cell's 95% speedup interval under known between-process variance.

    python benchmarks/interval_coverage.py [--sims 400]
    python benchmarks/interval_coverage.py --aa [--sims 2000]
    python benchmarks/interval_coverage.py --real A B [A B ...] [--data data/examples]

Simulates cells timed in P fresh processes (8 blocks x 10 samples each, 2% noise per sample,
every process and side at its own lognormal level with sd `between`), true speedup 1.5, and
counts how often each method's 95% interval covers the truth:
- one-level: today's paired block bootstrap over all samples pooled as one process;
- hierarchical bootstrap: resample processes, then blocks inside each (percentile interval);
- t over processes: analysis/stats/core.py (Student's t on the per-process estimates, P - 1 df).
With --aa it simulates A/A comparisons instead (the same cells collected twice, nothing changed)
and gives the two figures a comparison report prints for them, as analysis/compare_report/compare.py computes
them: how often A's 95% interval holds B's speedup estimate, and how often the 95% interval of the
change B/A holds no change (that is, no change is called); beside it, the same for a Welch
interval on the two runs' per-process log speedups (a candidate replacement), and the ratio of
the two intervals' median widths.
With --real it puts the two change intervals side by side on committed run pairs (A/As and
planted changes): intervals holding 0, cells each would call, and the width ratio.
Figures in docs/measurement.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from analysis.stats import core as stats  # noqa: E402
from analysis.commands.calibration import real  # noqa: E402
from analysis.stats.core import welch  # noqa: E402

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


def aa(sims: int) -> None:
    print(f"{'processes':>9} {'between sd':>10} {'A holds B':>10} {'change holds 0':>15} "
          f"{'Welch holds 0':>14} {'width Welch/change':>19}")
    for processes in (3, 5, 10):
        for between in (0.01, 0.05):
            rng = np.random.default_rng(7 + processes * 100 + int(between * 1000))
            runs = []
            for _ in range(2):
                cells = [simulate(rng, processes, between) for _ in range(sims)]
                runs.append([stats.CellSamples(i, e.ravel(), c.ravel(), BLOCKS, SPB, processes)
                             for i, (e, c) in enumerate(cells)])
            ma, mb = stats.cell_dists(runs[0]), stats.cell_dists(runs[1])  # exact (analysis/stats/tdist.py)
            holds = change0 = welch0 = 0
            widths = []
            for cell_a, cell_b in zip(runs[0], runs[1]):
                k = cell_a.key
                pa = [stats.process_medians(x, processes) for x in (cell_a.eager_ms, cell_a.compiled_ms)]
                pb = [stats.process_medians(x, processes) for x in (cell_b.eager_ms, cell_b.compiled_ms)]
                speed_b = np.exp(np.mean(np.log(pb[0])) - np.mean(np.log(pb[1])))
                lo, hi = np.exp(ma[k]["speedup"].interval())
                holds += lo <= speed_b <= hi
                clo, chi = (mb[k]["speedup"] - ma[k]["speedup"]).interval()
                change0 += clo <= 0 <= chi
                wlo, whi = welch(np.log(pa[0] / pa[1]), np.log(pb[0] / pb[1]))
                welch0 += wlo <= 0 <= whi
                widths.append((whi - wlo) / (chi - clo))
            print(f"{processes:>9} {between:>10.2f} {holds / sims:>10.1%} {change0 / sims:>15.1%} "
                  f"{welch0 / sims:>14.1%} {np.median(widths):>19.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", type=int, default=400)
    ap.add_argument("--aa", action="store_true", help="simulate A/A comparisons (see above)")
    ap.add_argument("--real", nargs="+", metavar="RUN", help="committed run pairs A B [A B ...]: the "
                    "comparison's change interval against a Welch interval (see real())")
    ap.add_argument("--data", default="data/examples")
    args = ap.parse_args()
    if args.aa:
        aa(args.sims)
        return
    if args.real:
        real(args.data, args.real)
        return
    print(f"{'processes':>9} {'between sd':>10} {'one-level':>10} {'hier. bootstrap':>16} {'t over processes':>17}")
    for processes in (3, 5):
        for between in (0.0, 0.01, 0.03):
            rng = np.random.default_rng(processes * 100 + int(between * 1000))
            sims = [simulate(rng, processes, between) for _ in range(args.sims)]
            one = [stats.CellSamples(i, e.ravel(), c.ravel(), BLOCKS * processes, SPB, 1) for i, (e, c) in enumerate(sims)]
            two = [stats.CellSamples(i, e.ravel(), c.ravel(), BLOCKS, SPB, processes) for i, (e, c) in enumerate(sims)]
            cover = []
            for cells in (one, two):
                b = np.exp([d["speedup"].interval() for d in stats.cell_dists(cells, reps=1000).values()])
                cover.append(np.mean((b[:, 0] <= TRUE) & (TRUE <= b[:, 1])))
            h = [hierarchical(rng, e, c) for e, c in sims]
            hier = np.mean([lo <= TRUE <= hi for lo, hi in h])
            print(f"{processes:>9} {between:>10.2f} {cover[0]:>10.1%} {hier:>16.1%} {cover[1]:>17.1%}")


if __name__ == "__main__":
    main()
