"""How much each cell slowed on a crowded host, against the threads it kept busy on a quiet one, and
what the collector's estimate predicts (collector/host/hostload.py `slowdown`; docs/estimate.md).

    python benchmarks/load_slowdown.py QUIET_RUN:LOADED_RUN [QUIET_RUN:LOADED_RUN ...]

Pairs of runs of the same cells (run folders with run.json and cells/), the first of each collected on
a quiet host, the second on a crowded one (benchmarks/eta_under_load.sh: q1 and l2). The threads a cell
kept busy come from the quiet run's process_cpu_s (schema v12), else from the first quiet run given that
has them. Per cell: the quiet and loaded seconds of its processes (process_wall_s summed), the threads
busy, the slowdown measured (loaded over quiet), the exponent of the crowding it implies (at the loaded
session's host_crowding in run.json) and the slowdown predicted; then LOAD_FLOOR and LOAD_EXPONENT
fitted by least squares over every pair's cells (log slowdown = (floor + exponent x share) x log
crowding), and the processes' time summed per pair, measured and predicted. Then each pair replayed
through the collector's estimate (collector/host/progress.py): the quiet run's cells as the only earlier
run, the loaded run's cells finishing one by one at its crowding; per queue position the estimate over
the loaded cells' time then left, with the threads busy known and without them (each cell slowed by
the crowding alone).
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collector.host.hostload import LOAD_EXPONENT, LOAD_FLOOR, busy_threads, slowdown  # noqa: E402


def cells(run: Path) -> dict:
    """{(model, phase, mode): row} of the run's cells with process wall times."""
    import pyarrow.parquet as pq

    out = {}
    for f in sorted((run / "cells").glob("*.parquet")):
        r = pq.read_table(f).to_pylist()[0]
        if r.get("process_wall_s"):
            out[(r["model"], r["phase"], r["mode"])] = r
    return out


def crowding_of(run: Path) -> float:
    sessions = json.loads((run / "run.json").read_text()).get("sessions") or []
    got = [s["host_crowding"] for s in sessions if s.get("host_crowding")]
    return sum(got) / len(got) if got else 1.0


def main(argv: list[str]) -> int:
    import numpy as np

    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    pairs = [tuple(Path(x) for x in a.split(":", 1)) for a in argv if ":" in a]
    if len(pairs) != len(argv):
        print(f"expected QUIET_RUN:LOADED_RUN pairs, got {[a for a in argv if ':' not in a]}", file=sys.stderr)
        return 2
    missing = [str(p) for pair in pairs for p in pair if not (p / "run.json").is_file()]
    if missing:
        print(f"not a run folder (no run.json): {', '.join(missing)}", file=sys.stderr)
        return 2
    busy_of: dict = {}
    for quiet, _ in pairs:
        for key, r in cells(quiet).items():
            if busy_threads(r) is not None:
                busy_of.setdefault(key, busy_threads(r))
    points = []
    for arg, (quiet, loaded) in zip(argv, pairs):
        q, lo, crowd = cells(quiet), cells(loaded), crowding_of(loaded)
        cpus = json.loads((quiet / "run.json").read_text()).get("environment", {}).get("cpu_count") or 2
        print(f"\n{arg}: crowding {crowd:.2f} (host_crowding), {cpus} CPUs")
        print(f"{'cell':<48} {'quiet s':>8} {'busy':>5} {'loaded s':>9} {'slowdown':>8} {'exponent':>8} {'predicted':>9}")
        for key in q:
            if key not in lo or key not in busy_of:
                continue
            tq, tl, busy = sum(q[key]["process_wall_s"]), sum(lo[key]["process_wall_s"]), busy_of[key]
            share = min(1.0, max(0.0, (busy - 1) / (cpus - 1)))
            points.append((math.log(crowd), share, math.log(tl / tq), tq, tl, crowd, busy, cpus, arg))
            implied = math.log(tl / tq) / math.log(crowd) if crowd > 1 else float("nan")
            name = f"{key[0][:16]} {key[1]} {key[2]}"
            print(f"{name:<48} {tq:8.1f} {busy:5.2f} {tl:9.1f} {tl / tq:7.2f}x {implied:8.2f} "
                  f"{slowdown(crowd, busy, cpus):8.2f}x")
    pts = [p for p in points if p[0] > 0]
    if not pts:
        print("no crowded run among the pairs")
        return 1
    x = np.array([[p[0], p[1] * p[0]] for p in pts])
    floor, exponent = np.linalg.lstsq(x, np.array([p[2] for p in pts]), rcond=None)[0]
    print(f"\nleast squares over {len(pts)} cells: floor {floor:.2f}, exponent {exponent:.2f} "
          f"(the collector's: {LOAD_FLOOR}, {LOAD_EXPONENT})")
    for name in dict.fromkeys(p[8] for p in points):
        mine = [p for p in points if p[8] == name]
        tq, tl = sum(p[3] for p in mine), sum(p[4] for p in mine)
        pred = sum(p[3] * slowdown(p[5], p[6], p[7]) for p in mine)
        print(f"{name}: quiet {tq:.0f} s, loaded {tl:.0f} s ({tl / tq:.2f}x), predicted {pred:.0f} s ({pred / tl:.2f} of it)")
    for arg, (quiet, loaded) in zip(argv, pairs):
        for known in (True, False):
            got = replay(cells(quiet), cells(loaded), busy_of, crowding_of(loaded), known)
            worst = max(max(x, 1 / x) for x in got[1:])
            print(f"replayed {arg} {'with' if known else 'without'} the threads busy: "
                  + " ".join(f"{x:.2f}" for x in got) + f"; worst from the 2nd cell {worst:.2f}")
    return 0


def replay(quiet: dict, loaded: dict, busy_of: dict, crowd: float, known: bool) -> list[float]:
    """Estimate / time left at each queue position of `loaded` (its cells' cell_wall_s, in the quiet
    run's order of start), with `quiet` the only earlier run (threads busy from busy_of where `known`)."""
    import io

    from collector.host.progress import Progress, prior_times

    order = [k for k, _ in sorted(quiet.items(), key=lambda kv: kv[1].get("started_at") or "") if k in loaded]
    prior = prior_times([{"model": k[0], "phase": k[1], "mode": k[2], "cell_wall_s": quiet[k]["cell_wall_s"],
                          "run": "quiet", **({"process_cpu_s": [busy_of[k]], "process_wall_s": [1.0]}
                                             if known and k in busy_of else {})} for k in order])
    p = Progress(len(order), out=io.StringIO(), plan=[(0,) + k for k in order], prior=prior,
                 load=lambda: crowd, cpus=2)
    got = []
    for i, k in enumerate(order, 1):
        got.append(p.estimate_left(i) / sum(loaded[x]["cell_wall_s"] for x in order[i - 1:]))
        p.done({"status": "ok"}, loaded[k]["cell_wall_s"], k=i)
    return got


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
