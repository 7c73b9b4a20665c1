"""CellResult (collector/record/result.py): what one cell process measured, typed by the row's
columns from the child's first assignment to the host's row."""
import dataclasses
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from collector.host.cell_measure import received
from collector.host.runner import collect
from collector.plan import matrix as mx
from collector.record import schema
from collector.record.result import IDENTITY, CellResult, ResultError
from support.launchers import OkLauncher
ENV = {"device": "cpu", "device_name": "x", "torch_version": "1", "hostname": "h"}


def test_its_fields_are_the_rows_measured_columns_typed_as_the_columns():
    names = [f.name for f in dataclasses.fields(CellResult)]
    assert set(names) | set(IDENTITY) == set(schema.COLUMNS) and not set(names) & set(IDENTITY)
    types = {f.name: f.type for f in dataclasses.fields(CellResult)}
    assert types["eager_step_ms"] == "list[float] | None" and types["kernel_count"] == "int | None"
    assert types["accuracy_ok"] == "bool | None" and types["status"] == "str | None"


def test_a_name_the_row_lacks_or_a_value_of_another_type_is_refused_where_it_is_set():
    r = CellResult()
    with pytest.raises(ResultError, match="'eager_step_mss' is not a measured column"):
        r["eager_step_mss"] = [1.0]
    with pytest.raises(ResultError, match="not a measured column"):
        r.cell_id = "x"  # the host's, never a process's
    with pytest.raises(ResultError, match="kernel_count=1.5: expected a whole number"):
        r.kernel_count = 1.5
    with pytest.raises(ResultError, match="accuracy_ok=1: expected true or false"):
        r.accuracy_ok = 1
    with pytest.raises(ResultError, match="expected a list of numbers"):
        r.compiled_step_ms = ["1.0"]
    r.update({"kernel_count": np.int64(3), "accuracy_ok": np.bool_(True)}, eager_step_ms=(1, np.float32(2.5)))
    assert r.to_json() == {"kernel_count": 3, "accuracy_ok": True, "eager_step_ms": [1.0, 2.5]}
    assert type(r.kernel_count) is int and CellResult.from_json(json.loads(json.dumps(r.to_json()))) == r


def test_a_result_that_breaks_the_contract_is_a_crashed_process_that_names_it():
    """Before, the host dropped every key the row lacked (a misspelt column vanished from the data)."""
    got = received({"status": "ok", "eager_step_ms": [1.0], "compiled_stepms": [0.5], "kernel_count": "7"})
    assert got.status == "crashed" and got.eager_step_ms is None
    assert "'compiled_stepms' is not a measured column" in got.error and "kernel_count='7'" in got.error
    assert received({"status": "ok", "eager_step_ms": [1.0]}).eager_step_ms == [1.0]


def test_the_row_written_holds_what_the_process_said_or_why_not(tmp_path):
    """Through the scheduler to the Parquet file: a good result lands column for column; one with a
    misspelt column is a crashed row naming it, not an ok row missing its samples."""
    m = mx.build_matrix("smoke", {"models": ["mlp"], "phases": ["infer"], "modes": ["default"],
                                  "batch_sizes": [8], "dtypes": ["float32"], "processes": 1})
    good = {"status": "ok", "eager_step_ms": [2.0] * 4, "compiled_step_ms": [1.0] * 4, "kernel_count": 5}
    run = collect(m, ENV, tmp_path, "good", OkLauncher(good), out=io.StringIO())
    row = pq.read_table(next((run / "cells").glob("*.parquet"))).to_pylist()[0]
    assert row["status"] == "ok" and row["compiled_step_ms"] == [1.0] * 4 and row["kernel_count"] == 5
    bad = {**good, "compiled_step_mss": good.pop("compiled_step_ms")}
    run = collect(m, ENV, tmp_path, "bad", OkLauncher(bad), out=io.StringIO())
    row = pq.read_table(next((run / "cells").glob("*.parquet"))).to_pylist()[0]
    assert row["status"] == "crashed" and "'compiled_step_mss' is not a measured column" in row["error"]


def test_the_cell_process_imports_no_pyarrow():
    """pyarrow starts threads when imported; the fork launcher's parent preloads the cell process's
    modules and refuses to fork with other threads alive (CellResult's first version read the
    column types from pyarrow, and the real fork path fell back to exec: tests/test_zygote.py)."""
    code = "import sys, collector.child.cell, collector.record.result; print('pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
