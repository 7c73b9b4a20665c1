"""Writes tests/fixtures/small: a tiny synthetic run with known medians, and tests/fixtures/versions:
one small run per schema version, each file holding exactly that version's columns (committed;
rerun to refresh).

    python tests/make_fixture.py
Samples are deterministic (seeded); the statistics tests recompute what they expect from them.
"""
from __future__ import annotations

import json
import sys
import shutil
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collector.record.schema import SCHEMA_VERSION, arrow_schema, columns_of, make_row, write_row  # noqa: E402

OUT = Path(__file__).parent / "fixtures" / "small"
VERSIONS = Path(__file__).parent / "fixtures" / "versions"
RUN_ID = "fixture-small"
ENV = {"device": "cuda", "device_name": "Test GPU", "gpu_name": "Test GPU", "torch_version": "2.0.0+test",
       "hostname": "fixture-host", "cpu_model": "Test CPU", "cpu_count": 2, "python": "3.11.0",
       "peak_tflops": {"bf16": 400.0}}
# diagnostics, work and energy (schema v3) for some cells, with figures the tests recompute
EXTRA = {
    ("mlp", "infer", 32, "default"): {
        "graph_break_count": 2, "graph_break_reasons_json": json.dumps({"Unsupported: print()": 2}),
        "recompile_count": 1, "recompile_reasons_json": json.dumps({"size mismatch at index 0": 1})},
    ("mlp", "infer", 32, "reduce-overhead"): {
        # v4 energy: one window per side with its own step count (2 J / 1000 steps, 1 J / 2000 steps, 1 s)
        "eager_energy_j": 2.0, "eager_energy_steps": 1000, "eager_energy_window_s": 1.0,
        "compiled_energy_j": 1.0, "compiled_energy_steps": 2000, "compiled_energy_window_s": 1.0,
        "cudagraph_skip_count": 1,
        "cudagraph_skip_reasons_json": json.dumps({"skipping cudagraphs due to mutated inputs (1 instances)": 1})},
    ("resnet18", "infer", 8, "default"): {
        "sweep_batch_sizes": [16.0, 32.0, 4.0], "sweep_first_call_s": [4.5, 0.02, 0.01],
        "sweep_recompile_count": 1, "sweep_graph_count": 1},
    ("resnet18", "train", 64, "reduce-overhead"): {
        "flops_per_step": 1.2e12, "eager_energy_j": 25.6, "compiled_energy_j": 12.8, "gpu_power_w": 500.0,
        "gpu_util_pct": 80.0, "sm_clock_mhz": 1980.0, "gpu_temp_c": 45.0,
        "compile_split_json": json.dumps({"dynamo": 15.0, "inductor": 10.0}),
        "cache_inductor_bytes": 3 * 2**20, "cache_triton_bytes": 2**20, "recompile_count": 0,
        "graph_break_reasons_json": "{}", "recompile_reasons_json": "{}", "cudagraph_skip_reasons_json": "{}"},
}


def samples(rng, median_ms: float, n: int, spread: float = 0.02) -> list[float]:
    return list(median_ms * (1 + spread * rng.standard_normal(n)))


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    cells_dir = OUT / RUN_ID / "cells"
    cells_dir.mkdir(parents=True)
    rng = np.random.default_rng(1234)
    # (model, phase, batch, mode, eager_ms, compiled_ms, status)
    spec = [
        ("mlp", "infer", 32, "default", 0.20, 0.30, "ok"),
        ("mlp", "infer", 32, "reduce-overhead", 0.20, 0.10, "ok"),
        ("resnet18", "train", 64, "default", 12.0, 12.0, "ok"),
        ("resnet18", "train", 64, "reduce-overhead", 12.0, 5.0, "ok"),
        ("resnet18", "infer", 8, "default", 2.0, 1.0, "ok"),
        ("resnet18", "infer", 32, "default", 4.0, 2.5, "ok"),
        ("gpt", "train", 8, "default", 30.0, None, "compile_error"),
    ]
    blocks, spb = 4, 10
    for model, phase, bs, mode, e_ms, c_ms, status in spec:
        cell_id = f"{model}__{phase}__amp_bf16__bs{bs}__{mode}__model"
        row = {
            "run_id": RUN_ID, "cell_id": cell_id, "model": model, "phase": phase, "dtype": "amp_bf16",
            "batch_size": bs, "mode": mode, "compile_scope": "model", "tf32": False, "device": "cuda",
            "device_name": "Test GPU", "torch_version": "2.0.0+test", "hostname": "fixture-host",
            "status": status, "started_at": "2026-01-01T00:00:00+00:00", "cell_wall_s": 10.0,
            "timing_method": "cuda_event", "blocks": blocks, "steps_per_block": spb,
            "first_call_eager_s": 0.5, "first_call_compiled_s": 20.5,
            "eager_step_ms": samples(rng, e_ms, blocks * spb),
            "eager_peak_allocated_bytes": 1000 * 2**20, "eager_cold_peak_reserved_bytes": 1200 * 2**20,
        }
        if c_ms is None:
            row.update(error="during compile: BackendCompilerFailed: <b>boom</b> | piped",
                       first_call_compiled_s=None)
        else:
            row.update(compiled_step_ms=samples(rng, c_ms, blocks * spb), warm_first_call_compiled_s=2.5,
                       compile_dynamo_s=15.0, compile_inductor_s=10.0, graph_count=1, graph_break_count=0,
                       compiled_peak_allocated_bytes=800 * 2**20, compiled_cold_peak_allocated_bytes=1500 * 2**20,
                       compiled_cold_peak_reserved_bytes=1600 * 2**20, eager_peak_reserved_bytes=1600 * 2**20,
                       compiled_peak_reserved_bytes=1800 * 2**20, accuracy_ok=True, tolerance=0.05,
                       output_rel_err=0.001, accuracy_reference="float64")
        row.update(EXTRA.get((model, phase, bs, mode), {}))
        write_row(row, cells_dir / f"{cell_id}.parquet")
    manifest = {"run_id": RUN_ID, "schema_version": 1, "environment": ENV, "description": "synthetic fixture",
                "preset": "fixture", "protocol": {"blocks": blocks, "steps_per_block": spb, "tf32": False},
                "sessions": [{"hostname": "fixture-host"}]}
    (OUT / RUN_ID / "run.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    print(f"wrote {OUT}")
    versions()


# the version fixtures' cell: (mode, eager ms, compiled ms); a step of 2 ms eager, 1 ms compiled
VERSION_CELLS = (("default", 2.0, 1.0),)
VERSION_BLOCKS, VERSION_SPB = 2, 5


def version_row(version: int, mode: str, e_ms: float, c_ms: float | None) -> dict:
    """One cell as a collector of schema `version` wrote it: only that version's columns; from v5
    two processes' samples one after the other, before it one process's."""
    procs = 2 if version >= 5 else 1
    n = VERSION_BLOCKS * VERSION_SPB * procs
    row = {"run_id": f"v{version}", "cell_id": f"mlp__infer__float32__bs8__{mode}__model", "model": "mlp",
           "phase": "infer", "dtype": "float32", "batch_size": 8, "mode": mode, "compile_scope": "model",
           "tf32": False, "device": "cuda", "device_name": "Test GPU", "torch_version": "2.0.0+test",
           "hostname": "fixture-host", "status": "ok", "started_at": "2026-01-01T00:00:00+00:00",
           "cell_wall_s": 10.0, "timing_method": "cuda_event", "blocks": VERSION_BLOCKS,
           "steps_per_block": VERSION_SPB, "first_call_eager_s": 0.5,
           "eager_step_ms": [e_ms * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)],
           "steps_per_sample": 1, "processes": procs}
    if c_ms is not None:
        row.update(compiled_step_ms=[c_ms * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)],
                   first_call_compiled_s=20.0, accuracy_ok=True)
    full = make_row(row)
    full["schema_version"] = version
    return {k: v for k, v in full.items() if k in columns_of(version)}


def versions() -> None:
    """tests/fixtures/versions/v<N>: per schema version, a run of one cell written with that
    version's columns only (what an older collector left); the report and the collector read each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.rmtree(VERSIONS, ignore_errors=True)
    for version in range(1, SCHEMA_VERSION + 1):
        run = VERSIONS / f"v{version}"
        (run / "cells").mkdir(parents=True)
        keep = columns_of(version)
        schema = pa.schema([f for f in arrow_schema() if f.name in keep])
        for mode, e_ms, c_ms in VERSION_CELLS:
            row = version_row(version, mode, e_ms, c_ms)
            pq.write_table(pa.Table.from_pylist([row], schema=schema), run / "cells" / f"{row['cell_id']}.parquet")
        manifest = {"run_id": f"v{version}", "schema_version": version, "environment": ENV,
                    "description": f"a run as a collector of schema version {version} left it", "preset": "fixture",
                    "protocol": {"blocks": VERSION_BLOCKS, "steps_per_block": VERSION_SPB, "tf32": False},
                    "sessions": [{"hostname": "fixture-host"}]}
        (run / "run.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    print(f"wrote {VERSIONS}")


if __name__ == "__main__":
    main()
