"""Which cells of an A/A miss, and by how much: A's 95% speedup interval against B's estimate.

    python benchmarks/aa_misses.py --data data/examples A_RUN B_RUN [A_RUN B_RUN ...]

For each pair of runs of the same cells (3+ processes a cell), prints every cell whose B speedup
lies outside A's 95% interval (Student's t over A's per-process log speedups, as the report
computes it), with B's shift against A and the interval's half-width, and a count per pair. A
miss of a few hundredths of a percent is a run-level shift that the processes of one run cannot
show (docs/measurement.md, "Third H200 session"); the comparison's minimum effect is what keeps
such shifts from being called.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis import stats  # noqa: E402
from analysis.compare import _samples  # noqa: E402
from analysis.context import prepare  # noqa: E402
from analysis.load import discover_runs, load  # noqa: E402

T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def log_speedups(c: stats.CellSamples) -> np.ndarray:
    return (np.log(stats.process_medians(c.eager_ms, c.processes))
            - np.log(stats.process_medians(c.compiled_ms, c.processes)))


def misses(loaded, a: str, b: str) -> tuple[int, list[tuple[str, float, float]]]:
    """(cells compared, [(cell id, B's shift %, A's half-width %)] for the cells A's interval misses)."""
    sa = {c.key: c for c in _samples(loaded, a)["reps"]}
    sb = {c.key: c for c in _samples(loaded, b)["reps"]}
    n, out = 0, []
    for key, ca in sorted(sa.items()):
        cb = sb.get(key)
        if cb is None or ca.processes < 2 or cb.processes < 2 or ca.processes - 1 not in T975:
            continue
        la, lb = log_speedups(ca), log_speedups(cb)
        if np.allclose(la, 0) and np.allclose(lb, 0):
            continue  # an eager-only cell: no speedup
        n += 1
        half = T975[ca.processes - 1] * la.std(ddof=1) / np.sqrt(len(la))
        shift = lb.mean() - la.mean()
        if abs(shift) > half:
            out.append((key, 100 * np.expm1(shift), 100 * np.expm1(half)))
    return n, out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="data/examples")
    p.add_argument("runs", nargs="+", help="run ids, in pairs: A B [A B ...]")
    args = p.parse_args(argv)
    if len(args.runs) % 2:
        print("give the run ids in pairs: A B [A B ...]", file=sys.stderr)
        return 2
    found = {r.run_id: r for r in discover_runs(Path(args.data))}
    unknown = [r for r in args.runs if r not in found]
    if unknown:
        print(f"unknown run id(s) {', '.join(unknown)}; runs under {args.data}: {', '.join(sorted(found))}",
              file=sys.stderr)
        return 2
    for a, b in zip(args.runs[::2], args.runs[1::2]):
        loaded = load([found[a], found[b]])
        prepare(loaded)
        n, miss = misses(loaded, a, b)
        print(f"{a} vs {b}: A's interval holds B's speedup in {n - len(miss)} of {n} cells")
        for key, shift, half in miss:
            print(f"  miss: {key}: B {shift:+.2f}% against A, A's interval +-{half:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
