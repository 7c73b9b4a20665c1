"""Stand-in launchers for the scheduler's tests: no process is started; each cell process's result
JSON is what the stand-in returns (collector/host/cell_measure.py reads it as a CellResult)."""
from __future__ import annotations

from collector.host.launch import LauncherBase

OK = {"status": "ok", "eager_step_ms": [2.0] * 4, "compiled_step_ms": [1.0] * 4}


class OkLauncher(LauncherBase):
    """Every process succeeds with `result` (default: 4 samples a side, eager 2 ms, compiled 1 ms)."""

    def __init__(self, result: dict | None = None):
        self.result = dict(OK if result is None else result)

    def run(self, spec, cache_dir, log_path, timeout_s):
        return dict(self.result)


class MemoryLauncher(LauncherBase):
    """A stand-in that runs out of memory where `oom(cell, version, shared)` says (shared: started by a worker
    of a shared GPU, with its timing lock), notes every process in `log` as (cell, version, shared), and
    otherwise succeeds after `sleep_s`."""

    def __init__(self, version, oom, log: list, sleep_s: float = 0.0, worker=None):
        self.version, self.oom, self.log, self.sleep_s, self.worker = version, oom, log, sleep_s, worker

    def for_worker(self, worker):
        return MemoryLauncher(self.version, self.oom, self.log, self.sleep_s, worker)

    def run(self, spec, cache_dir, log_path, timeout_s):
        import time
        c, shared = spec["cell"], bool(self.worker and self.worker.timing_lock)
        self.log.append((c, self.version, shared))
        if self.oom(c, self.version, shared):
            return {"status": "oom", "error": "during eager: OutOfMemoryError: CUDA out of memory"}
        time.sleep(self.sleep_s)
        return {**OK, "first_call_eager_s": 0.1, "first_call_compiled_s": 3.0}
