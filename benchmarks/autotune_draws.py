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
range and count per torch (with two torches, a Fisher exact test of the counts and each group's change
between the torches, like draw against like, with Welch's interval; --by run groups by run folder
instead, for an A/A or planted pair of one torch): docs/findings-versions.md, "The MoE: two speeds set per compile", and docs/validation.md, "Planted changes: what a comparison finds", quote its output.
With --timings, also the autotuner's own timing of every candidate of each matched kernel, read from
the cell log of a run collected with TORCH_LOGS=+torch._inductor.runtime.triton_heuristics (Inductor's
"Benchmark all input configs" lines, one log section a process), and a summary per kernel: how far
apart the candidates timed and how much the same candidate's timing moved between compiles
(docs/findings-versions.md, "The MoE: two speeds set per compile").
"""
from __future__ import annotations

import argparse
import gzip
import math
import re
from math import comb
import statistics
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.stats.core import welch  # noqa: E402
from collector.record.contract import autotune_processes, autotune_record, process_medians  # noqa: E402


def compiles(run: Path, cell_id: str) -> list[dict]:
    """[{run, torch, label, ms: [process medians], kernels: {name: config}}] of one run folder."""
    path = run / "cells" / f"{cell_id}.parquet"
    if not path.is_file():
        return []
    row = pq.read_table(path).to_pylist()[0]
    rec = autotune_record(row.get("autotune_json"))
    if rec is None or row.get("status") != "ok":
        return []
    timed = log_timings(run, cell_id)
    medians = process_medians(row["compiled_step_ms"], row.get("processes"))
    torch = row.get("torch_version") or "?"
    per = autotune_processes(rec) if row.get("replicate_cache") == "cold" else None
    if per is None:  # one compile: every process reused the cold process's choices
        return [{"run": run.name, "torch": torch, "label": run.name, "ms": medians, "kernels": rec["kernels"],
                 "timings": timed.get(0, {})}]
    return [{"run": run.name, "torch": torch, "label": f"{run.name} p{i + 1}", "ms": [m], "kernels": k,
             "timings": timed.get(i, {})} for i, (k, m) in enumerate(zip(per, medians)) if k is not None]


SECTION = re.compile(r"^=== \S+ (cold|replicate (\d+)) ")
BENCH = re.compile(r"Benchmark all input configs for (\S+), get:")
CANDIDATE = re.compile(r"\] (XBLOCK: .*?): ([0-9.]+), nreg")


def log_timings(run: Path, cell_id: str) -> dict[int, dict[str, dict[str, float]]]:
    """{process index (0 the cold one): {kernel: {short config: ms}}} from a run's cell log (plain
    or .gz); empty where the log has no autotuner timings. A process logged twice (a retry) keeps
    its last section, the one the row holds."""
    path = next((q for q in (run / "logs" / f"{cell_id}.log", run / "logs" / f"{cell_id}.log.gz") if q.is_file()), None)
    if path is None:
        return {}
    text = gzip.open(path, "rt", errors="replace").read() if path.suffix == ".gz" else path.read_text(errors="replace")
    out: dict[int, dict[str, dict[str, float]]] = {}
    proc, kernel = None, None
    for line in text.splitlines():
        if m := SECTION.match(line):
            proc, kernel = int(m.group(2) or 0), None
            out[proc] = {}
        elif proc is not None and (m := BENCH.search(line)):
            kernel = m.group(1)
            out[proc][kernel] = {}
        elif proc is not None and kernel and (m := CANDIDATE.search(line)):
            fields = dict(kv.split(": ", 1) for kv in m.group(1).split(", "))
            block = "x".join(fields[k] for k in ("XBLOCK", "YBLOCK", "R0_BLOCK") if k in fields)
            out[proc][kernel][f"{block}/{fields.get('num_warps', '?')}"] = float(m.group(2))
        elif kernel and "triton_heuristics" not in line:
            kernel = None
    return {k: v for k, v in out.items() if v}


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided Fisher exact test of the 2x2 table [[a, b], [c, d]]: the probability, with the
    margins fixed, of a table no likelier than this one."""
    n, r1, c1 = a + b + c + d, a + b, a + c

    def p(x: int) -> float:
        return comb(r1, x) * comb(n - r1, c1 - x) / comb(n, c1)

    p0 = p(a)
    return sum(p(x) for x in range(max(0, c1 - (n - r1)), min(r1, c1) + 1) if p(x) <= p0 * (1 + 1e-9))


def _short(config: str) -> str:
    return config.replace("XBLOCK=", "").replace(" num_warps=", "/").replace(" num_stages=1", "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("cell_id")
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--kernel", action="append", default=[], help="regular expression on kernel names (repeatable)")
    p.add_argument("--slow", help="a launch configuration, e.g. 'XBLOCK=512 num_warps=8': group by it")
    p.add_argument("--by", choices=("torch", "run"), default="torch",
                   help="group the compiles by torch version (default) or by run folder: two runs of one torch "
                        "are the like-for-like comparison's A/A and planted check")
    p.add_argument("--timings", action="store_true",
                   help="also the autotuner's timing of each candidate (cell logs with Inductor's autotuning log)")
    args = p.parse_args(argv)
    pats = [re.compile(k) for k in args.kernel]
    found = [c for run in args.runs if run.is_dir() for c in compiles(run, args.cell_id)]
    if not found:
        print(f"no run among the {len(args.runs)} given has {args.cell_id} with an autotune record", file=sys.stderr)
        return 2
    groups: dict[tuple[str, bool], list[float]] = {}
    timings: dict[tuple[str, str], list[float]] = {}
    gaps: dict[str, list[float]] = {}
    for c in found:
        chosen = {k: v for k, v in c["kernels"].items() if any(pt.search(k) for pt in pats)}
        shown = ", ".join(f"{k} {_short(v)}" for k, v in sorted(chosen.items())) or "-"
        print(f"{c['label']:34} {c['torch']:14} {' '.join(f'{m:.3f}' for m in c['ms']):26} {shown}")
        if args.timings:
            for kernel in sorted(chosen):
                cands = c["timings"].get(kernel)
                if cands:
                    print(f"{'':36}autotuner timed {kernel}: "
                          + ", ".join(f"{cfg} {ms * 1000:.1f} us" for cfg, ms in cands.items()))
                    for cfg, ms in cands.items():
                        timings.setdefault((re.sub(r"_\d+$", "_N", kernel), cfg), []).append(ms)
                    if len(cands) == 2:
                        (fa, a), (fb, b) = sorted(cands.items())
                        gaps.setdefault(re.sub(r"_\d+$", "_N", kernel), []).append((b - a) / a * 100)
        if args.slow:
            slow = any(v.startswith(args.slow) for v in chosen.values())
            groups.setdefault((c[args.by], slow), []).extend([statistics.median(c["ms"])])
    if args.timings:
        if not timings:
            print("\nno autotuner timings in the cell logs (collect with "
                  "TORCH_LOGS=+torch._inductor.runtime.triton_heuristics)")
        else:
            print("\nthe autotuner's timings over the compiles that logged them (kernel index as N):")
            for (kernel, cfg), ms in sorted(timings.items()):
                print(f"  {kernel:34} {cfg:8} {len(ms):3} timings, {min(ms) * 1000:.1f}-{max(ms) * 1000:.1f} us "
                      f"(median {statistics.median(ms) * 1000:.1f})")
            for kernel, g in sorted(gaps.items()):
                a, b = sorted({cfg for k, cfg in timings if k == kernel})
                print(f"  {kernel:34} {b} against {a} in the same compile: {min(g):+.1f} to {max(g):+.1f}% "
                      f"(median {statistics.median(g):+.1f}%), {sum(x < 0 for x in g)} of {len(g)} timed it faster")
    if args.slow:
        print(f"\ncompiles by whether a matched kernel chose '{args.slow}':")
        for (torch, slow), ms in sorted(groups.items()):
            print(f"  {torch:14} {'chose it' if slow else 'did not':9} {len(ms):3} compiles, "
                  f"compiled step {min(ms):.3f}-{max(ms):.3f} ms")
        versions = sorted({t for t, _ in groups})
        if len(versions) == 2:  # does one torch choose it more often than the other
            (x, y), n = versions, lambda t, slow: len(groups.get((t, slow), []))
            print(f"  two-sided Fisher exact test, {x} against {y}: "
                  f"p = {fisher_exact(n(x, True), n(x, False), n(y, True), n(y, False)):.2f}")
            for slow in (False, True):  # the version's change within one draw: like against like
                ga, gb = groups.get((x, slow), []), groups.get((y, slow), [])
                if len(ga) >= 2 and len(gb) >= 2:
                    la, lb = np.log(ga), np.log(gb)
                    lo, hi = welch(la, lb)
                    print(f"  {y} against {x} among the compiles that {'chose it' if slow else 'did not'}: "
                          f"{math.expm1(lb.mean() - la.mean()) * 100:+.1f}% "
                          f"({math.expm1(lo) * 100:+.1f} to {math.expm1(hi) * 100:+.1f}%, Welch over {len(ga)} "
                          f"and {len(gb)} compiles)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
