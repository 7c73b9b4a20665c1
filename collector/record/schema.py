"""The Parquet contract: one row per cell. Shared by the collector and the analysis (no torch).

Units are in the column names. Raw samples are list columns; statistics are
derived later, in analysis/. Bump SCHEMA_VERSION on any incompatible change.

Importing it imports no pyarrow (the columns' types are Arrow's names for them; `SCHEMA` and
`write_row` import it when used): the cell process reads the columns (collector/record/result.py),
and pyarrow's threads, started at its import, would make the fork launcher's parent unsafe to fork.
"""
from __future__ import annotations

import functools
import os
import stat
from pathlib import Path

SCHEMA_VERSION = 14
# v2 added steps_per_sample (v1 rows are per-step samples: steps_per_sample = 1);
# v3 the diagnostics (why), FLOPs, cache footprint and where the cell ran (GPU, concurrency)
V3 = ("graph_break_reasons_json", "recompile_count", "recompile_reasons_json", "cudagraph_skip_count",
      "cudagraph_skip_reasons_json", "compile_split_json", "flops_per_step", "cache_inductor_bytes",
      "cache_triton_bytes", "gpu_index", "concurrent_cells")
# v4 the dynamic-shapes axis, AOTInductor's stages (mode aot-inductor) and the portable-cache compile
V4 = ("dynamic", "aot_export_s", "aot_compile_s", "aot_load_s", "portable_first_call_compiled_s", "portable_load_s",
      "portable_cache_bytes", "sweep_batch_sizes", "sweep_first_call_s", "sweep_recompile_count",
      "sweep_graph_count", "eager_energy_steps", "compiled_energy_steps", "eager_energy_window_s",
      "compiled_energy_window_s")
# v5 process replicates: the sample lists hold `processes` fresh processes' samples one after the
# other (process-major; each process blocks x steps_per_block samples), each process's wall time,
# the host hygiene applied before timing, and the planted-slowdown test option
V5 = ("processes", "process_wall_s", "process_errors", "hygiene", "planted_slowdown_pct", "planted_delay_ms")
# v6 the number of kernels Inductor generated for the cell's compile
V6 = ("kernel_count",)
# v7 the kernel profile (protocol kernel_profile): each side's kernels by kind and name, per step
V7 = ("kernel_profile_json",)
# v8 the launch configurations Inductor chose by timing candidates in the cold compile (collector/host/autotune.py)
V8 = ("autotune_json",)
# v9 each process's first compiled call and whether the replicates compiled cold (protocol cold_replicates)
V9 = ("process_first_call_compiled_s", "replicate_cache")
# v10 the planted compile-time test option (protocol plant_compile_ms)
V10 = ("planted_compile_ms",)
# v11 what built the model and what the compile captured: the model packages' versions, the inputs'
# settings, the captured graph's ops
V11 = ("packages_json", "inputs_json", "graph_ops_json")
# v12 each process's CPU seconds (the process and its descendants): how many threads a cell keeps busy,
# by which the collector's time-left estimate reads how much it slows on a crowded host
V12 = ("process_cpu_s",)
# v13 each process's wait for its GPU's timing lock (GPUS=0,0: two cells at a time on one GPU)
V13 = ("timing_wait_s",)
# v14 where each process's time went: its stages' seconds on its own clock (build, reference, compile, timing, ...)
V14 = ("process_stages_json",)
ADDED_IN = {"steps_per_sample": 2, **{c: 3 for c in V3}, **{c: 4 for c in V4}, **{c: 5 for c in V5},
            **{c: 6 for c in V6}, **{c: 7 for c in V7},
            **{c: 8 for c in V8}, **{c: 9 for c in V9}, **{c: 10 for c in V10},
            **{c: 11 for c in V11}, **{c: 12 for c in V12}, **{c: 13 for c in V13},
            **{c: 14 for c in V14}}
# oom_shared: out of memory beside other cells on a shared GPU, not yet measured alone (contract.OOM_SHARED)
STATUSES = ("ok", "build_error", "compile_error", "export_error", "runtime_error", "oom", "oom_shared", "timeout",
            "crashed", "accuracy_fail", "skipped")

_f64, _i64, _str, _bool, _list = "double", "int64", "string", "bool", "list<double>"  # Arrow's names

FIELDS = [
    # identity
    ("schema_version", _i64), ("run_id", _str), ("cell_id", _str),
    ("model", _str), ("phase", _str), ("dtype", _str), ("batch_size", _i64), ("mode", _str),
    ("compile_scope", _str), ("tf32", _bool), ("device", _str),
    ("dynamic", _str),  # torch.compile(dynamic=...): auto (None), true, false (v4; older rows: auto)
    # environment (the rest is in run.json, joined on run_id)
    ("device_name", _str), ("torch_version", _str), ("hostname", _str),
    # (v11) what built and ran the model: {package: version} of the model packages installed in the
    # cell's interpreter (contract.MODEL_PACKAGES; a user model adds its file's sha256 as "user_file"),
    # and the settings that shaped its inputs ({"seq_len": 512, "attention_mask": "none", ...}); null
    # in older rows: not recorded
    ("packages_json", _str), ("inputs_json", _str),
    # where it ran: physical GPU index (null: the process's default device) and how many cells
    # the collector measured at the same time on this host (1: alone; >1: one per GPU, cores split)
    ("gpu_index", _i64), ("concurrent_cells", _i64),
    # outcome
    ("status", _str), ("error", _str), ("started_at", _str), ("cell_wall_s", _f64),
    # protocol
    ("timing_method", _str), ("blocks", _i64), ("steps_per_block", _i64),
    ("warmup_calls_compiled", _i64),
    ("steps_per_sample", _i64),
    # process replicates (v5): how many fresh processes timed this cell (older rows: 1), the wall
    # time of each process (s; cold first), and what failed in replicates that gave no samples
    ("processes", _i64), ("process_wall_s", _list), ("process_errors", _str),
    # (v12) each process's CPU seconds, user and system, its own and its descendants' (compile workers),
    # cold first as process_wall_s; null where a process did not say (a crash)
    ("process_cpu_s", _list),
    # (v13) each process's seconds waiting for its GPU's timing lock before its first timed block, cold
    # first as process_wall_s; null where no lock was taken (one cell a GPU, the default)
    ("timing_wait_s", _list),
    # (v14) each process's {stage: seconds} on its own clock, as a JSON list, cold first as process_wall_s
    # (setup, build, to device, sides, reference, eager, compile, compiled, timing, profile, sweep,
    # graph capture; a stage a process did not reach is absent; null where a process did not say: a
    # crash before its first stage ended); the rest of process_wall_s is outside its clock (start, exit)
    ("process_stages_json", _str),
    # what was done to the host before timing (comma-separated), and the planted-slowdown test
    # option: extra work after each compiled step worth this % of its median (ms a step: delay)
    ("hygiene", _str), ("planted_slowdown_pct", _f64), ("planted_delay_ms", _f64),
    # (v10) the planted compile-time test option: ms of host sleep inside every compiled first call
    ("planted_compile_ms", _f64),
    # raw samples (mean ms per step over steps_per_sample steps), in time order, process after
    # process; in each process block i is samples [i*spb, (i+1)*spb) (spb = steps_per_block), so
    # process p, block i starts at (p*blocks + i)*spb
    ("eager_step_ms", _list), ("compiled_step_ms", _list),
    ("eager_enqueue_ms", _list), ("compiled_enqueue_ms", _list),  # host time to issue a step (GPU only)
    ("eager_block_wall_ms", _list), ("compiled_block_wall_ms", _list),  # synchronised wall per step, per block
    # compile
    ("first_call_eager_s", _f64), ("first_call_compiled_s", _f64), ("warm_first_call_compiled_s", _f64),
    ("compile_dynamo_s", _f64), ("compile_inductor_s", _f64), ("compile_backward_s", _f64),
    ("warm_compile_dynamo_s", _f64), ("compile_times_json", _str),
    # mode aot-inductor: torch.export, AOTInductor compile-and-package, load (s); their sum and the
    # first run of the loaded package make first_call_compiled_s
    ("aot_export_s", _f64), ("aot_compile_s", _f64), ("aot_load_s", _f64),
    # portable cache (protocol portable_cache): a third process with an empty cache directory loads
    # the artifacts the cold compile saved (torch.compiler.save/load_cache_artifacts), then compiles
    ("portable_first_call_compiled_s", _f64), ("portable_load_s", _f64), ("portable_cache_bytes", _i64),
    # recompile sweep (protocol recompile_sweep, inference): after timing, the compiled step called at
    # other batch sizes in the same process: the sizes, each first call (s), recompiles and new graphs
    ("sweep_batch_sizes", _list), ("sweep_first_call_s", _list), ("sweep_recompile_count", _i64),
    ("sweep_graph_count", _i64),
    # diagnostics (collector.child.diagnostics): null = this torch could not tell, never a guessed zero;
    # *_json are {reason: count}; compile_split_json is {stage: seconds}, cumulative and nested
    ("graph_count", _i64), ("graph_break_count", _i64), ("graph_break_reasons_json", _str),
    ("kernel_count", _i64),  # kernels Inductor generated for the cell's compile (v6; cold process)
    ("recompile_count", _i64), ("recompile_reasons_json", _str),
    ("cudagraph_skip_count", _i64), ("cudagraph_skip_reasons_json", _str), ("compile_split_json", _str),
    # kernel profile (v7; protocol kernel_profile, cold process, after timing): {side: {device, steps,
    # us_per_step, kinds {kind: us a step}, kernels [{name, kind, calls, us} a step], other_us}}
    ("kernel_profile_json", _str),
    # (v11; protocol graph_capture, cold process, last) the model's forward as Dynamo captures it, traced
    # again with a backend that only records: {"graphs": n, "ops": {op: count}, "nodes": n}
    ("graph_ops_json", _str),
    # autotuned launch configurations (v8; read from the cold compile's cache; null: none timed):
    # {kernels: {name: "XBLOCK=.. num_warps=.."}, count, unnamed}
    ("autotune_json", _str),
    # (v9) each process's first compiled call (s): the cold process's, then each replicate's, which
    # compiled from the cold process's warm cache (replicate_cache "warm") or cold in its own empty
    # one (protocol cold_replicates: "cold"); null with one process
    ("process_first_call_compiled_s", _list), ("replicate_cache", _str),
    # bytes the cold compile wrote to its fresh inductor and Triton cache directories
    ("cache_inductor_bytes", _i64), ("cache_triton_bytes", _i64),
    # work: FLOPs of one eager step (torch.utils.flop_counter; train: forward + backward)
    ("flops_per_step", _f64),
    # memory (bytes; CUDA only)
    ("eager_peak_allocated_bytes", _i64), ("eager_peak_reserved_bytes", _i64),
    ("compiled_peak_allocated_bytes", _i64), ("compiled_peak_reserved_bytes", _i64),
    ("eager_cold_peak_allocated_bytes", _i64), ("eager_cold_peak_reserved_bytes", _i64),
    ("compiled_cold_peak_allocated_bytes", _i64), ("compiled_cold_peak_reserved_bytes", _i64),
    # correctness: relative L2 error against a float64 run of the same step (accuracy_reference),
    # for compiled and for eager; tolerance is the dtype's floor
    ("output_rel_err", _f64), ("grad_rel_err", _f64),
    ("eager_output_rel_err", _f64), ("eager_grad_rel_err", _f64),
    ("accuracy_reference", _str), ("tolerance", _f64), ("accuracy_ok", _bool),
    # NVML during timing (GPU only; null on the CPU, never faked)
    ("gpu_util_pct", _f64), ("gpu_power_w", _f64), ("sm_clock_mhz", _f64), ("gpu_temp_c", _f64),
    ("eager_energy_j", _f64), ("compiled_energy_j", _f64),
    # v4: energy over one back-to-back window per side after the timed blocks (steps, seconds);
    # v3 rows summed the energy over the side's timed blocks (steps = samples x steps_per_sample)
    ("eager_energy_steps", _i64), ("compiled_energy_steps", _i64),
    ("eager_energy_window_s", _f64), ("compiled_energy_window_s", _f64),
]
COLUMNS = tuple(name for name, _ in FIELDS)


def arrow_type(name: str):
    """The pyarrow type of a column type's name in FIELDS."""
    import pyarrow as pa

    return {_f64: pa.float64(), _i64: pa.int64(), _str: pa.string(), _bool: pa.bool_(),
            _list: pa.list_(pa.float64())}[name]


@functools.lru_cache(maxsize=1)
def arrow_schema():
    """The row's pyarrow schema (also as `SCHEMA`)."""
    import pyarrow as pa

    return pa.schema([(name, arrow_type(t)) for name, t in FIELDS])


def __getattr__(name: str):
    if name == "SCHEMA":  # built on first use: see the module's docstring
        return arrow_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def columns_of(version: int) -> set[str]:
    """The columns a file of schema `version` holds."""
    return {c for c in COLUMNS if ADDED_IN.get(c, 1) <= version}


class SchemaError(ValueError):
    pass


def make_row(values: dict) -> dict:
    """A complete row: every column present (missing ones null), unknown keys rejected."""
    unknown = set(values) - set(COLUMNS)
    if unknown:
        raise SchemaError(f"unknown column(s): {', '.join(sorted(unknown))}")
    row = {name: values.get(name) for name in COLUMNS}
    row["schema_version"] = SCHEMA_VERSION
    if row["status"] not in STATUSES:
        raise SchemaError(f"unknown status {row['status']!r}; valid: {', '.join(STATUSES)}")
    return row


STAT_COLUMNS = ("schema_version", "cell_id", "status")


def write_row(row: dict, path: Path) -> None:
    """Write one row to `path` atomically: a temporary name in the same folder, fsync, rename."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    table = pa.Table.from_pylist([make_row(row)], schema=arrow_schema())
    try:
        # statistics only where a reader uses them (collector.record.cellfile.KEYS: a file judged from its
        # footer): those of every column were a third of a screen cell's file (43 kB -> 29 kB, docs/data.md)
        pq.write_table(table, tmp, compression="zstd", write_statistics=list(STAT_COLUMNS))
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def regular(path: Path) -> bool:
    """A regular file (a link to one counts), judged without opening it: a FIFO named like a data
    file would block whoever reads it. False where it cannot be stat'ed."""
    try:
        return stat.S_ISREG(Path(path).stat().st_mode)
    except OSError:
        return False


def file_kind(path: Path) -> str:
    """What a path that is not a regular file is, in words ('a FIFO', 'a folder', ...), judged without
    opening it; 'a regular file' for one."""
    try:
        mode = Path(path).stat().st_mode
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    return ("a regular file" if stat.S_ISREG(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else
            "a folder" if stat.S_ISDIR(mode) else "not a file")
