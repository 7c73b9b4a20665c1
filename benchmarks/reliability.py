"""Kill -9 the collector at random moments, then resume: is every cell there exactly once?
And stop it with SIGTERM or SIGINT at random moments: does every stop exit 130 with the resume
message, losing, duplicating and corrupting nothing?

    python benchmarks/reliability.py [--points 20] [--signals 120] [--seed 0]

Uses a stand-in cell program (tests/support/fake_python.py through tests/support/faults.py, 0.1-0.4 s a cell) so that many kill points
fit in a minute; the collector, its scheduling, locking and file writes are the real ones.
Prints the line that docs/reliability.md quotes.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.faults import kill_and_resume, signal_and_resume  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--points", type=int, default=20)
    p.add_argument("--signals", type=int, default=120)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        sig = signal_and_resume(Path(tmp), args.signals, args.seed)
    sig_ok = (sig["on_disk"] == sig["expected"] and not sig["extra"] and not sig["unreadable"]
              and not sig["bad_stops"] and not sig["temporaries"] and not sig["unfinished_sessions"])
    print(f"SIGTERM/SIGINT at {args.signals} random points ({time.perf_counter() - t0:.0f} s): "
          f"{args.signals - len(sig['bad_stops']) - sig['finished_early']} exited 130 with the resume message, "
          f"{len(sig['bad_stops'])} did not, {sig['finished_early']} came after the run had finished; "
          f"{sig['expected']} cells expected, {sig['expected'] - sig['on_disk']} lost, {sig['extra']} extra, "
          f"{sig['unreadable']} unreadable, {len(sig['temporaries'])} temporary files left, "
          f"{sig['unfinished_sessions']} sessions without finished_at")
    for code, tail in sig["bad_stops"][:3]:
        print(f"  exit {code}: ...{tail}")
    with tempfile.TemporaryDirectory() as tmp:
        got = kill_and_resume(Path(tmp), args.points, args.seed)
    ok = got["on_disk"] == got["expected"] and not got["extra"] and not got["unreadable"] and not got["left_in_tmp"]
    print(f"kill -9 at {args.points} random points, then the same command: "
          f"{'resumed' if ok else 'FAILED'}; {got['expected']} cells expected, {got['on_disk']} on disk, "
          f"{got['expected'] - got['on_disk']} lost, {got['extra']} extra, {got['unreadable']} unreadable, "
          f"{got['measured_twice']} measured again (killed after the measurement, before the row was written), "
          f"{len(got['left_in_tmp'])} entries left in TMPDIR {got['left_in_tmp'][:5]}")
    sys.exit(0 if ok and sig_ok else 1)


if __name__ == "__main__":
    main()
