"""The comparison's section "How changes are called": what each paired cell's interval rests on,
in sentences (the numbers are analysis/stats/pair_estimates.py's)."""
from __future__ import annotations


def lines(pairs: list[dict], processes: dict, callable_ids: set, a: str, b: str, min_effect: float,
          ests: dict) -> list[str]:
    """Sentences on what each paired cell's interval rests on (the section "How changes are called")."""
    both = [p for p in pairs if p["cell_id"] in callable_ids]
    lines = [f"A change is called when its 95% interval excludes no change and it is at least "
             f"{min_effect * 100:g}% (the minimum effect size); the q column is the Benjamini-Hochberg "
             "adjusted p-value over the family's cells, shown for reference."]
    if both:
        counts = sorted({(processes[0][p["cell_id"]], processes[1][p["cell_id"]]) for p in both})
        lines.append(f"{len(both)} of {len(pairs)} paired cells were timed in several fresh processes in both runs "
                     f"({', '.join(f'{x} and {y}' for x, y in counts)} processes): their intervals come from the "
                     "spread between processes, which holds the noise within each process as well.")
    if len(both) < len(pairs):
        lines.append(f"{len(pairs) - len(both)} paired cell(s) have one process in {a} or {b}: their intervals "
                     "cover the noise within one process only and are too narrow where processes differ, so "
                     "they are shown but never called (measure again with PROCESSES=3).")
    return lines + _siblings(ests)


def _siblings(ests: dict) -> list[str]:
    """A sentence on the cells whose interval carries sibling runs' spread (analysis/stats/history.py)."""
    cells = sorted({cid for by in ests.values() for cid, e in by.items() if "sibling runs" in (e.reason or "")})
    if not cells:
        return []
    return [f"In {len(cells)} cell(s) a run's figure carries the run-to-run spread of its sibling runs (three or "
            "more runs of one torch build on one machine and protocol, no plant, in the data folders) where that "
            "is wider than its processes' own: such a change is called only beyond what those runs moved with "
            "nothing changed (docs/statistics.md, \"Run-to-run spread\"; each interval names its runs)."]
