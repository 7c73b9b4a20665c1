"""The cell process's log: time-stamped step lines (collector.record.contract.LOG_STEP reads them back),
each of which also checkpoints the result so far beside the result file, so a process that dies
later (a native crash, a timeout) still hands its measurements to the runner."""
from __future__ import annotations

import json
import os
import time

T0 = time.perf_counter()  # the log's clock (collector.child.cell.main restarts it in a forked process)
_partial: dict = {}  # {"path": Path, "result": CellResult} while run_cell runs with a partial file


def epoch_of_clock() -> float:
    """The epoch (time.time()) at which the log's clock read 0: a line at +t happened at this + t."""
    return time.time() - (time.perf_counter() - T0)


def log(msg: str) -> None:
    """A time-stamped line in the cell's log (where the minutes of a cell go); saves the partial result."""
    print(f"[cell +{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)
    if _partial:
        path = _partial["path"]
        try:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(_partial["result"].to_json()))
            os.replace(tmp, path)
        except (OSError, TypeError, ValueError) as exc:  # never let the checkpoint fail the cell
            print(f"note: partial result not saved: {exc}", flush=True)
