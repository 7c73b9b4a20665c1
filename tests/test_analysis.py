"""Queries, report context and rendering against the checked-in fixture (no torch)."""
import json
import re
import statistics

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.__main__ import main as analysis_main
from analysis.run_report.context import build_run_report, prepare
from analysis.data.load import DataError, discover_runs, load
from analysis.render.pages import md_cell, render
from conftest import FIXTURE, ROOT

GOLDEN_HTML = ROOT / "tests" / "golden" / "fixture-small.html"
GOLDEN = ROOT / "tests" / "golden" / "fixture-small.md"
NOW = "2026-01-01 00:00 UTC"


def _loaded(root=FIXTURE, strict=False):
    runs = discover_runs(root)
    loaded = load(runs, strict=strict)
    prepare(loaded)
    return loaded, runs


def _row(cell_id):
    path = FIXTURE / "fixture-small" / "cells" / f"{cell_id}.parquet"
    return pq.read_table(path).to_pylist()[0]


def test_analysis_never_imports_torch():
    for path in (ROOT / "analysis").rglob("*.py"):
        assert not re.search(r"^\s*(import torch|from torch)", path.read_text(), re.M), path


def test_cell_stats_match_numpy_on_raw_samples():
    loaded, _ = _loaded()
    cid = "resnet18__train__amp_bf16__bs64__reduce-overhead__model"
    row = _row(cid)
    got = loaded.con.execute("SELECT eager_median_ms, compiled_median_ms, speedup, eager_q1_ms, eager_q3_ms, "
                             "breakeven_cold_steps, breakeven_warm_steps FROM stats WHERE cell_id = ?",
                             [cid]).fetchone()
    e, c = statistics.median(row["eager_step_ms"]), statistics.median(row["compiled_step_ms"])
    assert got[0] == pytest.approx(e) and got[1] == pytest.approx(c)
    assert got[2] == pytest.approx(e / c)
    q1, q3 = np.quantile(row["eager_step_ms"], [0.25, 0.75])
    assert got[3] == pytest.approx(q1) and got[4] == pytest.approx(q3)
    saved_s = (e - c) / 1e3
    assert got[5] == pytest.approx((row["first_call_compiled_s"] - row["first_call_eager_s"]) / saved_s)
    assert got[6] == pytest.approx((row["warm_first_call_compiled_s"] - row["first_call_eager_s"]) / saved_s)


def test_headline_geomean_and_counts():
    loaded, runs = _loaded()
    report = build_run_report(loaded, runs[0], reps=300, now=NOW)
    infer_default = next(h for h in report.headline if h.phase == "infer" and h.mode == "default")
    meds = [(statistics.median(_row(c)["eager_step_ms"]) / statistics.median(_row(c)["compiled_step_ms"]))
            for c in ("mlp__infer__amp_bf16__bs32__default__model", "resnet18__infer__amp_bf16__bs8__default__model",
                      "resnet18__infer__amp_bf16__bs32__default__model")]
    assert infer_default.geomean == f"{np.exp(np.mean(np.log(meds))):.2f}x"
    assert (infer_default.cells, infer_default.faster, infer_default.slower) == (3, 2, 1)
    train_default = next(h for h in report.headline if h.phase == "train" and h.mode == "default")
    assert train_default.cells == 2 and train_default.ok_cells == 1 and train_default.pass_rate == "50%"
    assert [f.status for f in report.failures] == ["compile_error"]
    never = next(c for c in report.compile_rows if c.label.startswith("mlp infer amp_bf16 bs32 default"))
    assert never.breakeven_cold == "never pays off"
    unclear = next(c for c in report.compile_rows if c.label.startswith("resnet18 train amp_bf16 bs64 default"))
    assert unclear.breakeven_cold == "no clear gain"


def test_markdown_matches_golden(tmp_path):
    """Snapshot of the whole Markdown report. Refresh with UPDATE_GOLDEN=1 after a deliberate change."""
    loaded, runs = _loaded()
    md, _ = render(build_run_report(loaded, runs[0], reps=300, now=NOW), tmp_path)
    import os

    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(md.read_text())
    assert md.read_text() == GOLDEN.read_text()


def test_html_matches_golden(tmp_path):
    """Snapshot of the whole HTML report, images stripped (so both formats are held to their
    text). Refresh with UPDATE_GOLDEN=1 after a deliberate change."""
    loaded, runs = _loaded()
    _, html = render(build_run_report(loaded, runs[0], reps=300, now=NOW), tmp_path)
    text = re.sub(r'src="data:image/png;base64,[^"]+"', 'src="data:..."', html.read_text())
    import os

    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN_HTML.write_text(text)
    assert text == GOLDEN_HTML.read_text()


def test_html_is_self_contained_and_escapes_hostile_text(fixture_copy, tmp_path):
    cells = fixture_copy / "fixture-small" / "cells"
    path = cells / "gpt__train__amp_bf16__bs8__default__model.parquet"
    table = pq.read_table(path).to_pylist()
    table[0]["error"] = "<script>alert(1)</script> | col | " + "x" * 5000
    table[0]["model"] = "<img src=x onerror=alert(2)>"
    pq.write_table(pa.Table.from_pylist(table, schema=pq.read_schema(path)), path)
    loaded, runs = _loaded(fixture_copy)
    md, html = render(build_run_report(loaded, runs[0], reps=100, now=NOW), tmp_path / "out")
    text = html.read_text()
    assert text.count("<script>") == 1 and "<script>alert" not in text and "&lt;script&gt;" in text
    assert "<img src=x" not in text
    assert not re.search(r'(src|href)="(?!data:|#)', text)  # nothing loaded from outside the file (anchors aside)
    # summary, heatmap, sweep, compile, amortization, efficiency
    assert text.count('src="data:image/png;base64,') == 6
    md_text = md.read_text()
    failure = next(line for line in md_text.splitlines() if line.startswith("| \\<img"))
    assert failure.count(" | ") == 2  # pipes inside the text are escaped: still three cells
    # every tag opener is backslash-escaped (shown as text, never parsed as HTML), with no HTML entities
    assert not re.search(r"(?<!\\)<(script|img)", md_text) and "\\<script>" in md_text and len(failure) < 800
    assert "&lt;" not in md_text and "&gt;" not in md_text


def test_md_cell_escapes():
    assert md_cell("a|b\nc <b>") == "a\\|b c \\<b>"
    assert md_cell("kernels 53 -> 57, a < b, R&D") == "kernels 53 -> 57, a < b, R&D"  # nothing to make inert
    assert md_cell("&amp; x\\|y \\<i>") == "\\&amp; x\\\\\\|y \\\\\\<i>"  # a backslash cannot undo an escape


def test_md_code_shows_text_as_written_in_a_fence_longer_than_its_backticks():
    from analysis.render.pages import md_code
    assert md_code("<b>x</b>\n y") == "`<b>x</b> y`"
    assert md_code("a `b` c") == "``a `b` c``" and md_code("`x") == "`` `x ``"


def test_bad_files_are_skipped_and_named(fixture_copy):
    cells = fixture_copy / "fixture-small" / "cells"
    good = sorted(cells.glob("*.parquet"))
    good[0].write_bytes(good[0].read_bytes()[:200])  # truncated
    rows = pq.read_table(good[1]).to_pylist()
    rows[0]["schema_version"] = 99
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(good[1])), good[1])
    pq.write_table(pq.read_table(good[2]).drop(["status"]), good[2])
    pq.write_table(pq.read_table(good[3]).append_column("surprise", pa.array([1])), good[3])
    loaded, _ = _loaded(fixture_copy)
    reasons = dict(loaded.skipped)
    assert "unreadable Parquet" in reasons[str(good[0])]
    assert "schema version 99 is not known" in reasons[str(good[1])]
    assert "missing column(s) status" in reasons[str(good[2])]
    assert "unexpected column(s) surprise" in reasons[str(good[3])]
    assert loaded.con.execute("SELECT count(*) FROM cells").fetchone()[0] == len(good) - 4
    with pytest.raises(DataError, match="bad input files"):
        load(discover_runs(fixture_copy), strict=True)


def test_cli_renders_and_lists_skipped_files(fixture_copy, tmp_path, capsys):
    cells = fixture_copy / "fixture-small" / "cells"
    bad = sorted(cells.glob("*.parquet"))[0]
    bad.write_bytes(b"not parquet at all")
    assert analysis_main(["--data", str(fixture_copy), "--out", str(tmp_path / "r"), "--reps", "100"]) == 0
    md = (tmp_path / "r" / "fixture-small" / "report.md").read_text()
    assert "1 input file(s) were skipped" in md and bad.name in md
    assert analysis_main(["--data", str(fixture_copy), "--out", str(tmp_path / "r"), "--strict"]) == 2
    assert analysis_main(["--data", str(tmp_path / "empty"), "--out", str(tmp_path / "r")]) == 2
    assert analysis_main(["--data", str(fixture_copy), "--run", "nope", "--out", str(tmp_path / "r")]) == 2
    assert "available: fixture-small" in capsys.readouterr().err


def test_same_run_id_in_two_folders_is_refused(fixture_copy):
    import shutil

    shutil.copytree(fixture_copy / "fixture-small", fixture_copy / "again" / "fixture-small")
    with pytest.raises(DataError, match="run id 'fixture-small' is in two folders"):
        load(discover_runs(fixture_copy))


def test_why_reasons_efficiency_and_energy_from_the_fixture(tmp_path):
    """The diagnostics the fixture plants come out as the report's why column, reason table,
    efficiency (FLOPs / median against the peak) and energy per sample; cells without them say '-'."""
    import statistics

    loaded, runs = _loaded()
    rep = build_run_report(loaded, runs[0], reps=200, now=NOW)
    why = {(s.model, s.phase, s.batch_size, s.mode): s.flags for s in rep.speedups}
    assert "2 graph break(s)" in why[("mlp", "infer", 32, "default")]
    assert "1 recompile(s)" in why[("mlp", "infer", 32, "default")]
    assert "CUDA graphs skipped: mutated inputs (1 instances)" in why[("mlp", "infer", 32, "reduce-overhead")]
    reasons = {(x.kind, x.reason): (x.count, x.cells) for x in rep.reasons}
    assert reasons == {("graph break", "Unsupported: print()"): (2, 1),
                       ("recompile", "size mismatch at index 0"): (1, 1),
                       ("CUDA-graph skip", "skipping cudagraphs due to mutated inputs (1 instances)"): (1, 1)}
    effs = {e.label: e for e in rep.efficiency}
    # v4 energy windows: 2 J / 1000 steps / 32 = 0.0625 mJ per sample, 1 J / 2000 / 32 = 0.015625; 2 W and 1 W
    v4 = effs["mlp infer amp_bf16 bs32 reduce-overhead"]
    assert (v4.eager_mj, v4.compiled_mj, v4.energy_ratio, v4.power) == ("0.0625", "0.0156", "0.25x", "2 / 1 W")
    eff = effs["resnet18 train amp_bf16 bs64 reduce-overhead"]
    row = _row("resnet18__train__amp_bf16__bs64__reduce-overhead__model")
    e_tf = 1.2e12 / (statistics.median(row["eager_step_ms"]) / 1e3) / 1e12
    c_tf = 1.2e12 / (statistics.median(row["compiled_step_ms"]) / 1e3) / 1e12
    assert eff.eager_tflops == f"{e_tf:.0f}" and eff.compiled_tflops == f"{c_tf:.0f}"
    assert eff.eager_pct == f"{100 * e_tf / 400:.0f}%" and eff.compiled_pct == f"{100 * c_tf / 400:.0f}%"
    # v3 energy per sample = J / (samples x steps per sample) / batch: 25.6 / 40 / 64 = 10 mJ, 12.8 -> 5 mJ
    assert (eff.eager_mj, eff.compiled_mj, eff.energy_ratio) == ("10", "5", "0.50x")
    assert eff.energy_step == "0.64 / 0.32 J" and eff.telemetry == "80% / 1980 MHz / 45 C"
    assert eff.power == "500 W"  # v3 energy: no per-side window, the mean power over both sides
    (split,) = rep.splits
    assert split.stages[0] == "15.0 s" and split.stages[2] == "10.0 s" and split.cache == "4.0 MiB"
    assert "400.0 TFLOP/s" in rep.peak_line


def test_recompile_sweep_section_from_the_fixture():
    loaded, runs = _loaded()
    rep = build_run_report(loaded, runs[0], reps=100, now=NOW)
    (w,) = rep.sweeps
    row = _row("resnet18__infer__amp_bf16__bs8__default__model")
    assert w.sizes == ", ".join(str(int(b)) for b in row["sweep_batch_sizes"])
    assert (w.first_calls, w.recompiles, w.graphs) == ("4.500 s, 0.020 s, 0.010 s", "1", "1")


def test_launch_bound_judged_on_an_empty_launch_queue(tmp_path):
    """A GPU-bound step fills the launch queue, and then every enqueue lasts as long as the device
    step; only each block's first sample (after the block's synchronise) shows the host's own time."""
    import json as _json

    from collector.record.schema import write_row

    run = tmp_path / "lb"
    (run / "cells").mkdir(parents=True)
    blocks, spb = 4, 5
    step = [10.0] * (blocks * spb)
    cases = {  # first sample of a block 4 ms of host time, the rest wait on a full queue (~10 ms)
        "gpu_bound": [4.0 if i % spb == 0 else 9.9 for i in range(blocks * spb)],
        "launch_bound": [9.8] * (blocks * spb),
    }
    for name, enq in cases.items():
        write_row({"run_id": "lb", "cell_id": name, "model": name, "phase": "infer", "dtype": "amp_bf16",
                   "batch_size": 8, "mode": "default", "compile_scope": "model", "device": "cuda",
                   "status": "ok", "blocks": blocks, "steps_per_block": spb, "steps_per_sample": 1,
                   "eager_step_ms": step, "compiled_step_ms": step, "eager_enqueue_ms": enq,
                   "compiled_enqueue_ms": enq}, run / "cells" / f"{name}.parquet")
    (run / "run.json").write_text(_json.dumps({"run_id": "lb", "environment": {"device": "cuda"},
                                               "protocol": {}, "sessions": []}))
    loaded, _ = _loaded(tmp_path)
    got = dict(loaded.con.execute("SELECT cell_id, eager_launch_bound FROM stats").fetchall())
    ratios = dict(loaded.con.execute("SELECT cell_id, eager_launch_ratio FROM stats").fetchall())
    assert got == {"gpu_bound": False, "launch_bound": True}
    assert ratios["gpu_bound"] == pytest.approx(0.4) and ratios["launch_bound"] == pytest.approx(0.98)
    # the median over all samples would have called both launch-bound
    medians = dict(loaded.con.execute("SELECT cell_id, eager_enqueue_median_ms FROM stats").fetchall())
    assert medians["gpu_bound"] >= 0.9 * 10.0


@pytest.mark.evidence
def test_heatmap_keeps_whole_step_scope_apart_from_model_scope(tmp_path):
    """On the shipped H200 run: ResNet-18 training with reduce-overhead is 2.48x (bf16) and 1.10x
    (float32) with model scope and 3.38x with the whole step compiled; the heatmap shows the
    model-scope geomean and the step scope as its own column, not one mixed number."""
    import shutil

    from analysis.run_report.context import _records

    shutil.copytree(ROOT / "data" / "examples" / "default-h200", tmp_path / "default-h200")
    loaded, runs = _loaded(tmp_path)
    rows = {(r["phase"], r["model"], r["mode"]): r for r in _records(loaded.con, "heatmap", "default-h200")}
    model_scope = rows[("train", "resnet18", "reduce-overhead")]
    step_scope = rows[("train", "resnet18", "reduce-overhead [step]")]
    assert model_scope["cells"] == 2 and step_scope["cells"] == 1
    assert model_scope["geomean_speedup"] == pytest.approx((2.48 * 1.10) ** 0.5, rel=0.02)
    assert step_scope["geomean_speedup"] == pytest.approx(3.38, rel=0.01)


def test_compile_chart_shows_every_cell_up_to_its_cap_and_says_when_it_truncates(tmp_path, monkeypatch):
    """65 compiled cells fit (the old cap of 40 silently dropped every training cell of the H200
    run); past MAX_BARS the title says so; a 300 s autotuning compile beside 1 s warm calls puts
    the axis on a log scale."""
    from analysis.render import charts

    shown = {}

    def capture(fig, path):
        ax = fig.axes[0]
        shown.update(bars=len(ax.get_yticklabels()), title=ax.get_title(), xscale=ax.get_xscale())
        charts.plt.close(fig)
        return path

    monkeypatch.setattr(charts, "_save", capture)

    def rows(n, slow=None):
        return [{"label": f"cell {i}", "first_call_compiled_s": slow if i == 0 and slow else 10.0 + i,
                 "warm_first_call_compiled_s": 5.0} for i in range(n)]

    charts.compile_times(rows(65), tmp_path / "a.png")
    assert shown == {"bars": 65, "title": "", "xscale": "linear"}
    charts.compile_times(rows(100, slow=300.0), tmp_path / "b.png")
    assert shown["bars"] == charts.MAX_BARS == 80
    assert shown["title"] == "first 80 of 100 cells (the table lists all)" and shown["xscale"] == "log"


@pytest.mark.evidence
def test_headline_keeps_float32_apart_from_bf16(tmp_path):
    """On the shipped H200 run, float32 without TF32 (GPT 1.05x, ResNet-18 1.00x) and bf16
    autocast are separate headline rows, not one geomean of both."""
    import shutil

    shutil.copytree(ROOT / "data" / "examples" / "default-h200", tmp_path / "default-h200")
    loaded, runs = _loaded(tmp_path)
    report = build_run_report(loaded, runs[0], reps=100, now=NOW)
    rows = {(h.phase, h.mode, h.scope, h.dtype): h for h in report.headline}
    bf16, fp32 = rows[("infer", "default", "model", "amp_bf16")], rows[("infer", "default", "model", "float32")]
    assert (bf16.cells, fp32.cells) == (13, 2)
    cells = ROOT / "data" / "examples" / "default-h200" / "cells"
    ratios = []
    for name in ("gpt__infer__float32__bs8__default__model", "resnet18__infer__float32__bs64__default__model"):
        row = pq.read_table(cells / f"{name}.parquet").to_pylist()[0]
        ratios.append(statistics.median(row["eager_step_ms"]) / statistics.median(row["compiled_step_ms"]))
    assert fp32.geomean == f"{np.exp(np.mean(np.log(ratios))):.2f}x" == "1.02x"  # GPU-bound in eager already
    assert float(bf16.geomean[:-1]) > 1.5


def test_failure_summary_names_where_a_dead_process_got_to():
    from analysis.run_report.context import failure_summary

    old = ("cell process died (killed by signal SIGSEGV) without a result\n\n=== 2026-11-30T06:56:44 cold ===\n"
           "[cell +   0.0s] setup\n[cell +   9.1s] eager first call 0.21 s, warmed up\n"
           "/usr/lib/python3.12/copyreg.py:99: FutureWarning: ...")
    assert failure_summary(old) == ("cell process died (killed by signal SIGSEGV) without a result; "
                                    "last step logged: eager first call 0.21 s, warmed up")
    new = "cell process died (killed by signal SIGSEGV) without a result; last step logged: loading\n[cell +  1.0s] x"
    assert failure_summary(new) == new.splitlines()[0]  # already says it: not twice
    assert failure_summary("during compile: RuntimeError: boom\ntraceback") == "during compile: RuntimeError: boom"
    assert failure_summary(None) == ""


def test_eager_outlier_is_named_in_the_why_column():
    """ResNet-50 max-autotune in the H200 run: 3.41x against reduce-overhead's 2.80x, but its
    eager side landed 20% above the model's other cells; the why column must say so."""
    from analysis.run_report.context import mark_eager_outliers
    from analysis.explain.why import why_text

    def row(mode, eager, model="resnet50"):
        return {"model": model, "phase": "infer", "dtype": "amp_bf16", "batch_size": 32, "mode": mode,
                "status": "ok", "eager_median_ms": eager}

    rows = [row("default", 5.0), row("reduce-overhead", 5.1), row("max-autotune", 6.5),
            row("default", 5.0, "gpt"), row("reduce-overhead", 7.0, "gpt")]  # two cells: no median to trust
    mark_eager_outliers(rows, noise=0.10)
    assert rows[2]["eager_offset"] == pytest.approx((6.5 / 5.1 - 1, 3))
    assert "eager_offset" not in rows[0] and "eager_offset" not in rows[1]
    assert not any("eager_offset" in r for r in rows[3:])
    assert why_text(rows[2], {}, 0.10) == "eager +27% against this model's median over 3 cells"


@pytest.mark.evidence
def test_headline_pooled_eager_column_recomputed_from_the_raw_rows(tmp_path):
    """'pooled eager' = geomean over a row's cells of (median eager step of every ok cell of the
    same eager model) / (the cell's compiled median). Recomputed here from the Parquet files of
    the shipped H200 run: max-autotune-no-cudagraphs drops from 1.47x to 1.15x, because its
    eager sides ran slow in those processes."""
    import shutil

    src = ROOT / "data" / "examples" / "default-h200"
    shutil.copytree(src, tmp_path / "default-h200")
    loaded, runs = _loaded(tmp_path)
    report = build_run_report(loaded, runs[0], reps=100, now=NOW)
    rows = [pq.read_table(p).to_pylist()[0] for p in sorted((src / "cells").glob("*.parquet"))]
    ok = [r for r in rows if r["status"] == "ok"]
    eager_by_model = {}
    for r in ok:
        key = (r["model"], r["phase"], r["dtype"], r["batch_size"])
        eager_by_model.setdefault(key, []).append(statistics.median(r["eager_step_ms"]))
    cells = [r for r in ok if r["mode"] == "max-autotune-no-cudagraphs"]
    ratios = [statistics.median(eager_by_model[(r["model"], r["phase"], r["dtype"], r["batch_size"])])
              / statistics.median(r["compiled_step_ms"]) for r in cells]
    row = next(h for h in report.headline if h.mode == "max-autotune-no-cudagraphs")
    assert row.pooled == f"{np.exp(np.mean(np.log(ratios))):.2f}x" == "1.15x"
    assert row.geomean == "1.47x"


@pytest.mark.evidence
def test_cpu_report_leaves_out_device_only_sections_and_says_why(tmp_path):
    loaded, runs = _loaded(ROOT / "data" / "examples" / "repeat-cpu-a")
    md, _ = render(build_run_report(loaded, runs[0], reps=100, now=NOW), tmp_path)
    text = md.read_text()
    assert "## Memory" not in text and "No device memory figures" in text
    assert "mJ/sample" not in text and "No energy or GPU telemetry" in text


def test_one_byte_unit_per_column():
    from analysis.run_report.context import byte_unit, fmt_bytes

    unit = byte_unit([900 * 2**20, 3 * 2**30, None])
    assert unit == "GiB" and fmt_bytes(900 * 2**20, unit) == "0.9 GiB" and fmt_bytes(None, unit) == "-"
    assert fmt_bytes(1536) == "1.5 KiB"


@pytest.mark.evidence
def test_subtitle_counts_the_gpus_the_rows_ran_on_not_the_presets_words(tmp_path):
    """The shipped default-h200 run was collected with GPUS=0,1 under a preset text that said
    "One GPU"; the rows' gpu_index decides what the report says."""
    import shutil

    shutil.copytree(ROOT / "data" / "examples" / "default-h200", tmp_path / "default-h200")
    loaded, runs = _loaded(tmp_path)
    rep = build_run_report(loaded, runs[0], reps=50, now=NOW)
    assert rep.device_line.endswith(", 2 GPUs (cells side by side)")
    assert "One GPU" not in rep.description and rep.description.startswith("all models")


def test_a_run_whose_rows_mix_torch_builds_or_hosts_says_so(tmp_path):
    """A SLURM run with ALLOW_MIXED=1 (or a merge with --allow-mixed): the rows' own torch and
    host decide the caveat, not the submitting session."""
    import shutil

    shutil.copytree(FIXTURE, tmp_path / "fx")
    run_dir = next(p.parent for p in (tmp_path / "fx").rglob("run.json"))
    files = sorted((run_dir / "cells").glob("*.parquet"))
    t = pq.read_table(files[0])
    t = t.set_column(t.schema.get_field_index("torch_version"), "torch_version", pa.array(["9.9.9"]))
    t = t.set_column(t.schema.get_field_index("hostname"), "hostname", pa.array(["node-17"]))
    pq.write_table(t, files[0])
    loaded, runs = _loaded(tmp_path / "fx")
    rep = build_run_report(loaded, runs[0], reps=50, now=NOW)
    text = " ".join(rep.notes)
    assert "This run mixes torch builds: " in text and "9.9.9 (1 cells)" in text
    assert "node-17" in text


def test_samples_that_are_not_finite_positive_times_are_named_and_left_out(fixture_copy, tmp_path):
    """NaN in half of one cell's eager samples (a cell that shares its eager model with another: the
    report once crashed there), an inf and a zero in another's compiled samples: the report renders, names both
    cells and what was left out, and computes each cell from its remaining samples."""
    cells = fixture_copy / "fixture-small" / "cells"
    nan_cell, inf_cell = "mlp__infer__amp_bf16__bs32__default__model", "resnet18__infer__amp_bf16__bs8__default__model"
    for cid, col, bad in ((nan_cell, "eager_step_ms", "half-nan"), (inf_cell, "compiled_step_ms", "inf")):
        path = cells / f"{cid}.parquet"
        table = pq.read_table(path)
        rows = table.to_pylist()
        xs = rows[0][col]
        if bad == "half-nan":
            rows[0][col] = [float("nan") if i % 2 else x for i, x in enumerate(xs)]
        else:
            rows[0][col] = [float("inf")] + [0.0] + xs[2:]
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    loaded, runs = _loaded(fixture_copy)
    flagged = dict((p.rsplit("/", 1)[-1], why) for p, why in loaded.flagged)
    n = len(_row(nan_cell)["eager_step_ms"])
    assert flagged == {f"{nan_cell}.parquet": f"{n // 2} of {n} eager samples (nan) are not finite positive times: left out",
                       f"{inf_cell}.parquet": f"2 of {len(_row(inf_cell)['compiled_step_ms'])} compiled samples "
                                              "(<= 0, inf) are not finite positive times: left out"}
    got = loaded.con.execute("SELECT eager_median_ms, compiled_median_ms FROM stats WHERE cell_id = ?", [nan_cell]).fetchone()
    assert got[0] == pytest.approx(statistics.median(_row(nan_cell)["eager_step_ms"][0::2]))
    got = loaded.con.execute("SELECT compiled_median_ms FROM stats WHERE cell_id = ?", [inf_cell]).fetchone()
    assert got[0] == pytest.approx(statistics.median(_row(inf_cell)["compiled_step_ms"][2:]))
    report = build_run_report(loaded, runs[0], reps=300, now=NOW)
    assert any("2 cell(s) had step-time samples that are not finite positive times" in c for c in report.verdict.caveats)
    assert analysis_main(["--data", str(fixture_copy), "--out", str(tmp_path / "r"), "--reps", "100"]) == 0
    md = (tmp_path / "r" / "fixture-small" / "report.md").read_text()
    assert "2 cell(s) had samples left out" in md and f"{nan_cell}.parquet" in md
    assert "nan" not in md.split("## Headline")[1].lower().replace("nano", "")  # no NaN reaches a figure


def test_a_cell_whose_samples_are_all_nan_or_inf_is_a_failure_everywhere(fixture_copy, tmp_path):
    """Every compiled sample NaN or inf in one ok cell: no interval "nan-nan" and no ok count in the run
    report; the cell is a failure with the reason (the file stays as written); the comparison and the
    gate against a clean copy run through (the gate exited with a TypeError here) and say what failed."""
    import shutil

    from analysis.commands.gate import main as gate_main

    cid = "mlp__infer__amp_bf16__bs32__default__model"
    clean = tmp_path / "clean"
    shutil.copytree(fixture_copy / "fixture-small", clean / "fixture-clean")
    manifest = clean / "fixture-clean" / "run.json"
    manifest.write_text(manifest.read_text().replace('"fixture-small"', '"fixture-clean"'))
    path = fixture_copy / "fixture-small" / "cells" / f"{cid}.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    rows[0]["compiled_step_ms"] = [float("nan") if i % 2 else float("inf") for i in range(len(rows[0]["compiled_step_ms"]))]
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    loaded, runs = _loaded(fixture_copy)
    flagged = dict((p.rsplit("/", 1)[-1], why) for p, why in loaded.flagged)
    assert flagged[f"{cid}.parquet"].endswith("no compiled sample is left: counted as runtime_error (no step time)")
    status, error = loaded.con.execute("SELECT status, error FROM stats WHERE cell_id = ?", [cid]).fetchone()
    assert status == "runtime_error" and "no step time" in error
    assert pq.read_table(path).column("status")[0].as_py() == "ok"  # the file as written
    assert analysis_main(["--data", str(fixture_copy), "--out", str(tmp_path / "r"), "--reps", "100"]) == 0
    md = (tmp_path / "r" / "fixture-small" / "report.md").read_text()
    assert "nan-nan" not in md and "nanx" not in md
    shutil.copytree(clean / "fixture-clean", fixture_copy / "fixture-clean")
    out = tmp_path / "c"
    assert analysis_main(["--data", str(fixture_copy), "--out", str(out), "--reps", "100",
                          "--baseline", "fixture-clean", "--candidate", "fixture-small"]) == 0
    assert "newly failing" in next(out.rglob("report.md")).read_text().lower()
    # the gate fails on the cell that is ok in the baseline and failed in the candidate, and runs through
    # (no TypeError); --allow-new-failures leaves the called regressions alone to judge, and there are none
    gate = ["--data", str(fixture_copy), "--baseline", "fixture-clean", "--candidate", "fixture-small",
            "--max-regression", "5%"]
    assert gate_main(gate) == 1
    assert gate_main(gate + ["--allow-new-failures"]) == 0


def test_loose_cell_files_are_read_in_batches_and_every_one_arrives(monkeypatch):
    """Without compact.parquet every cell file is read; one DuckDB read of 10,000 files took 10 GB
    (docs/performance.md), so they are read LOOSE_BATCH at a time: with batches of 2 (and one
    left over) the fixture's 7 cells all load, each once."""
    from analysis.data import load as load_mod

    monkeypatch.setattr(load_mod, "LOOSE_BATCH", 2)
    loaded, _ = _loaded()
    ids = [r[0] for r in loaded.con.execute("SELECT cell_id FROM cells ORDER BY cell_id").fetchall()]
    assert ids == sorted(p.stem for p in (FIXTURE / "fixture-small" / "cells").glob("*.parquet")) and len(ids) == 7


def test_one_wild_interval_does_not_flatten_the_summary_chart(tmp_path):
    """A process that read 342.94x under load once stretched the summary chart to 10,000x: the range now
    holds the points and intervals up to 4x beyond them; the wild interval is cut and marked."""
    from analysis.render import charts

    bottom, top = charts.summary_limits([1.2, 1.5, 2.0], [(1.1, 1.3), (0.82, 342.94), (1.9, 2.1)])
    assert top <= 2.0 * charts.SPAN * 1.15 and bottom < 0.82
    bottom, top = charts.summary_limits([1.2, 1.5], [(1.1, 1.3), (1.4, 1.6)])
    assert 1.6 <= top < 2.0 and 0.8 < bottom <= 1.0  # nothing to cut: the data's own range
    rows = [{"group": "infer default", "speedup": 1.5, "lo": 0.82, "hi": 342.94, "verdict": "unclear"},
            {"group": "infer default", "speedup": 1.2, "lo": 1.1, "hi": 1.3, "verdict": "faster"}]
    assert charts.summary(rows, tmp_path / "s.png").stat().st_size > 0


def test_where_the_collections_time_went_sums_each_stage_over_the_processes_that_said():
    """run_tables.collection_rows: each stage summed over every process with a split, its share of their wall
    time, the rest outside the process's clock, the median a cell (a cell without a stage counts 0 there);
    a row without a split (older schema), a malformed one, and a process that said nothing are left out."""
    from analysis.run_report.run_tables import OUTSIDE, collection_rows

    rows = [{"process_stages_json": json.dumps([{"build": 4.0, "compile": 10.0}, {"build": 3.0, "compile": 1.0}]),
             "process_wall_s": [15.0, 5.0]},
            {"process_stages_json": json.dumps([{"build": 2.0, "compile": 6.0, "profile": 2.0}, None]),
             "process_wall_s": [11.0, 4.0]},
            {"process_stages_json": None, "process_wall_s": [30.0]},
            {"process_stages_json": "not json", "process_wall_s": [30.0]}]
    got, note = collection_rows(rows)
    by = {t.stage: t for t in got}
    assert [t.stage for t in got] == ["build", "compile", "profile", OUTSIDE]
    # 3 processes, 31 s of wall: build 9 s, compile 17 s, profile 2 s, outside 1 + 1 + 1
    assert (by["build"].seconds, by["compile"].seconds, by["profile"].seconds, by[OUTSIDE].seconds) == \
        ("9.00 s", "17.0 s", "2.00 s", "3.00 s")
    assert (by["build"].share, by["compile"].share, by[OUTSIDE].share) == ("29%", "55%", "10%")
    assert (by["build"].median, by["compile"].median, by["profile"].median) == ("4.50 s", "8.50 s", "1.00 s")
    assert note.startswith("2 of the 4 cells (3 processes) recorded where their time went") and "31.0 s" in note
    assert collection_rows(rows[2:]) == ([], "")
