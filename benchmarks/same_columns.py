"""Whether two runs of one preset recorded the same columns in every cell: per cell, how many
columns hold a value in each run, and those that hold one in only one of them (docs/validation.md:
the typed cell result's A/A, `cr-old-h200` against `cr-a-h200`).

    python benchmarks/same_columns.py RUN_A RUN_B [--data data/examples]

Exit status 1 when a cell of both runs differs in which columns hold a value.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent


def filled(run: Path) -> dict[str, set[str]]:
    """cell id -> the columns that hold a value in its row."""
    out = {}
    for path in sorted((run / "cells").glob("*.parquet")):
        row = pq.read_table(path).to_pylist()[0]
        out[path.stem] = {k for k, v in row.items() if v is not None}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--data", default=str(ROOT / "data" / "examples"))
    args = ap.parse_args(argv)
    a, b = filled(Path(args.data) / args.a), filled(Path(args.data) / args.b)
    differ = 0
    for cell in sorted(set(a) & set(b)):
        only_a, only_b = sorted(a[cell] - b[cell]), sorted(b[cell] - a[cell])
        differ += bool(only_a or only_b)
        print(f"{cell}: {len(a[cell])} / {len(b[cell])} columns with a value"
              + (f"; only in {args.a}: {', '.join(only_a)}" if only_a else "")
              + (f"; only in {args.b}: {', '.join(only_b)}" if only_b else ""))
    print(f"{len(set(a) & set(b))} cells in both; {differ} differ in which columns hold a value; "
          f"{len(set(a) ^ set(b))} in one run only")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
