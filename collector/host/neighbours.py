"""What else measured on this host while a cell did: co-location measured, not assumed.

A cell's row says how many cells ran at once on its host (`concurrent_cells`). The local
collector knows its own workers (GPUS=), but not a shard started beside it, a second collector,
or two SLURM array tasks the scheduler put on one node. So while a cell runs, a thread looks at
the host's processes once a second and counts the other cells being measured: a process running
`python -m collector.child.cell` (the exec launcher) or a child forked by a fork parent
(`python -m collector.host.zygote`), that is not a descendant of this process and is on this host
(the same UTS namespace: the local test cluster's second node is a namespace of this machine).
The row gets one plus the most seen at once. No file is written anywhere: the host's process
table is the record. Where /proc does not exist (not Linux) nothing is seen.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

PROC = Path("/proc")
CELL_MODULE = "collector.child.cell"
FORK_PARENT_MODULE = "collector.host.zygote"
INTERVAL_S = 2.0  # between looks at the process table (a look reads every cmdline: a few ms)


def _cmdline(pid: str, proc: Path) -> list[str]:
    try:
        return (proc / pid / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _runs(args: list[str], module: str) -> bool:
    return any(a == "-m" and b == module for a, b in zip(args, args[1:]))


def _ppid(pid: str, proc: Path) -> str | None:
    try:
        stat = (proc / pid / "stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[1]  # the field after the state; comm may hold spaces


def _uts(pid: str, proc: Path) -> str | None:
    try:
        return os.readlink(proc / pid / "ns" / "uts")
    except OSError:
        return None  # another user's process: assume this host (another machine has no /proc here)


def measuring(proc: Path = PROC) -> dict[str, str | None]:
    """pid -> parent pid of every process on this machine that is measuring a cell now."""
    out: dict[str, str | None] = {}
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return out
    cmd = {}
    for pid in pids:
        args = _cmdline(pid, proc)
        if _runs(args, CELL_MODULE) or _runs(args, FORK_PARENT_MODULE):
            cmd[pid] = args
    for pid, args in cmd.items():
        parent = _ppid(pid, proc)
        if _runs(args, CELL_MODULE) or (parent in cmd and _runs(cmd[parent], FORK_PARENT_MODULE)):
            out[pid] = parent  # a fork parent's child is a cell process; the parent itself is not
    return out


def _descends_from(pid: str, me: str, proc: Path) -> bool:
    seen = 0
    while pid and pid not in ("0", "1") and seen < 64:
        if pid == me:
            return True
        pid, seen = _ppid(pid, proc), seen + 1
    return False


def other_cells(me: int | None = None, proc: Path = PROC) -> set[str]:
    """The pids of cell processes on this host that are not this process's own."""
    me_s = str(me or os.getpid())
    mine = _uts(me_s, proc)
    return {pid for pid in measuring(proc)
            if not _descends_from(pid, me_s, proc) and (mine is None or _uts(pid, proc) in (None, mine))}


class Watch:
    """`with Watch() as w: ...` samples other_cells() every `interval` s (INTERVAL_S); `w.most` is the most
    other cells seen at once, `w.pids` every one seen."""

    def __init__(self, interval: float | None = None, look=other_cells):
        self.interval, self.look = interval or INTERVAL_S, look
        self.most, self.pids = 0, set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tcb-neighbours", daemon=True)

    def sample(self) -> None:
        try:
            now = self.look()
        except Exception:  # a view of the host, never a reason to lose a cell
            return
        self.most = max(self.most, len(now))
        self.pids |= now

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> "Watch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sample()  # one last look: a neighbour that started during the last interval
