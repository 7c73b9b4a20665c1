"""How good the collector's "about N left" is, replayed on committed runs (docs/estimate.md).

    python benchmarks/eta_accuracy.py

For each run (or group of interleaved runs) measured one cell at a time, the cells are put back in the
order they started (started_at) with the time each took (cell_wall_s; an interpreter's first cell of
each command includes its fork parent's start, run.json's parent_import_s, which the collector's
estimate sets apart as it does live); at every cell from the third on,
collector.host.progress.Progress estimates the time left, once with the queue's plan (each cell from the
finished cells most like it) and once without (the mean of all finished cells). Prints, per run, the
median and the worst relative error of each against the time that was in fact left.
"""
from __future__ import annotations

import io
import json
import statistics
import sys
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from collector.host.earlier import follow_newest  # noqa: E402
from collector.host.progress import Progress, as_cold, prior_times  # noqa: E402

GROUPS = {  # runs measured one cell at a time on one GPU; a tuple: interpreters interleaved in one queue
    "t3-h200 (3 interpreters, interleaved)": ("t3-h200-torch2.11.0-cu130", "t3-h200-torch2.12.1-cu130",
                                              "t3-h200-torch2.14.1-cu130"),
    "v-h200 (2 interpreters, interleaved)": ("v-h200-torch2.11.0-cu130", "v-h200-torch2.14.1-cu130"),
    "shapes-h200-p3": ("shapes-h200-p3",),
    "quick-h200": ("quick-h200",),
    "aa-venv (3 interpreters, interleaved)": ("aa-venv-direct", "aa-venv-venv", "aa-venv-venvp5"),
    "ho-h200 (3 interpreters, interleaved)": ("ho-h200-a", "ho-h200-b", "ho-h200-p5"),
    "eta3-h200 (quick)": ("eta3-h200",),
    "eta4-h200 (quick)": ("eta4-h200",),
    "eta5-h200 (quick)": ("eta5-h200",),
    "eta6-h200 (quick)": ("eta6-h200",),
    "eta7-h200 (quick)": ("eta7-h200",),
    "eta8-h200 (quick)": ("eta8-h200",),
    "eta-p5-h200 (quick, PLANT_SLOWDOWN=5)": ("eta-p5-h200",),
    "eta-cold-h200 (quick, COLD_REPLICATES=1)": ("eta-cold-h200",),
}


def parent_starts(run: str) -> list[tuple[str, str, float]]:
    """Per command that collected the run: (started_at, finished_at, its fork parent's import seconds)."""
    import json

    out = []
    for s in json.loads((ROOT / "data" / "examples" / run / "run.json").read_text()).get("sessions") or []:
        secs = [x.get("parent_import_s") for x in s.get("launchers") or [] if x.get("parent_import_s")]
        if secs and s.get("started_at"):
            out.append((s["started_at"], s.get("finished_at") or "~", float(secs[0])))
    return out


def queue_of(runs: tuple[str, ...]) -> list[tuple[tuple, float]]:
    return [(key, secs) for key, secs, _ in queue_with_starts(runs)]


def queue_with_starts(runs: tuple[str, ...]) -> list[tuple[tuple, float, float | None]]:
    """(plan key, cell seconds, the one-off parent start inside them or None) in the order cells started."""
    items = []
    for ti, run in enumerate(runs):
        for f in sorted((ROOT / "data" / "examples" / run / "cells").glob("*.parquet")):
            r = pq.read_table(f, columns=["model", "phase", "mode", "started_at", "cell_wall_s"]).to_pylist()[0]
            if r["cell_wall_s"]:
                items.append((r["started_at"], ti, (ti, r["model"], r["phase"], r["mode"]), r["cell_wall_s"]))
    items.sort()
    out = []
    for ti, run in enumerate(runs):  # the first cell of each command an interpreter ran paid its parent's start
        for start, end, secs in parent_starts(run):
            first = next((i for i, it in enumerate(items) if it[1] == ti and start <= it[0] <= end), None)
            if first is not None:
                items[first] = items[first] + (secs,)
    return [(key, secs, x[0] if x else None) for _, _, key, secs, *x in items]


def errors(queue: list[tuple[tuple, float]], with_plan: bool, first: int = 3, prior: dict | None = None,
           starts: list | None = None) -> list[float]:
    """Relative error of the estimate of the time left at every cell from `first` on."""
    p = Progress(len(queue), out=io.StringIO(), plan=[k for k, _ in queue] if with_plan else None, prior=prior,
                 load=lambda: None)
    out = []
    for k, (key, secs) in enumerate(queue, 1):
        if k >= first:
            truth = sum(s for _, s in queue[k - 1:])
            out.append(abs(p.estimate_left(k) / truth - 1))
        p.done({"status": "ok"}, secs, k=k, startup=starts[k - 1] if starts else None)
    return out


def commands(runs: tuple[str, ...]) -> list[list]:
    """The group's queue cut where a command ended and the next resumed (run.json's sessions of the
    first run): each command printed its own estimates, over the cells it ran."""
    full, cuts = queue_with_starts(runs), parent_starts(runs[0])
    if len(cuts) < 2:
        return [full]
    starts = {}
    for ti, run in enumerate(runs):
        for f in (ROOT / "data" / "examples" / run / "cells").glob("*.parquet"):
            r = pq.read_table(f, columns=["model", "phase", "mode", "started_at", "cell_wall_s"]).to_pylist()[0]
            if r["cell_wall_s"]:
                starts.setdefault((ti, r["model"], r["phase"], r["mode"]), []).append(r["started_at"])
    out: list[list] = [[] for _ in cuts]
    seen: dict = {}
    for item in full:  # the n-th cell of a key started at that key's n-th start time, in order
        at = sorted(starts[item[0]])[seen.setdefault(item[0], 0)]
        seen[item[0]] += 1
        i = max([j for j, (s, _, _) in enumerate(cuts) if s <= at] or [0])
        out[i].append(item)
    return [q for q in out if len(q) >= 2]


def factors(queue, prior: dict | None, starts: list | None = None) -> list[float]:
    """max(estimate / truth, truth / estimate) of the time left from the second cell on (from the
    first where earlier runs give an estimate before any cell finished); `starts`: per queue position
    the parent's one-off start inside that cell (None: none set apart, as the collector did before)."""
    p = Progress(len(queue), out=io.StringIO(), plan=[k for k, _ in queue], prior=prior, load=lambda: None)
    out = []
    for k, (key, secs) in enumerate(queue, 1):
        est = p.estimate_left(k)
        if est is not None and k >= (1 if prior else 2):
            truth = sum(s for _, s in queue[k - 1:])
            out.append(max(est / truth, truth / est))
        p.done({"status": "ok"}, secs, k=k, startup=starts[k - 1] if starts else None)
    return out


def launcher_of(run: str) -> str:
    """The launcher of the run's last command (none recorded: before the fork launcher, as exec)."""
    import json

    sessions = json.loads((ROOT / "data" / "examples" / run / "run.json").read_text()).get("sessions") or [{}]
    return next((x["launcher"] for x in sessions[-1].get("launchers") or [] if x.get("launcher")), "exec")


def cold(run: str) -> bool:
    import json

    return bool(json.loads((ROOT / "data" / "examples" / run / "run.json").read_text())["protocol"].get("cold_replicates"))


def first_calls(runs: tuple[str, ...]) -> dict:
    """(interpreter, model, phase, mode) -> the cell's cold and warm first compiled call, seconds."""
    out = {}
    for ti, run in enumerate(runs):
        for f in (ROOT / "data" / "examples" / run / "cells").glob("*.parquet"):
            r = pq.read_table(f).to_pylist()[0]
            out[(ti, r["model"], r["phase"], r["mode"])] = (r.get("first_call_compiled_s"), r.get("warm_first_call_compiled_s"))
    return out


def earlier(name: str) -> dict:
    """The other groups' cells (the same H200 kind of machine, 3 processes a cell, the same launcher:
    the collector's earlier_times rule) as earlier runs, each command's first cell with its parent's
    start set apart, each tagged with its group (the collector scales each earlier run by its own cells),
    and for a COLD_REPLICATES run the warm runs' cells with 2 more cold compiles
    each (progress.as_cold); a warm run leaves the cold runs out, as the collector's earlier_times does."""
    cold_now = cold(GROUPS[name][0])
    rows = []
    for other, runs in sorted(GROUPS.items(), key=lambda kv: started(kv[1]), reverse=True):  # the newest first
        if other == name or launcher_of(runs[0]) != launcher_of(GROUPS[name][0]) or (cold(runs[0]) and not cold_now):
            continue
        firsts = first_calls(runs)
        got = [{"model": k[1], "phase": k[2], "mode": k[3], "cell_wall_s": s, "startup_s": x, "run": other,
                "first_call_compiled_s": firsts.get(k, (None, None))[0],
                "warm_first_call_compiled_s": firsts.get(k, (None, None))[1]} for k, s, x in queue_with_starts(runs)]
        rows += as_cold(got, 3) if cold_now and not cold(runs[0]) else got
    return prior_times(follow_newest(rows))


def started(runs: tuple[str, ...]) -> str:
    """When the group's runs last began a command (run.json's sessions), as the collector orders earlier runs."""
    got = [str(s.get("started_at") or "") for run in runs
           for s in json.loads((ROOT / "data" / "examples" / run / "run.json").read_text()).get("sessions") or []]
    return max(got or [""])


def main() -> int:
    print(f"{'run':<40} {'cells':>5}  {'with the plan: median / worst':>30}  {'mean of all: median / worst':>28}")
    for name, runs in GROUPS.items():
        a, b, n = [], [], 0
        for full in commands(runs):  # each command's estimate is its own, as live
            q, starts = [(k, s) for k, s, _ in full], [x for _, _, x in full]
            a += errors(q, True, starts=starts)
            b += errors(q, False, starts=starts)
            n += len(q)
        if not a:
            continue
        print(f"{name:<40} {n:>5}  {statistics.median(a):>17.0%} / {max(a):>6.0%}   "
              f"{statistics.median(b):>15.0%} / {max(b):>6.0%}")
    print()
    print("the estimate against the time in fact left, as a factor (1.5x: off by half either way)")
    print(f"{'run':<40} {'from the 2nd cell: median / worst':>34}  {'with the other runs as earlier ones: median / worst / worst from the 2nd':>72}"
          f"  {'parent start not set apart: worst':>34}")
    for name, runs in GROUPS.items():
        a, b, b2, c = [], [], [], []
        for full in commands(runs):  # each command's estimate is its own, as live
            q, starts = [(k, s) for k, s, _ in full], [x for _, _, x in full]
            a += factors(q, None, starts)
            got = factors(q, earlier(name), starts)
            b += got
            b2 += got[1:]
            c += factors(q, None)
        if not a:
            continue
        print(f"{name:<40} {statistics.median(a):>24.2f}x / {max(a):.2f}x  {statistics.median(b):>55.2f}x / {max(b):.2f}x / {max(b2):.2f}x"
              f"  {max(c):>33.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
