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
