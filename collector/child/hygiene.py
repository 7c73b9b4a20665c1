"""Host hygiene before a cell's timed blocks: nothing of the compile left running beside them."""
from __future__ import annotations

import contextlib
import logging
import os
import signal

from collector.child.childlog import log

def _descendants(pid: int) -> list[int]:
    """Every living process below `pid` (from /proc; [] where there is none)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def host_hygiene(torch) -> list[str]:
    """Quieten this process's host before the timed blocks; returns what was done (the row's
    `hygiene`). Inductor's compile-worker pool, idle but alive after compiling, slowed a
    launch-bound eager step on the H200 host (median 5.5 ms against 4.1 ms once shut down,
    docs/measurement.md); the workers are not needed again in this process.

    Inductor's own shutdown waits for every worker to exit, and right after a compile the workers
    are often still starting (16 of them importing torch on the H200 host): it took 7-12 s a
    process there, a third of a warm replicate's wall time. So the workers (every process below
    this one: nothing else runs under a cell process) are killed first, and the pool is then shut
    down, which finds them gone and only resets Inductor's state."""
    done = []
    killed = 0
    for pid in _descendants(os.getpid()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    try:
        from torch._inductor import async_compile

        shutdown = getattr(async_compile, "shutdown_compile_workers", None)
        if shutdown is not None:
            logger = logging.getLogger("torch._inductor.compile_worker.subproc_pool")
            level = logger.level
            logger.setLevel(logging.ERROR)  # "Ignored OSError in pool shutdown": the workers are gone
            try:
                shutdown()
            finally:
                logger.setLevel(level)
            done.append("compile-workers-killed" if killed else "compile-workers-shutdown")
    except Exception as exc:  # private API: a torch without it simply does not get this step
        log(f"could not shut down compile workers: {type(exc).__name__}: {exc}")
    return done
