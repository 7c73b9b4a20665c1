"""What a cell's processes cannot show: changes of the run level, withheld from the per-cell calls.

A cell's interval comes from the spread between its processes in each run (analysis/tdist.py).
Two things are shared by every process of a run, so that spread cannot hold them, and the committed
same-torch pairs called them (benchmarks/false_alarms.py):

- **The autotuning draw.** With warm replicates (the default) every process compiles from the cold
  process's cache and reuses the launch configurations its autotuning chose; another run draws
  again. Where both runs are one torch build, kept an autotune record and chose differently (and
  a kernel profile in both runs does not clear the re-tuned kernels), a compiled-step or speedup
  change can be the draw: it is not called (`DRAW`). COLD_REPLICATES=1 in both runs puts the draw
  inside the interval, and such cells are called as usual; so are cells whose runs chose the same.
- **A run-wide shift.** When both the eager and the compiled step moved the same way, by at least
  the minimum effect, in nearly every cell (`WIDE_SHARE` of at least `WIDE_CELLS` callable cells),
  the host, the machine's state or something both sides use moved: the comparison names it once
  (`RunShift`) and does not call the step times cell by cell (`WIDE`). The speedup, paired inside
  each process, stays callable: a change of what compiling buys still shows there.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from analysis import estimates as est
from analysis import kernels

DRAW = "not called: one autotuning draw a run, chosen differently"
WIDE = "not called: a run-wide shift of both sides"
WIDE_SHARE = 0.8
WIDE_CELLS = 3


@dataclass(frozen=True)
class RunShift:
    """Both sides' geometric-mean change over the cells that moved together, and how many did."""

    eager: float
    compiled: float
    cells: int
    of: int

    def sentence(self, a: str, b: str) -> str:
        return (f"Run-wide shift: in {self.cells} of {self.of} cells both the eager and the compiled step moved the "
                f"same way (geometric mean eager {est.pct(self.eager)}, compiled {est.pct(self.compiled)}, {b} "
                f"against {a}): the host, its state or something both sides use changed, so step-time changes "
                "are not called cell by cell; the speedup, paired inside each process, is.")


def withhold_draws(pairs: list[dict], ests: dict, same_build: bool) -> int:
    """Withhold compiled-step and speedup calls that the autotuning draw can explain (module
    docstring); returns how many cells it touched."""
    if not same_build:
        return 0  # across builds a kernel's name can be another kernel: analysis/changes.py words a hint
    n = 0
    for p in pairs:
        cid = p["cell_id"]
        if p.get("rep_cache_a") == "cold" and p.get("rep_cache_b") == "cold":
            continue
        r = kernels.retuned(p.get("autotune_a"), p.get("autotune_b"))
        if r is None or not r.changed:
            continue
        sa = kernels.splits(p.get("profile_a"), {"compiled": p.get("compiled_a")}).get("compiled")
        sb = kernels.splits(p.get("profile_b"), {"compiled": p.get("compiled_b")}).get("compiled")
        if kernels.retuned_carried(r, sa, sb) is False:
            continue  # profiled in both runs: the re-tuned kernels did not carry the change
        touched = False
        for q in ("compiled", "speedup"):
            e = ests[q].get(cid)
            if e is not None and e.called:
                ests[q][cid] = replace(e, call=DRAW)
                touched = True
        n += touched
    return n


def run_shift(ests: dict, callable_ids: set, min_effect: float) -> RunShift | None:
    """The run-wide shift of both sides, where there is one (module docstring)."""
    small = math.log1p(min_effect)
    ids = [c for c in callable_ids if c in ests["eager"] and c in ests["compiled"]]
    if len(ids) < WIDE_CELLS:
        return None
    best = None
    for sign in (1, -1):
        moved = [c for c in ids if all(ests[q][c].point and sign * math.log(ests[q][c].point) >= small
                                       for q in ("eager", "compiled"))]
        if len(moved) >= max(WIDE_CELLS, WIDE_SHARE * len(ids)):
            geo = {q: math.exp(sum(math.log(ests[q][c].point) for c in moved) / len(moved)) for q in ("eager", "compiled")}
            best = RunShift(geo["eager"], geo["compiled"], len(moved), len(ids))
    return best


def withhold_run_wide(ests: dict, callable_ids: set, min_effect: float) -> RunShift | None:
    """Name a run-wide shift and withhold the per-cell step-time calls it explains."""
    shift = run_shift(ests, callable_ids, min_effect)
    if shift is None:
        return None
    for q in ("eager", "compiled"):
        for cid, e in ests[q].items():
            if e.called:
                ests[q][cid] = replace(e, call=WIDE)
    return shift
