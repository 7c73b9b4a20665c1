"""The measured child's stages, in order (`measure`): setup, the float64 reference, eager's first
call, compile and warm-up, the timed blocks, the kernel profile, the batch-size sweep, the status;
a CellRun carries what they share."""
from __future__ import annotations

import json
import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from collector.child import diagnostics
from collector.record.result import CellResult

from collector import models
from collector.child.childlog import Stage, epoch_of_clock, log
from collector.child.accuracy import ERROR_MULTIPLIER, _check_accuracy
from collector.child.hygiene import host_hygiene
from collector.child.plant import plant_slowdown
from collector.child.sides import Sides, _capture, _make_sides, _reference_copy, _setup
from collector.child.sweep import _recompile_sweep
from collector.child.turns import autotune_turns, cores_note, gpu_turn, hook_benchmarks, timed_turn
from collector.child.timing import MAX_STEPS_PER_BLOCK, _energy_window, _warm_compiled, time_blocks


def _save_portable(torch, path: Path, result: CellResult) -> None:
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


@dataclass
class CellRun:
    """What the stages of one cell process share: the job, torch and the device, the clock, the
    model's two sides, the result being filled (partial results survive a failure), and what the
    cold process carries from one stage to the next for the correctness check."""

    job: object  # collector.plan.job.Job
    result: CellResult
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
    autocast: object = None  # the cell's autocast context (a function returning one)

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

    def compiled_first_call(self, step):
        """first_call of the compiled side; with the test option plant_compile_ms, a host sleep of
        that length inside the timed call (a compile-time change of known size)."""
        ms = self.job.protocol.plant_compile_ms
        if not ms:
            return self.first_call(step)
        self.result["planted_compile_ms"] = float(ms)

        def planted():
            time.sleep(ms / 1e3)
            return step()
        return self.first_call(planted)

    def peaks(self) -> tuple[int, int]:
        return self.torch.cuda.max_memory_allocated(), self.torch.cuda.max_memory_reserved()


def measure(spec: dict, result: CellResult, stage: Stage) -> None:
    """Run the job `spec` (collector.plan.job.Job as JSON), filling `result` as it goes (partial
    results survive a failure): its stages, in order."""
    from collector.plan.job import Job

    job = Job.from_json(spec)
    if _needs_missing(job, result):
        return
    run = _start(job, result, stage)
    if job.kind == "portable":
        return _portable_first_call(run)
    if job.kind == "warm":
        return _warm_first_call(run)
    _reference(run)
    with gpu_turn("the eager first call and warm-up"):
        _eager_first_call(run)
    _compile(run)
    with timed_turn(result):  # a GPU shared with another cell (GPUS=0,0): one is timed at a time
        _timing(run)
        _profile(run)
        _sweep(run)
    _graph_ops(run)
    _final_status(run)


def _needs_missing(job, result: CellResult) -> bool:
    """A model whose requirements are not installed: a skipped row (True)."""
    name, _ = models.parse_ref(job.cell.model)
    missing = models.missing_requirements(name)
    if missing:
        result.update(status="skipped", error=f"needs {', '.join(missing)} (not installed)")
    return bool(missing)


def _start(job, result: CellResult, stage: Stage) -> CellRun:
    """Import torch, build the model, the inputs, the clock and both sides."""
    log(f"setup ({job.kind} process{'' if job.kind != 'replicate' else f' {job.replicate}'}; {cores_note()}clock at "
        f"epoch {epoch_of_clock():.2f})")  # every line's time on one clock across processes: turns_overlap.py
    torch, dev, module, inputs, target, loss_fn, autocast, float_inputs = _setup(job, result, stage)
    log(f"torch imported, model built on {dev}")
    if hooked := hook_benchmarks():  # a GPU shared with another cell: autotuning waits for its turns
        log(hooked)
    from collector.child.timing import CpuClock, CudaClock

    clock = CudaClock(torch) if dev.type == "cuda" else CpuClock()
    result["timing_method"] = clock.method
    t_sides = time.perf_counter()
    stage.name = "sides"
    sides = _make_sides(torch, job, module, inputs, target, loss_fn, autocast, result)
    log(f"sides built in {time.perf_counter() - t_sides:.2f} s")
    return CellRun(job, result, stage, torch, dev, clock, sides, inputs, float_inputs, module, target,
                   loss_fn, autocast=autocast)


def _portable_first_call(run: CellRun) -> None:
    """An empty cache directory plus the saved artifacts: the first call alone."""
    torch, result = run.torch, run.result
    run.stage.name = "compile"
    blob = Path(run.job.portable_from).read_bytes()
    t0 = time.perf_counter()
    torch.compiler.load_cache_artifacts(blob)
    result["portable_load_s"] = time.perf_counter() - t0
    _, result["portable_first_call_compiled_s"] = run.compiled_first_call(run.sides.compiled)
    hits = diagnostics.inductor_cache_counters(torch)
    log(f"portable: loaded in {result['portable_load_s']:.3f} s, first call "
        f"{result['portable_first_call_compiled_s']:.2f} s; inductor cache counters {hits}")
    result["status"] = "ok"


def _warm_first_call(run: CellRun) -> None:
    """The warm-cache first call alone (one process a cell)."""
    run.stage.name = "compile"
    _, run.result["warm_first_call_compiled_s"] = run.compiled_first_call(run.sides.compiled)
    run.result["warm_compile_dynamo_s"] = diagnostics.compile_times(run.torch).get("entire_frame_compile")
    run.result["status"] = "ok"


def _reference(run: CellRun) -> None:
    """The cold process: a float64 run of the step, the reference of the correctness check. Where the
    float64 copy fails (out of memory on a GPU shared with other cells, an op without float64 kernels),
    a reduced-precision cell takes a float32 copy: comparing with eager instead called GPT-Neo's
    correct compile at batch 32 a failure (error 0.131 against eager, whose own error against float64
    is 0.357: data/examples/su-h100-torch2.14.1-cu130)."""
    if not (run.cold and run.sides.compiled is not None):
        return
    torch, result = run.torch, run.result
    run.stage.name = "reference"
    widths = ("float64",) if run.job.cell.dtype == "float32" else ("float64", "float32")
    result["accuracy_reference"] = "eager"
    with gpu_turn("the wider reference"):
        for wide in widths:
            try:
                run.ref64 = _reference_copy(torch, run.module, run.inputs, run.target, run.loss_fn,
                                            run.float_inputs, run.job.cell.phase, wide)
                result["accuracy_reference"] = wide
                break
            except Exception as exc:  # out of memory, or some ops lack float64 kernels
                then = "comparing with eager" if wide == widths[-1] else f"trying {widths[-1]}"
                log(f"{wide} reference failed ({type(exc).__name__}: {exc}); {then}")
            finally:
                if run.cuda:
                    torch.cuda.empty_cache()
    log(f"float64 reference done (the reference: {result['accuracy_reference']})")  # cell_time.py's marker


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
    """The compiled side's first call (cold or warm cache), on the host with no GPU turn but for its
    autotuning; then, in a GPU turn, the rest (`_compiled_warmup`)."""
    compiled_step = run.sides.compiled
    if compiled_step is None:
        return
    torch, result, cold = run.torch, run.result, run.cold
    run.stage.name = "compile"
    before = diagnostics.snapshot(torch)
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")  # what the cache held, not the process's role:
    empty = not cache or not Path(cache).is_dir() or not any(Path(cache).iterdir())  # cold replicates
    out, first_s = run.compiled_first_call(compiled_step)
    result["first_call_compiled_s" if cold else "warm_first_call_compiled_s"] = first_s
    log(f"compiled first call {first_s:.2f} s ({'cold' if empty else 'warm'} cache)")
    turns, waited = autotune_turns()
    if turns:
        log(f"autotuning took {turns} GPU turns, waiting {waited:.2f} s for them")
    with gpu_turn("the compiled warm-up and correctness check"):
        _compiled_warmup(run, out, before)


def _compiled_warmup(run: CellRun, out, before) -> None:
    """After the compiled first call (`out`; `before` the diagnostics snapshot taken before it): the
    outputs to check, warm-up until no compile event occurs, the cold peaks, the compile-time split and
    diagnostics, the portable artifacts, warm-up steps and the correctness check."""
    compiled_step, torch, result, proto = run.sides.compiled, run.torch, run.result, run.job.protocol
    cell, cold = run.job.cell, run.cold
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
        from collector.child.nvml import NvmlMonitor

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
    if run.cold and proto.energy_windows and monitor is not None and monitor.energy_j() is not None:
        for side, step in sides_list:  # the energy counter is read directly, before and after
            _energy_window(side, step, statistics.median(samples[side]["step"]), clock, monitor, result)
    for side, rec in samples.items():
        result[f"{side}_step_ms"] = rec["step"]
        result[f"{side}_enqueue_ms"] = rec["enq"] if cuda else None
        result[f"{side}_block_wall_ms"] = rec["wall"]
        if cuda:
            result[f"{side}_peak_allocated_bytes"], result[f"{side}_peak_reserved_bytes"] = peak[side]


def _profile(run: CellRun) -> None:
    """The cold process, if asked: each side's kernels under torch.profiler (collector.child.profile)."""
    if not (run.cold and run.job.protocol.kernel_profile):
        return
    from collector.child.profile import profile_sides

    run.stage.name = "profile"
    sides = [("eager", run.sides.eager)] + ([("compiled", run.sides.compiled)] if run.sides.compiled else [])
    medians = {side: statistics.median(run.result[f"{side}_step_ms"]) for side, _ in sides
               if run.result.get(f"{side}_step_ms")}
    run.result["kernel_profile_json"] = profile_sides(run.torch, sides, medians, run.cuda, run.clock.sync)


def _sweep(run: CellRun) -> None:
    """Inference, cold process, if asked: other batch sizes in this process, recompiles counted."""
    cell, proto = run.job.cell, run.job.protocol
    if run.cold and proto.recompile_sweep and run.sides.compiled is not None and cell.phase == "infer":
        run.stage.name = "sweep"
        _recompile_sweep(run.torch, run.job, run.dev, run.inputs, run.float_inputs, run.sides.compiled, run.clock,
                         run.result)


def _graph_ops(run: CellRun) -> None:
    """The cold process, last, if asked: the captured graph's ops (collector.child.graph_ops)."""
    if run.cold and run.job.protocol.graph_capture and run.sides.compiled is not None:
        from collector.child.graph_ops import for_cell

        run.stage.name = "graph capture"
        with gpu_turn("the graph capture"):  # it runs the model's ops on the device
            run.result["graph_ops_json"] = for_cell(run.torch, run.job.cell, run.sides.eager_module, run.inputs,
                                                    run.autocast)


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


