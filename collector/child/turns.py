"""Taking turns on a shared GPU: cells that share a GPU (`GPUS=0,0`) are measured side by side, and a
cell process holds its GPU's lock file (named by TCB_TIMING_LOCK, set by the collector) exclusively from
its first timed block to the end of its last measured section (the kernel profile, the batch-size
sweep), so no two of them are timed at once (`timed_turn`). Its other work on the GPU (the model moved
there, the float64 reference, the eager first call and warm-up, the compiled warm-up and the correctness
check, Inductor's autotuning benchmarks) holds the same lock shared (`gpu_turn`): several cells may do
such work at once, none while another cell is timed. The compile itself, on the host, holds nothing.
With TCB_TIMED_CPUS (`--timed-cpus all`) the thread that holds the lock exclusively runs on those cores
until it lets it go, then on its worker's share again (`_wider`).
The waits come before a stage and are in no figure. Without the variable (the default, one cell a GPU)
nothing is taken."""
from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import threading
import time

from collector.child.childlog import log

TIMING_LOCK_ENV = "TCB_TIMING_LOCK"
TIMED_CPUS_ENV = "TCB_TIMED_CPUS"  # --timed-cpus all: the cores the timed section runs on, comma-separated
_held = {"timed": False, "depth": 0, "fh": None, "what": None}  # this process's turns: nested ones take no lock
_turns_mutex = threading.Lock()  # the shared turn's count, across the threads of this process
_autotune = {"turns": 0, "waited_s": 0.0}  # Inductor's benchmarks: counted, not logged one by one


def _take(fh, how: int, waiting: str) -> float:
    """Seconds waited for the lock on `fh` (`how`: fcntl.LOCK_EX or LOCK_SH), saying `waiting` if it blocks."""
    t0 = time.perf_counter()
    try:
        fcntl.flock(fh, how | fcntl.LOCK_NB)
    except BlockingIOError:
        if waiting:
            log(waiting)
        fcntl.flock(fh, how)
    return time.perf_counter() - t0


@contextlib.contextmanager
def timed_turn(result: dict):
    """Hold the GPU's timing lock exclusively for the block inside, if the collector named one; the
    seconds waited for it go to `result["timing_wait_s"]` (this process's, as a list of one)."""
    path = os.environ.get(TIMING_LOCK_ENV)
    if not path:
        yield
        return
    with open(path, "a") as fh:
        waited = _take(fh, fcntl.LOCK_EX, f"waiting for the timing lock {path}: another cell on this GPU holds it "
                                          "(its timing, or work on the GPU)")
        result["timing_wait_s"] = [round(waited, 3)]  # the host lists each process's (cell_measure._Jobs)
        log(f"timing lock taken after {waited:.2f} s (at {time.time():.3f})")  # the epoch: across processes
        _held["timed"] = True
        try:
            with _wider(os.environ.get(TIMED_CPUS_ENV)):
                yield
        finally:
            _held["timed"] = False
            released = time.time()
            fcntl.flock(fh, fcntl.LOCK_UN)
            log(f"timing lock released (at {released:.3f})")


@contextlib.contextmanager
def _wider(cpus: str | None):
    """Run the calling thread on `cpus` (comma-separated) inside, on the cores it had before after; the
    thread that times a cell issues its launches (Linux: the affinity is the thread's)."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    want = {int(c) for c in cpus.split(",") if c.strip()}
    os.sched_setaffinity(0, want)
    log(f"timed section on cores {cpus} (its worker's: {','.join(map(str, sorted(before)))})")
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@contextlib.contextmanager
def gpu_turn(what: str, quiet: bool = False):
    """Hold the GPU's lock shared for untimed work on the GPU (`what`), if the collector named one: it
    waits while another cell is timed. Logged with its epochs unless `quiet` (then only counted). The
    process holds the lock while any of its threads is inside a turn (Inductor may benchmark from
    several): the first to enter takes it, the last to leave lets it go."""
    path = os.environ.get(TIMING_LOCK_ENV)
    if not path or _held["timed"]:
        yield
        return
    with _turns_mutex:
        if not _held["depth"]:
            fh = open(path, "a")
            waited = _take(fh, fcntl.LOCK_SH, "" if quiet else f"waiting for the GPU turn ({what}): another "
                                                                 "cell's timing holds this GPU")
            _held["fh"], _held["what"] = fh, None if quiet else what
            if quiet:
                _autotune["turns"] += 1
                _autotune["waited_s"] += waited
            else:
                log(f"GPU turn for {what} after {waited:.2f} s (at {time.time():.3f})")
        _held["depth"] += 1
    try:
        yield
    finally:
        with _turns_mutex:
            _held["depth"] -= 1
            if not _held["depth"]:
                released = time.time()
                fh, _held["fh"] = _held["fh"], None
                fcntl.flock(fh, fcntl.LOCK_UN)
                fh.close()
                if _held["what"]:  # the turn that took it, whichever thread leaves last
                    log(f"GPU turn for {_held['what']} released (at {released:.3f})")


def autotune_turns() -> tuple[int, float]:
    """(turns, seconds waited) of Inductor's benchmarks since the last call; the count starts again."""
    got = (_autotune["turns"], _autotune["waited_s"])
    _autotune.update(turns=0, waited_s=0.0)
    return got


def hook_benchmarks() -> str:
    """Put Inductor's GPU benchmarks (autotuning) under `gpu_turn`: through torch's own harness hook
    where it has one (torch >= 2.13), else by wrapping the benchmarker's `benchmark_gpu` methods.
    Returns how, for the cell's log; nothing if no lock is named."""
    if not os.environ.get(TIMING_LOCK_ENV):
        return ""
    try:
        from torch._inductor.runtime import benchmarking
    except Exception as exc:  # an Inductor without the module: its benchmarks stay outside the turns
        return f"Inductor's benchmarks not hooked ({type(exc).__name__}: {exc})"
    hook = getattr(benchmarking, "set_gpu_benchmark_lock_context", None)
    if hook is not None:
        hook(lambda: gpu_turn("autotuning", quiet=True))
        return "Inductor's benchmarks take GPU turns (torch's benchmark lock hook)"
    wrapped = 0
    for cls in type(benchmarking.benchmarker).__mro__:
        fn = cls.__dict__.get("benchmark_gpu")
        if fn is not None and not getattr(fn, "_gpu_turn", False):
            setattr(cls, "benchmark_gpu", _in_turn(fn))
            wrapped += 1
    return f"Inductor's benchmarks take GPU turns ({wrapped} benchmark_gpu method(s) wrapped)"


def _in_turn(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with gpu_turn("autotuning", quiet=True):
            return fn(*args, **kwargs)
    wrapper._gpu_turn = True
    return wrapper


def cores_note() -> str:
    """'cores 0-4; ' where the process may run on part of the host's cores (a worker's share), else ''."""
    try:
        mine, host = sorted(os.sched_getaffinity(0)), os.cpu_count()
    except AttributeError:
        return ""
    if len(mine) == host:
        return ""
    runs, start = [], mine[0]
    for a, b in zip(mine, mine[1:] + [None]):
        if b != a + 1:
            runs.append(f"{start}-{a}" if a > start else f"{a}")
            start = b
    return f"cores {','.join(runs)}; "
