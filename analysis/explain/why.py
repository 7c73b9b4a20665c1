"""Why a cell's speedup is what it is: the "why" column, the reasons across a run, hardware
efficiency against the measured peak, energy per sample, and where compile time goes.

Inputs are rows of the `stats` table (analysis/data/sql/cell_stats.sql) as dicts; outputs are
formatted strings. Unknown stays "-" (older schema, or a torch that could not tell).
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from analysis.explain import kernels

from analysis.stats import core as stats
from collector.record.contract import CUDAGRAPH_MODES

SPLIT_STAGES = (("dynamo", "Dynamo (all)"), ("aot_autograd", "AOTAutograd"), ("inductor", "Inductor"),
                ("inductor_codegen", "codegen"), ("triton", "Triton"), ("autotune", "autotune"),
                ("backward", "backward"), ("aot_export_s", "export"), ("aot_compile_s", "AOTI compile"),
                ("aot_load_s", "AOTI load"))
AOTI_COLUMNS = ("aot_export_s", "aot_compile_s", "aot_load_s")  # mode aot-inductor, from their own columns


def _json(text) -> dict | None:
    if stats.missing(text):
        return None
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def peak_key(dtype: str, tf32) -> str:
    """Which measured peak bounds a cell: bf16 for bf16 and autocast cells; TF32 or fp32 for float32."""
    if dtype in ("amp_bf16", "bfloat16", "amp_fp16", "float16"):
        return "bf16"  # fp16 and bf16 tensor-core peaks are equal on the GPUs this targets
    return "tf32" if tf32 else "fp32"


def peak_of(r: dict, peaks: dict) -> tuple[str, float | None]:
    key = peak_key(r["dtype"], r.get("tf32"))
    value = peaks.get(key) if isinstance(peaks, dict) else None
    return key, (float(value) if isinstance(value, (int, float)) and value > 0 else None)


def _fmt_time(ms: float) -> str:
    return f"{ms * 1e3:.0f} us" if ms < 1 else f"{ms:.2f} ms"


def _pct(v) -> str:
    return "-" if stats.missing(v) else (f"{100 * v:.1f}%" if v < 0.1 else f"{100 * v:.0f}%")


def why_text(r: dict, peaks: dict, noise: float) -> str:
    """The cause beside a speedup: breaks, recompiles, CUDA-graph skips, launch-bound sides,
    efficiency against the peak, noise. Empty when nothing stands out."""
    parts = []
    if r.get("status") == "accuracy_fail":
        parts.append("ACCURACY FAIL (excluded from the headline)")
    if r.get("graph_break_count"):
        parts.append(f"{r['graph_break_count']} graph break(s)")
    if r.get("recompile_count"):
        parts.append(f"{r['recompile_count']} recompile(s)")
    base_mode = r.get("base_mode") or r["mode"]
    if r.get("cudagraph_skip_count") and base_mode in CUDAGRAPH_MODES:
        reasons = _json(r.get("cudagraph_skip_reasons_json")) or {}
        first = next(iter(sorted(reasons, key=lambda k: -reasons[k])), None)
        parts.append("CUDA graphs skipped" + (f": {first.removeprefix('skipping cudagraphs due to ')}" if first else ""))
    eager_lb, comp_lb = r.get("eager_launch_bound"), r.get("compiled_launch_bound")
    e_share, c_share = r.get("eager_launch_ratio"), r.get("compiled_launch_ratio")
    c_ms = r.get("compiled_median_ms")
    if eager_lb and not comp_lb and not stats.missing(e_share):
        how = "CUDA graphs replay it" if base_mode in CUDAGRAPH_MODES else "fewer kernels"
        tail = "" if stats.missing(c_share) else f", compiled {_pct(c_share)}"
        parts.append(f"eager launch-bound (host {_pct(e_share)} of the step{tail}); {how}")
    elif eager_lb and comp_lb and not stats.missing(c_ms):
        parts.append(f"launch-bound both sides (host {_pct(e_share)} / {_pct(c_share)}): compiled step "
                     f"{_fmt_time(c_ms)}")
    elif comp_lb and not stats.missing(c_ms):
        parts.append(f"compiled launch-bound (host {_pct(c_share)} of a {_fmt_time(c_ms)} step)")
    elif not stats.missing(e_share) and e_share >= 0.6:
        parts.append(f"host {_pct(e_share)} of the eager step")
    key, peak = peak_of(r, peaks)
    if peak and not stats.missing(r.get("eager_tflops")) and not stats.missing(r.get("compiled_tflops")):
        parts.append(f"{_pct(r['eager_tflops'] / peak)} -> {_pct(r['compiled_tflops'] / peak)} of {key} peak")
    if r.get("eager_offset"):
        offset, cells = r["eager_offset"]
        parts.append(f"eager {offset * 100:+.0f}% against this model's median over {cells} cells")
    if stats.is_noisy(r.get("eager_iqr_rel"), r.get("compiled_iqr_rel"), threshold=noise):
        parts.append("noisy")
    spread = r.get("process_spread")
    if not stats.missing(spread) and spread > stats.DISAGREE:
        raw = r.get("process_speedups")
        speeds = [float(v) for v in ([] if raw is None else list(raw)) if not stats.missing(v)]
        side = max((("eager", r.get("eager_process_spread")), ("compiled", r.get("compiled_process_spread"))),
                   key=lambda t: -1 if stats.missing(t[1]) else t[1])
        rng = f" ({min(speeds):.2f}x-{max(speeds):.2f}x)" if speeds else ""
        parts.append(f"PROCESSES DISAGREE: speedups span {spread * 100:.0f}%{rng} over {len(speeds)} processes, "
                     f"mostly the {side[0]} side ({side[1] * 100:.0f}%)")
    draw = kernels.draw_spread(r)
    if draw:
        parts.append(draw)
    if not stats.missing(r.get("planted_slowdown_pct")) and r["planted_slowdown_pct"]:
        parts.append(f"TEST RUN: {r['planted_slowdown_pct']:g}% slowdown planted in the compiled step")
    if not stats.missing(r.get("planted_compile_ms")) and r.get("planted_compile_ms"):
        parts.append(f"TEST RUN: {r['planted_compile_ms']:g} ms planted in every compiled first call")
    return "; ".join(parts)


@dataclass(frozen=True)
class ReasonRow:
    kind: str
    reason: str
    count: int
    cells: int
    examples: str


def reason_rows(rows: list[dict]) -> tuple[list[ReasonRow], str]:
    """Graph-break, recompile and CUDA-graph-skip reasons across the run's compiled cells, most
    frequent first, and a sentence saying how many cells were counted (or that none could be)."""
    kinds = (("graph break", "graph_break_reasons_json"), ("recompile", "recompile_reasons_json"),
             ("CUDA-graph skip", "cudagraph_skip_reasons_json"))
    out = []
    compiled = [r for r in rows if r["mode"] != "eager"]
    known = {k: [r for r in compiled if _json(r.get(col)) is not None] for k, col in kinds}
    for kind, col in kinds:
        counts, cells, names = Counter(), Counter(), {}
        for r in known[kind]:
            for reason, n in _json(r[col]).items():
                counts[reason] += int(n)
                cells[reason] += 1
                names.setdefault(reason, []).append(f"{r['model']} {r['phase']} {r['mode']}")
        for reason, n in counts.most_common():
            ex = sorted(set(names[reason]))
            out.append(ReasonRow(kind, reason, n, cells[reason],
                                 ", ".join(ex[:3]) + (f" and {len(ex) - 3} more" if len(ex) > 3 else "")))
    counted = len(known["graph break"])
    if not compiled:
        summary = "No compiled cells."
    elif counted == 0:
        summary = ("Unknown: these cells carry no reasons (collected before schema version 3, "
                   "or by a torch whose counters could not be read).")
    else:
        summary = f"Reasons counted in {counted} of {len(compiled)} compiled cells."
    return out, summary


@dataclass(frozen=True)
class EfficiencyRow:
    label: str
    gflop: str
    eager_tflops: str
    compiled_tflops: str
    eager_pct: str
    compiled_pct: str
    eager_mj: str
    compiled_mj: str
    energy_ratio: str
    energy_step: str
    power: str
    telemetry: str


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def _pair(a, b, unit: str, digits: int) -> str:
    if stats.missing(a) and stats.missing(b):
        return "-"
    def f(v):  # people's numbers: 1,060, not 1.06e+03
        if stats.missing(v):
            return "-"
        return f"{v:,.0f}" if abs(v) >= 10 ** digits else f"{v:.{digits}g}"
    return f"{f(a)} / {f(b)} {unit}"


def _telemetry(r: dict) -> str:
    """NVML means while timing (both sides): GPU utilisation, SM clock, maximum temperature."""
    parts = [None if stats.missing(r.get("gpu_util_pct")) else f"{r['gpu_util_pct']:.0f}%",
             None if stats.missing(r.get("sm_clock_mhz")) else f"{r['sm_clock_mhz']:.0f} MHz",
             None if stats.missing(r.get("gpu_temp_c")) else f"{r['gpu_temp_c']:.0f} C"]
    return " / ".join(p or "-" for p in parts) if any(parts) else "-"


def _power(r: dict) -> str:
    """Board power: eager / compiled from each side's energy window (v4), else the mean over timing."""
    e, c = r.get("eager_power_w"), r.get("compiled_power_w")
    if not stats.missing(e) and not stats.missing(c):
        return f"{e:.0f} / {c:.0f} W"
    return "-" if stats.missing(r.get("gpu_power_w")) else f"{r['gpu_power_w']:.0f} W"


def efficiency_rows(rows: list[dict], peaks: dict, label) -> list[EfficiencyRow]:
    out = []
    for r in rows:
        if r["mode"] == "eager" or r.get("status") not in ("ok", "accuracy_fail"):
            continue
        _, peak = peak_of(r, peaks)
        flops = r.get("flops_per_step")
        e_t, c_t = r.get("eager_tflops"), r.get("compiled_tflops")
        e_j, c_j = r.get("eager_energy_per_sample_j"), r.get("compiled_energy_per_sample_j")
        if stats.missing(flops) and stats.missing(e_j) and stats.missing(c_j):
            continue

        def tf(v):
            return "-" if stats.missing(v) else f"{v:.2f}" if v < 10 else f"{v:.0f}"

        out.append(EfficiencyRow(
            label(r), "-" if stats.missing(flops) else f"{flops / 1e9:,.1f}", tf(e_t), tf(c_t),
            _pct(e_t / peak) if peak and not stats.missing(e_t) else "-",
            _pct(c_t / peak) if peak and not stats.missing(c_t) else "-",
            "-" if stats.missing(e_j) else _num(e_j * 1e3), "-" if stats.missing(c_j) else _num(c_j * 1e3),
            "-" if stats.missing(e_j) or stats.missing(c_j) or not e_j else f"{c_j / e_j:.2f}x",
            _pair(r.get("eager_energy_per_step_j"), r.get("compiled_energy_per_step_j"), "J", 3),
            _power(r), _telemetry(r)))
    return out


@dataclass(frozen=True)
class SplitRow:
    label: str
    stages: list[str]
    cache: str


def split_rows(rows: list[dict], label, fmt_s, fmt_bytes) -> list[SplitRow]:
    out = []
    for r in rows:
        split = _json(r.get("compile_split_json"))
        aoti = {k: r.get(k) for k in AOTI_COLUMNS if not stats.missing(r.get(k))}
        cache = [r.get("cache_inductor_bytes"), r.get("cache_triton_bytes")]
        written = [c for c in cache if not stats.missing(c)]
        if split is None and not aoti and not written:
            continue
        split = {**(split or {}), **aoti}
        total = sum(written) if written else None
        out.append(SplitRow(label(r), [fmt_s(split.get(k)) for k, _ in SPLIT_STAGES], fmt_bytes(total)))
    return out


def efficiency_chart_rows(rows: list[dict], peaks: dict, label) -> list[dict]:
    """Inputs of charts.efficiency: achieved TFLOP/s per side and the peak that bounds the cell."""
    out = []
    for r in rows:
        key, peak = peak_of(r, peaks)
        if (r["mode"] == "eager" or r.get("status") != "ok" or stats.missing(r.get("eager_tflops"))
                or stats.missing(r.get("compiled_tflops"))):
            continue
        out.append({"label": label(r), "eager": r["eager_tflops"], "compiled": r["compiled_tflops"],
                    "peak_key": key, "peak": peak})
    return out


@dataclass(frozen=True)
class SweepRow:
    label: str
    sizes: str
    first_calls: str
    recompiles: str
    graphs: str


def sweep_rows(rows: list[dict], label) -> list[SweepRow]:
    """The recompile sweep (protocol recompile_sweep): per inference cell, the other batch sizes
    called in the same process after timing, each first call, and the recompiles they cost."""
    out = []
    for r in rows:
        sizes = r.get("sweep_batch_sizes")
        if sizes is None or len(sizes) == 0:
            continue
        calls = r.get("sweep_first_call_s")
        calls = [] if calls is None else list(calls)
        out.append(SweepRow(label(r), ", ".join(str(int(b)) for b in sizes),
                            ", ".join(f"{t:.3f} s" if t < 10 else f"{t:.1f} s" for t in calls),
                            "-" if stats.missing(r.get("sweep_recompile_count")) else str(int(r["sweep_recompile_count"])),
                            "-" if stats.missing(r.get("sweep_graph_count")) else str(int(r["sweep_graph_count"]))))
    return out
