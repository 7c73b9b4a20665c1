"""Comparison of two runs (baseline A, candidate B), cell by cell, with bootstrap intervals.

Per paired cell: the change in speedup (speedup_B / speedup_A), in compiled step time
(compiled_B / compiled_A) and in eager step time, each a ratio with a 95% interval from the two
runs' replicates (analysis/stats.py: over processes where a cell has several, over blocks where
it has one; the runs independent) and a two-sided p-value. A change is called when its
interval excludes no change and it is at least the minimum effect size (default 2%); cells
timed in one process in either run are never called. Each cell is judged on its own
uncertainty: no global noise floor. Benjamini-Hochberg q-values are shown beside the calls.
Summary ratios are geometric means with intervals.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np

from analysis import attribution, changes, kernels, pair_estimates, repeats, tdist, uncertainty
from analysis import estimates as est
from analysis import stats, suites

from analysis.context import ENV_FIELDS
from analysis.fmt import cell_label, fmt_bytes, fmt_s, fmt_x
from analysis.load import DataError, Loaded, Run, sql

ALPHA = 0.05
MUST_MATCH = [("device", "device"), ("GPU or CPU", "device_name")]


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
        """The formatted view of an estimate (analysis/estimates.py)."""
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
    diag_changes: list = field(default_factory=list)  # (label, what changed, reasons new in B)
    diag_known: int = 0  # paired compiled cells with diagnostics on both sides
    charts: dict = field(default_factory=dict)
    chart_rows: dict = field(default_factory=dict)
    verdict: list = field(default_factory=list)  # the answer first: one line per quantity
    caveats: list = field(default_factory=list)  # what limits the answer (machines, builds, launch-bound)
    subtitle: str = ""  # versions, builds and device in words
    trend_cells: list = field(default_factory=list)  # (label, [per-run text]) per cell, 3+ runs
    repeat_pairs: list = field(default_factory=list)  # repeats.RepeatPair: this pair first, then --repeat's
    repeat_rows: list = field(default_factory=list)  # repeats.RepeatRow per change called in any pair
    kernel_rows: list = field(default_factory=list)  # kernels.PairRow per side of cells profiled in both runs
    suites: list = field(default_factory=list)  # suites.SuiteChange per suite, phase and mode (real-model runs)
    newly_failing: list = field(default_factory=list)  # suites.StatusChange: ok in A, failed in B
    newly_passing: list = field(default_factory=list)  # suites.StatusChange: failed in A, ok in B


def _env_value(v) -> str:
    """An environment field as the comparison's table shows it: '' (recorded, nothing set) as '(none)'."""
    return "(none)" if v == "" else str(v)


def _pct(r: float) -> str:
    return f"{(r - 1) * 100:+.1f}%"


def run_intervals(loaded: Loaded, run_id: str, reps: int) -> dict[str, tuple[float, float]]:
    """Each compiled cell's 95% speedup interval as the run's own report computes it
    (stats.run_stats: computed once per run, whoever asks first)."""
    return dict(stats.run_stats(loaded, run_id, reps).intervals)


def check_comparable(a: Run, b: Run) -> list[str]:
    """Differences that make a comparison unfair: device, matrix preset, protocol."""
    out = [f"{label}: {a.env.get(key)!r} vs {b.env.get(key)!r}" for label, key in MUST_MATCH
           if a.env.get(key) != b.env.get(key)]
    if a.manifest.get("preset") != b.manifest.get("preset"):
        out.append(f"matrix preset: {a.manifest.get('preset')!r} vs {b.manifest.get('preset')!r}")
    pa, pb = a.manifest.get("protocol", {}), b.manifest.get("protocol", {})
    for k in sorted(set(pa) | set(pb)):
        if k != "timeout_s" and pa.get(k) != pb.get(k):
            out.append(f"protocol {k}: {pa.get(k)!r} vs {pb.get(k)!r}")
    return out


def build_compare_report(loaded: Loaded, a: Run, b: Run, trend_runs: list[Run], allow_mismatch: bool = False,
                         reps: int = stats.DEFAULT_REPS, now: str | None = None,
                         min_effect: float = stats.MIN_EFFECT,
                         repeat_runs: list[tuple[Run, Run]] = (), history=None) -> CompareReport:
    """Context of the comparison report of candidate b against baseline a; `repeat_runs`: further
    pairs of runs of the same two versions (analysis/repeats.py), each judged the same way;
    `history` (analysis/history.History over the data folders' runs): the run-to-run spread of
    sibling runs, where there are enough, in each run's intervals."""
    mismatch = check_comparable(a, b)
    for x, y in repeat_runs:
        mismatch += [f"repeat {x.run_id}:{y.run_id}: {m}" for m in check_comparable(x, y)]
    mismatch += repeats.check((a, b), list(repeat_runs))
    if mismatch and not allow_mismatch:
        raise DataError(f"runs {a.run_id} and {b.run_id} differ ({'; '.join(mismatch)}); "
                        "pass --allow-mismatch (make report ... ALLOW_MISMATCH=1) to compare them anyway")
    con = loaded.con
    pe = pair_estimates.estimate_pair(loaded, a, b, reps, min_effect, history)
    pairs, fam, ests = pe.pairs, pe.fam, pe.ests
    sa, procs, callable_ids = pe.samples[0], pe.processes, pe.callable_ids
    # A/A calibration: how often A's 95% speedup interval holds B's speedup estimate, with A's
    # intervals as A's own report shows them (computed once, by the same function and draws)
    a_intervals = run_intervals(loaded, a.run_id, reps)
    covered = []
    for p in pairs:
        cid = p["cell_id"]
        if (cid in a_intervals and p["status_a"] == "ok" and p["status_b"] == "ok"
                and sa["has_compiled"].get(cid) and p["speedup_b"]):
            lo, hi = a_intervals[cid]
            covered.append(lo <= p["speedup_b"] <= hi)
    small = np.log1p(min_effect)

    calls = {q: {cid: Change.of(e) for cid, e in by.items()} for q, by in ests.items()}

    boots = [changes.boots(r) for r in (a, b)]
    if boots[0] and boots[1] and boots[0] != boots[1]:
        shared = boots[0] & boots[1]
        headline_notes = [f"Confounder: {a.run_id} and {b.run_id} were not collected on one machine "
                          f"({len(boots[0])} and {len(boots[1])} machine boot(s), {len(shared)} shared): host-bound "
                          "step times differ between machines of one kind, speedups much less."]
    else:
        headline_notes = []
    if changes.build_kinds_differ(a, b):
        builds = changes.versions(a, b)
        headline_notes.append(f"Confounder: the builds differ in kind ({builds[0]} against {builds[1]}): a CPU-only "
                              "build and a CUDA build of torch ship different kernels and libraries even on the "
                              "CPU; compare builds of the same kind to see what the version changed.")
    empty = Change("-", "-", "-", "-")
    rows, transitions = [], []
    for p in pairs:
        cid, label = p["cell_id"], cell_label(p)
        if p["status_a"] != p["status_b"]:
            newly_failing = p["status_a"] == "ok"
            transitions.append((label, p["status_a"], p["status_b"], "slower" if newly_failing else "faster"))
        sc = calls["speedup"].get(cid, empty)
        css = {"improved": "faster", "regressed": "slower"}.get(sc.call, "unclear")
        rows.append(PairRow(
            label, p["status_a"] if p["status_a"] == p["status_b"] else f"{p['status_a']} -> {p['status_b']}",
            fmt_x(p["speedup_a"]), fmt_x(p["speedup_b"]), sc, calls["compiled"].get(cid, empty),
            calls["eager"].get(cid, empty), f"{fmt_bytes(p['mem_a'])} / {fmt_bytes(p['mem_b'])}",
            f"{fmt_s(p['cold_a'])} / {fmt_s(p['cold_b'])}", f"{fmt_s(p['warm_a'])} / {fmt_s(p['warm_b'])}", css,
            calls["cold"].get(cid, empty), calls["warm"].get(cid, empty), calls["memory"].get(cid, empty)))
    transitions.sort(key=lambda t: (t[3] != "slower", t[0]))  # newly failing first

    # summary per phase, mode, scope and dtype (bf16 and float32 never averaged together); headline sentences
    summary, headline = [], []
    groups: dict[tuple, list[dict]] = {}
    for p in pairs:
        if p["cell_id"] in fam["speedup"]:
            groups.setdefault((p["phase"], p["mode"], p["compile_scope"], p["dtype"]), []).append(p)
    dtypes = {k[3] for k in groups}
    for (phase, mode, scope, dtype), members in sorted(groups.items()):
        ids = [m["cell_id"] for m in members]
        s_lo, s_hi = (float(np.exp(v)) for v in tdist.mean([fam["speedup"][i] for i in ids]).interval())
        c_lo, c_hi = (float(np.exp(v)) for v in tdist.mean([fam["compiled"][i] for i in ids]).interval())
        s_point = float(np.exp(np.mean([np.log(m["speedup_b"] / m["speedup_a"]) for m in members])))
        c_point = float(np.exp(np.mean([np.log(m["compiled_b"] / m["compiled_a"]) for m in members])))
        ga = float(np.exp(np.mean([np.log(m["speedup_a"]) for m in members])))
        gb = float(np.exp(np.mean([np.log(m["speedup_b"]) for m in members])))
        summary.append(SummaryRow(phase, mode, scope, dtype, len(members), fmt_x(ga), fmt_x(gb), _pct(s_point),
                                  f"{_pct(s_lo)} to {_pct(s_hi)}", _pct(c_point), f"{_pct(c_lo)} to {_pct(c_hi)}",
                                  sum(calls["speedup"][i].call == "improved" for i in ids),
                                  sum(calls["speedup"][i].call == "regressed" for i in ids)))
        what = "inference" if phase == "infer" else "training"
        scope_txt = ("" if scope == "model" else ", whole-step compile") + (f", {dtype}" if len(dtypes) > 1 else "")
        e_point = float(np.exp(np.mean([np.log(m["eager_b"] / m["eager_a"]) for m in members])))
        e_lo, e_hi = (float(np.exp(v)) for v in tdist.mean([fam["eager"][i] for i in ids]).interval())
        # eager "moved with it" only when it moved the same way, by at least the minimum effect and by
        # at least half as much as compiled: a tight +0.2% eager shift beside a +10% compiled one is
        # the compile's change (seen on a planted +10% on the H200), not a shared cause
        eager_with = (((e_hi < 1 and c_point < 1) or (e_lo > 1 and c_point > 1))
                      and abs(np.log(e_point)) >= max(small, 0.5 * abs(np.log(c_point))))
        single = sum(i not in callable_ids for i in ids)
        # the group's compiled change is called by the one rule (estimates.call_rule), on its interval
        group = est.call_rule(c_point, c_lo, c_hi, min_effect, est.QUANTITIES["compiled"][1],
                              "timed in one process" if single else None)
        if single:
            headline.append(f"Compiled {what} ({mode}{scope_txt}) step time moved {_pct(c_point)} between "
                            f"{a.run_id} and {b.run_id} (95% CI {_pct(c_lo)} to {_pct(c_hi)}, {len(members)} cells), "
                            f"but {single} of these cells were timed in one process in a run: the interval "
                            "holds within-process noise only, so no change is called.")
        elif group == est.BELOW_MIN:
            headline.append(f"Compiled {what} ({mode}{scope_txt}) step time moved {_pct(c_point)} between "
                            f"{a.run_id} and {b.run_id} (95% CI {_pct(c_lo)} to {_pct(c_hi)}, {len(members)} cells), "
                            f"less than the {min_effect * 100:g}% minimum effect: not a meaningful change.")
        elif group in (est.IMPROVED, est.REGRESSED) and eager_with:
            # eager moved the same way, significantly: the host (or a shared library) changed,
            # not what compiling buys; say so instead of "compiled is x% faster"
            headline.append(f"Compiled {what} ({mode}{scope_txt}) step time moved {_pct(c_point)} between "
                            f"{a.run_id} and {b.run_id} (95% CI {_pct(c_lo)} to {_pct(c_hi)}, {len(members)} cells), "
                            f"but eager moved with it: what changed is common to both sides (the machine, its "
                            f"load, or a library both use), not the compile; read the speedup change.")
        elif group in (est.IMPROVED, est.REGRESSED):
            # one sign convention everywhere: the change in step time, B against A, as in the tables
            headline.append(f"Compiled {what} ({mode}{scope_txt}) got {'faster' if c_point < 1 else 'slower'} in "
                            f"{b.run_id}: step time {_pct(c_point)} against {a.run_id} (95% CI {_pct(c_lo)} to "
                            f"{_pct(c_hi)}, geometric mean over {len(members)} cells).")
        else:
            headline.append(f"Compiled {what} ({mode}{scope_txt}) step time did not change measurably between "
                            f"{a.run_id} and {b.run_id} ({_pct(c_point)}, 95% CI {_pct(c_lo)} to {_pct(c_hi)}, "
                            f"{len(members)} cells).")
        headline[-1] += (f" Eager step time in the same cells: {_pct(e_point)} (95% CI {_pct(e_lo)} to {_pct(e_hi)});"
                         f" speedup {_pct(s_point)} (95% CI {_pct(s_lo)} to {_pct(s_hi)}).")
    n_reg = sum(r.speedup_change.call == "regressed" for r in rows)
    n_imp = sum(r.speedup_change.call == "improved" for r in rows)
    n_bh = sum(r.speedup_change.call in ("regressed", "improved") and float(r.speedup_change.q) < ALPHA for r in rows)
    headline.append(f"{n_imp} cell(s) improved and {n_reg} regressed in speedup (95% interval excludes no change "
                    f"and the change is at least the {min_effect * 100:g}% minimum effect), of "
                    f"{len(fam['speedup'])} paired cells; {n_bh} of these calls also survive Benjamini-Hochberg "
                    f"at q below {ALPHA}.")

    unpaired = [(r, c, s) for r, c, s in con.execute(sql("compare_unpaired"),
                                                     {"baseline": a.run_id, "candidate": b.run_id}).fetchall()]
    env = []
    for label, key in ENV_FIELDS + [("TF32", "tf32")]:
        va = a.manifest.get("protocol", {}).get(key) if key == "tf32" else a.env.get(key)
        vb = b.manifest.get("protocol", {}).get(key) if key == "tf32" else b.env.get(key)
        if va not in (None, "") or vb not in (None, ""):
            env.append((label, _env_value(va), _env_value(vb), va != vb))
    trend_ids = [r.run_id for r in trend_runs]
    trend_rows: dict[tuple, dict[str, str]] = {}
    for run_id, phase, mode, scope, dtype, n, g in con.execute(sql("trend"), {"runs": trend_ids}).fetchall():
        trend_rows.setdefault((phase, mode, scope, dtype), {})[run_id] = f"{g:.2f}x ({n})"
    trend = [(f"{k[0]} {k[1]} {k[3]}" + ("" if k[2] == "model" else f" [{k[2]}]"), [v.get(r, "-") for r in trend_ids])
             for k, v in sorted(trend_rows.items())]
    forest = sorted(((r.label, float(np.exp(fam["speedup"][p["cell_id"]].centre)),
                      *np.exp(fam["speedup"][p["cell_id"]].interval()))
                     for r, p in zip(rows, pairs) if p["cell_id"] in fam["speedup"]), key=lambda t: t[1])
    diag_rows, diag_known = changes.diagnostic_changes(pairs)
    labels = pe.labels
    ms = (lambda v: "-" if v is None else f"{v:.3f} ms")
    fmt = {"compiled": ("compiled_a", "compiled_b", ms), "eager": ("eager_a", "eager_b", ms),
           "speedup": ("speedup_a", "speedup_b", fmt_x), "cold": ("cold_a", "cold_b", fmt_s),
           "warm": ("warm_a", "warm_b", fmt_s), "memory": ("mem_a", "mem_b", fmt_bytes)}
    css = {est.IMPROVED: "faster", est.REGRESSED: "slower"}
    reg, imp = changes.called_rows(pairs, ests, labels, fmt)
    cid_of = {v: k for k, v in labels.items()}

    def what(label: str, q: str) -> str:  # a speedup change says which side moved it (analysis/attribution.py)
        if q != "speedup":
            return est.QUANTITIES[q][0]
        cid = cid_of[label]
        ea, ca = ests["eager"].get(cid), ests["compiled"].get(cid)
        moved = attribution.side(ea, ca)
        return f"speedup: {attribution.words(moved, ea, ca)}" if moved else "speedup"

    as_rows = (lambda rows: [CalledRow(label, q, what(label, q), va, vb, Change.of(e), e.reason, css[e.call])
                             for label, q, va, vb, e in rows])
    compiled_forest = sorted(((labels[cid], e.point, e.lo, e.hi) for cid, e in ests["compiled"].items()
                              if e.point and e.lo), key=lambda t: t[1])
    for label, r in (("host dispatch (us per eager op)", "dispatch_us"),
                     ("host dispatch + sync (us)", "dispatch_sync_us")):
        va, vb = ((x.env.get("host_calibration") or {}).get(r) for x in (a, b))
        if va not in (None, "") or vb not in (None, ""):
            env.append((label, _env_value(va), _env_value(vb), va != vb))
    trend_table, trend_chart = changes.trend_cells(con, trend_runs) if len(trend_runs) > 2 else ([], [])
    verdict = changes.verdict(a, b, ests, labels, transitions, min_effect)
    caveats = changes.caveats(a, b, pairs, ests)
    if pe.shift is not None:  # named once, at the top of what limits the verdict
        caveats.insert(1, pe.shift.sentence(a.run_id, b.run_id))
    rep_pairs, rep_rows = [], []
    if repeat_runs:
        every = [(a, b)] + list(repeat_runs)
        rep_rows = repeats.rows([pe] + [pair_estimates.estimate_pair(loaded, x, y, reps, min_effect, history)
                                        for x, y in repeat_runs])
        rep_pairs = [repeats.RepeatPair(x.run_id, y.run_id, changes.how_measured(x, y)) for x, y in every]
        verdict.append(repeats.verdict_line(rep_rows, len(every)))
        shared = repeats.shared_machines(every)
        if shared:
            caveats.append(f"The pair(s) {', '.join(shared)} share a machine with an earlier pair: what repeats there "
                           "repeats on one machine, not across machines of its kind.")
    rows_a, rows_b = (con.execute(sql("cells_of_run"), {"run_id": r.run_id}).df().replace({np.nan: None})
                      .to_dict("records") for r in (a, b))
    shown = suites.has_suites(rows_a) or suites.has_suites(rows_b)
    newly_failing, newly_passing = suites.status_changes(rows_a, rows_b) if shown else ([], [])
    return CompareReport(
        suites=suites.compare_rows(rows_a, rows_b, min_effect) if shown else [],
        newly_failing=newly_failing, newly_passing=newly_passing,
        title=changes.title(a, b), baseline=a.run_id, candidate=b.run_id,
        generated_at=now or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        mismatch=mismatch, headline=headline_notes + headline, summary=summary, transitions=transitions,
        regressions=as_rows(reg), improvements=as_rows(imp), pairs=rows,
        unpaired=unpaired, min_effect=f"{min_effect * 100:g}%",
        uncertainty_lines=uncertainty.lines(pairs, procs, callable_ids, a.run_id, b.run_id, min_effect, ests) + ([
            f"{a.run_id}'s 95% speedup interval holds {b.run_id}'s speedup in {sum(covered)} of {len(covered)} "
            "paired cells. For an A/A (the same thing measured twice) a calibrated interval does so in about 91% "
            "of cells with 3 processes a run (both estimates are noisy; 83% with many processes), not 95%."]
            if covered else []), environment=env,
        trend_runs=trend_ids, trend=trend, skipped_files=loaded.skipped_in(a, b),
        flagged_cells=loaded.flagged_in(a, b),
        diag_changes=diag_rows, diag_known=diag_known,
        chart_rows={"forest": forest, "compiled_forest": compiled_forest, "trend": trend_chart,
                    "estimates": [{"cell_id": cid, "cell": labels[cid], "quantity": q, "ratio": e.point,
                                   "lo": e.lo, "hi": e.hi, "call": e.call, "interval_from": e.reason,
                                   **({"moved": attribution.side(ests["eager"].get(cid), ests["compiled"].get(cid))}
                                      if q == "speedup" else {})}
                                  for q, by in ests.items() for cid, e in sorted(by.items())]},
        verdict=verdict, caveats=caveats, subtitle=changes.subtitle(a, b), trend_cells=trend_table,
        repeat_pairs=rep_pairs, repeat_rows=rep_rows, kernel_rows=kernels.pair_rows(
            pairs, cell_label, lambda side, cid: any(cid in ests[q] and ests[q][cid].call in css for q in (side, "speedup"))))
