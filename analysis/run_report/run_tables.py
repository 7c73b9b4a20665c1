"""The run report's tables: DuckDB rows turned into formatted rows (headline per group, speedups,
memory, compile cost, eager consistency, failures, where the collection's time went). Templates only
loop and print."""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass

import numpy as np

from analysis.stats import core as stats

from analysis.explain import why
from analysis.stats.fmt import (byte_unit, cell_label, failure_summary, fmt_bytes, fmt_ms, fmt_pct, fmt_s,
                          fmt_steps, fmt_x)
from analysis.data.load import sql


@dataclass(frozen=True)
class HeadlineRow:
    phase: str
    mode: str
    scope: str
    dtype: str
    cells: int
    ok_cells: int
    pass_rate: str
    geomean: str
    ci: str
    pooled: str  # geomean against each eager model's median over all its cells (robustness check)
    faster: int
    slower: int
    unclear: int


@dataclass(frozen=True)
class SpeedupRow:
    model: str
    phase: str
    dtype: str
    batch_size: int
    mode: str
    scope: str
    eager: str
    compiled: str
    speedup: str
    ci: str
    verdict: str
    flags: str
    css: str
    gpu: str = ""
    processes: str = ""  # processes that timed it, and the spread of their speedups


@dataclass(frozen=True)
class MemoryRow:
    label: str
    eager_alloc: str
    compiled_alloc: str
    alloc_ratio: str
    cold_alloc_ratio: str
    reserved_before: str
    reserved_after: str
    reserved_end: str
    reserved_growth: str


@dataclass(frozen=True)
class CompileRow:
    label: str
    first_eager: str
    cold: str
    warm: str
    dynamo: str
    inductor: str
    backward: str
    graphs: str
    portable: str
    breakeven_cold: str
    breakeven_warm: str


@dataclass(frozen=True)
class EagerSpreadRow:
    label: str
    cells: int
    range_ms: str
    spread: str
    flag: str


@dataclass(frozen=True)
class FailureRow:
    label: str
    status: str
    error: str
    summary: str  # one line: what failed and, for a process that died, the last step it logged


def records(con, name: str, run_id: str) -> list[dict]:
    """The rows of query `name` for one run as dicts, NULL and NaN as None. Read straight from
    DuckDB: through a pandas frame (`.df().to_dict`) the 10,000-cell report spent 2.6 s here."""
    cur = con.execute(sql(name), {"run_id": run_id})
    cols = [d[0] for d in cur.description]
    return [{c: None if v != v else v for c, v in zip(cols, row)} for row in cur.fetchall()]


def process_text(r: dict) -> str:
    """'3 (spread 1.2%)': processes that timed the cell and how far their speedups spread."""
    n = r.get("processes")
    if stats.missing(n):
        return "-"
    n = int(n)
    if n < 2 or stats.missing(r.get("process_spread")):
        return f"{n}"
    return f"{n} (spread {100 * r['process_spread']:.1f}%)"


def speedup_rows(speed: list[dict], peaks: dict, noise: float) -> list[SpeedupRow]:
    out = []
    for r in speed:
        verdict = r["verdict"] or "-"
        out.append(SpeedupRow(
            r["model"], r["phase"], r["dtype"], int(r["batch_size"]), r["mode"], r["compile_scope"],
            f"{fmt_ms(r['eager_median_ms'])} (IQR {fmt_pct(r['eager_iqr_rel'])})",
            f"{fmt_ms(r['compiled_median_ms'])} (IQR {fmt_pct(r['compiled_iqr_rel'])})",
            fmt_x(r["speedup"]),
            "-" if r["speedup_lo"] is None else f"{r['speedup_lo']:.2f}-{r['speedup_hi']:.2f}",
            verdict, why.why_text(r, peaks, noise), {"faster": "faster", "slower": "slower"}.get(verdict, "unclear"),
            "" if r["gpu_index"] is None else str(int(r["gpu_index"])), process_text(r)))
    return out


def headline_rows(con, run_id: str, groups: list[dict], reps_by_cell: dict, speed: list[dict]) -> list[HeadlineRow]:
    """Per group of the `headline` query: pass rate, geometric-mean speedup with its interval
    (stats.geomean_interval over the cells' LogDists), and the same against each eager model's
    median over all its cells (a robustness check)."""
    by_id = {r["cell_id"]: r for r in speed}
    out = []
    for h in groups:
        ids = [i for (i,) in con.execute(
            "SELECT cell_id FROM stats WHERE run_id=$run_id AND phase=$phase AND mode=$mode "
            "AND compile_scope=$scope AND dtype=$dtype AND status='ok'",
            {"run_id": run_id, "phase": h["phase"], "mode": h["mode"], "scope": h["compile_scope"],
             "dtype": h["dtype"]}).fetchall()]
        reps_list = [reps_by_cell[i] for i in ids if i in reps_by_cell]
        ci = "-"
        if reps_list:
            lo, hi = stats.geomean_interval(reps_list)
            ci = f"{lo:.2f}-{hi:.2f}"
        pooled = [by_id[i]["pooled_eager_ms"] / by_id[i]["compiled_median_ms"] for i in ids
                  if i in by_id and not stats.missing(by_id[i].get("pooled_eager_ms"))
                  and not stats.missing(by_id[i].get("compiled_median_ms")) and by_id[i]["compiled_median_ms"] > 0]
        out.append(HeadlineRow(h["phase"], h["mode"], h["compile_scope"], h["dtype"], int(h["cells"]),
                               int(h["ok_cells"]), fmt_pct(h["pass_rate"]), fmt_x(h["geomean_speedup"]), ci,
                               fmt_x(float(np.exp(np.mean(np.log(pooled))))) if pooled else "-",
                               int(h["faster"]), int(h["slower"]), int(h["unclear"])))
    return out


def memory_rows(mem: list[dict]) -> list[MemoryRow]:
    """One unit for the allocated columns and one for the reserved ones (byte_unit), so they read down."""
    alloc = byte_unit([r[k] for r in mem for k in ("eager_peak_allocated_bytes", "compiled_peak_allocated_bytes")])
    resv = byte_unit([r[k] for r in mem for k in ("eager_cold_peak_reserved_bytes", "compiled_cold_peak_reserved_bytes",
                                                   "end_peak_reserved_bytes")])
    return [MemoryRow(cell_label(r), fmt_bytes(r["eager_peak_allocated_bytes"], alloc),
                      fmt_bytes(r["compiled_peak_allocated_bytes"], alloc), fmt_x(r["mem_allocated_ratio"]),
                      fmt_x(r["mem_cold_allocated_ratio"]), fmt_bytes(r["eager_cold_peak_reserved_bytes"], resv),
                      fmt_bytes(r["compiled_cold_peak_reserved_bytes"], resv),
                      fmt_bytes(r["end_peak_reserved_bytes"], resv), fmt_x(r["mem_reserved_growth"]))
            for r in mem]


def compile_rows(comp: list[dict], verdicts: dict[str, str]) -> list[CompileRow]:
    """The compile-cost table. Sets `label` and `verdict` on each row of `comp` (the charts read
    them), and drops the break-even of a cell whose speedup is not told from 1 (it would be noise)."""
    out = []
    for r in comp:
        r["label"] = cell_label(r)
        r["verdict"] = verdicts.get(r["cell_id"])
        ok = r["status"] == "ok"
        if ok and r["verdict"] == "no clear difference":
            r["breakeven_cold_steps"] = r["breakeven_warm_steps"] = None
        out.append(CompileRow(
            r["label"], fmt_s(r["first_call_eager_s"]), fmt_s(r["first_call_compiled_s"]),
            fmt_s(r["warm_first_call_compiled_s"]), fmt_s(r["compile_dynamo_s"]), fmt_s(r["compile_inductor_s"]),
            fmt_s(r["compile_backward_s"]),
            "-" if r["graph_count"] is None else f"{r['graph_count']} / {r['graph_break_count']}"
            + ("" if r.get("kernel_count") is None else f" ({r['kernel_count']} kernels)"),
            fmt_s(r["portable_first_call_compiled_s"]),
            fmt_steps(r["breakeven_cold_steps"], ok, r["verdict"]),
            fmt_steps(r["breakeven_warm_steps"], ok and r["warm_first_call_compiled_s"] is not None, r["verdict"])))
    return out


def eager_spread_rows(recs: list[dict], noise: float) -> list[EagerSpreadRow]:
    return [EagerSpreadRow(f"{r['model']} {r['phase']} {r['dtype']} bs{r['batch_size']}", int(r["cells"]),
                           f"{fmt_ms(r['min_ms'])} - {fmt_ms(r['max_ms'])}", fmt_pct(r["spread"]),
                           "above the noise threshold: compare these cells with care" if r["spread"] > noise else "")
            for r in recs]


def failure_rows(recs: list[dict]) -> list[FailureRow]:
    return [FailureRow(cell_label(r), r["status"], (r["error"] or "").strip(), failure_summary(r["error"])) for r in recs]


# the stages a cell process names (collector/child: setup, build, ...), in the order it runs them
STAGE_ORDER = ("setup", "build", "to device", "sides", "reference", "eager", "compile", "compiled", "timing",
               "profile", "sweep", "graph capture")
OUTSIDE = "outside the process's clock (interpreter start, exit)"


@dataclass(frozen=True)
class TimeRow:
    stage: str
    seconds: str  # over every process that said its stages
    share: str  # of those processes' wall time
    median: str  # a cell: the median over cells of its processes' seconds in the stage


def _dur(v: float) -> str:
    return fmt_s(v) if v < 120 else f"{v / 60:.1f} min"


def process_splits(row: dict) -> list[tuple[int, dict[str, float], float]]:
    """Each process's (index, {stage: seconds, OUTSIDE: the rest of its wall}, wall) from a row's
    process_stages_json (schema v14), cold first; a process that said nothing is left out, and a row without
    a split (older schema) or a malformed one gives []."""
    try:
        said = json.loads(row.get("process_stages_json") or "null")
    except ValueError:
        return []
    walls = row.get("process_wall_s")
    if not isinstance(said, list) or walls is None:
        return []
    return [(i, {**st, OUTSIDE: max(0.0, w - sum(st.values()))}, w)
            for i, (st, w) in enumerate(zip(said, list(walls))) if isinstance(st, dict) and w is not None]


def collection_rows(rows: list[dict]) -> tuple[list[TimeRow], str]:
    """Where the collection's time went, from the rows' process_stages_json (schema v14): each stage's seconds
    summed over the processes that said theirs, its share of their wall time, the median a cell; the rest of
    their wall time is outside the process's clock. ([], "") where no row says (older rows)."""
    total: dict[str, float] = {}
    per_cell: dict[str, list[float]] = {}
    wall, cells, procs = 0.0, 0, 0
    for r in rows:
        mine: dict[str, float] = {}
        for _, st, w in process_splits(r):
            procs += 1
            wall += w
            for name, secs in st.items():
                total[name] = total.get(name, 0.0) + secs
                mine[name] = mine.get(name, 0.0) + secs
        if mine:
            cells += 1
            for name, secs in mine.items():
                per_cell.setdefault(name, []).append(secs)
    if not procs:
        return [], ""
    order = [s for s in STAGE_ORDER if s in total] + sorted(set(total) - set(STAGE_ORDER) - {OUTSIDE}) + [OUTSIDE]
    out = [TimeRow(s, _dur(total[s]), fmt_pct(total[s] / wall) if wall else "-",
                   fmt_s(statistics.median(per_cell[s] + [0.0] * (cells - len(per_cell[s]))))) for s in order]
    note = (f"{cells} of the {len(rows)} cells ({procs} processes) recorded where their time went (rows of "
            f"schema 14 on): {_dur(wall)} of process wall time.")
    return out, note
