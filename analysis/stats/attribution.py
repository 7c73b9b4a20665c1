"""Which side moved a speedup change: the eager step, the compiled step, or both.

On the log scale a cell's speedup change is its eager change less its compiled change:
ln(s_B / s_A) = ln(e_B / e_A) - ln(c_B / c_A). Where both parts push the speedup the same way, a
side that carries at least `SHARE` of the sum moved it ("eager training step slower in 2.14.1:
speedup up"), else both did. Where both steps moved the same way (both faster, both slower), the
change is what one moved beyond the other: both moved it when the smaller move is at least
`OPPOSED` of the change (MLP max-autotune on the H200: eager -42.5%, compiled -53.0%, speedup
+22.5%), else the larger one did. A speedup that rose because eager got slower is an eager
change, never a compiled improvement: the verdict, the Regressions and Improvements tables and
estimates.json (`moved`) say which.
"""
from __future__ import annotations

import math

from analysis.stats import estimates as est

SHARE = 0.75
OPPOSED = 0.5  # both steps moved one way, the smaller move at least half the change: both moved it
EAGER, COMPILED, BOTH = "eager", "compiled", "both"


def side(eager: est.Estimate | None, compiled: est.Estimate | None) -> str | None:
    """'eager', 'compiled' or 'both'; None where either side's point is missing or nothing moved."""
    if eager is None or compiled is None or not eager.point or not compiled.point:
        return None
    le, lc = math.log(eager.point), -math.log(compiled.point)  # each side's part of ln(speedup change)
    total = le + lc
    if total == 0:
        return None
    if le * lc < 0:  # both steps moved the same way: the change is what one moved beyond the other
        carry, against = (le, lc) if le * total > 0 else (lc, le)
        if abs(against) >= OPPOSED * abs(total):
            return BOTH
        return EAGER if carry is le else COMPILED
    share = le / total
    return EAGER if share >= SHARE else COMPILED if share <= 1 - SHARE else BOTH


def words(moved: str | None, eager: est.Estimate, compiled: est.Estimate) -> str:
    """'eager step moved (eager +19.1%, compiled -8.2%)' and the like."""
    pair = f"eager {est.pct(eager.point)}, compiled {est.pct(compiled.point)}"
    if moved == BOTH:
        return f"both sides moved ({pair})"
    return f"the {moved} step moved ({pair})" if moved else pair


def verdict_line(ests: dict, labels: dict[str, str]) -> str | None:
    """The verdict's line on the called speedup changes, counted by the side that moved them (one
    line: the report's first screen holds the verdict and a chart; the Regressions and Improvements
    tables name each cell's side and both steps' changes)."""
    groups: dict[tuple[str, bool], int] = {}
    for cid, e in ests["speedup"].items():
        if not e.called:
            continue
        moved = side(ests["eager"].get(cid), ests["compiled"].get(cid))
        if moved is not None:
            groups[(moved, e.point > 1)] = groups.get((moved, e.point > 1), 0) + 1
    if not groups:
        return None
    parts = []
    for (moved, up), n in sorted(groups.items(), key=lambda kv: (-kv[1], kv[0])):
        what = {EAGER: f"eager step {'slower' if up else 'faster'}", COMPILED: f"compiled step {'faster' if up else 'slower'}",
                BOTH: "both steps moved"}[moved]
        parts.append(f"{what} in {n}, speedup {'up' if up else 'down'}")
    return "Which side moved the called speedup changes: " + "; ".join(parts) + " (each cell: Regressions, Improvements)."
