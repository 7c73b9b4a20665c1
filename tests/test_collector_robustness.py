"""The collector against bad input and real faults: clear messages instead of tracebacks, one
status for one fault, capped logs, resume that re-measures a broken cell file, a full or
read-only disk, a stop that arrives while the session's files are finished (docs/reliability.md)."""
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from collector.host.launch import LauncherBase
from support.faults import MATRIX, fake_python, signal_and_resume
from collector.record import contract
from collector.plan import matrix as mx
from collector.host import runner, stop
from collector.__main__ import main as collector_main
from collector.commands.options import parse_models
from collector.child.cell import classify
from collector.host.cell_output import LOG_HEAD_BYTES, LOG_TAIL_BYTES, CappedLog, _tail
from collector.host.launch import SubprocessLauncher
from collector.host.cell_measure import measure_cell
from collector.host.runner import collect, size_note
from conftest import ROOT
from test_report_robustness import _tmpfs

ENV = {"device": "cpu", "device_name": "x", "torch_version": "1", "hostname": "h"}


class OkLauncher(LauncherBase):
    def __init__(self):
        self.cells = []

    def run(self, spec, cache_dir, log_path, timeout_s):
        if spec.get("kind", "cold") == "cold":
            self.cells.append(spec["cell"]["model"])
        return {"status": "ok", "eager_step_ms": [1.0] * 4, "compiled_step_ms": [0.5] * 4}


def _run_cli(tmp_path, *args, env=None):
    cmd = [sys.executable, "-m", "collector", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})))


# --- model options on the command line -------------------------------------------------------

def test_model_options_with_commas_work_on_the_command_line():
    assert parse_models("gpt:layers=2,seq_len=128") == ["gpt:layers=2,seq_len=128"]
    assert parse_models("mlp, gpt:layers=2,seq_len=128 ,moe") == ["mlp", "gpt:layers=2,seq_len=128", "moe"]
    with pytest.raises(Exception, match="follows no model"):
        parse_models("layers=2,gpt")


def test_every_model_example_in_the_readme_and_the_options_builds_a_matrix():
    readme = (ROOT / "README.md").read_text() + (ROOT / "docs" / "options.md").read_text()
    examples = set(re.findall(r"MODELS=([\w:=,./-]+)", readme)) | set(re.findall(r"`(gpt:[\w=,]+)`", readme))
    assert "mlp,gpt:layers=2,seq_len=128" in examples
    assert {"examples/user_model.py:build", "hf:BertForMaskedLM:num_hidden_layers=2,seq_len=64",
            "timm:resnet10t:image_size=64"} <= examples  # the three sources beside the built-in models
    for text in examples:
        m = mx.build_matrix("smoke", {"models": parse_models(text)})
        assert all(c.model.split(":")[0] in {"mlp", "gpt", "moe", "gnn"} or contract.model_source(c.model)
                   for c in m.cells), text
    m = mx.build_matrix("smoke", {"models": parse_models("gpt:layers=2,seq_len=128"), "phases": ["infer"],
                                  "modes": ["default"]})
    assert [c.model for c in m.cells] == ["gpt:layers=2,seq_len=128"]


# --- bad input is a message and exit 2, before anything runs ---------------------------------

@pytest.mark.parametrize("case", ["dir", "bom", "latin1", "stop-nan", "python", "memlimit"])
def test_bad_input_is_one_message_and_exit_2(tmp_path, case):
    preset, extra, env = "smoke", [], {}
    if case == "dir":
        (tmp_path / "p.toml").mkdir()
        preset = str(tmp_path / "p.toml")
    elif case == "bom":  # a byte-order mark is read, not "Invalid statement"
        (tmp_path / "p.toml").write_bytes(b"\xef\xbb\xbf" + (ROOT / "collector/plan/presets/smoke.toml").read_bytes())
        preset = str(tmp_path / "p.toml")
    elif case == "latin1":
        (tmp_path / "p.toml").write_bytes('description = "café"\n'.encode("latin-1"))
        preset = str(tmp_path / "p.toml")
    elif case == "stop-nan":
        extra = ["--stop-after", "nan"]
    elif case == "python":
        extra = ["--python", "/nonexistent/python"]
    elif case == "memlimit":
        env = {"TCB_CELL_MEMORY_LIMIT_MB": "lots"}
    done = _run_cli(tmp_path, "--preset", preset, "--out", str(tmp_path / "runs"), "--run-id", "r", *extra,
                    *(["--dry-run"] if case in ("dir", "bom", "latin1") else []), env=env)
    if case == "bom":
        assert done.returncode == 0 and "cells" in done.stdout, done.stderr
        return
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    expect = {"dir": "is a folder, not a preset file", "latin1": "not UTF-8 text", "stop-nan": "finite",
              "python": "no such executable", "memlimit": "TCB_CELL_MEMORY_LIMIT_MB='lots'"}[case]
    assert expect in done.stderr
    assert not (tmp_path / "runs" / "r" / "cells").exists() or not list((tmp_path / "runs" / "r" / "cells").iterdir())


def test_a_very_large_matrix_says_what_it_will_take_before_it_starts(tmp_path):
    note = size_note(1_000_000, 3, 1)
    assert "1000000 cells x 3 process(es)" in note and "16666.7-29166.7 hours" in note
    m = mx.build_matrix("smoke", {"models": ["mlp"], "batch_sizes": list(range(1, 31)), "processes": 1})
    out = io.StringIO()
    collect(m, ENV, tmp_path, "big", OkLauncher(), out=out)
    lines = out.getvalue().splitlines()
    assert len(m.cells) >= runner.LARGE_MATRIX and lines[1].startswith(f"note: {len(m.cells)} cells")


# --- one fault, one status -------------------------------------------------------------------

@pytest.mark.parametrize("text,stage", [
    ("RuntimeError: [enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory", "timing"),
    ("RuntimeError: failed to map segment from shared object: Cannot allocate memory", "setup"),
    ("RuntimeError: libtorch: failed to map segment from shared object", "setup"),
    ("torch._dynamo.exc.InternalTorchDynamoError: std::bad_alloc", "compile"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "eager"),
])
def test_out_of_memory_is_oom_wherever_it_strikes(text, stage):
    assert classify(RuntimeError(text), stage) == "oom"
    assert classify(RuntimeError("shape mismatch"), "compile") == "compile_error"


def test_a_process_that_aborts_on_bad_alloc_is_an_oom_row(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_CELL_ABORT", "terminate called after throwing an instance of 'std::bad_alloc'")
    m = mx.build_matrix("smoke", {"models": ["mlp"], "phases": ["infer"], "modes": ["default"], "processes": 1})
    (tmp_path / "logs").mkdir()
    row = measure_cell(m.cells[0], m, ENV, "r", tmp_path, SubprocessLauncher(fake_python(tmp_path)))
    assert row["status"] == "oom" and "SIGABRT" in row["error"] and "bad_alloc" in row["error"]


# --- logs ------------------------------------------------------------------------------------

def test_capped_log_keeps_head_and_tail_of_a_flood(tmp_path):
    data = b"".join(f"line {i:08d}\n".encode() for i in range(400_000))  # ~5.6 MB
    with open(tmp_path / "log", "wb") as fh:
        capped = CappedLog(fh, head=64 << 10, tail=64 << 10)
        capped.pump(io.BufferedReader(io.BytesIO(data)))
        capped.finish()
    text = (tmp_path / "log").read_text()
    assert len(text) < 140 << 10
    assert text.startswith("line 00000000\n") and text.endswith("line 00399999\n")
    assert f"[... {len(data) - (128 << 10)} bytes of output left out" in text


def test_a_cell_that_floods_its_output_gets_a_capped_log_and_a_useful_error(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_CELL_PRINT_MB", "12")
    monkeypatch.setenv("FAKE_CELL_ABORT", "boom")
    m = mx.build_matrix("smoke", {"models": ["mlp"], "phases": ["infer"], "modes": ["default"], "processes": 1})
    (tmp_path / "logs").mkdir()
    row = measure_cell(m.cells[0], m, ENV, "r", tmp_path, SubprocessLauncher(fake_python(tmp_path)))
    log = next((tmp_path / "logs").iterdir())
    assert log.stat().st_size < (LOG_HEAD_BYTES + LOG_TAIL_BYTES) + (64 << 10)
    assert row["status"] == "crashed" and "the last step before the end" in row["error"]
    assert "boom" in _tail(log)


# --- resume ----------------------------------------------------------------------------------

def test_resume_measures_again_a_cell_whose_file_is_empty_truncated_or_foreign(tmp_path):
    m = mx.build_matrix("smoke", {"models": ["mlp"], "processes": 1})
    run_dir = collect(m, ENV, tmp_path, "r", OkLauncher(), out=io.StringIO())
    files = sorted((run_dir / "cells").glob("*.parquet"))
    files[0].write_bytes(b"")
    files[1].write_bytes(files[1].read_bytes()[:300])
    files[2].write_bytes(files[3].read_bytes())  # another cell's row under this cell's name
    (run_dir / ".run.json.999.tmp").write_bytes(b"")  # left by a session killed on a full disk
    (run_dir / "cells" / ".x.parquet.999.tmp").write_bytes(b"PAR1")
    again, out = OkLauncher(), io.StringIO()
    collect(m, ENV, tmp_path, "r", again, out=out)
    assert len(again.cells) == 3
    assert out.getvalue().count("measured again") == 3
    assert all(pq.read_table(f).num_rows == 1 for f in files)
    assert sorted(p.name for p in (run_dir / "cells").glob("*.invalid")) == sorted(f.name + ".invalid" for f in files[:3])
    assert not list(run_dir.rglob(".*.tmp"))


def test_a_cell_file_the_report_would_refuse_is_measured_again_and_both_sides_judge_alike(tmp_path):
    """A cell file with a column the contract lacks, a column of another type or an unknown schema
    version used to count as done for the collector (RETRY=1 included) while the report skipped it,
    and the two sides judged with two implementations. Now one rule (collector.record.cellfile) judges
    for both: the collector sets each such file aside with the words the report skips it with, and
    measures it again; a good file written without column statistics is read, not refused."""
    import pyarrow as pa

    from analysis.data.load import discover_runs, load
    from collector.record import cellfile

    m = mx.build_matrix("smoke", {"models": ["mlp"], "batch_sizes": [8, 16], "processes": 1})
    run_dir = collect(m, ENV, tmp_path, "r", OkLauncher(), out=io.StringIO())
    files = sorted((run_dir / "cells").glob("*.parquet"))
    assert len(files) == 8
    t = pq.read_table(files[0])
    pq.write_table(t.append_column("my_note", pa.array(["x"])), files[0])  # an extra column
    t = pq.read_table(files[1])
    i = t.schema.get_field_index("first_call_compiled_s")
    pq.write_table(t.set_column(i, "first_call_compiled_s", pa.array(["3.0"])), files[1])  # a string, not a double
    t = pq.read_table(files[2])
    i = t.schema.get_field_index("schema_version")
    pq.write_table(t.set_column(i, "schema_version", pa.array([99], pa.int64())), files[2])  # unknown version
    pq.write_table(pa.concat_tables([pq.read_table(files[3])] * 2), files[3])  # two rows
    pq.write_table(pq.read_table(files[5]), files[4])  # another cell's row under this name
    files[5].write_bytes(files[5].read_bytes()[:-40])  # truncated
    pq.write_table(pq.read_table(files[6]), files[6], write_statistics=False)  # good, no statistics
    bad = files[:6]
    report = load(discover_runs(tmp_path))
    refused = {os.path.basename(f): why for f, why in report.skipped}
    judged = {f.name: cellfile.inspect(f).why for f in files if not cellfile.inspect(f).ok}
    assert judged == refused and set(judged) == {f.name for f in bad}, (judged, report.skipped)
    assert "my_note" in judged[files[0].name] and "stored as string, not double" in judged[files[1].name]
    assert "schema version 99" in judged[files[2].name] and "2 rows" in judged[files[3].name]
    assert "holds cell" in judged[files[4].name] and "unreadable Parquet" in judged[files[5].name]
    assert cellfile.inspect(files[6]).status == "ok"
    again, out = OkLauncher(), io.StringIO()
    collect(m, ENV, tmp_path, "r", again, out=out)
    assert len(again.cells) == len(bad) and out.getvalue().count("measured again") == len(bad), out.getvalue()
    for f in bad:
        assert f"note: {f.name}: {judged[f.name]}; renamed" in out.getvalue()
    assert not [f for f in files if not cellfile.inspect(f).ok]


def test_a_fifo_as_run_json_is_refused_by_the_collector_merge_and_report_without_blocking(tmp_path):
    """A FIFO named run.json hung the collector (SIGTERM and SIGINT ignored: it read it without the
    regular-file check) and `collector.commands.shard merge`; the report refused it and rendered no run at
    all. Now: the collector and merge refuse it by name (exit 2) at once, and the report renders
    the other runs, the bad one with a problem named."""
    (tmp_path / "bad" / "cells").mkdir(parents=True)
    os.mkfifo(tmp_path / "bad" / "run.json")
    shutil.copytree(ROOT / "tests" / "fixtures" / "small" / "fixture-small", tmp_path / "good")
    args = ["--preset", "smoke", "--models", "mlp", "--phases", "infer", "--modes", "default", "--out", str(tmp_path)]
    got = subprocess.run([sys.executable, "-m", "collector", *args, "--run-id", "bad"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert got.returncode == 2 and "run.json is not a regular file" in got.stderr, got.stderr
    got = subprocess.run([sys.executable, "-m", "collector.commands.shard", "merge", "--into", str(tmp_path / "m"),
                          str(tmp_path / "bad"), str(tmp_path / "good")], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert got.returncode == 2 and "not a regular file" in got.stderr, got.stderr
    got = subprocess.run([sys.executable, "-m", "analysis", "--data", str(tmp_path), "--out", str(tmp_path / "o"),
                          "--reps", "50"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert got.returncode == 0 and (tmp_path / "o" / "good" / "report.html").exists(), got.stdout + got.stderr


# --- disks -----------------------------------------------------------------------------------

def _fake_run(tmp_path, out, extra_env=None):
    env = dict(os.environ, FAKE_CELL_SECONDS="0.05", PYTHONPATH=str(ROOT), **(extra_env or {}))
    return subprocess.run([sys.executable, "-m", "collector", *MATRIX, "--out", str(out), "--run-id", "d",
                           "--python", fake_python(tmp_path)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_a_real_full_disk_is_one_message_exit_3_and_nothing_half_written(tmp_path):
    with _tmpfs(tmp_path / "full", "size=96k") as out:
        done = _fake_run(tmp_path, out, {"FAKE_CELL_PRINT_MB": "0.05"})  # the logs fill the disk
        text = done.stdout + done.stderr
        assert done.returncode == 3, text
        assert "No space left on device" in text and "run the same command to resume" in text
        assert "Traceback" not in text
        cells = list((out / "d" / "cells").glob("*.parquet"))
        assert all(pq.read_table(f).num_rows == 1 for f in cells)
        assert not list(out.rglob(".*.tmp"))


def test_a_read_only_disk_is_one_message_and_exit_3(tmp_path):
    with _tmpfs(tmp_path / "ro", "ro,size=1m") as out:
        done = _fake_run(tmp_path, out)
    assert done.returncode == 3 and "cannot write to" in done.stderr and "Traceback" not in done.stderr


# --- stops -----------------------------------------------------------------------------------

def test_a_stop_during_compaction_finishes_run_json_then_exits_with_the_message(tmp_path, monkeypatch):
    def compact_then_signal(run_dir):
        stop.interrupt(15, None)  # SIGTERM lands while the session's files are being finished

    monkeypatch.setattr(runner, "compact_run", compact_then_signal)
    runner.INTERRUPTED.clear()
    m = mx.build_matrix("smoke", {"models": ["mlp"], "processes": 1})
    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        collect(m, ENV, tmp_path, "r", OkLauncher(), out=out)
    runner.INTERRUPTED.clear()
    assert "run the same command again to resume" in out.getvalue()
    manifest = json.loads((tmp_path / "r" / "run.json").read_text())
    assert manifest["sessions"][-1]["finished_at"] and manifest["sessions"][-1]["cells_measured"] == 4


@pytest.mark.slow
def test_random_stops_all_exit_130_and_lose_nothing(tmp_path):
    got = signal_and_resume(tmp_path, points=5, seed=1)
    assert got["bad_stops"] == [] and got["temporaries"] == [] and got["unfinished_sessions"] == 0
    assert got["on_disk"] == got["expected"] and got["extra"] == 0 and got["unreadable"] == 0


def test_main_returns_130_on_keyboard_interrupt(tmp_path, monkeypatch):
    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr("collector.commands.executors.collect_targets", stop)
    monkeypatch.setattr("collector.commands.executors.probe_env", lambda python, device: dict(ENV, gpu_name=None))
    assert collector_main(["--preset", "smoke", "--out", str(tmp_path), "--run-id", "r"]) == 130


# --- what a user sees --------------------------------------------------------------------------

def test_near_miss_names_get_a_did_you_mean():
    with pytest.raises(mx.MatrixError, match=r"unknown mode 'reduce-overheed' \(did you mean 'reduce-overhead'\?\)"):
        mx.build_matrix("smoke", {"modes": ["reduce-overheed"]})
    with pytest.raises(mx.MatrixError, match=r"unknown model 'resnet' \(did you mean 'resnet50'\?\)"):
        mx.build_matrix("smoke", {"models": ["resnet"]})


def test_an_unknown_make_variable_is_an_error_not_ignored():
    done = subprocess.run(["make", "-n", "collect", "MODEL=mlp"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode != 0 and "unknown variable(s) MODEL" in done.stderr
    ok = subprocess.run(["make", "-n", "report", "RUN=x", "STRICT=1"], cwd=ROOT, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr


def test_make_keeps_slurm_settings_out_of_the_environment_and_a_zero_switch_is_off(tmp_path):
    """SLURM_EXCLUSIVE=1 on make's command line once reached srun through the environment make gives
    its recipes (and sbatch's --export=ALL), failing every task ("Invalid --exclusive specification"):
    the settings reach the collector as options only. And RETRY=0, SLURM_EXCLUSIVE=0 mean off."""
    fake = tmp_path / "python"
    fake.write_text("#!/usr/bin/env python3\nimport os, sys\nprint('ARGS', ' '.join(sys.argv[1:]))\n"
                    "print('ENV', ' '.join(sorted(k for k in os.environ if k.startswith('SLURM_'))))\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}

    def make(*args):
        done = subprocess.run(["make", "-s", "collect", f"PYTHON={fake}", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        lines = dict(line.split(" ", 1) if " " in line else (line, "") for line in done.stdout.splitlines())
        return lines["ARGS"], lines["ENV"].split()

    args, seen = make("EXECUTOR=slurm", "SLURM_EXCLUSIVE=1", "SLURM_PARTITION=debug", "SLURM_ACCOUNT=a", "RETRY=1")
    assert "--slurm-exclusive" in args and '--slurm-partition debug' in args and "--retry-failed" in args
    assert seen == []  # nothing for srun to read as its own input
    args, _ = make("EXECUTOR=slurm", "SLURM_EXCLUSIVE=0", "RETRY=0", "ALLOW_MIXED=no")
    assert "--slurm-exclusive" not in args and "--retry-failed" not in args and "--allow-mixed" not in args


def test_a_finished_run_says_how_to_measure_again_and_the_summary_keeps_full_ids(tmp_path):
    m = mx.build_matrix("smoke", {"models": ["gpt:layers=1,seq_len=64,vocab=4096"], "processes": 1})
    out = io.StringIO()
    collect(m, ENV, tmp_path, "r", OkLauncher(), out=out)
    assert all(c.cell_id in out.getvalue() for c in m.cells) and max(len(c.cell_id) for c in m.cells) > 58
    again = io.StringIO()
    collect(m, ENV, tmp_path, "r", OkLauncher(), out=again)
    assert "nothing to measure" in again.getvalue() and "RUN=<new id>" in again.getvalue()
    assert "RETRY=1" in again.getvalue()


def _fill(folder):
    """Fill a (small) file system to the last byte."""
    with open(folder / "filler", "wb", buffering=0) as fh:
        with contextlib.suppress(OSError):
            while True:
                fh.write(b"\0" * 4096)


def test_a_disk_already_full_at_the_start_is_one_message_and_exit_3(tmp_path):
    with _tmpfs(tmp_path / "full0", "size=128k") as out:
        (out / "d" / "cells").mkdir(parents=True)  # a run folder (and its probe) fit; run.json does not
        _fill(out)
        done = _fake_run(tmp_path, out)
        text = done.stdout + done.stderr
        assert done.returncode == 3, text
        assert "No space left on device" in text and "Traceback" not in text
        assert not list(out.rglob(".*.tmp")) and not list((out / "d" / "cells").iterdir())


def _shards(root, fixture):
    """The fixture run split into two shard run folders (cells alternating)."""
    cells = sorted((fixture / "fixture-small" / "cells").glob("*.parquet"))
    for i, name in enumerate(("s1", "s2")):
        (root / name / "cells").mkdir(parents=True)
        shutil.copy(fixture / "fixture-small" / "run.json", root / name / "run.json")
        for f in cells[i::2]:
            shutil.copy(f, root / name / "cells" / f.name)
    return [root / "s1", root / "s2"], len(cells)


def test_a_merge_onto_a_full_disk_leaves_no_half_file_and_resumes_once_there_is_room(tmp_path):
    shards, n = _shards(tmp_path, ROOT / "tests" / "fixtures" / "small")
    merge = [sys.executable, "-m", "collector.commands.shard", "merge", "--into"]
    with _tmpfs(tmp_path / "m", "size=64k") as disk:
        done = subprocess.run([*merge, str(disk / "all"), *map(str, shards)], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 3, done.stdout + done.stderr
        assert "No space left on device" in done.stderr and "the same command resumes" in done.stderr
        assert "Traceback" not in done.stderr
        copied = list((disk / "all" / "cells").iterdir())
        assert 0 < len(copied) < n and all(pq.read_table(f).num_rows == 1 for f in copied)  # whole files only
        subprocess.run(["mount", "-o", "remount,size=1m", str(disk)], check=True)  # room again
        done = subprocess.run([*merge, str(disk / "all"), *map(str, shards)], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"{n - len(copied)} cell file(s) copied, {len(copied)} duplicate(s)" in done.stdout
        assert len(list((disk / "all" / "cells").glob("*.parquet"))) == n


@pytest.mark.slow
def test_a_fifo_among_the_cells_is_measured_again_not_waited_on(tmp_path):
    out = tmp_path / "o"
    (out / "d" / "cells").mkdir(parents=True)
    os.mkfifo(out / "d" / "cells" / "mlp__infer__float32__bs8__default__model.parquet")
    done = _fake_run(tmp_path, out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not a regular file" in done.stdout + done.stderr


def _gone(pid: int) -> bool:
    try:
        state = next(line for line in open(f"/proc/{pid}/status") if line.startswith("State:"))
    except (FileNotFoundError, StopIteration):
        return True
    return "Z" in state.split()[1]  # a zombie has ended; only its parent's wait is missing


def test_the_environment_probe_dies_with_a_killed_collector(tmp_path):
    slow = tmp_path / "slow-python"
    pidfile = tmp_path / "probe.pid"
    slow.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    slow.chmod(0o755)
    parent = subprocess.Popen([sys.executable, "-c", f"from collector.host.envinfo import probe_in; probe_in({str(slow)!r}, 'cpu')"],
                              cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    for _ in range(200):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    probe = int(pidfile.read_text())
    parent.kill()
    parent.wait()
    for _ in range(40):
        if _gone(probe):
            break
        time.sleep(0.05)
    assert _gone(probe), "the probe outlived the collector"


def test_a_missing_package_is_one_message_naming_it_and_what_to_install():
    """`python -m collector` under an interpreter without the collector's packages: one line naming the
    package and how to get it, exit 2, no traceback."""
    code = ("import sys, runpy; sys.modules['pyarrow'] = None; sys.argv = ['collector', '--dry-run'];"
            "runpy.run_module('collector', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "needs the package 'pyarrow'" in done.stderr and "make collect" in done.stderr
    assert "Traceback" not in done.stderr
