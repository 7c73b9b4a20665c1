"""Every schema version's files, as an older collector left them (tests/fixtures/versions, written by
tests/make_fixture.py): the one cell-file rule accepts them, the collector counts them as done, the
report loads them, brings them up to the current schema and renders them. The tests own these
runs; the evidence runs under data/examples are not needed to know that old files still read."""
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analysis.__main__ import main as analysis_main
from analysis.data.load import discover_runs, load
from collector.host.store import RunStore
from collector.record import cellfile
from collector.record.schema import SCHEMA_VERSION, columns_of

VERSIONS = Path(__file__).parent / "fixtures" / "versions"
ALL = range(1, SCHEMA_VERSION + 1)


def test_there_is_one_fixture_run_per_schema_version():
    """Bumping SCHEMA_VERSION without a fixture of it fails here: rerun tests/make_fixture.py."""
    assert sorted(p.name for p in VERSIONS.iterdir()) == sorted(f"v{v}" for v in ALL)


@pytest.mark.parametrize("version", ALL)
def test_a_file_of_each_version_is_judged_good_and_counted_as_done(version):
    run = VERSIONS / f"v{version}"
    (path,) = (run / "cells").glob("*.parquet")
    assert set(pq.read_schema(path).names) == columns_of(version)  # the fixture holds that version's columns
    assert pq.read_table(path, columns=["schema_version"]).column(0)[0].as_py() == version
    saved = cellfile.inspect(path)
    assert saved.ok and saved.status == "ok", saved.why
    assert RunStore(run).saved() == {path.stem: "ok"}  # resume would not measure it again


@pytest.mark.parametrize("version", ALL)
def test_the_report_brings_each_version_up_to_the_current_schema(version):
    loaded = load(discover_runs(VERSIONS / f"v{version}"))
    assert loaded.skipped == []
    row = loaded.con.execute("SELECT schema_version, steps_per_sample, dynamic, concurrent_cells, processes, "
                             "len(eager_step_ms), eager_energy_steps FROM cells").fetchone()
    version_read, k, dynamic, concurrent, processes, samples, _ = row
    assert version_read == version and k == 1 and dynamic == "auto" and concurrent == 1
    assert processes == (2 if version >= 5 else 1) and samples == 10 * processes


@pytest.mark.parametrize("version", ALL)
def test_each_version_renders_with_its_speedup(version, tmp_path):
    """2 ms eager against 1 ms compiled, in every version's terms: a 2.00x speedup in the report."""
    assert analysis_main(["--data", str(VERSIONS), "--run", f"v{version}", "--out", str(tmp_path)]) == 0
    report = (tmp_path / f"v{version}" / "report.md").read_text()
    assert re.search(r"\b2\.00x\b", report), report[:2000]


def test_a_written_cell_file_keeps_statistics_for_what_its_judge_reads_and_no_other_column(tmp_path):
    """The newest fixture's row, with a screen cell's long values (100 samples a side, an autotune
    record of 3 kB), written again: the footer has min/max for the judge's keys, so a file is judged
    without reading its values; no column else carries them (they were a third of a screen cell's
    file), and the file reads back as it was written."""
    import pyarrow as pa

    from collector.record import schema

    src = sorted((VERSIONS / f"v{SCHEMA_VERSION}" / "cells").glob("*.parquet"))[0]
    row = pq.read_table(src).to_pylist()[0]
    row.update({k: [1.0 + i / 997 for i in range(100)] for k in
                ("eager_step_ms", "compiled_step_ms", "eager_enqueue_ms", "compiled_enqueue_ms")})
    row["autotune_json"] = "{" + ", ".join(f'"triton_poi_fused_{i}": [{i}, 128, 4]' for i in range(100)) + "}"
    out = tmp_path / src.name
    schema.write_row(row, out)
    meta = pq.read_metadata(out).row_group(0)
    kept = {meta.column(i).path_in_schema for i in range(meta.num_columns)
            if meta.column(i).statistics is not None and meta.column(i).statistics.has_min_max}
    assert kept == set(cellfile.KEYS), kept
    judged = cellfile.inspect(out)
    assert judged.why is None and (judged.cell_id, judged.status) == (row["cell_id"], row["status"])
    back = pq.read_table(out).to_pylist()[0]
    assert back["compiled_step_ms"] == row["compiled_step_ms"] and back["autotune_json"] == row["autotune_json"]
    every = tmp_path / "every.parquet"  # the same row with every column's statistics, as before
    pq.write_table(pa.Table.from_pylist([schema.make_row(row)], schema=schema.arrow_schema()), every,
                   compression="zstd")
    assert out.stat().st_size < 0.8 * every.stat().st_size, (out.stat().st_size, every.stat().st_size)
