"""Suite-level figures (analysis/run_report/suites.py) and the screen's choice of cells to confirm (analysis/commands/screen.py)."""
import json
import math

import pytest

from analysis.commands import screen

from analysis.run_report import suites
from collector.record.contract import suite_of


def _row(model, status="ok", speedup=2.0, cold=10.0, mem=0.8, phase="infer", mode="default", cid=None, error=None):
    return {"cell_id": cid or f"{model}__{phase}__{mode}", "model": model, "phase": phase, "mode": mode, "processes": 3,
            "dtype": "amp_bf16", "batch_size": 8, "compile_scope": "model", "status": status,
            "speedup": speedup if status == "ok" else None, "first_call_compiled_s": cold if status == "ok" else None,
            "mem_allocated_ratio": mem if status == "ok" else None, "error": error}


@pytest.mark.parametrize("model, suite", [
    ("timm:resnet50", "timm"), ("hf:BertForMaskedLM:num_hidden_layers=2", "huggingface"),
    ("examples/user_model.py:build", "user"), ("my_pkg.models:build:width=3", "user"),
    ("gpt:layers=2", "builtin"), ("mlp", "builtin"),
])
def test_each_row_belongs_to_the_suite_of_its_model(model, suite):
    assert suite_of(model) == suite


def test_pass_rate_counts_failures_and_not_skipped_cells():
    rows = [_row("timm:a", speedup=2.0, cold=10, mem=0.5), _row("timm:b", speedup=8.0, cold=30, mem=2.0),
            _row("timm:c", status="build_error"), _row("timm:d", status="accuracy_fail"),
            _row("timm:e", status="skipped"), _row("timm:a", mode="eager", cid="eager-cell")]
    (row,) = suites.run_rows(rows)
    f = row.numbers
    assert (f["attempted"], f["passed"], f["skipped"]) == (4, 2, 1)
    assert row.pass_rate == "2 of 4 (50%)"
    assert f["geomean_speedup"] == pytest.approx(4.0)  # sqrt(2 x 8)
    assert f["cold_compile_median_s"] == 20 and f["cold_compile_total_s"] == 40
    assert f["memory_ratio"] == pytest.approx(1.0)  # sqrt(0.5 x 2)
    assert row.failed == "1 accuracy_fail, 1 build_error, 1 skipped (not counted)"


def test_suites_are_shown_only_for_runs_with_sourced_models():
    assert not suites.has_suites([_row("mlp"), _row("gpt:layers=2")])
    assert suites.has_suites([_row("mlp"), _row("hf:BertModel")])
    groups = [(r.suite, r.phase) for r in suites.run_rows([_row("mlp"), _row("hf:X"), _row("timm:y", phase="train")])]
    assert groups == [("huggingface", "infer"), ("timm", "train"), ("builtin", "infer")]


def test_newly_failing_and_newly_passing_cells_are_named_with_the_error():
    a = [_row("timm:a"), _row("timm:b", status="compile_error", error="boom\nmore"), _row("timm:c"),
         _row("timm:d", status="skipped")]
    b = [_row("timm:a", status="runtime_error", error="CUDA error: device-side assert\ntrace"), _row("timm:b"),
         _row("timm:c"), _row("timm:d", status="ok")]
    fail, passed = suites.status_changes(a, b)
    assert [(c.cell, c.was, c.now, c.why) for c in fail] == [
        ("timm:a infer amp_bf16 bs8 default", "ok", "runtime_error", "CUDA error: device-side assert")]
    assert [(c.cell, c.why) for c in passed] == [("timm:b infer amp_bf16 bs8 default", "boom")]  # skipped: neither
    # out of memory beside other cells on a shared GPU (collector/host/alone.py): not the model's status
    from collector.record.contract import SHARED_GPU_OOM_HEAD
    shared = _row("timm:e", status="oom_shared", error=f"{SHARED_GPU_OOM_HEAD} (GPUS=0,0): ... CUDA out of memory")
    assert suites.status_changes(a + [_row("timm:e")], b + [shared]) == (fail, passed)
    f = suites.figures([_row("timm:a"), shared, _row("timm:f", status="oom", error="CUDA out of memory")])
    assert (f["passed"], f["attempted"], f["beside"], f["skipped"]) == (1, 2, 1, 0)  # the pass rate leaves it out
    alone = _row("timm:e", status="oom", error="during eager: CUDA out of memory")
    assert [c.cell for c in suites.status_changes(a + [_row("timm:e")], b + [alone])[0]][-1] == "timm:e infer amp_bf16 bs8 default"


def test_suite_speedup_change_is_the_t_interval_over_models_ok_in_both():
    a = [_row(f"timm:m{i}", speedup=2.0) for i in range(4)]
    factors = [1.10, 1.12, 1.09, 1.11]
    b = [_row(f"timm:m{i}", speedup=2.0 * f) for i, f in enumerate(factors)]
    (row,) = suites.compare_rows(a, b)
    logs = [math.log(f) for f in factors]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    half = 3.182446305284263 * sd / 2  # t(0.975, 3 df) x sd / sqrt(4): the closed form
    n = row.numbers
    assert n["speedup_change"] == pytest.approx(math.exp(mean))
    assert (n["speedup_change_lo"], n["speedup_change_hi"]) == pytest.approx((math.exp(mean - half), math.exp(mean + half)))
    assert row.css == "faster" and row.change.startswith("+10.5% (higher; 95% CI")
    # the same data, one model much noisier: the interval widens past 1 and nothing is called
    b[0] = _row("timm:m0", speedup=2.0 * 0.7)
    (row,) = suites.compare_rows(a, b)
    assert row.css == "unclear" and "not called" in row.change
    # a screen (one process a cell) never calls, however tight the spread between models
    b = [_row(f"timm:m{i}", speedup=2.0 * f) | {"processes": 1} for i, f in enumerate(factors)]
    (row,) = suites.compare_rows(a, b)
    assert row.css == "unclear" and "a screen: not called" in row.change and row.numbers["speedup_change_lo"] > 1


def test_a_row_over_two_models_calls_nothing_and_counts_the_cells_whose_own_change_is_called():
    """The per-suite row's change is a t interval over models, so over 2 models it calls nothing; the
    cells' own calls (from the comparison) are counted beside it, each way, over the cells ok in both.
    A cell failing in one run is not counted; in a screen no cell is called."""
    a = [_row("timm:up", speedup=2.0), _row("timm:down", speedup=2.0), _row("timm:gone", speedup=2.0)]
    b = [_row("timm:up", speedup=3.0), _row("timm:down", speedup=1.6), _row("timm:gone", status="crashed")]
    calls = {"timm:up__infer__default": "improved", "timm:down__infer__default": "regressed",
             "timm:gone__infer__default": "regressed"}
    (row,) = suites.compare_rows(a, b, calls=calls)
    assert "not called" in row.change and row.cells_called == "1 higher, 1 lower of 2"
    assert (row.numbers["cells_higher"], row.numbers["cells_lower"]) == (1, 1)
    (row,) = suites.compare_rows(a, b)  # no calls given (a run report): no column figure
    assert row.cells_called == "-" and "cells_higher" not in row.numbers
    (row,) = suites.compare_rows(a, [r | {"processes": 1} for r in b], calls=calls)
    assert row.cells_called == "a screen: none called"


def test_a_confirmation_says_its_per_suite_figures_are_over_the_cells_a_screen_chose():
    """A confirmation's cells are a screen's largest moves: its per-suite rows are not the suite's. The
    caveat keys on the description `confirm` writes into the preset, not on the run's name."""
    from analysis.commands.screen import confirm_preset

    preset = confirm_preset({"protocol": {"processes": 1}}, [{"model": "timm:m", "phase": "infer"}], 3)
    description = next(line for line in preset.splitlines() if line.startswith("description = "))
    written = json.loads(description.split(" = ", 1)[1])
    assert suites.chosen_caveat([None, written]) and "chosen for their large moves" in suites.chosen_caveat([written])[0]
    assert suites.chosen_caveat(["the suites preset", None]) == [] and suites.chosen_caveat([]) == []


def _pair(cid, ca, cb, sa, sb, status_a="ok", status_b="ok"):
    return {"cell_id": cid, "model": cid, "phase": "infer", "dtype": "float32", "batch_size": 8, "mode": "default",
            "compile_scope": "model", "status_a": status_a, "status_b": status_b,
            "compiled_a": ca, "compiled_b": cb, "speedup_a": sa, "speedup_b": sb}


def test_the_screen_confirms_cells_beyond_the_threshold_and_status_changes():
    pairs = [_pair("still", 10, 10.5, 2.0, 1.95), _pair("slower", 10, 12, 2.0, 1.7),
             _pair("speedup", 10, 10, 2.0, 2.6), _pair("broke", 10, None, 2.0, None, status_b="compile_error"),
             _pair("skip", 10, None, 2.0, None, status_b="skipped")]
    found = screen.moved(pairs, 0.10)
    assert [(m.cell_id, m.why) for m in found] == [
        ("slower", "compiled step +20.0%"), ("speedup", "speedup +30.0%"), ("broke", "ok -> compile_error")]
    spread = screen.aa_spread(pairs[:2])  # the largest change of each quantity; no host-paced cell: the same for both
    assert spread["GPU-bound"] == pytest.approx((0.20, 2.0 / 1.7 - 1)) and spread["host-paced"] == spread["GPU-bound"]
    # per quantity: a 25% speedup bound leaves the speedup cell out, the compiled bound keeps the slower one
    assert [m.cell_id for m in screen.moved(pairs, (0.10, 0.35))] == ["slower", "broke"]
    with pytest.raises(ValueError, match="no compiled cell ok in both"):
        screen.aa_spread(pairs[3:])


def test_the_screen_judges_host_paced_and_gpu_bound_cells_by_their_own_aa_spread():
    """A one-process screen's A/A moves a host-paced cell by tens of percent and a GPU-bound one by a
    few: one spread for both would send no planted 5% of a GPU-bound cell to confirmation."""
    aa = [_pair("gpu1", 10, 10.2, 2.0, 1.98), _pair("gpu2", 10, 9.9, 2.0, 2.02),
          dict(_pair("host", 10, 13, 2.0, 1.5), compiled_lb_a=True)]
    spread = screen.aa_spread(aa)
    assert spread["GPU-bound"] == pytest.approx((0.02, 2.0 / 1.98 - 1))
    assert spread["host-paced"] == pytest.approx((0.30, 2.0 / 1.5 - 1))
    planted = [_pair("gpu1", 10, 10.5, 2.0, 1.9), dict(_pair("host", 10, 10.5, 2.0, 1.9), eager_lb_b=True),
               _pair("gpu2", 10, 10.1, 2.0, 1.99)]
    found = screen.moved(planted, spread)
    assert [(m.cell_id, m.why) for m in found] == [("gpu1", "compiled step +5.0%")]
    assert "on GPU-bound cells" in screen.threshold_text(spread) and "30.0% (compiled step)" in screen.threshold_text(spread)
    one = screen.aa_spread(aa[:2])  # no host-paced cell (a CPU run): one spread, said once
    assert screen.threshold_text(one) == "2.0% (compiled step) or 1.0% (speedup)"


def test_an_aa_judged_by_its_own_spread_sends_nothing():
    """A cell's change equal to the spread taken from it is not beyond it: read back through exp and
    log1p, the spread came out below the change for 39% of such cells, and rs-h200's and rs-h100's
    A/A each sent its own widest cell to confirmation (screen.ROUNDING)."""
    import random

    rng = random.Random(1)
    sent = 0
    for _ in range(300):
        a, s = rng.uniform(1, 30), rng.uniform(0.5, 3)
        p = {"cell_id": "x", "mode": "default", "status_a": "ok", "status_b": "ok", "compiled_a": a,
             "compiled_b": a * rng.uniform(0.8, 1.25), "speedup_a": s, "speedup_b": s * rng.uniform(0.8, 1.25),
             "model": "m", "phase": "infer", "dtype": "float32", "batch_size": 1, "compile_scope": "model"}
        sent += bool(screen.moved([p], screen.aa_spread([p])))
        further = p["compiled_b"] * (1.001 if p["compiled_b"] >= a else 0.999)  # 0.1% beyond the spread
        assert screen.moved([{**p, "compiled_b": further}], screen.aa_spread([p]))
    assert sent == 0


def test_a_confirmation_on_a_budget_keeps_the_matching_cells_that_moved_most():
    found = [screen.Moved("hf-a", "a", "compiled step +12%", 0.11), screen.Moved("timm-b", "b", "speedup -40%", 0.5),
             screen.Moved("hf-c", "c", "ok -> runtime_error"), screen.Moved("hf-d", "d", "compiled step -30%", 0.36)]
    assert [m.cell_id for m in screen.narrow(found, ["hf-*"])] == ["hf-a", "hf-c", "hf-d"]
    # status changes first, then the largest moves; the screen's order is kept
    assert [m.cell_id for m in screen.narrow(found, None, 2)] == ["timm-b", "hf-c"]
    assert [m.cell_id for m in screen.narrow(found, ["hf-*"], 2)] == ["hf-c", "hf-d"]
    assert screen.narrow(found, ["x*"]) == []
    with pytest.raises(ValueError, match="at least 1"):
        screen.narrow(found, None, 0)
    # each model's largest move first, then a second mode of one (ids as contract.cell_id_of spells them)
    twins = [screen.Moved(f"{m}__infer__amp_bf16__bs8__{mode}__model", m, "compiled step", size)
             for m, mode, size in (("albert", "default", 0.44), ("albert", "reduce-overhead", 0.43),
                                   ("ghostnet", "default", 0.18), ("ghostnet", "reduce-overhead", 0.17))]
    assert [m.label + " " + m.cell_id.split("__")[4] for m in screen.narrow(twins, None, 3)] == [
        "albert default", "albert reduce-overhead", "ghostnet default"]
    assert {m.label for m in screen.narrow(twins, None, 2)} == {"albert", "ghostnet"}


def test_a_second_confirmation_leaves_out_the_cells_an_earlier_one_holds(tmp_path, capsys):
    """`confirm --after RUN` (a screen that grew since its first confirmation): the moved cells that RUN's
    runs hold are left out and counted; a RUN with no runs is named with the runs there are."""
    import numpy as np
    from test_compare import cells, write_run

    rng = np.random.default_rng(3)
    write_run(tmp_path, "s-a", cells(4), rng, processes=1)
    write_run(tmp_path, "s-b", cells(4, regress={1, 2}, factor=1.3), rng, processes=1)
    write_run(tmp_path, "c1-A", {k: v for k, v in cells(4).items() if k.startswith("m01")}, rng)
    args = ["--data", str(tmp_path), "--baseline", "s-a", "--candidate", "s-b", "--dry-run"]
    assert screen.main(args) == 0
    out = capsys.readouterr().out
    assert "m01 train" in out and "m02 train" in out and "confirmed already" not in out, out
    assert screen.main([*args, "--after", "c1"]) == 0
    out = capsys.readouterr().out
    assert "m02 train" in out and "m01 train" not in out and "(1 moved cell(s) confirmed already in c1)" in out, out
    assert screen.main([*args, "--after", "c2"]) == 2
    assert "--after c2: no run c2-<label> in the data folders (like it there: c1)" in capsys.readouterr().err


def test_the_confirmation_preset_holds_exactly_the_moved_cells():
    from collector.plan import matrix as mx
    import tempfile
    from pathlib import Path

    cells = [_pair("a", 1, 1, 1, 1) | {"model": "mlp", "batch_size": 8},
             _pair("b", 1, 1, 1, 1) | {"model": "hf:BertModel:num_hidden_layers=1", "batch_size": 4}]
    manifest = {"device": "cpu", "protocol": {"processes": 1, "warm_compile": False, "blocks": 6,
                                              "plant_slowdown_pct": 5}}
    text = screen.confirm_preset(manifest, cells, 3)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "c.toml"
        p.write_text(text)
        m = mx.build_matrix(str(p))
    assert [(c.model, c.batch_size) for c in m.cells] == [("mlp", 8), ("hf:BertModel:num_hidden_layers=1", 4)]
    assert m.protocol.processes == 3 and m.protocol.blocks == 6 and m.protocol.plant_slowdown_pct == 0
    cmd = screen.command(p, "x", Path("out"), "/a/python", "/b/python", manifest["protocol"])
    assert cmd[-6:] == ["--python", "B=/b/python", "--plant-slowdown", "5", "--plant-on", "B"]


@pytest.mark.slow  # reads the committed evidence runs: the full suite, not test-fast
@pytest.mark.evidence
def test_the_h200_suite_screen_reports_its_suites_in_the_report_and_estimates(tmp_path):
    """The published suite screen (data/examples/su-h200-*): the run report's verdict and estimates.json
    carry each suite's figures, and the comparison's estimates.json both runs' and the change."""
    import json

    from analysis.__main__ import main as analysis_main
    from conftest import ROOT

    a, b = "su-h200-torch2.11.0-cu130", "su-h200-torch2.14.1-cu130"
    data = ["--data", str(ROOT / "data" / "examples"), "--out", str(tmp_path)]
    assert analysis_main(data + ["--run", a]) == 0
    run = json.loads((tmp_path / a / "estimates.json").read_text())
    got = {s["suite"]: (s["passed"], s["attempted"], round(s["geomean_speedup"], 2)) for s in run["suites"]}
    assert got == {"huggingface": (13, 13, 1.56), "timm": (24, 24, 1.83)}
    assert "| huggingface | infer | default | 13 of 13 (100%) | 1.56x |" in (tmp_path / a / "report.md").read_text()
    assert analysis_main(data + ["--baseline", a, "--candidate", b]) == 0
    cmp = json.loads((tmp_path / f"compare-{a}-vs-{b}" / "estimates.json").read_text())
    hf = next(s for s in cmp["suites"] if s["suite"] == "huggingface")
    assert (hf["a"]["passed"], hf["b"]["passed"], hf["paired_models"], hf["call"]) == (13, 13, 13, "unclear")
    assert hf["speedup_change_lo"] > 1  # tight over models, yet a screen: not called
    md = (tmp_path / f"compare-{a}-vs-{b}" / "report.md").read_text()
    # collected in commands on two machines of one kind (two boot ids): the report says so, not "one machine"
    assert "on 2 machines of one kind in turn" in md and "Measured on one machine" not in md
    assert cmp["newly_failing"] == [] and cmp["newly_passing"] == []


@pytest.mark.slow  # reads the committed evidence runs: the full suite, not test-fast
@pytest.mark.evidence
def test_the_published_suite_figures_survive_an_independent_recomputation(tmp_path):
    """benchmarks/suite_models.py reads the cell files with pyarrow alone; its per-suite geometric mean of
    the speedups and pass counts must equal what analysis/ (DuckDB) puts in each run's estimates.json."""
    import json
    import math
    import sys

    from analysis.__main__ import main as analysis_main
    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import suite_models

    a, b = "su-h200-torch2.11.0-cu130", "su-h200-torch2.14.1-cu130"
    rows = suite_models.rows(ROOT / "data" / "examples" / a, ROOT / "data" / "examples" / b)
    for side, run in (("a", a), ("b", b)):
        assert analysis_main(["--data", str(ROOT / "data" / "examples"), "--out", str(tmp_path), "--run", run]) == 0
        est = json.loads((tmp_path / run / "estimates.json").read_text())
        for s in est["suites"]:
            mine = [x[side] for x in rows if (x["suite"], x["phase"], x["mode"]) == (s["suite"], s["phase"], s["mode"])
                    and x[side]["status"] not in ("-", "skipped")]
            ok = [m["speedup"] for m in mine if m["status"] == "ok"]
            assert (s["passed"], s["attempted"]) == (len(ok), len(mine)), (run, s["suite"])
            assert s["geomean_speedup"] == pytest.approx(math.exp(sum(map(math.log, ok)) / len(ok)), rel=1e-9)


@pytest.mark.evidence
def test_a_bad_threshold_is_named_by_its_own_option(capsys):
    """`confirm --threshold abc` once named --max-regression (the gate's option, whose parser it shares)."""
    from conftest import ROOT

    rc = screen.main(["--data", str(ROOT / "data" / "examples"), "--baseline", "wh-a", "--candidate", "wh-n",
                      "--threshold", "abc", "--dry-run"])
    err = capsys.readouterr().err
    assert rc == 2 and "--threshold takes a percentage such as 5% (got 'abc')" in err and "--max-regression" not in err


def test_a_model_run_with_fewer_layers_than_published_is_named_under_the_suite_table():
    """gpt-oss-20b may run reduced (num_hidden_layers=4 of 24): the suite table's line names it, once,
    for a run and for a comparison; a model at its published depth is not named."""
    from analysis.run_report.verdict import Verdict
    from collector.record.contract import reduced_layers

    assert reduced_layers("hf:openai/gpt-oss-20b:num_hidden_layers=4,seq_len=128") == "num_hidden_layers=4"
    assert reduced_layers("hf:T5ForConditionalGeneration:num_layers=2") == "num_layers=2"
    assert reduced_layers("hf:BertForMaskedLM:seq_len=128") is None and reduced_layers("gpt:layers=1") is None
    rows = [{"cell_id": f"c{i}", "model": m, "phase": "infer", "mode": "default", "status": "ok", "speedup": 1.5,
             "device": "cpu"} for i, m in enumerate(["hf:openai/gpt-oss-20b:num_hidden_layers=4",
                                                     "hf:openai/gpt-oss-20b:num_hidden_layers=4",
                                                     "hf:BertForMaskedLM", "timm:resnet50"])]
    line = Verdict(suites=suites.run_rows(rows)).suites_reduced
    assert line == "Run with fewer layers than published (reduced): openai/gpt-oss-20b (num_hidden_layers=4)."
    changes = suites.compare_rows(rows[2:], rows)
    assert suites.reduced_line(changes) == line
    assert Verdict(suites=suites.run_rows(rows[2:])).suites_reduced == ""


@pytest.mark.slow  # reads the committed evidence runs: the full suite, not test-fast
@pytest.mark.evidence
def test_the_real_model_confirmation_calls_no_aa_and_every_plant(tmp_path):
    """The H100 confirmation of the suite screen's moved cells (data/examples/rs-h100c-*, 9 real models,
    3 processes a side, docs/validation.md): the gate passes the A/A and fails the planted 5% at 2%, and
    every planted cell's compiled step is called while no A/A quantity is; the per-suite rows count no cell's
    speedup called in the A/A and every cell's down under the plant."""
    import subprocess
    import sys

    from analysis.__main__ import main as analysis_main
    from conftest import ROOT

    data = ["--data", str(ROOT / "data" / "examples"), "--allow-mismatch", "--max-regression", "2%"]
    assert analysis_main(["gate", *data, "--baseline", "rs-h100c-a", "--candidate", "rs-h100c-b"]) == 0
    assert analysis_main(["gate", *data, "--baseline", "rs-h100c-a", "--candidate", "rs-h100c-p5"]) == 1
    out = subprocess.run([sys.executable, "benchmarks/screen_resolution.py", "rs-h100", "--confirm", "rs-h100c"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, check=True).stdout
    aa = next(line for line in out.splitlines() if line.startswith("confirmation A/A"))
    planted = next(line for line in out.splitlines() if line.startswith("confirmation planted"))
    assert "9 cells timed in several processes" in aa and aa.count(": 0 called of 9") == 6, aa
    assert "compiled: 9 called of 9" in planted and "eager: 0 called of 9" in planted, planted
    for cand, down in (("rs-h100c-b", 0), ("rs-h100c-p5", 1)):  # the per-suite rows count the cells' calls
        assert analysis_main(["--data", str(ROOT / "data" / "examples"), "--allow-mismatch", "--baseline", "rs-h100c-a",
                              "--candidate", cand, "--out", str(tmp_path)]) == 0
        rows = json.loads((tmp_path / f"compare-rs-h100c-a-vs-{cand}" / "estimates.json").read_text())["suites"]
        assert sum(r["paired_models"] for r in rows) == 9, rows
        assert all((r["cells_higher"], r["cells_lower"]) == (0, down * r["paired_models"]) for r in rows), rows


def test_an_aa_pair_measured_unlike_the_screens_is_named_before_it_chooses():
    """`analysis confirm --aa`: an A/A pair of another device, or alone where the screens took turns on one
    GPU (GPUS=0,0,0), gives another protocol's spread; the command says so (and not for a like pair)."""
    from types import SimpleNamespace

    def run(device, share=1):
        workers = [{"gpu": 0, "timing_lock": "/tmp/l" if share > 1 else None}] * share
        return SimpleNamespace(env={"device_name": device}, manifest={"sessions": [{"workers": workers}]})
    like = screen.aa_unlike([run("NVIDIA H200")] * 2, [run("NVIDIA H200")] * 2)
    assert like == []
    (dev,) = screen.aa_unlike([run("NVIDIA H100 80GB HBM3")] * 2, [run("NVIDIA H200")] * 2)
    assert dev.startswith("the A/A pair's device: NVIDIA H100 80GB HBM3; the screens': NVIDIA H200")
    (turns,) = screen.aa_unlike([run("NVIDIA H200")] * 2, [run("NVIDIA H200", share=3)] * 2)
    assert "alone on its GPU; the screens': 3 cells at a time on a GPU" in turns
