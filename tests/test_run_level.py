"""What a cell's processes cannot show (analysis/run_level.py): the autotuning draw and a run-wide
shift are withheld from the per-cell calls; the false-alarm budget in docs/statistics.md is what
benchmarks/false_alarms.py prints."""
import json
import re
import subprocess
import sys

from conftest import ROOT

from analysis import estimates as est
from analysis import run_level


def test_the_run_level_first_call_bound_widens_for_a_run_of_few_cells():
    assert est.run_level_bound("cold", 12) == est.FIRST_CALL_RUN_BOUND["cold"]
    assert est.run_level_bound("cold", 1) == est.FIRST_CALL_NOISE["cold"]
    assert est.FIRST_CALL_RUN_BOUND["warm"] < est.run_level_bound("warm", 2) < est.FIRST_CALL_NOISE["warm"]


def _e(q, point, lo, hi):
    return est.Estimate(q, point, lo, hi, est.call_rule(point, lo, hi, 0.02, est.QUANTITIES[q][1]), "t")


def _rec(**kernels):
    return json.dumps({"kernels": kernels, "count": len(kernels)})


def _ests(compiled, speedup):
    return {"compiled": {"c": _e("compiled", *compiled)}, "speedup": {"c": _e("speedup", *speedup)}}


def test_a_draw_between_two_runs_of_one_build_is_not_called_and_cold_replicates_are():
    pair = {"cell_id": "c", "autotune_a": _rec(k1="XBLOCK=512", k2="XBLOCK=64"),
            "autotune_b": _rec(k1="XBLOCK=1024", k2="XBLOCK=64")}
    ests = _ests((1.044, 1.040, 1.049), (0.96, 0.95, 0.97))
    assert run_level.withhold_draws([pair], ests, same_build=True) == 1
    assert ests["compiled"]["c"].call == run_level.DRAW and ests["speedup"]["c"].call == run_level.DRAW
    # across builds a kernel's name can be another kernel: the call stands (a caveat words the hint)
    ests = _ests((1.044, 1.040, 1.049), (0.96, 0.95, 0.97))
    assert run_level.withhold_draws([pair], ests, same_build=False) == 0 and ests["compiled"]["c"].called
    # every process compiled cold in both runs: the intervals hold the draw
    cold = {**pair, "rep_cache_a": "cold", "rep_cache_b": "cold"}
    ests = _ests((1.044, 1.040, 1.049), (0.96, 0.95, 0.97))
    assert run_level.withhold_draws([cold], ests, same_build=True) == 0 and ests["compiled"]["c"].called
    # the same choices: the draw is ruled out, the change is called
    same = {**pair, "autotune_b": pair["autotune_a"]}
    ests = _ests((1.044, 1.040, 1.049), (0.96, 0.95, 0.97))
    assert run_level.withhold_draws([same], ests, same_build=True) == 0 and ests["compiled"]["c"].called


def test_a_shift_of_both_sides_in_nearly_every_cell_is_named_once_and_the_speedup_stays_callable():
    ids = [f"c{i}" for i in range(5)]
    ests = {"eager": {c: _e("eager", 0.64, 0.60, 0.68) for c in ids},
            "compiled": {c: _e("compiled", 0.66, 0.62, 0.70) for c in ids},
            "speedup": {c: _e("speedup", 0.97, 0.96, 0.98) for c in ids}}
    ests["compiled"]["c4"] = _e("compiled", 1.0, 0.98, 1.02)  # one cell did not move: 4 of 5 did
    shift = run_level.withhold_run_wide(ests, set(ids), 0.02)
    assert shift is not None and shift.cells == 4 and shift.of == 5 and round(shift.eager, 2) == 0.64
    assert all(ests[q][c].call in (run_level.WIDE, est.NO_CHANGE) for q in ("eager", "compiled") for c in ids)
    assert all(ests["speedup"][c].called for c in ids)
    assert "4 of 5 cells" in shift.sentence("a", "b")
    # three of five cells: not nearly every cell, so each is called on its own
    ests = {"eager": {c: _e("eager", 0.64, 0.60, 0.68) for c in ids},
            "compiled": {c: _e("compiled", 0.66 if c in ids[:3] else 1.0, 0.62, 0.70) for c in ids}}
    assert run_level.withhold_run_wide(ests, set(ids), 0.02) is None and ests["compiled"]["c0"].called


def test_the_false_alarm_budget_in_the_docs_is_what_the_benchmark_prints():
    out = subprocess.run([sys.executable, "benchmarks/false_alarms.py"], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, check=True).stdout
    doc = (ROOT / "docs" / "statistics.md").read_text().split("## The false-alarm budget", 1)[1]
    for q, (name, _) in est.QUANTITIES.items():
        n, called = re.search(rf"^{re.escape(name)}\s+(\d+)\s+(\d+)", out, re.M).groups()
        row = re.search(rf"^\| {re.escape(name)} \| (\d+) \| [^|]* \| ([^|]+) \|", doc, re.M)
        assert row, name
        assert row.group(1) == n and row.group(2).strip().split()[0] == called, (name, n, called, row.group(0))
    hit, total = re.search(r"GPU-bound cells .*: (\d+) of (\d+) called", out).groups()
    assert hit == total and f"| {total} | {total} | {total} |" in doc
    # the verdict's run-level first-call line over the same pairs (estimates.run_level_bound)
    cold = re.search(r"run-level cold first call: called in (\d+ of \d+)", out).group(1)
    warm = re.search(r"run-level warm first call: called in (\d+ of \d+)", out).group(1)
    flat = " ".join(doc.split())
    assert f"{cold} pairs called" in flat and f"), {warm}." in flat, (cold, warm)
