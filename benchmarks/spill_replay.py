"""What the queue's memory rule (collector/host/queue.py) would have saved in a screen taken without it.

    python benchmarks/spill_replay.py data/examples/su-h100-torch2.1[14]*-cu130

The runs collected together on a shared GPU (a version pair, GPUS=0,0,0). Once a cell ran out of memory
beside others, the rule leaves the cells of the same model, phase, dtype and batch that had not started to
the alone pass. From the rows' `started_at` and `cell_wall_s`: the rows that started after such a row of
their memory key had ended (by more than `--slack` s, `started_at` being whole seconds) are the tries the
rule skips. Counted apart: those of cells measured alone anyway (some row of the cell ran out of memory
beside others: every interpreter's row is measured again alone), whose tries were spent for nothing, and
those of cells both of whose rows were fine beside others, which the rule sends to the alone pass too.
A cell the alone pass has measured since (queued in a session's `measured_alone`, its row now from one cell
on the GPU, `concurrent_cells` 1) lost its row beside others to the alone one, so the replay leaves the cell
out, under every interpreter, and says how many it left out.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.model_overlap import spans  # noqa: E402
from collector.host.alone import queued_alone  # noqa: E402
from collector.record.contract import OOM_SHARED, shared_status  # noqa: E402

COLUMNS = ["cell_id", "model", "phase", "dtype", "batch_size", "status", "error", "started_at", "cell_wall_s",
           "concurrent_cells"]


def measured_alone(runs: list[Path], rows: list[dict]) -> set[str]:
    """The cells an alone pass has measured since in any of the runs: queued by a session (alone.queued_alone)
    and holding a row from one cell on the GPU."""
    queued = queued_alone(runs)
    return {r["cell_id"] for r in rows if r["cell_id"] in queued and r["concurrent_cells"] == 1}


def rows_of(runs: list[Path]) -> tuple[list[dict], set[str]]:
    """The runs' rows with their spans (model_overlap.spans), whether each ran out of memory beside others,
    and its memory key (collector/host/queue.py's memory_key), but for those of cells measured alone since;
    and those cells."""
    rows = spans(runs, COLUMNS)
    gone = measured_alone(runs, rows)
    return [{**r, "spilled": shared_status(r["status"], r["error"]) == OOM_SHARED,
             "key": (r["model"], r["phase"], r["dtype"], r["batch_size"])} for r in rows
            if r["cell_id"] not in gone], gone


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
    rows, gone = rows_of(args.runs)
    o = replay(rows, args.slack)
    wasted, added = o.get("wasted", []), o.get("added", [])
    if gone:
        print(f"left out: {len(gone)} cells measured alone since (their rows beside others replaced): "
              f"{', '.join(sorted(gone))}")
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
