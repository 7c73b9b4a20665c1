import pytest

from collector.plan import matrix as mx
from collector.__main__ import main as collector_main
from conftest import ROOT


def test_smoke_preset_expands_to_known_cells():
    m = mx.build_matrix("smoke")
    ids = [c.cell_id for c in m.cells]
    assert len(ids) == 8 and len(set(ids)) == 8
    assert "mlp__infer__float32__bs8__default__model" in ids
    assert "mlp__train__float32__bs8__reduce-overhead__model" in ids  # a second eager baseline per model
    assert all(c.model in ("mlp", "gpt:layers=1,seq_len=64,vocab=4096") for c in m.cells)


def test_default_preset_includes_union_without_duplicates():
    m = mx.build_matrix("default")
    assert len(m.cells) == len(set(m.cells))
    base = [c for c in m.cells if c.batch_size == 64 and c.model == "resnet18" and c.dtype == "amp_bf16"
            and c.phase == "train" and c.compile_scope == "model"]
    assert {c.mode for c in base} == {"default", "reduce-overhead"}
    assert {c.batch_size for c in m.cells if c.model == "gpt"} == {1, 8, 32, 128}
    assert {c.compile_scope for c in m.cells if c.model == "resnet18" and c.phase == "train"} == {"model", "step"}
    # compile scope is normalised to "model" where it cannot matter (inference)
    assert all(c.compile_scope == "model" for c in m.cells if c.phase == "infer")


def test_overrides_replace_axes_everywhere():
    m = mx.build_matrix("default", {"models": ["mlp"], "modes": ["default"]})
    assert {c.model for c in m.cells} == {"mlp"}
    assert {c.mode for c in m.cells} == {"default"}


def test_model_options_are_validated_and_canonical():
    m = mx.build_matrix("smoke", {"models": ["gpt:seq_len=64,layers=1,vocab=4096"]})
    assert {c.model for c in m.cells} == {"gpt:layers=1,seq_len=64,vocab=4096"}
    with pytest.raises(mx.MatrixError, match="valid options .*layers=12"):
        mx.build_matrix("smoke", {"models": ["gpt:depth=3"]})
    with pytest.raises(mx.MatrixError, match="must be positive"):
        mx.build_matrix("smoke", {"models": ["gpt:layers=0"]})


@pytest.mark.parametrize("overrides, message", [
    ({"models": ["nope"]}, "unknown model 'nope'; valid models: mlp, gpt, moe"),
    ({"modes": ["fastest"]}, "unknown mode 'fastest'; valid modes: eager, default"),
    ({"dtypes": ["fp8"]}, "unknown dtype 'fp8'; valid dtypes: float32"),
    ({"phases": ["eval"]}, "unknown phase 'eval'"),
    ({"batch_sizes": [0]}, "batch size must be an integer from 1 to 65536"),
    ({"batch_sizes": [10**9]}, "batch size must be an integer"),
    ({"models": []}, "models must be a non-empty list"),
    ({"blocks": 0}, "blocks must be an integer from 1"),
    ({"colour": "red"}, "unknown key\\(s\\) colour; valid keys:"),
])
def test_bad_input_is_one_clear_error(overrides, message):
    with pytest.raises(mx.MatrixError, match=message):
        mx.build_matrix("smoke", overrides)


def test_malformed_and_unknown_presets(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("models = [mlp\n")
    with pytest.raises(mx.MatrixError, match="malformed TOML"):
        mx.build_matrix(str(bad))
    with pytest.raises(mx.MatrixError, match="valid presets: aa, builtin, default, huggingface, huggingface-classic, quick, repeat, screen-cpu, shapes, smoke, suites, timm, torchvision"):
        mx.build_matrix("huge")
    unknown = tmp_path / "u.toml"
    unknown.write_text('models=["mlp"]\nphases=["infer"]\nmodes=["default"]\ndtypes=["float32"]\n'
                       'compile_scopes=["model"]\nbogus=1\n')
    with pytest.raises(mx.MatrixError, match="unknown key\\(s\\) bogus"):
        mx.build_matrix(str(unknown))


def test_cli_bad_input_exits_2_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "runs"
    code = collector_main(["--preset", "smoke", "--models", "mlp,nope", "--out", str(out)])
    assert code == 2
    assert "unknown model 'nope'" in capsys.readouterr().err
    assert not out.exists()
    assert collector_main(["--preset", "smoke", "--run-id", "../escape", "--out", str(out)]) == 2
    assert collector_main(["--preset", "smoke", "--run-id", "bad\x1bname", "--out", str(out)]) == 2
    assert not out.exists()


def test_inference_only_mode_makes_no_training_cells():
    m = mx.build_matrix("smoke", {"models": ["mlp"], "modes": ["default", "aot-inductor"], "phases": ["infer", "train"]})
    assert {(c.phase, c.mode) for c in m.cells} == {("infer", "default"), ("train", "default"),
                                                     ("infer", "aot-inductor")}
    with pytest.raises(mx.MatrixError, match="the matrix is empty.*aot-inductor makes inference cells only"):
        mx.build_matrix("smoke", {"models": ["mlp"], "modes": ["aot-inductor"], "phases": ["train"]})


def test_dynamic_axis_keeps_old_cell_ids_and_names_its_variants():
    m = mx.build_matrix("smoke", {"models": ["mlp"], "phases": ["infer"], "modes": ["eager", "default"],
                                  "dynamic": ["auto", "true", "false"]})
    ids = [c.cell_id for c in m.cells]
    assert ids == ["mlp__infer__float32__bs8__eager__model", "mlp__infer__float32__bs8__default__model",
                   "mlp__infer__float32__bs8__default__model__dyn-true",
                   "mlp__infer__float32__bs8__default__model__dyn-false"]  # eager: no dynamic variants
    assert "default dynamic=true" in m.cells[2].label()
    with pytest.raises(mx.MatrixError, match="valid dynamic: auto, true, false"):
        mx.build_matrix("smoke", {"dynamic": ["sometimes"]})


def test_dry_run_plans_a_gpu_run_on_a_machine_without_one(tmp_path, capsys):
    """`--dry-run` with an explicit preset probes nothing (the `default` preset asks for CUDA),
    and with the run folder it marks what is saved, failed cells by their status."""
    from dataclasses import asdict

    from collector.record.schema import write_row

    out = tmp_path / "runs"
    cells = out / "default-h200" / "cells"
    cells.mkdir(parents=True)
    by_id = {c.cell_id: c for c in mx.build_matrix("default").cells}
    for name, status in (("gnn__infer__amp_bf16__bs16__default__model", "ok"),
                         ("resnet50__infer__amp_bf16__bs32__aot-inductor__model", "crashed")):
        write_row({"run_id": "default-h200", "cell_id": name, **asdict(by_id[name]), "status": status},
                  cells / f"{name}.parquet")
    assert collector_main(["--preset", "default", "--run-id", "default-h200", "--out", str(out), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "gnn__infer__amp_bf16__bs16__default__model  [done]" in lines
    assert "resnet50__infer__amp_bf16__bs32__aot-inductor__model  [crashed]" in lines
    assert "gpt__infer__amp_bf16__bs8__default__model" in lines  # not saved: listed bare
    assert lines[-1] == "65 cells; run default-h200: 2 saved, 63 to measure"


def test_modes_come_from_their_registry_one_file_each():
    """A mode is one file in collector/modes/; the matrix's lists are derived from the specs."""
    from pathlib import Path

    from collector import modes

    files = sorted(p.stem for p in (Path(modes.__file__).parent).glob("*.py") if p.stem not in ("__init__", "base"))
    assert sorted(m.replace("-", "_") for m in mx.MODES) == files
    assert mx.CUDAGRAPH_MODES == ("reduce-overhead", "max-autotune")
    assert mx.INFER_ONLY_MODES == ("aot-inductor",)
    assert modes.spec("max-autotune-no-cudagraphs").min_warmup_calls == 2
    assert modes.spec("reduce-overhead").min_warmup_calls == 3
    assert not modes.spec("eager").compiles and not modes.spec("aot-inductor").dynamic_axis
    m = mx.build_matrix("smoke", {"models": ["mlp"], "modes": ["aot-inductor", "eager"], "dynamic": ["true"]})
    assert {(c.phase, c.mode, c.dynamic) for c in m.cells} == {("infer", "aot-inductor", "auto"),
                                                                ("infer", "eager", "auto"), ("train", "eager", "auto")}


def test_cells_narrows_the_matrix_by_id_pattern_and_names_a_pattern_that_matches_nothing():
    m = mx.build_matrix("aa", {})
    got = mx.select_cells(m, ["gpt__infer__amp_bf16__bs128__*", "*float32*"])
    assert [c.cell_id for c in got.cells] == [c.cell_id for c in m.cells
                                              if "bs128" in c.cell_id and "gpt" in c.cell_id or "float32" in c.cell_id]
    assert len(got.cells) == 5 and got.protocol == m.protocol
    with pytest.raises(mx.MatrixError, match=r"matches nope\*; its cells: mlp__infer"):
        mx.select_cells(m, ["gpt*", "nope*"])
