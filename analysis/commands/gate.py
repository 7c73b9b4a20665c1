"""A release gate on a comparison: exit non-zero when a called regression exceeds a bound.

    python -m analysis gate --baseline A --candidate B --max-regression 5%
    make gate BASELINE=A CANDIDATE=B MAX_REGRESSION=5%

Builds the comparison of B against A exactly as the report does (the same estimates, intervals and
calls, with the run-to-run spread of sibling runs in the data folders, docs/comparison.md "Every
quantity, called on its own") and fails on every change that is *called* a regression (its 95%
interval excludes no change and it is at least the minimum effect) and whose point estimate is worse
than the bound: a compiled or eager step time or a peak memory more than the bound higher, a speedup
more than the bound lower, or the run's cold or warm first call (the geometric mean over its cells,
called against the A/A run-level bound as the verdict does) more than the bound longer. One cell's
first call is one sample a process and moved by up to +61% between same-build runs on one machine
(benchmarks/false_alarms.py), so it is gated cell by cell only with --per-cell-first-call. Changes
that are not called (within the noise, launch-bound sides) never fail the gate, whatever their
point estimate. With `--repeat A2:B2` (repeatable; make REPEATS=) the
same two versions measured on other machines are judged too (analysis/compare_report/repeats.py), and a regression
fails only where it is called a regression in every pair that measured its cell and its smallest
change across them is beyond the bound; the others are listed as not repeated. Without repeat pairs, a
regression beyond the bound that an A/A of one build can produce (one compile's autotune draw that the
interval cannot hold, a speedup moved by a launch-bound side, a cell whose eager and compiled steps
moved together: analysis/compare_report/verify.py) is *unverified*: named with what decides it, and
it does not fail the gate on its own. Exit codes: 0 pass, 1 a regression beyond the bound (named, one
line each; a cell ok in A that fails in B fails it too, unless --allow-new-failures), 2 bad input
(unknown run, bad bound), 3 unreadable data, 4 unverified: regressions beyond
the bound only of the kinds an A/A produces (repeat the pair, or give --repeat, to decide).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from analysis.stats import estimates as est
from analysis.compare_report import repeats
from analysis.stats import core as stats
from analysis.stats.history import History

PASS, FAIL, BAD_INPUT, UNREADABLE, UNVERIFIED = 0, 1, 2, 3, 4


def parse_bound(text: str, option: str = "--max-regression") -> float:
    """'5%', '5' or '0.05' -> 0.05; a ValueError names `option` (the command's own)."""
    raw = text.strip()
    try:
        value = float(raw.rstrip("%"))
    except ValueError:
        raise ValueError(f"{option} takes a percentage such as 5% (got {text!r})") from None
    if raw.endswith("%") or value >= 1:
        value /= 100
    if not 0 <= value < 10:
        raise ValueError(f"{option} must be from 0% up (got {text!r})")
    return value


def worse_by(quantity: str, ratio: float) -> float:
    """How much worse a ratio B/A is, as a fraction (negative: better)."""
    return (1 - ratio) if est.QUANTITIES[quantity][1] else (ratio - 1)  # True: higher is better


FIRST_CALL = ("cold", "warm")


def beyond(changes: list[dict], bound: float, quantities: set[str] | None = None,
           per_cell_first_call: bool = False) -> list[dict]:
    """The called regressions whose change is worse than `bound` (a fraction), worst first; first
    calls cell by cell only with `per_cell_first_call` (run_level_first_call gates the run's)."""
    out = []
    for c in changes:
        if c.get("call") != est.REGRESSED or (quantities and c["quantity"] not in quantities):
            continue
        if c["quantity"] in FIRST_CALL and not per_cell_first_call:
            continue
        worse = worse_by(c["quantity"], c["ratio"])
        if worse > bound:
            out.append({**c, "worse": worse})
    return sorted(out, key=lambda c: -c["worse"])


def split_unverified(failing: list[dict], why: dict) -> tuple[list[dict], list[tuple[dict, str]]]:
    """(the changes that fail, (change, why) for those an A/A can produce): `why` is
    analysis/compare_report/verify.py's unverified() by (cell id, quantity)."""
    held = [(c, why[(c["cell_id"], c["quantity"])]) for c in failing if (c["cell_id"], c["quantity"]) in why]
    return [c for c in failing if (c["cell_id"], c["quantity"]) not in why], held


def newly_failing(transitions) -> list[str]:
    """The cells ok in the baseline and attempted but not ok in the candidate (a crash, a compile error,
    a timeout, an accuracy failure), as 'label (ok -> status)'; a cell skipped in either (a model its
    package could not build there) was not attempted, and one out of memory beside other cells on a shared
    GPU (status oom_shared) not alone. `transitions`: (label, status A, status B, ...)."""
    from analysis.run_report.suites import NOT_THE_MODEL

    return [f"{t[0]} (ok -> {t[2]})" for t in transitions if t[1] == "ok" and t[2] != "ok" and t[2] not in NOT_THE_MODEL]


def run_level_first_call(changes: list[dict], bound: float, quantities: set[str] | None = None) -> list[dict]:
    """The run's cold and warm first call, the geometric mean of its cells' ratios, called against the
    A/A run-level bound (estimates.run_level_bound, the verdict's line): a regression beyond `bound`."""
    out = []
    for q in FIRST_CALL:
        pts = [c["ratio"] for c in changes if c["quantity"] == q and c.get("ratio")]
        if not pts or (quantities and q not in quantities):
            continue
        g = math.exp(sum(math.log(x) for x in pts) / len(pts))
        e = est.from_noise(q, g, est.run_level_bound(q, len(pts)), 0.0, "")
        if e.call == est.REGRESSED and worse_by(q, g) > bound:
            out.append({"cell": f"the run ({len(pts)} cells, geometric mean)", "quantity": q, "ratio": g,
                        "lo": e.lo, "hi": e.hi, "interval_from": "the A/A run-level bound", "worse": worse_by(q, g)})
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m analysis gate", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", action="append", help="folder holding run folders (repeatable; default: data/)")
    p.add_argument("--baseline", required=True, help="the baseline run id (A)")
    p.add_argument("--candidate", required=True, help="the candidate run id (B)")
    p.add_argument("--max-regression", default="5%", help="fail on a called regression worse than this (default 5%%)")
    p.add_argument("--quantities", default=",".join(est.QUANTITIES),
                   help=f"which quantities gate (default all: {','.join(est.QUANTITIES)})")
    p.add_argument("--repeat", action="append", default=[], metavar="A2:B2",
                   help="a further pair of runs of the same two versions from another machine or run set (repeatable): "
                   "fail only on regressions that repeat in every pair")
    p.add_argument("--allow-mismatch", action="store_true", help="gate runs of different devices or matrices")
    p.add_argument("--allow-new-failures", action="store_true",
                   help="do not fail on cells ok in the baseline that fail in the candidate (they fail the gate by default)")
    p.add_argument("--per-cell-first-call", action="store_true",
                   help="gate each cell's cold and warm first call too, not only the run's geometric mean")
    p.add_argument("--reps", type=stats.replicates, default=stats.DEFAULT_REPS,
                   help="bootstrap replicates where a cell has one process")
    p.add_argument("--min-effect", type=stats.fraction, default=stats.MIN_EFFECT, dest="min_effect",
                   help="smallest change (as a fraction) that is called, as in the report (default 0.02)")
    return p.parse_args(argv)


def _report(args):
    """(the comparison report, the bound, the gated quantities); ValueError or DataError on bad input."""
    from analysis.compare_report.compare import build_compare_report
    from analysis.data.load import discover_runs, load, own_ids, unknown_runs
    from analysis.run_report.context import prepare

    bound = parse_bound(args.max_regression)
    quantities = {q.strip() for q in args.quantities.split(",") if q.strip()}
    unknown = quantities - set(est.QUANTITIES)
    if unknown:
        raise ValueError(f"unknown quantit(y/ies) {', '.join(sorted(unknown))}; valid: {', '.join(est.QUANTITIES)}")
    roots = [Path(d) for d in (args.data or ["data"])]
    runs = {r.run_id: r for d in roots for r in discover_runs(d)}
    pairs = [repeats.parse(x) for x in args.repeat]
    ids = [args.baseline, args.candidate] + [x for pair in pairs for x in pair]
    missing = [x for x in dict.fromkeys(ids) if x not in runs]
    if missing:
        raise ValueError(unknown_runs(missing, runs, own_ids(runs.values())))
    a, b = runs[args.baseline], runs[args.candidate]
    loaded = load([runs[x] for x in dict.fromkeys(ids)])
    prepare(loaded)
    report = build_compare_report(loaded, a, b, [a, b], allow_mismatch=args.allow_mismatch, reps=args.reps,
                                  min_effect=args.min_effect, repeat_runs=[(runs[x], runs[y]) for x, y in pairs],
                                  history=History(list(runs.values())))
    return report, bound, quantities


def _unrepeated(report, failing: list, bound: float) -> tuple[list, list]:
    """With repeat pairs: (the failing changes that repeat beyond the bound, the others with their fate)."""
    fate = {(r.cell_id, r.quantity): r for r in report.repeat_rows}
    kept, dropped = [], []
    for c in failing:
        r = fate[(c["cell_id"], c["quantity"])]
        smallest = min(worse_by(c["quantity"], x) for x in r.points if x is not None)
        held = r.outcome in (repeats.REPEATS, repeats.WHERE_PAIRED) and smallest > bound
        (kept if held else dropped).append((c, r))
    return [c for c, _ in kept], dropped


def main(argv: list[str]) -> int:
    from analysis.data.load import DataError

    args = parse_args(argv)
    try:
        report, bound, quantities = _report(args)
    except (ValueError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return BAD_INPUT
    except OSError as exc:
        print(f"error: cannot read the runs: {exc.strerror or exc} ({exc.filename})", file=sys.stderr)
        return UNREADABLE
    changes = report.chart_rows.get("estimates", [])
    failing = beyond(changes, bound, quantities, args.per_cell_first_call)
    dropped = []
    if report.repeat_pairs:
        failing, dropped = _unrepeated(report, failing, bound)
    unverified = []
    if not report.repeat_pairs:  # a repeat pair decides what one pair cannot (repeats above)
        failing, unverified = split_unverified(failing, report.unverified)
    failing += run_level_first_call(changes, bound, quantities)  # the run as a whole: not repeated per cell
    broken = [] if args.allow_new_failures else newly_failing(report.transitions)
    called = sum(1 for c in changes if c.get("call") == est.REGRESSED and c["quantity"] in quantities)
    head = (f"gate {args.candidate} against {args.baseline}: {len(changes)} estimates over "
            f"{len({c['cell_id'] for c in changes})} cells, {called} called regression(s), "
            f"{len(failing) + len(unverified)} beyond {bound * 100:g}%"
            + (f" ({len(unverified)} unverified)" if unverified else ""))
    if report.repeat_pairs:
        # repeats where paired count: a cell some pairs did not measure repeats in those that did
        head += f" that repeat in every pair of runs that has the cell ({len(report.repeat_pairs)} pairs)"
    for c, r in dropped:
        print(f"  not repeated, not failing: {c['cell']}: {est.QUANTITIES[c['quantity']][0]} "
              f"{' / '.join(r.changes)} ({r.outcome})")
    if broken:
        head += f", {len(broken)} cell(s) newly failing"
    if not failing and not unverified and not broken:
        print(f"{head}: pass")
        return PASS
    print(f"{head}: {'FAIL' if failing or broken else 'UNVERIFIED'}")
    for line in broken:
        print(f"  newly failing: {line}")
    for c in failing:
        print(f"  {_line(c)}")
    for c, why in unverified:
        print(f"  unverified, not failing: {_line(c)}: {why}")
    if not failing and not broken:
        print("  an A/A of one build can produce each of these: repeat the pair (or give REPEATS=) to decide; "
              f"exit {UNVERIFIED}")
    return FAIL if failing or broken else UNVERIFIED


def _line(c: dict) -> str:
    return (f"{c['cell']}: {est.QUANTITIES[c['quantity']][0]} {est.pct(c['ratio'])} "
            f"(95% CI {est.pct(c['lo'])} to {est.pct(c['hi'])}; {c['interval_from']})")
