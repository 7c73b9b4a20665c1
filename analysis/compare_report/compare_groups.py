"""The comparison's cells grouped by phase, mode, scope and dtype (bf16 and float32 never averaged
together): the numbers of each group (GroupChange: geometric means of the cells' ratios with exact
intervals, analysis/stats/tdist.py) apart from the sentences that word them (headline)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.stats import estimates as est
from analysis.stats import tdist


@dataclass(frozen=True)
class GroupChange:
    """One group's changes B/A, each (point, lo, hi) of a geometric mean over its cells."""

    phase: str
    mode: str
    scope: str
    dtype: str
    cells: int
    speedup_a: float  # geometric mean of A's speedups
    speedup_b: float
    speedup: tuple[float, float, float]
    compiled: tuple[float, float, float]
    eager: tuple[float, float, float]
    single: int  # cells timed in one process in a run: never called
    improved: int  # cells whose speedup change is called an improvement
    regressed: int


def _geo(values) -> float:
    return float(np.exp(np.mean(np.log(values))))


def _ratio(members: list[dict], fam: dict, q: str, a: str, b: str) -> tuple[float, float, float]:
    lo, hi = (float(np.exp(v)) for v in tdist.mean([fam[q][m["cell_id"]] for m in members]).interval())
    return _geo([m[b] / m[a] for m in members]), lo, hi


def group_changes(pairs: list[dict], fam: dict, speedup_calls: dict[str, str], callable_ids) -> list[GroupChange]:
    """Every group of paired cells with a speedup estimate (`fam`: quantity -> cell id -> LogDist;
    `speedup_calls`: cell id -> the call on its speedup change), sorted by its key."""
    groups: dict[tuple, list[dict]] = {}
    for p in pairs:
        if p["cell_id"] in fam["speedup"]:
            groups.setdefault((p["phase"], p["mode"], p["compile_scope"], p["dtype"]), []).append(p)
    out = []
    for key, members in sorted(groups.items()):
        ids = [m["cell_id"] for m in members]
        out.append(GroupChange(
            *key, len(members), _geo([m["speedup_a"] for m in members]), _geo([m["speedup_b"] for m in members]),
            _ratio(members, fam, "speedup", "speedup_a", "speedup_b"),
            _ratio(members, fam, "compiled", "compiled_a", "compiled_b"),
            _ratio(members, fam, "eager", "eager_a", "eager_b"),
            sum(i not in callable_ids for i in ids),
            sum(speedup_calls.get(i) == est.IMPROVED for i in ids),
            sum(speedup_calls.get(i) == est.REGRESSED for i in ids)))
    return out


def pct(r: float) -> str:
    return f"{(r - 1) * 100:+.1f}%"


def eager_moved_with(g: GroupChange, min_effect: float) -> bool:
    """Eager "moved with" compiled only when it moved the same way, significantly, by at least the
    minimum effect and by at least half as much as compiled: a tight +0.2% eager shift beside a +10%
    compiled one is the compile's change (seen on a planted +10% on the H200), not a shared cause."""
    c_point, (e_point, e_lo, e_hi) = g.compiled[0], g.eager
    same_way = (e_hi < 1 and c_point < 1) or (e_lo > 1 and c_point > 1)
    return same_way and abs(np.log(e_point)) >= max(np.log1p(min_effect), 0.5 * abs(np.log(c_point)))


def sentence(g: GroupChange, a: str, b: str, min_effect: float, several_dtypes: bool) -> str:
    """The headline's line for one group: its compiled change, called by the one rule
    (estimates.call_rule) on the group's interval, then its eager and speedup changes."""
    what = "inference" if g.phase == "infer" else "training"
    name = f"{what} ({g.mode}{'' if g.scope == 'model' else ', whole-step compile'}{f', {g.dtype}' if several_dtypes else ''})"
    (c, c_lo, c_hi), (e, e_lo, e_hi), (s, s_lo, s_hi) = g.compiled, g.eager, g.speedup
    moved = f"Compiled {name} step time moved {pct(c)} between {a} and {b} (95% CI {pct(c_lo)} to {pct(c_hi)}, {g.cells} cells)"
    call = est.call_rule(c, c_lo, c_hi, min_effect, est.QUANTITIES["compiled"][1],
                         "timed in one process" if g.single else None)
    if g.single:
        line = (f"{moved}, but {g.single} of these cells were timed in one process in a run: the interval "
                "holds within-process noise only, so no change is called.")
    elif call == est.BELOW_MIN:
        line = f"{moved}, less than the {min_effect * 100:g}% minimum effect: not a meaningful change."
    elif call in (est.IMPROVED, est.REGRESSED) and eager_moved_with(g, min_effect):
        # the host (or a shared library) changed, not what compiling buys: say so, not "compiled is x% faster"
        line = (f"{moved}, but eager moved with it: what changed is common to both sides (the machine, its "
                "load, or a library both use), not the compile; read the speedup change.")
    elif call in (est.IMPROVED, est.REGRESSED):
        # one sign convention everywhere: the change in step time, B against A, as in the tables
        line = (f"Compiled {name} got {'faster' if c < 1 else 'slower'} in {b}: step time {pct(c)} against {a} "
                f"(95% CI {pct(c_lo)} to {pct(c_hi)}, geometric mean over {g.cells} cells).")
    else:
        line = (f"Compiled {name} step time did not change measurably between {a} and {b} ({pct(c)}, 95% CI "
                f"{pct(c_lo)} to {pct(c_hi)}, {g.cells} cells).")
    return (line + f" Eager step time in the same cells: {pct(e)} (95% CI {pct(e_lo)} to {pct(e_hi)});"
            f" speedup {pct(s)} (95% CI {pct(s_lo)} to {pct(s_hi)}).")


def headline(groups: list[GroupChange], a: str, b: str, min_effect: float) -> list[str]:
    several = len({g.dtype for g in groups}) > 1
    return [sentence(g, a, b, min_effect, several) for g in groups]
