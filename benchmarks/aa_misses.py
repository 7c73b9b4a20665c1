"""Which cells of an A/A miss, and by how much: A's 95% speedup interval against B's estimate.

    python benchmarks/aa_misses.py --data data/examples A_RUN B_RUN [A_RUN B_RUN ...]

For each pair of runs of the same cells (3+ processes a cell), prints every cell whose B speedup
lies outside A's 95% interval, both as the reports show them (A's interval from A's own report,
`analysis.compare_report.compare.run_intervals`; the same count as the comparison report's "holds ... in N of M"
line), with B's shift against A and the interval's half-width, and a count per pair. A miss of a
few hundredths of a percent is a run-level shift that the processes of one run cannot show
(docs/validation.md, "A/A: what a comparison calls when nothing changed"); the comparison's minimum effect is what keeps such
shifts from being called.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.commands.calibration import misses  # noqa: E402
from analysis.run_report.context import prepare  # noqa: E402
from analysis.data.load import discover_runs, load  # noqa: E402

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
