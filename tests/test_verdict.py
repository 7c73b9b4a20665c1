"""The verdict at the top of a run's report, on synthetic cells with known speedups."""
import numpy as np
import pytest

from analysis.run_report import verdict
from analysis.run_report.context import FailureRow


def _cell(i, speedup, phase="infer", mode="default", verdict_="faster", spread=0.01, **kw):
    return {"cell_id": f"c{i}", "phase": phase, "mode": mode, "compile_scope": "model", "dtype": "amp_bf16",
            "model": f"m{i}", "batch_size": 8 * (i + 1), "status": "ok", "speedup": speedup,
            "speedup_lo": speedup * 0.98, "speedup_hi": speedup * 1.02, "verdict": verdict_, "processes": 3,
            "process_spread": spread, "eager_iqr_rel": 0.01, "compiled_iqr_rel": 0.01, **kw}


def _reps(cells, sd=0.002):
    """Each cell's LogDist of ln speedup: three processes spread by about `sd` around its speedup."""
    from analysis.stats.tdist import LogDist

    return {c["cell_id"]: LogDist.of_processes(np.log(c["speedup"]) + np.array([-sd, 0.0, sd]) * 1.7)
            for c in cells}


def test_a_tiny_difference_is_not_a_verdict_of_faster():
    cells = [_cell(0, 1.004, verdict_="no clear difference"), _cell(1, 1.003, verdict_="no clear difference")]
    v = verdict.build(cells, _reps(cells), {}, [], 0.10, 0.02)
    assert v.rows[0].css == "unclear" and v.rows[0].speedup.startswith("no meaningful difference")
    assert v.sentence.startswith("Compiling makes no meaningful difference in 1 of 1")


def test_groups_speedups_payoff_slower_cells_and_what_is_pooled():
    cells = [_cell(0, 2.0), _cell(1, 1.5), _cell(2, 0.8, phase="train", verdict_="slower"),
             _cell(3, 0.7, phase="train", verdict_="slower")]
    v = verdict.build(cells, _reps(cells), {"c0": 100.0, "c1": 300.0}, [], 0.10, 0.02)
    infer, train = v.rows
    assert infer.speedup == "1.73x faster" and infer.pays_off.startswith("~200 steps (2 cell(s))")
    assert infer.pools == "2 model(s); dtypes amp_bf16; batch 8-16"
    assert train.css == "slower" and train.speedup.startswith("25% slower")
    assert "faster in 1 of 2 phase/mode groups" in v.sentence and "slower in training default (0.75x)" in v.sentence
    assert "2 cell(s) are slower compiled: m3 train" in v.sentence


def test_caveats_name_failures_test_runs_one_process_and_disagreeing_cells():
    cells = [_cell(0, 2.0, processes=1, spread=None), _cell(1, 1.5, spread=0.2, planted_slowdown_pct=10.0)]
    failures = [FailureRow("x", "crashed", "boom", "boom")]
    v = verdict.build(cells, _reps(cells), {}, failures, 0.10, 0.02)
    text = "\n".join(v.caveats)
    assert "TEST RUN" in v.caveats[0] and "1 cell(s) failed (1 crashed)" in text
    assert "1 of 2 cells were timed in one process" in text and "1 of 2 cells have processes that disagree" in text
    # the compile-time plant is a test run too, named with its size
    planted = [_cell(0, 2.0, planted_compile_ms=5000.0), _cell(1, 1.5)]
    caveats = verdict.build(planted, _reps(planted), {}, [], 0.10, 0.02).caveats
    assert caveats[0] == "TEST RUN: 1 cell(s) have a planted compile time (+5000 ms a first call); not real figures."
    clean = [_cell(0, 2.0), _cell(1, 1.5)]
    assert not any("TEST RUN" in c for c in verdict.build(clean, _reps(clean), {}, [], 0.10, 0.02).caveats)


def test_every_failed_mode_is_named_and_slower_cells_beyond_eight_are_counted_not_dropped():
    cells = [_cell(i, 0.9 - i * 0.01, verdict_="slower") for i in range(10)] + [_cell(10, 2.0)]
    failed = {"default": {"cells": 11, "failed": 0, "statuses": {}},
              "aot-inductor": {"cells": 3, "failed": 3, "statuses": {"crashed": 3}},
              "max-autotune": {"cells": 2, "failed": 1, "statuses": {"oom": 1}}}
    v = verdict.build(cells, _reps(cells), {}, [], 0.10, 0.02, failed_modes=failed)
    assert "failed: aot-inductor in 3 of 3 cells (3 crashed), max-autotune in 1 of 2 cells (1 oom)" in v.sentence
    assert "10 cell(s) are slower compiled" in v.sentence and "and 2 more (each marked slower" in v.sentence
    assert len(v.slower) == 10 and v.slower[0].startswith("m9 ")  # slowest first, every one kept
    # a cell out of memory beside other cells on a shared GPU, or skipped, is not its mode's failure
    from analysis.run_report.context import failed_modes
    rows = [{"mode": "default", "status": s} for s in ("ok", "oom_shared", "skipped", "oom", "accuracy_fail")]
    assert failed_modes(rows) == {"default": {"cells": 5, "failed": 1, "statuses": {"oom": 1}}}


def test_the_summary_pastes_standalone_with_its_failures(fixture_copy, tmp_path):
    from analysis.__main__ import main as analysis_main

    assert analysis_main(["--data", str(fixture_copy), "--out", str(tmp_path), "--reps", "50"]) == 0
    text = (tmp_path / "fixture-small" / "summary.md").read_text()
    assert "Failures (1):" in text and ": compile_error: " in text  # the caveat's "listed under Failures" holds
    assert "beside this file" not in text and "&lt;" not in text and "&gt;" not in text
    assert "failed: " in text.split("\n\n")[2]  # the verdict sentence names the failing mode


def test_the_verdict_says_whose_intervals_hold_the_autotuning_draw():
    """A cell whose cold compile autotuned kernels shares that draw across its warm replicates (a
    caveat: a rerun can differ beyond the interval); with COLD_REPLICATES=1 the intervals hold it."""
    import json

    from analysis.run_report.verdict import _autotune_caveat

    rec = {"kernels": {"k": "XBLOCK=64 num_warps=4"}, "count": 1, "unnamed": 0}
    warm = {"processes": 3, "replicate_cache": "warm", "autotune_json": json.dumps(rec)}
    cold = {"processes": 3, "replicate_cache": "cold",
            "autotune_json": json.dumps({**rec, "replicates": [{"differ": 1, "kernels": {"k": "XBLOCK=128"}},
                                                               {"differ": 0, "kernels": {}}]})}
    untuned = {"processes": 3, "replicate_cache": "warm", "autotune_json": None}  # the CPU, eager, older rows
    got = _autotune_caveat([warm, cold, untuned])
    assert len(got) == 2
    assert got[0].startswith("1 of 3 cells autotuned kernels in their cold compile, a draw every process")
    assert got[1].startswith("1 of 3 cells compiled every process cold") and got[1].endswith("differently in 1 of them.")
    assert _autotune_caveat([untuned]) == []
    assert _autotune_caveat([{**warm, "processes": 1}]) == []  # one process: no replicate to share it with


def test_a_wide_interval_is_not_determined_not_no_difference():
    """0.79x with an interval of 0.70x-1.00x once read "no meaningful difference (0.79x)", which reads as
    "the same" where it means "we cannot tell": an interval that reaches beyond the minimum effect either
    way is "not determined"; one inside it, "no meaningful difference"."""
    cells = [_cell(0, 0.70, verdict_="no clear difference"), _cell(1, 0.90, verdict_="no clear difference")]
    v = verdict.build(cells, _reps(cells, sd=0.2), {}, [], 0.10, 0.02)
    (row,) = v.rows
    assert row.css == "unclear" and row.speedup.startswith("not determined (0.79x)"), row.speedup
    assert row.numbers["call"] == "not determined"
    assert v.sentence.startswith("Whether compiling helps is not determined in 1 of 1 phase/mode groups (intervals "
                                 "too wide to tell) (a difference is called when it is at least 2% and its 95% "
                                 "interval excludes no change)")
    assert "exclude none" not in v.sentence
    assert verdict.undecided(0.99, 1.015, 0.02) == "no meaningful difference"
    assert verdict.undecided(0.70, 1.00, 0.02) == "not determined"


def test_a_passed_accuracy_check_that_could_not_have_failed_is_named():
    """docs/measurement.md: a check allows max(tolerance, 3 x eager's own error against float64); where that
    reaches 1.0, an all-zero output passes (GPT-Neo's bf16 eager output is 36-48% from float64), so the cell's
    pass says nothing. A training cell is blind only if its gradients' check is too."""
    blind = [_cell(0, 2.0, accuracy_ok=True, tolerance=0.05, eager_output_rel_err=0.36),
             _cell(1, 2.0, phase="train", accuracy_ok=True, tolerance=0.05, eager_output_rel_err=0.40,
                   eager_grad_rel_err=0.94)]
    seeing = [_cell(2, 2.0, accuracy_ok=True, tolerance=0.05, eager_output_rel_err=0.33),  # 0.99 allowed
              _cell(3, 2.0, phase="train", accuracy_ok=True, tolerance=0.05, eager_output_rel_err=0.40,
                    eager_grad_rel_err=0.01),  # its gradients were checked
              _cell(4, 2.0, accuracy_ok=True, tolerance=0.05, eager_output_rel_err=None),  # no wider reference
              _cell(5, 2.0, accuracy_ok=None, tolerance=0.05, eager_output_rel_err=0.5)]  # not checked at all
    lines = verdict.accuracy_caveat(blind + seeing)
    assert lines == ["2 of 6 cells passed an accuracy check that could not fail: eager's own error against float64 "
                     "(0.36-0.40) times 3 passes an all-zero output, so their compiled outputs are unchecked (m0 infer, "
                     "m1 train; docs/measurement.md).",
                     "1 of 6 cells had only their gradients checked: eager's output is 0.40 from float64, 3x that "
                     "passes zeros (m3 train; docs/measurement.md)."], lines
    assert verdict.accuracy_caveat(seeing) == [lines[1].replace("1 of 6", "1 of 4")]
    assert verdict.accuracy_caveat(seeing[:1] + seeing[2:]) == []
    v = verdict.build(blind, _reps(blind), {}, [], 0.10, 0.02)
    assert any("could not fail" in c for c in v.caveats), v.caveats


def test_a_training_cell_whose_gradients_check_could_not_fail_is_named_apart():
    """A training cell whose output check could fail and whose gradients' could not (ResNet-50 bf16 on the H200:
    eager's gradients 1.31 from float64) is not 'unchecked' as a whole, and the caveat says which half was."""
    from collector.record.contract import accuracy_blind_parts, accuracy_unchecked

    grads = _cell(0, 2.0, phase="train", accuracy_ok=True, tolerance=0.05, eager_output_rel_err=0.002,
                  eager_grad_rel_err=1.312)
    outs = _cell(1, 2.0, phase="train", accuracy_ok=True, tolerance=0.05, eager_output_rel_err=0.40,
                 eager_grad_rel_err=0.01)
    whole = _cell(2, 2.0, phase="train", accuracy_ok=True, tolerance=0.05, eager_output_rel_err=0.40,
                  eager_grad_rel_err=0.94)
    infer = _cell(3, 2.0, accuracy_ok=True, tolerance=0.05, eager_output_rel_err=0.36)
    failed = _cell(4, 2.0, phase="train", accuracy_ok=False, tolerance=0.05, eager_output_rel_err=0.002,
                   eager_grad_rel_err=1.312)
    assert [accuracy_blind_parts(r) for r in (grads, outs, whole, infer, failed)] == [
        ["gradients"], ["output"], ["output", "gradients"], ["output"], []]
    assert [accuracy_unchecked(r) for r in (grads, outs, whole, infer, failed)] == [False, False, True, True, False]
    lines = verdict.accuracy_caveat([grads, outs, whole, infer, failed])
    assert len(lines) == 3 and lines[0].startswith("2 of 5 cells passed an accuracy check that could not fail"), lines
    assert lines[1] == ("1 of 5 cells had only their gradients checked: eager's output is 0.40 from float64, 3x that "
                        "passes zeros (m1 train; docs/measurement.md)."), lines[1]
    assert lines[2] == ("1 of 5 cells had only their outputs checked: eager's gradients are 1.31 from float64, 3x that "
                        "passes zeros (m0 train; docs/measurement.md)."), lines[2]
    assert verdict.accuracy_caveat([grads]) == [lines[2].replace("1 of 5", "1 of 1")] and verdict.accuracy_caveat([failed, infer])[1:] == []


def test_the_reports_blind_check_is_the_collectors_own_rule():
    """contract.accuracy_blind says a check is blind exactly where the collector's check (child/accuracy.py)
    would pass an all-zero output, whose relative error is 1.0, for every quantity compared."""
    from collector.child.accuracy import TOLERANCE, _within
    from collector.record.contract import accuracy_blind

    for tol in TOLERANCE.values():
        for eager in (None, float("nan"), 0.0, 0.01, 0.2, 0.333, 0.334, 0.5, 2.0):
            assert accuracy_blind(tol, [eager]) == (eager is not None and eager == eager and _within(1.0, eager, tol))
    assert not accuracy_blind(0.05, []) and not accuracy_blind(0.05, [0.5, 0.1]) and accuracy_blind(0.05, [0.5, 0.4])


@pytest.mark.slow
def test_a_zeroed_compile_fails_until_eagers_planted_error_makes_the_check_blind_and_then_it_is_named():
    """docs/validation.md: the real cell path on the CPU (inductor), the compiled output zeroed (error 1.0) and
    eager's own error planted through the float64 reference: failed at 0% and 40%, passed and named at 60%; a
    training cell's gradients named apart at 60% (accuracy_blind_parts)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(root / "benchmarks" / "accuracy_reference.py"), "--blind"],
                         capture_output=True, text=True, cwd=root)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [ln.split(" | ") for ln in out.stdout.splitlines() if ln[:1].isdigit()]
    assert [(r[0], r[2], r[4], r[5]) for r in rows[:3]] == [("0%", "1.0000", "accuracy_fail", "False"),
                                                         ("40%", "1.0000", "accuracy_fail", "False"),
                                                         ("60%", "1.0000", "ok", "True")], rows
    # training, compiled as is, eager's gradient error planted: only the gradients' half named, and only at 60%
    assert [(r[0], r[5], r[6]) for r in rows[3:]] == [("0%", "ok", "[]"), ("40%", "ok", "[]"),
                                                      ("60%", "ok", "['gradients']")], rows


def test_a_comparisons_accuracy_caveat_that_every_run_shares_is_said_once():
    """The comparison's accuracy lines per run: word for word the same in both runs (ResNet-18's training gradients
    in v-h200's two torches), one line for both; where they differ, each run's own, its name first."""
    from types import SimpleNamespace

    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE stats (run_id VARCHAR, mode VARCHAR, status VARCHAR, model VARCHAR, phase VARCHAR, "
                "accuracy_ok BOOLEAN, tolerance DOUBLE, eager_output_rel_err DOUBLE, eager_grad_rel_err DOUBLE)")
    for run in ("a", "b"):
        con.execute("INSERT INTO stats VALUES (?, 'default', 'ok', 'resnet18', 'train', true, 0.05, 0.0, 0.356)", [run])
        con.execute("INSERT INTO stats VALUES (?, 'eager', 'ok', 'resnet18', 'train', true, 0.05, 0.0, 0.9)", [run])
    runs = [SimpleNamespace(run_id="a"), SimpleNamespace(run_id="b")]
    lines = verdict.run_accuracy_caveats(con, runs)
    assert lines == ["Both runs: 1 of 1 cells had only their outputs checked: eager's gradients are 0.36 from "
                     "float64, 3x that passes zeros (resnet18 train; docs/measurement.md)."], lines
    con.execute("INSERT INTO stats VALUES ('b', 'default', 'ok', 'gptneo', 'infer', true, 0.05, 0.478, NULL)")
    lines = verdict.run_accuracy_caveats(con, runs)
    assert [ln.split(":")[0] for ln in lines] == ["a", "b", "b"], lines
    assert "gptneo infer" in lines[1] and lines[2].startswith("b: 1 of 2 cells had only their outputs"), lines
