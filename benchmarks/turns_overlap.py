"""What the other cells on a shared GPU (GPUS=0,0) were doing while a cell was timed, from the cell logs.

    python benchmarks/turns_overlap.py data/runs/tn-3-s data/runs/tn-3-p5

The runs collected together (the shared run and its interleaved twin). Each cell process logs its
stages on a clock whose epoch its setup line gives (`clock at epoch ...`; older logs lack it and are
left out), and the timing lock's taken and released epochs. Per cell process that was timed: its
timed seconds (the lock held; without a lock, the timing stage) and how many of them the other
processes spent in each stage (benchmarks/cell_time.py's names: the cold compile, the eager warm-up,
...). Then over all of them: the share of the timed time beside each stage. Two timed sections at
once, or another process's GPU turn (its untimed work on the GPU, held shared: collector/child/turns.py)
during a timed section, would mean the turns failed: each is printed, and the exit code is 1.

With `--alone RUN` (the same cells one at a time: tt-1), each timed process's eager and compiled
medians against the alone run's (the median of its processes' medians), and at the end, per side
launch-bound alone or not (the report's rule), the median of those ratios over the processes timed
beside another cell's compile and over those timed beside none: whether the neighbours' compiles are
what moved a side.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cell_time import HEADER, LINE, STAGES  # noqa: E402

EPOCH = re.compile(r"clock at epoch ([0-9.]+)\)")
TAKEN = re.compile(r"timing lock taken after [0-9.]+ s \(at ([0-9.]+)\)")
RELEASED = re.compile(r"timing lock released \(at ([0-9.]+)\)")
TURN = re.compile(r"GPU turn for (.+) after [0-9.]+ s \(at ([0-9.]+)\)")
TURN_END = re.compile(r"GPU turn for (.+) released \(at ([0-9.]+)\)")
TIMED = "timing"
SLACK = 0.05  # s: the log's 0.1 s resolution


def stage_of(text: str) -> str:
    if TAKEN.match(text):
        return "waiting for the timing lock"
    if TURN.match(text):
        return "waiting for a GPU turn"
    return next((name for name, starts in STAGES if text.startswith(starts)), "other")


def processes(log: Path) -> list[dict]:
    """Each process section with a clock epoch: its cell, kind, stages as (start, end, name) epochs, and
    its timed interval (the lock held, else the timing stage), or None."""
    out, cur = [], None
    for line in log.read_text(errors="replace").splitlines():
        if h := HEADER.match(line):
            cur = {"run": log.parent.parent.name, "cell": log.stem, "kind": h.group(1), "events": [], "epoch": None}
            out.append(cur)
        elif cur is not None and (m := LINE.match(line)):
            cur["events"].append((float(m.group(1)), m.group(2)))
            if e := EPOCH.search(m.group(2)):
                cur["epoch"] = float(e.group(1))
    procs = []
    for p in out:
        if p["epoch"] is None:
            continue
        times = [(p["epoch"] + t, text) for t, text in p["events"]]
        p["stages"] = [(a, b, stage_of(text)) for (a, _), (b, text) in zip(times, times[1:])]
        taken = [float(m.group(1)) for _, text in times if (m := TAKEN.match(text))]
        released = [float(m.group(1)) for _, text in times if (m := RELEASED.match(text))]
        timing = [(a, b) for a, b, name in p["stages"] if name == TIMED]
        p["timed"] = (taken[0], released[-1]) if taken and released else timing[0] if timing else None
        starts = [(m.group(1), float(m.group(2))) for _, text in times if (m := TURN.match(text))]
        ends = {m.group(1): float(m.group(2)) for _, text in times if (m := TURN_END.match(text))}
        p["turns"] = [(what, at, ends.get(what, times[-1][0])) for what, at in starts]  # unreleased: to the end
        procs.append(p)
    return procs


def overlap(a: tuple, b: tuple) -> float:
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


def beside(procs: list[dict]) -> tuple[list[dict], list[str]]:
    """Per timed process: {cell, kind, timed_s, stages: {name: seconds beside it}}; and the clashes."""
    rows, clashes = [], []
    for i, p in enumerate(procs):
        if p["timed"] is None:
            continue
        got: dict[str, float] = {}
        for j, q in enumerate(procs):
            if j == i:
                continue
            if q["timed"] is not None and j > i and overlap(p["timed"], q["timed"]) > SLACK:
                clashes.append(f"{p['run']}/{p['cell']} ({p['kind']}) and {q['run']}/{q['cell']} ({q['kind']}) timed at once for "
                               f"{overlap(p['timed'], q['timed']):.2f} s")
            for what, a, b in q["turns"]:
                if overlap(p["timed"], (a, b)) > SLACK:
                    clashes.append(f"{q['run']}/{q['cell']} ({q['kind']}) in its GPU turn for {what} while "
                                   f"{p['run']}/{p['cell']} ({p['kind']}) was timed, for {overlap(p['timed'], (a, b)):.2f} s")
            for a, b, name in q["stages"]:
                if (s := overlap(p["timed"], (a, b))) > 0:
                    got[name] = got.get(name, 0.0) + s
        rows.append({"run": p["run"], "cell": p["cell"], "kind": p["kind"], "timed_s": p["timed"][1] - p["timed"][0],
                     "stages": got})
    return rows, clashes


def process_steps(run: Path) -> dict:
    """(cell, process index) -> {side: median step ms} of a run's ok cells, and cell -> {side: (median over
    processes, launch-bound)}."""
    import statistics

    import pyarrow.parquet as pq

    from analysis.stats.history import launch_bound
    from collector.record.contract import process_medians

    per, cells = {}, {}
    for f in sorted((run / "cells").glob("*.parquet")):
        for r in pq.read_table(f).to_pylist():
            if r["status"] != "ok" or not r.get("compiled_step_ms"):
                continue
            p = int(r["processes"] or 1)
            cells[r["cell_id"]] = {}
            for side in ("eager", "compiled"):
                meds = process_medians(r[f"{side}_step_ms"], p)
                for i, m in enumerate(meds):
                    per.setdefault((r["cell_id"], i), {})[side] = float(m)
                lb = launch_bound(r.get(f"{side}_enqueue_ms"), r.get(f"{side}_step_ms"), r.get("steps_per_block"))
                cells[r["cell_id"]][side] = (statistics.median(meds), lb)
    return per, cells


def against_alone(rows: list[dict], shared: list[Path], alone: Path) -> None:
    """Each timed process's step medians over the alone run's, then the medians by neighbour and regime."""
    import statistics

    _, base = process_steps(alone)
    per = {}
    for run in shared:
        got, _ = process_steps(run)
        per.update({(run.name, cell, i): v for (cell, i), v in got.items()})
    groups: dict[tuple, list[float]] = {}
    print(f"{'run':12} {'cell':50} {'process':11} {'eager':>7} {'compiled':>9}  compile beside (s per s timed)")
    for r in rows:
        idx = 0 if r["kind"] == "cold" else int(r["kind"].split()[-1]) if r["kind"].startswith("replicate") else None
        mine, ref = per.get((r["run"], r["cell"], idx)), base.get(r["cell"])
        if idx is None or not mine or not ref:
            continue
        busy = r["stages"].get("compiled first call (compile)", 0.0) / r["timed_s"]
        x = {side: mine[side] / ref[side][0] for side in ("eager", "compiled")}
        print(f"{r['run'][:12]:12} {r['cell'][:50]:50} {r['kind']:11} {x['eager']:6.2f}x {x['compiled']:8.2f}x  {busy:.1f}")
        for side in x:
            groups.setdefault(("launch-bound" if ref[side][1] else "GPU-bound", busy > 0.05), []).append(x[side])
    for (regime, busy), xs in sorted(groups.items()):
        print(f"# {regime} sides (alone), timed beside {'a compile' if busy else 'no compile'}: "
              f"median {statistics.median(xs):.2f}x of alone over {len(xs)} process sides")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", type=Path, nargs="+", help="run folders collected together (tn-3-s tn-3-p5)")
    ap.add_argument("--alone", type=Path, help="the same cells one at a time (tt-1): each timed process's "
                    "steps against it")
    args = ap.parse_args(argv)
    procs = [p for run in args.runs for log in sorted((run / "logs").glob("*.log")) if log.stem != "launcher"
             for p in processes(log)]
    rows, clashes = beside(procs)
    if not rows:
        print("no timed process with a clock epoch in these logs (runs collected before the epoch was logged?)")
        return 0
    total: dict[str, float] = {}
    print(f"{'run':12} {'cell':50} {'process':11} {'timed s':>8}  beside it (s of other processes' stages)")
    for r in rows:
        top = sorted(r["stages"].items(), key=lambda kv: -kv[1])
        print(f"{r['run'][:12]:12} {r['cell'][:50]:50} {r['kind']:11} {r['timed_s']:8.2f}  "
              + (", ".join(f"{n} {s:.2f}" for n, s in top[:4]) or "nothing"))
        for n, s in r["stages"].items():
            total[n] = total.get(n, 0.0) + s
    timed = sum(r["timed_s"] for r in rows)
    print(f"# {len(rows)} timed processes, {timed:.1f} s timed; beside them: "
          + (", ".join(f"{n} {s / timed:.0%}" for n, s in sorted(total.items(), key=lambda kv: -kv[1])) or "nothing"))
    if args.alone:
        against_alone(rows, args.runs, args.alone)
    for c in clashes:
        print(f"CLASH: {c}")
    return 1 if clashes else 0


if __name__ == "__main__":
    sys.exit(main())
