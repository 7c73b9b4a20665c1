"""run.json, the input contract, has a schema and one reader (collector/record/manifest.py): the collector
(resume), the merge and the report read it alike, and a manifest that breaks the schema is refused by the
collector and the merge by name, and left out field by field on its own run's report. The processes count
keeps its type from the command line to run.json's typed record and the Parquet row."""
import io
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from analysis.data.load import discover_runs
from collector.__main__ import parse_args
from collector.commands import shard
from collector.host import store
from support.launchers import OkLauncher
from collector.host.runner import collect
from collector.plan import matrix as mx
from collector.record import manifest
from conftest import ROOT

ENV = {"device": "cpu", "device_name": "x", "torch_version": "1", "hostname": "h"}


@pytest.mark.evidence
def test_the_schema_file_is_what_the_module_writes_and_every_committed_manifest_meets_it():
    assert (ROOT / "collector" / "record" / "run.schema.json").read_text() == manifest.write_schema()
    found = sorted((ROOT / "data" / "examples").glob("*/run.json")) + sorted((ROOT / "tests").rglob("run.json"))
    assert len(found) > 100
    for f in found:
        data, problems = manifest.read(f)
        assert problems == [], (f, problems)
        assert isinstance(manifest.RunManifest.from_json(json.loads(f.read_text())).protocol.processes, int)


def test_the_processes_count_keeps_its_type_from_the_command_line_to_the_row(tmp_path):
    args = parse_args(["--processes", "2"])
    assert args.processes == 2  # an int from the option table's type
    m = mx.build_matrix("smoke", {"models": ["mlp"], "modes": ["default"], "phases": ["infer"], "processes": args.processes})
    assert m.protocol.processes == 2
    collect(m, ENV, tmp_path, "r", OkLauncher(), out=io.StringIO())
    record = manifest.RunManifest.from_json(json.loads((tmp_path / "r" / "run.json").read_text()))
    assert record.protocol.processes == 2 and type(record.protocol.processes) is int
    row = pq.read_table(next((tmp_path / "r" / "cells").glob("*.parquet"))).to_pylist()[0]
    assert row["processes"] == 2 and type(row["processes"]) is int
    [run] = discover_runs(tmp_path)
    assert run.record.protocol == record.protocol and record.to_json()["protocol"]["processes"] == 2


def _newer(path):
    """A run.json as a newer collector might write it: a protocol setting this code does not know."""
    data = json.loads(path.read_text())
    data["protocol"]["warp_drive"] = 1
    path.write_text(json.dumps(data))


def test_a_manifest_that_breaks_the_schema_is_refused_by_the_collector_and_merge_and_named_by_the_report(tmp_path):
    m = mx.build_matrix("smoke", {"models": ["mlp"], "modes": ["default"], "phases": ["infer"], "processes": 1})
    collect(m, ENV, tmp_path, "r", OkLauncher(), out=io.StringIO())
    collect(mx.build_matrix("smoke", {"models": ["gnn"], "modes": ["default"], "phases": ["infer"], "processes": 1}),
            ENV, tmp_path, "s", OkLauncher(), out=io.StringIO())
    _newer(tmp_path / "r" / "run.json")
    with pytest.raises(store.ManifestError, match=r"run.json's schema .*\$\.protocol: unexpected 'warp_drive'"):
        store.prepare_run(tmp_path / "r", "r", m, ENV)  # resume
    with pytest.raises(shard.ShardError, match="unexpected 'warp_drive'"):
        shard.merge(tmp_path / "m" / "r", [tmp_path / "s", tmp_path / "r"], out=io.StringIO())
    runs = {r.run_id: r for r in discover_runs(tmp_path)}
    assert runs["s"].problems == () and runs["s"].record is not None
    assert any("unexpected 'warp_drive'; field 'protocol' left out" in why for _, why in runs["r"].problems)
    assert "protocol" not in runs["r"].manifest and runs["r"].record is None
    got = subprocess.run([sys.executable, "-m", "analysis", "--data", str(tmp_path), "--out", str(tmp_path / "o"),
                          "--reps", "50", "--run", "r", "--run", "s"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr
    assert "warp_drive" in (tmp_path / "o" / "r" / "report.md").read_text()
    assert "warp_drive" not in (tmp_path / "o" / "s" / "report.md").read_text()
