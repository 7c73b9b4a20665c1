"""The order a session measures its cells in: the queue, and which of its entries a free worker takes.

The queue holds every interpreter's copy of a cell next to the others' (`interleave`), so that the two
sides of a version pair run at one moment, beside the same neighbours. The matrix lists a model's cells
next to each other (its modes, its phases): where several workers share a GPU (GPUS=0,0,0), taking the
queue in order ran three of one model's cells at once, and a large model ran out of memory beside
itself (MT5 and XGLM at batch 32 on an 80 GB H100, docs/findings-suites.md). So a worker of a shared GPU
skips a cell whose model has another cell running on that GPU (`next_entry`); the copies of one cell
under the other interpreters are not skipped: they are the pair.

At the lists' batch sizes three cells can overfill the GPU together (21 of 65 cell runs on one H100 machine
out of memory beside others, docs/performance.md); every such cell is measured again alone under every
interpreter at the session's end (collector/host/alone.py), and so would the model's next cells be, after
a try beside others that costs both copies' time. So once a cell ran out of memory beside others, the
cells that share its memory (`memory_key`: the model, phase, dtype and batch, its other mode and its pair's
copy among them) are not started beside others: they wait for the alone pass.
"""
from __future__ import annotations


def interleave(opened: list, cell_ids: list[str]) -> list[tuple[int, object]]:
    """The session's queue: (target index, cell) in matrix order, every target's copy of a cell
    next to the others', the targets' order reversed from one cell to the next (A B, B A, A B, ...)
    so that neither version always runs first after the other. Cells a target has already saved
    are left out of its turn."""
    todo = [{c.cell_id: c for c in o.todo} for o in opened]  # one lookup a cell, not a scan
    queue, turn = [], 0
    for cid in cell_ids:
        here = [(i, left[cid]) for i, left in enumerate(todo) if cid in left]
        if not here:
            continue
        queue.extend(here if turn % 2 == 0 else here[::-1])
        turn += 1
    return queue


def memory_key(cell) -> tuple:
    """What a cell's memory rests on: its eager step's is the same in every mode."""
    return cell.model, cell.phase, cell.dtype, cell.batch_size


def next_entry(queue: list, running: list, shared: bool, spilled: frozenset | set = frozenset()) -> int | None:
    """The index of the queue entry ((position, (target index, cell))) a free worker takes: the first,
    but on a shared GPU (`shared`) a copy of a cell in flight there (`running`) first, so that a pair the
    rule below started out of order runs together, then the first whose model has no other cell in
    flight; where every entry left is such a cell (a queue's end), the first. There, none whose
    `memory_key` is in `spilled` (out of memory beside others): None where only such entries are left."""
    if shared:
        ids = {r.cell_id for r in running}
        cells = [(j, cell) for j, (_, (_, cell)) in enumerate(queue) if not spilled or memory_key(cell) not in spilled]
        for j, cell in cells:
            if cell.cell_id in ids:
                return j
        for j, cell in cells:
            if all(r.model != cell.model for r in running):
                return j
        return cells[0][0] if cells else None
    return 0
