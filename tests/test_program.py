"""The compiled program, compared (analysis/explain/program.py) and what a comparison says about the
packages that built the models and launch-bound sides (analysis/compare_report/changes.py): stand-in
pairs with a known difference, and the real H200 pair wh-a / wh-n where its data is committed."""
import json

import numpy as np
import pytest

from analysis.explain import program
from tests.test_compare import ENV, _edited_pair, write_run

BERT = "hf:BertForMaskedLM__infer__amp_bf16__bs32__default__model"
OPS_A = {"torch.nn.functional.linear": 72, "torch.arange": 4, "operator.add": 27, "Tensor.expand": 1}
OPS_B = {"torch.nn.functional.linear": 72, "operator.add": 25}


def _profile(us, launches, families):
    return json.dumps({"compiled": {"device": "cuda", "steps": 10, "us_per_step": us, "kinds": {"triton": us},
                                    "kernels": [], "other_us": 0.0, "launches": launches, "families": families}})


def _pair(**over):
    p = {"cell_id": BERT, "model": "hf:BertForMaskedLM", "status_a": "ok", "status_b": "ok",
         "compiled_a": 21.0, "compiled_b": 10.0, "compiled_enq_a": 12.6, "compiled_enq_b": 6.5,
         "kernels_a": 250, "kernels_b": 190,
         "profile_a": _profile(20500.0, 420.0, {"sm80_xmma": [48.0, 9000.0], "triton_per_fused__safe_softmax": [12.0, 2000.0],
                                                "triton_poi_fused_add": [100.0, 500.0]}),
         "profile_b": _profile(9500.0, 360.0, {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16": [12.0, 1500.0],
                                               "triton_poi_fused_add": [100.0, 480.0]}),
         "graph_ops_a": json.dumps({"graphs": 1, "nodes": 104, "ops": OPS_A}),
         "graph_ops_b": json.dumps({"graphs": 1, "nodes": 97, "ops": OPS_B}),
         "packages_a": json.dumps({"transformers": "5.23.0", "triton": "3.6.0"}),
         "packages_b": json.dumps({"transformers": "5.23.0", "triton": "3.8.0"}),
         "inputs_a": json.dumps({"seq_len": 512}), "inputs_b": json.dumps({"seq_len": 512})}
    p.update(over)
    return p


def test_a_changed_graph_with_the_same_model_packages_is_the_model_code_taking_another_path():
    row = program.pair_row(_pair(), "bert")
    assert row.graph == "104 → 97 ops" and row.graph_differs is True
    assert row.numbers["ops_fewer_in_b"] == {"torch.arange": 4, "operator.add": 2, "Tensor.expand": 1}
    assert row.numbers["ops_more_in_b"] == {}
    assert row.reading.startswith("the model's code took another path under B (B's graph lacks torch.arange x4")
    assert row.kernels == "250 → 190" and row.launches == "420 → 360"
    assert row.families.startswith("gone: sm80_xmma, triton_per_fused__safe_softmax; new: cudnn_generated")
    assert row.numbers["host_us_per_launch"] == pytest.approx([30.0, 6.5 / 360 * 1e3])
    # the step fell 11 ms: the kernels' time (-11 ms) and the host's (-6.1 ms) both carried it
    assert row.numbers["carried_by"] == ["device time (the kernels)", "host time (launches and host time per launch)"]


def test_a_model_library_that_differs_is_named_beside_the_changed_graph():
    row = program.pair_row(_pair(packages_b=json.dumps({"transformers": "5.24.0", "triton": "3.8.0"})), "bert")
    assert "and so do the model packages (transformers 5.23.0 → 5.24.0): either can have changed it" in row.reading
    assert not row.reading.startswith("the model's code took another path")


def test_other_graph_breaks_are_torchs_capture_not_the_models_path():
    """The graph differs, the packages and inputs are the same, and Dynamo broke the graph 5 times under A and
    not under B (T5's copy.deepcopy() of its config, su-h100): torch traced the code otherwise, whatever else
    the ops say. It is its own class, apart from the model's code on another path, in the row, the suite and
    the verdict."""
    why = json.dumps({"copy.deepcopy() Explanation: Dynamo does not support copy.deepcopy() Hint: ...": 5})
    row = program.pair_row(_pair(breaks_a=5, breaks_b=0, break_reasons_a=why, break_reasons_b="{}"), "t5")
    assert row.graph_class == "capture"
    assert row.reading.startswith("Dynamo broke the graph otherwise under B (graph breaks 5 → 0: copy.deepcopy(); "
                                  "B's graph lacks torch.arange x4"), row.reading
    assert row.reading.endswith("torch's capture changed, and the ops that differ may be the model's path as well")
    same_breaks = program.pair_row(_pair(breaks_a=1, breaks_b=1), "bert")
    assert same_breaks.graph_class == "other_path"
    flat = json.dumps({"graphs": 1, "nodes": 97, "ops": OPS_B})
    rows = [row, same_breaks, program.pair_row(_pair(cell_id="x", graph_ops_a=flat, graph_ops_b=flat), "c")]
    (suite,) = program.suite_rows(rows)
    assert suite.graph == "differs in 2 of 3 (the model's code took another path in 1; Dynamo's graph breaks changed in 1)"
    assert list(suite.split) == ["other_path", "capture", "same_graph"]
    assert "-52.4% in 1 (other graph breaks: torch's capture, perhaps the model's path too)" in suite.step_by_graph
    line = program.verdict_line(rows)
    assert ("; 1 where Dynamo's graph breaks changed (torch's capture; the model's path may differ too), e.g. t5: "
            "graph breaks 5 → 0: copy.deepcopy()") in line
    assert "-52.4% in the 1 on another path, -52.4% in the 1 with other graph breaks and -52.4% in the 1 with the same" in line


def test_the_same_graph_says_what_carried_the_step():
    same = json.dumps({"graphs": 1, "nodes": 97, "ops": OPS_B})
    # the host's enqueue fell by more than half the step's change; the kernels did not move
    row = program.pair_row(_pair(graph_ops_a=same, graph_ops_b=same, compiled_a=6.2, compiled_b=3.8,
                                 compiled_enq_a=6.1, compiled_enq_b=3.7, profile_a=_profile(2400.0, 258.0, {}),
                                 profile_b=_profile(2300.0, 246.0, {})), "gpt2")
    assert row.graph == "same (97 ops)" and row.families == "the same families"
    assert row.numbers["carried_by"] == ["host time (launches and host time per launch)"]
    assert row.reading == "same captured graph; the step moved with host time (launches and host time per launch)"
    steady = program.pair_row(_pair(graph_ops_a=same, graph_ops_b=same, compiled_b=21.1), "x")
    assert steady.numbers["carried_by"] == [] and steady.reading.endswith("did not move beyond the minimum effect")


def test_older_rows_say_not_recorded_and_the_suite_line_counts():
    old = program.pair_row(_pair(graph_ops_a=None, packages_a=None, profile_a=None, profile_b=None), "old")
    assert old.graph == "not recorded" and old.graph_differs is None and old.launches == "-"
    rows = [program.pair_row(_pair(), "a"), program.pair_row(_pair(cell_id="x", graph_ops_b=_pair()["graph_ops_a"]), "b")]
    (suite,) = program.suite_rows(rows)
    assert suite.suite == "huggingface" and suite.cells == 2
    assert suite.graph == "differs in 1 of 2 (the model's code took another path in 1)"
    assert suite.kernels == "fewer in 2, more in 0 of 2"
    assert suite.carried == "device time in 2, host time in 2 of 2 cells whose compiled step moved"
    line = program.verdict_line(rows)
    assert line.startswith("Compiled program: the captured graph differs in 1 of 2 cells (1 with the same model "
                           "packages and inputs: the model's code took another path under B, e.g. a: torch.arange x4")
    assert "Inductor's kernels fewer in 2, more in 0 of 2" in line
    assert "; the compiled step moved (geomean) -52.4% in the 1 on another path and -52.4% in the 1 with the same graph;" in line
    alone = program.verdict_line(rows[:1])  # no cell with the same graph to set beside: no such clause
    assert "the compiled step moved" not in alone and alone.startswith("Compiled program: the captured graph differs in 1 of 1")
    assert program.verdict_line([old]) is None


def test_a_suites_compiled_step_change_splits_by_what_the_graph_did_and_by_phase():
    """The suite row's geomean split: the model's code on another path (21 -> 10 ms and 20 -> 10 ms: -52.2%)
    apart from the same graph (6 -> 6.6 ms: +10.0%); a training cell of the suite is a row of its own."""
    same = json.dumps({"graphs": 1, "nodes": 97, "ops": OPS_B})
    rows = [program.pair_row(_pair(phase="infer"), "a"),
            program.pair_row(_pair(cell_id="b", phase="infer", compiled_a=20.0), "b"),
            program.pair_row(_pair(cell_id="c", phase="infer", graph_ops_a=same, graph_ops_b=same,
                                   compiled_a=6.0, compiled_b=6.6), "c"),
            program.pair_row(_pair(cell_id="d", phase="train", graph_ops_a=None), "d")]
    infer, train = program.suite_rows(rows)
    assert (infer.suite, infer.cells, train.suite, train.cells) == ("huggingface infer", 3, "huggingface train", 1)
    ratio = ((10 / 21) * (10 / 20)) ** 0.5 - 1
    assert infer.step_by_graph == f"{ratio:+.1%} in 2 (the model's code on another path); +10.0% in 1 (the same graph)"
    assert train.step_by_graph == "-52.4% in 1 (no graph recorded)"
    assert infer.as_json()["compiled_step_by_graph"] == {"other_path": [round(ratio, 5), 2], "same_graph": [0.1, 1]}


@pytest.mark.slow
def test_a_comparison_names_model_packages_that_differ_and_those_not_recorded(tmp_path):
    """Two stand-in runs whose run.json record other transformers versions: the caveat box and the
    headline name it; Triton alone (torch's own stack) is no confounder; a run of real models that
    recorded nothing says "not recorded"."""
    def report_with(pkgs, name):
        def edit(run_id, manifest):
            value = pkgs[run_id == "B"]
            if value is not None:
                manifest["environment"]["model_packages"] = value
        return _edited_pair(tmp_path, name, edit)

    rep = report_with(({"transformers": "5.17.0", "triton": "3.6.0"}, {"transformers": "5.23.0", "triton": "3.8.0"}), "libs")
    said = [c for c in rep.caveats if c.startswith("The model packages differ")]
    assert len(said) == 1 and "transformers 5.17.0 against 5.23.0" in said[0] and "triton" not in said[0]
    assert any(c.startswith("torch's own stack moved with it (triton 3.6.0 against 3.8.0)") for c in rep.caveats)
    assert any(h.startswith("Confounder: the models were built by other package versions (transformers 5.17.0 "
                            "against 5.23.0)") for h in rep.headline)
    stack = report_with(({"transformers": "5.23.0", "triton": "3.6.0"}, {"transformers": "5.23.0", "triton": "3.8.0"}),
                        "stack")
    assert not any(c.startswith("The model packages differ") for c in stack.caveats)
    assert not any("other package versions" in h for h in stack.headline)


def test_a_launch_bound_compiled_side_is_never_called_the_precise_one():
    from analysis.compare_report.changes import _launch_bound_caveat

    both = {"eager_lb_a": True, "eager_lb_b": True, "compiled_lb_a": True, "compiled_lb_b": False}
    eager_only = {"eager_lb_a": True, "eager_lb_b": False, "compiled_lb_a": False, "compiled_lb_b": False}
    compiled_only = {"compiled_lb_a": True}
    (text,) = _launch_bound_caveat([both, both])
    assert "the compiled step" not in text and "none in the 2 launch-bound on both sides" in text
    (text,) = _launch_bound_caveat([both, eager_only, compiled_only, {}])
    assert text.startswith("Of 4 cells, 2 a launch-bound eager side and 1 a launch-bound compiled side only")
    assert "the compiled step in the 1 with a GPU-bound compiled side" in text
    assert "the eager step in the 1 launch-bound on the compiled side only" in text
    assert "none in the 1 launch-bound on both sides" in text
    assert _launch_bound_caveat([{}]) == []


def test_the_suite_table_counts_launch_bound_cells():
    from analysis.run_report.suites import figures, launch_bound_text

    rows = [{"status": "ok", "speedup": 2.0, "device": "cuda", "eager_launch_bound": lb, "compiled_launch_bound": False,
             "model": "timm:x", "cell_id": str(i)} for i, lb in enumerate((True, True, False))]
    f = figures(rows)
    assert f["launch_bound"] == 2
    assert launch_bound_text(f) == "2 of 3: a change under 84% cannot be resolved there"
    assert launch_bound_text(figures([{**r, "device": "cpu"} for r in rows])) == "-"
    # the enqueue rule sees none, but the kernel profile's device time fills 60% of the compiled step: host-paced
    prof = json.dumps({"compiled": {"device": "cuda", "steps": 5, "us_per_step": 600.0, "kinds": {"triton": 600.0},
                                    "kernels": [], "other_us": 0.0}})
    paced = {"status": "ok", "speedup": 2.0, "device": "cuda", "eager_launch_bound": False,
             "compiled_launch_bound": False, "model": "timm:y", "cell_id": "p", "kernel_profile_json": prof,
             "compiled_median_ms": 1.0, "eager_median_ms": 2.0}
    assert figures([paced])["launch_bound"] == 1
    assert figures([{**paced, "compiled_median_ms": 0.62}])["launch_bound"] == 0  # 97% busy: GPU-bound


def _committed_program(a, b, allow_mismatch=False):
    from analysis.compare_report.compare import build_compare_report
    from analysis.data.load import discover_runs, load
    from analysis.run_report.context import prepare
    from conftest import ROOT

    runs = {r.run_id: r for r in discover_runs(ROOT / "data" / "examples") if r.run_id in (a, b)}
    loaded = load(list(runs.values()))
    prepare(loaded)
    rep = build_compare_report(loaded, runs[a], runs[b], [runs[a], runs[b]], reps=200, now="x",
                               allow_mismatch=allow_mismatch)  # a planted run differs in its protocol
    return {r.cell_id: r for r in rep.program_rows}, rep


@pytest.mark.evidence
def test_the_h200_pair_shows_the_attention_mask_path_and_nothing_else_in_bert():
    """wh-a (torch 2.11) against wh-n (2.14.1), one H200, interleaved (docs/findings-suites.md): without an
    attention mask BERT's captured graph loses the mask-building ops under 2.14.1 and its compiled step
    halves with the kernels' device time; with a padded mask (transformers builds the mask under both)
    the graph is the same and the compiled step moves under the minimum effect. transformers is the
    same version in both runs."""
    rows, rep = _committed_program("wh-a", "wh-n")
    plain = rows["hf-BertForMaskedLM__infer__amp_bf16__bs32__default__model"]
    assert plain.graph_differs and plain.numbers["ops_fewer_in_b"]["torch.arange"] == 4
    assert plain.reading.startswith("the model's code took another path under B")
    a, b = plain.numbers["step_ms"]
    assert b / a < 0.5 and "device time (the kernels)" in plain.numbers["carried_by"]
    padded = rows["hf-BertForMaskedLM-attention_mask-padded__infer__amp_bf16__bs32__default__model"]
    assert padded.graph_differs is False
    a, b = padded.numbers["step_ms"]
    assert abs(b / a - 1) < 0.02 and padded.numbers["carried_by"] == []
    assert rows["timm-resnet50__infer__amp_bf16__bs128__default__model"].graph_differs is False
    assert not any(c.startswith("The model packages differ") for c in rep.caveats)


@pytest.mark.evidence
def test_the_split_by_what_the_graph_did_holds_only_the_same_graph_in_the_aa_and_the_path_in_the_known_change():
    """docs/validation.md: the same torch twice (wh-a/wh-b) puts every cell under "the same graph" and the
    verdict line sets nothing side by side; 2.11 against 2.14.1 (wh-a/wh-n) puts the mask path's 4 cells
    apart (their compiled step -53.0%) from the 3 with the same graph (-3.3%; padded BERT's -0.0%); a planted
    10% (pf2-a/pf2-p10) reads +9.2%, its A/A (pf2-a/pf2-b) +0.2%."""
    rows, _ = _committed_program("wh-a", "wh-b")
    aa = program.suite_rows(list(rows.values()))
    assert all("(the same graph)" in s.step_by_graph and ";" not in s.step_by_graph for s in aa), aa
    assert "the compiled step moved" not in program.verdict_line(list(rows.values()))
    rows, _ = _committed_program("wh-a", "wh-n")
    line = program.verdict_line(list(rows.values()))
    assert "the compiled step moved (geomean) -53.0% in the 4 on another path and -3.3% in the 3 with the same graph" in line
    (hf,) = [s for s in program.suite_rows(list(rows.values())) if s.suite == "huggingface infer"]
    assert hf.step_by_graph == "-53.0% in 4 (the model's code on another path); -0.0% in 1 (the same graph)"
    # a planted 10% on every compiled step (pf2, ResNet-50 on an H200, 3 processes; graphs not recorded then)
    # lands in its cell's class at its size; the A/A of the same runs moves 0.2%
    for cand, want in (("pf2-b", "+0.2% in 1 (no graph recorded)"), ("pf2-p10", "+9.2% in 1 (no graph recorded)")):
        rows, _ = _committed_program("pf2-a", cand, allow_mismatch=True)
        assert [s.step_by_graph for s in program.suite_rows(list(rows.values()))] == [want]


@pytest.mark.evidence
@pytest.mark.parametrize("a, b, widest", [("wh-a", "wh-b", 0.40), ("rs-h100-a", "rs-h100-b", 0.83)])
def test_a_gpu_screen_aa_bounds_what_a_launch_bound_side_can_resolve(a, b, widest):
    """The same torch twice, interleaved, one process a cell (wh-a/wh-b on an H200, rs-h100-a/-b on an
    H100). GPU-bound sides move at most 2.0% (the median step, B over A); host-paced sides (in either
    run: suites.host_paced) up to stats.LAUNCH_BOUND_AA (84%), the figure the suite table quotes, which
    the widest of them sets (GPT-2 bs8's compiled step on the H100)."""
    from analysis.data.load import discover_runs, load
    from analysis.run_report.context import prepare
    from analysis.stats import core as stats
    from conftest import ROOT

    loaded = load([r for r in discover_runs(ROOT / "data" / "examples") if r.run_id in (a, b)])
    prepare(loaded)
    from analysis.run_report.suites import host_paced

    rows = {}
    for run in (a, b):
        cur = loaded.con.execute("SELECT * FROM stats WHERE run_id = ? AND status = 'ok'", [run])
        names = [d[0] for d in cur.description]
        rows[run] = {r["cell_id"]: r for r in (dict(zip(names, x)) for x in cur.fetchall())}
    moves = {True: [], False: []}
    for cid, ra in rows[a].items():
        rb = rows[b].get(cid)
        for side in ("eager", "compiled") if rb else ():
            bound = host_paced(ra, side) or host_paced(rb, side)
            moves[bound].append(abs(rb[f"{side}_median_ms"] / ra[f"{side}_median_ms"] - 1))
    assert len(moves[False]) >= 6 and max(moves[False]) <= 0.021
    assert widest < max(moves[True]) <= stats.LAUNCH_BOUND_AA
