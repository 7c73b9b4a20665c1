"""A screen's moves beside their confirmation: what each cell the screen sent showed in one process, and
what the confirmation (several processes a cell, the same two interpreters) called.

    python benchmarks/screen_confirmed.py su-h100-torch2.11.0-cu130 su-h100-torch2.14.1-cu130 \
        su-h100c-torch2.11.0-cu130 su-h100c-torch2.14.1-cu130 [--data data/examples]

One line per cell measured in both confirmation runs: the screen's compiled-step and speedup changes B/A
(one process a side: no interval), the confirmation's with their 95% intervals and calls (the report's one
call rule, analysis/stats/pair_estimates.py), and whether the called speedup moved the screen's way. Then
the count: cells confirmed, speedups called, called in the screen's direction, compiled steps called.
docs/findings-suites.md quotes it.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis.data.load import discover_runs, load, sql, unknown_runs  # noqa: E402
from analysis.run_report.context import prepare  # noqa: E402
from analysis.stats import estimates as est, pair_estimates  # noqa: E402


def screen_changes(loaded, a: str, b: str) -> dict[str, tuple[float | None, float | None]]:
    """cell id -> (compiled step B/A, speedup B/A) of two one-process screens, cells ok in both."""
    out = {}
    for p in loaded.con.execute(sql("compare_pairs"), {"baseline": a, "candidate": b}).df().to_dict("records"):
        if p["status_a"] != "ok" or p["status_b"] != "ok" or p["mode"] == "eager":
            continue
        ratio = [p[f"{q}_b"] / p[f"{q}_a"] if p[f"{q}_a"] and p[f"{q}_b"] and not math.isnan(p[f"{q}_a"])
                 else None for q in ("compiled", "speedup")]
        out[p["cell_id"]] = (ratio[0], ratio[1])
    return out


def table(loaded, runs: dict, names: list[str]) -> list[str]:
    sa, sb, ca, cb = names
    screened = screen_changes(loaded, sa, sb)
    pe = pair_estimates.estimate_pair(loaded, runs[ca], runs[cb])
    comp, speed = pe.ests["compiled"], pe.ests["speedup"]
    lines = ["| cell | screen: compiled step, speedup | confirmation: compiled step (95% CI), call | speedup (95% CI), call |"
             " the screen's way |", "|---|---|---|---|---|"]
    agree = called = comp_called = 0
    cells = sorted(c for c in speed if c in screened)
    for cid in cells:
        s_comp, s_speed = screened[cid]
        c, s = comp.get(cid), speed[cid]
        way = "-"
        if s.called and s_speed is not None:
            called += 1
            same = (s.point - 1) * (s_speed - 1) > 0
            agree += same
            way = "yes" if same else "no"
        comp_called += bool(c and c.called)
        lines.append(f"| {pe.labels[cid]} | {est.pct(s_comp)}, {est.pct(s_speed)} | "
                     + (f"{est.pct(c.point)} ({est.pct(c.lo)} to {est.pct(c.hi)}), {c.call}" if c else "-")
                     + f" | {est.pct(s.point)} ({est.pct(s.lo)} to {est.pct(s.hi)}), {s.call} | {way} |")
    lines.append(f"\n{len(cells)} cell(s) confirmed: speedup called in {called}, {agree} of them the screen's way; "
                 f"compiled step called in {comp_called}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("screen_a", "screen_b", "confirm_a", "confirm_b"):
        ap.add_argument(name, help="a run id")
    ap.add_argument("--data", default="data/examples")
    args = ap.parse_args(argv)
    runs = {r.run_id: r for r in discover_runs(Path(args.data))}
    names = [args.screen_a, args.screen_b, args.confirm_a, args.confirm_b]
    missing = [n for n in names if n not in runs]
    if missing:
        print(f"error: {unknown_runs(missing, runs)}", file=sys.stderr)
        return 2
    loaded = load([runs[n] for n in names])
    prepare(loaded)
    print("\n".join(table(loaded, runs, names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
