"""Which called regressions an A/A can produce: the gate's "unverified" (analysis/commands/gate.py).

A called regression's interval holds what its processes show, widened by sibling runs' spread where
the data has them (analysis/stats/history.py). Three things the processes of one run share, and an
A/A (one build measured twice on one machine) moves, stay outside that interval; a regression that
one of them can explain is *unverified*: the gate names it and asks for the measurement that decides
(a repeat pair, sibling runs, COLD_REPLICATES=1) instead of failing on it.

- **One compile's draw** (`DRAW`): one torch in both runs, the cell's cold compiles autotuned other
  launch configurations, the profile of both runs shows the re-tuned kernels carried the change, and
  the called compiled or speedup change's interval holds only the processes' spread
  (changes.retuned_cells, draw_unheld). The autotune caveat's wider case (re-tuned, not profiled) is
  not enough: no committed A/A needs it, and it would hold 5 planted pairs' plants.
- **A host-paced side** (`HOST_PACED`): a speedup change in a cell with a launch-bound side in either
  run, smaller than the A/A spread of launch-bound sides (stats.LAUNCH_BOUND_AA): the host's pace,
  which moves between runs of one build, moved it.
- **The cell moved as a whole** (`TOGETHER`): the cell's other step moved the same way by at least
  the minimum effect and at least half as far (for a speedup: eager and compiled both moved the
  same way by the minimum effect): the machine's pace for the cell, or something both sides use,
  not the compiled code alone. A planted slowdown moves the compiled step only.

Measured over every committed same-torch pair and planted pair: `python benchmarks/false_alarms.py`.
"""
from __future__ import annotations

import math

from analysis.compare_report import changes
from analysis.stats import core as stats
from analysis.stats import estimates as est

DRAW, HOST_PACED, TOGETHER = "one compile's draw", "a host-paced side", "the cell moved as a whole"
STEP = ("compiled", "eager")


def _ln(x) -> float | None:
    return math.log(x) if x and x > 0 else None


def _moved_together(pairs: list[dict], ests: dict, small: float) -> bool:
    """Every paired cell (at least two) had both its steps move the same way by the minimum effect,
    launch-bound sides included: the whole run moved (a shift too small in cells for run_level's)."""
    got = [(ests["eager"][c].point, ests["compiled"][c].point) for c in
           (p["cell_id"] for p in pairs) if c in ests.get("eager", {}) and c in ests.get("compiled", {})]
    got = [(_ln(x), _ln(y)) for x, y in got if x and y]
    return len(got) >= 2 and (all(x >= small and y >= small for x, y in got) or
                              all(x <= -small and y <= -small for x, y in got))


def unverified(a, b, pairs: list[dict], ests: dict[str, dict[str, est.Estimate]],
               min_effect: float = stats.MIN_EFFECT) -> dict[tuple[str, str], str]:
    """(cell id, quantity) -> why its called regression is unverified (the reason's kind first), for
    every called regression an A/A can produce (module docstring)."""
    out: dict[tuple[str, str], str] = {}
    small = math.log1p(min_effect)
    by_id = {p["cell_id"]: p for p in pairs}
    drawn = {}
    if changes.versions(a, b)[0] == changes.versions(a, b)[1]:  # across versions the record is a hint
        drawn = {h[0]["cell_id"]: h for h in changes.draw_unheld(changes.retuned_cells(pairs, ests), ests) if h[4]}
    whole_run = _moved_together(pairs, ests, small)
    for q in ("compiled", "eager", "speedup"):
        for cid, e in ests.get(q, {}).items():
            if e.call != est.REGRESSED:
                continue
            why = _why(q, e, by_id.get(cid, {}), {s: ests.get(s, {}).get(cid) for s in STEP}, drawn.get(cid),
                       whole_run, small)
            if why:
                out[(cid, q)] = why
    return out


def _why(q: str, e: est.Estimate, p: dict, step: dict, drawn, whole_run: bool, small: float) -> str | None:
    pts = {s: (step[s].point if step[s] else None) for s in STEP}
    lb = [s for s in STEP if p.get(f"{s}_lb_a") or p.get(f"{s}_lb_b")]
    if q == "speedup" and lb and abs(math.log(e.point)) < math.log1p(stats.LAUNCH_BOUND_AA):
        moved = ", ".join(f"{s} {est.pct(pts[s])}" for s in STEP if pts[s])
        return (f"{HOST_PACED}: its {' and '.join(lb)} step launch-bound, whose pace moves by up to "
                f"{stats.LAUNCH_BOUND_AA:.0%} between runs of one build ({moved}); a repeat pair decides")
    if q in ("compiled", "speedup") and drawn:
        r = drawn[1]
        return (f"{DRAW}: the two cold compiles autotuned {len(r.changed)} of {r.compared} kernels differently, "
                "the profile shows those kernels carried the change, and the interval holds only each run's "
                "processes, which share one compile; repeat with COLD_REPLICATES=1 or a sibling run")
    if whole_run and q in STEP:
        return (f"{TOGETHER}: every cell's eager and compiled steps moved the same way (here eager "
                f"{est.pct(pts['eager'])}, compiled {est.pct(pts['compiled'])}): the machine's pace; a repeat pair decides")
    if q == "speedup":
        la, lc = _ln(pts["eager"]), _ln(pts["compiled"])
        if la is not None and lc is not None and abs(la) >= small and abs(lc) >= small and la * lc > 0:
            return (f"{TOGETHER}: eager {est.pct(pts['eager'])} and compiled {est.pct(pts['compiled'])} the same way; "
                    "a repeat pair decides")
        return None
    other = "eager" if q == "compiled" else "compiled"
    mine, theirs = _ln(e.point), _ln(pts[other])
    if other in lb or not mine or theirs is None:
        return None  # a launch-bound side moves on its own by up to LAUNCH_BOUND_AA: not evidence of the cell's pace
    if theirs * mine > 0 and abs(theirs) >= max(small, abs(mine) / 2):
        return f"{TOGETHER}: its {other} step moved the same way ({est.pct(pts[other])}); a repeat pair decides"
    return None
