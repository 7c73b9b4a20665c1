"""What a cell process leaves behind for the launcher to read: its log, capped at its first and
last 4 MiB (a cell that prints without end costs bounded disk and memory), the log's tail and the
last step it logged (where a process that died without a result was), and the partial result it
saved at its last logged step (collector/child/cell.py writes it beside the result file).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from collector.child.cell import PARTIAL_NAME
from collector.record.contract import last_logged_step

LOG_HEAD_BYTES = 4 << 20  # a cell log keeps its first 4 MiB ...
LOG_TAIL_BYTES = 4 << 20  # ... and its last 4 MiB; what lies between is counted, not kept
TAIL_READ_BYTES = 256 << 10  # what is read back of a log for a failed cell


def _read_tail(path: Path, n: int = TAIL_READ_BYTES) -> str:
    """The last `n` bytes of a log as text (never the whole file: a log can be large)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - n))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _tail(path: Path, n: int = 1500) -> str:
    return _read_tail(path)[-n:]


class CappedLog:
    """Copies a cell process's output from a pipe into its log, keeping the first LOG_HEAD_BYTES
    and the last LOG_TAIL_BYTES: a cell that prints without end costs bounded disk and memory."""

    def __init__(self, fh, head: int = LOG_HEAD_BYTES, tail: int = LOG_TAIL_BYTES):
        self.fh, self.head, self.tail = fh, head, tail
        self.written, self.dropped, self.buf = 0, 0, bytearray()
        self.error: OSError | None = None  # the first write that failed (a full disk)

    def pump(self, pipe) -> None:
        """Until the pipe ends. A write that fails (a full disk) is kept in `error` and the output
        is still drained, so the cell never blocks on a full pipe."""
        while True:
            chunk = pipe.read1(1 << 16) if hasattr(pipe, "read1") else pipe.read(1 << 16)
            if not chunk:
                break
            if self.error:
                continue
            room = max(0, self.head - self.written)
            if room:
                try:
                    self.fh.write(chunk[:room])
                    self.fh.flush()
                except OSError as exc:
                    self.error = exc
                    continue
                self.written += min(room, len(chunk))
                chunk = chunk[room:]
            if chunk:
                self.buf += chunk
                if len(self.buf) > self.tail:
                    self.dropped += len(self.buf) - self.tail
                    del self.buf[:len(self.buf) - self.tail]

    def finish(self) -> None:
        """Write the kept tail; raise the write error the pump met, if any."""
        if self.error:
            raise self.error
        if self.dropped:
            self.fh.write(f"\n[... {self.dropped} bytes of output left out (the log keeps its first "
                          f"{self.head >> 20} MiB and last {self.tail >> 20} MiB) ...]\n".encode())
        self.fh.write(bytes(self.buf))
        self.fh.flush()
        self.buf = bytearray()


def _partial(out_path: Path) -> dict:
    """What a cell process that died had measured by its last logged step (collector.child.cell saves
    it beside its result file), or {} if nothing readable was saved."""
    try:
        saved = json.loads((out_path.parent / PARTIAL_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return saved if isinstance(saved, dict) else {}


def _last_step(path: Path) -> str:
    """'; last step logged: ...' from the cell log's latest process section, or '' if none.

    The cell logs each stage as `[cell +  12.3s] what`; the last one says where a process that
    died without a result (a native crash, a timeout) was."""
    text = _read_tail(path)
    step = last_logged_step(text.rsplit("\n=== ", 1)[-1])  # this process's section of the log only
    return f"; last step logged: {step}" if step else ""
