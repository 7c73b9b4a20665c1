"""How good the collector's "about N left" is, replayed on committed runs (docs/performance.md).

    python benchmarks/eta_accuracy.py

For each run (or group of interleaved runs) measured one cell at a time, the cells are put back in the
order they started (started_at) with the time each took (cell_wall_s); at every cell from the third on,
collector.progress.Progress estimates the time left, once with the queue's plan (each cell from the
finished cells most like it) and once without (the mean of all finished cells). Prints, per run, the
median and the worst relative error of each against the time that was in fact left.
"""
from __future__ import annotations

import io
import statistics
import sys
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from collector.progress import Progress, prior_times  # noqa: E402

GROUPS = {  # runs measured one cell at a time on one GPU; a tuple: interpreters interleaved in one queue
    "t3-h200 (3 interpreters, interleaved)": ("t3-h200-torch2.11.0-cu130", "t3-h200-torch2.12.1-cu130",
                                              "t3-h200-torch2.14.1-cu130"),
    "v-h200 (2 interpreters, interleaved)": ("v-h200-torch2.11.0-cu130", "v-h200-torch2.14.1-cu130"),
    "shapes-h200-p3": ("shapes-h200-p3",),
    "quick-h200": ("quick-h200",),
    "aa-venv (3 interpreters, interleaved)": ("aa-venv-direct", "aa-venv-venv", "aa-venv-venvp5"),
}


def queue_of(runs: tuple[str, ...]) -> list[tuple[tuple, float]]:
    items = []
    for ti, run in enumerate(runs):
        for f in sorted((ROOT / "data" / "examples" / run / "cells").glob("*.parquet")):
            r = pq.read_table(f, columns=["model", "phase", "mode", "started_at", "cell_wall_s"]).to_pylist()[0]
            if r["cell_wall_s"]:
                items.append((r["started_at"], (ti, r["model"], r["phase"], r["mode"]), r["cell_wall_s"]))
    return [(key, secs) for _, key, secs in sorted(items)]


def errors(queue: list[tuple[tuple, float]], with_plan: bool, first: int = 3, prior: dict | None = None) -> list[float]:
    """Relative error of the estimate of the time left at every cell from `first` on."""
    p = Progress(len(queue), out=io.StringIO(), plan=[k for k, _ in queue] if with_plan else None, prior=prior)
    out = []
    for k, (key, secs) in enumerate(queue, 1):
        if k >= first:
            truth = sum(s for _, s in queue[k - 1:])
            out.append(abs(p.estimate_left(k) / truth - 1))
        p.done({"status": "ok"}, secs, k=k)
    return out


def factors(queue, prior: dict | None) -> list[float]:
    """max(estimate / truth, truth / estimate) of the time left from the second cell on (from the
    first where earlier runs give an estimate before any cell finished)."""
    p = Progress(len(queue), out=io.StringIO(), plan=[k for k, _ in queue], prior=prior)
    out = []
    for k, (key, secs) in enumerate(queue, 1):
        est = p.estimate_left(k)
        if est is not None and k >= (1 if prior else 2):
            truth = sum(s for _, s in queue[k - 1:])
            out.append(max(est / truth, truth / est))
        p.done({"status": "ok"}, secs, k=k)
    return out


def earlier(name: str) -> dict:
    """The other groups' cells (the same H200 kind of machine, 3 processes a cell) as earlier runs."""
    rows = [{"model": k[1], "phase": k[2], "mode": k[3], "cell_wall_s": s}
            for other, runs in GROUPS.items() if other != name for k, s in queue_of(runs)]
    return prior_times(rows)


def main() -> int:
    print(f"{'run':<40} {'cells':>5}  {'with the plan: median / worst':>30}  {'mean of all: median / worst':>28}")
    for name, runs in GROUPS.items():
        q = queue_of(runs)
        if len(q) < 4:
            continue
        a, b = errors(q, True), errors(q, False)
        print(f"{name:<40} {len(q):>5}  {statistics.median(a):>17.0%} / {max(a):>6.0%}   "
              f"{statistics.median(b):>15.0%} / {max(b):>6.0%}")
    print()
    print("the estimate against the time in fact left, as a factor (1.5x: off by half either way)")
    print(f"{'run':<40} {'from the 2nd cell: median / worst':>36}  {'with the other runs as earlier ones, from the 1st':>50}")
    for name, runs in GROUPS.items():
        q = queue_of(runs)
        if len(q) < 4:
            continue
        a, b = factors(q, None), factors(q, earlier(name))
        print(f"{name:<40} {statistics.median(a):>24.2f}x / {max(a):.2f}x  {statistics.median(b):>39.2f}x / {max(b):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
