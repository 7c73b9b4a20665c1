"""What a cell's processes cannot show: changes of the run level, withheld from the per-cell calls.

A cell's interval comes from the spread between its processes in each run (analysis/stats/tdist.py).
What every process of a run shares, that spread cannot hold. A cell's own run-to-run spread (the
autotuning draw the warm replicates reuse, among others) is measured on sibling runs where the data
has them (analysis/stats/history.py). What is left here:

- **A run-wide shift.** When both the eager and the compiled step moved the same way, by at least
  the minimum effect, in nearly every cell (`WIDE_SHARE` of at least `WIDE_CELLS` callable cells),
  the host, the machine's state or something both sides use moved: the comparison names it once
  (`RunShift`) and does not call the step times cell by cell (`WIDE`). The speedup, paired inside
  each process, stays callable: a change of what compiling buys still shows there.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from analysis.stats import estimates as est

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
