"""Where cells run: one worker per listed GPU (a GPU listed twice: two workers sharing it, whose timed
sections take turns), the host's CPU cores split between them by physical core."""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from collector.child.turns import TIMED_CPUS_ENV, TIMING_LOCK_ENV  # noqa: F401  (the launcher sets them)


@dataclass(frozen=True)
class Worker:
    """Where one stream of cells runs: a physical GPU (None: the default device), CPU cores, and, where
    other workers share its GPU, the lock file that their cells' timed sections take in turn."""
    gpu: int | None = None
    cpus: tuple[int, ...] | None = None
    timing_lock: str | None = None
    timed_cpus: tuple[int, ...] | None = None  # the cores its cells' timed sections run on (None: `cpus`)


def timing_lock_path(gpu: int) -> str:
    """The lock file of GPU `gpu`'s timed sections: one name a host, so that a second collector that
    shares the GPU the same way takes its turn too."""
    return str(Path(tempfile.gettempdir()) / f"tcb-timing-gpu{gpu}.lock")


def plan_workers(gpus: list[int] | None, timed_on_all: bool = False) -> list[Worker]:
    """One worker per listed GPU, the CPU cores this process may use split evenly between them.

    No list: one worker on the default device with every core (the honest default: a cell
    alone on the host). Several: cells run concurrently, one per GPU (recorded per row). A GPU
    listed twice (`0,0`): two cells at a time on it; one compiles (and builds, and checks) while the
    other is timed, and no two of its cells are timed at once (`timing_lock`). Whether that leaves
    the figures as they are alone is a measured question (docs/scale-out.md). `timed_on_all`: a
    shared GPU's cells run their timed sections on every core this process may use (`timed_cpus`),
    their other work on their worker's share.
    """
    if not gpus:
        return [Worker()]
    if any(g < 0 for g in gpus):
        raise ValueError(f"GPU indices must be >= 0, got {gpus}")
    shared = {g for g in gpus if gpus.count(g) > 1}
    lock = {g: timing_lock_path(g) if g in shared else None for g in gpus}
    try:
        cores = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux: no pinning
        return [Worker(gpu=g, timing_lock=lock[g]) for g in gpus]
    if len(cores) < len(gpus):
        raise ValueError(f"{len(gpus)} GPU workers need at least as many CPU cores; this process has {len(cores)}")
    groups = physical_cores(cores)
    if len(groups) < len(gpus) or os.environ.get("TCB_CPU_SPLIT") == "logical":
        groups = [(c,) for c in cores]  # too few physical cores (or asked for): split logical CPUs
    per = len(groups) // len(gpus)
    wide = tuple(cores) if timed_on_all else None
    return [Worker(gpu=g, cpus=tuple(sorted(c for grp in groups[i * per:(i + 1) * per] for c in grp)),
                   timing_lock=lock[g], timed_cpus=wide if lock[g] else None) for i, g in enumerate(gpus)]


def physical_cores(cpus: list[int], sysfs: Path = Path("/sys/devices/system/cpu")) -> list[tuple[int, ...]]:
    """`cpus` grouped by the physical core they belong to (SMT siblings together), in order.

    Splitting logical CPUs by number can give two workers the two hardware threads of one core
    (a common numbering puts sibling i + N/2 beside i): the neighbour's compile workers then share
    the core that runs this worker's timed loop. Whole cores go to one worker instead. Where the
    topology cannot be read, each CPU is its own group."""
    groups: dict[tuple[str, str], list[int]] = {}
    for c in cpus:
        topo = sysfs / f"cpu{c}" / "topology"
        try:
            key = ((topo / "physical_package_id").read_text().strip(), (topo / "core_id").read_text().strip())
        except OSError:
            key = ("?", str(c))
        groups.setdefault(key, []).append(c)
    return sorted((tuple(sorted(g)) for g in groups.values()), key=lambda g: g[0])


