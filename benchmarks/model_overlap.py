"""Whether two cells of one model ran at once on a shared GPU (GPUS=0,0,0), from the rows.

    python benchmarks/model_overlap.py data/examples/tv-h200-torch2.1[14]*-cu130
    python benchmarks/model_overlap.py data/examples/su-h100-torch2.1[14]*-cu130

The runs collected together (a version pair). Each row's `started_at` (whole seconds) and `cell_wall_s`
give when the cell ran; two rows overlap when those spans do by more than `--slack` seconds (default 1:
the start is truncated to its second, so a cell taken the moment another ended can seem to overlap it by
under a second). Counted apart: the same cell under two interpreters (the pair, which runs together on
purpose) and two cells of one model (its modes, phases or batch sizes), which collector/host/queue.py
keeps apart on a shared GPU. Prints the counts and, with `--list`, the second kind one by one.
"""
from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import pyarrow.parquet as pq

COLUMNS = ["cell_id", "model", "torch_version", "started_at", "cell_wall_s"]


def spans(runs: list[Path], columns: list[str] = COLUMNS) -> list[dict]:
    """Every row of the runs (`columns` of it) with its start and end (seconds since the epoch)."""
    rows = []
    for run in runs:
        for f in sorted((run / "cells").glob("*.parquet")):
            for r in pq.read_table(f, columns=columns).to_pylist():
                if r["started_at"] and r["cell_wall_s"]:
                    t0 = dt.datetime.fromisoformat(r["started_at"]).timestamp()
                    rows.append({**r, "run": run.name, "t0": t0, "t1": t0 + r["cell_wall_s"]})
    return rows


def overlaps(rows: list[dict], slack: float = 1.0) -> dict:
    """Pairs of rows that ran at once by more than `slack` s: of the same cell (`pair`), of one model's
    different cells (`same_model`, listed), of other models (`other`)."""
    out = {"pair": 0, "same_model": [], "other": 0}
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            if min(a["t1"], b["t1"]) - max(a["t0"], b["t0"]) <= slack:
                continue
            if a["cell_id"] == b["cell_id"]:
                out["pair"] += 1
            elif a["model"] == b["model"]:
                out["same_model"].append((a, b))
            else:
                out["other"] += 1
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--slack", type=float, default=1.0)
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    rows = spans(args.runs)
    o = overlaps(rows, args.slack)
    models = {a["model"] for a, _ in o["same_model"]}
    print(f"{len(rows)} cells: at once with the same cell under another interpreter {o['pair']} times, with another "
          f"model's cell {o['other']}, with another cell of its own model {len(o['same_model'])} "
          f"({len(models)} models)")
    if args.list:
        for a, b in o["same_model"]:
            print(f"  {a['cell_id']} [{a['torch_version']}] beside {b['cell_id']} [{b['torch_version']}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
