"""What the queue's memory rule (collector/host/queue.py) would have saved in a screen taken without it.

    python benchmarks/spill_replay.py data/examples/su-h100-torch2.1[14]*-cu130

The runs collected together on a shared GPU (a version pair, GPUS=0,0,0). Once a cell ran out of memory
beside others, the rule leaves the cells of the same model, phase, dtype and batch that had not started to
the alone pass. From the rows' `started_at` and `cell_wall_s`: the rows that started after such a row of
their memory key had ended (by more than `--slack` s, `started_at` being whole seconds) are the tries the
rule skips. Counted apart: those of cells measured alone anyway (some row of the cell ran out of memory
beside others: every interpreter's row is measured again alone), whose tries were spent for nothing, and
those of cells both of whose rows were fine beside others, which the rule sends to the alone pass too.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.model_overlap import spans  # noqa: E402
from collector.record.contract import OOM_SHARED, shared_status  # noqa: E402

COLUMNS = ["cell_id", "model", "phase", "dtype", "batch_size", "status", "error", "started_at", "cell_wall_s"]


def rows_of(runs: list[Path]) -> list[dict]:
    """The runs' rows with their spans (model_overlap.spans), whether each ran out of memory beside others,
    and its memory key (collector/host/queue.py's memory_key)."""
    return [{**r, "spilled": shared_status(r["status"], r["error"]) == OOM_SHARED,
             "key": (r["model"], r["phase"], r["dtype"], r["batch_size"])} for r in spans(runs, COLUMNS)]


def replay(rows: list[dict], slack: float = 1.0) -> dict:
    """The tries the rule skips: `wasted` (cells measured alone anyway), `added` (cells it sends alone)."""
    first_end = {}
    for r in rows:
        if r["spilled"]:
            first_end[r["key"]] = min(first_end.get(r["key"], r["t1"]), r["t1"])
    alone = {r["cell_id"] for r in rows if r["spilled"]}
    skipped = [r for r in rows if r["key"] in first_end and r["t0"] >= first_end[r["key"]] + slack]
    out = defaultdict(list)
    for r in skipped:
        out["wasted" if r["cell_id"] in alone else "added"].append(r)
    return {"rows": len(rows), "spilled": sum(r["spilled"] for r in rows), "alone_cells": len(alone), **out}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--slack", type=float, default=1.0)
    args = ap.parse_args(argv)
    missing = [str(r) for r in args.runs if not (r / "cells").is_dir()]
    if missing:
        ap.error(f"not a run folder (no cells/): {', '.join(missing)}")
    o = replay(rows_of(args.runs), args.slack)
    wasted, added = o.get("wasted", []), o.get("added", [])
    print(f"{o['rows']} rows, {o['spilled']} out of memory beside others ({o['alone_cells']} cells measured alone "
          f"under every interpreter): the rule skips {len(wasted)} tries of those cells "
          f"({sum(r['cell_wall_s'] for r in wasted):.0f} s of cell processes spent for nothing) and sends "
          f"{len({r['cell_id'] for r in added})} other cells alone ({len(added)} tries, "
          f"{sum(r['cell_wall_s'] for r in added):.0f} s, measured beside others and fine)")
    for r in sorted(wasted + added, key=lambda r: r["t0"]):
        print(f"  {r['cell_id']}  {r['status']}  {r['cell_wall_s']:.0f} s  "
              f"{'alone anyway' if r in wasted else 'sent alone'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
