"""`python -m analysis`: render a report for every run found under --data.

Exit codes: 0 rendered, 2 bad input (no runs, unknown run, bad files with --strict).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from analysis import stats
from analysis.context import build_run_report, prepare
from analysis.load import DataError, discover_runs, load
from analysis.render import render

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m analysis", description=__doc__)
    p.add_argument("--data", action="append", type=Path,
                   help="folder holding run folders (repeatable; default: data/)")
    p.add_argument("--run", action="append", help="only these run ids (repeatable)")
    p.add_argument("--out", type=Path, default=ROOT / "reports", help="reports go to OUT/<run_id>/")
    p.add_argument("--strict", action="store_true", help="fail on any bad input file instead of skipping it")
    p.add_argument("--reps", type=int, default=stats.DEFAULT_REPS, help="bootstrap replicates per cell")
    p.add_argument("--noise", type=float, default=stats.NOISE_THRESHOLD,
                   help="IQR/median above which a cell is marked noisy (default 0.10)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    t0 = time.perf_counter()
    try:
        runs = [r for d in (args.data or [ROOT / "data"]) for r in discover_runs(d)]
        if not runs:
            raise DataError(f"no runs (folders with run.json) under {', '.join(map(str, args.data or ['data/']))}; "
                            "`make collect` makes one")
        if args.run:
            known = {r.run_id for r in runs}
            unknown = [x for x in args.run if x not in known]
            if unknown:
                raise DataError(f"unknown run(s) {', '.join(unknown)}; available: {', '.join(sorted(known))}")
            runs = [r for r in runs if r.run_id in args.run]
        loaded = load(runs, strict=args.strict)
        for f, why in loaded.skipped:
            print(f"warning: skipped {f}: {why}", file=sys.stderr)
        prepare(loaded)
        for run in runs:
            report = build_run_report(loaded, run, reps=args.reps, noise=args.noise)
            md, html = render(report, args.out / run.run_id)
            print(f"{run.run_id}: {report.status_line}\n  {html}\n  {md}")
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"rendered {len(runs)} report(s) in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
