"""Taking turns at the timed sections: cells that share a GPU (`GPUS=0,0`) are measured two at a time,
and a cell process holds its GPU's lock file (named by TCB_TIMING_LOCK, set by the collector) from its
first timed block to the end of its last measured section (the kernel profile, the batch-size sweep),
so no two of them are timed at once. The wait comes before the first block and is in no figure.
Without the variable (the default, one cell a GPU) nothing is taken."""
from __future__ import annotations

import contextlib
import fcntl
import os
import time

from collector.child.childlog import log

TIMING_LOCK_ENV = "TCB_TIMING_LOCK"


@contextlib.contextmanager
def timed_turn(result: dict):
    """Hold the GPU's timing lock for the block inside, if the collector named one; the seconds waited
    for it go to `result["timing_wait_s"]` (this process's, as a list of one)."""
    path = os.environ.get(TIMING_LOCK_ENV)
    if not path:
        yield
        return
    with open(path, "a") as fh:
        t0 = time.perf_counter()
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for the timing lock {path}: another cell on this GPU is being timed")
            fcntl.flock(fh, fcntl.LOCK_EX)
        waited = time.perf_counter() - t0
        result["timing_wait_s"] = [round(waited, 3)]  # the host lists each process's (cell_measure._Jobs)
        log(f"timing lock taken after {waited:.2f} s (at {time.time():.3f})")  # the epoch: across processes
        try:
            yield
        finally:
            released = time.time()
            fcntl.flock(fh, fcntl.LOCK_UN)
            log(f"timing lock released (at {released:.3f})")
