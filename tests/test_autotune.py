"""The autotuned launch configurations read from a cell's cache folder (collector/host/autotune.py).

The folder is laid out as Inductor and Triton lay it out (inductor/<2 chars>/<hash>.py beside
<key>.best_config; triton/<triton hash>/<kernel>.cubin|json); the real read happens on a GPU, where
Inductor times candidates (docs/diagnostics.md, "The autotune record")."""
from __future__ import annotations

import json

from collector.host import autotune

from collector.record import contract, schema


def _kernel(root, bucket, name, config, triton_hash, other_py=None):
    d = root / "inductor" / bucket
    d.mkdir(parents=True, exist_ok=True)
    (d / f"c{bucket}{name[-3:]}.py").write_text(f"import triton\n\n@triton.jit\ndef {name}(in_ptr0, xnumel):\n    pass\n")
    if other_py:
        (d / f"c{bucket}zz.py").write_text(f"def {other_py}(x):\n    pass\n")
    (d / f"k{name[-3:]}.best_config").write_text(json.dumps(
        {**config, "configs_hash": "abc", "found_by_coordesc": False, "time_taken_ms": 12,
         "triton_cache_hash": triton_hash}))
    if triton_hash:
        t = root / "triton" / triton_hash
        t.mkdir(parents=True, exist_ok=True)
        for ext in (".cubin", ".json", ".ptx"):
            (t / f"{name}{ext}").write_text("x")
        (t / f"__grp__{name}.json").write_text("{}")


def test_choices_name_each_kernel_and_its_configuration(tmp_path):
    _kernel(tmp_path, "ab", "triton_poi_fused__to_copy_8", {"XBLOCK": 64, "YBLOCK": 32, "num_warps": 4,
                                                            "num_stages": 1}, "h1")
    # a bucket holding two kernel sources: the name comes from the Triton artefacts
    _kernel(tmp_path, "cd", "triton_red_fused_sum_3", {"XBLOCK": 1, "R0_BLOCK": 2048, "num_warps": 16,
                                                      "num_stages": 1}, "h2", other_py="triton_poi_fused_add_4")
    got = autotune.choices(tmp_path)
    assert got == {"count": 2, "unnamed": 0, "kernels": {
        "triton_poi_fused__to_copy_8": "XBLOCK=64 YBLOCK=32 num_warps=4 num_stages=1",
        "triton_red_fused_sum_3": "R0_BLOCK=2048 XBLOCK=1 num_warps=16 num_stages=1"}}


def test_a_kernel_whose_name_cannot_be_told_is_counted_not_guessed(tmp_path):
    # no Triton artefacts and two kernel sources beside the file: unnamed
    _kernel(tmp_path, "ef", "triton_poi_fused_mul_1", {"XBLOCK": 128, "num_warps": 4, "num_stages": 1}, None,
            other_py="triton_poi_fused_add_2")
    # one source beside it and no Triton artefacts: named from the source
    _kernel(tmp_path, "gh", "triton_poi_fused_cat_5", {"XBLOCK": 256, "num_warps": 8, "num_stages": 1}, None)
    (tmp_path / "inductor" / "ij").mkdir()
    (tmp_path / "inductor" / "ij" / "broken.best_config").write_text("{not json")
    got = autotune.choices(tmp_path)
    assert got["count"] == 3 and got["unnamed"] == 2
    assert got["kernels"] == {"triton_poi_fused_cat_5": "XBLOCK=256 num_warps=8 num_stages=1"}


def test_one_name_in_two_graphs_is_kept_twice(tmp_path):
    _kernel(tmp_path, "aa", "triton_poi_fused_gelu_10", {"XBLOCK": 64, "num_warps": 4, "num_stages": 1}, "h1")
    _kernel(tmp_path, "bb", "triton_poi_fused_gelu_10", {"XBLOCK": 512, "num_warps": 8, "num_stages": 1}, "h2")
    got = autotune.choices(tmp_path)["kernels"]
    assert got == {"triton_poi_fused_gelu_10": "XBLOCK=64 num_warps=4 num_stages=1",
                   "triton_poi_fused_gelu_10#2": "XBLOCK=512 num_warps=8 num_stages=1"}


def test_no_timed_candidates_is_null_not_an_empty_record(tmp_path):
    assert autotune.choices(tmp_path) is None  # no inductor folder (eager, a crash before compiling)
    (tmp_path / "inductor" / "ab").mkdir(parents=True)
    (tmp_path / "inductor" / "ab" / "cab.py").write_text("def triton_poi_fused_add_0(x):\n    pass\n")
    assert autotune.choices(tmp_path) is None  # kernels, none with candidates (the CPU's C++ kernels)


def test_differences_between_two_runs_by_kernel_name():
    a = {"kernels": {"k1": "XBLOCK=64 num_warps=4", "k2": "XBLOCK=32 num_warps=4", "k3": "XBLOCK=8 num_warps=2"}}
    b = {"kernels": {"k1": "XBLOCK=64 num_warps=4", "k2": "XBLOCK=128 num_warps=8", "k4": "XBLOCK=8 num_warps=2"}}
    assert contract.autotune_differences(a, b) == [("k2", "XBLOCK=32 num_warps=4", "XBLOCK=128 num_warps=8")]
    assert contract.autotune_differences(None, b) == []
    # a row's value read once for every reader: null, unreadable or kernel-less values are no record
    assert contract.autotune_record(json.dumps(a)) == a
    assert [contract.autotune_record(v) for v in (None, "", "{not json", "[1]", '{"count": 3}')] == [None] * 5


def test_the_row_keeps_the_record_from_schema_8():
    assert "autotune_json" in schema.columns_of(8) and "autotune_json" not in schema.columns_of(7)
    row = schema.make_row({"status": "ok", "autotune_json": json.dumps({"kernels": {}, "count": 0, "unnamed": 0})})
    assert row["schema_version"] == schema.SCHEMA_VERSION >= 8
