"""Static shards (SHARD=k/N) and their merge into one run the report reads."""
import io
import json
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from support.launchers import OkLauncher
from analysis.data.load import discover_runs, load
from collector.plan import matrix as mx
from collector.commands import shard
from collector.host.runner import collect
from conftest import ROOT

ENV = {"device": "cpu", "device_name": "x", "torch_version": "1", "hostname": "h"}


def _matrix():
    return mx.build_matrix("smoke", {"models": ["mlp", "gnn", "moe"], "processes": 1})


def test_shards_are_disjoint_cover_the_matrix_and_do_not_depend_on_order():
    cells = _matrix().cells
    slices = [shard.select(cells, k, 3) for k in (1, 2, 3)]
    ids = [c.cell_id for s in slices for c in s]
    assert sorted(ids) == sorted(c.cell_id for c in cells) and len(set(ids)) == len(ids)
    assert shard.select(list(reversed(cells)), 2, 3) == slices[1]
    assert max(map(len, slices)) - min(map(len, slices)) <= 1
    for bad in ("0/3", "4/3", "x", "1/0"):
        with pytest.raises(shard.ShardError):
            shard.parse(bad)


def _shards(tmp_path, n=2):
    m = _matrix()
    dirs = []
    for k in range(1, n + 1):
        part = mx.Matrix(**{**m.__dict__, "cells": shard.select(m.cells, k, n)})
        dirs.append(collect(part, ENV, tmp_path / "runs", shard.run_id_for("r", k, n), OkLauncher(),
                            out=io.StringIO()))
    return m, dirs


def test_merged_shards_are_one_run_for_the_report(tmp_path):
    m, dirs = _shards(tmp_path)
    into = tmp_path / "merged" / "r"
    got = shard.merge(into, dirs, out=io.StringIO())
    assert got["copied"] == len(m.cells)
    loaded = load(discover_runs(tmp_path / "merged"))
    assert loaded.skipped == []  # the shards' run ids are expected in a merged run: no notes
    assert loaded.con.execute("SELECT count(*), count(DISTINCT run_id) FROM cells").fetchone() == (len(m.cells), 1)
    manifest = json.loads((into / "run.json").read_text())
    assert manifest["merged_from"] == [d.name for d in dirs] and len(manifest["sessions"]) == 2
    again = shard.merge(into, dirs, out=io.StringIO())  # merging again copies nothing twice
    assert again == {"copied": 0, "same": len(m.cells), "mixed": []}


def test_a_cell_measured_in_two_shards_with_different_rows_is_refused(tmp_path):
    _, dirs = _shards(tmp_path)
    f = next((dirs[0] / "cells").glob("*.parquet"))
    table = pq.read_table(f)
    table = table.set_column(table.schema.get_field_index("cell_wall_s"), "cell_wall_s", pa.array([99.0]))
    pq.write_table(table, dirs[1] / "cells" / f.name)
    with pytest.raises(shard.ShardError, match=f"cell {f.stem} is in two shards with different rows"):
        shard.merge(tmp_path / "m" / "r", dirs, out=io.StringIO())


def test_shards_of_different_environments_need_allow_mixed(tmp_path):
    _, dirs = _shards(tmp_path)
    manifest = json.loads((dirs[1] / "run.json").read_text())
    manifest["environment"]["torch_version"] = "2"
    (dirs[1] / "run.json").write_text(json.dumps(manifest))
    with pytest.raises(shard.ShardError, match="torch_version: '1' vs '2'"):
        shard.merge(tmp_path / "m" / "r", dirs, out=io.StringIO())
    got = shard.merge(tmp_path / "m" / "r", dirs, allow_mixed=True, out=io.StringIO())
    assert got["mixed"] and json.loads((tmp_path / "m" / "r" / "run.json").read_text())["mixed"]


def test_make_passes_the_shard_and_merge_exists():
    done = subprocess.run(["make", "-n", "collect", "SHARD=2/4", "PYTHON=python3"], cwd=ROOT,
                          capture_output=True, text=True)
    assert "--shard '2/4'" in done.stdout, done.stderr
    usage = subprocess.run(["make", "merge", "PYTHON=python3"], cwd=ROOT, capture_output=True, text=True)
    assert usage.returncode != 0 and "usage: make merge" in usage.stdout


def test_the_command_line_measures_its_slice_in_its_own_folder(tmp_path):
    import os
    import sys

    from support.faults import fake_python

    cmd = [sys.executable, "-m", "collector", "--preset", "smoke", "--models", "mlp,gnn,moe", "--processes", "1",
           "--out", str(tmp_path), "--run-id", "r", "--shard", "2/3", "--python", fake_python(tmp_path)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), FAKE_CELL_SECONDS="0.05"))
    assert done.returncode == 0, done.stdout + done.stderr
    cells = sorted(p.stem for p in (tmp_path / "r-shard2of3" / "cells").glob("*.parquet"))
    assert cells == sorted(c.cell_id for c in shard.select(_matrix().cells, 2, 3))


def test_merge_takes_the_run_lock_and_a_target_outside_the_runs_folder_or_with_a_newline_is_refused(tmp_path):
    """A collector writing the target holds its run lock: merge refuses instead of replacing run.json under it
    (the collector's last write then dropped merged_from and the shards' sessions). `make merge
    RUN=../../../x` wrote outside RUNS, and a newline in the name reached run.json's run_id: both refused."""
    from collector.host.store import run_lock

    m, dirs = _shards(tmp_path)
    into = tmp_path / "runs" / "busy"
    into.mkdir(parents=True)
    with run_lock(into):  # the collector measuring into it
        with pytest.raises(shard.ShardError, match="another collector is running on .*busy"):
            shard.merge(into, dirs, out=io.StringIO())
    assert not (into / "run.json").exists() and not (into / "cells").exists()
    assert shard.merge(into, dirs, out=io.StringIO())["copied"] == len(m.cells)  # once it is free
    for bad, says in ((tmp_path / "runs" / ".." / ".." / "x", "without '..'"), (tmp_path / "runs" / "a\nb", "invalid run id")):
        with pytest.raises(shard.ShardError, match=says):
            shard.merge(bad, dirs, out=io.StringIO())
    assert not (tmp_path.parent / "x").exists()
