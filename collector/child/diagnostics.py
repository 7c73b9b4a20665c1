"""Why a compiled cell is as fast as it is: graphs, graph breaks, recompiles, CUDA-graph skips,
the kernels Inductor generated and the compile-time split, read from Dynamo's counters and compilation metrics.

These are private APIs that change between torch releases, so every read is here and
each one degrades to None ("unknown") when this torch lacks it: never a crash, never
a zero that was not counted. Use it as differences around the cell's own compile:

    before = snapshot(torch); ...compile and warm up...; found = since(torch, before)
"""
from __future__ import annotations

import json
import logging
from collections import Counter

MAX_REASON_CHARS = 300
UNLOGGED = "reason not logged (Inductor skips CPU graphs silently)"
# CompilationMetrics fields (microseconds, cumulative and nested: Dynamo includes AOTAutograd,
# which includes Inductor, which includes code generation) -> our names, in seconds
SPLIT_FIELDS = {
    "dynamo_cumulative_compile_time_us": "dynamo",
    "aot_autograd_cumulative_compile_time_us": "aot_autograd",
    "inductor_cumulative_compile_time_us": "inductor",
    "inductor_code_gen_cumulative_compile_time_us": "inductor_codegen",
    "triton_compile_time_us": "triton",
    "compile_time_autotune_time_us": "autotune",
    "backward_cumulative_compile_time_us": "backward",
}


def _counter(torch, group: str) -> dict | None:
    try:
        return dict(torch._dynamo.utils.counters[group])
    except Exception:
        return None


def _kernels(torch) -> int | None:
    """Inductor's count of the kernels it has generated in this process (Triton or C++; an FX-graph
    cache hit adds the count saved with the graph, so a warm compile counts the same kernels)."""
    try:
        import importlib

        return int(importlib.import_module(f"{torch.__name__}._inductor.metrics").generated_kernel_count)
    except Exception:
        return None


def _metrics(torch) -> list | None:
    try:
        return list(torch._dynamo.utils.get_compilation_metrics())
    except Exception:
        return None


class _Captured(logging.Handler):
    """Keeps the messages of Inductor's CUDA-graph logger: each skip is logged with its reason."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.messages.append(record.getMessage())
        except Exception:
            pass


_SKIPS: _Captured | None = None


def _skip_log(torch) -> _Captured | None:
    """Attach (once) to the logger that `log_cudagraph_skip_and_bump_counter` writes to."""
    global _SKIPS
    try:
        import importlib

        logger = importlib.import_module(f"{torch.__name__}._inductor.cudagraph_utils").cudagraphs_log
    except Exception:
        return None
    if not isinstance(logger, logging.Logger):
        return None
    if _SKIPS is None:
        _SKIPS = _Captured()
    if _SKIPS not in logger.handlers:
        logger.addHandler(_SKIPS)
    return _SKIPS


def snapshot(torch) -> dict:
    """The counters and the number of compilation records now (None where unreadable)."""
    metrics = _metrics(torch)
    skips = _skip_log(torch)
    return {"stats": _counter(torch, "stats"), "graph_break": _counter(torch, "graph_break"),
            "inductor": _counter(torch, "inductor"), "kernels": _kernels(torch), "n_metrics": None if metrics is None else len(metrics),
            "n_skip_messages": None if skips is None else len(skips.messages)}


def _short(reason) -> str:
    text = " ".join(str(reason).split())
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS - 3] + "..."


def _delta(after: dict | None, before: dict | None, key: str) -> int | None:
    if after is None or before is None:
        return None
    return int(after.get(key, 0)) - int(before.get(key, 0))


def since(torch, before: dict) -> dict:
    """What happened since `before`; each value None where this torch could not tell."""
    now = snapshot(torch)
    out: dict = {"graph_count": _delta(now["stats"], before["stats"], "unique_graphs")}
    out["kernel_count"] = (None if now["kernels"] is None or before.get("kernels") is None
                           else now["kernels"] - before["kernels"])
    gb_now, gb_before = now["graph_break"], before["graph_break"]
    if gb_now is None or gb_before is None:
        out["graph_break_count"] = out["graph_break_reasons"] = None
    else:
        reasons = {_short(k): int(v) - int(gb_before.get(k, 0)) for k, v in gb_now.items()}
        reasons = {k: v for k, v in reasons.items() if v > 0}
        out["graph_break_count"] = sum(reasons.values())
        out["graph_break_reasons"] = reasons
    out["cudagraph_skip_count"] = _delta(now["inductor"], before["inductor"], "cudagraph_skips")
    logged = None
    if before.get("n_skip_messages") is not None and _SKIPS is not None and _skip_log(torch) is _SKIPS:
        logged = dict(Counter(_short(m) for m in _SKIPS.messages[before["n_skip_messages"]:]))
    metrics = _metrics(torch)
    if metrics is None or before["n_metrics"] is None or len(metrics) < before["n_metrics"]:
        out.update(recompile_count=None, recompile_reasons=None, cudagraph_skip_reasons=logged, compile_split=None)
        return out
    new = metrics[before["n_metrics"]:]
    recompiles = Counter(_short(r) for r in (getattr(m, "recompile_reason", None) for m in new) if r)
    has_recompile = all(hasattr(m, "recompile_reason") for m in new)
    out["recompile_count"] = sum(recompiles.values()) if has_recompile else None
    out["recompile_reasons"] = dict(recompiles) if has_recompile else None
    if logged is not None:
        unlogged = (out["cudagraph_skip_count"] or 0) - sum(logged.values())
        if unlogged > 0:  # Inductor bumps the counter without a message for graphs on the CPU
            logged[UNLOGGED] = unlogged
        out["cudagraph_skip_reasons"] = logged
    elif all(hasattr(m, "cudagraph_skip_reason") for m in new):
        out["cudagraph_skip_reasons"] = dict(Counter(_short(m.cudagraph_skip_reason) for m in new
                                                     if m.cudagraph_skip_reason))
    else:
        out["cudagraph_skip_reasons"] = None
    split = {}
    for field, name in SPLIT_FIELDS.items():
        values = [getattr(m, field, None) for m in new]
        known = [v for v in values if v is not None]
        if known:
            split[name] = sum(known) / 1e6
    out["compile_split"] = split or None
    return out


def to_row(found: dict) -> dict:
    """Row columns (collector.record.schema) from `since`: dicts become JSON text, unknown stays null."""
    def js(value):
        return None if value is None else json.dumps(value, sort_keys=True)

    return {"graph_count": found.get("graph_count"), "kernel_count": found.get("kernel_count"),
            "graph_break_count": found.get("graph_break_count"),
            "graph_break_reasons_json": js(found.get("graph_break_reasons")),
            "recompile_count": found.get("recompile_count"),
            "recompile_reasons_json": js(found.get("recompile_reasons")),
            "cudagraph_skip_count": found.get("cudagraph_skip_count"),
            "cudagraph_skip_reasons_json": js(found.get("cudagraph_skip_reasons")),
            "compile_split_json": js(found.get("compile_split"))}


def activity(torch) -> tuple | None:
    """Totals of Dynamo's stats, frames, AOTAutograd and Inductor counters: unchanged across a
    call means that call compiled nothing (the warm-up loop stops on it). None if unreadable."""
    try:
        c = torch._dynamo.utils.counters
        return tuple(sum(c[k].values()) for k in ("stats", "frames", "aot_autograd", "inductor"))
    except Exception:
        return None


def compile_times(torch) -> dict:
    """Dynamo's compile-time totals by phase in seconds (entire_frame_compile, inductor_compile,
    entire_backward_compile, ...); {} where this torch cannot tell."""
    try:
        return {k: float(v) for k, v in torch._dynamo.utils.calculate_time_spent().items()}
    except Exception:
        return {}


def inductor_cache_counters(torch) -> dict:
    """Inductor's cache counters (FX-graph cache hits and misses, ...); {} if unreadable."""
    return {k: v for k, v in (_counter(torch, "inductor") or {}).items() if "cache" in k}


def count_flops(torch, step) -> float | None:
    """FLOPs of one call of `step`, counted by torch's FlopCounterMode (None if it cannot)."""
    try:
        from torch.utils.flop_counter import FlopCounterMode

        mode = FlopCounterMode(display=False)
        with mode:
            step()
        return float(mode.get_total_flops())
    except Exception:
        return None
