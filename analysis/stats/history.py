"""A run's level against its siblings: the spread between runs of one build on one machine.

A cell's interval in a comparison comes from the spread between its processes (analysis/stats/tdist.py).
Whatever every process of a run shares (the one autotuning draw the warm replicates reuse, the
machine's state in that hour) moves the run as a whole, and that spread cannot show it: the
same-torch pairs in data/examples called the MoE compiled step +-4-6% and ResNet-50 bs1's
+39.6% (benchmarks/false_alarms.py) with narrow intervals.

Where the data folder holds several runs of one torch build on one machine (a boot in common), of
one protocol (the same settings, and each cell alone on its GPU or sharing it alike), none with a
plant ("siblings"), they measure that run-to-run spread directly: per
cell and quantity, the standard deviation `s` of the siblings' run levels (the mean over processes
of ln of each process's median step; ln speedup likewise). With `MIN_RUNS` or more siblings and `s`
above the run's own standard error, the comparison takes the run's level as one draw of the
build's level: the term `s * T(k - 1)` in place of the processes' `se * T(P - 1)`. Nothing is drawn
at random and nothing is tuned: the spread is the data's own, and with fewer siblings the interval
is the processes' alone, as before (docs/statistics.md "Run-to-run spread").
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from analysis.data.load import Run
from collector.record.contract import process_medians

MIN_RUNS = 3
PLANT_KEYS = ("plant_slowdown_pct", "plant_compile_ms", "plant_delay_ms")
QUANTITIES = ("eager", "compiled", "speedup")


def boots(run: Run) -> frozenset:
    """The boots of the machine(s) the run was collected on (run.json's environment and sessions)."""
    got = {run.env.get("boot_id")} | {s.get("boot_id") for s in run.manifest.get("sessions") or []}
    return frozenset(got - {None, ""})


def planted(run: Run) -> bool:
    return any(run.manifest.get("protocol", {}).get(k) for k in PLANT_KEYS)


def sharing(run: Run) -> tuple:
    """How many cells took turns on one GPU in each of the run's sessions (1: a cell alone), and whether
    their timed sections ran on every core (`--timed-cpus all`). Cells that
    share a GPU are timed alone but beside neighbours: on the H200's host that moved host-paced steps
    by -10% to +79% while GPU-bound ones stayed within 2% (docs/scale-out.md), so runs of the two
    protocols are no siblings."""
    got = set()
    for s in run.manifest.get("sessions") or []:
        shared = [w for w in s.get("workers") or [] if w.get("timing_lock")]
        locks = [w["timing_lock"] for w in shared]
        wide = any(w.get("timed_cpus") for w in shared)  # --timed-cpus all: another protocol again
        got.add((max((locks.count(x) for x in locks), default=1), wide))
    return tuple(sorted(got or {(1, False)}))


def protocol(run: Run) -> tuple:
    """The protocol that makes two runs' levels comparable: all but the plant and the time limit, and
    whether the cells had the GPU alone (`sharing`)."""
    return tuple(sorted((k, repr(v)) for k, v in run.manifest.get("protocol", {}).items()
                        if k not in PLANT_KEYS and k != "timeout_s")) + (("sharing", sharing(run)),)


def launch_bound(enqueue, step, steps_per_block) -> bool:
    """The report's rule (analysis/data/sql/cell_stats.sql): the median over blocks of the first sample's
    host enqueue time / device time is at least 0.9 (a test holds the two together)."""
    if not enqueue or not step or len(enqueue) != len(step):
        return False
    spb = max(1, int(steps_per_block or 1))
    ratios = [e / s for i, (e, s) in enumerate(zip(enqueue, step))
              if i % spb == 0 and e is not None and s and e == e and s == s]
    return bool(ratios) and statistics.median(ratios) >= 0.9


@lru_cache(maxsize=512)
def _levels(path: str, mtime: float) -> dict:
    """cell id -> {quantity: run level} for the ok cells of a run timed in 2+ processes; a side that
    was launch-bound in that run (host-paced: the comparison never calls its step time) has no level
    of its own; the speedup, called in every regime, always has one."""
    out = {}
    cols = ["cell_id", "status", "processes", "steps_per_block", "eager_step_ms", "compiled_step_ms",
            "eager_enqueue_ms", "compiled_enqueue_ms"]
    for f in sorted((Path(path) / "cells").glob("*.parquet")):
        try:
            rows = pq.read_table(f, columns=cols).to_pylist()
        except Exception:  # noqa: BLE001 - an unreadable or foreign file is the report's to name, not ours
            continue
        for r in rows:
            p = int(r.get("processes") or 1)
            if r.get("status") != "ok" or p < 2 or not r.get("compiled_step_ms"):
                continue
            e = np.asarray(process_medians(r["eager_step_ms"], p), float)
            c = np.asarray(process_medians(r["compiled_step_ms"], p), float)
            if len(e) != len(c) or len(e) < 2 or not (np.all(e > 0) and np.all(c > 0)):
                continue
            le, lc = np.log(e), np.log(c)
            lb = {side: launch_bound(r.get(f"{side}_enqueue_ms"), r.get(f"{side}_step_ms"), r.get("steps_per_block"))
                  for side in ("eager", "compiled")}
            got = {"eager": float(le.mean()), "compiled": float(lc.mean()), "speedup": float((le - lc).mean())}
            out[r["cell_id"]] = {q: v for q, v in got.items() if not lb.get(q)}
    return out


def levels(run: Run) -> dict:
    cells = run.path / "cells"
    return _levels(str(run.path), cells.stat().st_mtime if cells.exists() else 0.0)


@dataclass(frozen=True)
class Spread:
    """The run-to-run standard deviation of a cell's level over `runs` sibling runs."""

    s: float
    runs: int


class History:
    """The runs a comparison may measure run-to-run spread on (every run in its data folders)."""

    def __init__(self, runs: list[Run]):
        self.runs = [r for r in runs if r.env.get("device_name") and r.env.get("torch_version") and not planted(r)]
        self._siblings: dict[str, list[Run]] = {}

    def siblings(self, run: Run) -> list[Run]:
        """Runs of the same build on the same machine and protocol, no plant, the run itself included
        (empty for a planted run: its level is moved on purpose)."""
        if run.run_id not in self._siblings:
            if planted(run) or not boots(run):
                self._siblings[run.run_id] = []
            else:
                key = (run.env.get("device_name"), run.env.get("torch_version"), protocol(run))
                self._siblings[run.run_id] = [
                    r for r in self.runs if (r.env.get("device_name"), r.env.get("torch_version"), protocol(r)) == key
                    and boots(r) & boots(run)]
        return self._siblings[run.run_id]

    def spread(self, run: Run, cell_id: str, quantity: str) -> Spread | None:
        """The cell's run-to-run spread among the run's siblings, where MIN_RUNS or more measured it."""
        got = [lv[cell_id][quantity] for r in self.siblings(run) for lv in [levels(r)]
               if quantity in lv.get(cell_id, {})]
        if len(got) < MIN_RUNS:
            return None
        s = statistics.stdev(got)
        return Spread(s, len(got)) if math.isfinite(s) else None
