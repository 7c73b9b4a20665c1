"""Cells that ran out of memory beside other cells on a shared GPU (GPUS=0,0,0), measured again alone.

Three cells on one GPU hold three models' memory: a large model (Mistral-7B, gemma-3-4b at batch 8
on an 80 GB H100, docs/findings-suites.md) can run out of memory there and fit alone. Its row says so
(status `oom_shared`, contract.OOM_SHARED; its error cell_measure.SHARED_GPU_OOM). Once a session's queue
is done, the local executor measures every such cell again with the GPU to itself, under every interpreter of
the session, so that both sides of a version pair are measured one way, however many of them ran out
of memory: the rows that replace them record one cell at a time (concurrent_cells), and run.json's
session names the cells (`measured_alone`). A cell that runs out of memory alone too keeps that row:
it is the model's need. The cells that share such a cell's memory (queue.memory_key) and had not started
are not tried beside others (collector/host/queue.py): the session's queue leaves them to this pass.
"""
from __future__ import annotations

import pyarrow.parquet as pq

from collector.host.queue import memory_key
from collector.record.contract import OOM_SHARED, shared_status


def _saved(path) -> dict | None:
    try:
        return pq.read_table(path, columns=["status", "error", "concurrent_cells"]).to_pylist()[0]
    except (OSError, ValueError, IndexError, KeyError):  # absent or broken: measured again anyway
        return None


def shared_oom(path) -> bool:
    """Whether the saved row at `path` ran out of memory beside another cell on a shared GPU."""
    row = _saved(path)
    return row is not None and shared_status(row["status"], row["error"]) == OOM_SHARED


def _shared_or_alone(opened: list) -> tuple[set[str], set[str]]:
    """(cells some target's saved row says ran out of memory beside another cell, cells an earlier
    session of some target measured alone). Only `oom` rows are read: a row written before the
    status OOM_SHARED existed says `oom` and reads as shared by its error (contract.shared_status)."""
    shared, alone = set(), set()
    for o in opened:
        for cell_id, status in o.store.saved().items():
            if status == OOM_SHARED or (status == "oom" and shared_oom(o.store.cells_dir / f"{cell_id}.parquet")):
                shared.add(cell_id)
        alone.update(c for s in o.manifest.get("sessions", [])[:-1] for c in s.get("measured_alone", ()))
    return shared, alone


def spilled_keys(opened: list) -> set:
    """The memory_key of every cell a target's saved row says ran out of memory beside another cell: a
    session's shared queue leaves their cells to the alone pass (queue.next_entry)."""
    shared = _shared_or_alone(opened)[0]
    return {memory_key(c) for c in (opened[0].target.matrix.cells if opened else []) if c.cell_id in shared}


def again_queue(opened: list, waiting: set | frozenset = frozenset()) -> list[tuple[int, object]]:
    """(target index, cell) of every cell of the session's matrix that any target's saved row says ran
    out of memory beside another cell, under every target, and of a cell an earlier session measured alone
    under some targets and not others (a time budget that ended the alone pass between two targets), under
    those others; in matrix order, the targets' order alternating from one cell to the next as the
    session's own queue does. `waiting`: cells the session's queue left to this pass (queue.next_entry),
    measured under every target as the first kind is."""
    shared, alone = _shared_or_alone(opened)
    shared |= set(waiting)
    queue, turn = [], 0
    by_id = [{c.cell_id: c for c in o.target.matrix.cells} for o in opened]
    for cell in opened[0].target.matrix.cells:
        if cell.cell_id not in shared | alone:
            continue
        here = [(ti, cells[cell.cell_id]) for ti, cells in enumerate(by_id) if cell.cell_id in cells]
        if cell.cell_id not in shared:  # measured alone before: the targets whose row is not yet alone
            rows = {ti: _saved(opened[ti].store.cells_dir / f"{cell.cell_id}.parquet") for ti, _ in here}
            here = [(ti, c) for ti, c in here if rows[ti] and (rows[ti]["concurrent_cells"] or 1) > 1]
        if not here:
            continue
        queue.extend(here if turn % 2 == 0 else here[::-1])
        turn += 1
    return queue


def queued_alone(run_dirs) -> set[str]:
    """The cells any session of these run folders queued for the alone pass (run.json's `measured_alone`)."""
    import json
    from pathlib import Path

    queued: set[str] = set()
    for run in map(Path, run_dirs):
        if (run / "run.json").exists():
            manifest = json.loads((run / "run.json").read_text())
            queued.update(c for s in manifest.get("sessions", []) for c in s.get("measured_alone", ()))
    return queued


def pending(run_dirs) -> list[str]:
    """The cells of runs collected together (one session's interpreters) that the alone pass has still to
    measure: a saved row out of memory beside other cells in any run, or a cell a session queued for the pass
    (queued_alone) whose row in some run is missing or not yet from one cell on the GPU."""
    from pathlib import Path

    run_dirs = [Path(d) for d in run_dirs]
    rows: dict[str, list] = {}
    for run in run_dirs:
        for f in sorted((run / "cells").glob("*.parquet")):
            rows.setdefault(f.stem, []).append(_saved(f))
    queued = queued_alone(run_dirs)
    out = []
    for cell, saved in sorted(rows.items()):
        shared = any(r is not None and shared_status(r["status"], r["error"]) == OOM_SHARED for r in saved)
        if shared or (cell in queued and (len(saved) < len(run_dirs) or
                                          any(r is None or (r["concurrent_cells"] or 1) > 1 for r in saved))):
            out.append(cell)
    return out


def note(queue: list, runs: int, untried: int = 0) -> str:
    """The line the alone pass starts with; `untried`: its measurements the session's queue left to it
    without a try beside others (queue.next_entry)."""
    cells = len({c.cell_id for _, c in queue})
    what = "ran out of memory beside other cells on a shared GPU" + (
        f", or share the model, phase and batch of one that did ({untried} of the {len(queue)} measurement(s) "
        "below not tried there)" if untried else "")
    return (f"{cells} cell(s) {what}: measuring them again alone, one at a time, under all {runs} interpreter(s) "
            f"alike" + ("" if untried else f" ({len(queue)} measurement(s))"))
