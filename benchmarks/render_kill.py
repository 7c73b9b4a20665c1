"""Kill renders at random moments and check that a run's outputs always agree (docs/reliability.md).

    python benchmarks/render_kill.py [--kills 20] [--seed 1]

Copies the test fixture run, renders it once, then repeatedly removes one cell file and starts a render
that is SIGKILLed after a random share (20-120%) of a full render's time. After each kill, report.md,
report.html, summary.md and estimates.json must carry the same status line ("N cells: ..."): one
generation, old or new, never a mix. Prints each kill and a tally; exit 1 on any mix.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "small"
RUN = "fixture-small"
LINE = re.compile(r"\d+ cells: [^·<\n]*?(?= ·|<|\n|$)")


def generation(out: Path) -> dict[str, str]:
    d = out / RUN
    found = {name: LINE.search((d / name).read_text()) for name in ("report.md", "report.html", "summary.md")}
    got = {k: m.group(0) if m else "?" for k, m in found.items()}
    got["estimates.json"] = json.loads((d / "estimates.json").read_text())["status"]
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="render-kill-"))
    try:
        data, out = tmp / "data", tmp / "out"
        shutil.copytree(FIXTURE, data)
        cmd = [sys.executable, "-m", "analysis", "--data", str(data), "--out", str(out), "--reps", "50"]
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
        full = time.perf_counter() - t0
        cells = data / RUN / "cells"
        spare = tmp / "spare"
        spare.mkdir()
        mixed = finished = 0
        for i in range(args.kills):
            files = sorted(cells.glob("*.parquet"))
            if len(files) > 2:  # alternate between removing and restoring a cell: every render changes the count
                shutil.move(files[0], spare / files[0].name)
            else:
                for f in spare.iterdir():
                    shutil.move(f, cells / f.name)
            delay = full * rng.uniform(0.2, 1.2)
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(delay)
            proc.kill()
            finished += proc.wait() == 0
            gen = generation(out)
            ok = len(set(gen.values())) == 1
            mixed += not ok
            print(f"kill {i + 1:2d} after {delay:.2f} s: {'one generation' if ok else 'MIXED'} "
                  f"({gen['estimates.json']})" + (f" {gen}" if not ok else ""))
        print(f"{args.kills} kills (a full render takes {full:.2f} s; {finished} renders finished before their kill): "
              f"{args.kills - mixed} left one generation, {mixed} mixed")
        return 1 if mixed else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
