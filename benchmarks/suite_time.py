"""Where a suite run's time went: cell processes, cold compiles, the rest (docs/performance.md, docs/suites.md).

    python benchmarks/suite_time.py data/examples/su-h200-torch2.11.0-cu130 data/examples/su-h200-torch2.14.1-cu130

Per run and over all: cells, the cell processes' wall time (s), the ok cells' cold first compiled calls
(s, and their share of the wall time), the median cell wall time, and the statuses. `--by suite,phase`
(any of suite, phase, mode) splits the runs' cells over all into those groups as well: what a training
cell costs against an inference cell, say.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from collector.record.contract import suite_of  # noqa: E402


def rows_of(run_dir: Path) -> list[dict]:
    return [r for f in sorted((run_dir / "cells").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def summary(rows: list[dict]) -> dict:
    ok = [r for r in rows if r["status"] == "ok"]
    wall = sum(r["cell_wall_s"] or 0 for r in rows)
    cold = sum(r["first_call_compiled_s"] or 0 for r in ok)
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    return {"cells": len(rows), "wall_s": round(wall, 1), "cold_compile_s": round(cold, 1),
            "cold_share": round(cold / wall, 3) if wall else None,
            "median_cell_s": round(statistics.median(r["cell_wall_s"] for r in rows), 1) if rows else None,
            "statuses": dict(sorted(statuses.items()))}


GROUP_KEYS = {"suite": lambda r: suite_of(r.get("model") or ""),
              "phase": lambda r: r.get("phase") or "?", "mode": lambda r: r.get("mode") or "?"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--by", default="", help="split the cells over all by these keys: suite, phase, mode (comma-separated)")
    args = ap.parse_args(argv)
    keys = [k for k in args.by.split(",") if k]
    if set(keys) - set(GROUP_KEYS):
        ap.error(f"--by takes {', '.join(GROUP_KEYS)}; got {args.by!r}")
    every = []
    out = {}
    for run in args.runs:
        rows = rows_of(run)
        every += rows
        out[run.name] = summary(rows)
    out["all"] = summary(every)
    groups: dict[str, list[dict]] = {}
    for r in every if keys else []:
        groups.setdefault(" ".join(GROUP_KEYS[k](r) for k in keys), []).append(r)
    out.update({f"all {g}": summary(rows) for g, rows in sorted(groups.items())})
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for name, s in out.items():
        print(f"{name}: {s['cells']} cells, {s['wall_s']:.0f} s of cell processes, cold compiles {s['cold_compile_s']:.0f} s "
              f"({100 * (s['cold_share'] or 0):.0f}%), median cell {s['median_cell_s']} s, {s['statuses']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
