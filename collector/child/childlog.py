"""The cell process's log: time-stamped step lines (collector.record.contract.LOG_STEP reads them back),
each of which also checkpoints the result so far beside the result file, so a process that dies
later (a native crash, a timeout) still hands its measurements to the runner; and the stage the
process is in, with the seconds each stage took (the row's process_stages_json)."""
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


class Stage:
    """Which part of the protocol is running, so an exception can be classified and named ("during
    compile: ..."), and the seconds each part took on the log's clock: setting `name` ends the
    running part. With `result`, each change also writes the split so far as its process_stages_json
    (a list of one {stage: seconds}; the host lists each process's), so a process that dies later
    still says where its time went."""

    def __init__(self, result=None, clock=time.perf_counter):
        self._clock, self._result = clock, result
        self._name, self._since = "setup", clock()
        self.seconds: dict[str, float] = {}

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        now = self._clock()
        self.seconds[self._name] = self.seconds.get(self._name, 0.0) + (now - self._since)
        self._name, self._since = value, now
        if self._result is not None:
            self._result["process_stages_json"] = json.dumps([self.split(now)])

    def split(self, now: float | None = None) -> dict[str, float]:
        """{stage: seconds} so far, the running stage's time until now included, to the millisecond."""
        now = self._clock() if now is None else now
        out = dict(self.seconds)
        out[self._name] = out.get(self._name, 0.0) + (now - self._since)
        return {k: round(v, 3) for k, v in out.items()}

    def close(self) -> None:
        """End the running stage and write the whole split into the result."""
        if self._result is not None:
            self._result["process_stages_json"] = json.dumps([self.split()])
