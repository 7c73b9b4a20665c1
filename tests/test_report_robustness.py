"""The report side against bad input: one bad file or manifest never changes how the rest is
read, reports never leave their folder, copies and empty files are named, a full or read-only
output folder is one message and exit 3 (docs/reliability.md)."""
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.__main__ import main as analysis_main
from analysis.data.load import discover_runs, load
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
    assert "column schema_version stored as string, not int64" in reasons[str(files[0])]
    assert "column cell_wall_s stored as string, not double" in reasons[str(files[1])]
    assert _report(fixture_copy, tmp_path / "r") == 0
    md = (tmp_path / "r" / RUN / "report.md").read_text()
    assert "2 input file(s) were skipped" in md and f"{len(files) - 2} cells" in md


@pytest.mark.parametrize("content", [b""]  # the fast tier takes one, the suite all five
                         + [pytest.param(c, marks=pytest.mark.slow)
                            for c in (b"\x00\xff\xfe binary", b"[]", b"null", b'{"sessions": 5}')])
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


@pytest.mark.slow  # 4 s: the full suite, not test-fast
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


@pytest.mark.slow
@pytest.mark.evidence
def test_shipped_examples_pass_every_check():
    loaded, n = _count(ROOT / "data" / "examples")
    assert loaded.skipped == [] and n > 100


# --- outputs as one generation; files that are not what they seem (docs/reliability.md) --------------

def _generation(out):
    """The status line ("N cells: ...") each output file of a run's report carries."""
    d = out / RUN
    line = re.compile(r"\d+ cells: [^·<\n]*?(?= ·|<|\n|$)")
    return {"report.md": line.search((d / "report.md").read_text()).group(0),
            "report.html": line.search((d / "report.html").read_text()).group(0),
            "summary.md": line.search((d / "summary.md").read_text()).group(0),
            "estimates.json": json.loads((d / "estimates.json").read_text())["status"]}


@pytest.mark.slow
def test_a_render_that_fails_midway_leaves_the_previous_generation_whole(fixture_copy, tmp_path, monkeypatch):
    """Every output of a report is written into a staging folder that replaces the old one in one step:
    a render stopped after report.md (an error here; a kill in the benchmark) changes nothing."""
    out = tmp_path / "out"
    assert _report(fixture_copy, out) == 0
    before = {p.name: p.read_bytes() for p in (out / RUN).iterdir() if p.is_file()}
    _cells(fixture_copy)[0].unlink()  # the next generation has one cell fewer
    from analysis.render import pages as render_mod
    real, calls = render_mod.write_atomic, []

    def failing(path, text):
        calls.append(path.name)
        if len(calls) == 3:
            raise KeyboardInterrupt("stopped between files")
        real(path, text)

    monkeypatch.setattr(render_mod, "write_atomic", failing)
    with pytest.raises(KeyboardInterrupt):
        _report(fixture_copy, out)
    assert calls[:2] == ["report.md", "report.html"]  # two new files were written, into the staging folder
    assert {p.name: p.read_bytes() for p in (out / RUN).iterdir() if p.is_file()} == before
    assert sorted(p.name for p in out.iterdir()) == [RUN]  # no staging folder left behind
    monkeypatch.setattr(render_mod, "write_atomic", real)
    assert _report(fixture_copy, out) == 0
    gen = _generation(out)
    assert gen["estimates.json"].startswith(f"{len(_cells(fixture_copy))} cells") and len(set(gen.values())) == 1, gen


def _kill_when_writing(cmd, out):
    """Start a render and SIGKILL it the moment its first output file is written (in place, or in a
    staging folder beside it): the moment a render that writes file by file is half done."""
    first = out / RUN / "report.md"
    before = first.stat().st_mtime_ns
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None:
        staged = list(out.glob(f".{RUN}.new-*/report.md"))
        if staged or first.stat().st_mtime_ns != before:
            proc.kill()
            break
        time.sleep(0.001)
    proc.wait()
    return proc.returncode


@pytest.mark.slow
def test_killed_renders_never_leave_mixed_generations(fixture_copy, tmp_path):
    """SIGKILL right after a render wrote its first output (benchmarks/render_kill.py does it 20 times at
    random moments): every time, the four outputs describe one and the same set of cells, and the
    next render cleans up what the killed one staged."""
    out = tmp_path / "out"
    assert _report(fixture_copy, out) == 0
    cmd = [sys.executable, "-m", "analysis", "--data", str(fixture_copy), "--out", str(out), "--reps", "50"]
    for _ in range(3):
        _cells(fixture_copy)[0].unlink()  # each render would change the cell count
        assert _kill_when_writing(cmd, out) == -9
        gen = _generation(out)
        assert len(set(gen.values())) == 1, gen
    assert _report(fixture_copy, out) == 0 and sorted(p.name for p in out.iterdir()) == [RUN]
    assert _generation(out)["estimates.json"].startswith("4 cells")


@pytest.mark.slow  # 4 s: the full suite, not test-fast
def test_a_fifo_named_like_a_cell_file_is_skipped_by_name_not_waited_on(fixture_copy, tmp_path):
    os.mkfifo(fixture_copy / RUN / "cells" / "zz__infer__float32__bs1__default__model.parquet")
    done = subprocess.run([sys.executable, "-m", "analysis", "--data", str(fixture_copy), "--out", str(tmp_path / "o"),
                           "--reps", "50"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "zz__infer__float32__bs1__default__model.parquet: not a regular file (a FIFO): left out" in done.stderr
    assert _count(fixture_copy)[1] == 7


@pytest.mark.slow  # 4 s: the full suite, not test-fast
def test_a_planted_scratch_file_is_not_trusted(fixture_copy, tmp_path):
    """The zero-row schema file the loader needs is its own, in a private folder removed at exit; a
    zero-byte file planted where older versions kept it changes nothing. The report runs with a
    temporary folder of the test's own (another suite's reports come and go in the shared one)."""
    import hashlib

    from collector.record.schema import SCHEMA, SCHEMA_VERSION
    digest = hashlib.sha1(str(SCHEMA).encode()).hexdigest()[:12]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    planted = tmp / f"tcb-empty-v{SCHEMA_VERSION}-{digest}.parquet"
    planted.write_bytes(b"")
    done = subprocess.run([sys.executable, "-m", "analysis", "--data", str(fixture_copy), "--out",
                           str(tmp_path / "o"), "--reps", "50"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "TMPDIR": str(tmp)})
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp.iterdir()) == [planted.name]  # its own folder is gone; the plant untouched
    assert planted.read_bytes() == b""


def test_a_relabelled_copy_of_a_cell_is_named_not_counted_twice(fixture_copy):
    """A copy renamed to another cell's id, with its cell_id column changed to match: its key (model,
    phase, dtype, batch size, mode, scope) is still the first cell's, already counted: left out, named."""
    src = _cells(fixture_copy)[0]
    other = "resnet18__infer__amp_bf16__bs64__default__model"
    dst = src.with_name(f"{other}.parquet")
    shutil.copy(src, dst)
    _rewrite(dst, cell_id=other)
    loaded, n = _count(fixture_copy)
    assert n == 7
    (f, why), = [s for s in loaded.skipped if s[0].endswith(dst.name)]
    assert f"names cell {other!r} but its key" in why and f"that of {src.stem!r}, already counted" in why
