"""Suite-level figures, the four PyTorch's own dashboard tracks per suite and release: pass rate,
geometric-mean speedup, cold compile time and the peak-memory ratio, per suite (timm, huggingface,
user, builtin: collector.record.contract.suite_of), phase and mode; and, between two runs, which models newly
fail or newly pass and how each suite's figures moved (docs/suites.md).

- pass rate: ok cells over attempted cells. A cell that failed to build, export, compile or run, or whose
  compiled output differs from eager's (accuracy_fail), counts in the denominator; a `skipped` cell (a
  package missing where it ran) was not attempted and does not, nor does one out of memory beside other
  cells on a shared GPU (GPUS=0,0,0): not attempted alone yet (collector/host/alone.py measures it so).
- geomean speedup: over the ok cells, with the interval of the run report's verdict (the exact t
  model over each cell's processes; analysis/stats.geomean_interval).
- cold compile: the median and the total of the ok cells' first compiled calls (cold cache), seconds.
- memory ratio: the geometric mean of compiled / eager peak allocated memory (warm), CUDA only.
- between runs, the suite's speedup change over the models ok in both: the geometric mean of the
  per-model ratios B/A with Student's t interval over models (stats.exact_t_interval): deterministic,
  and each model's own noise is inside the spread between models. It is called (the one rule,
  stats.verdict) only where every cell of the group was timed in several processes in both runs: a
  screen (one process a cell) chooses what to confirm (analysis/commands/screen.py) and calls nothing.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import numpy as np

from analysis.explain import kernels
from analysis.stats import core as stats
from analysis.stats.estimates import IMPROVED, REGRESSED
from analysis.stats.fmt import cell_label
from collector.record.contract import OOM_SHARED, accuracy_unchecked, reduced_layers, suite_of

OK = "ok"
NOT_ATTEMPTED = ("skipped",)  # a package missing where it ran: the model was not attempted
NOT_THE_MODEL = (*NOT_ATTEMPTED, OOM_SHARED)  # statuses that say nothing of the model: no status change
CONFIRMATION = "confirmation of {} screened cells"  # the description `confirm` gives its preset (commands/screen.py)


def chosen_caveat(descriptions: list[str | None]) -> list[str]:
    """Where a run of the pair is a confirmation (its description is CONFIRMATION's): its cells are those
    a screen moved most, so a per-suite figure over them is theirs, not the suite's."""
    head, tail = CONFIRMATION.split("{}")
    if not any(d and d.startswith(head) and d.endswith(tail) for d in descriptions):
        return []
    return ["These runs confirm the cells a screen chose because they moved most: a per-suite figure here is over "
            "those cells, chosen for their large moves, not over the suite's models; the screen's per-suite rows "
            "describe the suite."]


@dataclass(frozen=True)
class SuiteRow:
    """One suite, phase and mode of one run, formatted; `numbers` the same machine-readable."""

    suite: str
    phase: str
    mode: str
    pass_rate: str  # "21 of 24 (88%)"
    speedup: str  # "1.85x"
    interval: str  # "1.62x-2.11x"
    compile_median: str  # "18.2 s"
    compile_total: str  # "7.1 min" (always minutes)
    memory_ratio: str  # "0.82x", "-" off CUDA
    failed: str  # "2 build_error, 1 accuracy_fail"
    numbers: dict = field(default_factory=dict, compare=False)
    launch_bound: str = "-"  # "5 of 7: a change under 41% cannot be resolved there"
    reduced: tuple = ()  # models run with fewer layers than published: "gpt-oss-20b (num_hidden_layers=4)"


@dataclass(frozen=True)
class SuiteChange:
    """One suite, phase and mode of two runs: each figure A → B, and the speedup change over models."""

    suite: str
    phase: str
    mode: str
    pass_rate: str  # "21/24 → 22/24"
    speedup: str  # "1.85x → 2.10x"
    change: str  # "+13.5% (95% CI +6.1% to +21.4%; 19 models)"
    compile_median: str  # "18.2 s → 16.9 s"
    compile_total: str  # "7.1 min → 6.6 min"
    memory_ratio: str  # "0.82x → 0.80x"
    css: str  # faster / slower / unclear: the speedup change's call
    numbers: dict = field(default_factory=dict, compare=False)
    launch_bound: str = "-"  # "5/7 → 4/7" cells with a launch-bound side
    reduced: tuple = ()  # models either run ran with fewer layers than published
    cells_called: str = "-"  # "12 higher, 2 lower of 14": the cells whose own speedup change is called


@dataclass(frozen=True)
class StatusChange:
    """A cell that passes in one run and fails in the other."""

    cell: str
    was: str
    now: str
    why: str  # the failing side's error, first line, shortened


def _group(r: dict) -> tuple[str, str, str]:
    mode = r.get("mode") or "?"
    if r.get("compile_scope") == "step":
        mode += " [whole step]"
    return suite_of(r.get("model") or ""), r.get("phase") or "?", mode


def _groups(rows: list[dict]) -> dict[tuple[str, str, str], list[dict]]:
    out: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        if r.get("mode") != "eager":
            out.setdefault(_group(r), []).append(r)
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0] == "builtin", kv[0][0], kv[0][1] != "infer", kv[0][2])))


def has_suites(rows: list[dict]) -> bool:
    """Whether the run holds a model from a source other than the built-in files (then suites are shown)."""
    return any(suite_of(r.get("model") or "") != "builtin" for r in rows)


def _finite(values) -> list[float]:
    return [float(v) for v in values if not stats.missing(v) and float(v) > 0]


def _geo(values: list[float]) -> float | None:
    return float(math.exp(statistics.fmean(math.log(v) for v in values))) if values else None


def figures(rows: list[dict], reps_by_cell: dict | None = None) -> dict:
    """The four figures of one group of cells (numbers; None where nothing was measured)."""
    beside = sum(r.get("status") == OOM_SHARED for r in rows)
    attempted = [r for r in rows if r.get("status") not in NOT_THE_MODEL]
    ok = [r for r in attempted if r.get("status") == OK and not stats.missing(r.get("speedup"))]
    failed: dict[str, int] = {}
    for r in attempted:
        if r.get("status") != OK:
            failed[r["status"]] = failed.get(r["status"], 0) + 1
    speed = _finite(r["speedup"] for r in ok)
    reps = [reps_by_cell[r["cell_id"]] for r in ok if reps_by_cell and r["cell_id"] in reps_by_cell]
    lo, hi = stats.geomean_interval(reps) if reps and len(reps) == len(speed) else (None, None)
    cold = _finite(r.get("first_call_compiled_s") for r in ok)
    mem = _finite(r.get("mem_allocated_ratio") for r in ok)
    bound = [r for r in ok if host_paced(r, "eager") or host_paced(r, "compiled")]
    return {"launch_bound": len(bound), "device_cuda": any(r.get("device") == "cuda" for r in ok),
            "models": len({r.get("model") for r in rows}), "attempted": len(attempted), "passed": len(ok),
            "skipped": len(rows) - len(attempted) - beside, "beside": beside, "failed": dict(sorted(failed.items())),
            # ok cells whose accuracy check could not have failed; the key only where there are some
            **({"unchecked": n} if (n := sum(accuracy_unchecked(r) for r in ok)) else {}),
            "pass_rate": len(ok) / len(attempted) if attempted else None,
            "geomean_speedup": _geo(speed), "speedup_lo": lo, "speedup_hi": hi,
            "cold_compile_median_s": statistics.median(cold) if cold else None,
            "cold_compile_total_s": sum(cold) if cold else None, "memory_ratio": _geo(mem),
            "reduced": sorted({f"{r['model'].split(':')[1]} ({reduced_layers(r['model'])})" for r in rows
                               if reduced_layers(r.get("model") or "")})}


def reduced_line(rows) -> str:
    """The models of any row that ran with fewer layers than published, once each ('' if none)."""
    got = sorted({m for r in rows for m in r.reduced})
    return f"Run with fewer layers than published (reduced): {', '.join(got)}." if got else ""


def _x(v) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _s(v) -> str:
    return "-" if v is None else f"{v:.1f} s"


def _min(v) -> str:  # totals, in one unit whatever their size, so that A -> B reads at a glance
    return "-" if v is None else f"{v / 60:.1f} min"


BUSY = 0.9  # a side whose profiled kernels fill less of its step than this is paced by the host


def host_paced(r: dict, side: str) -> bool:
    """Whether the host sets the pace of a side of a stats row: launch-bound by the enqueue rule
    (cell_stats.sql: the host needs 90% of the device time to issue a step into an empty queue), or,
    where the cell has a kernel profile on a GPU, its kernels fill less than BUSY of the timed step (the
    device waits for the host: a step the enqueue rule misses once the queue hides the host's pace)."""
    if r.get(f"{side}_launch_bound"):
        return True
    split = kernels.row_splits(r).get(side)
    return split is not None and split.device == "cuda" and split.busy < BUSY


def launch_bound_text(f: dict) -> str:
    """How many ok cells have a launch-bound side, and what a screen cannot resolve there."""
    if not f["passed"] or not f["device_cuda"]:
        return "-"
    if not f["launch_bound"]:
        return f"0 of {f['passed']}"
    return (f"{f['launch_bound']} of {f['passed']}: a change under {100 * stats.LAUNCH_BOUND_AA:.0f}% cannot be "
            "resolved there")


def _rate(f: dict) -> str:
    if not f["attempted"]:
        return "-"
    return f"{f['passed']} of {f['attempted']} ({100 * f['pass_rate']:.0f}%)" + _unchecked(f)


def _unchecked(f: dict) -> str:
    """The ok cells whose accuracy check could not have failed (contract.accuracy_unchecked), if any."""
    return f", {f['unchecked']} of them unchecked" if f.get("unchecked") else ""


def run_rows(rows: list[dict], reps_by_cell: dict | None = None) -> list[SuiteRow]:
    """Every suite, phase and mode of a run's cells (`rows`: the stats rows of every cell)."""
    out = []
    for (suite, phase, mode), group in _groups(rows).items():
        f = figures(group, reps_by_cell)
        interval = "-" if f["speedup_lo"] is None else f"{f['speedup_lo']:.2f}x-{f['speedup_hi']:.2f}x"
        failed = ", ".join(f"{n} {s}" for s, n in f["failed"].items())
        failed = ", ".join(filter(None, [failed, f"{f['skipped']} skipped (not counted)" if f["skipped"] else "",
                                         f"{f['beside']} out of memory beside other cells (not counted until measured "
                                         "alone)" if f["beside"] else ""]))
        out.append(SuiteRow(suite, phase, mode, _rate(f), _x(f["geomean_speedup"]), interval,
                            _s(f["cold_compile_median_s"]), _min(f["cold_compile_total_s"]), _x(f["memory_ratio"]),
                            failed, {"suite": suite, "phase": phase, "mode": mode, **f}, launch_bound_text(f),
                            tuple(f["reduced"])))
    return out


def _short(error: str | None) -> str:
    line = next((x.strip() for x in (error or "").splitlines() if x.strip()), "")
    return line if len(line) <= 160 else line[:157] + "..."


def status_changes(rows_a: list[dict], rows_b: list[dict]) -> tuple[list[StatusChange], list[StatusChange]]:
    """(newly failing, newly passing): cells ok in one run and attempted but not ok in the other (a cell out
    of memory beside other cells on a shared GPU was not attempted alone)."""
    a = {r["cell_id"]: r for r in rows_a if r.get("mode") != "eager"}
    fail, passed = [], []
    for r in rows_b:
        old = a.get(r["cell_id"])
        if old is None or old.get("status") in NOT_THE_MODEL or r.get("status") in NOT_THE_MODEL:
            continue  # not attempted, or not alone: the comparison's status table says so
        if old["status"] == OK and r["status"] != OK:
            fail.append(StatusChange(cell_label(r), old["status"], r["status"], _short(r.get("error"))))
        elif old["status"] != OK and r["status"] == OK:
            passed.append(StatusChange(cell_label(r), old["status"], r["status"], _short(old.get("error"))))
    return fail, passed


def _passed(f: dict) -> str:
    """"16/16": ok over attempted, and the cells out of memory beside others that wait to be measured alone."""
    return f"{f['passed']}/{f['attempted']}" + _unchecked(f) + (
        f" (+{f['beside']} out of memory beside others)" if f["beside"] else "")


def _cells_called(cell_ids: list[str], calls: dict[str, str] | None, screen: bool) -> tuple[str, dict]:
    """How many of a group's paired cells have their own speedup change called, each way (`calls`: cell id
    to its speedup call, from the comparison): a row over two models calls nothing, its cells may."""
    if calls is None:
        return "-", {}
    up, down = (sum(calls.get(c) == word for c in cell_ids) for word in (IMPROVED, REGRESSED))
    text = "a screen: none called" if screen else f"{up} higher, {down} lower of {len(cell_ids)}"
    return text, {"cells_higher": up, "cells_lower": down}


def compare_rows(rows_a: list[dict], rows_b: list[dict], min_effect: float = stats.MIN_EFFECT,
                 calls: dict[str, str] | None = None) -> list[SuiteChange]:
    """Each suite, phase and mode present in both runs: the four figures A -> B, the speedup change and,
    given the cells' speedup `calls`, how many cells' own changes are called."""
    ga, gb = _groups(rows_a), _groups(rows_b)
    out = []
    for key in [k for k in ga if k in gb]:
        fa, fb = figures(ga[key]), figures(gb[key])
        sa = {r["cell_id"]: r["speedup"] for r in ga[key] if r.get("status") == OK and _finite([r.get("speedup")])}
        paired = [r for r in gb[key] if r.get("status") == OK and r["cell_id"] in sa and _finite([r.get("speedup")])]
        logs = np.array([math.log(r["speedup"] / sa[r["cell_id"]]) for r in paired])
        screen = min(int(r.get("processes") or 1) for r in ga[key] + gb[key]) < 2
        called, counts = _cells_called([r["cell_id"] for r in paired], calls, screen)
        change, css, lo, hi, point = f"- ({len(logs)} model(s) ok in both)", "unclear", None, None, None
        if len(logs) >= 2:
            point = math.exp(float(logs.mean()))
            lo, hi = stats.exact_t_interval(logs)
            css = {"faster": "faster", "slower": "slower"}.get(stats.verdict(lo, hi, point, min_effect), "unclear")
            word = {"faster": "higher", "slower": "lower"}.get(css, "not called")
            if screen:
                css, word = "unclear", "a screen: not called, confirm it"  # one process a cell chooses, never calls
            change = (f"{100 * (point - 1):+.1f}% ({word}; 95% CI {100 * (lo - 1):+.1f}% to {100 * (hi - 1):+.1f}%, "
                      f"{len(logs)} models)")
        out.append(SuiteChange(
            key[0], key[1], key[2], f"{_passed(fa)} → {_passed(fb)}",
            f"{_x(fa['geomean_speedup'])} → {_x(fb['geomean_speedup'])}", change,
            f"{_s(fa['cold_compile_median_s'])} → {_s(fb['cold_compile_median_s'])}",
            f"{_min(fa['cold_compile_total_s'])} → {_min(fb['cold_compile_total_s'])}",
            f"{_x(fa['memory_ratio'])} → {_x(fb['memory_ratio'])}", css,
            {"suite": key[0], "phase": key[1], "mode": key[2], "a": fa, "b": fb, "paired_models": len(logs),
             "speedup_change": point, "speedup_change_lo": lo, "speedup_change_hi": hi, "call": css, **counts},
            f"{fa['launch_bound']}/{fa['passed']} → {fb['launch_bound']}/{fb['passed']}"
            if fa["device_cuda"] or fb["device_cuda"] else "-", tuple(sorted(set(fa["reduced"]) | set(fb["reduced"]))),
            called))
    return out
