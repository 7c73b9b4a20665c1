"""Co-location measured from the host's processes (collector/host/neighbours.py): real processes that
look like another collector's cell processes, started outside this process tree."""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collector.plan import matrix as mx
from collector.host import neighbours
from collector.host.launch import LauncherBase
from collector.host.cell_measure import measure_cell

ENV = {"device": "cpu", "device_name": "Test CPU", "torch_version": "9.9.9", "hostname": "h", "gpu_name": None}
pytestmark = pytest.mark.skipif(not Path("/proc/self/ns/uts").exists(), reason="needs Linux /proc")


def _detached(tmp_path, code: str, module: str, prefix: str = "") -> int:
    """Start `python -c CODE -m MODULE` so that it is not our descendant (its shell exits at once);
    returns its pid."""
    pidfile = tmp_path / f"pid-{time.monotonic_ns()}"
    script = f"{prefix} {sys.executable} -c '{code}' -m {module} & echo $! > {pidfile}"
    subprocess.run(["sh", "-c", script], check=True)
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.02)
    pid = int(pidfile.read_text())
    time.sleep(0.3)  # let it exec and (for a fork parent) fork
    return pid


@pytest.fixture
def reaper():
    pids = []
    yield pids
    for pid in pids:
        subprocess.run(["pkill", "-KILL", "-P", str(pid)], check=False)
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def test_another_collectors_cell_process_is_seen_and_our_own_is_not(tmp_path, reaper):
    theirs = _detached(tmp_path, "import time; time.sleep(30)", "collector.child.cell")
    reaper.append(theirs)
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "-m", "collector.child.cell"])
    try:
        time.sleep(0.3)
        seen = neighbours.other_cells()
        assert str(theirs) in seen and str(ours.pid) not in seen
    finally:
        ours.kill()
        ours.wait()


def test_a_fork_parents_child_counts_and_the_idle_parent_does_not(tmp_path, reaper):
    parent = _detached(tmp_path, "import os, time; os.fork(); time.sleep(30)", "collector.host.zygote")
    reaper.append(parent)
    seen = neighbours.other_cells()
    mine = {p for p, pp in neighbours.measuring().items() if pp == str(parent)}
    assert len(mine) == 1 and mine <= seen and str(parent) not in seen


def test_a_cell_on_another_host_namespace_is_not_a_neighbour(tmp_path, reaper):
    """The local test cluster's second node is a UTS namespace of this machine."""
    if not shutil.which("unshare") or subprocess.run(["unshare", "-u", "true"]).returncode != 0:
        pytest.skip("cannot make a UTS namespace here")
    other_host = _detached(tmp_path, "import time; time.sleep(30)", "collector.child.cell", prefix="unshare -u")
    reaper.append(other_host)
    assert str(other_host) in neighbours.measuring() and str(other_host) not in neighbours.other_cells()


def _only_ours(monkeypatch, started: list) -> None:
    """Count only the cell processes this test started (and their children): on a shared machine
    another suite's or collector's cells measure beside ours, and the test checks what it controls.
    The real reading of the process table still runs; only what it finds is narrowed."""
    real = neighbours.measuring

    def ours(proc=neighbours.PROC):
        pids = {str(p) for p in started}
        return {p: pp for p, pp in real(proc).items() if p in pids or pp in pids}

    monkeypatch.setattr(neighbours, "measuring", ours)


class SlowLauncher(LauncherBase):
    def run(self, spec, cache_dir, log_path, timeout_s):
        time.sleep(0.5)
        return {"status": "ok", "eager_step_ms": [2.0] * 4, "compiled_step_ms": [1.0] * 4,
                "first_call_eager_s": 0.1, "first_call_compiled_s": 3.0}


def test_a_cell_measured_beside_another_collectors_cell_records_it(tmp_path, reaper, monkeypatch):
    m = mx.build_matrix("smoke", {"models": ["mlp"], "modes": ["default"], "processes": 1})
    cell = m.cells[0]
    (tmp_path / "logs").mkdir()
    monkeypatch.setattr(neighbours, "INTERVAL_S", 0.1)
    _only_ours(monkeypatch, reaper)
    alone = measure_cell(cell, m, ENV, "r", tmp_path, SlowLauncher())
    reaper.append(_detached(tmp_path, "import time; time.sleep(30)", "collector.child.cell"))
    beside = measure_cell(cell, m, ENV, "r", tmp_path, SlowLauncher())
    two_workers = measure_cell(cell, m, ENV, "r", tmp_path, SlowLauncher(), concurrent=2)
    assert (alone["concurrent_cells"], beside["concurrent_cells"], two_workers["concurrent_cells"]) == (1, 2, 3)


def test_the_report_says_how_a_slurm_run_was_collected_and_which_cells_had_neighbours(tmp_path):
    from types import SimpleNamespace

    from analysis.explain import provenance

    run = SimpleNamespace(path=tmp_path, manifest={"sessions": [
        {"hostname": "login", "executor": "slurm", "slurm_arrays": ["15"]},
        {"hostname": "login", "executor": "slurm", "slurm_arrays": ["9", "12"]}]})
    rows = [{"cell_id": f"c{i}", "hostname": h, "concurrent_cells": n, "gpu_index": None}
            for i, (h, n) in enumerate([("vm", 2), ("vm", 2), ("node2", 1)])]
    notes = provenance.collection_notes(run, rows)
    assert notes[0] == ("Collected through SLURM: 2 submissions (job arrays 9, 12, 15); "
                        "cells ran on node2 (1 cell), vm (2 cells).")
    (seen,) = [n for n in notes if n.startswith("2 of 3 cells were measured with up to 2 cells running at once on "
                                                "their host, seen measuring on the host beside them")]
    assert "GPU-bound steps are unaffected" not in seen and "GPU-bound ones too" in seen  # it may share the GPU
    local = SimpleNamespace(manifest={"sessions": [{"hostname": "vm"}]})
    gpus = [{"hostname": "vm", "concurrent_cells": 2, "gpu_index": i} for i in (0, 1)]
    assert provenance.collection_notes(local, gpus)[0].startswith(
        "2 of 2 cells were measured with up to 2 cells running at once on this host, one per GPU")
    shared = [{"hostname": "vm", "concurrent_cells": 2, "gpu_index": 0, "timing_wait_s": [w]} for w in (0.0, 3.1)]
    (note,) = provenance.collection_notes(local, shared)
    assert note.startswith("2 of 2 cells were measured with up to 2 cells running at once on this host, sharing a "
                           "GPU (GPUS=0,0): their timed blocks took turns") and "another collector" not in note
    assert "launch-bound" in note and "measured alone" in note
    assert "cold compiles shared the cores with the others' compiles" in note  # su-h100-*: first calls not alone
    assert provenance.several_machines(run, rows) and not provenance.several_machines(local, gpus)


def test_the_collector_says_once_when_another_collectors_cell_measures_beside_its_own(tmp_path, reaper, monkeypatch):
    import io

    from collector.host.runner import collect

    monkeypatch.setattr(neighbours, "INTERVAL_S", 0.1)
    _only_ours(monkeypatch, reaper)
    reaper.append(_detached(tmp_path, "import time; time.sleep(30)", "collector.child.cell"))
    m = mx.build_matrix("smoke", {"models": ["mlp"], "modes": ["default"], "processes": 1})
    out = io.StringIO()
    collect(m, ENV, tmp_path, "r", SlowLauncher(), out=out)
    notes = [ln for ln in out.getvalue().splitlines() if ln.startswith("note: 1 cell(s) of another collector")]
    assert len(notes) == 1 and len(m.cells) > 1, out.getvalue()


def test_the_report_names_the_compile_settings_the_run_was_collected_with():
    """A run whose run.json recorded torch.compile settings in the environment (compile_env) says so
    among its notes, with a word on TORCH_LOGS; none recorded or none set: nothing."""
    from types import SimpleNamespace
    from analysis.explain import provenance

    def notes(env):
        run = SimpleNamespace(manifest={"sessions": [], "environment": env})
        return [n for n in provenance.collection_notes(run, [])
                if "torch.compile settings" in n]

    got = notes({"compile_env": "TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 TORCH_LOGS=guards"})
    assert len(got) == 1 and "TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 TORCH_LOGS=guards" in got[0]
    assert "with TORCH_LOGS the compiles also write their logs" in got[0]
    assert "TORCH_LOGS the" not in notes({"compile_env": "TORCHINDUCTOR_MAX_AUTOTUNE=1"})[0]
    assert notes({"compile_env": ""}) == [] and notes({}) == []


def test_a_run_whose_cells_took_turns_on_one_gpu_says_so_in_its_report_not_that_a_neighbour_shared_it(tmp_path):
    """tt-3-s (three cells at a time on one H200, GPUS=0,0,0), rendered: the report reads each row's wait
    for the timing lock, so its note is the shared GPU's, not the one for an unknown neighbour."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    shutil.copytree(root / "data" / "examples" / "tt-3-s", tmp_path / "data" / "tt-3-s")
    done = subprocess.run([sys.executable, "-m", "analysis", "--data", str(tmp_path / "data"), "--run", "tt-3-s",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stderr
    md = (tmp_path / "out" / "tt-3-s" / "report.md").read_text()
    assert "running at once on this host, sharing a GPU (GPUS=0,0)" in md and "seen measuring on the host" not in md
    assert "ran beside another cell (two or more on a GPU, timed in turn" in md
