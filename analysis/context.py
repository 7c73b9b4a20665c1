"""Report context: DuckDB query results turned into pre-formatted rows.

Templates only loop and print; every number is formatted, ordered and judged here.
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis import bad_samples, kernels, provenance, stats, suites, why
from analysis import verdict as verdict_mod
from analysis.fmt import (byte_unit, cell_label, failure_summary, fmt_bytes, fmt_ms, fmt_pct, fmt_s,  # noqa: F401
                           fmt_steps, fmt_x)
from analysis.load import Loaded, Run, sql

ENV_FIELDS = [("torch", "torch_version"), ("torch git", "torch_git"), ("CUDA", "cuda"), ("cuDNN", "cudnn"),
              ("Triton", "triton"), ("torchvision", "torchvision"), ("Python", "python"),
              ("device", "device"), ("GPU", "gpu_name"), ("GPU count", "gpu_count"), ("driver", "driver"),
              ("SM clock at start (MHz)", "sm_clock_mhz_start"), ("SM clock max (MHz)", "sm_clock_max_mhz"),
              ("power limit (W)", "power_limit_w"), ("CPU", "cpu_model"), ("CPU count", "cpu_count"),
              ("torch threads", "torch_num_threads"), ("TORCHINDUCTOR_COMPILE_THREADS", "inductor_compile_threads"),
              ("torch.compile settings in the environment", "compile_env"),
              ("hostname", "hostname"), ("platform", "platform")]


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    filename: str  # relative to the report folder
    alt: str


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


@dataclass
class RunReport:
    """Everything a run's report shows, formatted."""

    title: str
    run_id: str
    generated_at: str
    description: str
    device_line: str
    status_line: str
    noise_threshold: str
    min_effect: str
    skipped_files: list[tuple[str, str]]
    flagged_cells: list[tuple[str, str]]  # cells whose samples were partly left out (load.py)
    headline: list[HeadlineRow]
    speedups: list[SpeedupRow]
    memory: list[MemoryRow]
    compile_rows: list[CompileRow]
    failures: list[FailureRow]
    eager_spread: list[EagerSpreadRow]
    environment: list[tuple[str, str]]
    protocol: list[tuple[str, str]]
    notes: list[str]
    reasons: list = field(default_factory=list)
    reasons_summary: str = ""
    reasons_known: bool = False
    efficiency: list = field(default_factory=list)
    splits: list = field(default_factory=list)
    split_stages: list = field(default_factory=lambda: [name for _, name in why.SPLIT_STAGES])
    peak_line: str = ""
    sweeps: list = field(default_factory=list)
    kernels: list = field(default_factory=list)  # analysis.kernels.RunRow per profiled cell and side
    charts: dict[str, Chart] = field(default_factory=dict)
    chart_rows: dict[str, list[dict]] = field(default_factory=dict)  # inputs of charts.py, not printed
    verdict: verdict_mod.Verdict = field(default_factory=verdict_mod.Verdict)
    meta: dict = field(default_factory=dict)  # what estimates.json says of the run (torch, device, preset, ...)




def compute_verdicts(loaded: Loaded, run_id: str, reps: int, min_effect: float = stats.MIN_EFFECT) -> dict:
    """Interval of every compiled cell of the run (stats.run_stats, computed once per run) and its
    verdict; store table `verdicts` (the report's SQL joins it); return each cell's LogDist of ln speedup."""
    con = loaded.con
    rs = stats.run_stats(loaded, run_id, reps)
    points = dict(con.execute("SELECT cell_id, speedup FROM stats WHERE run_id = $run_id", {"run_id": run_id}).fetchall())
    rows = []
    for cell_id, (lo, hi) in rs.intervals.items():
        point = points.get(cell_id)
        rows.append((run_id, cell_id, lo, hi, stats.verdict(lo, hi, None if stats.missing(point) else point, min_effect)))
    frame = pd.DataFrame(rows, columns=["run_id", "cell_id", "speedup_lo", "speedup_hi", "verdict"])
    con.execute("DELETE FROM verdicts WHERE run_id = $run_id", {"run_id": run_id})
    con.register("new_verdicts", frame)
    con.execute("INSERT INTO verdicts SELECT * FROM new_verdicts")
    con.unregister("new_verdicts")
    return rs.speedup


def prepare(loaded: Loaded) -> None:
    """Create tables `stats` (per-cell statistics) and an empty `verdicts`."""
    loaded.con.execute(sql("cell_stats"))
    loaded.con.execute("CREATE OR REPLACE TABLE verdicts (run_id VARCHAR, cell_id VARCHAR, "
                       "speedup_lo DOUBLE, speedup_hi DOUBLE, verdict VARCHAR)")


ERROR_CHARS = 1000  # a failed cell's error in estimates.json: its first characters (the report has the rest)


def _estimate_cells(all_rows: list[dict], speed: list[dict]) -> list[dict]:
    """Every cell of the run for estimates.json, failed ones included (status and error), with the
    speedup table's figures where the cell has them; numbers are numbers, missing ones null."""
    by_id = {r["cell_id"]: r for r in speed}
    out = []
    for r in all_rows:
        s = by_id.get(r["cell_id"], {})
        error = r.get("error") if r.get("status") != "ok" else None
        out.append({"cell_id": r["cell_id"], "model": r["model"], "phase": r["phase"], "dtype": r["dtype"],
                    "batch_size": int(r["batch_size"]), "mode": r["mode"], "compile_scope": r["compile_scope"],
                    "status": r["status"], "error": error[:ERROR_CHARS] if error else None,
                    "processes": r.get("processes"), "eager_ms": r.get("eager_median_ms"),
                    "compiled_ms": r.get("compiled_median_ms") if r["mode"] != "eager" else None,
                    "speedup": s.get("speedup"), "speedup_lo": s.get("speedup_lo"), "speedup_hi": s.get("speedup_hi"),
                    "verdict": s.get("verdict")})
    return out


def _records(con, name: str, run_id: str) -> list[dict]:
    return con.execute(sql(name), {"run_id": run_id}).df().replace({np.nan: None}).to_dict("records")


def mark_eager_outliers(rows: list[dict], noise: float, min_cells: int = 3) -> None:
    """Set `pooled_eager_ms` on every ok row: the median eager step over every cell of the same
    eager model (model, phase, dtype, batch); and `eager_offset` = (eager median / that - 1,
    cells) where it exceeds `noise` and at least `min_cells` cells measured that model: a
    speedup whose eager side landed far from its siblings says more about that process than
    about the compile (the why column says so)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("status") == "ok" and not stats.missing(r.get("eager_median_ms")):
            groups.setdefault((r["model"], r["phase"], r["dtype"], r["batch_size"]), []).append(r)
    for members in groups.values():
        typical = float(np.median([m["eager_median_ms"] for m in members]))
        for m in members:
            m["pooled_eager_ms"] = typical
        if len(members) < min_cells:
            continue
        for m in members:
            offset = m["eager_median_ms"] / typical - 1
            if abs(offset) > noise:
                m["eager_offset"] = (offset, len(members))


def process_text(r: dict) -> str:
    """'3 (spread 1.2%)': processes that timed the cell and how far their speedups spread."""
    n = r.get("processes")
    if stats.missing(n):
        return "-"
    n = int(n)
    if n < 2 or stats.missing(r.get("process_spread")):
        return f"{n}"
    return f"{n} (spread {100 * r['process_spread']:.1f}%)"


def build_run_report(loaded: Loaded, run: Run, reps: int = stats.DEFAULT_REPS,
                     noise: float = stats.NOISE_THRESHOLD, now: str | None = None,
                     min_effect: float = stats.MIN_EFFECT) -> RunReport:
    """The full context for one run's report."""
    con, run_id = loaded.con, run.run_id
    reps_by_cell = compute_verdicts(loaded, run_id, reps, min_effect)
    env = run.env

    speed = _records(con, "speedup_table", run_id)
    mark_eager_outliers(speed, noise)
    by_id = {r["cell_id"]: r for r in speed}
    peaks = env.get("peak_tflops") or {}
    speed_rows = []
    for r in speed:
        verdict = r["verdict"] or "-"
        css = {"faster": "faster", "slower": "slower"}.get(verdict, "unclear")
        speed_rows.append(SpeedupRow(
            r["model"], r["phase"], r["dtype"], int(r["batch_size"]), r["mode"], r["compile_scope"],
            f"{fmt_ms(r['eager_median_ms'])} (IQR {fmt_pct(r['eager_iqr_rel'])})",
            f"{fmt_ms(r['compiled_median_ms'])} (IQR {fmt_pct(r['compiled_iqr_rel'])})",
            fmt_x(r["speedup"]),
            "-" if r["speedup_lo"] is None else f"{r['speedup_lo']:.2f}-{r['speedup_hi']:.2f}",
            verdict, why.why_text(r, peaks, noise), css,
            "" if r["gpu_index"] is None else str(int(r["gpu_index"])), process_text(r)))

    headline = []
    for h in _records(con, "headline", run_id):
        ids = con.execute("SELECT cell_id FROM stats WHERE run_id=$run_id AND phase=$phase AND mode=$mode "
                          "AND compile_scope=$scope AND dtype=$dtype AND status='ok'",
                          {"run_id": run_id, "phase": h["phase"], "mode": h["mode"],
                           "scope": h["compile_scope"], "dtype": h["dtype"]}).fetchall()
        reps_list = [reps_by_cell[i] for (i,) in ids if i in reps_by_cell]
        ci = "-"
        if reps_list:
            lo, hi = stats.geomean_interval(reps_list)
            ci = f"{lo:.2f}-{hi:.2f}"
        pooled = [by_id[i]["pooled_eager_ms"] / by_id[i]["compiled_median_ms"] for (i,) in ids
                  if i in by_id and not stats.missing(by_id[i].get("pooled_eager_ms"))
                  and not stats.missing(by_id[i].get("compiled_median_ms")) and by_id[i]["compiled_median_ms"] > 0]
        pooled_txt = fmt_x(float(np.exp(np.mean(np.log(pooled))))) if pooled else "-"
        headline.append(HeadlineRow(h["phase"], h["mode"], h["compile_scope"], h["dtype"], int(h["cells"]),
                                    int(h["ok_cells"]), fmt_pct(h["pass_rate"]), fmt_x(h["geomean_speedup"]),
                                    ci, pooled_txt, int(h["faster"]), int(h["slower"]), int(h["unclear"])))

    mem = _records(con, "memory", run_id)
    alloc = byte_unit([r[k] for r in mem for k in ("eager_peak_allocated_bytes", "compiled_peak_allocated_bytes")])
    resv = byte_unit([r[k] for r in mem for k in ("eager_cold_peak_reserved_bytes", "compiled_cold_peak_reserved_bytes",
                                                   "end_peak_reserved_bytes")])
    memory = [MemoryRow(cell_label(r), fmt_bytes(r["eager_peak_allocated_bytes"], alloc),
                        fmt_bytes(r["compiled_peak_allocated_bytes"], alloc), fmt_x(r["mem_allocated_ratio"]),
                        fmt_x(r["mem_cold_allocated_ratio"]), fmt_bytes(r["eager_cold_peak_reserved_bytes"], resv),
                        fmt_bytes(r["compiled_cold_peak_reserved_bytes"], resv),
                        fmt_bytes(r["end_peak_reserved_bytes"], resv), fmt_x(r["mem_reserved_growth"]))
              for r in mem]

    verdicts = dict(con.execute("SELECT cell_id, verdict FROM verdicts WHERE run_id=$run_id",
                                {"run_id": run_id}).fetchall())
    comp = _records(con, "compile_cost", run_id)
    compile_rows = []
    for r in comp:
        r["label"] = cell_label(r)
        r["verdict"] = verdicts.get(r["cell_id"])
        ok = r["status"] == "ok"
        if ok and r["verdict"] == "no clear difference":
            # a break-even from a speedup that is not distinguishable from 1 would be noise
            r["breakeven_cold_steps"] = r["breakeven_warm_steps"] = None
        compile_rows.append(CompileRow(
            r["label"], fmt_s(r["first_call_eager_s"]), fmt_s(r["first_call_compiled_s"]),
            fmt_s(r["warm_first_call_compiled_s"]), fmt_s(r["compile_dynamo_s"]), fmt_s(r["compile_inductor_s"]),
            fmt_s(r["compile_backward_s"]),
            "-" if r["graph_count"] is None else f"{r['graph_count']} / {r['graph_break_count']}"
            + ("" if r.get("kernel_count") is None else f" ({r['kernel_count']} kernels)"),
            fmt_s(r["portable_first_call_compiled_s"]),
            fmt_steps(r["breakeven_cold_steps"], ok, r["verdict"]),
            fmt_steps(r["breakeven_warm_steps"], ok and r["warm_first_call_compiled_s"] is not None, r["verdict"])))

    eager_spread = [EagerSpreadRow(f"{r['model']} {r['phase']} {r['dtype']} bs{r['batch_size']}", int(r["cells"]),
                                   f"{fmt_ms(r['min_ms'])} - {fmt_ms(r['max_ms'])}", fmt_pct(r["spread"]),
                                   "above the noise threshold: compare these cells with care"
                                   if r["spread"] > noise else "")
                    for r in _records(con, "eager_consistency", run_id)]
    failures = [FailureRow(cell_label(r), r["status"], (r["error"] or "").strip(), failure_summary(r["error"]))
                for r in _records(con, "failures", run_id)]
    counts = con.execute(sql("status_counts"), {"run_id": run_id}).fetchall()
    total = sum(n for _, n in counts)
    status_line = f"{total} cells: " + ", ".join(f"{n} {s}" for s, n in counts)

    all_rows = _records(con, "cells_of_run", run_id)
    reasons, reasons_summary = why.reason_rows(all_rows)
    efficiency = why.efficiency_rows(all_rows, peaks, cell_label)
    splits = why.split_rows(comp, cell_label, fmt_s, fmt_bytes)
    sweeps = why.sweep_rows(all_rows, cell_label)
    kernel_rows = kernels.run_rows(all_rows, cell_label)
    known_peaks = {k: v for k, v in peaks.items() if isinstance(v, (int, float))}
    peak_line = ("Measured peak on this device (a large matrix product, once per run): "
                 + ", ".join(f"{k} {v:,.1f} TFLOP/s" for k, v in known_peaks.items()) + "."
                 if known_peaks else "")

    notes = provenance.collection_notes(run, all_rows)
    single = [r for r in speed if r.get("processes") == 1]
    if single:
        notes.append(f"{len(single)} of {len(speed)} compiled cells were timed in one process: their intervals cover "
                     "the noise within that process only, and processes of the same cell can land further apart "
                     "(collect with PROCESSES=3 for intervals over processes; docs/measurement.md).")
    if not memory:
        notes.append("No device memory figures: peak memory is measured on CUDA devices only.")
    tf32 = run.manifest.get("protocol", {}).get("tf32")
    notes.append(f"float32 cells ran with TF32 {'on' if tf32 else 'off'} (matmul and cuDNN).")
    proto = run.manifest.get("protocol", {})
    # the compile-time plant (a test option added in schema 10) is shown where it was used only
    protocol_rows = [(k, str(v)) for k, v in sorted(proto.items()) if v or k != "plant_compile_ms"]
    device_line = (f"{env.get('gpu_name') or env.get('cpu_model')} ({env.get('device')}), torch {env.get('torch_version')}")
    description = run.manifest.get("description", "")
    gpus = sorted({r.get("gpu_index") for r in all_rows if r.get("gpu_index") is not None})
    if len(gpus) > 1:  # the rows say how many GPUs ran; a preset's "One GPU" text does not overrule them
        device_line += f", {len(gpus)} GPUs (cells side by side)"
        description = re.sub(r"^One GPU:\s*", "", description)

    failed_modes: dict[str, dict] = {}  # mode -> cells, failed, {status: n}: the verdict names failing modes
    for r in all_rows:
        m = failed_modes.setdefault(r["mode"], {"cells": 0, "failed": 0, "statuses": {}})
        m["cells"] += 1
        if r["status"] not in ("ok", "accuracy_fail", "skipped"):
            m["failed"] += 1
            m["statuses"][r["status"]] = m["statuses"].get(r["status"], 0) + 1
    answer = verdict_mod.build(speed, reps_by_cell, {r["cell_id"]: r["breakeven_cold_steps"] for r in comp},
                               failures, noise, min_effect, provenance.several_machines(run, all_rows),
                               len(loaded.skipped_in(run)), failed_modes)
    answer.caveats += bad_samples.flagged_caveat(loaded.flagged_in(run))
    answer.suites = suites.run_rows(all_rows, reps_by_cell) if suites.has_suites(all_rows) else []
    amort = sorted((r for r in comp if r["status"] == "ok" and r["eager_median_ms"] and r["compiled_median_ms"]
                    and r["verdict"] != "no clear difference"),
                   key=lambda r: (r["breakeven_cold_steps"] is None, r["breakeven_cold_steps"] or 0))
    chart_rows = {
        "heatmap": _records(con, "heatmap", run_id),
        "batch_sweep": _records(con, "batch_sweep", run_id),
        "compile_times": comp,
        "amortization": amort,
        "efficiency": why.efficiency_chart_rows(all_rows, peaks, cell_label),
        "summary": answer.chart_rows,
        "estimates": _estimate_cells(all_rows, speed),
    }
    stamp = None if now else dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    return RunReport(
        title=f"torch.compile report: {run_id}", run_id=run_id,
        generated_at=now or stamp.strftime("%Y-%m-%d %H:%M UTC"),
        description=description, device_line=device_line, status_line=status_line,
        noise_threshold=fmt_pct(noise), min_effect=f"{min_effect * 100:g}%", skipped_files=loaded.skipped_in(run),
        flagged_cells=loaded.flagged_in(run),
        headline=headline, speedups=speed_rows, memory=memory, compile_rows=compile_rows, failures=failures,
        eager_spread=eager_spread,
        environment=[(label, str(env.get(key))) for label, key in ENV_FIELDS if env.get(key) not in (None, "")],
        protocol=protocol_rows, notes=notes, reasons=reasons, reasons_summary=reasons_summary,
        efficiency=efficiency, splits=splits, peak_line=peak_line, sweeps=sweeps, kernels=kernel_rows, chart_rows=chart_rows,
        reasons_known=reasons_summary.startswith("Reasons counted"), verdict=answer,
        meta={"torch_version": env.get("torch_version"), "device": env.get("device"),
              "device_name": env.get("device_name"), "preset": run.manifest.get("preset"),
              "processes": int(proto.get("processes") or 1), "status_counts": {s: int(n) for s, n in counts},
              "generated_at_iso": stamp.strftime("%Y-%m-%dT%H:%M:%SZ") if stamp else None})
