"""The collector's live "about N left" against the time that was in fact left (docs/estimate.md).

    python benchmarks/eta_live.py [RUN ... | FILE.log ...]

Reads `data/examples/<run>/collect.log`: the stdout of the `make collect` that measured the run,
each line prefixed with the epoch seconds it was printed at (`... | while IFS= read -r l; do printf
'%s %s\\n' "$(date +%s.%N)" "$l"; done`). For every progress line with an estimate ("[k/n] ...
about 1m07s left") prints the estimate divided by the time from that line to the command's end
(its "cell(s) measured in" line): 1.00 is exact, 0.50 half the time that was left.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = ("eta6-h200", "eta7-h200", "eta8-h200", "eta-p5-h200", "eta-cold-h200", "cold2-h200")
LINE = re.compile(r"\[(\d+)/\d+\].*about (?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)? left")


def ratios(log: Path) -> list[tuple[int, float]]:
    """(queue position, estimate / time left) for each progress line of the log."""
    lines = [line.split(" ", 1) for line in log.read_text().splitlines() if " " in line]
    end = max(float(t) for t, text in lines if "cell(s) measured in" in text)
    out = []
    for t, text in lines:
        m = LINE.search(text)
        if m:
            h, mi, s = (int(x or 0) for x in m.groups()[1:])
            out.append((int(m.group(1)), (3600 * h + 60 * mi + s) / (end - float(t))))
    return out


def main(argv: list[str]) -> int:
    for run in argv or RUNS:  # a run id of data/examples, or a log file's path (benchmarks/eta_under_load.sh)
        got = ratios(Path(run) if run.endswith(".log") else ROOT / "data" / "examples" / run / "collect.log")
        later = [r for k, r in got if k >= 2]
        print(f"{run:<16} " + " ".join(f"{k}:{r:.2f}" for k, r in got)
              + f"   from the 2nd cell: {min(later):.2f}-{max(later):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
