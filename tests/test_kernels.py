"""The kernel profile in the analysis (analysis/explain/kernels.py): the split of a step into kernels and the
rest, which part carried a change, and the comparison's section on synthetic runs with a known split."""
import json

import numpy as np
import pytest

from analysis.explain import kernels


def _profile(kernel_list, device="cuda"):
    """A profile record of one side from [(name, kind, calls, us)]."""
    kinds = {}
    for _, kind, _, us in kernel_list:
        kinds[kind] = kinds.get(kind, 0.0) + us
    return {"device": device, "steps": 10, "us_per_step": sum(us for *_, us in kernel_list), "kinds": kinds,
            "kernels": [{"name": n, "kind": k, "calls": c, "us": us} for n, k, c, us in kernel_list],
            "other_us": 0.0}


def _row(eager_ms, compiled_ms, eager_k, compiled_k):
    return {"eager_median_ms": eager_ms, "compiled_median_ms": compiled_ms,
            "kernel_profile_json": json.dumps({"eager": _profile(eager_k), "compiled": _profile(compiled_k)})}


GEMM = ("nvjet_sm90_tst_128x64", "gemm", 4.0, 2000.0)


def test_the_step_splits_into_kernels_and_the_rest():
    s = kernels.row_splits(_row(5.0, 3.0, [GEMM, ("triton_poi_fused_0", "triton", 2.0, 500.0)], [GEMM]))
    assert s["eager"].kernel_ms == pytest.approx(2.5) and s["eager"].rest_ms == pytest.approx(2.5)
    assert s["eager"].busy == pytest.approx(0.5)
    assert s["compiled"].kinds == {"gemm": pytest.approx(2.0)}
    assert kernels.row_splits({"kernel_profile_json": None}) == {}
    assert kernels.row_splits({"kernel_profile_json": "{not json"}) == {}


def test_a_range_on_the_gpu_timeline_is_not_counted_as_a_kernel():
    """torch.profiler puts record_function ranges (the optimizer's step) on the GPU timeline too; a
    profile that kept one would count the optimizer's kernels twice."""
    row = _row(5.0, 3.0, [GEMM, ("Optimizer.step#AdamW.step", "other", 1.0, 1500.0)], [GEMM])
    s = kernels.row_splits(row)["eager"]
    assert s.kernel_ms == pytest.approx(2.0)
    assert "Optimizer.step#AdamW.step" not in s.kernels and "other" not in s.kinds


@pytest.mark.parametrize("b_step, b_kernels, where", [
    (4.0, 1.8, "host (beside the kernels)"),  # the kernels lost 0.2 of the step's 1 ms, the rest 0.8
    (4.0, 1.0, "kernels"),  # the kernels lost 1 ms of the step's 1 ms
    (4.0, 2.0, "host (beside the kernels)"),  # kernels unchanged, the rest lost 1 ms
    (5.08, 2.0, "unchanged"),  # below the 2% minimum effect
    (3.0, 1.0, "kernels and host"),  # each carried half of -2 ms
])
def test_which_part_carried_the_change(b_step, b_kernels, where):
    a = kernels.Split(5.0, 2.0, {"gemm": 2.0}, {}, "cuda")
    b = kernels.Split(b_step, b_kernels, {"gemm": b_kernels}, {}, "cuda")
    assert kernels.where(a, b) == where


def test_what_moved_names_kinds_matched_kernels_and_names_in_one_run_only():
    a = kernels.Split(6.0, 5.0, {"triton": 2.7, "conv": 2.1}, {
        "triton_poi_fused_relu_17": ("triton", 3.0, 0.35), "sm90_xmma_fprop_a": ("conv", 4.0, 0.33),
        "nvjet_x": ("gemm", 11.0, 0.34)}, "cuda")
    b = kernels.Split(5.6, 4.6, {"triton": 2.3, "conv": 2.2}, {
        "triton_poi_fused_relu_17": ("triton", 3.0, 0.25), "sm90_xmma_fprop_b": ("conv", 4.0, 0.34),
        "nvjet_x": ("gemm", 11.0, 0.34)}, "cuda")
    text = kernels.moved(a, b)
    assert text.startswith("triton 2.700 to 2.300; conv 2.100 to 2.200")
    assert "triton_poi_fused_relu_17 0.350 to 0.250 (3 a step)" in text
    assert "nvjet_x" not in text  # unchanged kernels are not listed
    assert text.endswith("names in one run only 0.330 to 0.340")


def test_names_read_without_template_brackets():
    assert kernels.short("void at::native::(anonymous namespace)::k<4, float>(int)") == "at::native::k[4, float](int)"


def test_the_comparison_attributes_a_planted_kernel_change_and_a_planted_host_change(tmp_path):
    """Synthetic runs: cell m00's compiled step loses 1 ms of kernels (5 -> 4 ms, 4.5 -> 3.5 ms of
    kernels); cell m01's compiled step loses 1 ms with its kernels unchanged (the host); cell m02 is
    not profiled. The section names each part, and a cell without a profile has no row."""
    a, b = {}, {}
    for i, (kb, step_b) in enumerate([(3500.0, 4.0), (4500.0, 4.0), (4500.0, 5.0)]):
        cid = f"m{i:02d}__train__amp_bf16__bs8__default__model"
        a[cid] = (10.0, 5.0, "ok")
        b[cid] = (10.0, step_b, "ok")
    rows = {}
    for i, kb in enumerate((3500.0, 4500.0)):
        cid = f"m{i:02d}__train__amp_bf16__bs8__default__model"
        eager = [("k_eager", "aten", 10.0, 9000.0)]
        rows[cid] = ({"kernel_profile_json": json.dumps({"eager": _profile(eager), "compiled": _profile(
                          [("triton_a", "triton", 2.0, 4500.0)])})},
                     {"kernel_profile_json": json.dumps({"eager": _profile(eager), "compiled": _profile(
                          [("triton_a", "triton", 2.0, kb)])})})
    diag_a = {c: r[0] for c, r in rows.items()}
    diag_b = {c: r[1] for c, r in rows.items()}
    from tests import test_compare

    rng = np.random.default_rng(3)
    test_compare.write_run(tmp_path, "A", a, rng, diag=diag_a)
    test_compare.write_run(tmp_path, "B", b, rng, diag=diag_b)
    from analysis.compare_report.compare import build_compare_report
    from analysis.run_report.context import prepare
    from analysis.data.load import discover_runs, load

    runs = {r.run_id: r for r in discover_runs(tmp_path)}
    loaded = load(list(runs.values()))
    prepare(loaded)
    rep = build_compare_report(loaded, runs["A"], runs["B"], [runs["A"], runs["B"]], reps=200, now="x")
    got = {(r.label.split()[0], r.side): r for r in rep.kernel_rows}
    assert set(got) == {("m00", "eager"), ("m00", "compiled"), ("m01", "eager"), ("m01", "compiled")}
    assert got[("m00", "compiled")].where == "kernels"
    assert "triton_a 4.500 to 3.500" in got[("m00", "compiled")].moved
    assert got[("m01", "compiled")].where == "host (beside the kernels)"
    # m00's speedup is called, so its eager side is attributed too: it moved within the noise
    assert got[("m00", "eager")].where == "unchanged"


def test_host_operators_that_moved_are_named_where_both_profiles_have_them():
    a = kernels.Split(3.6, 0.9, {"triton": 0.9}, {"triton_a": ("triton", 2.0, 0.9)}, "cuda", 2.0,
                      {"cudaGraphLaunch": ("other", 1.0, 0.10), "aten::copy_": ("aten", 4.0, 0.50)})
    b = kernels.Split(2.6, 0.9, {"triton": 0.9}, {"triton_a": ("triton", 2.0, 0.9)}, "cuda", 1.2,
                      {"cudaGraphLaunch": ("other", 1.0, 0.11), "aten::copy_": ("aten", 4.0, 0.05)})
    assert kernels.where(a, b) == "host (beside the kernels)"
    text = kernels.moved(a, b)
    assert text.startswith("host aten::copy_ 0.500 to 0.050")  # the larger move first
    assert "cudaGraphLaunch" not in text  # 0.01 ms: below 2% of A's host time
    row = kernels.PairRow("c", "c", "compiled", a, b, "host (beside the kernels)", text).as_json()
    assert row["host_ms"] == [2.0, 1.2]
    no_host = kernels.PairRow("c", "c", "compiled", a, kernels.Split(2.6, 0.9, {}, {}, "cuda"), "-", "-").as_json()
    assert "host_ms" not in no_host  # the profiles of 2026-12-02 have no host side


def test_a_cpu_profile_attributes_nothing():
    """On the CPU the operators' self time under the profiler carries the profiler's own cost (the
    kp-cpu runs: 1.1 to 19.5 ms of operators for a 1.0-1.4 ms step), so a called change is not
    attributed there and the run report shows no busy share."""
    a = kernels.Split(1.0, 1.1, {"aten": 1.1}, {}, "cpu")
    b = kernels.Split(1.5, 1.2, {"aten": 1.2}, {}, "cpu")
    assert kernels.where(a, b) == kernels.CPU_NOTE
    row = {"cell_id": "c", "eager_median_ms": 1.0, "compiled_median_ms": None,
           "kernel_profile_json": json.dumps({"eager": _profile([("aten::addmm", "aten", 2.0, 1100.0)], "cpu")})}
    (r,) = kernels.run_rows([row], lambda r: r["cell_id"])
    assert r.busy == "-" and r.kernels == "1.100"


def test_autotuned_choices_that_differ_are_named_with_their_configurations():
    ra = json.dumps({"kernels": {"triton_poi_fused__to_copy_8": "XBLOCK=1024 num_warps=4 num_stages=1",
                                 "triton_poi_fused_gelu_9": "XBLOCK=1024 num_warps=4 num_stages=1",
                                 "triton_only_in_a": "XBLOCK=8 num_warps=1 num_stages=1"}, "count": 3, "unnamed": 0})
    rb = json.dumps({"kernels": {"triton_poi_fused__to_copy_8": "XBLOCK=512 num_warps=8 num_stages=1",
                                 "triton_poi_fused_gelu_9": "XBLOCK=1024 num_warps=4 num_stages=1"},
                     "count": 2, "unnamed": 0})
    r = kernels.retuned(ra, rb)
    assert r.compared == 2 and r.changed == (("triton_poi_fused__to_copy_8", "XBLOCK=1024 num_warps=4 num_stages=1",
                                               "XBLOCK=512 num_warps=8 num_stages=1"),)
    assert kernels.retuned(ra, None) is None and kernels.retuned(None, "not json") is None
    a = kernels.Split(0.92, 0.89, {"triton": 0.51}, {"triton_poi_fused__to_copy_8": ("triton", 8.0, 0.230)}, "cuda")
    b = kernels.Split(0.96, 0.94, {"triton": 0.57}, {"triton_poi_fused__to_copy_8": ("triton", 8.0, 0.293)}, "cuda")
    text = kernels.moved(a, b, changed=r.changed)
    assert "triton_poi_fused__to_copy_8 0.230 to 0.293 (8 a step; autotuned A XBLOCK=1024 num_warps=4, " \
           "B XBLOCK=512 num_warps=8)" in text
    assert kernels.PairRow("c", "c", "compiled", a, b, "kernels", text, r).as_json()["autotune"] == {
        "kernels_compared": 2, "changed": [{"kernel": "triton_poi_fused__to_copy_8",
                                            "a": "XBLOCK=1024 num_warps=4 num_stages=1",
                                            "b": "XBLOCK=512 num_warps=8 num_stages=1"}]}


def test_a_compiled_graphs_host_range_is_compared_without_its_hash():
    rec = {"device": "cuda", "steps": 10, "us_per_step": 100.0, "kinds": {"triton": 100.0},
           "kernels": [{"name": "triton_a", "kind": "triton", "calls": 1.0, "us": 100.0}], "other_us": 0.0,
           "host": {"us_per_step": 300.0, "ops": [
               {"name": "## Call CompiledFxGraph fvc4echdttux52zg7lnrl4uwjickmdqctme2hadkyg3lsqsttve4 ##",
                "kind": "framework", "calls": 1.0, "us": 112.0},
               {"name": "## Call CompiledFxGraph ftr4ag3dzumvhntuaaaaaaaaaaaaaaaaaaaa ##", "kind": "framework",
                "calls": 1.0, "us": 8.0},
               {"name": "TorchDynamo Cache Lookup", "kind": "framework", "calls": 1.0, "us": 160.0}]}}
    s = kernels.splits(json.dumps({"compiled": rec}), {"compiled": 0.6})["compiled"]
    assert s.host_ops["## Call CompiledFxGraph ##"] == ("framework", 2.0, 0.12)
    assert s.host_ops["TorchDynamo Cache Lookup"][2] == 0.16


def _examples(*ids):
    from pathlib import Path

    from analysis.run_report.context import prepare
    from analysis.data.load import discover_runs, load
    runs = {r.run_id: r for r in discover_runs(Path(__file__).resolve().parents[1] / "data" / "examples")
            if r.run_id in ids}
    loaded = load([runs[i] for i in ids])
    prepare(loaded)
    return loaded, runs


@pytest.mark.evidence
def test_the_h200_autotune_draw_is_named_where_it_moved_the_compiled_step():
    """Six runs of one MoE cell under one torch on one H200 (data/examples/at-h200-1..6): run 1's cold
    compile gave triton_poi_fused__to_copy_8 XBLOCK=512/8 warps (0.293 ms a step), every other run
    XBLOCK=1024/4 warps (0.230 ms); run 1's compiled step moved +4.4% against run 2, which the
    comparison does not call and names as the compile's draw (the kernel and its two choices); runs 2
    and 4 (both 1024/4 there) call nothing."""
    from analysis.compare_report.compare import build_compare_report
    loaded, runs = _examples("at-h200-2", "at-h200-1", "at-h200-4")
    rep = build_compare_report(loaded, runs["at-h200-2"], runs["at-h200-1"], [runs["at-h200-2"], runs["at-h200-1"]],
                               reps=200, now="x")
    (line,) = [c for c in rep.caveats if "autotuning" in c]
    assert "triton_poi_fused__to_copy_8, A XBLOCK=1024 num_warps=4, B XBLOCK=512 num_warps=8" in line
    (row,) = [k for k in rep.kernel_rows if k.side == "compiled"]
    assert row.where == "kernels" and "autotuned A XBLOCK=1024 num_warps=4, B XBLOCK=512 num_warps=8" in row.moved
    quiet = build_compare_report(loaded, runs["at-h200-2"], runs["at-h200-4"],
                                 [runs["at-h200-2"], runs["at-h200-4"]], reps=200, now="x")
    assert not [c for c in quiet.caveats if "autotuning" in c]
    (row,) = [k for k in quiet.kernel_rows if k.side == "compiled"]
    assert row.retuned.changed and "triton_poi_fused__to_copy_8" not in {k for k, *_ in row.retuned.changed}


@pytest.mark.evidence
def test_a_planted_host_change_beside_re_tuned_kernels_is_not_called_the_draw():
    """The H200 planted check (data/examples/pf-h200-*): a 10% plant outside the kernels, called +5.4% on
    ResNet-50 bs128, in a run whose compile autotuned 10 of 29 kernels otherwise than the control's.
    Their time moved the other way (kernels 5.736 -> 5.644 ms), so the caveat must not blame the draw."""
    from analysis.compare_report.compare import build_compare_report
    loaded, runs = _examples("pf-h200-a", "pf-h200-p10")
    rep = build_compare_report(loaded, runs["pf-h200-a"], runs["pf-h200-p10"], [runs["pf-h200-a"], runs["pf-h200-p10"]],
                               reps=200, now="x", allow_mismatch=True)
    assert "compiled" in [r.quantity for r in rep.regressions if r.label.startswith("resnet50")]
    (row,) = [k for k in rep.kernel_rows if k.side == "compiled" and k.label.startswith("resnet50")]
    assert row.where == "host (beside the kernels)" and row.retuned.changed
    assert kernels.retuned_carried(row.retuned, row.a, row.b) is False
    assert not [c for c in rep.caveats if "autotuning" in c]


def test_the_autotune_caveat_says_whether_the_interval_holds_the_draw():
    """With COLD_REPLICATES=1 in both runs each process compiled cold, so the intervals already hold the
    autotuning draw: the caveat about a shared draw would be wrong there."""
    from analysis.compare_report import changes
    from analysis.stats import estimates as est

    rec = {"kernels": {"triton_poi_fused__to_copy_8": "XBLOCK=1024 num_warps=4 num_stages=1"}, "count": 1, "unnamed": 0}
    other = {**rec, "kernels": {"triton_poi_fused__to_copy_8": "XBLOCK=512 num_warps=8 num_stages=1"}}
    pair = {"cell_id": "moe__infer__amp_bf16__bs8__reduce-overhead__model", "model": "moe", "phase": "infer",
            "dtype": "amp_bf16", "batch_size": 8, "mode": "reduce-overhead", "compile_scope": "model",
            "autotune_a": json.dumps(rec), "autotune_b": json.dumps(other)}
    called = {"compiled": {pair["cell_id"]: est.Estimate("compiled", 1.044, 1.039, 1.049, est.REGRESSED, "t")}}

    class R:
        def __init__(self, v):
            self.env, self.run_id = {"torch_version": v}, v
    shared = changes._retuned_caveat(R("2.11"), R("2.11"), [pair], called)
    assert len(shared) == 1 and "A XBLOCK=1024 num_warps=4, B XBLOCK=512 num_warps=8" in shared[0]
    assert "not profiled in both runs, so whether they carried the change is not known" in shared[0]
    cold = {**pair, "rep_cache_a": "cold", "rep_cache_b": "cold"}
    assert changes._retuned_caveat(R("2.11"), R("2.11"), [cold], called) == []
    assert "a hint, not a finding" in changes._retuned_caveat(R("2.11"), R("2.14.1"), [pair], called)[0]
    # the interval rests on the processes alone: the line says it cannot show the draw
    assert "1 of them holds only its processes' spread, which cannot show that draw" in shared[0]
    # eta4-h200 / eta5-h200: a speedup change called while the compiled step is not: the same caveat
    only_speedup = {"compiled": {}, "speedup": {pair["cell_id"]: est.Estimate("speedup", 0.8, 0.74, 0.86, est.REGRESSED, "t")}}
    assert "holds only its processes' spread" in changes._retuned_caveat(R("2.11"), R("2.11"), [pair], only_speedup)[0]
    # three sibling runs' spread in the interval: it holds the draw, and the line says so
    sib = {"compiled": {pair["cell_id"]: est.Estimate("compiled", 1.044, 1.02, 1.07, est.REGRESSED,
                                                      "t; run-to-run spread of x's 3 sibling runs")}}
    assert "its interval holds the run-to-run spread of sibling runs" in changes._retuned_caveat(R("2.11"), R("2.11"), [pair], sib)[0]


def test_processes_that_compiled_cold_are_told_apart_by_their_draws():
    """COLD_REPLICATES=1: each process's launch configurations are the cold record with its replicate's
    differences; where the compiled processes disagree, the why line says whether the slowest and the
    fastest drew differently (a candidate cause) or alike (the draw ruled out)."""
    rec = {"count": 3, "kernels": {"k1": "XBLOCK=1024 num_warps=4", "k2": "XBLOCK=64 num_warps=2", "k3": "XBLOCK=8"},
           "replicates": [{"differ": 1, "kernels": {"k1": "XBLOCK=512 num_warps=8"}}, {"differ": 0, "kernels": {}}]}
    row = {"replicate_cache": "cold", "autotune_json": json.dumps(rec), "compiled_process_ms": [0.92, 0.97, 0.921]}
    draws = kernels.process_draws(row)
    assert [d["k1"] for d in draws] == ["XBLOCK=1024 num_warps=4", "XBLOCK=512 num_warps=8", "XBLOCK=1024 num_warps=4"]
    assert kernels.draw_spread(row) == ("compiled p2 0.970 ms vs p1 0.920 ms: 1 of 3 autotuned launch "
                                        "configurations differ (each compiled its own)")
    alike = {**row, "compiled_process_ms": [0.92, 0.921, 0.97]}  # the slow one drew what the fast one drew
    assert kernels.draw_spread(alike).endswith("the same autotuned launch configurations (not the autotuning draw)")
    assert kernels.draw_spread({**row, "compiled_process_ms": [0.92, 0.93, 0.921]}) is None  # within 5%
    assert kernels.draw_spread({**row, "replicate_cache": "warm"}) is None  # one draw shared: nothing to tell apart
    assert kernels.draw_spread({**row, "compiled_process_ms": [0.92, 0.97]}) is None  # a replicate without record


@pytest.mark.slow  # reads the committed evidence runs: the full suite, not test-fast
@pytest.mark.evidence
def test_the_h200_moe_process_that_drew_the_slow_configuration_is_named_in_its_run_report(tmp_path):
    """crv-torch2.14.1-cu130's MoE: process 2 drew the slow launch configuration (0.970 ms against 0.921)."""
    from analysis.__main__ import main as analysis_main
    from conftest import ROOT

    assert analysis_main(["--data", str(ROOT / "data" / "examples"), "--out", str(tmp_path),
                          "--run", "crv-torch2.14.1-cu130"]) == 0
    html = (tmp_path / "crv-torch2.14.1-cu130" / "report.html").read_text()
    assert "compiled p2 0.970 ms vs p1 0.921 ms: 6 of 11 autotuned launch configurations differ" in html
