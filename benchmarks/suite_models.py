"""Per model, two suite runs side by side: what docs/findings-suites.md says per model comes from here.

    python benchmarks/suite_models.py data/examples/su-h200-torch2.11.0-cu130 data/examples/su-h200-torch2.14.1-cu130

One line per cell of either run, grouped by suite, phase and compile mode: status A -> B, speedup A -> B, the compiled
and eager step changes B/A (medians over all samples), cold compile (s) A -> B, graphs and graph breaks,
recompiles and kernels A -> B; then per suite, phase and mode, which side moved (the geometric means of the compiled and
eager step changes beside the speedup's). `--json` prints the same as records. Reads the cell files directly (pyarrow), independently of
analysis/: a second computation of what the report shows.
"""
from __future__ import annotations

import argparse
import json
import math
import signal
import statistics
import sys
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from collector.record.contract import suite_of  # noqa: E402  (the collector's own rule: the prefix names the suite)


def cells(run_dir: Path) -> dict[str, dict]:
    out = {}
    for f in sorted((run_dir / "cells").glob("*.parquet")):
        for r in pq.read_table(f).to_pylist():
            out[r["cell_id"]] = r
    return out


def _med(xs) -> float | None:
    xs = [x for x in (xs or []) if isinstance(x, (int, float)) and x > 0]
    return statistics.median(xs) if xs else None


def summary(r: dict | None) -> dict:
    if r is None:
        return {"status": "-"}
    eager, comp = _med(r.get("eager_step_ms")), _med(r.get("compiled_step_ms"))
    return {"status": r["status"], "eager_ms": eager, "compiled_ms": comp,
            "speedup": eager / comp if eager and comp else None,
            "cold_s": r.get("first_call_compiled_s"), "graphs": r.get("graph_count"),
            "breaks": r.get("graph_break_count"), "recompiles": r.get("recompile_count"),
            "kernels": r.get("kernel_count"),
            "error": (r.get("error") or "").strip().split("\n")[0][:100]}


def rows(a_dir: Path, b_dir: Path) -> list[dict]:
    a, b = cells(a_dir), cells(b_dir)
    out = []
    for cid in sorted(set(a) | set(b)):
        r = a.get(cid) or b.get(cid)
        sa, sb = summary(a.get(cid)), summary(b.get(cid))
        ratio = (lambda k: sb[k] / sa[k] - 1 if sa.get(k) and sb.get(k) else None)
        out.append({"cell_id": cid, "suite": suite_of(r["model"]), "model": r["model"], "phase": r["phase"],
                    "mode": r.get("mode") or "default",
                    "a": sa, "b": sb, "compiled_change": ratio("compiled_ms"), "eager_change": ratio("eager_ms"),
                    "speedup_change": ratio("speedup")})
    return sorted(out, key=lambda x: (x["suite"], x["phase"], x["mode"], x["model"]))


def split(out: list[dict]) -> list[dict]:
    """Per suite, phase and mode, over the models ok in both runs: the geometric means of the compiled-step,
    eager-step and speedup ratios B/A (as changes), and in how many models the compiled step got faster
    and the compile generated fewer kernels: which side moved."""
    groups: dict[tuple, list[dict]] = {}
    for x in out:
        if x["compiled_change"] is not None and x["eager_change"] is not None:
            groups.setdefault((x["suite"], x["phase"], x["mode"]), []).append(x)

    def gm(xs, k):
        return math.expm1(sum(math.log1p(x[k]) for x in xs) / len(xs))
    return [{"suite": su, "phase": ph, "mode": mo, "models": len(xs), "compiled_change": gm(xs, "compiled_change"),
             "eager_change": gm(xs, "eager_change"), "speedup_change": gm(xs, "speedup_change"),
             "compiled_faster": sum(x["compiled_change"] < 0 for x in xs),
             "fewer_kernels": sum((x["b"]["kernels"] or 0) < (x["a"]["kernels"] or 0) for x in xs)}
            for (su, ph, mo), xs in sorted(groups.items())]


def _x(v, f="{}"):
    return "-" if v is None else f.format(v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("baseline", type=Path)
    ap.add_argument("candidate", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `... | head` ends quietly
    for d in (args.baseline, args.candidate):
        if not (d / "cells").is_dir():
            print(f"error: {d} is not a run folder (no cells/ in it)", file=sys.stderr)
            return 2
    out = rows(args.baseline, args.candidate)
    if args.json:
        print(json.dumps({"cells": out, "split": split(out)}, indent=1))
        return 0
    group = None
    for x in out:
        if (x["suite"], x["phase"], x["mode"]) != group:
            group = (x["suite"], x["phase"], x["mode"])
            print(f"# {group[0]} {group[1]} {group[2]}: status A -> B | speedup A -> B | compiled, eager step B/A | cold compile s "
                  f"| graphs/breaks | recompiles | kernels")
        a, b = x["a"], x["b"]
        status = a["status"] if a["status"] == b["status"] else f"{a['status']} -> {b['status']}"
        pct = (lambda v: "-" if v is None else f"{100 * v:+.1f}%")

        def pair(k, f="{}"):
            return f"{_x(a.get(k), f)} -> {_x(b.get(k), f)}"
        line = (f"{x['model']}: {status} | {pair('speedup', '{:.2f}x')} | {pct(x['compiled_change'])}, {pct(x['eager_change'])} | "
                f"{pair('cold_s', '{:.1f}')} | {a.get('graphs', '-')}/{a.get('breaks', '-')} -> "
                f"{b.get('graphs', '-')}/{b.get('breaks', '-')} | {pair('recompiles')} | {pair('kernels')}")
        errors = [s["error"] for s in (a, b) if s["status"] not in ("ok", "-") and s.get("error")]
        print(line + (f" | {errors[-1]}" if errors else ""))
    print("# which side moved, per suite (geometric means over the models ok in both)")
    for g in split(out):
        print(f"{g['suite']} {g['phase']} {g['mode']}: {g['models']} models, compiled step {100 * g['compiled_change']:+.1f}%, "
              f"eager step {100 * g['eager_change']:+.1f}%, speedup {100 * g['speedup_change']:+.1f}%; compiled faster "
              f"in {g['compiled_faster']}, fewer kernels in {g['fewer_kernels']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
