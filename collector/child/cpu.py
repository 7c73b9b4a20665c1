"""The CPU seconds a cell process has used, its own and its descendants' (Inductor's compile workers):
the row's process_cpu_s, by which the collector's estimate reads how many threads a cell keeps busy."""
from __future__ import annotations

import os
import resource


def _children(pid: int) -> list[int]:
    """The child processes of `pid` (Linux /proc; none elsewhere)."""
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        pass
    return out


def _cpu_of(pid: int) -> float:
    """User and system CPU seconds of a live process (/proc/PID/stat's utime and stime); 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def cpu_seconds() -> float:
    """This process's user and system CPU seconds since it started (since its fork, for a forked one),
    its ended children's it waited for, and its live descendants' (compile workers still running)."""
    own, gone = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + gone.ru_utime + gone.ru_stime
    todo, seen = _children(os.getpid()), set()
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            total += _cpu_of(pid)
            todo += _children(pid)
    return total
