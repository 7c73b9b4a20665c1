"""Repeats across pairs of runs (analysis/compare_report/repeats.py): which called changes hold in every lease.

The rule on made-up estimates; then on committed H200 data: a planted 10% compiled slowdown,
measured in three leases, repeats in every GPU-bound cell, and within-lease A/A pairs from four
leases call nothing; the published 2.11 -> 2.14.1 comparison with its two repeats keeps ResNet-50's
compiled step and ResNet-18's memory and drops the MoE's +3.3% (called both ways)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from analysis.stats import estimates as est
from analysis.stats import pair_estimates
from analysis.compare_report import repeats
from analysis.__main__ import compare_folder, main as analysis_main
from analysis.compare_report.compare import build_compare_report
from analysis.run_report.context import prepare
from analysis.data.load import DataError, discover_runs, load
from analysis.data.schema_check import check_file
from conftest import ROOT

V = "v-h200-torch2.11.0-cu130", "v-h200-torch2.14.1-cu130"
T3 = "t3-h200-torch2.11.0-cu130:t3-h200-torch2.14.1-cu130"
T4 = "t4-h200-torch2.11.0-cu130:t4-h200-torch2.14.1-cu130"


def _fake(calls: dict) -> SimpleNamespace:
    """A pair's estimates: {(quantity, cell): (ratio, call)}."""
    ests = {q: {} for q in est.QUANTITIES}
    for (q, cid), (point, call) in calls.items():
        ests[q][cid] = est.Estimate(q, point, point * 0.99, point * 1.01, call, "made up")
    return SimpleNamespace(ests=ests, labels={cid: cid for _, cid in calls})


def test_the_rule_tells_repeats_from_single_calls_and_from_calls_both_ways():
    one = _fake({("compiled", "a"): (0.95, est.IMPROVED), ("compiled", "b"): (1.04, est.REGRESSED),
                 ("compiled", "c"): (1.03, est.REGRESSED), ("memory", "d"): (0.9, est.IMPROVED),
                 ("compiled", "e"): (1.0, est.NO_CHANGE)})
    two = _fake({("compiled", "a"): (0.96, est.IMPROVED), ("compiled", "b"): (1.005, est.BELOW_MIN),
                 ("compiled", "c"): (0.96, est.IMPROVED), ("compiled", "e"): (1.0, est.NO_CHANGE)})
    three = _fake({("compiled", "a"): (0.94, est.IMPROVED), ("compiled", "b"): (1.05, est.REGRESSED),
                   ("compiled", "c"): (1.0, est.NO_CHANGE), ("memory", "d"): (0.9, est.IMPROVED)})
    got = {(r.quantity, r.cell_id): r for r in repeats.rows([one, two, three])}
    assert set(got) == {("compiled", "a"), ("compiled", "b"), ("compiled", "c"), ("memory", "d")}  # e: never called
    assert got[("compiled", "a")].outcome == repeats.REPEATS and got[("compiled", "a")].css == "faster"
    assert got[("compiled", "b")].outcome == repeats.NOT_REPEATED  # regressed, below the minimum, regressed
    assert got[("compiled", "c")].outcome == repeats.BOTH_WAYS
    assert got[("memory", "d")].outcome == repeats.WHERE_PAIRED
    assert got[("memory", "d")].changes == ("-10.0% improved", "not paired", "-10.0% improved")
    assert [r.outcome for r in repeats.rows([one, two, three])] == [
        repeats.REPEATS, repeats.WHERE_PAIRED, repeats.NOT_REPEATED, repeats.BOTH_WAYS]
    line = repeats.verdict_line(repeats.rows([one, two, three]), 3)
    assert "repeated in every pair: 1 (compiled step time a -5.0% / -4.0% / -6.0%)" in line
    assert "called both ways: 1" in line and "called in some pairs only: 1" in line
    assert repeats.rows([_fake({("compiled", "e"): (1.0, est.NO_CHANGE)})] * 2) == []


def _pairs(specs: list[str]):
    found = {r.run_id: r for r in discover_runs(ROOT / "data" / "examples")}
    pairs = [tuple(found[x] for x in repeats.parse(s)) for s in specs]
    loaded = load(list({r.run_id: r for p in pairs for r in p}.values()))
    prepare(loaded)
    return loaded, pairs


@pytest.mark.slow  # reads the committed evidence runs: the full suite, not test-fast
@pytest.mark.evidence
def test_a_planted_change_repeats_in_every_lease_and_aa_pairs_call_nothing():
    """Planted 10% on the compiled step, each against its control, in three H200 leases (aa-h200,
    aa-x2, g1): every planted GPU-bound cell is called a regression in every pair that has it.
    Four within-lease A/A pairs from four leases: no call in any pair, so nothing repeats."""
    loaded, pairs = _pairs(["aa-h200-c:aa-h200-p10", "aa-x2-c2:aa-x2-p10", "g1-a:g1-p10"])
    assert repeats.shared_machines(pairs) == []  # three machines
    got = repeats.rows([pair_estimates.estimate_pair(loaded, a, b, reps=1000) for a, b in pairs])
    compiled = {r.label: r for r in got if r.quantity == "compiled"}
    assert {k for k, r in compiled.items() if r.outcome == repeats.REPEATS} == {
        "gpt infer amp_bf16 bs128 default", "resnet18 infer float32 bs64 default"}
    assert {k for k, r in compiled.items() if r.outcome == repeats.WHERE_PAIRED} == {
        "gpt infer amp_bf16 bs128 reduce-overhead", "resnet18 infer float32 bs64 reduce-overhead"}
    assert all(r.calls.count(est.REGRESSED) >= 2 and 1.05 < min(p for p in r.points if p) for r in compiled.values())
    assert not any(r.outcome == repeats.BOTH_WAYS for r in got)

    loaded, pairs = _pairs(["aa-venv-direct:aa-venv-venv", "g1-a:g1-b", "aa-x2-y:aa-x2-w", "aa-h200-a:aa-h200-c"])
    assert repeats.rows([pair_estimates.estimate_pair(loaded, a, b, reps=1000) for a, b in pairs]) == []


@pytest.mark.slow  # reads the committed evidence runs: the full suite, not test-fast
@pytest.mark.evidence
def test_the_published_version_comparison_says_what_repeats_in_three_leases(tmp_path):
    assert analysis_main(["--data", str(ROOT / "data" / "examples"), "--out", str(tmp_path), "--reps", "1000",
                          "--baseline", V[0], "--candidate", V[1], "--repeat", T3, "--repeat", T4]) == 0
    out = tmp_path / compare_folder(V[0], V[1], [tuple(T3.split(":")), tuple(T4.split(":"))])  # its own folder
    assert not (tmp_path / f"compare-{V[0]}-vs-{V[1]}").exists()
    assert check_file(out / "estimates.json") == []
    data = json.loads((out / "estimates.json").read_text())
    assert data["repeat_pairs"] == [list(V)] + [T3.split(":"), T4.split(":")]
    fate = {(r["cell"], r["quantity"]): r for r in data["repeats"]}
    r50 = fate[("resnet50 infer amp_bf16 bs128 default", "compiled")]
    assert r50["outcome"] == "repeats" and r50["calls"] == [est.IMPROVED] * 3 and max(r50["ratios"]) < 0.98
    assert fate[("resnet18 train float32 bs64 default", "memory")]["outcome"] == "repeats"
    moe = fate[("moe infer amp_bf16 bs8 reduce-overhead", "compiled")]
    assert moe["outcome"] == "not repeated" and moe["calls"][0] == est.NO_CHANGE  # inside its siblings' spread
    both = fate[("resnet50 infer amp_bf16 bs1 reduce-overhead", "speedup")]
    assert both["outcome"] == "called both ways" and both["calls"][:2] == [est.IMPROVED, est.REGRESSED]
    assert any(v.startswith("Across 3 pairs of runs") and v.endswith("Quote only what repeats.")
               for v in data["verdict"])
    md = (out / "report.md").read_text()
    assert "## Repeats across pairs of runs" in md and "| **repeats** |" in md
    assert "Repeats across pairs of runs</h2>" in (out / "report.html").read_text()


@pytest.mark.parametrize("argv, words", [
    (["--repeat", T3], "belongs to a comparison"),
    (["--baseline", V[0], "--candidate", V[1], "--candidate", "t3-h200-torch2.12.1-cu130", "--repeat", T3],
     "give one CANDIDATE=, not 2"),
    (["--baseline", V[0], "--candidate", V[1], "--repeat", "t3-h200-torch2.11.0-cu130"], "BASELINE:CANDIDATE"),
    (["--baseline", V[0], "--candidate", V[1], "--repeat", "nope:t3-h200-torch2.14.1-cu130"], "unknown run(s) nope"),
    (["--baseline", V[0], "--candidate", V[1], "--repeat", "t3-h200-torch2.11.0-cu130:t3-h200-torch2.12.1-cu130"],
     "is torch 2.12.1+cu130 against 2.11.0+cu130 on NVIDIA H200, the comparison torch 2.14.1+cu130"),
])
@pytest.mark.evidence
def test_a_repeat_that_is_not_one_is_refused_by_name(argv, words, tmp_path, capsys):
    assert analysis_main(["--data", str(ROOT / "data" / "examples"), "--out", str(tmp_path), "--reps", "50"]
                         + argv) == 2
    assert words in capsys.readouterr().err


@pytest.mark.evidence
def test_repeats_on_one_machine_are_said_to_be(tmp_path):
    """A repeat pair that shares a machine boot with the comparison repeats on one machine only."""
    loaded, pairs = _pairs(["aa-venv-direct:aa-venv-venv", "aa-venv-venv:aa-venv-direct"])
    (a, b), other = pairs[0], pairs[1]
    rep = build_compare_report(loaded, a, b, [a, b], reps=200, now="x", repeat_runs=[other])
    assert any("share a machine with an earlier pair" in c for c in rep.caveats)
    with pytest.raises(DataError, match="BASELINE:CANDIDATE"):
        repeats.parse("a:b:c")
