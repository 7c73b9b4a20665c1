"""How crowded the host is, and how much that slows a cell: the collector's time-left estimate reads
every cell time as on an uncrowded host (earlier runs' by the crowding their sessions recorded, this
run's by the crowding as each ended) and stretches each queued cell by its slowdown at the load now
(collector/host/progress.py, docs/estimate.md)."""
from __future__ import annotations

import os
import statistics
import threading
import time
from collections import deque
from typing import Callable


def _runnable() -> int | None:
    """Threads runnable on the host now, less the one reading (/proc/loadavg's 4th field); None off Linux."""
    try:
        with open("/proc/loadavg") as f:
            return max(0, int(f.read().split()[3].split("/")[0]) - 1)
    except (OSError, ValueError, IndexError):
        return None


class LoadSampler:
    """The host's runnable threads, read every `every` seconds by a daemon thread (`read`: _runnable),
    and their mean over the last `window` seconds per CPU (call it). The load average the kernel keeps
    (os.getloadavg) is the same count averaged over a minute: beside two processes started a minute
    before, it had climbed to 63% of their load, and a loaded run read its first cells as a quiet host's
    (docs/estimate.md). The first call reads `burst` samples at once, so it has a mean from the start."""

    def __init__(self, read: Callable[[], int | None] = _runnable, every: float = 1.0, window: float = 30.0,
                 burst: int = 10, clock: Callable[[], float] = time.monotonic, cpus: int | None = None,
                 background: bool = True):
        self.read, self.every, self.window, self.burst, self.clock = read, every, window, burst, clock
        self.background = background  # False: no thread reads; the caller calls sample() (tests)
        self.cpus = cpus or os.cpu_count() or 1
        self.samples: deque = deque()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def sample(self) -> bool:
        got = self.read()
        if got is None:
            return False
        now = self.clock()
        with self.lock:
            self.samples.append((now, got))
            while self.samples and self.samples[0][0] < now - self.window:
                self.samples.popleft()
        return True

    def _loop(self) -> None:
        while self.sample():
            time.sleep(self.every)

    def __call__(self) -> float | None:
        if self.thread is None:
            for i in range(self.burst):
                if not self.sample():
                    break
                time.sleep(0.05 if i < self.burst - 1 and self.background else 0)
            self.thread = threading.Thread(target=self._loop, name="load-sampler", daemon=True)
            if self.background:
                self.thread.start()
        with self.lock:
            if not self.samples:
                return None
            return statistics.fmean(n for _, n in self.samples) / self.cpus


_SAMPLER = LoadSampler()


def host_load() -> float | None:
    """The host's runnable threads per CPU over the last 30 s (LoadSampler), else its run queue per CPU
    over the last minute (os.getloadavg), else None where it cannot say."""
    got = _SAMPLER()
    if got is not None:
        return got
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except (OSError, AttributeError):
        return None


# crowding up to this reads as an uncrowded host: a quiet run's sessions read 1.000-1.008 (the sampler
# counts the collector's own threads too), and their cells' busy threads are what the estimate needs
UNCROWDED = 1.05


def crowding(load: float | None) -> float:
    """How much slower a CPU-bound process runs at `load` (run queue per CPU): 1 until every CPU is
    busy, then the share of a CPU it gets shrinks as load / 1."""
    return max(1.0, load) if load else 1.0


# a cell's slowdown on a crowded host: crowding ** (LOAD_FLOOR + LOAD_EXPONENT x the share of the other CPUs
# it keeps busy) (slowdown); least squares over 24 cells of three runs of the smoke preset beside two busy
# processes on this project's 2-core machine (docs/estimate.md, benchmarks/load_slowdown.py)
LOAD_FLOOR = 0.8
LOAD_EXPONENT = 1.6


def busy_threads(row: dict) -> float | None:
    """How many threads a cell kept busy: its processes' CPU seconds over their wall seconds
    (process_cpu_s, process_wall_s); None where the row does not say (rows before schema v12)."""
    pairs = [(c, w) for c, w in zip(row.get("process_cpu_s") or [], row.get("process_wall_s") or [])
             if c is not None and w]
    return sum(c for c, _ in pairs) / sum(w for _, w in pairs) if pairs else None


def slowdown(crowd: float, busy: float | None, cpus: int | None = None) -> float:
    """How much longer a cell takes on a host at `crowd` (crowding) than on an uncrowded one, by the
    threads it keeps busy on an uncrowded host (`busy`, busy_threads; None: not known). Beside two busy
    processes on 2 cores (crowding 1.7-1.8) a cell that keeps one CPU busy lost about its share of a CPU
    (the smoke MLP's inference, 1.0-1.2 threads: 1.2-1.6x); one that keeps both busy lost far more (the
    one-layer GPT's training, 1.8 threads: 2.6-3.3x), since each of its parallel sections waits for its
    slowest thread. So: crowd ** (LOAD_FLOOR + LOAD_EXPONENT x the share of the other CPUs it keeps busy,
    0 to 1); where `busy` is not known, `crowd` (a process's share of a CPU)."""
    if crowd <= UNCROWDED:
        return 1.0
    cpus = cpus or os.cpu_count() or 1
    if busy is None or cpus < 2:
        return crowd
    return crowd ** (LOAD_FLOOR + LOAD_EXPONENT * min(1.0, max(0.0, (busy - 1) / (cpus - 1))))


def mark_crowding(rows: list[dict], sessions: list[dict]) -> list[dict]:
    """Mark each earlier cell with the `host_crowding` its session recorded (the mean crowding as its
    cells ended) as `crowd`, matched by started_at as mark_startups matches; `uncrowd` then reads it."""
    for s in sessions or []:
        crowd, lo, hi = s.get("host_crowding"), s.get("started_at"), s.get("finished_at") or "~"
        if not crowd or crowd <= UNCROWDED or not lo:
            continue
        for i, r in enumerate(rows):
            if r.get("started_at") and lo <= str(r["started_at"]) <= hi:
                rows[i] = {**r, "crowd": crowd}
    return rows


def uncrowd(rows: list[dict], cpus: int | None = None) -> list[dict]:
    """Earlier cells' wall times as they would take on an uncrowded host: each of a crowded session
    (mark_crowding) divided by its slowdown there, by the threads the cell keeps busy uncrowded (the same
    cell's in an uncrowded session of these rows, else the same model and phase's; else not known: its
    crowding). A run collected beside two busy processes on 2 cores then no longer reads as this machine's
    pace when the next run starts quiet (1.93x high at its first cell before), and the live estimate
    stretches every earlier time to the host's load now."""
    quiet: dict[tuple, list[float]] = {}
    for r in rows:
        busy = busy_threads(r)
        if busy is not None and (r.get("crowd") or 1.0) <= UNCROWDED:
            for k in ((r.get("model"), r.get("phase"), r.get("mode")), (r.get("model"), r.get("phase"))):
                quiet.setdefault(k, []).append(busy)
    out = []
    for r in rows:
        crowd = r.get("crowd") or 1.0
        if crowd > UNCROWDED and r.get("cell_wall_s"):
            busy = next((statistics.fmean(quiet[k]) for k in ((r.get("model"), r.get("phase"), r.get("mode")),
                                                              (r.get("model"), r.get("phase"))) if k in quiet), None)
            r = {**r, "cell_wall_s": r["cell_wall_s"] / slowdown(crowd, busy, cpus),
                 **({"startup_s": r["startup_s"] / crowd} if r.get("startup_s") else {})}
        out.append(r)
    return out
