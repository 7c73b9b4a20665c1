"""The kernel profile (protocol `kernel_profile`): where a step's time goes, per side.

After timing, in the cold process only (the replicates and the timed samples never see the
profiler), each side runs a few steps under torch.profiler. On a GPU the device kernels are
aggregated by name (CUDA-graph replays included where the profiler sees inside the graph); on the
CPU, the operators' self time. Per side the record holds the profiled steps, the time per step by
kind of kernel and the largest kernels by name (calls and microseconds per step); on a GPU also the
host side of the same steps, the operators' self CPU time (the profiler's own overhead inflates it:
compare it between runs, not with the timed step):

    {"device": "cuda", "steps": 20, "us_per_step": 5512.3, "kinds": {"triton": 2210.4, ...},
     "kernels": [{"name": ..., "kind": "conv", "calls": 53.0, "us": 3120.7}, ...], "other_us": 12.1,
     "launches": 187.0, "families": {"triton_poi_fused_add_mul": [12.0, 310.2], ...},
     "host": {"us_per_step": 810.2, "ops": [{"name": "cudaGraphLaunch", "kind": "other", ...}, ...]}}

`launches` counts every kernel a step runs (on the CPU: operator calls); `families` groups every
kernel by its name less what a recompile renumbers (contract.kernel_family), calls and us a step.
It is a diagnostic: every failure leaves the figure null with the reason in the cell's log, never
fails the cell. The profiler's own overhead lengthens the profiled steps' wall time, not the kernels'
device time, so only device (or self CPU) time is kept.
"""
from __future__ import annotations

import json
import math
import time

from collector.child.childlog import log
from collector.record.contract import FAMILIES_KEPT, is_annotation, kernel_family

PROFILE_MS = 200.0  # profile about this much step time per side
MIN_STEPS, MAX_STEPS = 3, 50
TOP = 30  # kernels kept by name per side; the rest is summed into other_us
HOST_TOP = 15  # on a GPU, host operators (self CPU time) kept by name per side
MAX_NAME = 200
# (kind, substrings of a lower-cased kernel name), first match wins: cuDNN's convolutions are
# implicit GEMMs, so convolutions are tried before GEMMs
KINDS = (
    ("triton", ("triton",)),
    ("memory", ("memcpy", "memset")),
    ("attention", ("flash", "fmha", "attention", "sdpa")),
    ("conv", ("conv", "fprop", "dgrad", "wgrad", "cudnn", "winograd", "implicit_convolve")),
    ("gemm", ("gemm", "cublas", "cutlass", "nvjet", "matmul", "wgmma", "splitk")),
    ("comm", ("nccl",)),
    ("framework", ("torch-compiled region", "compiledfxgraph", "dynamo", "cudagraph")),
    ("aten", ("at::", "aten::", "pytorch")),
)
CPU_SKIP = ("ProfilerStep", "[memory]")  # bookkeeping events, not work


def kind_of(name: str) -> str:
    """The kind of a kernel (or CPU operator) by its name: triton, memory, attention, conv, gemm,
    comm, framework (torch.compile's own bookkeeping on the host), aten or other."""
    low = name.lower()
    for kind, keys in KINDS:
        if any(k in low for k in keys):
            return kind
    return "other"


def steps_for(step_ms: float) -> int:
    """How many steps to profile: about PROFILE_MS of step time, within [MIN_STEPS, MAX_STEPS]."""
    if not step_ms or step_ms <= 0 or math.isnan(step_ms):
        return MIN_STEPS
    return max(MIN_STEPS, min(MAX_STEPS, math.ceil(PROFILE_MS / step_ms)))


def summarize(events: list[tuple[str, float, int]], steps: int, device: str) -> dict:
    """The record of one side from (name, total microseconds, calls) over `steps` steps."""
    totals: dict[str, list[float]] = {}
    for name, us, calls in events:
        t = totals.setdefault(name[:MAX_NAME], [0.0, 0])
        t[0] += us
        t[1] += calls
    kind = {name: kind_of(name) for name in totals}
    kinds: dict[str, float] = {}
    for name, (us, _) in totals.items():
        kinds[kind[name]] = kinds.get(kind[name], 0.0) + us / steps
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][0])
    top = [{"name": n, "kind": kind[n], "calls": c / steps, "us": us / steps} for n, (us, c) in ranked[:TOP]]
    return {"device": device, "steps": steps, "us_per_step": sum(kinds.values()),
            "kinds": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
            "kernels": top, "other_us": sum(us for _, (us, _) in ranked[TOP:]) / steps,
            "launches": sum(c for _, (_, c) in totals.items()) / steps, "families": families(totals, steps)}


def families(totals: dict, steps: int) -> dict:
    """{family: [calls a step, us a step]} of every kernel (contract.kernel_family), the largest
    FAMILIES_KEPT by time, the rest summed under "(others)"."""
    fam: dict[str, list[float]] = {}
    for name, (us, calls) in totals.items():
        f = fam.setdefault(kernel_family(name), [0.0, 0.0])
        f[0] += calls / steps
        f[1] += us / steps
    ranked = sorted(fam.items(), key=lambda kv: -kv[1][1])
    out = {k: [round(c, 3), round(us, 3)] for k, (c, us) in ranked[:FAMILIES_KEPT]}
    if len(ranked) > FAMILIES_KEPT:
        rest = ranked[FAMILIES_KEPT:]
        out["(others)"] = [round(sum(c for _, (c, _) in rest), 3), round(sum(us for _, (_, us) in rest), 3)]
    return out


def _events(torch, prof, cuda: bool) -> list[tuple[str, float, int]]:
    """(name, total microseconds, calls) of the device kernels (CUDA; not the record_function ranges
    the profiler also puts on the GPU timeline) or the operators' self CPU time."""
    out = []
    for avg in prof.key_averages():
        dev_type = getattr(avg, "device_type", None)
        if cuda:
            if dev_type != torch.autograd.DeviceType.CUDA or getattr(avg, "is_user_annotation", False) \
                    or is_annotation(avg.key):  # a range around kernels on the GPU timeline
                continue
            us = next((getattr(avg, a) for a in ("self_device_time_total", "self_cuda_time_total",
                                                 "device_time_total", "cuda_time_total") if hasattr(avg, a)), 0.0)
        else:
            if dev_type not in (None, torch.autograd.DeviceType.CPU) or avg.key.startswith(CPU_SKIP):
                continue
            us = avg.self_cpu_time_total
        if us and us > 0:
            out.append((avg.key, float(us), int(avg.count)))
    return out


def profile_side(torch, step, steps: int, cuda: bool, sync) -> dict:
    """Profile `steps` calls of `step` (one unprofiled call first) and summarize them."""
    from torch.profiler import ProfilerActivity, profile

    step()
    sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        sync()
    rec = summarize(_events(torch, prof, cuda), steps, "cuda" if cuda else "cpu")
    if cuda:  # the same profile's host side: what issuing the kernels cost, by operator (self CPU time)
        host = summarize(_events(torch, prof, False), steps, "cpu")
        rec["host"] = {"us_per_step": host["us_per_step"], "ops": host["kernels"][:HOST_TOP]}
    return rec


def profile_sides(torch, sides: list[tuple[str, object]], step_ms: dict, cuda: bool, sync) -> str | None:
    """The kernel profile of every side as JSON ({side: record}), or None (the reason is logged)."""
    found = {}
    for side, step in sides:
        t0 = time.perf_counter()
        try:
            found[side] = profile_side(torch, step, steps_for(step_ms.get(side, 0.0)), cuda, sync)
        except Exception as exc:  # a diagnostic: never fail the cell
            log(f"kernel profile of the {side} side failed: {type(exc).__name__}: {str(exc)[:200]}")
            return None
        rec = found[side]
        log(f"kernel profile, {side}: {rec['steps']} steps, {rec['us_per_step'] / 1e3:.3f} ms of "
            f"{'kernels' if cuda else 'operator self time'} a step ({len(rec['kernels'])} names kept) in "
            f"{time.perf_counter() - t0:.2f} s")
    return json.dumps(found, sort_keys=True)
