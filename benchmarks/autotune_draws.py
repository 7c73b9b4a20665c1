"""One cell's compiled step per compile, beside what that compile's autotuning chose for some kernels.

    python benchmarks/autotune_draws.py moe__infer__amp_bf16__bs8__reduce-overhead__model \\
        --kernel 'triton_poi_fused__to_copy_[89]$' --kernel 'triton_poi_fused_gelu_[0-9]+$' \\
        --slow 'XBLOCK=512 num_warps=8' data/examples/at-h200-* data/examples/at14-* ...

Every run folder given that has the cell with an autotune record (schema v8) adds its compiles: one
a run where the replicates reused the cold process's cache (every process shares that draw; its
processes' medians are listed together), one a process where they compiled cold in their own caches
(COLD_REPLICATES=1; a replicate's choices are the cold process's with its recorded differences).
Prints each compile's torch, compiled step (median of each process's samples, ms) and the launch
configuration chosen for each kernel matching a --kernel pattern (kernel names carry Inductor's
per-compile index, which differs between versions: hence patterns). With --slow, groups the
compiles by whether any matched kernel chose that configuration and prints each group's step-time
range and count per torch: docs/findings-versions.md, "A sixth lease", quotes its output.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

import pyarrow.parquet as pq


def compiles(run: Path, cell_id: str) -> list[dict]:
    """[{run, torch, label, ms: [process medians], kernels: {name: config}}] of one run folder."""
    path = run / "cells" / f"{cell_id}.parquet"
    if not path.is_file():
        return []
    row = pq.read_table(path).to_pylist()[0]
    raw = row.get("autotune_json")
    if not raw or row.get("status") != "ok":
        return []
    rec = json.loads(raw)
    samples, n = row["compiled_step_ms"], max(1, row.get("processes") or 1)
    per = len(samples) // n
    medians = [statistics.median(samples[i * per:(i + 1) * per]) for i in range(n)]
    base = dict(rec.get("kernels") or {})
    torch = row.get("torch_version") or "?"
    if row.get("replicate_cache") != "cold":
        return [{"run": run.name, "torch": torch, "label": run.name, "ms": medians, "kernels": base}]
    out = [{"run": run.name, "torch": torch, "label": f"{run.name} p1", "ms": medians[:1], "kernels": base}]
    for i, rep in enumerate(rec.get("replicates") or [], start=2):
        if i - 1 < len(medians):
            out.append({"run": run.name, "torch": torch, "label": f"{run.name} p{i}", "ms": [medians[i - 1]],
                        "kernels": {**base, **(rep.get("kernels") or {})}})
    return out


def _short(config: str) -> str:
    return config.replace("XBLOCK=", "").replace(" num_warps=", "/").replace(" num_stages=1", "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("cell_id")
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--kernel", action="append", default=[], help="regular expression on kernel names (repeatable)")
    p.add_argument("--slow", help="a launch configuration, e.g. 'XBLOCK=512 num_warps=8': group by it")
    args = p.parse_args(argv)
    pats = [re.compile(k) for k in args.kernel]
    found = [c for run in args.runs if run.is_dir() for c in compiles(run, args.cell_id)]
    if not found:
        print(f"no run among the {len(args.runs)} given has {args.cell_id} with an autotune record", file=sys.stderr)
        return 2
    groups: dict[tuple[str, bool], list[float]] = {}
    for c in found:
        chosen = {k: v for k, v in c["kernels"].items() if any(pt.search(k) for pt in pats)}
        shown = ", ".join(f"{k} {_short(v)}" for k, v in sorted(chosen.items())) or "-"
        print(f"{c['label']:34} {c['torch']:14} {' '.join(f'{m:.3f}' for m in c['ms']):26} {shown}")
        if args.slow:
            slow = any(v.startswith(args.slow) for v in chosen.values())
            groups.setdefault((c["torch"], slow), []).extend([statistics.median(c["ms"])])
    if args.slow:
        print(f"\ncompiles by whether a matched kernel chose '{args.slow}':")
        for (torch, slow), ms in sorted(groups.items()):
            print(f"  {torch:14} {'chose it' if slow else 'did not':9} {len(ms):3} compiles, "
                  f"compiled step {min(ms):.3f}-{max(ms):.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
