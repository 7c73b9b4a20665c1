"""The answer first: a run's verdict, written from the data, for the top of its report.

Per phase and mode (whole-step compiles apart from model compiles), over the ok cells: the
geometric-mean speedup with its 95% interval, how many cells are faster, slower or not clearly
different, and after how many steps compiling pays off. Then the caveats that decide whether to
trust it. Every aggregate says what it pools (dtypes, batch sizes, models).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from analysis.stats import core as stats
from collector.record.contract import (ACCURACY_QUANTITIES, ERROR_MULTIPLIER, accuracy_blind_parts, accuracy_unchecked,
                                       autotune_record, eager_errors)

PHASE = {"infer": "inference", "train": "training"}
NAMED_SLOWER = 8  # slower-compiled cells the verdict sentence names; summary.md lists every one


@dataclass(frozen=True)
class VerdictRow:
    phase: str
    mode: str
    cells: int
    speedup: str  # "1.55x faster", "8% slower", "no meaningful difference (1.01x)", "not determined (0.79x)"
    interval: str  # "1.51x-1.58x"
    counts: str  # "12 faster, 1 slower"
    pays_off: str  # "after ~310 steps (median of 13 cells, cold compile)"
    pools: str  # "models: mlp, resnet50; dtypes: amp_bf16; batch 1-128"
    css: str  # faster / slower / unclear
    numbers: dict = field(default_factory=dict, compare=False)  # the same, machine-readable (estimates.json)


@dataclass
class Verdict:
    rows: list[VerdictRow] = field(default_factory=list)
    sentence: str = ""  # one line over everything: where compiling pays, where it does not
    caveats: list[str] = field(default_factory=list)
    chart_rows: list[dict] = field(default_factory=list)  # every ok cell: group, speedup, interval, verdict
    slower: list[str] = field(default_factory=list)  # every slower-compiled cell, slowest first (summary.md)
    suites: list = field(default_factory=list)  # analysis.run_report.suites.SuiteRow per suite, phase and mode (real-model runs)

    @property
    def suites_reduced(self) -> str:
        """The line naming the suites' models run with fewer layers than published ('' if none)."""
        from analysis.run_report.suites import reduced_line

        return reduced_line(self.suites)


NO_DIFFERENCE, UNDETERMINED = "no meaningful difference", "not determined"


def undecided(lo: float, hi: float, min_effect: float) -> str:
    """Why a group is not called: its interval lies within the minimum effect either way (there is no
    difference worth the name), or it is too wide to tell (0.70x-1.00x: it may be 30% slower or the same)."""
    if not (stats.missing(lo) or stats.missing(hi)) and lo >= 1 - min_effect and hi <= 1 + min_effect:
        return NO_DIFFERENCE
    return UNDETERMINED


def _speed_words(g: float, lo: float, hi: float, min_effect: float) -> tuple[str, str]:
    """A group's geometric-mean speedup in words, called by the one rule (stats.verdict)."""
    call = stats.verdict(lo, hi, g, min_effect)
    if call == "faster":
        return f"{g:.2f}x faster", "faster"
    if call == "slower":
        return f"{(1 - g) * 100:.0f}% slower ({g:.2f}x)", "slower"
    return f"{undecided(lo, hi, min_effect)} ({g:.2f}x)", "unclear"


def _span(values) -> str:
    values = sorted(set(values))
    if not values:
        return "-"
    return str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}"


def _group_label(r: dict) -> tuple[str, str]:
    mode = r.get("mode") or "?"
    if r.get("compile_scope") == "step":
        mode += " [whole step]"
    return r.get("phase") or "?", mode


def _group_row(key: tuple[str, str], rows: list[dict], reps_by_cell: dict, breakeven: dict,
               min_effect: float) -> VerdictRow:
    """One phase/mode group's line: its geometric-mean speedup with the interval, the cells' calls,
    when compiling pays off, what it pools; and its figures for estimates.json (`numbers`)."""
    reps = [reps_by_cell[r["cell_id"]] for r in rows if r["cell_id"] in reps_by_cell]
    g = float(statistics.geometric_mean([r["speedup"] for r in rows]))
    lo, hi = stats.geomean_interval(reps) if reps else (float("nan"), float("nan"))
    words, css = _speed_words(g, lo, hi, min_effect)
    counted = {k: sum(1 for r in rows if r.get("verdict") == k) for k in ("faster", "slower", "no clear difference")}
    steps = [breakeven[r["cell_id"]] for r in rows
             if r.get("verdict") == "faster" and not stats.missing(breakeven.get(r["cell_id"]))]
    pools = (f"{len({r['model'] for r in rows})} model(s); dtypes {', '.join(sorted({r['dtype'] for r in rows}))}; "
             f"batch {_span(int(r['batch_size']) for r in rows)}")
    numbers = {"phase": key[0], "mode": key[1], "cells": len(rows), "speedup": g,
               "speedup_lo": None if stats.missing(lo) else lo, "speedup_hi": None if stats.missing(hi) else hi,
               "call": undecided(lo, hi, min_effect) if css == "unclear" else css,
               "cells_faster": counted["faster"], "cells_slower": counted["slower"],
               "cells_unclear": counted["no clear difference"],
               "pays_off_steps": float(statistics.median(steps)) if steps else None, "pays_off_cells": len(steps),
               "models": sorted({r["model"] for r in rows}), "dtypes": sorted({r["dtype"] for r in rows}),
               "batch_sizes": sorted({int(r["batch_size"]) for r in rows})}
    return VerdictRow(PHASE.get(key[0], key[0]), key[1], len(rows), words,
                      "-" if stats.missing(lo) else f"{lo:.2f}x-{hi:.2f}x",
                      ", ".join(f"{n} {k}" for k, n in counted.items() if n),
                      f"~{statistics.median(steps):,.0f} steps ({len(steps)} cell(s))" if steps else "-",
                      pools, css, numbers)


def _sentence(judged: list[tuple[str, float, str, str]], slower_cells: list[dict], failed_modes: dict,
              any_ok: bool, min_effect: float) -> str:
    """The verdict's sentence: the groups where compiling is faster and slower (`judged`: label,
    geometric mean, call), the slower cells by name, the modes with failed cells."""
    parts = []
    wins = [j for j in judged if j[2] == "faster"]
    losses = [j for j in judged if j[2] == "slower"]
    if wins:
        best, worst = max(wins, key=lambda j: j[1]), min(wins, key=lambda j: j[1])
        span = (f" (from {worst[1]:.2f}x, {worst[0]}, to {best[1]:.2f}x, {best[0]})" if len(wins) > 1
                else f" ({best[1]:.2f}x, {best[0]})")
        parts.append(f"Compiling is faster in {len(wins)} of {len(judged)} phase/mode groups{span}")
    if losses:
        parts.append("slower in " + ", ".join(f"{j[0]} ({j[1]:.2f}x)" for j in losses))
    same = sum(1 for j in judged if j[2] == "unclear" and j[3] == NO_DIFFERENCE)
    open_ = sum(1 for j in judged if j[2] == "unclear" and j[3] != NO_DIFFERENCE)
    rule = (f" (a difference is called when it is at least {min_effect * 100:g}% and its 95% interval "
            "excludes no change)")
    if parts:
        parts += ([f"no meaningful difference in {same}"] if same else []) + \
                 ([f"not determined in {open_} (intervals too wide to tell)"] if open_ else [])
    elif same and open_:
        parts.append(f"Compiling makes no meaningful difference in {same} of {len(judged)} phase/mode groups; whether it "
                     f"helps is not determined in {open_} (intervals too wide to tell){rule}")
    elif same:
        parts.append(f"Compiling makes no meaningful difference in {same} of {len(judged)} phase/mode groups{rule}")
    elif open_:
        parts.append(f"Whether compiling helps is not determined in {open_} of {len(judged)} phase/mode groups "
                     f"(intervals too wide to tell){rule}")
    if losses and not wins:
        parts[0] = "Compiling is " + parts[0]
    if slower_cells:
        named = ", ".join(f"{r['model']} {r['phase']} {r['dtype']} bs{r['batch_size']} {r['mode']} "
                          f"({r['speedup']:.2f}x)" for r in slower_cells[:NAMED_SLOWER])
        more = (f" and {len(slower_cells) - NAMED_SLOWER} more (each marked slower in the speedup table; summary.md "
                "lists them all)" if len(slower_cells) > NAMED_SLOWER else "")
        parts.append(f"{len(slower_cells)} cell(s) are slower compiled: {named}{more}")
    failing = [(m, f) for m, f in failed_modes.items() if f["failed"]]
    if failing:
        parts.append("failed: " + ", ".join(
            f"{m} in {f['failed']} of {f['cells']} cells ({', '.join(f'{n} {st}' for st, n in sorted(f['statuses'].items()))})"
            for m, f in sorted(failing, key=lambda t: (-t[1]["failed"], t[0]))))
    if not any_ok:
        parts.append("No cell has a speedup (no ok cell with a compiled side)")
    sentence = ("; ".join(parts) + ".") if parts else ""
    return sentence[:1].upper() + sentence[1:]


def build(speed: list[dict], reps_by_cell: dict, breakeven: dict, failures: list, noise: float,
          min_effect: float, several_machines: bool = False, skipped: int = 0,
          failed_modes: dict | None = None) -> Verdict:
    """`speed`: the speedup table's records (cell_id, phase, mode, compile_scope, dtype, model,
    batch_size, status, speedup, speedup_lo/hi, verdict, flags inputs); `reps_by_cell`: each
    cell's LogDist of ln speedup (analysis/stats/tdist.py: exact t over processes, or replicates); `breakeven`: cell_id -> cold break-even steps;
    `failed_modes`: mode -> {cells, failed, statuses} over every cell of the run (the sentence names
    each mode with a failed cell)."""
    v = Verdict()
    ok = [r for r in speed if r.get("status") == "ok" and not stats.missing(r.get("speedup"))]
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in ok:
        groups.setdefault(_group_label(r), []).append(r)
        v.chart_rows.append({"group": f"{PHASE.get(r['phase'], r['phase'])}\n{_group_label(r)[1]}",
                             "speedup": r["speedup"], "lo": r.get("speedup_lo"), "hi": r.get("speedup_hi"),
                             "verdict": r.get("verdict")})
    for key in sorted(groups, key=lambda k: (k[0] != "infer", k[1])):
        v.rows.append(_group_row(key, groups[key], reps_by_cell, breakeven, min_effect))
    judged = [(f"{row.phase} {row.mode}", row.numbers["speedup"], row.css, row.numbers["call"]) for row in v.rows]
    slower_cells = sorted((r for r in ok if r.get("verdict") == "slower"), key=lambda r: r["speedup"])
    v.slower = [f"{r['model']} {r['phase']} {r['dtype']} bs{r['batch_size']} {r['mode']} ({r['speedup']:.2f}x)"
                for r in slower_cells]
    v.sentence = _sentence(judged, slower_cells, failed_modes or {}, bool(ok), min_effect)
    v.caveats = _caveats(speed, failures, noise, several_machines, skipped)
    return v


def _caveats(speed: list[dict], failures: list, noise: float, several_machines: bool, skipped: int) -> list[str]:
    """Short lines, most decisive first; the notes and tables below say more."""
    out = []
    n = len(speed)
    planted = [r for r in speed if not stats.missing(r.get("planted_slowdown_pct")) and r.get("planted_slowdown_pct")]
    if planted:
        out.append(f"TEST RUN: {len(planted)} cell(s) have a planted slowdown; not real figures.")
    planted_compile = [r for r in speed if not stats.missing(r.get("planted_compile_ms")) and r.get("planted_compile_ms")]
    if planted_compile:
        out.append(f"TEST RUN: {len(planted_compile)} cell(s) have a planted compile time "
                   f"(+{planted_compile[0]['planted_compile_ms']:g} ms a first call); not real figures.")
    if failures:
        by: dict[str, int] = {}
        for f in failures:
            by[f.status] = by.get(f.status, 0) + 1
        out.append(f"{len(failures)} cell(s) failed ({', '.join(f'{k} {s}' for s, k in sorted(by.items()))}): "
                   "not in the speedups; listed under Failures.")
    single = [r for r in speed if r.get("processes") == 1]
    if single:
        out.append(f"{len(single)} of {n} cells were timed in one process: their intervals cover that process's "
                   "noise only.")
    disagree = [r for r in speed if not stats.missing(r.get("process_spread")) and r["process_spread"] > stats.DISAGREE]
    if disagree:
        out.append(f"{len(disagree)} of {n} cells have processes that disagree by over {stats.DISAGREE * 100:.0f}%: "
                   "trust their intervals, not their points.")
    host = [r for r in speed if r.get("eager_launch_bound") or r.get("compiled_launch_bound")]
    if host:
        out.append(f"{len(host)} of {n} cells are launch-bound on a side: the host CPU sets their pace, so they "
                   "vary between machines.")
    noisy = [r for r in speed if stats.is_noisy(r.get("eager_iqr_rel"), r.get("compiled_iqr_rel"), threshold=noise)]
    if noisy:
        out.append(f"{len(noisy)} of {n} cells are noisy (a side's IQR above {noise * 100:.0f}% of its median).")
    concurrent = [r for r in speed if (r.get("concurrent_cells") or 1) > 1]
    if concurrent:
        why = ("two or more on a GPU, timed in turn, CPU cores split" if any(r.get("timing_wait_s") for r in concurrent)
               else "one per GPU, CPU cores split" if len({r.get("gpu_index") for r in concurrent}) > 1 else
               "seen measuring on the same host: a shard, another collector or SLURM tasks on one node")
        out.append(f"{len(concurrent)} of {n} cells ran beside another cell ({why}).")
    out += _autotune_caveat(speed) + accuracy_caveat(speed)
    if several_machines:  # a structured flag from the run's hosts and boot ids (context.py), not its prose
        out.append("Collected on more than one machine: compare cells of one machine where it matters.")
    if skipped:
        out.append(f"{skipped} input file(s) were skipped (listed below).")
    return out


def _autotune_caveat(speed: list[dict]) -> list[str]:
    """What the cells' autotune records (schema v8) say about their intervals: with the default warm
    replicates every process reuses the cold compile's autotuned launch configurations (one draw a cell,
    outside the interval); with COLD_REPLICATES=1 each process drew its own (inside it)."""
    n = len(speed)
    tuned, cold, differ = [], [], []
    for r in speed:
        rec = autotune_record(r.get("autotune_json"))
        if rec is None or not rec.get("count"):
            continue
        if r.get("replicate_cache") == "cold":
            cold.append(r)
            if any(isinstance(x, dict) and x.get("differ") for x in rec.get("replicates") or []):
                differ.append(r)
        elif (r.get("processes") or 1) > 1:
            tuned.append(r)
    out = []
    if tuned:
        out.append(f"{len(tuned)} of {n} cells autotuned kernels in their cold compile, a draw every process of the "
                   "cell reuses: a rerun can differ by a few percent beyond their intervals (docs/diagnostics.md, "
                   "'The autotune record'; COLD_REPLICATES=1 puts the draw inside them).")
    if cold:
        out.append(f"{len(cold)} of {n} cells compiled every process cold (COLD_REPLICATES=1): their intervals hold each "
                   f"compile's autotuning draw; the processes drew differently in {len(differ)} of them.")
    return out


def accuracy_caveat(speed: list[dict]) -> list[str]:
    """The cells whose accuracy check passed but could not have failed (contract.accuracy_unchecked): the
    error it allows, ERROR_MULTIPLIER x eager's own against float64, passes an all-zero output."""
    blind = [r for r in speed if accuracy_unchecked(r)]
    if not blind:
        return partly_blind_caveat(speed)
    least = [min(eager_errors(r)) for r in blind]  # the check nearest to being able to fail
    names = sorted({f"{r['model']} {r['phase']}" for r in blind})
    return [f"{len(blind)} of {len(speed)} cells passed an accuracy check that could not fail: eager's own error "
            f"against float64 ({_errors(least)}) times "
            f"{ERROR_MULTIPLIER:g} passes an all-zero output, so their compiled outputs are unchecked "
            f"({_named(names)}; docs/measurement.md)."] + partly_blind_caveat(speed)


def partly_blind_caveat(speed: list[dict]) -> list[str]:
    """The cells whose passed accuracy check could fail for one quantity and not for the other
    (contract.accuracy_blind_parts): a training cell whose outputs were checked and whose gradients were not."""
    out = []
    for part in ACCURACY_QUANTITIES:
        cells = [r for r in speed if accuracy_blind_parts(r) == [part] and not accuracy_unchecked(r)]
        if not cells:
            continue
        errs = [eager_errors(r)[ACCURACY_QUANTITIES.index(part)] for r in cells]
        other = {"output": "gradients", "gradients": "outputs"}[part]
        names = sorted({f"{r['model']} {r['phase']}" for r in cells})
        out.append(f"{len(cells)} of {len(speed)} cells had only their {other} checked: eager's {part} "
                   f"{'is' if part == 'output' else 'are'} {_errors(errs)} from float64, {ERROR_MULTIPLIER:g}x that "
                   f"passes zeros ({_named(names)}; docs/measurement.md).")
    return out


def _errors(xs: list[float]) -> str:
    return f"{min(xs):.2f}" + (f"-{max(xs):.2f}" if max(xs) > min(xs) else "")


def _named(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def run_accuracy_caveats(con, runs) -> list[str]:
    """accuracy_caveat for each run of a comparison (its compiled cells that passed), the run named; a line
    that every run has word for word (the same cells, counts and errors) is said once, for all of them."""
    per_run = []
    for run in runs:
        cur = con.execute("SELECT * FROM stats WHERE run_id = ? AND mode <> 'eager' AND status = 'ok'", [run.run_id])
        names = [d[0] for d in cur.description]
        per_run.append(accuracy_caveat([dict(zip(names, x)) for x in cur.fetchall()]))
    out = []
    for i, (run, lines) in enumerate(zip(runs, per_run)):
        for line in lines:
            if len(runs) > 1 and all(line in other for other in per_run):  # the same words in every run: once
                if i == 0:
                    out.append(f"{'Both' if len(runs) == 2 else 'All'} runs: {line}")
            else:
                out.append(f"{run.run_id}: {line}")
    return out
