"""Several torch versions in one collect (interleaved), and the comparison that says what changed per
quantity: the collector's plumbing with fake launchers, the estimates' call rule, and the published
H200 version comparison, its A/A across interpreters and its planted 5% (data really measured)."""
import json
import subprocess
import sys

import pytest

from collector.host.launch import LauncherBase
from analysis.stats import estimates as est
from analysis.compare_report.compare import build_compare_report
from analysis.run_report.context import prepare
from analysis.data.load import discover_runs, load
from analysis.render.pages import render_compare
from collector.plan import matrix as mx
from collector.commands.executors import split_python, target_labels
from collector.host.runner import Target, collect_targets
from conftest import ROOT

ENV = {"device": "cpu", "device_name": "Test CPU", "hostname": "h", "gpu_name": None}


class Recorder(LauncherBase):
    """A fake launcher for one interpreter: records (its name, cell) in a shared log."""

    def __init__(self, name, log):
        self.name, self.log = name, log

    def run(self, spec, cache_dir, log_path, timeout_s):
        if spec["kind"] == "cold":
            self.log.append((self.name, spec["cell"]["model"], spec["cell"]["phase"]))
        return {"status": "ok", "eager_step_ms": [2.0] * 4, "compiled_step_ms": [1.0] * 4,
                "first_call_eager_s": 0.1, "first_call_compiled_s": 3.0, "warm_first_call_compiled_s": 0.5}


def _targets(log, matrix):
    return [Target(matrix, {**ENV, "torch_version": v}, f"r-{v}", Recorder(v, log), label=f"torch{v}")
            for v in ("1", "2")]


def test_two_interpreters_are_interleaved_cell_by_cell_with_the_order_alternating(tmp_path, capsys):
    m = mx.build_matrix("smoke", {"models": ["mlp", "gnn"], "modes": ["default"], "processes": 1})
    log = []
    dirs = collect_targets(_targets(log, m), tmp_path)
    cells = [(c.model, c.phase) for c in m.cells]
    assert len(cells) == 4 and len(log) == 8
    # cell k by both versions before cell k + 1; the first version alternates
    for k, cell in enumerate(cells):
        pair = log[2 * k:2 * k + 2]
        assert {x[1:] for x in pair} == {cell}
        assert [x[0] for x in pair] == (["1", "2"] if k % 2 == 0 else ["2", "1"])
    for d, other in zip(dirs, ("r-2", "r-1")):
        assert len(list((d / "cells").glob("*.parquet"))) == 4
        assert json.loads((d / "run.json").read_text())["interleaved_with"] == [other]
    assert "2 interpreters interleaved" in capsys.readouterr().out


def test_interleaved_gpu_runs_without_cold_replicates_are_told_about_the_autotuning_draw(tmp_path, capsys):
    """Several interpreters on a GPU with replicates on the cold process's cache: the collector says
    that each version's cell rests on one autotuning draw and names COLD_REPLICATES=1; with it, with
    one process, or on the CPU (no Triton autotuning), it says nothing."""
    def said(device, **proto):
        m = mx.build_matrix("smoke", {"models": ["mlp"], "phases": ["infer"], "modes": ["default"], **proto})
        targets = [Target(m, {**ENV, "device": device, "torch_version": v}, f"r-{device}-{v}-{len(proto)}-"
                          f"{proto.get('processes')}-{proto.get('cold_replicates')}", Recorder(v, []), label=f"t{v}")
                   for v in ("1", "2")]
        collect_targets(targets, tmp_path)
        return "COLD_REPLICATES=1 compiles every process" in capsys.readouterr().out

    assert said("cuda", processes=2)
    assert not said("cuda", processes=2, cold_replicates=True)
    assert not said("cuda", processes=1)
    assert not said("cpu", processes=2)


def test_interleaved_runs_resume_each_where_it_stopped(tmp_path):
    m = mx.build_matrix("smoke", {"models": ["mlp", "gnn"], "modes": ["default"], "processes": 1})
    log = []
    collect_targets(_targets(log, m), tmp_path, stop_after_s=0.0)  # the budget is spent before any cell
    assert log == []
    first = _targets(log, m)[:1]  # version 1 alone measures every cell
    collect_targets(first, tmp_path, stop_after_s=None)
    log.clear()
    dirs = collect_targets(_targets(log, m), tmp_path)
    assert {x[0] for x in log} == {"2"} and len(log) == 4  # only what version 2 still lacks
    # version 1 measured nothing beside version 2: neither run says it was interleaved
    assert all("interleaved_with" not in json.loads((d / "run.json").read_text()) for d in dirs)


def test_interpreter_labels_and_bad_labels():
    assert split_python("python3") == (None, "python3")
    assert split_python("new=/tmp/torch-2.14.1/bin/python") == ("new", "/tmp/torch-2.14.1/bin/python")
    with pytest.raises(ValueError, match="label"):
        split_python("bad label=/usr/bin/python3")
    envs = [{"torch_version": "2.11.0+cu130"}, {"torch_version": "2.11.0+cu130"}, {"torch_version": "2.14.1"}]
    assert target_labels([None, None, None], envs) == ["torch2.11.0-cu130", "torch2.11.0-cu130-2", "torch2.14.1"]


def test_the_one_call_rule():
    r = est.call_rule
    assert r(1.05, 1.03, 1.07, 0.02, higher_is_better=False) == est.REGRESSED
    assert r(1.05, 1.03, 1.07, 0.02, higher_is_better=True) == est.IMPROVED
    assert r(1.01, 1.005, 1.015, 0.02, higher_is_better=False) == est.BELOW_MIN
    assert r(1.05, 0.99, 1.11, 0.02, higher_is_better=False) == est.NO_CHANGE
    assert r(1.05, 1.03, 1.07, 0.02, False, apart=False) == est.OVERLAP
    assert r(1.05, 1.03, 1.07, 0.02, False, not_callable="one process") == "not called: one process"
    assert est.separated([1, 2, 3], [4, 5, 6]) and not est.separated([1, 2, 5], [4, 5, 6])
    assert est.separated([1], [2, 3]) is None
    # first calls: one figure per run, the A/A spread decides
    assert not est.first_call("cold", 10.0, 14.0, 0.02).called  # +40%: inside the A/A spread
    assert est.first_call("cold", 10.0, 16.0, 0.02).call == est.REGRESSED
    assert est.memory(100, 97, 0.02).call == est.IMPROVED and not est.memory(100, 99, 0.02).called


@pytest.mark.slow  # reads the committed evidence runs: the full suite, not test-fast
@pytest.mark.evidence
def test_the_first_call_noise_constants_are_what_the_committed_aa_pairs_give():
    out = subprocess.run([sys.executable, "benchmarks/first_call_noise.py"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    for q in ("cold", "warm"):
        line = next(x for x in out.splitlines() if x.startswith(q))
        largest = float(line.split("largest ")[1].split()[0])
        shift = float(line.split("|mean ln B/A| ")[1].split()[0])
        assert largest < est.FIRST_CALL_NOISE[q] <= largest + 0.011, line
        assert abs(shift - est.FIRST_CALL_RUN_NOISE[q]) < 0.006, line


def _compare(a_id, b_id, runs=None, allow=False):
    found = {r.run_id: r for r in discover_runs(ROOT / "data" / "examples")}
    a, b = found[a_id], found[b_id]
    trend = [found[r] for r in runs] if runs else [a, b]
    loaded = load(list({r.run_id: r for r in [a, b] + trend}.values()))
    prepare(loaded)
    return build_compare_report(loaded, a, b, trend, allow_mismatch=allow, reps=1000, now="x")


def _called(rows, quantity):
    return {p.label for p in rows if p.quantity == quantity}


@pytest.mark.evidence
def test_the_h200_release_comparison_lists_a_tight_compiled_regression_with_a_wide_speedup():
    """torch 2.14.1 against 2.11.0, interleaved on one H200: the MoE's reduce-overhead compiled step is
    +3.3% (tight) while its speedup interval is wide (launch-bound eager): it is a regression, by quantity."""
    rep = _compare("v-h200-torch2.11.0-cu130", "v-h200-torch2.14.1-cu130")
    assert rep.title == "torch.compile: torch 2.14.1+cu130 against 2.11.0+cu130 on NVIDIA H200"
    assert _called(rep.regressions, "compiled") == {"moe infer amp_bf16 bs8 reduce-overhead"}
    moe = next(p for p in rep.pairs if p.label == "moe infer amp_bf16 bs8 reduce-overhead")
    assert moe.speedup_change.call == est.NO_CHANGE
    lo, hi = (float(x.rstrip("%")) for x in moe.compiled_change.ci.split(" to "))
    assert 2.0 <= lo and hi - lo < 2.0
    assert "resnet50 infer amp_bf16 bs128 default" in _called(rep.improvements, "compiled")
    assert rep.verdict[1].startswith("Compiled step time: faster in 2") and "slower in 1 (moe" in rep.verdict[1]
    # one machine, interleaved: said in the subtitle; the caveat box names only what limits the claim
    assert "Measured on one machine, interleaved" in rep.subtitle
    assert not any(c.startswith("Measured on") for c in rep.caveats), rep.caveats


@pytest.mark.evidence
def test_the_aa_across_interpreters_calls_nothing_and_the_planted_5_percent_is_called():
    """The image's torch run directly and through a virtualenv: no call in any quantity. The same
    virtualenv with every compiled step slowed 5%: the compiled step called in every cell."""
    aa = _compare("aa-venv-direct", "aa-venv-venv")
    assert len(aa.pairs) == 4 and aa.regressions == [] and aa.improvements == []
    plant = _compare("aa-venv-venv", "aa-venv-venvp5", allow=True)
    assert len(_called(plant.regressions, "compiled")) == 4 and plant.improvements == []


@pytest.mark.slow  # reads the committed evidence runs: the full suite, not test-fast
@pytest.mark.evidence
def test_a_trend_over_three_runs_renders_per_cell(tmp_path):
    runs = ["smoke-cpu-cuda-torch2.12.1", "smoke-cpu-torch2.13.0-a", "smoke-cpu-cuda-torch2.14.1"]
    rep = _compare(runs[0], runs[2], runs=runs)
    assert rep.trend_runs == runs and len(rep.trend_cells) >= 4
    assert all(len(values) == 3 for _, values in rep.trend_cells)
    md, html = render_compare(rep, tmp_path / "out")
    text = md.read_text()
    assert "## Trend per cell" in text and "assets/trend.png" in text
    assert (tmp_path / "out" / "assets" / "trend.png").stat().st_size > 1000


@pytest.mark.evidence
def test_per_process_medians_have_one_python_implementation_and_the_sql_twin_agrees():
    """collector.record.contract.process_medians is what the progress line, the statistics and the
    comparison use; the report's SQL (cell_stats.sql) computes the same figures."""
    import numpy as np

    from analysis.stats import core as stats
    from collector.record import contract
    from collector.host import progress

    assert progress.process_medians is contract.process_medians
    found = {r.run_id: r for r in discover_runs(ROOT / "data" / "examples")}
    loaded = load([found["aa-venv-direct"]])
    prepare(loaded)
    rows = loaded.con.execute("SELECT cell_id, eager_process_ms, compiled_process_ms FROM stats").fetchall()
    from analysis.stats.pair_estimates import samples as run_samples

    samples = {c.key: c for c in run_samples(loaded, "aa-venv-direct")["reps"]}
    assert len(rows) == 4
    for cid, eager_sql, compiled_sql in rows:
        c = samples[cid]
        assert np.allclose(stats.process_medians(c.eager_ms, c.processes), eager_sql)
        assert np.allclose(contract.process_medians(list(c.compiled_ms), c.processes), compiled_sql)


def test_dry_run_answers_what_the_real_run_would_measure(tmp_path, capsys):
    """--dry-run uses the run store's rule: a zero-byte cell file is left to measure (the real run
    sets it aside), RETRY=1 counts failed rows, and --shard reads the shard's own folder."""
    from collector.__main__ import main

    m = mx.build_matrix("smoke", {"models": ["mlp"], "modes": ["default"], "processes": 1})
    log = []
    collect_targets([Target(m, {**ENV, "torch_version": "1"}, "d", Recorder("1", log))], tmp_path)
    cells = sorted((tmp_path / "d" / "cells").glob("*.parquet"))
    cells[0].write_bytes(b"")  # a zero-byte file: not a saved cell
    capsys.readouterr()
    assert main(["--preset", "smoke", "--models", "mlp", "--modes", "default", "--out", str(tmp_path),
                 "--run-id", "d", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"run d: {len(m.cells) - 1} saved, 1 to measure" in out
    assert main(["--preset", "smoke", "--models", "mlp", "--modes", "default", "--out", str(tmp_path),
                 "--run-id", "d", "--shard", "1/2", "--dry-run"]) == 0
    assert "saved" not in capsys.readouterr().out.splitlines()[-1]  # d-shard1of2 holds nothing yet


def test_an_old_or_broken_run_json_is_upgraded_or_named(tmp_path, capsys):
    """One upgrade for old manifests (a run from before `processes` resumes as one process a cell);
    a run.json that is not JSON, or lacks its environment, stops the collector with exit 2 and a
    message naming the file (it was a KeyError and a traceback)."""
    from collector.host import store
    from collector.__main__ import main
    from collector.record.contract import upgrade_manifest
    from support.faults import fake_python

    assert upgrade_manifest({"protocol": {"blocks": 8}})["protocol"] == {"blocks": 8, "processes": 1,
                                                                          "plant_slowdown_pct": 0,
                                                                          "cold_replicates": False,
                                                                          "plant_compile_ms": 0,
                                                                          "graph_capture": False}
    run = tmp_path / "r"
    run.mkdir()
    args = ["--preset", "smoke", "--models", "mlp", "--modes", "default", "--out", str(tmp_path),
            "--run-id", "r", "--python", fake_python(tmp_path)]
    for text, words in (("{not json", "is not valid JSON"), ('{"run_id": "r"}', "missing 'environment'")):
        (run / "run.json").write_text(text)
        with pytest.raises(store.ManifestError, match=words):
            store.read_run_manifest(run / "run.json")
        capsys.readouterr()
        assert main(args) == 2
        err = capsys.readouterr().err
        assert str(run / "run.json") in err and words in err and "Traceback" not in err
        assert (run / "run.json").read_text() == text  # left as it was


def test_a_protocol_setting_is_declared_once():
    """collector.record.settings.SETTINGS is the one declaration: the Protocol fields and defaults, the
    collector's options, the must-match keys of a resumed run, and every upgraded old key."""
    from dataclasses import fields

    from collector.record import contract, settings
    from collector.__main__ import parse_args

    names = [s.name for s in mx.SETTINGS]
    assert [f.name for f in fields(mx.Protocol)] == names
    assert all(f.default == s.default for f, s in zip(fields(mx.Protocol), mx.SETTINGS))
    assert set(settings.MUST_MATCH) == {s.name for s in mx.SETTINGS if s.must_match}
    assert set(contract.PROTOCOL_BEFORE) <= set(names)
    args = parse_args(["--processes", "5", "--tf32", "1", "--plant-slowdown", "3", "--timeout", "60"])
    assert (args.processes, args.tf32, args.plant_slowdown_pct, args.timeout_s) == (5, "1", 3, 60)
    m = mx.build_matrix("smoke", {"processes": args.processes, "tf32": args.tf32})
    assert m.protocol.processes == 5 and m.protocol.tf32 is True


def test_the_cli_hands_one_request_to_the_chosen_executor(tmp_path, monkeypatch):
    """Every executor takes the same Request (collector.commands.executors): a stand-in registered in
    EXECUTORS sees what the command asked for, without measuring anything."""
    from collector.commands import executors
    from collector.__main__ import main

    seen = []

    class Fake:
        name = "fake"

        def execute(self, req):
            seen.append(req)
            return 0

    monkeypatch.setitem(executors.EXECUTORS, "local", Fake)
    assert main(["--preset", "smoke", "--models", "mlp", "--out", str(tmp_path), "--run-id", "v",
                 "--python", "python3", "--python", "new=/opt/py/bin/python", "--plant-slowdown", "5",
                 "--plant-on", "new", "--shard", "1/2", "--stop-after", "60"]) == 0
    req = seen[0]
    assert req.pythons == [(None, "python3"), ("new", "/opt/py/bin/python")] and req.plant_on == ["new"]
    assert (req.shard, req.stop_after_s, req.run_id) == ((1, 2), 60.0, "v")
    assert req.overrides["plant_slowdown_pct"] == 5 and req.matrix().cells  # the shard of the smoke matrix
    # the runs PLANT_ON leaves out plant nothing, neither steps nor compile time
    planted = mx.build_matrix("smoke", {"plant_slowdown_pct": 5, "plant_compile_ms": 800})
    plain = executors.without_plants(planted)
    assert (plain.protocol.plant_slowdown_pct, plain.protocol.plant_compile_ms) == (0, 0)
    assert plain.cells == planted.cells and plain.protocol.processes == planted.protocol.processes
    assert set(executors.PLANTS) == {s.name for s in mx.SETTINGS if s.name.startswith("plant_")}


@pytest.mark.slow  # reads the committed evidence runs: the full suite, not test-fast
@pytest.mark.evidence
def test_the_comparison_writes_its_calls_machine_readable(tmp_path):
    """estimates.json beside a comparison: every quantity of every cell, B/A with its interval and
    call; a release gate fails on any 'regressed' (here none: the MoE's compiled +3.3% is inside the
run-to-run spread of the 2.11 run's sibling runs)."""
    from analysis.__main__ import main as analysis_main

    assert analysis_main(["--data", str(ROOT / "data" / "examples"), "--out", str(tmp_path), "--reps", "300",
                          "--baseline", "v-h200-torch2.11.0-cu130", "--candidate", "v-h200-torch2.14.1-cu130"]) == 0
    data = json.loads((tmp_path / "compare-v-h200-torch2.11.0-cu130-vs-v-h200-torch2.14.1-cu130"
                       / "estimates.json").read_text())
    assert data["schema_version"] == 1 and {c["quantity"] for c in data["changes"]} == set(est.QUANTITIES)
    regressed = [(c["cell_id"], c["quantity"]) for c in data["changes"] if c["call"] == est.REGRESSED]
    assert regressed == []  # the MoE's compiled +3.3%: within what its machine's sibling runs moved
    moe = next(c for c in data["changes"] if c["quantity"] == "compiled" and c["cell_id"].startswith("moe"))
    assert moe["call"] == est.NO_CHANGE and "3 sibling runs" in moe["interval_from"]
    improved = {(c["cell_id"], c["quantity"]) for c in data["changes"] if c["call"] == est.IMPROVED}
    assert ("resnet50__infer__amp_bf16__bs128__default__model", "compiled") in improved
    assert all(c["lo"] <= c["ratio"] <= c["hi"] for c in data["changes"] if c["ratio"] is not None)


@pytest.mark.evidence
def test_the_guard_counts_of_the_committed_guard_logs():
    """benchmarks/guard_counts.py on the gd-* runs' TORCH_LOGS=guards logs (ResNet-50 bs1
    reduce-overhead): 2.14.1's guard tree is 2.11's plus one kind, docs/findings-versions.md quotes it."""
    logs = [next((ROOT / "data" / "examples" / f"gd-torch{v}-cu130" / "logs").glob("*.log.gz")) for v in ("2.11.0", "2.14.1")]
    out = subprocess.run([sys.executable, "benchmarks/guard_counts.py", *map(str, logs)], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    rows = {line.split()[0]: [int(x) for x in line.split()[-2:]] for line in out.splitlines()[1:]
            if line.split()[-1].isdigit() and not line.startswith(("all", "frames"))}
    moved = {k: v for k, v in rows.items() if v[0] != v[1]}
    assert rows["TENSOR_MATCH"][0] == rows["TENSOR_MATCH"][1] > 100
    assert moved["DIMENSION_DYNAMIC_MARKING_GUARD"][0] == 0 < moved["DIMENSION_DYNAMIC_MARKING_GUARD"][1]
    assert max(abs(b - a) for k, (a, b) in moved.items() if k != "DIMENSION_DYNAMIC_MARKING_GUARD") < 10
    bad = subprocess.run([sys.executable, "benchmarks/guard_counts.py", "no/such.log"], cwd=ROOT,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "no such log: no/such.log" in bad.stderr


@pytest.mark.slow  # reads the committed evidence runs: the full suite, not test-fast
@pytest.mark.evidence
def test_the_moe_compiles_that_chose_the_slow_launch_configuration_are_the_slow_ones():
    """benchmarks/autotune_draws.py over the committed MoE compiles of both versions: every compile
    that chose XBLOCK=512/8 warps for the cast or the GELU kernel is slower than every compile that did
    not, in each version (docs/findings-versions.md, "The MoE: two speeds set per compile")."""
    runs = [str(p) for pat in ("at-h200-*", "t6-*", "t6r-*", "at14-*", "crv-*", "cp-a", "cp-b", "cr-h200", "cr-h200-2",
                               "mt11-1", "mt14-1")
            for p in sorted((ROOT / "data" / "examples").glob(pat))]
    out = subprocess.run([sys.executable, "benchmarks/autotune_draws.py", "moe__infer__amp_bf16__bs8__reduce-overhead__model",
                          "--kernel", "triton_poi_fused__to_copy_[89]$", "--kernel", "triton_poi_fused_gelu_[0-9]+$",
                          "--slow", "XBLOCK=512 num_warps=8", *runs], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    groups = {}
    for line in out.split("chose 'XBLOCK=512 num_warps=8':")[1].split("\n")[1:]:
        parts = line.split()  # torch, "chose it" | "did not", n, "compiles,", "compiled", "step", lo-hi, "ms"
        if "compiles," in parts:
            lo, hi = (float(x) for x in parts[7].split("-"))
            groups[(parts[0], parts[1] == "chose")] = (int(parts[3]), lo, hi)
    for v in ("2.11.0+cu130", "2.14.1+cu130"):
        assert groups[(v, False)][2] < groups[(v, True)][1]  # no overlap
        assert groups[(v, True)][0] >= 3 and groups[(v, False)][0] >= 5
    assert sum(n for n, _, _ in groups.values()) == 54
    fisher = float(out.split("two-sided Fisher exact test")[1].split("p = ")[1].split()[0])
    assert 0.05 < fisher <= 1.0  # the two versions draw the slow configuration alike
    # like draw against like (the fast one), 2.14.1's change is under the 2% minimum effect
    like = next(x for x in out.splitlines() if "among the compiles that did not" in x)
    assert abs(float(like.split(": ")[1].split("%")[0])) < 2 and "Welch over 25 and 13 compiles" in like
    none = subprocess.run([sys.executable, "benchmarks/autotune_draws.py", "no__such__cell", *runs[:2]], cwd=ROOT,
                          capture_output=True, text=True)
    assert none.returncode == 2 and "has no__such__cell with an autotune record" in none.stderr


@pytest.mark.slow  # reads the committed evidence runs: the full suite, not test-fast
@pytest.mark.evidence
def test_each_compile_chose_the_candidate_its_autotuner_timed_fastest():
    """autotune_draws.py --timings reads Inductor's autotuning log of each process (the cell logs of
    mt11-1 and mt14-1, 10 cold compiles a version): the configuration each compile's record says it
    chose is, in all 40 choices, the one its own log timed fastest (so log sections and processes
    line up), and the same candidate's timing moves between compiles by more than the candidates
    differ (docs/findings-versions.md, "The MoE: two speeds set per compile"); a run without such a log says so; under
    coordinate-descent tuning the picks leave the timed candidates."""
    runs = [str(ROOT / "data" / "examples" / r) for r in ("mt11-1", "mt14-1")]
    args = [sys.executable, "benchmarks/autotune_draws.py", "moe__infer__amp_bf16__bs8__reduce-overhead__model",
            "--kernel", "triton_poi_fused__to_copy_[89]$", "--kernel", "triton_poi_fused_gelu_[0-9]+$", "--timings"]
    out = subprocess.run([*args, *runs], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    chosen, checked = {}, 0
    for line in out.splitlines():
        if " 2.1" in line and "triton_" in line:  # a compile: label, torch, ms, "kernel config, kernel config"
            chosen = dict(kv.strip().split(" ") for kv in line.split(maxsplit=4)[-1].split(","))
        elif "autotuner timed" in line:
            kernel, cands = line.split("autotuner timed ")[1].split(": ")
            timed = {c.split()[0]: float(c.split()[1]) for c in cands.split(", ")}
            assert chosen[kernel] == min(timed, key=timed.get), line
            checked += 1
    assert checked == 40
    spans = {}
    for line in out.split("the autotuner's timings")[1].splitlines()[1:5]:
        kernel, cfg, _, _, span = line.split()[:5]
        lo, hi = (float(x) for x in span.split("-"))
        spans[(kernel, cfg)] = hi / lo
    assert min(spans.values()) > 1.2  # one candidate's timing moves by more than 20% between compiles
    gelu = next(x for x in out.splitlines() if "triton_poi_fused_gelu_N" in x and "against" in x)
    assert abs(float(gelu.split("(median ")[1].split("%")[0])) < 5  # while the candidates differ by less
    bare = subprocess.run([*args, str(ROOT / "data" / "examples" / "cp-a")], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout
    assert "no autotuner timings in the cell logs" in bare
    # with coordinate-descent tuning (cd11-1) each of the 4 compiles tuned on past the timed candidates
    # and the cast kernel ended in 3 configurations, two of them never timed by the first autotuning
    cd = subprocess.run([*args, str(ROOT / "data" / "examples" / "cd11-1")], cwd=ROOT, capture_output=True,
                        text=True, check=True).stdout
    picks = [ln.split("triton_poi_fused__to_copy_8 ")[1].split(",")[0] for ln in cd.splitlines()
             if ln.startswith("cd11-1 p")]
    assert len(picks) == 4 and len(set(picks)) == 3 and {"2048/2", "512/4"} <= set(picks)


@pytest.mark.slow  # reads the committed evidence runs: the full suite, not test-fast
@pytest.mark.evidence
def test_the_cold_compile_interval_over_cold_replicates_calls_no_aa_cell_and_the_big_plants():
    """benchmarks/cold_compile_power.py on the committed COLD_REPLICATES pairs: the comparison's interval
    (Welch widened by the run-wide A/A shift) calls nothing in the A/A pairs (GPU cp-a/cp-b and cp5-a/b,
    CPU cr-cpu-* and cp-cpu-a/b), and calls the planted +5 s (GPU) in 2 of 6 cells with 3 processes and
    3 of 4 with 5, the +4 s (CPU) in 3 of 4 (docs/validation.md, "Planted changes: what a comparison finds"); the pooled alternative keeps the A/A clean too."""
    aa = ["cp-a:cp-b", "cr-cpu-a:cr-cpu-b", "cr-cpu-a:cr-cpu-p10", "cr-cpu-b:cr-cpu-p10", "cp-cpu-a:cp-cpu-b",
          "cp5-a:cp5-b"]
    planted = ["cp-a:cp-p", "cp-b:cp-p", "cp-cpu-a:cp-cpu-p", "cp-cpu-b:cp-cpu-p", "cp5-a:cp5-p", "cp5-b:cp5-p"]
    out = subprocess.run([sys.executable, "benchmarks/cold_compile_power.py", *aa, *planted], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.splitlines()

    def calls(pairs, which):
        rows = [x for x in out if x.split()[0] in {q.replace(":", "/") for q in pairs}]
        return sum(x.split(which + " [")[1].split("]")[1].startswith("*") for x in rows), len(rows)

    assert calls(aa, "comparison") == (0, 13) and calls(aa, "pooled") == (0, 13)
    assert calls(planted[:2], "comparison") == (2, 6) and calls(planted[2:4], "comparison") == (3, 4)
    assert calls(planted[4:], "comparison") == (3, 4)
    assert calls(planted[:2], "pooled")[0] >= 2


@pytest.mark.slow  # reads the committed evidence runs: the full suite, not test-fast
@pytest.mark.evidence
def test_the_like_for_like_change_calls_nothing_in_an_aa_pair_and_finds_a_planted_5_percent(tmp_path):
    """autotune_draws.py --by run: the change between two runs among the compiles of one draw. A/A: cp-a
    against cp-b (one torch, one machine, every process compiled cold): the interval holds 0. Planted:
    mt14-1 against a copy with every compiled sample x1.05: +5.0%, the interval holds 5 and not 0
    (docs/validation.md, "Planted changes: what a comparison finds")."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    def like(*runs):
        out = subprocess.run([sys.executable, "benchmarks/autotune_draws.py", "moe__infer__amp_bf16__bs8__reduce-overhead__model",
                              "--kernel", "triton_poi_fused__to_copy_[89]$", "--kernel", "triton_poi_fused_gelu_[0-9]+$",
                              "--slow", "XBLOCK=512 num_warps=8", "--by", "run", *map(str, runs)], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
        line = next(x for x in out.splitlines() if "among the compiles that did not" in x)
        point = float(line.split(": ")[1].split("%")[0])
        lo, hi = (float(v) for v in line.split("(")[1].split("%,")[0].split(" to "))
        return point, lo, hi

    ex = ROOT / "data" / "examples"
    point, lo, hi = like(ex / "cp-a", ex / "cp-b")
    assert lo < 0 < hi and abs(point) < 2
    planted = tmp_path / "mt14-1p5"
    shutil.copytree(ex / "mt14-1", planted)
    cell = planted / "cells" / "moe__infer__amp_bf16__bs8__reduce-overhead__model.parquet"
    t = pq.read_table(cell)
    rows = t.to_pylist()
    rows[0]["compiled_step_ms"] = [v * 1.05 for v in rows[0]["compiled_step_ms"]]
    pq.write_table(pa.Table.from_pylist(rows, schema=t.schema), cell)
    point, lo, hi = like(ex / "mt14-1", planted)
    assert abs(point - 5.0) < 0.05 and 0 < lo < 5 < hi


def test_the_interleaving_is_on_disk_before_the_session_ends(tmp_path):
    """A command killed mid-way (a device's time limit, kill -9) never reaches the session's end, where
    `interleaved_with` used to be written: a resume in which one run had nothing left then recorded none,
    and the comparison read the runs as measured one after the other. It is written as soon as the second
    run saves its first row."""
    m = mx.build_matrix("smoke", {"models": ["mlp", "gnn"], "modes": ["default"], "processes": 1})
    seen = {}

    class Killed(Exception):
        pass

    class Recorder2(Recorder):
        def run(self, spec, cache_dir, log_path, timeout_s):
            if spec["kind"] == "cold" and len(self.log) == 2:  # the third cell: both runs have saved a row
                for v in ("1", "2"):
                    seen[v] = json.loads((tmp_path / f"r-{v}" / "run.json").read_text()).get("interleaved_with")
                raise Killed
            return super().run(spec, cache_dir, log_path, timeout_s)

    log = []
    targets = [Target(m, {**ENV, "torch_version": v}, f"r-{v}", Recorder2(v, log), label=f"torch{v}") for v in ("1", "2")]
    with pytest.raises(Exception):
        collect_targets(targets, tmp_path)
    assert seen == {"1": ["r-2"], "2": ["r-1"]}
