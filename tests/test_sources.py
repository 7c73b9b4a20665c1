"""Model sources beyond the built-in files: timm:, hf: and the user's own build function (collector/models/)."""
import importlib.util
import json
import math
import os
import subprocess
import sys
import types

import pytest

from collector.child import cell

from collector import models
from collector.plan import matrix as mx
from collector.__main__ import main as collector_main
from collector.models import check, sources
from conftest import ROOT

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
TINY_BERT = "hf:BertForMaskedLM:num_hidden_layers=1,hidden_size=32,intermediate_size=64,num_attention_heads=2,seq_len=16"
USER = "examples/user_model.py:build"


def _spec(model, phase="infer", mode="default"):
    from dataclasses import asdict
    from collector.plan.matrix import Protocol

    p = asdict(Protocol(blocks=2, steps_per_block=2, warmup_steps=1, min_block_ms=0, warm_compile=False))
    return {"kind": "cold", "cell": {"model": model, "phase": phase, "dtype": "float32", "batch_size": 2,
                                     "mode": mode, "compile_scope": "model"}, "protocol": p, "device": "cpu"}


@pytest.mark.parametrize("ref, kind, name, opts", [
    ("timm:resnet50", "timm", "timm:resnet50", {}),
    ("timm:vit_base_patch16_224:image_size=160,img_size=160", "timm", "timm:vit_base_patch16_224",
     {"image_size": 160, "img_size": 160}),
    ("hf:T5ForConditionalGeneration:num_layers=2,d_model=64", "hf", "hf:T5ForConditionalGeneration",
     {"num_layers": 2, "d_model": 64}),
    ("examples/user_model.py:build:width=64,tag=x", "user", "examples/user_model.py:build", {"width": 64, "tag": "x"}),
    ("my_pkg.models:build", "user", "my_pkg.models:build", {}),
    ("gpt:layers=2", None, "gpt", {"layers": 2}),
    ("mlp", None, "mlp", {}),
])
def test_references_name_their_source_and_options(ref, kind, name, opts):
    assert sources.kind_of(ref) == kind
    got_name, got_opts = models.parse_ref(ref)
    assert got_name == name
    assert {k: got_opts[k] for k in opts} == opts
    # the canonical reference keeps every option of a sourced model, sorted: the cell key
    if kind:
        assert models.canonical_ref(got_name, got_opts) == name + (
            ":" + ",".join(f"{k}={opts[k]}" for k in sorted(opts)) if opts else "")


@pytest.mark.parametrize("ref, message", [
    ("timm:", "no timm model named; write timm:<name>"),
    ("hf::seq_len=3", "no hf model named"),
    ("no/such/file.py:build", "no file 'no/such/file.py'"),
    ("examples/user_model.py:build:width", "bad option 'width'"),
    ("examples/user_model.py:3x", "with the function's name after the colon"),
])
def test_bad_references_are_one_clear_error(ref, message):
    with pytest.raises(mx.MatrixError, match=message):
        mx.build_matrix("smoke", {"models": [ref]})


def test_dry_run_lists_cells_of_all_three_kinds(capsys):
    rc = collector_main(["--preset", "smoke", "--dry-run", "--modes", "default", "--phases", "infer",
                         "--models", f"timm:resnet10t:image_size=64,{TINY_BERT},{USER}"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "timm-resnet10t-image_size-64__infer__float32__bs8__default__model" in out
    assert "hf-BertForMaskedLM-hidden_size-32-intermediate_size-64-num_attention_heads-2-num_hidden_layers-1-seq_len-16__infer" in out
    assert "examples-user_model.py-build__infer__float32__bs8__default__model" in out
    assert "3 cells" in out


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed")
def test_whisper_builds_speech_inputs_within_its_decoder_limit():
    """input_features of num_mel_bins x 2 max_source_positions frames; the decoder's ids and labels
    no longer than max_target_positions (512 would fail: "cannot exceed ... 448 tokens")."""
    ref = ("hf:WhisperForConditionalGeneration:d_model=32,encoder_layers=1,decoder_layers=1,encoder_attention_heads=2,"
           "decoder_attention_heads=2,encoder_ffn_dim=32,decoder_ffn_dim=32,max_source_positions=16,num_mel_bins=8,"
           "max_target_positions=12")
    name, opts = models.parse_ref(ref)
    built = models.build(name, 2, opts)
    assert built.module.names == ("input_features", "decoder_input_ids", "labels")
    assert tuple(built.inputs[0].shape) == (2, 8, 32) and tuple(built.inputs[1].shape) == (2, 12)
    assert built.settings == {"mel_bins": 8, "frames": 32, "decoder_seq_len": 12}
    loss = built.loss(built.module(*built.inputs), built.target)
    loss.backward()
    assert math.isfinite(loss.item())


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed")
def test_an_attention_mask_is_an_option_of_the_cell():
    padded = TINY_BERT + ",attention_mask=padded"
    name, opts = models.parse_ref(padded)
    built = models.build(name, 4, opts)
    assert built.module.names == ("input_ids", "attention_mask", "labels")
    mask = built.inputs[1]
    assert mask.sum(dim=1).tolist() == [16, 14, 12, 10]  # row i keeps seq - i*seq/(2*batch) tokens
    assert built.settings["attention_mask"] == "padded"
    out = built.module(*built.inputs)
    assert math.isfinite(built.loss(out, built.target).item())
    ones = models.build(name, 2, {**opts, "attention_mask": "ones"})
    assert ones.inputs[1].min().item() == 1
    with pytest.raises(models.ModelBuildError, match="attention_mask='half': one of none, ones, padded"):
        models.build(name, 2, {**opts, "attention_mask": "half"})
    assert models.canonical_ref(name, opts) != models.canonical_ref(*models.parse_ref(TINY_BERT))  # part of the key


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed")
def test_a_class_whose_inputs_the_source_cannot_build_is_skipped_with_the_reason():
    from collector.child.cell import classify
    from collector.models.base import ModelSkipped

    with pytest.raises(ModelSkipped, match="no vocabulary of its own") as caught:
        models.build("hf:CLIPModel", 2, {})
    assert classify(caught.value, "setup") == "skipped"
    spec = {"kind": "cold", "device": "cpu", "protocol": {"processes": 1},
            "cell": {"model": "hf:CLIPModel", "phase": "infer", "dtype": "float32", "batch_size": 2,
                     "mode": "default", "compile_scope": "model"}}
    result = cell.run_cell(spec)  # the cell process's own path: a skipped row with the reason alone
    assert result["status"] == "skipped" and "no vocabulary of its own" in result["error"]
    assert "Traceback" not in result["error"] and "during setup" not in result["error"]


def test_suite_presets_hold_the_issue_sizes_and_combine():
    timm = mx.build_matrix("timm")
    hf = mx.build_matrix("huggingface")
    both = mx.build_matrix("suites")
    timm_models = {c.model for c in timm.cells}
    hf_models = {c.model for c in hf.cells}
    assert len(timm_models) >= 20 and all(m.startswith("timm:") for m in timm_models)
    assert len(hf_models) >= 50 and all(m.startswith("hf:") for m in hf_models)
    # the whole of PyTorch's list, hub ids included, at its batch sizes; the classic subset kept
    classic = {c.model for c in mx.build_matrix("huggingface-classic").cells}
    assert len(classic) == 14 and classic < hf_models
    assert {"hf:GPTJForCausalLM", "hf:meta-llama/Llama-3.2-1B", "hf:openai/gpt-oss-20b", "hf:T5Small"} <= hf_models
    assert len({c.model for c in both.cells if c.phase == "train"}) >= 10
    tv = mx.build_matrix("torchvision")
    assert len({c.model for c in tv.cells}) >= 20 and all(c.model.startswith("tv:") for c in tv.cells)
    assert [c.cell_id for c in both.cells] == [c.cell_id for c in timm.cells + hf.cells + tv.cells]
    assert both.protocol.processes == 1 and not both.protocol.warm_compile  # the screening protocol
    assert both.protocol.kernel_profile and both.protocol.graph_capture  # what moved, in every screen cell
    # energy is no screen figure: its windows (2.1 s of a 26 s H100 screen cell) are left out of each suite
    assert not any(mx.build_matrix(p).protocol.energy_windows for p in ("suites", "timm", "huggingface", "torchvision"))
    assert mx.build_matrix("default").protocol.energy_windows  # elsewhere they stay
    # PyTorch's list batch sizes (benchmarks/dynamo/*_models_list.txt), both modes, training
    size = {(c.model, c.phase): c.batch_size for c in both.cells}
    assert size[("timm:resnet50", "infer")] == 128 and size[("timm:ghostnet_100", "infer")] == 512
    assert size[("hf:BertForMaskedLM", "infer")] == 32 and size[("hf:DistilBertForMaskedLM", "infer")] == 256
    assert size[("hf:ElectraForQuestionAnswering", "infer")] == 128 and size[("hf:OPTForCausalLM", "infer")] == 4
    assert size[("hf:GPTJForCausalLM", "infer")] == 1 and size[("hf:DistilBertForQuestionAnswering", "infer")] == 512
    assert size[("hf:Qwen/Qwen3-0.6B", "infer")] == 8
    assert size[("hf:BertForMaskedLM", "train")] == 32 and size[("timm:mobilenetv3_large_100", "train")] == 512
    for m in timm_models | hf_models:
        assert {c.mode for c in both.cells if c.model == m and c.phase == "infer"} == {"default", "reduce-overhead"}
    assert {c.model for c in tv.cells if c.phase == "train"} >= {"tv:resnet50", "tv:maskrcnn_resnet50_fpn", "tv:fcn_resnet50"}
    assert {c.model for c in mx.build_matrix("builtin").cells} == set(models.names())


def test_a_preset_cannot_combine_itself(tmp_path):
    loop = tmp_path / "loop.toml"
    loop.write_text('combine = ["loop"]\n')
    with pytest.raises(mx.MatrixError, match="unknown preset 'loop'|combine names the preset itself"):
        mx.build_matrix(str(loop))
    nested = tmp_path / "nested.toml"
    nested.write_text('combine = ["suites"]\n')
    with pytest.raises(mx.MatrixError, match="combines presets itself"):
        mx.build_matrix(str(nested))


def test_a_user_function_that_raises_is_a_build_error_row_naming_it():
    result = cell.run_cell(_spec("examples/user_model.py:broken"))
    assert result["status"] == "build_error"
    assert "the user function examples/user_model.py:broken" in result["error"]
    assert "fails on purpose" in result["error"]


def test_a_user_function_that_returns_something_else_is_a_build_error(tmp_path, monkeypatch):
    f = tmp_path / "odd.py"
    f.write_text("def build(batch_size, **opts):\n    return 42\n")
    with pytest.raises(models.ModelBuildError, match="returned int, not collector.models.Built"):
        models.build(f"{f}:build", 2, {})


def test_out_of_memory_while_building_stays_oom():
    exc = models.ModelBuildError("building x failed: RuntimeError: CUDA out of memory. Tried to allocate 2 GiB")
    assert cell.classify(exc, "setup") == "oom"
    assert cell.classify(models.ModelBuildError("building x failed: KeyError"), "setup") == "build_error"


def test_user_model_builds_with_its_options():
    import torch

    name, opts = models.parse_ref("examples/user_model.py:build:width=24,depth=2")
    built = models.build(name, 3, opts)
    out = built.module(*built.inputs)
    assert out.shape == (3, 10) and built.inputs[0].shape == (3, 24)
    loss = built.loss(out, built.target)
    loss.backward()
    assert math.isfinite(loss.item()) and all(p.grad is not None for p in built.module.parameters())
    assert isinstance(built.module, torch.nn.Module)


def test_check_names_unknown_user_functions_with_the_closest():
    found = check.check(["examples/user_model.py:buld", USER])
    assert found["unknown"] == ["model 'examples/user_model.py:buld': examples/user_model.py has no function "
                                "'buld'; closest: build"]


def test_check_names_unknown_timm_models_with_the_closest(monkeypatch):
    # a stand-in timm module (the CPU build of torch here has no torchvision, which timm needs);
    # the real timm is checked by test_timm_cells_collect_on_the_cpu
    fake = types.SimpleNamespace(__version__="0-test", list_models=lambda: ["resnet10t", "resnet50", "convnext_tiny"])
    monkeypatch.setitem(sys.modules, "timm", fake)
    monkeypatch.setattr(check.importlib.util, "find_spec", lambda name: object())
    found = check.check(["timm:resnet_10t", "timm:convnext_tiny.fb_in1k"])
    assert found["unknown"] == ["model 'timm:resnet_10t': timm 0-test has no model 'resnet_10t'; closest: resnet10t, resnet50"]


def test_check_in_refuses_unknown_names_before_any_cell(tmp_path, capsys):
    rc = collector_main(["--preset", "smoke", "--models", "examples/user_model.py:buld", "--out", str(tmp_path),
                         "--phases", "infer", "--modes", "default"])
    assert rc == 2
    assert "has no function 'buld'; closest: build" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing was written


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed")
@pytest.mark.parametrize("ref, names", [
    (TINY_BERT, ["input_ids", "labels"]),
    ("hf:T5ForConditionalGeneration:num_layers=1,num_decoder_layers=1,d_model=32,d_ff=64,num_heads=2,d_kv=16,"
     "vocab_size=100,seq_len=8", ["input_ids", "decoder_input_ids", "labels"]),
    ("hf:ViTForImageClassification:num_hidden_layers=1,hidden_size=32,intermediate_size=64,num_attention_heads=2,"
     "image_size=32,patch_size=8", ["pixel_values", "labels"]),
    ("hf:ElectraForQuestionAnswering:num_hidden_layers=1,hidden_size=32,intermediate_size=64,num_attention_heads=2,"
     "embedding_size=32,seq_len=16", ["input_ids", "start_positions", "end_positions"]),
    ("hf:BertModel:num_hidden_layers=1,hidden_size=32,intermediate_size=64,num_attention_heads=2,seq_len=16",
     ["input_ids"]),
])
def test_hf_models_build_with_their_inputs_labels_and_loss(ref, names):
    name, opts = models.parse_ref(ref)
    built = models.build(name, 2, opts)
    assert built.module.names == tuple(names)
    out = built.module(*built.inputs)
    loss = built.loss(out, built.target)
    assert loss.ndim == 0 and math.isfinite(loss.item())
    loss.backward()
    # dropout is off: two calls give the same output (eager and compiled are compared)
    built.module.train()
    a, b = built.module(*built.inputs), built.module(*built.inputs)
    assert all((x == y).all() for x, y in zip(a, b))


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed")
def test_hf_unknown_classes_and_config_fields_name_the_valid_ones():
    found = check.check(["hf:BertForMaskLM", "hf:BertModel:hidden_sise=3", TINY_BERT])
    assert found["missing"] == {}
    assert len(found["unknown"]) == 2
    assert "no model class 'BertForMaskLM'; closest: BertForMaskedLM" in found["unknown"][0]
    assert "BertConfig has no field 'hidden_sise'" in found["unknown"][1]


@pytest.mark.compile
@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed")
def test_hf_and_user_cells_collect_on_the_cpu(tmp_path):
    """A real collect with inductor: ok rows with speedups for a tiny BERT and the user's model, and a
    build_error row for the user function that raises."""
    rc = collector_main(["--preset", "smoke", "--models", f"{TINY_BERT},{USER},examples/user_model.py:broken",
                         "--phases", "infer", "--modes", "default", "--batch-sizes", "2", "--processes", "1",
                         "--warm-compile", "0", "--blocks", "2", "--run-id", "src", "--out", str(tmp_path)])
    assert rc == 0
    import pyarrow.parquet as pq

    rows = {r["model"]: r for f in (tmp_path / "src" / "cells").glob("*.parquet")
            for r in pq.read_table(f).to_pylist()}
    bert = next(r for m, r in rows.items() if m.startswith("hf:BertForMaskedLM"))
    assert bert["status"] == "ok" and bert["compiled_step_ms"] and bert["eager_step_ms"]
    assert rows[USER]["status"] == "ok" and rows[USER]["compiled_step_ms"]
    assert rows["examples/user_model.py:broken"]["status"] == "build_error"
    assert "examples/user_model.py:broken" in rows["examples/user_model.py:broken"]["error"]
    # what built the model and what Dynamo captured, recorded by the real path (schema v11)
    import transformers

    assert json.loads(bert["packages_json"])["transformers"] == transformers.__version__
    assert json.loads(bert["inputs_json"])["seq_len"] == 16
    assert json.loads(bert["inputs_json"])["attention_mask"] == "none"
    assert len(json.loads(rows[USER]["packages_json"])["user_file"]) == 16
    ops = json.loads(bert["graph_ops_json"])
    assert ops["graphs"] >= 1 and ops["ops"].get("torch.nn.functional.linear", 0) >= 4
    env = json.loads((tmp_path / "src" / "run.json").read_text())["environment"]
    assert env["model_packages"]["transformers"] == transformers.__version__


def _timm_python():
    """An interpreter here that imports timm (the CPU build 2.13.0 has no torchvision: .ci/run builds
    .venv-torch-2.14.1 with torchvision and timm for this test)."""
    for cand in (os.environ.get("TCB_TIMM_PYTHON"), str(ROOT / ".venv-torch-2.14.1" / "bin" / "python"), sys.executable):
        if cand and os.path.exists(cand) and subprocess.run([cand, "-c", "import timm"], capture_output=True).returncode == 0:
            return cand
    return None


def _collect_sourced(tmp_path, ref: str, batch: int, package: str = "timm") -> list[dict]:
    """A real CPU collect (Inductor) of `ref`, inference and training, in an interpreter that imports
    timm and torchvision; its rows, each checked ok."""
    python = _timm_python()
    if python is None:
        if os.environ.get("TCB_REQUIRE_TIMM") == "1":
            pytest.fail(f"no interpreter here imports {package} (TCB_REQUIRE_TIMM=1)")
        pytest.skip(f"no interpreter here imports {package} (make collect-deps TORCH=2.14.1 installs one)")
    proc = subprocess.run([python, "-m", "collector", "--preset", "smoke", "--models", ref,
                           "--phases", "infer,train", "--modes", "default", "--batch-sizes", str(batch), "--processes", "1",
                           "--warm-compile", "0", "--blocks", "2", "--run-id", "t", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import pyarrow.parquet as pq

    rows = [r for f in (tmp_path / "t" / "cells").glob("*.parquet") for r in pq.read_table(f).to_pylist()]
    assert sorted(r["phase"] for r in rows) == ["infer", "train"]
    assert all(r["status"] == "ok" and r["compiled_step_ms"] and r["model"] == ref
               for r in rows), [(r["model"], r["status"], r["error"]) for r in rows]
    return rows


@pytest.mark.compile
def test_timm_cells_collect_on_the_cpu(tmp_path):
    _collect_sourced(tmp_path, "timm:resnet10t:image_size=32", 2)


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed")
def test_roberta_inputs_stay_inside_its_position_embeddings():
    """RoBERTa's positions start after its padding index: 512 tokens overran its 512 embeddings on the
    H200 (a device-side assert); the source caps the family at 510 by default."""
    name, opts = models.parse_ref("hf:RobertaForQuestionAnswering:num_hidden_layers=1,hidden_size=32,"
                                  "intermediate_size=64,num_attention_heads=2")
    built = models.build(name, 1, opts)
    assert built.inputs[0].shape == (1, 510)
    out = built.module(*built.inputs)  # on the CPU an index past the table raises here
    assert out[0].ndim == 0


def test_a_user_file_outside_the_project_is_named_by_its_absolute_path(tmp_path, monkeypatch):
    """Cell processes run from the project root: a file found only from the working directory keeps
    working there; one inside the project keeps its relative name (the same cell key on every machine)."""
    (tmp_path / "mine.py").write_text((ROOT / "examples" / "user_model.py").read_text())
    monkeypatch.chdir(tmp_path)
    name, _ = models.parse_ref("mine.py:build:width=8")
    assert name == f"{tmp_path.resolve()}/mine.py:build"
    monkeypatch.chdir(ROOT / "docs")  # a project file by its project-relative path, from anywhere
    assert models.parse_ref(USER)[0] == USER
    monkeypatch.chdir(ROOT)  # and the cell process finds both
    assert models.build(name, 2, {"width": 8}).inputs[0].shape == (2, 8)


def test_a_model_file_that_hangs_on_import_stops_the_name_check_at_the_cell_limit(tmp_path, capsys):
    """The name check imports a user's module in the measuring interpreter; a module that never returns
    from its import once hung the collector forever. TIMEOUT= now bounds it: exit 2, the module named,
    nothing written."""
    import time

    hang = tmp_path / "hangs.py"
    hang.write_text("import time\ntime.sleep(3600)\n\ndef build(batch_size):\n    pass\n")
    t0 = time.monotonic()
    rc = collector_main(["--preset", "smoke", "--models", f"{hang}:build", "--timeout", "3", "--out", str(tmp_path / "o"),
                         "--phases", "infer", "--modes", "default"])
    assert rc == 2 and time.monotonic() - t0 < 120
    err = capsys.readouterr().err
    assert "did not finish in 3 s (the cell limit, TIMEOUT=)" in err and f"{hang}:build" in err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").rglob("*.parquet"))


@pytest.mark.parametrize("ref, says", [
    ("hf:BertForMaskedLM:__class__=x", "option '__class__' names no setting"),
])
def test_an_option_name_that_is_no_setting_is_one_clear_error(ref, says):
    with pytest.raises(sources.SourceError, match=says):
        sources.parse(ref)


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed")
def test_an_auto_class_is_named_a_factory_not_its_own_closest_match():
    found = check.check(["hf:AutoModel"])
    (text,) = found["unknown"]
    assert "AutoModel is a factory, not a model class" in text and "closest: AutoModel" not in text


def test_cell_files_of_path_references_start_with_a_letter_or_digit():
    """A model file outside the project (../m.py, /abs/m.py) once gave cell files named `..-...` (hidden by
    ls) or `-...` (read as an option by ls and rm)."""
    from collector.record.contract import cell_id_of

    for ref in ("../outside/m.py:build", "/tmp/abs/m.py:build", "-dash.py:build"):
        cid = cell_id_of(ref, "infer", "float32", 8, "default", "model")
        assert cid[0].isalnum(), cid
    assert cell_id_of("mlp", "infer", "float32", 8, "default", "model") == "mlp__infer__float32__bs8__default__model"


def test_a_collect_that_names_its_models_gets_a_run_of_its_own():
    """MODELS= without RUN= once landed in the preset's run (smoke-cpu-torch...), whose verdict then pooled a
    user's model with the preset's under the preset's description: now a run named by the models."""
    import types

    from collector.commands.executors import base_run_id

    env = {"device": "cpu", "gpu_name": None, "torch_version": "2.13.0+cpu"}
    matrix = types.SimpleNamespace(preset="smoke")
    plain = base_run_id(types.SimpleNamespace(overrides={}), matrix, env)
    assert plain == "smoke-cpu-torch2.13.0-cpu"
    bert = base_run_id(types.SimpleNamespace(overrides={"models": ["hf:BertForMaskedLM:num_hidden_layers=2"]}), matrix, env)
    other = base_run_id(types.SimpleNamespace(overrides={"models": ["hf:BertForMaskedLM:num_hidden_layers=4"]}), matrix, env)
    assert bert.startswith("hf-bertformaskedlm-") and bert.endswith("-cpu-torch2.13.0-cpu") and bert != other
    user = base_run_id(types.SimpleNamespace(overrides={"models": ["../elsewhere/my model.py:build"]}), matrix, env)
    from collector.host.store import check_run_id

    assert check_run_id(user) and check_run_id(bert) and user[0].isalnum()


def test_a_timm_name_is_checked_where_timm_does_not_import(monkeypatch, tmp_path, capsys):
    """Where timm does not import (no timm here: the CPU build 2.13.0), `MODELS=timm:resnet_10t` wrote
    4 skipped rows and exited 0: the shipped list (timm_models.txt) catches it before any cell, with the
    closest names; a known name still gets its skipped rows and the note saying what to do."""
    from collector.models import timm_names

    monkeypatch.setattr(check.importlib.util, "find_spec", lambda name: None if name == "timm" else object())
    found = check.check(["timm:resnet_10t", "timm:resnet10t", "timm:deit_tiny_patch16_224.fb_in1k"])
    version, names = timm_names.shipped()
    assert version == "1.0.31" and len(names) > 1000 and "resnet10t" in names
    assert found["unknown"] == [f"model 'timm:resnet_10t': timm {version} (the list shipped with the project: timm "
                                "does not import in this interpreter) has no model 'resnet_10t'; closest: resnet10t, "
                                "resnet50t, resnet14t, resnet101, resnetv2_50t"]
    assert found["missing"] == {"timm": ["timm:resnet10t", "timm:deit_tiny_patch16_224.fb_in1k"]}
    # timm installed but failing to import (no torchvision that pairs with this torch): the same list
    monkeypatch.setattr(check.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setitem(sys.modules, "timm", None)  # `import timm` raises ImportError
    found = check.check(["timm:resnet_10t", "timm:resnet10t"])
    assert len(found["unknown"]) == 1 and "closest: resnet10t" in found["unknown"][0]
    assert list(found["missing"]) == ["timm (ModuleNotFoundError: import of timm halted; None in sys.modules)"]


def test_the_shipped_timm_and_torchvision_lists_are_the_pinned_packages_lists():
    """In an interpreter where the pinned timm and torchvision import (.venv-torch-2.14.1 here and in CI),
    the shipped lists are their list_models()."""
    from collector.models import timm_names

    python = _timm_python()
    if python is None:
        if os.environ.get("TCB_REQUIRE_TIMM") == "1":
            pytest.fail("no interpreter here imports timm (TCB_REQUIRE_TIMM=1)")
        pytest.skip("no interpreter here imports timm and torchvision")
    got = subprocess.run([python, "-c", "import json, timm, torchvision, torchvision.models as m; print(json.dumps("
                          "[timm.__version__, timm.list_models(), torchvision.__version__, m.list_models()]))"],
                         capture_output=True, text=True, timeout=300)
    timm_version, timm_list, tv_version, tv_list = json.loads(got.stdout.strip().splitlines()[-1])
    assert timm_names.shipped("timm") == (timm_version, timm_list)
    assert timm_names.shipped("torchvision")[1] == tv_list  # the build tag (+cu130) aside


def test_make_collect_with_a_misspelled_timm_name_stops_before_any_cell_without_timm(tmp_path):
    """The newcomer's path in the default venv (no timm): exit 2, the closest names, nothing written."""
    import subprocess

    if importlib.util.find_spec("timm") is not None:
        pytest.skip("timm imports here: test_check_names_unknown_timm_models_with_the_closest covers it")
    proc = subprocess.run([sys.executable, "-m", "collector", "--preset", "smoke", "--models", "timm:resnet_10t",
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "has no model 'resnet_10t'; closest: resnet10t" in proc.stderr, proc.stderr
    assert not any(tmp_path.iterdir())


def _tiny(name: str) -> dict:
    """A tiny variant of an hf: model: one layer of each stack (two in a decoder beside an encoder, so
    that a count taken from the wrong stack fails), a 1,024-token vocabulary where the published one is
    over 100,000, four experts; the published widths kept."""
    from collector.models import hf_source
    from collector.record.contract import REDUCE_KEYS

    base = hf_source.make_config(hf_source.model_class(name), {}, name)
    opts = {k: 1 for k in REDUCE_KEYS if isinstance(getattr(base, k, None), int)}
    if "decoder_layers" in opts and "encoder_layers" in opts:
        opts["decoder_layers"] = 2
    if getattr(base, "vocab_size", 0) > 100_000:
        opts["vocab_size"] = 1024
    if getattr(base, "num_local_experts", None):
        opts.update(num_local_experts=4, num_experts_per_tok=2)
    if getattr(base, "layer_types", None):
        opts["layer_types"] = base.layer_types[:1]
    return {**opts, "seq_len": 16}


@pytest.mark.slow  # 55 models built and stepped: about 80 s on 2 cores
@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed")
def test_every_model_of_the_huggingface_suite_builds_and_steps_as_a_tiny_variant():
    """Every model of PyTorch's Hugging Face list, and every config shipped by name (hub ids included),
    builds with its inputs and labels and runs one training step and one inference step (eval mode, no
    grad: the path that builds a key/value cache) on the CPU. BlenderbotForCausalLM failed its inference
    on the H100 under both torches (its cache sized by the encoder's 2 layers, its decoder has 24)."""
    import torch

    from collector.models import hf_configs
    from collector.plan import matrix as mx

    names = sorted({c.model.removeprefix("hf:") for c in mx.build_matrix("huggingface").cells})
    assert len(names) >= 50 and set(hf_configs.NAMED) <= set(names)
    failed = {}
    for name in names:
        try:
            built = models.build(f"hf:{name}", 2, _tiny(name))
            loss = built.loss(built.module(*built.inputs), built.target)
            loss.backward()
            assert math.isfinite(loss.item())
            built.module.eval()
            with torch.no_grad():
                built.module(*built.inputs)
        except Exception as exc:  # noqa: BLE001 - every model's failure named at once
            failed[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
    assert failed == {}


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed")
def test_a_model_too_large_for_the_device_is_skipped_with_the_memory_it_needs(monkeypatch):
    """Mistral-7B's fp32 weights (29 GiB) on a host of 16 GiB: a skipped row naming what it needs and
    how to run it reduced; counted on the meta device, so nothing is allocated."""
    import torch

    from collector.models.base import ModelSkipped

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(os, "sysconf", lambda key: {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 4 * 2**20}[key])
    with pytest.raises(ModelSkipped, match=r"mistralai/Mistral-7B-Instruct-v0.3: 7.2B parameters need 27 GiB for fp32 "
                                           r"weights alone, this host has 16 GiB: run it reduced"):
        models.build("hf:mistralai/Mistral-7B-Instruct-v0.3", 8, {})
    built = models.build("hf:mistralai/Mistral-7B-Instruct-v0.3", 1, _tiny("mistralai/Mistral-7B-Instruct-v0.3"))
    assert built.settings["seq_len"] == 16


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed")
def test_a_model_shipped_by_name_is_checked_and_closest_names_include_them():
    found = check.check(["hf:Qwen/Qwen3-0.6B", "hf:Qwen/Qwen3-0.7B", "hf:meta-llama/Llama-3.2-1B:num_hidden_layers=2"])
    assert found["missing"] == {} and len(found["unknown"]) == 1
    assert "closest: Qwen/Qwen3-0.6B" in found["unknown"][0]


TV_FAMILIES = {  # one model of each kind the tv: source builds, with a tiny input; raft: skipped
    "resnet18": {"image_size": 64}, "googlenet": {"image_size": 64}, "vit_b_16": {},
    "fcn_resnet50": {"image_size": 64}, "lraspp_mobilenet_v3_large": {"image_size": 64},
    "fasterrcnn_mobilenet_v3_large_320_fpn": {"image_size": 128, "min_size": 128, "max_size": 128},
    "maskrcnn_resnet50_fpn": {"image_size": 128, "min_size": 128, "max_size": 128},
    "ssdlite320_mobilenet_v3_large": {}, "r3d_18": {"image_size": 32, "frames": 4},
}
TV_STEP = """
import json, sys, torch
from collector import models
from collector.models.base import ModelSkipped
got = {}
for name, opts in json.loads(sys.argv[1]).items():
    try:
        built = models.build("tv:" + name, 2, opts)
    except ModelSkipped as exc:
        got[name] = "skipped: " + str(exc)
        continue
    built.module.train()
    loss = built.loss(built.module(*built.inputs), built.target)
    loss.backward()
    built.module.eval()
    with torch.no_grad():
        out = built.module(*built.inputs)
    got[name] = [float(loss), [tuple(o.shape) for o in (out if isinstance(out, tuple) else (out,))]]
print(json.dumps(got))
"""


@pytest.mark.slow  # nine torchvision models stepped on the CPU under torch 2.14.1: about 2 min on 2 cores
def test_every_torchvision_family_builds_and_steps_as_a_tiny_variant():
    """Classification (GoogLeNet's auxiliary logits in training), segmentation (FCN and
    LR-ASPP, without auxiliary heads: torchvision's default), detection (Faster and Mask R-CNN with boxes, labels and masks, SSDlite) and
    video: a training step with the references' losses and an inference step each; RAFT is skipped
    with the reason. Needs an interpreter with torchvision (.venv-torch-2.14.1 here and in CI)."""
    python = _timm_python()
    if python is None:
        if os.environ.get("TCB_REQUIRE_TIMM") == "1":
            pytest.fail("no interpreter here imports torchvision (TCB_REQUIRE_TIMM=1)")
        pytest.skip("no interpreter here imports torchvision (make collect-deps TORCH=2.14.1 installs one)")
    families = {**TV_FAMILIES, "raft_small": {}}
    proc = subprocess.run([python, "-c", TV_STEP, json.dumps(families)], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got.pop("raft_small").startswith("skipped: tv:raft_small is a torchvision optical flow model")
    assert set(got) == set(TV_FAMILIES) and all(math.isfinite(v[0]) for v in got.values()), got
    assert got["resnet18"][1] == [[2, 1000]] and got["r3d_18"][1] == [[2, 400]]
    assert got["fcn_resnet50"][1] == got["lraspp_mobilenet_v3_large"][1] == [[2, 21, 64, 64]]  # no aux head by default
    assert got["maskrcnn_resnet50_fpn"][1][0][1] == 4 and len(got["maskrcnn_resnet50_fpn"][1]) == 2  # boxes, scores


@pytest.mark.compile
def test_torchvision_cells_collect_on_the_cpu(tmp_path):
    """The real path: a tv: model through the collector with Inductor, inference and training."""
    rows = _collect_sourced(tmp_path, "tv:squeezenet1_1:image_size=64", 8, "torchvision")
    assert json.loads(rows[0]["packages_json"])["torchvision"]


def test_a_torchvision_name_is_checked_where_torchvision_does_not_import(monkeypatch):
    from collector.models import timm_names

    monkeypatch.setattr(check.importlib.util, "find_spec", lambda name: None if name == "torchvision" else object())
    found = check.check(["tv:resnet_50", "tv:resnet50"])
    version, names = timm_names.shipped("torchvision")
    assert len(names) > 100 and "maskrcnn_resnet50_fpn" in names
    assert found["unknown"] == [f"model 'tv:resnet_50': torchvision {version} (the list shipped with the project: "
                                "torchvision does not import in this interpreter) has no model 'resnet_50'; closest: "
                                "resnet50, resnet152, resnet101, fcn_resnet50, resnet34"]
    assert found["missing"] == {"torchvision": ["tv:resnet50"]}


def test_the_model_names_are_checked_in_every_interpreter_at_once_and_an_unknown_one_names_its_interpreter(tmp_path):
    """check_all: two stand-in interpreters that each wait for the other to have started (run one after
    the other, the first gives up and the check fails); the second's unknown name is the error."""
    from collector.models.check import check_all

    def interpreter(name: str, other: str, unknown: list[str]) -> str:
        path = tmp_path / name
        path.write_text(f"#!/bin/sh\ntouch {tmp_path}/{name}.started\n"
                        f"for i in $(seq 100); do [ -f {tmp_path}/{other}.started ] && break; sleep 0.1; done\n"
                        f"[ -f {tmp_path}/{other}.started ] || {{ echo 'checked alone' >&2; exit 1; }}\n"
                        f"echo '{json.dumps({'missing': {}, 'unknown': unknown})}'\n")
        path.chmod(0o755)
        return str(path)

    a = interpreter("a", "b", [])
    b = interpreter("b", "a", ["model hf:BertModle: transformers has no class BertModle; closest: BertModel"])
    with pytest.raises(ValueError, match=r"checked with .*/b:\n  model hf:BertModle: .*closest: BertModel"):
        check_all([a, b], ["hf:BertModle", "mlp"], timeout_s=60)
    check_all([a, interpreter("c", "a", [])], ["hf:BertModel"], timeout_s=60)
