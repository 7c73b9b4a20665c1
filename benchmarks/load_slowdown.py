"""How much each cell slowed on a crowded host, against the threads it kept busy on a quiet one, and
what the collector's estimate predicts (collector/host/hostload.py `slowdown`; docs/estimate.md).

    python benchmarks/load_slowdown.py QUIET_RUN LOADED_RUN

Two runs of the same cells (run folders with run.json and cells/, schema v12: process_cpu_s), the
first collected on a quiet host, the second on a crowded one (benchmarks/eta_under_load.sh: q1 and l2).
Per cell: the quiet and loaded wall seconds of its processes (process_wall_s summed), the threads it
kept busy quiet (busy_threads), the slowdown measured (loaded over quiet), the exponent it implies at
the loaded session's crowding (run.json's host_crowding), and the slowdown predicted; then the
processes' time summed over the cells, measured and predicted, and LOAD_EXPONENT fitted to the sum.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collector.host.hostload import LOAD_EXPONENT, busy_threads, slowdown  # noqa: E402


def cells(run: Path) -> dict:
    import pyarrow.parquet as pq

    out = {}
    for f in sorted((run / "cells").glob("*.parquet")):
        r = pq.read_table(f).to_pylist()[0]
        if r.get("process_wall_s"):
            out[r["cell_id"]] = r
    return out


def crowding_of(run: Path) -> float:
    sessions = json.loads((run / "run.json").read_text()).get("sessions") or []
    got = [s["host_crowding"] for s in sessions if s.get("host_crowding")]
    return sum(got) / len(got) if got else 1.0


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    quiet, loaded = Path(argv[0]), Path(argv[1])
    q, lo, crowd = cells(quiet), cells(loaded), crowding_of(loaded)
    cpus = json.loads((quiet / "run.json").read_text()).get("environment", {}).get("cpu_count")
    print(f"{loaded.name}: crowding {crowd:.2f} (host_crowding), {cpus} CPUs; LOAD_EXPONENT {LOAD_EXPONENT}")
    print(f"{'cell':<62} {'quiet s':>8} {'busy':>5} {'loaded s':>9} {'slowdown':>8} {'exponent':>8} {'predicted':>9}")
    pairs = []
    for cid in q:
        if cid not in lo:
            continue
        tq, tl, busy = sum(q[cid]["process_wall_s"]), sum(lo[cid]["process_wall_s"]), busy_threads(q[cid])
        share = min(1.0, max(0.0, (busy - 1) / (cpus - 1))) if busy and cpus and cpus > 1 else None
        implied = math.log(tl / tq) / math.log(crowd) / share if share and crowd > 1 else float("nan")
        pred = slowdown(crowd, busy, cpus)
        pairs.append((tq, tl, share))
        print(f"{cid[:62]:<62} {tq:8.1f} {busy or float('nan'):5.2f} {tl:9.1f} {tl / tq:7.2f}x {implied:8.2f} {pred:8.2f}x")
    tq, tl = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
    predicted = sum(p[0] * slowdown(crowd, 1 + p[2] * (cpus - 1) if p[2] is not None else None, cpus) for p in pairs)
    lo_a, hi_a = 0.0, 10.0  # the exponent whose predicted sum equals the measured one (bisection)
    for _ in range(60):
        mid = (lo_a + hi_a) / 2
        got = sum(p[0] * (crowd ** (mid * p[2]) if p[2] is not None else crowd) for p in pairs)
        lo_a, hi_a = (mid, hi_a) if got < tl else (lo_a, mid)
    print(f"all cells: quiet {tq:.0f} s, loaded {tl:.0f} s ({tl / tq:.2f}x), predicted {predicted:.0f} s "
          f"({predicted / tl:.2f} of it); the exponent that fits the sum: {lo_a:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
