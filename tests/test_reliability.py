"""Faults injected into the real collector process: kill -9 at random moments, a full disk,
an out-of-memory cell on the CPU. See docs/reliability.md."""
import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

import pytest

from collector.host.launch import LauncherBase
from collector.plan import matrix as mx
from collector.record import schema
from collector.host.launch import SubprocessLauncher
from collector.host.cell_measure import measure_cell
from collector.host.runner import RunError, collect
from support.faults import MATRIX, fake_python, kill_and_resume
from conftest import ROOT


@pytest.mark.slow
def test_kill_9_at_random_points_loses_and_duplicates_nothing(tmp_path):
    got = kill_and_resume(tmp_path, points=5)
    assert got["on_disk"] == got["expected"] == 16
    assert got["extra"] == 0 and got["unreadable"] == 0
    # only a cell whose measurement ended but whose row was not yet written is measured again
    assert got["measured_twice"] <= 5
    # the killed collectors' scratch folders were swept by the next start and the last removed its own
    assert got["left_in_tmp"] == []


def test_full_disk_at_the_write_is_a_clear_error_and_leaves_no_file(tmp_path, monkeypatch):
    class Launcher(LauncherBase):
        def run(self, spec, cache_dir, log_path, timeout_s):
            return {"status": "ok"}

    import pyarrow.parquet as pq

    def full_disk(table, where, **kw):
        Path(where).write_bytes(b"PAR1 partial")  # a half-written temporary file, then the failure
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "write_table", full_disk)  # schema.write_row imports it when it writes
    m = mx.build_matrix("smoke", {"models": ["mlp"]})
    with pytest.raises(RunError, match="cannot write .*No space left on device.*run the same command to resume"):
        collect(m, {"device": "cpu", "device_name": "x", "torch_version": "1", "hostname": "h"},
                tmp_path, "full", Launcher())
    cells = tmp_path / "full" / "cells"
    assert list(cells.iterdir()) == []  # neither a cell file nor the temporary one


@pytest.mark.slow
def test_cell_that_exhausts_its_memory_limit_is_an_oom_row(tmp_path, monkeypatch):
    monkeypatch.setenv("TCB_CELL_MEMORY_LIMIT_MB", "1500")
    m = mx.build_matrix("smoke", {"models": ["mlp:d_model=8192,hidden=65536"], "phases": ["infer"],
                                  "batch_sizes": [4096], "warm_compile": False})
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    env = {"device": "cpu", "device_name": "x", "torch_version": "1", "hostname": "h"}
    row = measure_cell(m.cells[0], m, env, "oom", run_dir, SubprocessLauncher(sys.executable))
    assert row["status"] == "oom", row["error"]
    assert "allocate" in row["error"] or "Memory" in row["error"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_stop_cleanly_and_say_how_to_resume(tmp_path, sig):
    env = dict(os.environ, FAKE_CELL_SECONDS="0.4", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "collector", *MATRIX, "--out", str(tmp_path), "--run-id", "s",
           "--python", fake_python(tmp_path)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    cells = tmp_path / "s" / "cells"
    deadline = time.monotonic() + 120  # a loaded host starts slowly: stop once a cell is saved
    while time.monotonic() < deadline and not list(cells.glob("*.parquet")):
        time.sleep(0.1)
    time.sleep(0.3)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert "run the same command again to resume" in out
    files = list((tmp_path / "s" / "cells").glob("*.parquet"))
    assert 0 < len(files) < 16 and all(pq.read_table(f).num_rows == 1 for f in files)
    assert not list((tmp_path / "s" / "cells").glob(".*"))  # no temporary file left behind
