"""The real path on the CPU: collector subprocesses with real inductor compilation -> Parquet
-> DuckDB -> HTML and Markdown, checked against the numbers in the Parquet rows."""
import json
import statistics
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from conftest import ROOT


@pytest.mark.slow
def test_collect_then_report_on_cpu(tmp_path):
    runs, reports = tmp_path / "runs", tmp_path / "reports"
    cmd = [sys.executable, "-m", "collector", "--preset", "smoke", "--models", "mlp", "--modes", "default", "--blocks", "4",
           "--processes", "2", "--out", str(runs), "--run-id", "e2e"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[2/2] mlp train float32 bs=8 default (model)" in proc.stdout
    assert "2 cell(s) measured" in proc.stdout

    rows = {r["phase"]: r for f in (runs / "e2e" / "cells").glob("*.parquet") for r in pq.read_table(f).to_pylist()}
    assert set(rows) == {"infer", "train"}
    for r in rows.values():
        assert r["status"] == "ok", r["error"]
        assert r["timing_method"] == "perf_counter" and r["device"] == "cpu"
        # the cold process and a replicate on its warm cache, each 4 blocks with one layout
        assert r["processes"] == 2 and len(r["process_wall_s"]) == 2 and r["process_errors"] is None
        # each process's CPU seconds: it compiled and ran (> 0.5 s), and no more than every CPU all along
        assert len(r["process_cpu_s"]) == 2
        assert all(0.5 < c <= w * (os.cpu_count() or 1) for c, w in zip(r["process_cpu_s"], r["process_wall_s"]))
        # each process's stages: the cold one all of them, the replicate no float64 reference; the compile
        # stage holds the first compiled call the row holds, and the stages fit inside the process's wall time
        cold, rep = json.loads(r["process_stages_json"])
        assert list(cold) == ["setup", "build", "to device", "sides", "reference", "eager", "compile", "compiled",
                              "timing", "graph capture"] and "reference" not in rep and "compile" in rep
        # (the stage also holds the warm-up calls until no compile event occurs and the compile's diagnostics:
        # on the H100 0.05-0.48 s more, on this CPU under a parallel load up to 0.24 s)
        assert 0 <= cold["compile"] - r["first_call_compiled_s"] < max(1.0, 0.25 * r["first_call_compiled_s"])
        assert 0 <= rep["compile"] - r["warm_first_call_compiled_s"] < 1.0
        assert all(0 < sum(st.values()) <= w for st, w in zip((cold, rep), r["process_wall_s"]))
        assert len(r["eager_step_ms"]) == len(r["compiled_step_ms"]) == 2 * 4 * r["steps_per_block"]
        assert r["replicate_cache"] == "warm" and r["process_first_call_compiled_s"][1] == r["warm_first_call_compiled_s"]
        assert r["hygiene"] in ("compile-workers-shutdown,telemetry-between-blocks",
                                "compile-workers-killed,telemetry-between-blocks")
        assert r["first_call_compiled_s"] > r["warm_first_call_compiled_s"] > 0  # the cache was warm
        assert r["compile_dynamo_s"] > 0 and r["graph_count"] == 1
        assert r["accuracy_ok"] and r["accuracy_reference"] == "float64"
        assert r["gpu_power_w"] is None and r["eager_peak_allocated_bytes"] is None  # not faked on the CPU
    assert rows["train"]["grad_rel_err"] < 1e-3 and rows["train"]["compile_backward_s"] > 0

    # resume: the same command again measures nothing
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "2 already done, 0 to measure" in again.stdout

    # where the processes' time went, from the rows alone (no logs read): the compile stage's median over the
    # two cold processes holds the median of their first compiled calls
    split = subprocess.run([sys.executable, "benchmarks/cell_time.py", "--rows", str(runs / "e2e")], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert split.returncode == 0, split.stderr
    cold = split.stdout.split("e2e: cold processes (2)", 1)[1].split("e2e: replicate", 1)[0]
    compile_line = next(line for line in cold.splitlines() if line.split()[:1] == ["compile"])
    assert 0 <= float(compile_line.split()[1]) - statistics.median(r["first_call_compiled_s"] for r in rows.values()) < 1.0
    assert "e2e: replicate processes (2)" in split.stdout and "without a stage split" not in split.stdout

    proc = subprocess.run([sys.executable, "-m", "analysis", "--data", str(runs), "--out", str(reports)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    md = (reports / "e2e" / "report.md").read_text()
    html = (reports / "e2e" / "report.html").read_text()
    # where the collection's time went: the compile stage summed over both cells' four processes, from the rows
    compile_s = sum(st["compile"] for r in rows.values() for st in json.loads(r["process_stages_json"]))
    line = next(ln for ln in md.splitlines() if ln.startswith("| compile |"))
    assert float(line.split("|")[2].split()[0]) == pytest.approx(compile_s, abs=0.01 + 0.005 * compile_s), line
    assert "2 of the 2 cells (4 processes) recorded where their time went" in md
    assert "<summary><h2>Where the collection's time went</h2></summary>" in html  # evidence: collapsed
    for phase, r in rows.items():
        # each side: the geometric mean of its two processes' medians (recomputed from the raw rows)
        n = len(r["eager_step_ms"]) // 2
        e, c = (statistics.geometric_mean([statistics.median(r[col][i * n:(i + 1) * n]) for i in range(2)])
                for col in ("eager_step_ms", "compiled_step_ms"))
        line = next(ln for ln in md.splitlines() if ln.startswith(f"| mlp | {phase} | float32 | 8 | default |"))
        assert f"| {e / c:.2f}x |" in line
        assert (f"{e:.3f} ms" if e < 10 else f"{e:.1f} ms") in line
        assert f"{e / c:.2f}x" in html
        comp = next(ln for ln in md.splitlines() if ln.startswith(f"| mlp {phase} float32 bs8 default |"))
        assert f"{r['first_call_compiled_s']:.1f} s" in comp or f"{r['first_call_compiled_s']:.2f} s" in comp
    assert "2 cells: 2 ok" in md
    assert (reports / "e2e" / "assets" / "heatmap.png").stat().st_size > 1000

