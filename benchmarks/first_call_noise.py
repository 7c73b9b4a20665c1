"""How much a cell's first-call (compile) time moves between two runs when nothing changed.

    python benchmarks/first_call_noise.py [--data data/examples]

Reads the committed A/A run pairs (the same cells measured twice: same machine, other machine,
other launcher, other interpreter) and prints, for the cold and the warm-cache first call of the
compiled side, the 95% quantile and the largest |ln(B/A)| over every paired ok cell, and the largest
|mean ln(B/A)| over the pairs (the shift a whole run shares). These are the A/A noise figures
behind the comparison's first-call intervals (analysis/stats/estimates.py: FIRST_CALL_NOISE,
FIRST_CALL_RUN_NOISE; docs/comparison.md). Also prints the compiled peak-memory figures.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.run_report.context import prepare  # noqa: E402
from analysis.data.load import discover_runs, load, sql  # noqa: E402

# (A, B): the same cells measured twice (docs/measurement.md lists each experiment)
AA_PAIRS = [("aa-x2-y", "aa-x2-w"), ("aa-x2-y", "aa-x2-z"), ("aa-x2-x", "aa-x2-y"), ("aa-h200-a", "aa-h200-c"),
            ("aa-venv-direct", "aa-venv-venv"), ("repeat-h200-a", "repeat-h200-b"),
            ("launch-cpu-exec", "launch-cpu-fork"), ("repeat-cpu-a", "repeat-cpu-b"),
            ("cr-cpu-a", "cr-cpu-b"), ("cp-cpu-a", "cp-cpu-b"), ("cp-a", "cp-b"), ("cp5-a", "cp5-b")]


def noise(data: Path) -> dict[str, tuple[float, float, int]]:
    """quantity -> (95% quantile of per-cell |ln B/A|, largest per-cell |ln B/A|, largest |mean ln B/A|
    of a pair, cells)."""
    names = {x for pair in AA_PAIRS for x in pair}
    runs = [r for r in discover_runs(data) if r.run_id in names]
    loaded = load(runs)
    prepare(loaded)
    per: dict[str, list[float]] = {"cold": [], "warm": [], "memory": []}
    shifts: dict[str, list[float]] = {k: [] for k in per}
    for a, b in AA_PAIRS:
        rows = loaded.con.execute(sql("compare_pairs"), {"baseline": a, "candidate": b}).df()
        rows = rows[(rows.status_a == "ok") & (rows.status_b == "ok") & (rows["mode"] != "eager")]
        for q, (ca, cb) in {"cold": ("cold_a", "cold_b"), "warm": ("warm_a", "warm_b"),
                            "memory": ("mem_a", "mem_b")}.items():
            r = np.log(rows[cb].astype(float) / rows[ca].astype(float)).dropna()
            per[q] += r.tolist()
            if len(r):
                shifts[q].append(float(r.mean()))
    return {q: (float(np.quantile(np.abs(v), 0.95)) if v else float("nan"),
                float(np.max(np.abs(v))) if v else float("nan"),
                float(np.max(np.abs(shifts[q]))) if shifts[q] else float("nan"), len(v)) for q, v in per.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=Path("data/examples"))
    args = p.parse_args(argv)
    for q, (q95, top, run, n) in noise(args.data).items():
        print(f"{q:6s} per cell over {n} cell pairs: 95% of |ln B/A| <= {q95:.2f}, largest {top:.2f} "
              f"(x/{np.exp(top):.2f}); largest run-wide shift |mean ln B/A| {run:.2f} over {len(AA_PAIRS)} run pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
