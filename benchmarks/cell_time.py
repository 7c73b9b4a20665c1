"""Where a cell's wall time goes, from a run's cell logs and rows.

    python benchmarks/cell_time.py RUN_DIR [RUN_DIR ...]
    python benchmarks/cell_time.py --json RUN_DIR_OR_CELL_LOG [...]   (the same, unrounded, as JSON)
    python benchmarks/cell_time.py --rows RUN_DIR [...]   (from the rows' process_stages_json: no logs needed)

Each cell process logs its stages with a clock that starts when the cell's code starts
(`[cell +  4.1s] sides built in 2.68 s`); the runner records each process's wall time from its
launch to its exit (`process_wall_s`). This prints, per run and process kind (the cold process,
the replicates), the median seconds of each stage over the processes, and the rest of the
process's wall time ("outside the cell's clock": starting the interpreter and importing before
the clock starts, exiting). Stages a log does not name (older logs have no "sides built" line)
count in the next stage that it names, which the table marks with "+". `--rows` reads each process's
stages from its row instead (schema v14, `process_stages_json`, on the process's own clock): a run
committed without its logs; rows older than v14 have none and are counted as such.
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# (stage, the start of the log line that ends it), in the order a process logs them
STAGES = (
    ("imports, model built", "torch imported"),
    ("torch.compile() wrapper (imports Inductor)", "sides built"),
    ("float64 reference", "float64 reference done"),
    ("eager first call and warm-up", "eager first call"),
    ("compiled first call (compile)", "compiled first call"),
    ("compiled warm-up, accuracy check", "compiled warmed up"),
    ("host hygiene, NVML", "NVML opened"),
    ("timing", "timed "),
    ("energy windows", "energy window compiled"),
    ("recompile sweep, teardown in the cell", "finished"),
)
OUTSIDE = "outside the cell's clock (start, imports before it, exit)"
COLD_ONLY = ("float64 reference done", "energy window compiled")  # a replicate has no such stage
LINE = re.compile(r"^\[cell \+\s*([\d.]+)s\] (.*)$")
HEADER = re.compile(r"^=== \S+ (cold|replicate \d+|warm|portable)( \(forked\))? ===$")


def parse_log(text: str) -> list[dict]:
    """One entry per process section of a cell log: kind, forked, and {stage: seconds}."""
    procs, cur = [], None
    for line in text.splitlines():
        h = HEADER.match(line)
        if h:
            cur = {"kind": h.group(1).split()[0], "forked": bool(h.group(2)), "events": []}
            procs.append(cur)
            continue
        m = LINE.match(line)
        if m and cur is not None:
            cur["events"].append((float(m.group(1)), m.group(2)))
    for p in procs:
        stages, last, merged = {}, 0.0, False
        for name, starts in STAGES:
            hit = next((t for t, text in p["events"] if text.startswith(starts)), None)
            if hit is None:
                merged = merged or p["kind"] == "cold" or starts not in COLD_ONLY
                continue
            stages[name + (" +" if merged else "")] = hit - last
            last, merged = hit, False
        p["stages"], p["logged_s"] = stages, (p["events"][-1][0] if p["events"] else 0.0)
    return procs


def run_table(run_dir: Path) -> dict:
    """{kind: {stage: [seconds per process]}} over the run's ok cells, with the outside time."""
    import json

    import pyarrow.parquet as pq

    walls = {}
    for f in sorted((run_dir / "cells").glob("*.parquet")):
        t = pq.read_table(f, columns=["cell_id", "status", "process_wall_s"]).to_pylist()[0]
        if t["status"] == "ok" and t["process_wall_s"]:
            w = t["process_wall_s"]
            walls[t["cell_id"]] = json.loads(w) if isinstance(w, str) else list(w)
    out: dict[str, dict[str, list[float]]] = {}
    for cell, w in walls.items():
        log = run_dir / "logs" / f"{cell}.log"
        if not log.exists():
            continue
        procs = [p for p in parse_log(log.read_text(errors="replace")) if p["kind"] in ("cold", "replicate")]
        procs = procs[-len(w):]  # a resumed cell logs earlier attempts first
        for p, wall in zip(procs, w):
            kind = p["kind"] + (" (forked)" if p["forked"] else "")
            d = out.setdefault(kind, {})
            for name, s in p["stages"].items():
                d.setdefault(name, []).append(s)
            d.setdefault(OUTSIDE, []).append(max(0.0, wall - p["logged_s"]))
            d.setdefault("process wall", []).append(wall)
    return out


def rows_table(run_dir: Path) -> tuple[dict, int]:
    """({kind: {stage: [seconds per process]}}, rows without stages) over the run's ok cells, from each
    row's process_stages_json (the run report's split, analysis.run_report.run_tables.process_splits): the
    first process is the cold one, the next `processes - 1` replicates (a warm or portable-cache process
    after them is left out); the outside time is the process's wall less its stages."""
    import pyarrow.parquet as pq

    from analysis.run_report.run_tables import process_splits

    out: dict[str, dict[str, list[float]]] = {}
    missing = 0
    cols = ["status", "processes", "process_wall_s", "process_stages_json"]
    for f in sorted((run_dir / "cells").glob("*.parquet")):
        names = set(pq.read_schema(f).names)
        t = pq.read_table(f, columns=[c for c in cols if c in names]).to_pylist()[0]
        if t["status"] != "ok":
            continue
        splits = process_splits(t)
        if not splits:
            missing += 1
            continue
        for i, st, wall in splits:
            if i >= (t.get("processes") or 1):
                continue
            d = out.setdefault("cold" if i == 0 else "replicate", {})
            for name, secs in st.items():
                d.setdefault(name, []).append(secs)
            d.setdefault("process wall", []).append(wall)
    return out, missing


def _print_rows(run: Path) -> int:
    if not (run / "cells").is_dir():
        print(f"{run}: not a run directory with cells/", file=sys.stderr)
        return 2
    table, missing = rows_table(run)
    print(f"\n{run.name}: {missing} ok row(s) without a stage split (process_stages_json: before schema v14, or no process said)" if missing else "",
          end="")
    for kind, stages in sorted(table.items()):
        walls = stages["process wall"]
        print(f"\n{run.name}: {kind} processes ({len(walls)}), median seconds (share of their summed wall)")
        for name, secs in sorted(stages.items(), key=lambda kv: kv[0] == "process wall"):
            print(f"  {name:58s} {statistics.median(secs):6.2f}  {sum(secs) / sum(walls):5.1%}")
    print()
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--json", action="store_true", help="print {path: table} (a run) or {path: processes} "
                   "(one cell log: each process's kind, forked, stages, logged seconds) as JSON")
    p.add_argument("--rows", action="store_true", help="each process's stages from its row (process_stages_json)")
    args = p.parse_args(argv)
    if args.rows:
        return max((_print_rows(run) for run in args.runs), default=0)
    if args.json:
        import json

        out = {}
        for path in args.runs:
            if path.is_file():
                out[str(path)] = [{k: v for k, v in proc.items() if k != "events"}
                                  for proc in parse_log(path.read_text(errors="replace"))]
            elif (path / "cells").is_dir() and (path / "logs").is_dir():
                out[str(path)] = run_table(path)
            else:
                print(f"{path}: neither a cell log nor a run directory with cells/ and logs/", file=sys.stderr)
                return 2
        print(json.dumps(out, indent=1))
        return 0
    for run in args.runs:
        if not (run / "cells").is_dir() or not (run / "logs").is_dir():
            print(f"{run}: not a run directory with cells/ and logs/", file=sys.stderr)
            return 2
        table = run_table(run)
        for kind, stages in sorted(table.items()):
            n = len(stages["process wall"])
            print(f"\n{run.name}: {kind} processes ({n}), median seconds")
            order = [s for s, _ in STAGES]
            for name in sorted(stages, key=lambda s: (order.index(s.rstrip(" +")) if s.rstrip(" +") in order
                                                      else len(order) + (s == "process wall"))):
                print(f"  {name:58s} {statistics.median(stages[name]):6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
