"""How long `make report` takes over 10,000 cells (target: under 15 s on a 2-core machine) and 100,000
(`--cells 100000`; target: under 2 minutes; docs/performance.md has both figures).

    python benchmarks/report_scale.py [--cells 10000] [--keep DIR] [--loose]

Writes a synthetic run of N cells (one Parquet file each, `--processes` processes (default 3,
the collector's default) of 8 blocks x 5 samples per side, and the run's compact.parquet, as the
collector leaves a finished run), then times `python -m analysis` over it in a fresh process
(Python start-up included). `--loose`: without the compact.parquet (a run whose collecting command
was killed before it compacted), so every cell file is judged (collector/record/cellfile.py) and
read on its own.
"""
from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from collector.record.compact import COMPACT, compact_run  # noqa: E402
from collector.record.schema import write_row  # noqa: E402


def synth(root: Path, n: int, processes: int = 3) -> Path:
    run = root / "synthetic-10k"
    cells = run / "cells"
    cells.mkdir(parents=True)
    rng = np.random.default_rng(0)
    axes = itertools.product(range(10**6), ("infer", "train"), ("float32", "bfloat16", "amp_bf16", "amp_fp16", "float16"),
                             (1, 8, 32, 128, 512), ("default", "reduce-overhead"))
    for i, (m, phase, dtype, bs, mode) in zip(range(n), axes):
        e = rng.uniform(0.1, 50)
        c = e / rng.uniform(0.5, 3)
        status = "ok" if rng.random() > 0.03 else "compile_error"
        cid = f"model{m:03d}__{phase}__{dtype}__bs{bs}__{mode}__model"
        row = {"run_id": run.name, "cell_id": cid, "model": f"model{m:03d}", "phase": phase, "dtype": dtype,
               "batch_size": bs, "mode": mode, "compile_scope": "model", "tf32": False, "device": "cuda",
               "device_name": "Synthetic GPU", "torch_version": "0.0", "hostname": "synthetic", "status": status,
               "blocks": 8, "steps_per_block": 5, "timing_method": "cuda_event",
               "processes": processes,
               "eager_step_ms": list(np.concatenate([e * np.exp(0.02 * rng.standard_normal())
                                                     * (1 + 0.03 * rng.standard_normal(40)) for _ in range(processes)])),
               "first_call_eager_s": 0.3, "eager_peak_allocated_bytes": int(1e9), "eager_cold_peak_reserved_bytes": int(2e9)}
        if status == "ok":
            row.update(compiled_step_ms=list(np.concatenate([c * np.exp(0.02 * rng.standard_normal())
                                                             * (1 + 0.03 * rng.standard_normal(40))
                                                             for _ in range(processes)])), first_call_compiled_s=30.0,
                       warm_first_call_compiled_s=4.0, compiled_peak_allocated_bytes=int(9e8),
                       compiled_cold_peak_allocated_bytes=int(1.2e9), eager_peak_reserved_bytes=int(2e9),
                       compiled_peak_reserved_bytes=int(2.2e9), compile_dynamo_s=20.0, graph_count=1,
                       graph_break_count=0, accuracy_ok=True)
        else:
            row["error"] = "synthetic failure"
        write_row(row, cells / f"{cid}.parquet")
    (run / "run.json").write_text(json.dumps({"run_id": run.name, "environment": {"device": "cuda",
                                             "gpu_name": "Synthetic GPU", "torch_version": "0.0"},
                                             "protocol": {"blocks": 8, "steps_per_block": 5, "processes": processes},
                                             "description": f"{n} synthetic cells", "sessions": []}))
    compact_run(run)  # as the collector does at the end of each session
    return root


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--cells", type=int, default=10000)
    p.add_argument("--keep", type=Path, help="write the data here and keep it")
    p.add_argument("--processes", type=int, default=3, help="processes per cell in the synthetic run")
    p.add_argument("--loose", action="store_true", help="remove the run's compact.parquet before timing")
    args = p.parse_args()
    tmp = tempfile.TemporaryDirectory()
    root = args.keep or Path(tmp.name)
    t0 = time.perf_counter()
    if not (root / "synthetic-10k" / "run.json").exists():
        synth(root, args.cells, args.processes)
    print(f"synthetic data: {args.cells} cells in {time.perf_counter() - t0:.1f} s")
    if args.loose:
        (root / "synthetic-10k" / COMPACT).unlink(missing_ok=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "analysis", "--data", str(root), "--out", str(root / "reports")],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    size = (root / "reports" / "synthetic-10k" / "report.html").stat().st_size
    print(f"report over {args.cells} {'loose ' if args.loose else ''}cells of {args.processes} process(es): "
          f"{wall:.1f} s wall (HTML {size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
