"""The order a session measures its cells in (collector/host/queue.py): on a shared GPU no two cells of one
model run at once, but a cell's copies under every interpreter still do (the pair)."""
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from collector.host import neighbours
from collector.host.launch import LauncherBase
from collector.host.queue import next_entry
from collector.host.runner import Target, collect_targets
from collector.host.workers import Worker
from collector.plan import matrix as mx

ENV = {"device": "cuda", "device_name": "Test GPU", "hostname": "h", "gpu_name": "Test GPU"}


class _Watch(LauncherBase):
    """A stand-in cell that takes a while and notes what else was in flight when it started."""
    lock = threading.Lock()

    def __init__(self, version, seen, running):
        self.version, self.seen, self.running = version, seen, running

    def run(self, spec, cache_dir, log_path, timeout_s):
        c = spec["cell"]
        me = (c["model"], c["batch_size"], self.version)
        with self.lock:
            self.seen.append((me, list(self.running)))
            self.running.append(me)
        time.sleep(0.3)
        with self.lock:
            self.running.remove(me)
        return {"status": "ok", "eager_step_ms": [2.0] * 4, "compiled_step_ms": [1.0] * 4,
                "first_call_eager_s": 0.1, "first_call_compiled_s": 3.0}


def _collect(tmp_path, monkeypatch, workers):
    monkeypatch.setattr(neighbours, "measuring", lambda proc=neighbours.PROC: {})
    m = mx.build_matrix("smoke", {"models": ["mlp", "gpt"], "phases": ["infer"], "modes": ["default"],
                                  "batch_sizes": [1, 2], "processes": 1, "warm_compile": False})
    seen, running = [], []
    targets = [Target(m, {**ENV, "torch_version": v}, f"r-{v}", _Watch(v, seen, running), label=v) for v in "ab"]
    collect_targets(targets, tmp_path, workers=workers)
    assert len(seen) == 8  # 4 cells x 2 interpreters, every one measured
    return seen


def test_on_a_shared_gpu_no_two_cells_of_one_model_run_at_once_but_a_cells_pair_does(tmp_path, monkeypatch):
    """Three workers on GPU 0: the queue lists mlp bs1 (a, b), mlp bs2 (b, a), gpt bs1, ...; taken in order, mlp
    bs2 started beside mlp bs1 (a model beside itself: MT5 and XGLM out of memory so on an H100)."""
    workers = [Worker(gpu=0, timing_lock=str(tmp_path / "lock")) for _ in range(3)]
    seen = _collect(tmp_path, monkeypatch, workers)
    for (model, bs, _), beside in seen:
        assert all(m != model or b == bs for m, b, _ in beside), (model, bs, beside)
    first = {me[:2] for me, _ in seen[:3]}
    assert ("mlp", 1) in first and len(first) == 2  # the pair mlp bs1 (a, b) started together, gpt beside it


def test_workers_on_their_own_gpus_take_the_queue_in_order(tmp_path, monkeypatch):
    """Nothing shared (GPUS=0,1,2: three GPUs): the matrix order, a model's cells on separate GPUs at once."""
    workers = [Worker(gpu=g) for g in range(3)]
    seen = _collect(tmp_path, monkeypatch, workers)
    assert [me[:2] for me, _ in seen[:3]].count(("mlp", 2)) == 1  # the third entry: mlp bs2, not gpt


def test_at_the_queues_end_a_worker_takes_a_models_other_cell_rather_than_wait():
    class C:
        def __init__(self, model, cell_id):
            self.model, self.cell_id = model, cell_id

    a1, a2, b1 = C("a", "a1"), C("a", "a2"), C("b", "b1")
    queue = [(1, (0, a2)), (2, (1, a2)), (3, (0, b1))]
    assert next_entry(queue, [a1], shared=True) == 2
    assert next_entry(queue, [a2], shared=True) == 0  # the same cell: its pair
    assert next_entry(queue[:2], [a1], shared=True) == 0
    assert next_entry(queue, [a1], shared=False) == 0
    b2 = C("b", "b2")
    behind = [(1, (0, a2)), (2, (1, a2)), (3, (0, b2)), (4, (1, b1))]  # b1's first copy was taken ahead of a2
    assert next_entry(behind, [b1], shared=True) == 3  # its pair next, not a2 (free now) nor b2


ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "data" / "examples"


def _overlap(*runs: str) -> str:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "model_overlap.py"), *(str(EX / r) for r in runs)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.evidence
@pytest.mark.slow
def test_on_a_real_shared_gpu_the_rule_kept_a_models_cells_apart_where_the_queues_order_had_not():
    """docs/scale-out.md, docs/validation.md: torchvision's screen on an H200 (tv-h200-*, three cells a GPU, the
    rule in place) ran no two cells of one model at once, 38 of its 41 pairs together; the H100 screen before the
    rule (su-h100-*) ran another cell of the same model beside a cell 156 times, over 56 models."""
    assert "83 cells: at once with the same cell under another interpreter 38 times" in (
        tv := _overlap("tv-h200-torch2.11.0-cu130", "tv-h200-torch2.14.1-cu130")), tv
    assert "with another cell of its own model 0 (0 models)" in tv, tv
    su = _overlap("su-h100-torch2.11.0-cu130", "su-h100-torch2.14.1-cu130")
    assert "with another cell of its own model 156 (56 models)" in su and su.startswith("364 cells"), su  # the
    # 65 cells of 2026-12-07 08:26 and the 11 of 12:00, taken with the rule, added none; 14 cells' rows beside
    # others (169 overlaps over 62 models before) were replaced by alone ones


@pytest.mark.evidence
@pytest.mark.slow
def test_the_torchvision_screen_on_an_h200_moves_default_modes_host_paced_cells_most(tmp_path):
    """docs/findings-suites.md (tv-h200-*, one H200, a screen in progress): 21 and 20 models ok in both, their
    geomean speedups, and the largest moves host-paced in default mode (MobileNetV3's compiled step with its
    host time per launch), small in reduce-overhead, where the host is out of the step."""
    a, b = "tv-h200-torch2.11.0-cu130", "tv-h200-torch2.14.1-cu130"
    out = subprocess.run([sys.executable, "-m", "analysis", "--data", str(EX), "--baseline", a, "--candidate", b,
                          "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    md = (tmp_path / f"compare-{a}-vs-{b}" / "report.md").read_text()
    assert "| torchvision | infer | default | 21/21 → 21/21 | 1.93x → 2.20x | +14.0% (a screen" in md, md[:3000]
    assert "| torchvision | infer | reduce-overhead | 20/20 → 20/20 | 2.35x → 2.49x | +5.8% (a screen" in md, md[:3000]
    assert "| tv:mobilenet_v3_large infer amp_bf16 bs64 default | 3.640 → 1.883 | 1.530 → 1.406 | 3.704 → 1.975 |" in md
    assert "B 1 that A lacks" in md  # maxvit_t's default cell under 2.14.1 only: the budget ended the command


def test_a_cell_out_of_memory_beside_others_sends_its_models_other_cells_of_that_batch_to_the_alone_pass(
        tmp_path, monkeypatch, capsys):
    """Three workers on GPU 0, two interpreters: mlp's default cell runs out of memory beside others under a
    (as M2M100's and Pegasus's did on an H100 at the lists' batches); its reduce-overhead cell, which needs the
    same memory, is then not tried beside others under either interpreter: it waits for the alone pass, which
    measures both of mlp's cells under both. gpt is untouched. The progress counts each measurement once."""
    import pyarrow.parquet as pq

    from collector.host.alone import again_queue, spilled_keys
    from support.launchers import MemoryLauncher
    monkeypatch.setattr(neighbours, "measuring", lambda proc=neighbours.PROC: {})
    procs = []

    def oom(cell, version, shared):  # mlp's default cell, beside others, under a
        return cell["model"] == "mlp" and cell["mode"] == "default" and shared and version == "a"

    m = mx.build_matrix("smoke", {"models": ["mlp", "gpt"], "phases": ["infer"], "modes": ["default", "reduce-overhead"],
                                  "batch_sizes": [8], "processes": 1, "warm_compile": False})
    targets = [Target(m, {**ENV, "torch_version": v}, f"r-{v}", MemoryLauncher(v, oom, procs, 0.3), label=v)
               for v in "ab"]
    workers = [Worker(gpu=0, timing_lock=str(tmp_path / "lock")) for _ in range(3)]
    collect_targets(targets, tmp_path, workers=workers)
    out = capsys.readouterr().out
    log = [(c["model"], c["mode"], v, shared) for c, v, shared in procs]
    beside = sorted(x[:3] for x in log if x[3])
    assert ("mlp", "reduce-overhead", "a") not in beside and ("mlp", "reduce-overhead", "b") not in beside, beside
    assert [x for x in beside if x[0] == "gpt"] == [("gpt", m, v) for m in ("default", "reduce-overhead") for v in "ab"]
    assert sorted(x[:3] for x in log if not x[3]) == [("mlp", m, v) for m in ("default", "reduce-overhead") for v in "ab"]
    assert ("2 cell(s) ran out of memory beside other cells on a shared GPU, or share the model, phase and batch of "
            "one that did (2 of the 4 measurement(s) below not tried there): measuring them again alone") in out, out
    assert "[10/10]" in out and "/12]" not in out, out  # 6 beside others and 4 alone, each counted once
    for v in "ab":
        rows = [r for f in (tmp_path / f"r-{v}" / "cells").glob("*.parquet") for r in pq.read_table(f).to_pylist()]
        assert {(r["model"], r["mode"]): (r["status"], r["concurrent_cells"]) for r in rows} == {
            ("mlp", "default"): ("ok", 1), ("mlp", "reduce-overhead"): ("ok", 1),
            ("gpt", "default"): ("ok", 3), ("gpt", "reduce-overhead"): ("ok", 3)}
    # a command whose time budget ended before the alone pass: the next reads the spill from the saved rows,
    # leaves the spilled cells out of its shared queue, and the alone pass takes those it left
    from types import SimpleNamespace
    by = {(c.model, c.mode): c for c in m.cells}
    saved = {by["mlp", "default"].cell_id: "oom_shared", by["gpt", "default"].cell_id: "ok"}
    opened = [SimpleNamespace(target=t, store=SimpleNamespace(saved=lambda: saved), manifest={"sessions": [{}]})
              for t in targets]
    assert spilled_keys(opened) == {("mlp", "infer", by["mlp", "default"].dtype, 8)}
    queue = [(k, (ti, by[key])) for k, (key, ti) in enumerate([(("mlp", "reduce-overhead"), 0),
                                                               (("gpt", "reduce-overhead"), 0)])]
    assert next_entry(queue, [], shared=True, spilled=spilled_keys(opened)) == 1
    assert next_entry(queue[:1], [], shared=True, spilled=spilled_keys(opened)) is None
    again = [(ti, c.mode) for ti, c in again_queue(opened, {by["mlp", "reduce-overhead"].cell_id})]
    assert sorted(again) == [(0, "default"), (0, "reduce-overhead"), (1, "default"), (1, "reduce-overhead")]


@pytest.mark.evidence
@pytest.mark.slow
def test_on_the_h100_screen_the_memory_rule_would_have_skipped_tries_of_cells_measured_alone_anyway():
    """docs/scale-out.md, docs/performance.md ("Faster screens"), docs/validation.md: replayed on the H100 screen's
    rows (taken without the rule), the tries after a same-key cell ran out of memory beside others are 10, all
    of cells measured alone anyway, once the cells measured alone since are left out (the one cell it sent alone
    before, RoBERTa's reduce-overhead cell, went with its default cell's row beside others, measured alone since)."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "spill_replay.py"),
                          *(str(EX / f"su-h100-torch{v}-cu130") for v in ("2.11.0", "2.14.1"))],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    # the 14 cells the alone pass has measured since (2026-12-07 12:14 on) lost their rows beside others: left out
    assert out.stdout.startswith("left out: 14 cells measured alone since"), out.stdout
    assert ("336 rows, 19 out of memory beside others (15 cells measured alone under every interpreter): the rule "
            "skips 10 tries of those cells (502 s of cell processes spent for nothing) and sends 0 other cells "
            "alone (0 tries, 0 s,") in out.stdout, out.stdout
    assert "hf-PegasusForCausalLM__infer__amp_bf16__bs128__reduce-overhead__model  oom_shared  71 s  alone anyway" \
        in out.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "spill_replay.py"), str(EX)],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "not a run folder" in bad.stderr, bad.stderr


@pytest.mark.evidence
def test_the_cells_the_alone_pass_has_left_are_counted_from_the_saved_rows():
    """collector/host/alone.py `pending` (versions_gpu.sh waits on it before a confirmation): on the H100 screen
    after its first 27 alone measurements, 16 cells, each with a row out of memory beside others (M2M100's default
    cell measured alone under 2.14.1 only); not the 13 cells measured alone under both torches (gemma's three,
    Mistral-7B's, GPT-J's, MT5's and XGLM's two each, RoBERTa's and ELECTRA's one). torchvision's screen
    has none. A pass cut between interpreters counts too: the planted test below."""
    from collector.host.alone import pending

    su = [EX / f"su-h100-torch{v}-cu130" for v in ("2.11.0", "2.14.1")]
    left = pending(su)
    done = ("gemma", "Mistral", "GPTJ", "XGLM", "MT5")
    assert len(left) == 16 and not any(m in c for c in left for m in done), left
    assert "hf-M2M100ForConditionalGeneration__infer__amp_bf16__bs64__default__model" in left, left
    assert pending([EX / f"tv-h200-torch{v}-cu130" for v in ("2.11.0", "2.14.1")]) == []
    script = ROOT / "benchmarks" / "gpu_machine" / "pending_alone.py"
    out = subprocess.run([sys.executable, str(script), *map(str, su)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "16\n", out
    bad = subprocess.run([sys.executable, str(script), str(EX)], capture_output=True, text=True)
    assert bad.returncode == 2 and "not a run folder" in bad.stderr, bad


@pytest.mark.evidence
def test_the_alone_pass_left_counts_exactly_what_is_planted_in_a_whole_screen(tmp_path):
    """docs/validation.md: torchvision's whole screen (tv-h200-*, three cells a GPU) counts 0; with one row made
    out of memory beside others under one torch, and another cell queued for the alone pass (run.json) and
    measured alone under one torch only, it counts exactly those two."""
    import json
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from collector.host.alone import pending
    from collector.record.contract import OOM_SHARED, SHARED_GPU_OOM_HEAD

    runs = [tmp_path / f"tv-h200-torch{v}-cu130" for v in ("2.11.0", "2.14.1")]
    for r in runs:
        shutil.copytree(EX / r.name, r)
    assert pending(runs) == []
    cells = sorted(f.stem for f in (runs[1] / "cells").glob("*.parquet"))
    oom, half = cells[3], cells[10]

    def edit(run, cell, **values):
        path = run / "cells" / f"{cell}.parquet"
        row = pq.read_table(path).to_pylist()[0]
        pq.write_table(pa.Table.from_pylist([{**row, **values}], schema=pq.read_schema(path)), path)

    edit(runs[1], oom, status=OOM_SHARED, error=f"{SHARED_GPU_OOM_HEAD} (planted)")
    edit(runs[0], half, concurrent_cells=1)
    edit(runs[1], half, concurrent_cells=3)
    manifest = json.loads((runs[1] / "run.json").read_text())
    manifest.setdefault("sessions", [{}])[-1]["measured_alone"] = [half]
    (runs[1] / "run.json").write_text(json.dumps(manifest))
    assert pending(runs) == sorted([oom, half])
    edit(runs[1], half, concurrent_cells=1)  # now measured alone under both
    assert pending(runs) == [oom]
