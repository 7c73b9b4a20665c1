"""How often the drawn change interval the comparison used before exact intervals (1,000 replicates
of each run's multivariate t, stats.process_replicates) calls a cell's speedup change, over many seed
pairs, beside the exact call (analysis/stats/tdist.py) that no seed moves.

    python benchmarks/seed_dependence.py v-h200-torch2.11.0-cu130 v-h200-torch2.14.1-cu130 [--seeds 60]

Prints, for every cell whose drawn call is not the same under every seed pair, the exact interval
and call and how many seed pairs called it. docs/statistics.md ("Exact, not drawn") quotes it.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis.stats import estimates as est, pair_estimates, core as stats  # noqa: E402
from analysis.run_report.context import prepare  # noqa: E402
from analysis.data.load import discover_runs, load  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("baseline")
    ap.add_argument("candidate")
    ap.add_argument("--data", default=str(ROOT / "data" / "examples"))
    ap.add_argument("--seeds", type=int, default=60)
    ap.add_argument("--reps", type=int, default=stats.DEFAULT_REPS)
    args = ap.parse_args(argv)
    found = {r.run_id: r for r in discover_runs(Path(args.data))}
    a, b = found[args.baseline], found[args.candidate]
    loaded = load([a, b])
    prepare(loaded)
    pe = pair_estimates.estimate_pair(loaded, a, b)
    cells = [{c.key: c for c in pe.samples[i]["reps"]} for i in (0, 1)]
    small = math.log1p(stats.MIN_EFFECT)
    shown = 0
    for cid, e in sorted(pe.ests["speedup"].items()):
        if cid not in pe.callable_ids:
            continue
        called = 0
        for s in range(args.seeds):
            ra = stats.process_replicates([cells[0][cid]], args.reps, np.random.default_rng(1000 + s))[cid]
            rb = stats.process_replicates([cells[1][cid]], args.reps, np.random.default_rng(2000 + s))[cid]
            d = np.log((rb[0] / rb[1]) / (ra[0] / ra[1]))
            lo, hi = np.quantile(d, [0.025, 0.975])
            called += (lo > 0 or hi < 0) and abs(math.log(e.point)) >= small
        if 0 < called < args.seeds:
            shown += 1
            print(f"{pe.labels[cid]}: {est.pct(e.point)}, exact {est.interval_text(e)} ({e.call}); "
                  f"drawn: called under {called} of {args.seeds} seed pairs")
    print(f"{shown} cell(s) whose drawn call depends on the seed; {len(pe.callable_ids)} callable cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
