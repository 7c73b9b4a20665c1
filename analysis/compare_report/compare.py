"""Comparison of two runs (baseline A, candidate B), cell by cell: the report's context.

Per paired cell: the change in speedup (speedup_B / speedup_A), in compiled and eager step time,
first calls and peak memory, each a ratio with a 95% interval (analysis/stats/pair_estimates.py: exact t
over the processes where a cell has several, with sibling runs' spread where there are three;
never called where a cell was timed in one process) and the one call rule (analysis/stats/estimates.py:
the interval excludes no change and the change is at least the minimum effect, default 2%).
Benjamini-Hochberg q-values are shown beside the calls. Groups of cells are summarised by
analysis/compare_report/compare_groups.py; the verdict, caveats and called rows by analysis/compare_report/changes.py. Each
helper below builds one part of the report; build_compare_report puts them together.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np

from analysis.stats import attribution, pair_estimates, uncertainty

from analysis.compare_report import changes, compare_groups, repeats, verify

from analysis.explain import kernels, program

from analysis.run_report import run_tables
from analysis.stats import estimates as est
from analysis.stats import core as stats
from analysis.run_report import suites

from analysis.run_report.context import ENV_FIELDS, Chart
from analysis.run_report.verdict import run_accuracy_caveats
from analysis.stats.fmt import cell_label, fmt_bytes, fmt_s, fmt_x
from analysis.data.load import DataError, Loaded, Run, sql
from collector.record import comparable
from collector.record.contract import OOM_SHARED

ALPHA = 0.05


@dataclass(frozen=True)
class Change:
    """One ratio B/A with its interval, formatted, and the call made on it."""

    ratio: str
    ci: str
    q: str
    call: str  # "improved", "regressed", "no significant change", "below minimum effect",
    # "not called: one process", "-"

    @classmethod
    def of(cls, e: est.Estimate) -> "Change":
        """The formatted view of an estimate (analysis/stats/estimates.py)."""
        return cls(est.pct(e.point), est.interval_text(e), "-" if e.q is None else f"{e.q:.3f}", e.call)


@dataclass(frozen=True)
class PairRow:
    label: str
    status: str
    speedup_a: str
    speedup_b: str
    speedup_change: Change
    compiled_change: Change
    eager_change: Change
    memory: str
    cold: str
    warm: str
    css: str
    cold_change: Change = None
    warm_change: Change = None
    memory_change: Change = None


@dataclass(frozen=True)
class CalledRow:
    """One called change of one quantity of one cell: what Regressions and Improvements list."""

    label: str
    quantity: str  # a key of estimates.QUANTITIES
    what: str  # its name ("compiled step time")
    a: str
    b: str
    change: Change
    basis: str  # what the interval rests on
    css: str


@dataclass(frozen=True)
class SummaryRow:
    phase: str
    mode: str
    scope: str
    dtype: str
    cells: int
    geomean_a: str
    geomean_b: str
    speedup_change: str
    speedup_ci: str
    compiled_change: str
    compiled_ci: str
    improved: int
    regressed: int


@dataclass
class CompareReport:
    title: str
    baseline: str
    candidate: str
    generated_at: str
    mismatch: list[str]
    headline: list[str]
    summary: list[SummaryRow]
    transitions: list[tuple[str, str, str, str]]  # label, from, to, css
    regressions: list[PairRow]
    improvements: list[PairRow]
    pairs: list[PairRow]
    unpaired: list[tuple[str, str, str]]
    min_effect: str
    uncertainty_lines: list[str]
    environment: list[tuple[str, str, str, bool]]  # field, A, B, differs
    trend_runs: list[str]
    trend: list[tuple[str, list[str]]]
    skipped_files: list[tuple[str, str]]
    flagged_cells: list[tuple[str, str]]  # cells whose samples were partly left out (load.py)
    diag_changes: list[tuple[str, str, str]] = field(default_factory=list)  # (label, what changed, reasons new in B)
    diag_known: int = 0  # paired compiled cells with diagnostics on both sides
    charts: dict[str, Chart] = field(default_factory=dict)  # key -> the PNG written beside the report
    chart_rows: dict[str, list] = field(default_factory=dict)  # what the charts and estimates.json draw on
    verdict: list[str] = field(default_factory=list)  # the answer first: one line per quantity
    caveats: list[str] = field(default_factory=list)  # what limits the answer (machines, builds, launch-bound)
    subtitle: str = ""  # versions, builds and device in words
    trend_cells: list[tuple[str, list[str]]] = field(default_factory=list)  # (label, [per-run text]) per cell, 3+ runs
    repeat_pairs: list[repeats.RepeatPair] = field(default_factory=list)  # this pair first, then --repeat's
    repeat_rows: list[repeats.RepeatRow] = field(default_factory=list)  # per change called in any pair
    kernel_rows: list[kernels.PairRow] = field(default_factory=list)  # per side of cells profiled in both runs
    suites: list[suites.SuiteChange] = field(default_factory=list)  # per suite, phase and mode (real-model runs)
    newly_failing: list[suites.StatusChange] = field(default_factory=list)  # ok in A, failed in B
    newly_passing: list[suites.StatusChange] = field(default_factory=list)  # failed in A, ok in B
    program_rows: list[program.ProgramRow] = field(default_factory=list)  # per paired compiled cell: graph, kernels, host
    program_suites: list[program.ProgramSuite] = field(default_factory=list)  # the same, per suite
    unverified: dict[tuple[str, str], str] = field(default_factory=dict)  # (cell id, quantity) -> why an A/A can produce its regression (verify.py)

    @property
    def suites_reduced(self) -> str:
        """The line naming the suites' models either run ran with fewer layers than published ('' if none)."""
        return suites.reduced_line(self.suites)


def _env_value(v) -> str:
    """An environment field as the comparison's table shows it: '' (recorded, nothing set) as '(none)'."""
    return "(none)" if v == "" else str(v)


def run_intervals(loaded: Loaded, run_id: str, reps: int) -> dict[str, tuple[float, float]]:
    """Each compiled cell's 95% speedup interval as the run's own report computes it
    (stats.run_stats: computed once per run, whoever asks first)."""
    return dict(stats.run_stats(loaded, run_id, reps).intervals)


def check_comparable(a: Run, b: Run) -> list[str]:
    """Differences that make a comparison unfair: the one rule (collector.record.comparable, COMPARE):
    the device, the matrix preset, every setting that changes what is measured."""
    return [d.words() for d in comparable.differences(a.manifest, b.manifest, comparable.COMPARE)]


def _coverage(loaded: Loaded, a: Run, pairs: list[dict], has_compiled: dict, reps: int) -> list[bool]:
    """A/A calibration: per paired ok cell, whether A's 95% speedup interval holds B's speedup
    estimate, with A's intervals as A's own report shows them (computed once, by the same function)."""
    a_intervals = run_intervals(loaded, a.run_id, reps)
    return [a_intervals[p["cell_id"]][0] <= p["speedup_b"] <= a_intervals[p["cell_id"]][1] for p in pairs
            if p["cell_id"] in a_intervals and p["status_a"] == "ok" and p["status_b"] == "ok"
            and has_compiled.get(p["cell_id"]) and p["speedup_b"]]


def _confounders(a: Run, b: Run) -> list[str]:
    """What the headline says first: runs of different machines, builds of different kinds."""
    out = []
    boots = [changes.boots(r) for r in (a, b)]
    if boots[0] and boots[1] and boots[0] != boots[1]:
        out.append(f"Confounder: {a.run_id} and {b.run_id} were not collected on one machine "
                   f"({len(boots[0])} and {len(boots[1])} machine boot(s), {len(boots[0] & boots[1])} shared): host-bound "
                   "step times differ between machines of one kind, speedups much less.")
    libs = changes.package_differences(a.env.get("model_packages"), b.env.get("model_packages"))
    if libs:
        out.append("Confounder: the models were built by other package versions ("
                   + ", ".join(f"{k} {x or 'none'} against {y or 'none'}" for k, x, y in libs)
                   + "): a model library can hand torch.compile another program; a change is not the torch's alone.")
    if changes.build_kinds_differ(a, b):
        builds = changes.versions(a, b)
        out.append(f"Confounder: the builds differ in kind ({builds[0]} against {builds[1]}): a CPU-only "
                   "build and a CUDA build of torch ship different kernels and libraries even on the "
                   "CPU; compare builds of the same kind to see what the version changed.")
    return out


def _pair_rows(pairs: list[dict], calls: dict) -> tuple[list[PairRow], list[tuple]]:
    """Every paired cell's row of the full table, and the cells whose status changed (newly failing first)."""
    empty = Change("-", "-", "-", "-")
    rows, transitions = [], []
    for p in pairs:
        cid, label = p["cell_id"], cell_label(p)
        if p["status_a"] != p["status_b"]:
            beside = OOM_SHARED in (p["status_a"], p["status_b"])
            transitions.append((label, p["status_a"], p["status_b"],
                                "beside" if beside else "slower" if p["status_a"] == "ok" else "faster"))
        sc = calls["speedup"].get(cid, empty)
        rows.append(PairRow(
            label, p["status_a"] if p["status_a"] == p["status_b"] else f"{p['status_a']} -> {p['status_b']}",
            fmt_x(p["speedup_a"]), fmt_x(p["speedup_b"]), sc, calls["compiled"].get(cid, empty),
            calls["eager"].get(cid, empty), f"{fmt_bytes(p['mem_a'])} / {fmt_bytes(p['mem_b'])}",
            f"{fmt_s(p['cold_a'])} / {fmt_s(p['cold_b'])}", f"{fmt_s(p['warm_a'])} / {fmt_s(p['warm_b'])}",
            {"improved": "faster", "regressed": "slower"}.get(sc.call, "unclear"),
            calls["cold"].get(cid, empty), calls["warm"].get(cid, empty), calls["memory"].get(cid, empty)))
    transitions.sort(key=lambda t: (t[3] != "slower", t[0]))
    return rows, transitions


def _summary(groups: list[compare_groups.GroupChange]) -> list[SummaryRow]:
    return [SummaryRow(g.phase, g.mode, g.scope, g.dtype, g.cells, fmt_x(g.speedup_a), fmt_x(g.speedup_b),
                       compare_groups.pct(g.speedup[0]), f"{compare_groups.pct(g.speedup[1])} to {compare_groups.pct(g.speedup[2])}",
                       compare_groups.pct(g.compiled[0]), f"{compare_groups.pct(g.compiled[1])} to {compare_groups.pct(g.compiled[2])}", g.improved, g.regressed)
            for g in groups]


def _count_line(rows: list[PairRow], paired: int, min_effect: float) -> str:
    n_reg = sum(r.speedup_change.call == "regressed" for r in rows)
    n_imp = sum(r.speedup_change.call == "improved" for r in rows)
    n_bh = sum(r.speedup_change.call in ("regressed", "improved") and float(r.speedup_change.q) < ALPHA for r in rows)
    return (f"{n_imp} cell(s) improved and {n_reg} regressed in speedup (95% interval excludes no change "
            f"and the change is at least the {min_effect * 100:g}% minimum effect), of {paired} paired cells; "
            f"{n_bh} of these calls also survive Benjamini-Hochberg at q below {ALPHA}.")


def _environment(a: Run, b: Run) -> list[tuple[str, str, str, bool]]:
    """The environment table: (field, A, B, differs) for every field either run recorded."""
    env = []
    for label, key in ENV_FIELDS + [("TF32", "tf32")]:
        va = a.manifest.get("protocol", {}).get(key) if key == "tf32" else a.env.get(key)
        vb = b.manifest.get("protocol", {}).get(key) if key == "tf32" else b.env.get(key)
        if va not in (None, "") or vb not in (None, ""):
            env.append((label, _env_value(va), _env_value(vb), va != vb))
    for label, r in (("host dispatch (us per eager op)", "dispatch_us"),
                     ("host dispatch + sync (us)", "dispatch_sync_us")):
        va, vb = ((x.env.get("host_calibration") or {}).get(r) for x in (a, b))
        if va not in (None, "") or vb not in (None, ""):
            env.append((label, _env_value(va), _env_value(vb), va != vb))
    return env


def _trend(con, trend_ids: list[str]) -> list[tuple[str, list[str]]]:
    """Per group, each trend run's geometric-mean speedup and cell count."""
    by: dict[tuple, dict[str, str]] = {}
    for run_id, phase, mode, scope, dtype, n, g in con.execute(sql("trend"), {"runs": trend_ids}).fetchall():
        by.setdefault((phase, mode, scope, dtype), {})[run_id] = f"{g:.2f}x ({n})"
    return [(f"{k[0]} {k[1]} {k[3]}" + ("" if k[2] == "model" else f" [{k[2]}]"), [v.get(r, "-") for r in trend_ids])
            for k, v in sorted(by.items())]


def _called(pairs: list[dict], ests: dict, labels: dict) -> tuple[list[CalledRow], list[CalledRow]]:
    """Regressions and Improvements: every called change, a speedup change saying which side moved
    it (analysis/stats/attribution.py)."""
    ms = (lambda v: "-" if v is None else f"{v:.3f} ms")
    fmt = {"compiled": ("compiled_a", "compiled_b", ms), "eager": ("eager_a", "eager_b", ms),
           "speedup": ("speedup_a", "speedup_b", fmt_x), "cold": ("cold_a", "cold_b", fmt_s),
           "warm": ("warm_a", "warm_b", fmt_s), "memory": ("mem_a", "mem_b", fmt_bytes)}
    cid_of = {v: k for k, v in labels.items()}

    def what(label: str, q: str) -> str:
        if q != "speedup":
            return est.QUANTITIES[q][0]
        ea, ca = ests["eager"].get(cid_of[label]), ests["compiled"].get(cid_of[label])
        moved = attribution.side(ea, ca)
        return f"speedup: {attribution.words(moved, ea, ca)}" if moved else "speedup"

    reg, imp = changes.called_rows(pairs, ests, labels, fmt)
    return tuple([CalledRow(label, q, what(label, q), va, vb, Change.of(e), e.reason, CSS[e.call])
                  for label, q, va, vb, e in rows] for rows in (reg, imp))


def _chart_rows(rows: list[PairRow], pairs: list[dict], fam: dict, ests: dict, labels: dict, trend: list) -> dict:
    """What the charts and estimates.json draw on: the speedup and compiled forests, the trend, every estimate."""
    forest = sorted(((r.label, float(np.exp(fam["speedup"][p["cell_id"]].centre)),
                      *np.exp(fam["speedup"][p["cell_id"]].interval()))
                     for r, p in zip(rows, pairs) if p["cell_id"] in fam["speedup"]), key=lambda t: t[1])
    compiled_forest = sorted(((labels[cid], e.point, e.lo, e.hi) for cid, e in ests["compiled"].items()
                              if e.point and e.lo), key=lambda t: t[1])
    estimates = [{"cell_id": cid, "cell": labels[cid], "quantity": q, "ratio": e.point, "lo": e.lo, "hi": e.hi,
                  "call": e.call, "interval_from": e.reason,
                  **({"moved": attribution.side(ests["eager"].get(cid), ests["compiled"].get(cid))}
                     if q == "speedup" else {})}
                 for q, by in ests.items() for cid, e in sorted(by.items())]
    return {"forest": forest, "compiled_forest": compiled_forest, "trend": trend, "estimates": estimates}


def _repeats(loaded: Loaded, a: Run, b: Run, pe, repeat_runs: list[tuple[Run, Run]], reps: int,
             min_effect: float, history) -> tuple[list, list, list[str], list[str]]:
    """With --repeat: the pairs, the fate of every call across them, the verdict's line and a caveat."""
    if not repeat_runs:
        return [], [], [], []
    every = [(a, b)] + list(repeat_runs)
    rows = repeats.rows([pe] + [pair_estimates.estimate_pair(loaded, x, y, reps, min_effect, history)
                                for x, y in repeat_runs])
    pairs = [repeats.RepeatPair(x.run_id, y.run_id, changes.how_measured(x, y)) for x, y in every]
    shared = repeats.shared_machines(every)
    caveat = [f"The pair(s) {', '.join(shared)} share a machine with an earlier pair: what repeats there "
              "repeats on one machine, not across machines of its kind."] if shared else []
    return pairs, rows, [repeats.verdict_line(rows, len(every))], caveat


def _suites(con, a: Run, b: Run, min_effect: float, calls: dict[str, str]) -> tuple[list, list, list]:
    """Per suite (real-model runs): the suite table (with how many cells' speedup `calls` are called),
    cells newly failing and newly passing."""
    rows_a, rows_b = (run_tables.records(con, "cells_of_run", r.run_id) for r in (a, b))
    both = {r["cell_id"] for r in rows_a} & {r["cell_id"] for r in rows_b}  # a run cut short is not a failure
    rows_a, rows_b = ([r for r in rows if r["cell_id"] in both] for rows in (rows_a, rows_b))
    if not (suites.has_suites(rows_a) or suites.has_suites(rows_b)):
        return [], [], []
    return (suites.compare_rows(rows_a, rows_b, min_effect, calls), *suites.status_changes(rows_a, rows_b))


CSS = {est.IMPROVED: "faster", est.REGRESSED: "slower"}


def _unpaired(con, a: Run, b: Run) -> tuple[list[tuple[str, str, str]], list[str]]:
    """The cells of one run only (run, cell, status), and where there are any a caveat saying that no figure
    counts them."""
    unpaired = [tuple(r) for r in con.execute(sql("compare_unpaired"), {"baseline": a.run_id, "candidate": b.run_id}).fetchall()]
    if unpaired:
        n_a = sum(r[0] == a.run_id for r in unpaired)
        return unpaired, [f"A holds {n_a} cell(s) that B lacks and B {len(unpaired) - n_a} that A lacks (a run not "
                       "finished, or other matrices; listed under 'Cells in only one run'): every figure here, the "
                       "per-suite table's too, counts only the cells of both."]
    return unpaired, []


def build_compare_report(loaded: Loaded, a: Run, b: Run, trend_runs: list[Run], allow_mismatch: bool = False,
                         reps: int = stats.DEFAULT_REPS, now: str | None = None,
                         min_effect: float = stats.MIN_EFFECT,
                         repeat_runs: list[tuple[Run, Run]] = (), history=None) -> CompareReport:
    """Context of the comparison report of candidate b against baseline a; `repeat_runs`: further pairs of
    runs of the same two versions (compare_report/repeats.py), each judged the same way; `history`
    (analysis/history.History): the run-to-run spread of sibling runs in each run's intervals."""
    mismatch = check_comparable(a, b)
    for x, y in repeat_runs:
        mismatch += [f"repeat {x.run_id}:{y.run_id}: {m}" for m in check_comparable(x, y)]
    mismatch += repeats.check((a, b), list(repeat_runs))
    if mismatch and not allow_mismatch:
        raise DataError(f"runs {a.run_id} and {b.run_id} differ ({'; '.join(mismatch)}); "
                        "pass --allow-mismatch (make report ... ALLOW_MISMATCH=1) to compare them anyway")
    con = loaded.con
    pe = pair_estimates.estimate_pair(loaded, a, b, reps, min_effect, history)
    pairs, fam, ests, labels = pe.pairs, pe.fam, pe.ests, pe.labels
    covered = _coverage(loaded, a, pairs, pe.samples[0]["has_compiled"], reps)
    calls = {q: {cid: Change.of(e) for cid, e in by.items()} for q, by in ests.items()}
    rows, transitions = _pair_rows(pairs, calls)
    speedup_calls = {cid: c.call for cid, c in calls["speedup"].items()}
    groups = compare_groups.group_changes(pairs, fam, speedup_calls, pe.callable_ids)
    headline = compare_groups.headline(groups, a.run_id, b.run_id, min_effect)
    headline.append(_count_line(rows, len(fam["speedup"]), min_effect))
    trend_ids = [r.run_id for r in trend_runs]
    trend_table, trend_chart = changes.trend_cells(con, trend_runs) if len(trend_runs) > 2 else ([], [])
    verdict = changes.verdict(a, b, ests, labels, transitions, min_effect)
    caveats = changes.caveats(a, b, pairs, ests) + run_accuracy_caveats(con, (a, b))
    if pe.shift is not None:  # named once, at the top of what limits the verdict
        caveats.insert(1, pe.shift.sentence(a.run_id, b.run_id))
    unpaired, one_run = _unpaired(con, a, b)
    rep_pairs, rep_rows, rep_verdict, rep_caveat = _repeats(loaded, a, b, pe, repeat_runs, reps, min_effect, history)
    suite_rows, newly_failing, newly_passing = _suites(con, a, b, min_effect, speedup_calls)
    caveats += suites.chosen_caveat([r.manifest.get("description") for r in (a, b)]) if suite_rows else []
    diag_rows, diag_known = changes.diagnostic_changes(pairs)
    regressions, improvements = _called(pairs, ests, labels)
    prog_rows = program.pair_rows(pairs, cell_label)
    prog_line = program.verdict_line(prog_rows)
    if prog_line:
        verdict = verdict + [prog_line]
    return CompareReport(
        unverified=verify.unverified(a, b, pairs, ests, min_effect),
        suites=suite_rows, newly_failing=newly_failing, newly_passing=newly_passing,
        title=changes.title(a, b), baseline=a.run_id, candidate=b.run_id,
        generated_at=now or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        mismatch=mismatch, headline=_confounders(a, b) + headline, summary=_summary(groups), transitions=transitions,
        regressions=regressions, improvements=improvements, pairs=rows,
        unpaired=unpaired, min_effect=f"{min_effect * 100:g}%",
        uncertainty_lines=uncertainty.lines(pairs, pe.processes, pe.callable_ids, a.run_id, b.run_id, min_effect, ests) + ([
            f"{a.run_id}'s 95% speedup interval holds {b.run_id}'s speedup in {sum(covered)} of {len(covered)} "
            "paired cells. For an A/A (the same thing measured twice) a calibrated interval does so in about 91% "
            "of cells with 3 processes a run (both estimates are noisy; 83% with many processes), not 95%."]
            if covered else []), environment=_environment(a, b),
        trend_runs=trend_ids, trend=_trend(con, trend_ids), skipped_files=loaded.skipped_in(a, b),
        flagged_cells=loaded.flagged_in(a, b), diag_changes=diag_rows, diag_known=diag_known,
        chart_rows=_chart_rows(rows, pairs, fam, ests, labels, trend_chart),
        verdict=verdict + rep_verdict, caveats=caveats + one_run + rep_caveat, subtitle=changes.subtitle(a, b),
        program_rows=prog_rows, program_suites=program.suite_rows(prog_rows),
        trend_cells=trend_table, repeat_pairs=rep_pairs, repeat_rows=rep_rows, kernel_rows=kernels.pair_rows(
            pairs, cell_label, lambda side, cid: any(cid in ests[q] and ests[q][cid].call in CSS for q in (side, "speedup"))))
