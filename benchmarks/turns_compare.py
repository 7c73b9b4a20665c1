"""Several cells a GPU (GPUS=0,0 or 0,0,0) against one at a time: the same cells' figures and the time
they took (docs/scale-out.md, "Two cells on one GPU"; collected by `versions_gpu.sh turns`).

    python benchmarks/turns_compare.py data/examples/tn-1 data/examples/tn-3-s data/examples/tn-3-p5

Per cell both runs hold ok: the median compiled and eager step and the speedup of the second run
against the first (%), the cold compile (%), and the second run's wait for the timing lock (s, cold
process). Then per protocol: the cells, the span from the first cell's start to the last cell's end
(less any gap of over 10 minutes in which no cell ran: a pass resumed on another machine or day),
the median cell wall time, and cells per hour of span; runs collected interleaved with the shared one
(the planted tn-3-p5) are named after it and count in its span and cells. The calls come from
`python -m analysis gate` (docs/performance.md, "Faster screens").
"""
from __future__ import annotations

import argparse
import statistics
import sys
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq


def rows_of(run_dir: Path) -> dict[str, dict]:
    if not (run_dir / "cells").is_dir():
        sys.exit(f"{run_dir}: not a run folder (no cells/ inside); give two runs, e.g. data/examples/tn-1 "
                 "data/examples/tn-3-s")
    return {r["cell_id"]: r for f in sorted((run_dir / "cells").glob("*.parquet")) for r in pq.read_table(f).to_pylist()}


GAP_S = 600.0  # no cell running for longer than this: the machine was not held (a pass resumed another day)


def span(rows: list[dict]) -> tuple[float, int]:
    """Seconds from the first cell's start to the last cell's end, leaving out every gap of more than
    GAP_S in which no cell ran (a run collected over commands on separate machines and days counts its
    stretches of work, not the hours between), and how many stretches that makes."""
    cells = sorted((t := datetime.fromisoformat(r["started_at"]).timestamp(), t + (r["cell_wall_s"] or 0)) for r in rows)
    total, stretches, (lo, hi) = 0.0, 1, cells[0]
    for start, end in cells[1:]:
        if start - hi > GAP_S:
            total, stretches, lo = total + hi - lo, stretches + 1, start
        hi = max(hi, end)
    return total + hi - lo, stretches


def pct(new: float | None, old: float | None) -> str:
    return f"{(new / old - 1) * 100:+.1f}%" if new and old else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("alone", type=Path, help="the run of one cell at a time (tn-1)")
    ap.add_argument("shared", type=Path, help="the run of two or more cells a GPU (tn-2-s, tn-3-s)")
    ap.add_argument("beside", type=Path, nargs="*", help="runs collected interleaved with SHARED (tn-3-p5): "
                    "their cells count in the shared protocol's cells an hour, not in the per-cell table")
    args = ap.parse_args(argv)
    a, b = rows_of(args.alone), rows_of(args.shared)
    together = list(b.values()) + [r for d in args.beside for r in rows_of(d).values()]
    med = lambda r, k: statistics.median(r[k]) if r.get(k) else None  # noqa: E731
    print(f"{'cell':58} {'compiled':>9} {'eager':>8} {'speedup':>8} {'compile':>8} {'wait s':>7}")
    for cid in sorted(set(a) & set(b)):
        x, y = a[cid], b[cid]
        if x["status"] != "ok" or y["status"] != "ok":
            print(f"{cid[:58]:58} {x['status']} / {y['status']}")
            continue
        sx = med(x, "eager_step_ms") / med(x, "compiled_step_ms")
        sy = med(y, "eager_step_ms") / med(y, "compiled_step_ms")
        wait = (y.get("timing_wait_s") or [None])[0]
        print(f"{cid[:58]:58} {pct(med(y, 'compiled_step_ms'), med(x, 'compiled_step_ms')):>9} "
              f"{pct(med(y, 'eager_step_ms'), med(x, 'eager_step_ms')):>8} {pct(sy, sx):>8} "
              f"{pct(y['first_call_compiled_s'], x['first_call_compiled_s']):>8} "
              f"{'-' if wait is None else f'{wait:.1f}':>7}")
    shared = " + ".join(d.name for d in [args.shared, *args.beside])
    for name, rows in ((args.alone.name, list(a.values())), (shared, together)):
        s, n = span(rows)
        parts = f" ({n} stretches: gaps of over {GAP_S / 60:.0f} minutes without a cell left out)" if n > 1 else ""
        print(f"# {name}: {len(rows)} cells in {s:.0f} s{parts}, median cell "
              f"{statistics.median(r['cell_wall_s'] for r in rows):.1f} s, {len(rows) / s * 3600:.0f} cells an hour")
    return 0


if __name__ == "__main__":
    sys.exit(main())
