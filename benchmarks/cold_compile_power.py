"""The per-cell cold-compile interval over cold replicates, as the comparison computes it and as a pooled
alternative would, on committed run pairs collected with COLD_REPLICATES=1.

    python benchmarks/cold_compile_power.py cp-a:cp-b cp-a:cp-p cp-b:cp-p cr-cpu-a:cr-cpu-b ...

Per cell: the change of the geometric mean of the processes' cold first calls, the comparison's interval
(analysis/stats/estimates.py first_call_processes: Welch's t on the logarithms, widened by the run-wide A/A
shift) and a pooled one (one process variance over every cell of the pair, so more degrees of
freedom, with the same widening), each marked * where it calls a change. The pooled interval assumes
every cell's compile is as noisy as the others; docs/validation.md, "Planted changes: what a comparison finds", says why
the comparison does not use it.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.stats import estimates as est  # noqa: E402
from analysis.stats.core import MIN_EFFECT, t_quantile  # noqa: E402


def cold_logs(run: Path) -> dict[str, np.ndarray]:
    """{cell_id: log cold first calls, one a process} of a run's ok cells with cold replicates."""
    out = {}
    for f in sorted((run / "cells").glob("*.parquet")):
        row = pq.read_table(f).to_pylist()[0]
        got = est.cold_samples(row.get("process_first_call_compiled_s"), row.get("replicate_cache"))
        if row.get("status") == "ok" and got:
            out[row["cell_id"]] = np.log(np.asarray(got))
    return out


def pair(data: Path, a: str, b: str) -> list[str]:
    """One line a cell both runs have."""
    la, lb = cold_logs(data / a), cold_logs(data / b)
    cells = sorted(set(la) & set(lb))
    if not cells:
        return [f"{a}/{b}: no cell with cold replicates in both runs"]
    ss = sum(((x - x.mean()) ** 2).sum() for c in cells for x in (la[c], lb[c]))
    df = sum(len(x) - 1 for c in cells for x in (la[c], lb[c]))
    sp, t, shift = math.sqrt(ss / df), t_quantile(0.975, df), est.FIRST_CALL_RUN_NOISE["cold"]
    lines = []
    for c in cells:
        w = est.first_call_processes("cold", np.exp(la[c]), np.exp(lb[c]), MIN_EFFECT)
        d = lb[c].mean() - la[c].mean()
        half = t * sp * math.sqrt(1 / len(la[c]) + 1 / len(lb[c])) + shift
        plo, phi = math.exp(d - half), math.exp(d + half)

        def pct(x: float) -> str:
            return f"{(x - 1) * 100:+.0f}%"

        lines.append(f"{a}/{b} {c[:40]:40} {pct(w.point):>6}  comparison [{pct(w.lo)}, {pct(w.hi)}]"
                     f"{'*' if w.called else ' '}  pooled [{pct(plo)}, {pct(phi)}]{'*' if plo > 1 or phi < 1 else ' '}"
                     f"  (pooled sd {sp:.3f}, {df} df)")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("pairs", nargs="+", help="A:B run ids")
    p.add_argument("--data", type=Path, default=Path("data/examples"))
    args = p.parse_args(argv)
    for x in args.pairs:
        a, _, b = x.partition(":")
        if not b or not (args.data / a).is_dir() or not (args.data / b).is_dir():
            print(f"{x}: give A:B, two run folders under {args.data}", file=sys.stderr)
            return 2
        print("\n".join(pair(args.data, a, b)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
