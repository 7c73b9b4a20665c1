"""Report context: DuckDB query results turned into pre-formatted rows.

Templates only loop and print; every number is formatted, ordered and judged here.
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.data import bad_samples

from analysis.explain import kernels, provenance, why

from analysis.stats import core as stats

from analysis.run_report import suites
from analysis.run_report import verdict as verdict_mod
from analysis.stats.fmt import (byte_unit, cell_label, failure_summary, fmt_bytes, fmt_ms, fmt_pct, fmt_s,  # noqa: F401
                           fmt_steps, fmt_x)
from analysis.data.load import Loaded, Run, sql
from analysis.run_report import run_tables as tables
from analysis.run_report.run_tables import (CompileRow, EagerSpreadRow, FailureRow, HeadlineRow, MemoryRow,  # noqa: F401
                                 SpeedupRow, process_text, records as _records)

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
    reasons: list[why.ReasonRow] = field(default_factory=list)
    reasons_summary: str = ""
    reasons_known: bool = False
    efficiency: list[why.EfficiencyRow] = field(default_factory=list)
    splits: list[why.SplitRow] = field(default_factory=list)
    split_stages: list[str] = field(default_factory=lambda: [name for _, name in why.SPLIT_STAGES])
    peak_line: str = ""
    sweeps: list[why.SweepRow] = field(default_factory=list)
    kernels: list[kernels.RunRow] = field(default_factory=list)  # per profiled cell and side
    charts: dict[str, Chart] = field(default_factory=dict)
    chart_rows: dict[str, list[dict]] = field(default_factory=dict)  # inputs of charts.py, not printed
    verdict: verdict_mod.Verdict = field(default_factory=verdict_mod.Verdict)
    meta: dict[str, object] = field(default_factory=dict)  # what estimates.json says of the run (torch, device, preset, ...)
    collection: list[tables.TimeRow] = field(default_factory=list)  # where the collection's time went (schema 14 on)
    collection_note: str = ""




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


def _notes(run: Run, all_rows: list[dict], speed: list[dict], memory: list) -> list[str]:
    """What the report says of how the run was collected (provenance), of one-process cells, memory and TF32."""
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
    return notes


def _device(run: Run, all_rows: list[dict]) -> tuple[str, str]:
    """The device line and the run's description; the rows say how many GPUs ran, and a preset's
    "One GPU" text does not overrule them."""
    env = run.env
    line = f"{env.get('gpu_name') or env.get('cpu_model')} ({env.get('device')}), torch {env.get('torch_version')}"
    description = run.manifest.get("description", "")
    gpus = sorted({r.get("gpu_index") for r in all_rows if r.get("gpu_index") is not None})
    if len(gpus) > 1:
        line += f", {len(gpus)} GPUs (cells side by side)"
        description = re.sub(r"^One GPU:\s*", "", description)
    return line, description


def failed_modes(all_rows: list[dict]) -> dict[str, dict]:
    """mode -> cells, failed, {status: n}: the verdict names failing modes. A cell skipped, or out of
    memory beside other cells on a shared GPU (measured alone by the same command), is not the mode's
    failure (suites.NOT_THE_MODEL); the run's failure list names it."""
    out: dict[str, dict] = {}
    for r in all_rows:
        m = out.setdefault(r["mode"], {"cells": 0, "failed": 0, "statuses": {}})
        m["cells"] += 1
        if r["status"] not in ("ok", "accuracy_fail", *suites.NOT_THE_MODEL):
            m["failed"] += 1
            m["statuses"][r["status"]] = m["statuses"].get(r["status"], 0) + 1
    return out


def _peak_line(peaks: dict) -> str:
    known = {k: v for k, v in peaks.items() if isinstance(v, (int, float))}
    return ("Measured peak on this device (a large matrix product, once per run): "
            + ", ".join(f"{k} {v:,.1f} TFLOP/s" for k, v in known.items()) + "." if known else "")


def build_run_report(loaded: Loaded, run: Run, reps: int = stats.DEFAULT_REPS,
                     noise: float = stats.NOISE_THRESHOLD, now: str | None = None,
                     min_effect: float = stats.MIN_EFFECT) -> RunReport:
    """The full context for one run's report: the tables (analysis/run_report/run_tables.py), the verdict
    (analysis/run_report/verdict.py), the notes and what the charts and estimates.json draw on."""
    con, run_id, env = loaded.con, run.run_id, run.env
    reps_by_cell = compute_verdicts(loaded, run_id, reps, min_effect)
    speed = _records(con, "speedup_table", run_id)
    mark_eager_outliers(speed, noise)
    peaks = env.get("peak_tflops") or {}
    memory = tables.memory_rows(_records(con, "memory", run_id))
    comp = _records(con, "compile_cost", run_id)
    compile_rows = tables.compile_rows(comp, dict(con.execute("SELECT cell_id, verdict FROM verdicts WHERE run_id=$run_id",
                                                              {"run_id": run_id}).fetchall()))
    failures = tables.failure_rows(_records(con, "failures", run_id))
    counts = con.execute(sql("status_counts"), {"run_id": run_id}).fetchall()
    all_rows = _records(con, "cells_of_run", run_id)
    reasons, reasons_summary = why.reason_rows(all_rows)
    device_line, description = _device(run, all_rows)
    answer = verdict_mod.build(speed, reps_by_cell, {r["cell_id"]: r["breakeven_cold_steps"] for r in comp},
                               failures, noise, min_effect, provenance.several_machines(run, all_rows),
                               len(loaded.skipped_in(run)), failed_modes(all_rows))
    answer.caveats += bad_samples.flagged_caveat(loaded.flagged_in(run))
    answer.suites = suites.run_rows(all_rows, reps_by_cell) if suites.has_suites(all_rows) else []
    amort = sorted((r for r in comp if r["status"] == "ok" and r["eager_median_ms"] and r["compiled_median_ms"]
                    and r["verdict"] != "no clear difference"),
                   key=lambda r: (r["breakeven_cold_steps"] is None, r["breakeven_cold_steps"] or 0))
    chart_rows = {"heatmap": _records(con, "heatmap", run_id), "batch_sweep": _records(con, "batch_sweep", run_id),
                  "compile_times": comp, "amortization": amort,
                  "efficiency": why.efficiency_chart_rows(all_rows, peaks, cell_label),
                  "summary": answer.chart_rows, "estimates": _estimate_cells(all_rows, speed)}
    proto = run.manifest.get("protocol", {})
    collection, collection_note = tables.collection_rows(all_rows)
    stamp = None if now else dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    return RunReport(
        title=f"torch.compile report: {run_id}", run_id=run_id,
        generated_at=now or stamp.strftime("%Y-%m-%d %H:%M UTC"),
        description=description, device_line=device_line,
        status_line=f"{sum(n for _, n in counts)} cells: " + ", ".join(f"{n} {s}" for s, n in counts),
        noise_threshold=fmt_pct(noise), min_effect=f"{min_effect * 100:g}%", skipped_files=loaded.skipped_in(run),
        flagged_cells=loaded.flagged_in(run),
        headline=tables.headline_rows(con, run_id, _records(con, "headline", run_id), reps_by_cell, speed),
        speedups=tables.speedup_rows(speed, peaks, noise), memory=memory, compile_rows=compile_rows, failures=failures,
        eager_spread=tables.eager_spread_rows(_records(con, "eager_consistency", run_id), noise),
        environment=[(label, str(env.get(key))) for label, key in ENV_FIELDS if env.get(key) not in (None, "")],
        # the compile-time plant (a test option added in schema 10) is shown where it was used only
        protocol=[(k, str(v)) for k, v in sorted(proto.items()) if v or k != "plant_compile_ms"],
        notes=_notes(run, all_rows, speed, memory), reasons=reasons, reasons_summary=reasons_summary,
        efficiency=why.efficiency_rows(all_rows, peaks, cell_label), splits=why.split_rows(comp, cell_label, fmt_s, fmt_bytes),
        peak_line=_peak_line(peaks), sweeps=why.sweep_rows(all_rows, cell_label),
        kernels=kernels.run_rows(all_rows, cell_label), chart_rows=chart_rows,
        reasons_known=reasons_summary.startswith("Reasons counted"), verdict=answer,
        collection=collection, collection_note=collection_note,
        meta={"torch_version": env.get("torch_version"), "device": env.get("device"),
              "device_name": env.get("device_name"), "preset": run.manifest.get("preset"),
              "processes": int(proto.get("processes") or 1), "status_counts": {s: int(n) for s, n in counts},
              "generated_at_iso": stamp.strftime("%Y-%m-%dT%H:%M:%SZ") if stamp else None})
