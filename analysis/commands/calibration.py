"""Calibration of the comparison on committed runs: how often A's intervals miss B (an A/A), and the
comparison's (exact) change interval beside a Welch interval (a candidate replacement, not adopted).

Used by benchmarks/aa_misses.py and benchmarks/interval_coverage.py (which print the figures
docs/measurement.md quotes) and by the tests that hold those figures.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.stats import core as stats
from analysis.stats.core import welch
from analysis.compare_report.compare import run_intervals


def misses(loaded, a: str, b: str, reps: int = stats.DEFAULT_REPS) -> tuple[int, list[tuple[str, float, float]]]:
    """(cells compared, [(cell id, B's shift %, A's half-width %)] for the cells A's interval misses)."""
    ia = run_intervals(loaded, a, reps)
    # (speedup, processes) per ok cell, from the stats table the reports read (no samples loaded)
    point = {run: {cid: (s, p) for cid, s, p in loaded.con.execute(
        "SELECT cell_id, speedup, processes FROM stats WHERE run_id = $r AND status = 'ok'", {"r": run}).fetchall()}
        for run in (a, b)}
    n, out = 0, []
    for key, (lo, hi) in sorted(ia.items()):
        (sa, pa), (sb, pb) = point[a].get(key, (None, 1)), point[b].get(key, (None, 1))
        if pa < 2 or pb < 2 or stats.missing(sa) or stats.missing(sb):
            continue
        n += 1
        if not lo <= sb <= hi:
            out.append((key, 100 * (sb / sa - 1), 100 * (np.sqrt(hi / lo) - 1)))
    return n, out


def real(data: str, runs: list[str], min_effect: float = stats.MIN_EFFECT) -> list[tuple]:
    """The comparison's speedup-change interval against a Welch interval on committed run pairs:
    per pair, cells with 3+ processes in both runs, how many intervals hold 0, how many would be
    called (interval excludes 0 and the change is at least the minimum effect), median width ratio."""
    from analysis.stats.pair_estimates import samples as _samples
    from analysis.run_report.context import prepare
    from analysis.data.load import discover_runs, load

    found = {r.run_id: r for r in discover_runs(Path(data))}
    small = np.log1p(min_effect)
    print(f"{'A':>28} {'B':>28} {'cells':>5} {'holds 0: now':>12} {'Welch':>6} {'called: now':>11} "
          f"{'Welch':>6} {'width Welch/now':>15}")
    out = []
    for a, b in zip(runs[::2], runs[1::2]):
        loaded = load([found[a], found[b]])
        prepare(loaded)
        sa = {c.key: c for c in _samples(loaded, a)["reps"]}
        sb = {c.key: c for c in _samples(loaded, b)["reps"]}
        keys = sorted(k for k in sa if k in sb and sa[k].processes >= 2 and sb[k].processes >= 2
                      and not np.array_equal(sa[k].eager_ms, sa[k].compiled_ms))
        ma = stats.cell_dists([sa[k] for k in keys])  # as analysis/stats/pair_estimates.py computes them
        mb = stats.cell_dists([sb[k] for k in keys])
        now0 = welch0 = now_called = welch_called = 0
        widths = []
        for k in keys:
            d_now = mb[k]["speedup"] - ma[k]["speedup"]  # the change, exact
            lo, hi = d_now.interval()
            la, lb = stats.log_process_speedups(sa[k]), stats.log_process_speedups(sb[k])
            wlo, whi = welch(la, lb)
            now0 += lo <= 0 <= hi
            welch0 += wlo <= 0 <= whi
            now_called += not (lo <= 0 <= hi) and abs(d_now.centre) >= small
            welch_called += not (wlo <= 0 <= whi) and abs(lb.mean() - la.mean()) >= small
            widths.append((whi - wlo) / (hi - lo))
        print(f"{a:>28} {b:>28} {len(keys):>5} {now0:>12} {welch0:>6} {now_called:>11} {welch_called:>6} "
              f"{np.median(widths) if widths else float('nan'):>15.2f}")
        out.append((a, b, len(keys), now0, welch0, now_called, welch_called))
    return out
