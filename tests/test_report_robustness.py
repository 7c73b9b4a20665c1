"""The report side against bad input: one bad file or manifest never changes how the rest is
read, reports never leave their folder, copies and empty files are named, a full or read-only
output folder is one message and exit 3 (docs/reliability.md)."""
import contextlib
import json
import shutil
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.__main__ import main as analysis_main
from analysis.load import discover_runs, load
from conftest import ROOT

RUN = "fixture-small"


def _cells(root):
    return sorted((root / RUN / "cells").glob("*.parquet"))


def _rewrite(path, **changes):
    """Rewrite one cell file with some columns changed (types follow the new values)."""
    table = pq.read_table(path)
    for name, value in changes.items():
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, pa.array([value] * table.num_rows))
    pq.write_table(table, path)


def _count(root):
    loaded = load(discover_runs(root))
    return loaded, loaded.con.execute("SELECT count(*) FROM cells").fetchone()[0]


def _report(root, out, *extra):
    return analysis_main(["--data", str(root), "--out", str(out), "--reps", "50", *extra])


def test_one_file_with_a_text_schema_version_leaves_the_others_alone(fixture_copy, tmp_path):
    """Read together, one text column made every file's version unknown and every report empty."""
    files = _cells(fixture_copy)
    _rewrite(files[0], schema_version="2")
    _rewrite(files[1], cell_wall_s="12.5 s")  # a numeric column as text crashed the whole report
    loaded, n = _count(fixture_copy)
    assert n == len(files) - 2
    reasons = dict(loaded.skipped)
    assert "column schema_version stored as BYTE_ARRAY, not INT64" in reasons[str(files[0])]
    assert "column cell_wall_s stored as BYTE_ARRAY, not DOUBLE" in reasons[str(files[1])]
    assert _report(fixture_copy, tmp_path / "r") == 0
    md = (tmp_path / "r" / RUN / "report.md").read_text()
    assert "2 input file(s) were skipped" in md and f"{len(files) - 2} cells" in md


@pytest.mark.parametrize("content", [b"", b"[]", b"null", b"\x00\xff\xfe binary", b'{"sessions": 5}'])
def test_a_bad_run_json_affects_its_own_run_only(fixture_copy, tmp_path, content):
    shutil.copytree(fixture_copy / RUN, fixture_copy / "other")
    (fixture_copy / "other" / "run.json").write_bytes(content)
    assert _report(fixture_copy, tmp_path / "r") == 0
    good = (tmp_path / "r" / RUN / "report.md").read_text()
    bad = (tmp_path / "r" / "other" / "report.md").read_text()
    assert "run.json" not in good.split("## ")[0]  # nothing about the other run on this one's top
    assert "other/run.json" in bad and "run manifest" in bad
    loaded, n = _count(fixture_copy)
    assert n == 2 * len(_cells(fixture_copy))  # both runs' cells, the bad manifest's included


def test_reports_are_written_under_the_folder_name_never_where_run_json_says(fixture_copy, tmp_path):
    manifest = fixture_copy / RUN / "run.json"
    data = json.loads(manifest.read_text())
    escape = tmp_path / "escaped"
    for run_id in ("../../../escaped", str(escape)):
        data["run_id"] = run_id
        manifest.write_text(json.dumps(data))
        out = tmp_path / "deep" / "r"
        assert _report(fixture_copy, out) == 0
        assert (out / RUN / "report.html").exists()
        assert not escape.exists() and not (tmp_path / "escaped").exists()
        md = (out / RUN / "report.md").read_text()
        assert "uses the folder's name 'fixture-small'" in md


def test_a_symlink_inside_out_cannot_send_the_report_elsewhere(fixture_copy, tmp_path, capsys):
    out, elsewhere = tmp_path / "r", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / RUN).symlink_to(elsewhere)
    assert _report(fixture_copy, out) == 3
    assert "outside" in capsys.readouterr().err and list(elsewhere.iterdir()) == []


def test_a_symlinked_runs_folder_is_followed_and_a_loop_ends(fixture_copy, tmp_path):
    data = tmp_path / "data2"
    data.mkdir()
    (data / "linked").symlink_to(fixture_copy)  # runs kept on another disk
    (fixture_copy / "loop").symlink_to(fixture_copy)
    runs = discover_runs(data)
    assert [r.run_id for r in runs] == [RUN]
    assert _count(data)[1] == len(_cells(fixture_copy))


def test_copies_multi_row_and_empty_cell_files_are_named_not_counted(fixture_copy):
    files = _cells(fixture_copy)
    copy = files[0].with_name(files[0].stem + " (copy).parquet")
    shutil.copy(files[0], copy)
    table = pq.read_table(files[1])
    pq.write_table(pa.concat_tables([table, table]), files[1])
    pq.write_table(table.slice(0, 0), files[2])
    loaded, n = _count(fixture_copy)
    assert n == len(files) - 2  # the copy is not counted twice, the two bad files not at all
    reasons = dict(loaded.skipped)
    assert "a cell file is named <cell id>.parquet" in reasons[str(copy)]
    assert "2 rows; a cell file holds one cell" in reasons[str(files[1])]
    assert "no rows" in reasons[str(files[2])]


def test_rows_that_name_another_run_count_as_their_folders(fixture_copy):
    files = _cells(fixture_copy)
    _rewrite(files[0], run_id="someone-else")
    loaded, n = _count(fixture_copy)
    assert n == len(files)
    assert loaded.con.execute("SELECT DISTINCT run_id FROM cells").fetchall() == [(RUN,)]
    assert any("'someone-else'" in why for _, why in loaded.skipped)


@contextlib.contextmanager
def _tmpfs(path, options):
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip() or 'not root'}); CI's machine can")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_read_only_output_folder_is_one_message_and_exit_3(fixture_copy, tmp_path, capsys):
    with _tmpfs(tmp_path / "ro", "ro,size=1m") as out:
        assert _report(fixture_copy, out) == 3
    err = capsys.readouterr().err
    assert "cannot write the report" in err and "Traceback" not in err


def test_full_output_disk_is_one_message_exit_3_and_no_half_report(fixture_copy, tmp_path, capsys):
    with _tmpfs(tmp_path / "full", "size=64k") as out:
        assert _report(fixture_copy, out) == 3
        left = [p.name for p in out.rglob("*") if p.name.endswith(".tmp") or p.name.startswith("report.")]
    err = capsys.readouterr().err
    assert "No space left on device" in err and "Traceback" not in err
    assert left == []  # neither a temporary file nor a truncated report


def test_shipped_examples_pass_every_check():
    loaded, n = _count(ROOT / "data" / "examples")
    assert loaded.skipped == [] and n > 100
