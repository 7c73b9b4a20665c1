"""Kill -9 the collector at random moments, then resume: is every cell there exactly once?
And stop it with SIGTERM or SIGINT at random moments: does every stop exit 130 with the resume
message, losing, duplicating and corrupting nothing?

    python benchmarks/reliability.py [--points 20] [--signals 120] [--seed 0]

Uses a stand-in cell program (tests/fake_python.py, 0.1-0.4 s a cell) so that many kill points
fit in a minute; the collector, its scheduling, locking and file writes are the real ones.
Prints the line that docs/reliability.md quotes.
"""
from __future__ import annotations

import argparse
import collections
import json
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


def signal_and_resume(tmp_path: Path, points: int, seed: int = 0) -> dict:
    """Start the collector and send SIGTERM or SIGINT (alternately) at a random moment, `points`
    times (after a stop the next start resumes); then let it finish. Returns the counts of
    kill_and_resume plus the stops that did not exit 130 with the resume message."""
    rng = random.Random(seed)
    out, ledger = tmp_path / "runs", tmp_path / "ledger.txt"
    env = dict(os.environ, FAKE_CELL_LEDGER=str(ledger), PYTHONPATH=str(ROOT), FAKE_CELL_SECONDS="0.05")
    cmd = [sys.executable, "-m", "collector", *MATRIX, "--batch-sizes", "8,16,32", "--out", str(out),
           "--run-id", "s", "--python", fake_python(tmp_path)]
    bad, finished_early = [], 0
    for i in range(points):
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(rng.uniform(0.3, 2.0))
        proc.send_signal(signal.SIGTERM if i % 2 else signal.SIGINT)
        text, _ = proc.communicate(timeout=120)
        if proc.returncode == 0 and "done:" in text:
            finished_early += 1  # the run was complete before the signal: start again from scratch
            subprocess.run(["rm", "-rf", str(out / "s")], check=True)
        elif proc.returncode != 130 or "run the same command again to resume" not in text \
                or "Traceback" in text:
            bad.append((proc.returncode, text[-400:]))
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    expected = {c.cell_id for c in mx.build_matrix("smoke", {"models": MODELS, "modes": MODES,
                                                              "batch_sizes": [8, 16, 32]}).cells}
    files = list((out / "s" / "cells").glob("*.parquet"))
    unreadable = sum(1 for f in files if _unreadable(f))
    leftovers = [p.name for p in (out / "s").rglob(".*.tmp")]
    manifest = json.loads((out / "s" / "run.json").read_text())
    unfinished = sum(1 for x in manifest["sessions"] if not x.get("finished_at"))
    return {"expected": len(expected), "on_disk": len({f.stem for f in files} & expected),
            "extra": len({f.stem for f in files} - expected), "unreadable": unreadable, "bad_stops": bad,
            "finished_early": finished_early, "temporaries": leftovers, "unfinished_sessions": unfinished}


def _unreadable(f: Path) -> bool:
    try:
        return pq.read_table(f).num_rows != 1
    except Exception:
        return True


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
    ok = got["on_disk"] == got["expected"] and not got["extra"] and not got["unreadable"]
    print(f"kill -9 at {args.points} random points, then the same command: "
          f"{'resumed' if ok else 'FAILED'}; {got['expected']} cells expected, {got['on_disk']} on disk, "
          f"{got['expected'] - got['on_disk']} lost, {got['extra']} extra, {got['unreadable']} unreadable, "
          f"{got['measured_twice']} measured again (killed after the measurement, before the row was written)")
    sys.exit(0 if ok and sig_ok else 1)


if __name__ == "__main__":
    main()
