"""Kill -9 the collector at random moments, then resume: is every cell there exactly once?

    python benchmarks/reliability.py [--points 20] [--seed 0]

Uses a stand-in cell program (tests/fake_python.py, 0.1-0.4 s a cell) so that many kill points
fit in a minute; the collector, its scheduling, locking and file writes are the real ones.
Prints the line that docs/reliability.md quotes.
"""
from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyarrow.parquet as pq  # noqa: E402

from collector import matrix as mx  # noqa: E402

MODELS, MODES = ["mlp", "gnn", "moe", "gpt:layers=1"], ["default", "reduce-overhead"]
MATRIX = ["--preset", "smoke", "--models", ",".join(MODELS), "--modes", ",".join(MODES)]


def fake_python(tmp_path: Path) -> str:
    wrapper = tmp_path / "python"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {ROOT / 'tests' / 'fake_python.py'} \"$@\"\n")
    wrapper.chmod(0o755)
    return str(wrapper)


def kill_and_resume(tmp_path: Path, points: int, seed: int = 0) -> dict:
    """Start the collector, SIGKILL it at a random moment, `points` times; then let it finish.

    Returns counts: cells expected, cells on disk, cells measured more than once, unreadable files.
    """
    rng = random.Random(seed)
    out, ledger = tmp_path / "runs", tmp_path / "ledger.txt"
    env = dict(os.environ, FAKE_CELL_LEDGER=str(ledger), PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "collector", *MATRIX, "--out", str(out), "--run-id", "k",
           "--python", fake_python(tmp_path)]
    for _ in range(points):
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    expected = {c.cell_id for c in mx.build_matrix("smoke", {"models": MODELS, "modes": MODES}).cells}
    files = list((out / "k" / "cells").glob("*.parquet"))
    unreadable = 0
    for f in files:
        try:
            assert pq.read_table(f).num_rows == 1
        except Exception:
            unreadable += 1
    finished = collections.Counter(ledger.read_text().split()) if ledger.exists() else collections.Counter()
    return {"expected": len(expected), "on_disk": len({f.stem for f in files} & expected),
            "extra": len({f.stem for f in files} - expected), "unreadable": unreadable,
            "measured_twice": sum(1 for n in finished.values() if n > 1)}



def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--points", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        got = kill_and_resume(Path(tmp), args.points, args.seed)
    ok = got["on_disk"] == got["expected"] and not got["extra"] and not got["unreadable"]
    print(f"kill -9 at {args.points} random points, then the same command: "
          f"{'resumed' if ok else 'FAILED'}; {got['expected']} cells expected, {got['on_disk']} on disk, "
          f"{got['expected'] - got['on_disk']} lost, {got['extra']} extra, {got['unreadable']} unreadable, "
          f"{got['measured_twice']} measured again (killed after the measurement, before the row was written)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
