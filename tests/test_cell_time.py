"""benchmarks/cell_time.py: a cell log's stages, attributed the way the docs' table reads them (run as
a program, --json: tests import nothing from benchmarks/)."""
import pytest
import json
import subprocess
import sys

from conftest import ROOT

OUTSIDE = "outside the cell's clock (start, imports before it, exit)"


def cell_time(*args) -> dict:
    out = subprocess.run([sys.executable, "benchmarks/cell_time.py", "--json", *map(str, args)], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)

LOG = """
=== 2026-11-30T16:46:11 cold ===
[cell +   0.0s] setup (cold process)
[cell +   4.9s] torch imported, model built on cuda
[cell +  12.4s] float64 reference done
[cell +  12.5s] eager first call 0.09 s, warmed up
[cell +  19.1s] compiled first call 6.66 s (cold cache)
[cell +  19.2s] compiled warmed up in 2 calls; accuracy ok=True
[cell +  19.2s] NVML opened in 0.00 s
[cell +  20.7s] timed 8 blocks x 49 samples x 2 steps per side
[cell +  22.8s] energy window compiled: 1989 steps in 1.06 s, 224.9 J
[cell +  22.8s] finished: ok

=== 2026-11-30T16:46:34 replicate 1 (forked) ===
[cell +   0.0s] setup (replicate process 1)
[cell +   1.4s] torch imported, model built on cuda
[cell +   4.1s] sides built in 2.65 s
[cell +   4.3s] eager first call 0.22 s, warmed up
[cell +   6.0s] compiled first call 1.71 s (warm cache)
[cell +   6.0s] compiled warmed up in 2 calls
[cell +   6.0s] NVML opened in 0.00 s
[cell +   7.1s] timed 8 blocks x 17 samples x 1 steps per side
[cell +   7.1s] finished: ok
"""


def test_stages_of_an_old_cold_and_a_forked_replicate(tmp_path):
    (tmp_path / "cell.log").write_text(LOG)
    cold, rep = cell_time(tmp_path / "cell.log")[str(tmp_path / "cell.log")]
    assert (cold["kind"], cold["forked"], rep["kind"], rep["forked"]) == ("cold", False, "replicate", True)
    # the old log has no "sides built" line: its time is in the float64 reference stage, marked "+"
    assert abs(cold["stages"]["float64 reference +"] - 7.5) < 1e-9
    assert "torch.compile() wrapper (imports Inductor)" not in cold["stages"]
    assert abs(cold["stages"]["compiled first call (compile)"] - 6.6) < 1e-9
    # a replicate has no reference or energy stage, and that is not a merge
    assert abs(rep["stages"]["torch.compile() wrapper (imports Inductor)"] - 2.7) < 1e-9
    assert abs(rep["stages"]["eager first call and warm-up"] - 0.2) < 1e-9
    assert abs(rep["stages"]["recompile sweep, teardown in the cell"]) < 1e-9
    assert rep["logged_s"] == 7.1


@pytest.mark.evidence
def test_the_shipped_h200_run_adds_up_to_its_process_walls():
    """Over a committed run, each process's stages plus the time outside the cell's clock equal the
    wall time the runner recorded for it (medians of sums need not, so compare per process)."""
    run = ROOT / "data" / "examples" / "aa-x2-y"
    table = cell_time(run)[str(run)]
    assert set(table) == {"cold (forked)", "replicate (forked)"}
    rep = table["replicate (forked)"]
    assert len(rep["process wall"]) == 20
    stage_names = [k for k in rep if k not in ("process wall", OUTSIDE)]
    for i, wall in enumerate(rep["process wall"]):
        total = sum(rep[k][i] for k in stage_names) + rep[OUTSIDE][i]
        assert abs(total - wall) < 0.06, (i, total, wall)


def test_a_path_that_is_neither_a_log_nor_a_run_is_named(tmp_path):
    got = subprocess.run([sys.executable, "benchmarks/cell_time.py", "--json", str(tmp_path / "nothing")],
                         cwd=ROOT, capture_output=True, text=True)
    assert got.returncode == 2 and "nothing: neither a cell log nor a run directory" in got.stderr


@pytest.mark.evidence
@pytest.mark.slow
def test_suite_time_splits_a_pass_by_suite_and_phase_and_refuses_an_unknown_key():
    """benchmarks/suite_time.py --by suite,phase (docs/performance.md): the groups hold every cell of the
    runs once, and on the H100 pass a training cell costs more than an inference cell; an unknown key is
    refused with the valid ones named."""
    runs = [str(ROOT / "data" / "examples" / f"su-h100-torch{v}-cu130") for v in ("2.11.0", "2.14.1")]
    out = json.loads(subprocess.run([sys.executable, "benchmarks/suite_time.py", "--json", "--by", "suite,phase", *runs],
                                    cwd=ROOT, capture_output=True, text=True, check=True).stdout)
    groups = {k: v for k, v in out.items() if k.startswith("all ")}
    assert set(groups) == {"all huggingface infer", "all huggingface train", "all timm infer", "all timm train"}, \
        set(groups)
    assert sum(g["cells"] for g in groups.values()) == out["all"]["cells"] == 364
    assert groups["all timm train"]["median_cell_s"] > 1.5 * groups["all timm infer"]["median_cell_s"], groups
    bad = subprocess.run([sys.executable, "benchmarks/suite_time.py", "--by", "model", *runs], cwd=ROOT,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--by takes suite, phase, mode" in bad.stderr


def test_a_stage_counts_each_part_on_its_clock_and_writes_the_split_into_the_result():
    """childlog.Stage: setting a name ends the running stage; a stage named twice adds up; the result
    holds the split so far after every change (a process that dies later still says it)."""
    import json

    from collector.child.childlog import Stage

    now = [10.0]
    result = {}
    stage = Stage(result, clock=lambda: now[0])
    now[0] = 11.5
    stage.name = "build"
    assert json.loads(result["process_stages_json"]) == [{"setup": 1.5, "build": 0.0}]  # the running one so far
    now[0] = 14.0
    stage.name = "compile"
    now[0] = 20.0
    stage.name = "build"
    now[0] = 20.25
    assert stage.split() == {"setup": 1.5, "build": 2.75, "compile": 6.0}  # 2.5 and the running 0.25
    now[0] = 21.0
    stage.close()
    assert json.loads(result["process_stages_json"]) == [{"setup": 1.5, "build": 3.5, "compile": 6.0}]
    assert Stage().name == "setup"  # without a result: the name alone, as before


def test_the_build_split_finds_torchs_own_init_overwritten_and_the_librarys_kept():
    """benchmarks/hf_build_time.py (docs/performance.md, "The model's build"): building BERT as the `hf:` source
    does, every tensor torch's own `uniform_` filled is filled again by transformers' `normal_`, while some of
    the `normal_` work is what the model keeps."""
    import re

    pytest.importorskip("transformers")
    out = subprocess.run([sys.executable, "benchmarks/hf_build_time.py", "BertForMaskedLM", "--layers", "1"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = {m[1]: (float(m[2]), float(m[3])) for m in re.finditer(r"^  (\w+)\s+([\d.]+) s, of which\s+([\d.]+) s",
                                                                   out.stdout, re.M)}
    assert got["uniform_"][0] > 0 and got["uniform_"][1] == got["uniform_"][0], out.stdout
    assert 0 <= got["normal_"][1] < got["normal_"][0], out.stdout
    assert out.stdout.startswith("BertForMaskedLM (1 layers): built in "), out.stdout
