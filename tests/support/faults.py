"""The fault-injection harness: a stand-in interpreter (tests/support/fake_python.py) that answers the
environment probe and finishes cells in 0.1-0.4 s, and loops that kill -9 or signal the real
collector at random moments and resume it, counting what was lost, duplicated or corrupted.
Used by benchmarks/reliability.py (the figures docs/reliability.md quotes) and by the fault tests.
The hyperfine idea of a mock executor: the collector's scheduling, locking and writes are real;
only the cell program is a stand-in.
"""
from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from collector.plan import matrix as mx

ROOT = Path(__file__).resolve().parents[2]
FAKE_PYTHON = Path(__file__).resolve().parent / "fake_python.py"

MODELS, MODES = ["mlp", "gnn", "moe", "gpt:layers=1"], ["default", "reduce-overhead"]
MATRIX = ["--preset", "smoke", "--models", ",".join(MODELS), "--modes", ",".join(MODES)]


def fake_python(tmp_path: Path) -> str:
    wrapper = tmp_path / "python"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_PYTHON} \"$@\"\n")
    wrapper.chmod(0o755)
    return str(wrapper)


def kill_and_resume(tmp_path: Path, points: int, seed: int = 0) -> dict:
    """Start the collector, SIGKILL it at a random moment, `points` times; then let it finish.

    Returns counts: cells expected, cells on disk, cells measured more than once, unreadable files,
    and what was left in the collectors' own temporary folder (TMPDIR) after the last one finished.
    """
    rng = random.Random(seed)
    out, ledger, tmp = tmp_path / "runs", tmp_path / "ledger.txt", tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    env = dict(os.environ, FAKE_CELL_LEDGER=str(ledger), PYTHONPATH=str(ROOT), TMPDIR=str(tmp))
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
            "measured_twice": sum(1 for n in finished.values() if n > 1),
            # Inductor's precompiled headers are shared on purpose (collector/host/scratch.py); anything else is a leftover
            "left_in_tmp": sorted(p.name for p in tmp.iterdir() if not p.name.startswith("torchinductor_"))}


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
