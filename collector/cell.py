"""Measure one cell in this fresh process (the protocol of DESIGN.md).

    python -m collector.cell SPEC.json RESULT.json

SPEC holds the cell, the protocol and the device; RESULT receives the measured
columns of the Parquet row (collector.schema), including a status and error
text when something fails. The parent adds identity and writes the Parquet.
"""
from __future__ import annotations

import contextlib
import faulthandler
import json
import math
import os
import statistics
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from collector import childlog, diagnostics, models, modes
from collector.childlog import _partial, log
from collector.hygiene import _descendants, host_hygiene  # noqa: F401 - tests reach them here
from collector.plant import _planted, calibrate_plant, plant_slowdown  # noqa: F401



PARTIAL_NAME = "partial.json"  # beside the result file: what the cell had measured at its last logged step




# Correctness (docs/measurement.md): compiled and eager are both compared with a float64
# run of the same step; compiled passes if its relative L2 error is at most
# max(ERROR_MULTIPLIER x eager's error, TOLERANCE[dtype]).
TOLERANCE = {"float32": 1e-3, "float32+tf32": 1e-2, "bfloat16": 5e-2, "amp_bf16": 5e-2,
             "float16": 1e-2, "amp_fp16": 1e-2}
ERROR_MULTIPLIER = 3.0
MAX_STEPS_PER_BLOCK = 500
ENERGY_WINDOW_S = 1.0  # energy: each side runs back to back for at least this long (the counter is coarse)


class ExportError(RuntimeError):
    """torch.export (mode aot-inductor) could not capture the model: status export_error."""


class Stage:
    """Which part of the protocol is running, so an exception can be classified."""
    name = "setup"


# How running out of memory reads, wherever it strikes: Python (MemoryError), CUDA, libtorch's
# allocator and its mmap of a shared segment, C++ (std::bad_alloc inside Dynamo or inductor), the OS.
OOM_MARKERS = ("memoryerror", "outofmemoryerror", "out of memory", "can't allocate memory",
               "cannot allocate memory", "bad_alloc", "failed to map segment", "errno 12", "enomem")


def looks_like_oom(text: str) -> bool:
    """Whether an error text (or a crashed process's log tail) is an out-of-memory failure."""
    text = text.lower()
    return any(m in text for m in OOM_MARKERS)


def classify(exc: BaseException, stage: str) -> str:
    """Map an exception to a row status: out of memory is `oom` in every stage."""
    text = f"{type(exc).__name__} {exc}"
    if isinstance(exc, ExportError):
        return "export_error"
    if isinstance(exc, MemoryError) or looks_like_oom(text):
        return "oom"
    if stage == "compile":
        return "compile_error"
    return "runtime_error"


def _tree_tensors(obj):
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(obj) if isinstance(t, torch.Tensor)]


def rel_l2(actual: list, expected: list) -> float:
    """||actual - expected|| / ||expected|| over all tensors together (nan if shapes differ)."""
    import torch

    if len(actual) != len(expected) or not expected:
        return float("nan")
    num = den = 0.0
    for a, e in zip(actual, expected):
        if a is None or e is None or a.shape != e.shape:
            return float("nan")
        a, e = a.detach().double(), e.detach().double()
        num += torch.sum((a - e) ** 2).item()
        den += torch.sum(e ** 2).item()
    return (num ** 0.5) / max(den ** 0.5, 1e-30)


def _within(got: float, eager: float | None, tol: float) -> bool:
    """Compiled error `got` passes if it is a number <= max(tol, ERROR_MULTIPLIER x eager's error)."""
    allowed = tol if eager is None or eager != eager else max(tol, ERROR_MULTIPLIER * eager)
    return got == got and got <= allowed  # got == got: not nan


def _setup(job):
    """Import torch, apply precision settings, build the model on the device: (torch, parts)."""
    import torch

    cell, proto = job.cell, job.protocol
    torch.manual_seed(proto.seed)
    torch.backends.cuda.matmul.allow_tf32 = proto.tf32
    torch.backends.cudnn.allow_tf32 = proto.tf32
    name, opts = models.parse_ref(cell.model)
    built = models.spec(name).build(cell.batch_size, opts)
    dev = torch.device(job.device)
    module = built.module.to(dev)
    inputs = [x.to(dev) for x in built.inputs]
    dtype = cell.dtype
    if dtype in ("bfloat16", "float16"):
        low = getattr(torch, dtype)
        module = module.to(low)
        inputs = [x.to(low) if i in built.float_inputs else x for i, x in enumerate(inputs)]
    target = built.target.to(dev)
    module.train(cell.phase == "train")
    amp = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}.get(dtype)

    def autocast():
        return torch.autocast(dev.type, dtype=amp) if amp else contextlib.nullcontext()

    return torch, dev, module, inputs, target, built.loss, autocast, built.float_inputs


def _aoti_step(torch, module, inputs, autocast, record: dict):
    """A step that, on its first call, exports the model (torch.export), compiles it into an
    AOTInductor package, loads it, and runs it; later calls run the loaded package. The stages'
    times go into `record` (aot_export_s, aot_compile_s, aot_load_s)."""
    state: dict = {}

    class Exported(torch.nn.Module):  # autocast inside forward, so export captures it
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *xs):
            with autocast():
                return self.inner(*xs)

    def step():
        if "run" not in state:
            t0 = time.perf_counter()
            try:
                with torch.no_grad():
                    program = torch.export.export(Exported(module), tuple(inputs))
            except Exception as exc:
                raise ExportError(f"torch.export failed: {type(exc).__name__}: {exc}") from exc
            t1 = time.perf_counter()
            record["aot_export_s"] = t1 - t0
            log(f"exported in {t1 - t0:.1f} s; AOTInductor compile")
            folder = Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or ".") / "aoti"
            folder.mkdir(parents=True, exist_ok=True)
            package = torch._inductor.aoti_compile_and_package(program, package_path=str(folder / "model.pt2"))
            t2 = time.perf_counter()
            record["aot_compile_s"] = t2 - t1
            log(f"AOTInductor package built in {t2 - t1:.1f} s; loading")
            state["run"] = torch._inductor.aoti_load_package(package)
            record["aot_load_s"] = time.perf_counter() - t2
            log("package loaded; first run")
        with torch.no_grad():
            return state["run"](*inputs)
    return step


@dataclass
class Sides:
    """The two sides of a cell. They share no mutable state that running one side changes: in
    training the compiled side has its own copy of the model (same initial weights) and its own
    optimizer, so its optimizer state (AdamW's `step` tensors, which a compiled step moves to the
    device), its weights and its gradients never reach the eager side. Inference shares the
    module: no_grad in eval mode changes nothing in it."""

    eager: Callable[[], object]
    compiled: Callable[[], object] | None
    eager_module: object
    compiled_module: object
    eager_opt: object
    compiled_opt: object


def _make_sides(torch, job, module, inputs, target, loss_fn, autocast, record: dict) -> Sides:
    """Both sides' steps. Each step returns its output or loss; `record` receives the
    aot-inductor stage times."""
    import copy

    cell = job.cell
    mode, phase, scope = modes.spec(cell.mode), cell.phase, cell.compile_scope
    dynamic = {"auto": None, "true": True, "false": False}[cell.dynamic]

    def compile_(fn):
        return torch.compile(fn, mode=mode.compile_mode, dynamic=dynamic)

    mark = (torch.compiler.cudagraph_mark_step_begin
            if mode.cudagraphs and job.device == "cuda" else (lambda: None))

    def infer_with(fn):
        def step():
            with torch.no_grad(), autocast():
                return fn(*inputs)
        return step

    def train_body(opt, fn):
        def body():
            opt.zero_grad(set_to_none=True)
            with autocast():
                loss = loss_fn(fn(*inputs), target)
            loss.backward()
            opt.step()
            return loss.detach()
        return body

    if phase == "infer":
        eager = infer_with(module)
        if mode.kind == "aot":
            compiled = _aoti_step(torch, module, inputs, autocast, record)
        else:
            compiled = infer_with(compile_(module)) if mode.compiles else None
        return Sides(eager, compiled, module, module, None, None)
    # the compiled side's copy is taken before any step runs: both start from the same weights
    cmodule = copy.deepcopy(module) if mode.compiles else None
    opt = torch.optim.AdamW(module.parameters(), lr=1e-5)
    eager = train_body(opt, module)
    if not mode.compiles:
        return Sides(eager, None, module, None, opt, None)
    copt = torch.optim.AdamW(cmodule.parameters(), lr=1e-5)
    inner = train_body(copt, compile_(cmodule)) if scope == "model" else compile_(train_body(copt, cmodule))

    def compiled():
        mark()
        return inner()
    return Sides(eager, compiled, module, cmodule, opt, copt)


def _capture(torch, out, module, phase):
    """Clones of the step's outputs and (training) the gradients, for the correctness check."""
    outs = [t.detach().clone() for t in _tree_tensors(out)]
    grads = ([None if p.grad is None else p.grad.detach().clone() for p in module.parameters()]
             if phase == "train" else [])
    return outs, grads


def _reference64(torch, module, inputs, target, loss_fn, float_inputs, phase):
    """Outputs (and gradients) of one step of a float64 copy of the model, without autocast."""
    import copy

    ref = copy.deepcopy(module).double()
    x = [t.double() if i in float_inputs else t for i, t in enumerate(inputs)]
    try:
        if phase == "infer":
            with torch.no_grad():
                return [t.detach().clone() for t in _tree_tensors(ref(*x))], []
        loss = loss_fn(ref(*x), target)  # a train step's output is its loss
        loss.backward()
        return _capture(torch, loss.detach(), ref, phase)
    finally:
        del ref


def _energy_window(side, step, median_ms, clock, monitor, result) -> None:
    """Energy of one side: steps back to back for at least ENERGY_WINDOW_S, the GPU's energy
    counter read once before and once after (synchronised): joules, steps and seconds.

    The step count is first estimated from the timed median; back-to-back steps can run faster
    than timed ones (no synchronisation between them, the host runs ahead), so the window is
    extended in further chunks until it has really lasted ENERGY_WINDOW_S."""
    n = max(1, math.ceil(ENERGY_WINDOW_S * 1e3 / max(median_ms, 1e-3)))
    clock.sync()
    e0, t0 = monitor.energy_j(), time.perf_counter()
    steps = 0
    while True:
        for _ in range(n):
            step()
        steps += n
        clock.sync()
        secs = time.perf_counter() - t0
        if secs >= ENERGY_WINDOW_S:
            break
        # the steps still needed at the rate seen so far, 10% over
        n = max(1, math.ceil((ENERGY_WINDOW_S - secs) * steps / max(secs, 1e-9) * 1.1))
    e1 = monitor.energy_j()
    if e0 is not None and e1 is not None:
        result.update({f"{side}_energy_j": e1 - e0, f"{side}_energy_steps": steps, f"{side}_energy_window_s": secs})
    log(f"energy window {side}: {steps} steps in {secs:.2f} s" + (f", {e1 - e0:.1f} J" if e0 is not None
                                                                  and e1 is not None else ""))


SWEEP_FACTORS = (2, 4, 0.5)  # batch sizes tried after the timed one, in this order


def _recompile_sweep(torch, job, dev, inputs, float_inputs, compiled_step, clock, result) -> None:
    """In this process, after timing: call the compiled step at other batch sizes (x2, x4, /2) and
    record each first call's time and how many recompiles the sweep cost (inference cells).
    What it shows depends on `dynamic`: false recompiles for every size; true should not; the
    default (auto) recompiles once, then marks the batch dimension dynamic."""
    cell = job.cell
    name, opts = models.parse_ref(cell.model)
    sizes = []
    for factor in SWEEP_FACTORS:
        bs = max(1, int(cell.batch_size * factor))
        if bs != cell.batch_size and bs not in sizes:
            sizes.append(bs)
    original = list(inputs)
    before = diagnostics.snapshot(torch)
    times = []
    try:
        for bs in sizes:
            built = models.spec(name).build(bs, opts)
            new = [x.to(dev) for x in built.inputs]
            if cell.dtype in ("bfloat16", "float16"):
                low = getattr(torch, cell.dtype)
                new = [x.to(low) if i in float_inputs else x for i, x in enumerate(new)]
            inputs[:] = new  # the steps read this list
            clock.sync()
            t0 = time.perf_counter()
            compiled_step()
            clock.sync()
            times.append(time.perf_counter() - t0)
    finally:
        inputs[:] = original
    found = diagnostics.since(torch, before)
    result.update(sweep_batch_sizes=[float(b) for b in sizes], sweep_first_call_s=times,
                  sweep_recompile_count=found.get("recompile_count"),
                  sweep_graph_count=found.get("graph_count"))
    log(f"recompile sweep over batch sizes {sizes}: first calls {[round(t, 3) for t in times]} s, "
        f"recompiles {found.get('recompile_count')}")


def _save_portable(torch, path: Path, result: dict) -> None:
    """Save this process's compile artifacts (torch.compiler.save_cache_artifacts) to `path`."""
    save = getattr(torch.compiler, "save_cache_artifacts", None)
    if save is None:
        log("this torch has no torch.compiler.save_cache_artifacts: no portable-cache figure")
        return
    try:
        saved = save()
    except Exception as exc:  # a figure we cannot take stays null
        log(f"save_cache_artifacts failed: {type(exc).__name__}: {exc}")
        return
    if saved:
        blob = saved[0]
        path.write_bytes(blob)
        result["portable_cache_bytes"] = len(blob)


def time_blocks(sides: list, blocks: int, spb: int, k: int, clock, between=lambda: None,
                on_block=lambda side: None) -> dict:
    """The timed region: `blocks` rounds, each side's block in turn (ABAB: drift in clocks or load
    hits both sides equally). Per side: samples (ms a step), enqueue times, wall per step of each
    block, and the seconds spent. `between` runs after each round, outside the timed blocks
    (telemetry); `on_block(side)` after each block (peak memory)."""
    samples = {s: {"step": [], "enq": [], "wall": [], "secs": 0.0} for s, _ in sides}
    for _ in range(blocks):
        for side, step in sides:
            rec = samples[side]
            w0 = time.perf_counter()
            blk = clock.block(step, spb, k)
            rec["secs"] += time.perf_counter() - w0
            rec["step"] += blk.step_ms
            rec["enq"] += blk.enqueue_ms
            rec["wall"].append(blk.wall_ms_per_step)
            on_block(side)
        between()
    return samples


def _warm_compiled(torch, step, mode: str, max_calls: int) -> int:
    """Call the compiled step (first call already made) until no compile event occurs; at least the
    mode's minimum (3 for CUDA-graph modes: warm-up, record, replay). Returns the calls made, first
    included."""
    calls, min_calls = 1, modes.spec(mode).min_warmup_calls
    while calls < max_calls:
        seen = diagnostics.activity(torch)
        step()
        calls += 1
        if calls >= min_calls and diagnostics.activity(torch) == seen:
            break
    return calls


@dataclass
class CellRun:
    """What the stages of one cell process share: the job, torch and the device, the clock, the
    model's two sides, the result being filled (partial results survive a failure), and what the
    cold process carries from one stage to the next for the correctness check."""

    job: object  # collector.job.Job
    result: dict
    stage: Stage
    torch: object
    dev: object
    clock: object
    sides: Sides
    inputs: object
    float_inputs: object
    module: object
    target: object
    loss_fn: object
    ref64: object = None
    ref_out_eager: object = None
    ref_grads: object = None
    got_out: object = None
    got_grads: object = None

    @property
    def cuda(self) -> bool:
        return self.dev.type == "cuda"

    @property
    def cold(self) -> bool:
        return self.job.kind == "cold"

    def first_call(self, step):
        """(output, seconds) of one synchronised call, the peak memory counters reset before it."""
        self.clock.sync()
        if self.cuda:
            self.torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        out = step()
        self.clock.sync()
        return out, time.perf_counter() - t0

    def peaks(self) -> tuple[int, int]:
        return self.torch.cuda.max_memory_allocated(), self.torch.cuda.max_memory_reserved()


def measure(spec: dict, result: dict, stage: Stage) -> None:
    """Run the job `spec` (collector.job.Job as JSON), filling `result` as it goes (partial
    results survive a failure): its stages, in order."""
    from collector.job import Job

    job = Job.from_json(spec)
    if _needs_missing(job, result):
        return
    run = _start(job, result, stage)
    if job.kind == "portable":
        return _portable_first_call(run)
    if job.kind == "warm":
        return _warm_first_call(run)
    _reference(run)
    _eager_first_call(run)
    _compile(run)
    _timing(run)
    _sweep(run)
    _final_status(run)


def _needs_missing(job, result: dict) -> bool:
    """A model whose requirements are not installed: a skipped row (True)."""
    name, _ = models.parse_ref(job.cell.model)
    missing = models.missing_requirements(name)
    if missing:
        result.update(status="skipped", error=f"needs {', '.join(missing)} (not installed)")
    return bool(missing)


def _start(job, result: dict, stage: Stage) -> CellRun:
    """Import torch, build the model, the inputs, the clock and both sides."""
    log(f"setup ({job.kind} process{'' if job.kind != 'replicate' else f' {job.replicate}'})")
    torch, dev, module, inputs, target, loss_fn, autocast, float_inputs = _setup(job)
    log(f"torch imported, model built on {dev}")
    from collector.timing import CpuClock, CudaClock

    clock = CudaClock(torch) if dev.type == "cuda" else CpuClock()
    result["timing_method"] = clock.method
    t_sides = time.perf_counter()
    sides = _make_sides(torch, job, module, inputs, target, loss_fn, autocast, result)
    log(f"sides built in {time.perf_counter() - t_sides:.2f} s")
    return CellRun(job, result, stage, torch, dev, clock, sides, inputs, float_inputs, module, target,
                   loss_fn)


def _portable_first_call(run: CellRun) -> None:
    """An empty cache directory plus the saved artifacts: the first call alone."""
    torch, result = run.torch, run.result
    run.stage.name = "compile"
    blob = Path(run.job.portable_from).read_bytes()
    t0 = time.perf_counter()
    torch.compiler.load_cache_artifacts(blob)
    result["portable_load_s"] = time.perf_counter() - t0
    _, result["portable_first_call_compiled_s"] = run.first_call(run.sides.compiled)
    hits = diagnostics.inductor_cache_counters(torch)
    log(f"portable: loaded in {result['portable_load_s']:.3f} s, first call "
        f"{result['portable_first_call_compiled_s']:.2f} s; inductor cache counters {hits}")
    result["status"] = "ok"


def _warm_first_call(run: CellRun) -> None:
    """The warm-cache first call alone (one process a cell)."""
    run.stage.name = "compile"
    _, run.result["warm_first_call_compiled_s"] = run.first_call(run.sides.compiled)
    run.result["warm_compile_dynamo_s"] = diagnostics.compile_times(run.torch).get("entire_frame_compile")
    run.result["status"] = "ok"


def _reference(run: CellRun) -> None:
    """The cold process: a float64 run of the step, the reference of the correctness check."""
    if not (run.cold and run.sides.compiled is not None):
        return
    torch, result = run.torch, run.result
    run.stage.name = "reference"
    try:
        run.ref64 = _reference64(torch, run.module, run.inputs, run.target, run.loss_fn, run.float_inputs,
                                 run.job.cell.phase)
        result["accuracy_reference"] = "float64"
    except Exception as exc:  # some ops lack float64 kernels: fall back to eager as reference
        log(f"float64 reference failed ({type(exc).__name__}: {exc}); comparing with eager")
        result["accuracy_reference"] = "eager"
    if run.cuda:
        torch.cuda.empty_cache()
    log("float64 reference done")


def _eager_first_call(run: CellRun) -> None:
    """Eager's first call, its cold peaks, the outputs and gradients to check against, warm-up."""
    result, proto, eager_step = run.result, run.job.protocol, run.sides.eager
    run.stage.name = "eager"
    out, result["first_call_eager_s"] = run.first_call(eager_step)
    if run.cuda and run.cold:
        result["eager_cold_peak_allocated_bytes"], result["eager_cold_peak_reserved_bytes"] = run.peaks()
    # outputs and gradients for the correctness check (the cold process only)
    if run.cold:
        run.ref_out_eager, run.ref_grads = _capture(run.torch, out, run.module, run.job.cell.phase)
    for _ in range(proto.warmup_steps):
        eager_step()
    if run.cold:
        result["flops_per_step"] = diagnostics.count_flops(run.torch, eager_step)  # one more eager step, counted
    log(f"eager first call {result['first_call_eager_s']:.2f} s, warmed up")


def _compile(run: CellRun) -> None:
    """The compiled side's first call (cold or warm cache), warm-up until no compile event occurs,
    the compile-time split, diagnostics, the portable artifacts and the correctness check."""
    compiled_step = run.sides.compiled
    if compiled_step is None:
        return
    torch, result, proto, cell, cold = run.torch, run.result, run.job.protocol, run.job.cell, run.cold
    run.stage.name = "compile"
    before = diagnostics.snapshot(torch)
    out, first_s = run.first_call(compiled_step)
    result["first_call_compiled_s" if cold else "warm_first_call_compiled_s"] = first_s
    log(f"compiled first call {first_s:.2f} s ({'cold' if cold else 'warm'} cache)")
    if cold:
        run.got_out, run.got_grads = _capture(torch, out, run.sides.compiled_module, cell.phase)
    calls = _warm_compiled(torch, compiled_step, cell.mode, proto.max_warmup_calls)
    run.clock.sync()
    if run.cuda and cold:
        result["compiled_cold_peak_allocated_bytes"], result["compiled_cold_peak_reserved_bytes"] = run.peaks()
    result["warmup_calls_compiled"] = calls
    times = diagnostics.compile_times(torch)
    if cold:
        result["compile_times_json"] = json.dumps(times, sort_keys=True)
        result["compile_dynamo_s"] = times.get("entire_frame_compile")
        result["compile_inductor_s"] = times.get("inductor_compile")
        result["compile_backward_s"] = times.get("entire_backward_compile")
        result.update(diagnostics.to_row(diagnostics.since(torch, before)))
        if run.job.portable_path:
            _save_portable(torch, Path(run.job.portable_path), result)
    else:
        result["warm_compile_dynamo_s"] = times.get("entire_frame_compile")
    run.stage.name = "compiled"
    for _ in range(proto.warmup_steps):
        compiled_step()
    if cold:
        _check_accuracy(run.job, run.cuda, run.ref64, run.ref_out_eager, run.ref_grads, run.got_out,
                        run.got_grads, result)
        log(f"compiled warmed up in {calls} calls; accuracy ok={result['accuracy_ok']}")
    else:
        log(f"compiled warmed up in {calls} calls")


def _layout(run: CellRun) -> tuple[int, int]:
    """(samples per block, steps per sample): the cold process's for a replicate, else long enough
    blocks (a block lasts at least min_block_ms, estimated from a short eager block)."""
    job, proto = run.job, run.job.protocol
    if job.layout is not None:
        return job.layout.steps_per_block, job.layout.steps_per_sample
    est_ms = statistics.median(run.clock.block(run.sides.eager, 3).step_ms)
    k = max(1, math.ceil(proto.min_sample_ms / max(est_ms, 1e-3)))  # steps per sample
    spb = max(proto.steps_per_block,  # samples per block
              min(MAX_STEPS_PER_BLOCK, math.ceil(proto.min_block_ms / max(est_ms * k, 1e-3))))
    return spb, k


def _timing(run: CellRun) -> None:
    """Host hygiene, the block layout, a planted slowdown if asked, then eager and compiled timed in
    alternating blocks with peak memory per side and NVML telemetry between rounds; energy."""
    torch, result, proto, cuda, clock = run.torch, run.result, run.job.protocol, run.cuda, run.clock
    eager_step, compiled_step = run.sides.eager, run.sides.compiled
    run.stage.name = "timing"
    t_h = time.perf_counter()
    result["hygiene"] = ",".join(host_hygiene(torch) + ["telemetry-between-blocks"])
    log(f"host hygiene ({result['hygiene']}) in {time.perf_counter() - t_h:.2f} s")
    spb, k = _layout(run)
    result["steps_per_block"], result["steps_per_sample"] = spb, k
    if compiled_step is not None and proto.plant_slowdown_pct:
        result["planted_slowdown_pct"] = float(proto.plant_slowdown_pct)
        compiled_step = plant_slowdown(torch, cuda, compiled_step, proto.plant_slowdown_pct, clock, result,
                                       spb, k, run.job.layout.planted_delay_ms if run.job.layout else None)
    sides_list = [("eager", eager_step)] + ([("compiled", compiled_step)] if compiled_step else [])
    peak = {s: (0, 0) for s, _ in sides_list}
    monitor = None
    if cuda:
        from collector.nvml import NvmlMonitor

        t_n = time.perf_counter()
        monitor = NvmlMonitor.open(str(torch.cuda.get_device_properties(run.dev).uuid))
        log(f"NVML {'opened' if monitor else 'not available'} in {time.perf_counter() - t_n:.2f} s")

    def on_block(side):
        if cuda:
            peak[side] = tuple(max(a, b) for a, b in zip(peak[side], run.peaks()))
            torch.cuda.reset_peak_memory_stats()

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    # telemetry: one NVML reading after each round of blocks, outside the timed region (a sampling
    # thread would compete with a launch-bound step for the host and the GIL)
    t_t = time.perf_counter()
    samples = time_blocks(sides_list, proto.blocks, spb, k, clock,
                          between=monitor.sample if monitor else (lambda: None), on_block=on_block)
    windows = ", ".join(f"{side} {rec['secs']:.2f} s" for side, rec in samples.items())
    log(f"timed {proto.blocks} blocks x {spb} samples x {k} steps per side ({windows}; "
        f"{time.perf_counter() - t_t:.2f} s with the telemetry between rounds)")
    if monitor:
        tel = monitor.stop()
        result.update(gpu_util_pct=tel.gpu_util_pct, gpu_power_w=tel.gpu_power_w,
                      sm_clock_mhz=tel.sm_clock_mhz, gpu_temp_c=tel.gpu_temp_c)
    if run.cold and monitor is not None and monitor.energy_j() is not None:
        for side, step in sides_list:  # the energy counter is read directly, before and after
            _energy_window(side, step, statistics.median(samples[side]["step"]), clock, monitor, result)
    for side, rec in samples.items():
        result[f"{side}_step_ms"] = rec["step"]
        result[f"{side}_enqueue_ms"] = rec["enq"] if cuda else None
        result[f"{side}_block_wall_ms"] = rec["wall"]
        if cuda:
            result[f"{side}_peak_allocated_bytes"], result[f"{side}_peak_reserved_bytes"] = peak[side]


def _sweep(run: CellRun) -> None:
    """Inference, cold process, if asked: other batch sizes in this process, recompiles counted."""
    cell, proto = run.job.cell, run.job.protocol
    if run.cold and proto.recompile_sweep and run.sides.compiled is not None and cell.phase == "infer":
        run.stage.name = "sweep"
        _recompile_sweep(run.torch, run.job, run.dev, run.inputs, run.float_inputs, run.sides.compiled, run.clock,
                         run.result)


def _final_status(run: CellRun) -> None:
    """ok, or accuracy_fail with what differed."""
    result = run.result
    ok = result.get("accuracy_ok", True)
    result["status"] = "ok" if ok else "accuracy_fail"
    if not ok:
        result["error"] = (f"compiled differs from the {result.get('accuracy_reference', 'eager')} reference: "
                           f"output rel. L2 error {result['output_rel_err']:.3g} (eager "
                           f"{result.get('eager_output_rel_err')}), gradients {result.get('grad_rel_err')} (eager "
                           f"{result.get('eager_grad_rel_err')}); allowed max({result['tolerance']:.0e}, "
                           f"{ERROR_MULTIPLIER:g} x eager)")


def _check_accuracy(job, cuda, ref64, ref_out_eager, ref_grads, got_out, got_grads, result) -> None:
    """Compiled against the float64 reference (or eager where there is none): errors, tolerance
    and accuracy_ok into `result`."""
    cell, proto = job.cell, job.protocol
    key = cell.dtype + ("+tf32" if proto.tf32 and cell.dtype == "float32" and cuda else "")
    tol = TOLERANCE[key]
    result["tolerance"] = tol
    if ref64 is not None:
        ref_out, ref_grads_cmp = ref64
        result["eager_output_rel_err"] = rel_l2(ref_out_eager, ref_out)
        if cell.phase == "train":
            result["eager_grad_rel_err"] = rel_l2(ref_grads, ref_grads_cmp)
    else:
        ref_out, ref_grads_cmp = ref_out_eager, ref_grads
    result["output_rel_err"] = rel_l2(got_out, ref_out)
    checks = [(result["output_rel_err"], result.get("eager_output_rel_err"))]
    if cell.phase == "train":
        result["grad_rel_err"] = rel_l2(got_grads, ref_grads_cmp)
        checks.append((result["grad_rel_err"], result.get("eager_grad_rel_err")))
    result["accuracy_ok"] = all(_within(got, eager, tol) for got, eager in checks)


def _apply_memory_limit() -> None:
    """TCB_CELL_MEMORY_LIMIT_MB (tests, shared hosts): cap this process's address space."""
    limit = memory_limit_mb()
    if limit:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit << 20, limit << 20))


def memory_limit_mb() -> int | None:
    """TCB_CELL_MEMORY_LIMIT_MB as a positive integer, None when unset; a ValueError naming the
    setting otherwise (the collector checks it before any cell runs)."""
    text = os.environ.get("TCB_CELL_MEMORY_LIMIT_MB", "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) <= 0:
        raise ValueError(f"TCB_CELL_MEMORY_LIMIT_MB={text!r}: expected a positive whole number of MiB (e.g. 4096)")
    return int(text)


def run_cell(spec: dict, partial_path: Path | None = None) -> dict:
    """Measure a cell; never raises for a failure of the cell itself: it becomes a status.
    With `partial_path`, every logged step saves the result so far there (see `log`)."""
    result: dict = {}
    if partial_path is not None:
        _partial.update(path=partial_path, result=result)
    stage = Stage()
    try:
        measure(spec, result, stage)
    except (Exception, MemoryError) as exc:
        traceback.print_exc()
        tail = "".join(traceback.format_exception(exc)[-3:])
        result["status"] = classify(exc, stage.name)
        result["error"] = f"during {stage.name}: {type(exc).__name__}: {exc}"[:1500] + "\n" + tail[-1500:]
    log(f"finished: {result.get('status')}")
    return result


def main(argv: list[str]) -> None:
    childlog.T0 = time.perf_counter()  # the log's clock starts here (a forked process imported this module long before)
    spec_path, out_path = Path(argv[0]), Path(argv[1])
    faulthandler.enable()  # a crash in native code (SIGSEGV, SIGABRT) leaves the Python stack in the cell's log
    _apply_memory_limit()
    result = run_cell(json.loads(spec_path.read_text()), out_path.with_name(PARTIAL_NAME))
    _partial.clear()
    tmp = out_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, out_path)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown (compile-worker pools, CUDA context): it took ~10 s a process on
    # the H200 box, and the parent kills the process group anyway.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
