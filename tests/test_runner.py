"""Collector plumbing: scheduling, atomic rows, resume, locks, crashes and timeouts."""
import io
import json
import os
import re
import signal
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from collector.record import contract
from collector.host.launch import LauncherBase
from collector.plan import matrix as mx
from collector.host.launch import SubprocessLauncher
from collector.host.cell_measure import measure_cell
from collector.host.runner import RunError, collect, run_lock
from collector.record.schema import COLUMNS

ENV = {"device": "cpu", "device_name": "Test CPU", "torch_version": "9.9.9", "hostname": "h", "gpu_name": None}


class FakeLauncher(LauncherBase):
    """Returns canned results: eager 2 ms, compiled 1 ms; records what it was asked to run."""

    def __init__(self, fail_on=None):
        self.calls = []
        self.fail_on = fail_on

    def run(self, spec, cache_dir, log_path, timeout_s):
        self.calls.append((spec["cell"]["model"], spec["cell"]["mode"], spec["kind"] == "warm", cache_dir))
        assert cache_dir.exists()
        if spec["kind"] == "warm":
            return {"status": "ok", "warm_first_call_compiled_s": 0.5}
        if self.fail_on and self.fail_on == spec["cell"]["phase"]:
            return {"status": "runtime_error", "error": "boom"}
        return {"status": "ok", "eager_step_ms": [2.0] * 4, "compiled_step_ms": [1.0] * 4,
                "first_call_eager_s": 0.1, "first_call_compiled_s": 3.0}


def quiet_host():
    """The host's load as an uncrowded host's: the estimates' arithmetic, whatever else this machine runs."""
    return None


def _matrix(**over):
    return mx.build_matrix("smoke", {"models": ["mlp"], "modes": ["default"], "processes": 1, **over})


def test_collect_writes_one_complete_row_per_cell_and_resumes(tmp_path, capsys):
    m = _matrix()
    launcher = FakeLauncher(fail_on="train")
    run_dir = collect(m, ENV, tmp_path, "r1", launcher)
    files = sorted((run_dir / "cells").glob("*.parquet"))
    assert [f.stem for f in files] == sorted(c.cell_id for c in m.cells)
    rows = {r["phase"]: r for f in files for r in pq.read_table(f).to_pylist()}
    assert set(rows["infer"]) == set(COLUMNS)
    assert rows["infer"]["status"] == "ok" and rows["infer"]["warm_first_call_compiled_s"] == 0.5
    assert rows["train"]["status"] == "runtime_error" and rows["train"]["error"] == "boom"
    assert rows["train"]["warm_first_call_compiled_s"] is None  # no warm run after a failure
    # each cell got its own fresh cache directory, removed afterwards
    caches = [c[3] for c in launcher.calls]
    assert len({c for c in caches}) == 2 and not any(c.exists() for c in caches)
    out = capsys.readouterr().out
    assert "[1/2] mlp infer float32 bs=8 default" in out and "1 ok, 1 runtime_error" in out
    # a second run of the same matrix measures nothing again
    again = FakeLauncher()
    collect(m, ENV, tmp_path, "r1", again)
    assert again.calls == []
    assert "2 already done, 0 to measure" in capsys.readouterr().out
    manifest = json.loads((run_dir / "run.json").read_text())
    assert [s["cells_measured"] for s in manifest["sessions"]] == [2, 0]


def test_partial_file_from_a_killed_writer_is_not_a_result(tmp_path):
    m = _matrix()
    run_dir = tmp_path / "r2" / "cells"
    run_dir.mkdir(parents=True)
    (run_dir / f".{m.cells[0].cell_id}.parquet.123.tmp").write_bytes(b"half")
    launcher = FakeLauncher()
    collect(m, ENV, tmp_path, "r2", launcher)
    assert len([c for c in launcher.calls if not c[2]]) == 2


def test_refuses_other_environment_and_concurrent_collector(tmp_path):
    m = _matrix()
    collect(m, ENV, tmp_path, "r3", FakeLauncher())
    with pytest.raises(RunError, match="torch_version: run has '9.9.9', this machine '1.0'"):
        collect(m, {**ENV, "torch_version": "1.0"}, tmp_path, "r3", FakeLauncher())
    with pytest.raises(RunError, match="another protocol \\(blocks: 6 -> 3\\)"):
        collect(_matrix(blocks=3), ENV, tmp_path, "r3", FakeLauncher())
    with run_lock(tmp_path / "r3"):
        with pytest.raises(RunError, match="another collector is running"):
            collect(m, ENV, tmp_path, "r3", FakeLauncher())


def test_a_run_resumed_under_other_compile_settings_is_refused_unless_it_never_recorded_them(tmp_path):
    """compile_env (the torch.compile settings in the environment) must match on resume, like the torch;
    a run made before it was recorded resumes under any (its run.json cannot say)."""
    m = _matrix()
    collect(m, {**ENV, "compile_env": ""}, tmp_path, "ce", FakeLauncher())
    with pytest.raises(RunError, match="compile_env: run has '', this machine 'TORCHINDUCTOR_MAX_AUTOTUNE=1'"):
        collect(m, {**ENV, "compile_env": "TORCHINDUCTOR_MAX_AUTOTUNE=1"}, tmp_path, "ce", FakeLauncher())
    collect(m, {k: v for k, v in ENV.items() if k != "compile_env"}, tmp_path, "old", FakeLauncher())
    collect(m, {**ENV, "compile_env": "TORCHINDUCTOR_MAX_AUTOTUNE=1"}, tmp_path, "old", FakeLauncher())


def test_unwritable_output_is_a_clear_error_before_any_cell(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the runs folder should be")
    launcher = FakeLauncher()
    with pytest.raises(RunError, match="cannot write to"):
        collect(_matrix(), ENV, blocker, "r4", launcher)
    assert launcher.calls == []


def _fake_python(tmp_path: Path, body: str) -> str:
    path = tmp_path / "fakepython"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def test_crashing_cell_becomes_a_crashed_row_naming_its_last_step(tmp_path):
    launcher = SubprocessLauncher(_fake_python(
        tmp_path, "echo '[cell +   9.1s] eager first call 0.21 s'; echo about to die; "
                  "echo '[cell +  69.9s] AOTInductor package built in 62.0 s; loading'; kill -SEGV $$"))
    m = _matrix(phases=["infer"])
    row = measure_cell(m.cells[0], m, ENV, "r5", _mkrun(tmp_path), launcher)
    assert row["status"] == "crashed"
    assert "SIGSEGV" in row["error"] and "about to die" in row["error"]
    first_line = row["error"].splitlines()[0]
    assert first_line.endswith("without a result; last step logged: AOTInductor package built in 62.0 s; loading")


def test_a_crashed_cell_keeps_what_it_measured_before_dying(tmp_path):
    """The cell saves its result at every logged step (partial.json beside its result file);
    a process that dies afterwards still hands those figures to the row."""
    body = ("out=$4; echo '{\"first_call_eager_s\": 0.21, \"aot_export_s\": 2.5, \"aot_compile_s\": 74.7}' "
            "> $(dirname $out)/partial.json; echo '[cell +  85.5s] AOTInductor package built in 74.7 s; loading'; "
            "kill -SEGV $$")
    launcher = SubprocessLauncher(_fake_python(tmp_path, body))
    m = _matrix(phases=["infer"])
    row = measure_cell(m.cells[0], m, ENV, "r5p", _mkrun(tmp_path), launcher)
    assert row["status"] == "crashed" and "SIGSEGV" in row["error"]
    assert (row["first_call_eager_s"], row["aot_export_s"], row["aot_compile_s"]) == (0.21, 2.5, 74.7)
    assert row["aot_load_s"] is None  # the stage it died in has no figure


def test_hanging_cell_times_out_and_its_process_group_dies(tmp_path):
    pidfile = tmp_path / "pid"
    launcher = SubprocessLauncher(_fake_python(tmp_path, f"sleep 300 & echo $! > {pidfile}; wait"))
    m = _matrix(phases=["infer"], timeout_s=2)
    t0 = time.monotonic()
    row = measure_cell(m.cells[0], m, ENV, "r6", _mkrun(tmp_path), launcher)
    assert row["status"] == "timeout" and "no result within 2 s" in row["error"]
    assert time.monotonic() - t0 < 30
    child = int(pidfile.read_text())
    time.sleep(0.2)
    assert not _alive(child)  # the grandchild was killed with the group: nothing keeps the GPU


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in state


def _mkrun(tmp_path):
    d = tmp_path / "run"
    (d / "logs").mkdir(parents=True, exist_ok=True)
    return d


def test_sigterm_stops_collect_and_keeps_finished_cells(tmp_path):
    class Interrupting(FakeLauncher):
        def run(self, spec, cache_dir, log_path, timeout_s):
            if spec["cell"]["phase"] == "train":
                raise KeyboardInterrupt
            return super().run(spec, cache_dir, log_path, timeout_s)

    m = _matrix()
    with pytest.raises(KeyboardInterrupt):
        collect(m, ENV, tmp_path, "r7", Interrupting())
    done = list((tmp_path / "r7" / "cells").glob("*.parquet"))
    assert [f.stem for f in done] == ["mlp__infer__float32__bs8__default__model"]
    assert not list((tmp_path / "r7" / "cells").glob(".*tmp"))


def test_compact_file_stands_in_only_for_unchanged_cells(tmp_path):
    from analysis.data.load import discover_runs, load
    from collector.record.compact import COMPACT, read_index
    from collector.record.schema import write_row

    m = _matrix()
    run_dir = collect(m, ENV, tmp_path, "r8", FakeLauncher())
    assert len(read_index(run_dir)) == 2 and (run_dir / COMPACT).exists()
    cells = sorted((run_dir / "cells").glob("*.parquet"))
    # change one cell after compaction: the reader must take the new file, not the stale row
    row = pq.read_table(cells[0]).to_pylist()[0]
    row["eager_step_ms"] = [7.0] * 4
    time.sleep(0.01)
    write_row(row, cells[0])
    cells[1].unlink()  # and delete the other: its compacted row must not come back
    loaded = load(discover_runs(tmp_path))
    got = loaded.con.execute("SELECT cell_id, eager_step_ms FROM cells").fetchall()
    assert got == [(row["cell_id"], [7.0] * 4)]


def test_plan_workers_splits_cores_and_refuses_bad_lists():
    from collector.host.workers import Worker, plan_workers

    assert plan_workers(None) == [Worker()]
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) >= 2:
        a, b = plan_workers([0, 1])
        assert (a.gpu, b.gpu) == (0, 1)
        assert a.cpus and b.cpus and not set(a.cpus) & set(b.cpus)
    with pytest.raises(ValueError, match=">= 0"):
        plan_workers([0, -1])
    with pytest.raises(ValueError, match="CPU cores"):
        plan_workers(list(range(len(cores) + 1)))


def test_workers_get_whole_physical_cores(tmp_path, monkeypatch):
    """8 logical CPUs, 4 cores with two threads each, numbered the common way (sibling of i is
    i + 4): split by number, worker 0 would get 0-3 and worker 1 their siblings 4-7, so every
    core would run both workers. Split by core, each worker gets two whole cores."""
    from collector.host import workers

    for c in range(8):
        topo = tmp_path / f"cpu{c}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text("0\n")
        (topo / "core_id").write_text(f"{c % 4}\n")
    assert workers.physical_cores(list(range(8)), tmp_path) == [(0, 4), (1, 5), (2, 6), (3, 7)]
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda pid: set(range(8)))
    real = workers.physical_cores
    monkeypatch.setattr(workers, "physical_cores", lambda cpus: real(cpus, tmp_path))
    a, b = workers.plan_workers([0, 1])
    assert (a.cpus, b.cpus) == ((0, 1, 4, 5), (2, 3, 6, 7))
    monkeypatch.setenv("TCB_CPU_SPLIT", "logical")  # the old split, kept for the A/B on the GPU
    a, b = workers.plan_workers([0, 1])
    assert (a.cpus, b.cpus) == ((0, 1, 2, 3), (4, 5, 6, 7))
    monkeypatch.delenv("TCB_CPU_SPLIT")
    assert real([0, 1], tmp_path / "missing") == [(0,), (1,)]  # no topology: as before


def test_parse_gpus_names_the_valid_choices():
    from collector.commands.executors import parse_gpus

    cuda = {"device": "cuda", "gpu_count": 2}
    assert parse_gpus("", cuda) is None and parse_gpus("all", cuda) == [0, 1] and parse_gpus("1", cuda) == [1]
    with pytest.raises(ValueError, match=r"valid: 0\.\.1"):
        parse_gpus("0,2", cuda)
    with pytest.raises(ValueError, match="needs a CUDA device"):
        parse_gpus("0", ENV)


def test_workers_run_cells_concurrently_each_on_its_gpu_and_cores(tmp_path, monkeypatch):
    """Two workers through the real subprocess launcher: every cell once, the GPU and the
    core set each process saw are the worker's, the rows say where and how concurrently. Another
    collector's cells on the machine (a second suite) are left out of the count: the test checks
    what it controls (tests/test_neighbours.py checks that they are seen)."""
    from collector.host import neighbours
    from collector.host.workers import Worker

    monkeypatch.setattr(neighbours, "measuring", lambda proc=neighbours.PROC: {})

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two CPU cores")
    seen = tmp_path / "seen"
    seen.mkdir()
    # the fake cell: record CUDA_VISIBLE_DEVICES and its affinity, sleep (overlap), write a result
    body = (f'python3 -c "import os,sys; open(\'{seen}/\'+str(os.getpid()),\'w\').write('
            'os.environ.get(\'CUDA_VISIBLE_DEVICES\',\'-\')+\' \'+\',\'.join(map(str,sorted(os.sched_getaffinity(0))))'
            '+\' \'+repr(__import__(\'time\').time()))"; '
            'sleep 0.5; echo \'{"status": "ok", "eager_step_ms": [2.0], "compiled_step_ms": [1.0]}\' > "$4"')
    launcher = SubprocessLauncher(_fake_python(tmp_path, body))
    m = _matrix(phases=["infer", "train"], batch_sizes=[1, 2], warm_compile=False)
    workers = [Worker(gpu=0, cpus=(cores[0],)), Worker(gpu=1, cpus=(cores[1],))]
    run_dir = collect(m, ENV, tmp_path, "par", launcher, workers=workers)
    rows = [r for f in (run_dir / "cells").glob("*.parquet") for r in pq.read_table(f).to_pylist()]
    assert sorted(r["cell_id"] for r in rows) == sorted(c.cell_id for c in m.cells)  # each cell once
    assert {r["concurrent_cells"] for r in rows} == {2} and {r["gpu_index"] for r in rows} == {0, 1}
    records = [p.read_text().split() for p in seen.iterdir()]
    assert {(g, c) for g, c, _ in records} == {("0", str(cores[0])), ("1", str(cores[1]))}
    starts = sorted((float(t), g) for g, _, t in records)
    # cells of >= 0.5 s overlapped: some cell started on one GPU while the other's was running
    assert any(b[0] - a[0] < 0.5 and a[1] != b[1] for a, b in zip(starts, starts[1:]))
    manifest = json.loads((run_dir / "run.json").read_text())
    assert [w["gpu"] for w in manifest["sessions"][-1]["workers"]] == [0, 1]


def test_retry_failed_measures_only_failed_cells_again(tmp_path, capsys):
    m = _matrix()
    collect(m, ENV, tmp_path, "rt", FakeLauncher(fail_on="train"))
    plain = FakeLauncher()
    collect(m, ENV, tmp_path, "rt", plain)
    assert plain.calls == []  # resume: a failed row is a result too
    again = FakeLauncher()
    run_dir = collect(m, ENV, tmp_path, "rt", again, retry_failed=True)
    assert {(c[0], c[2]) for c in again.calls} == {("mlp", False), ("mlp", True)}  # the train cell, cold + warm
    rows = {r["phase"]: r for f in (run_dir / "cells").glob("*.parquet") for r in pq.read_table(f).to_pylist()}
    assert rows["train"]["status"] == "ok" and rows["infer"]["status"] == "ok"
    assert "1 already done, 1 to measure" in capsys.readouterr().out


def test_retry_measures_again_an_accuracy_failure_judged_against_eager_only(tmp_path):
    """An accuracy failure judged against eager (no float64 copy ran: out of memory beside other cells)
    is measured again by RETRY=1; one judged against float64 is a verdict and stays."""
    from collector.host.store import FAIL_AGAINST_EAGER, RunStore

    class Judged(FakeLauncher):
        def run(self, spec, cache_dir, log_path, timeout_s):
            result = FakeLauncher.run(self, spec, cache_dir, log_path, timeout_s)
            if spec["kind"] != "warm" and self.fail_on:
                ref = "eager" if spec["cell"]["phase"] == "infer" else "float64"
                result.update(status="accuracy_fail", accuracy_ok=False, accuracy_reference=ref,
                              error=f"compiled differs from the {ref} reference")
            return result

    m = _matrix()
    run_dir = collect(m, ENV, tmp_path, "ae", Judged(fail_on=True))
    assert sorted(RunStore(run_dir).saved().values()) == ["accuracy_fail", FAIL_AGAINST_EAGER]
    again = Judged()
    collect(m, ENV, tmp_path, "ae", again, retry_failed=True)
    assert {c[0] for c in again.calls} == {"mlp"} and len(again.calls) == 2  # the infer cell, cold + warm
    assert sorted(RunStore(run_dir).saved().values()) == ["accuracy_fail", "ok"]


def test_portable_cache_runs_a_third_process_on_an_empty_cache_directory(tmp_path):
    class Portable(FakeLauncher):
        def run(self, spec, cache_dir, log_path, timeout_s):
            seen = (spec.get("portable_path"), spec.get("portable_from"), spec["kind"] == "warm", cache_dir,
                    sorted(p.name for p in cache_dir.iterdir()))
            result = FakeLauncher.run(self, spec, cache_dir, log_path, timeout_s)
            self.calls[-1] = seen
            if spec.get("portable_path"):
                Path(spec["portable_path"]).write_bytes(b"artifacts")
                result["portable_cache_bytes"] = 9
            if spec.get("portable_from"):
                assert Path(spec["portable_from"]).read_bytes() == b"artifacts"
                result = {"status": "ok", "portable_first_call_compiled_s": 1.5, "portable_load_s": 0.1}
            return result

    m = _matrix(phases=["infer"], portable_cache=True)
    launcher = Portable()
    row = measure_cell(m.cells[0], m, ENV, "pc", _mkrun(tmp_path), launcher)
    cold, warm, portable = launcher.calls
    assert cold[0] and not cold[1] and warm[2] and portable[1] == cold[0]
    assert portable[3] != cold[3] and portable[4] == []  # its own cache directory, empty at the start
    assert "portable-cache.bin" in warm[4]  # the warm process shares the cold one's directory
    assert (row["portable_first_call_compiled_s"], row["portable_load_s"], row["portable_cache_bytes"]) == (1.5, 0.1, 9)
    assert not portable[3].exists()


def test_compact_file_of_an_older_schema_is_rebuilt(tmp_path):
    from collector.record.compact import COMPACT, META_KEY, compact_run, read_index

    run_dir = collect(_matrix(), ENV, tmp_path, "oldc", FakeLauncher())
    index = read_index(run_dir)
    assert len(index) == 2
    old = pq.read_table(run_dir / COMPACT)
    old = old.drop([old.schema.names[-1]])  # as an older collector wrote it: one column fewer
    pq.write_table(old.replace_schema_metadata({META_KEY: json.dumps(index).encode()}), run_dir / COMPACT)
    assert compact_run(run_dir) == 2
    assert pq.read_table(run_dir / COMPACT).schema.names == pq.read_table(
        next((run_dir / "cells").glob("*.parquet"))).schema.names


def test_session_records_a_fingerprint_of_the_collector_source(tmp_path, monkeypatch):
    from collector.host import store

    run_dir = collect(_matrix(), ENV, tmp_path, "fp", FakeLauncher())
    first = json.loads((run_dir / "run.json").read_text())["sessions"][-1]["collector_source_sha1"]
    assert len(first) == 16 and first == store.source_fingerprint()
    fake_root = tmp_path / "copy"
    (fake_root / "collector").mkdir(parents=True)
    (fake_root / "collector" / "cell.py").write_text("changed")
    monkeypatch.setattr(store, "PROJECT_ROOT", fake_root)
    assert store.source_fingerprint() != first  # other code, another fingerprint


@pytest.mark.parametrize("run_id,preset", [("default-h200", "default"), ("shapes-h200", "shapes")])
@pytest.mark.evidence
def test_shipped_h200_runs_resume_under_their_current_preset(tmp_path, capsys, run_id, preset):
    """A later GPU session continues a shipped run (data/examples/<run id>): the current preset and
    protocol must accept it and measure only the cells it lacks (none, once it is complete)."""
    import shutil

    from conftest import ROOT

    src = ROOT / "data" / "examples" / run_id
    shutil.copytree(src, tmp_path / run_id)
    env = json.loads((src / "run.json").read_text())["environment"]
    done = {p.stem for p in (src / "cells").glob("*.parquet")}
    with pytest.raises(RunError, match="another protocol \\(processes: 1 -> 3\\)"):
        collect(mx.build_matrix(preset), env, tmp_path, run_id, FakeLauncher())  # one process a cell then
    m = mx.build_matrix(preset, {"processes": 1})
    assert done <= {c.cell_id for c in m.cells}  # every measured cell is still in the preset
    launcher = FakeLauncher()
    collect(m, env, tmp_path, run_id, launcher)
    out = capsys.readouterr().out
    assert f"{len(done)} already done, {len(m.cells) - len(done)} to measure" in out
    cold = [c for c in launcher.calls if not c[2]]
    assert len(cold) == len(m.cells) - len(done)


@pytest.mark.parametrize("run_id,preset", [("repeat-h200-a", "repeat"), ("repeat-h200-b", "repeat"),
                                            ("default-h200-p3", "default"), ("shapes-h200-p3", "shapes")])
@pytest.mark.evidence
def test_shipped_replicate_runs_resume_under_their_preset(tmp_path, capsys, run_id, preset):
    """The 3-process runs resume under their current preset (its default protocol), each missing
    cell measured in 3 processes (one cell is removed from each copy: the H200 runs are complete)."""
    import shutil

    from conftest import ROOT

    src = ROOT / "data" / "examples" / run_id
    shutil.copytree(src, tmp_path / run_id)
    env = json.loads((src / "run.json").read_text())["environment"]
    done = {p.stem for p in (src / "cells").glob("*.parquet")}
    m = mx.build_matrix(preset)
    assert done <= {c.cell_id for c in m.cells}
    lost = sorted(done)[0]  # a cell lost from the copy is measured again, in 3 processes
    (tmp_path / run_id / "cells" / f"{lost}.parquet").unlink()
    done.discard(lost)
    launcher = ReplicateLauncher()
    collect(m, env, tmp_path, run_id, launcher)
    assert f"{len(done)} already done, {len(m.cells) - len(done)} to measure" in capsys.readouterr().out
    assert len(launcher.jobs) == 3 * (len(m.cells) - len(done))


def test_ctrl_c_with_concurrent_workers_keeps_finished_cells_and_kills_the_running_ones(tmp_path):
    """Two workers on the real subprocess launcher; Ctrl-C while both have a cell running: the
    finished cells stay, the running ones' process groups die, no partial file is left."""
    import subprocess
    import sys
    import textwrap

    from conftest import ROOT

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two CPU cores")
    pids = tmp_path / "pids"
    pids.mkdir()
    # a fake cell: the first two to take a token finish at once, every later one hangs
    fake = _fake_python(tmp_path, (
        f'sleep 300 & echo $! > {pids}/$$.child; '
        f'if mkdir {pids}/token1 2>/dev/null || mkdir {pids}/token2 2>/dev/null; then kill %1; '
        'echo \'{"status": "ok", "eager_step_ms": [2.0], "compiled_step_ms": [1.0]}\' > "$4"; exit 0; fi; wait'))
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import faulthandler, signal, sys
        faulthandler.register(signal.SIGUSR1)  # the test asks for every thread's stack if it hangs
        # Ctrl-C raises KeyboardInterrupt here however the suite was started: a shell without job
        # control starts background commands with SIGINT ignored, and Python then keeps it ignored
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.path.insert(0, {str(ROOT)!r})
        from collector.plan import matrix as mx
        from collector.host.launch import SubprocessLauncher
        from collector.host.runner import collect
        from collector.host.workers import Worker
        m = mx.build_matrix("smoke", {{"models": ["mlp"], "modes": ["default"], "processes": 1, "phases": ["infer", "train"],
                                       "batch_sizes": [1, 2, 4], "warm_compile": False}})
        env = {ENV!r}
        workers = [Worker(gpu=0, cpus=({cores[0]},)), Worker(gpu=1, cpus=({cores[1]},))]
        try:
            collect(m, env, {str(tmp_path)!r}, "cc", SubprocessLauncher({fake!r}), workers=workers)
        except KeyboardInterrupt:
            sys.exit(130)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    deadline = time.monotonic() + 30
    while len([p for p in pids.iterdir() if p.suffix == ".child"]) < 4 and time.monotonic() < deadline:
        time.sleep(0.1)  # two finished cells and two hanging ones
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # if it ever hangs: keep where
        proc.send_signal(signal.SIGUSR1)
        time.sleep(1)
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"the collector did not stop within 30 s of Ctrl-C; its output and stacks:\n{out}")
    assert proc.returncode == 130, out
    assert "interrupted: 2 cell(s) finished in this session are saved" in out
    cells = tmp_path / "cc" / "cells"
    assert len(list(cells.glob("*.parquet"))) == 2 and not list(cells.glob(".*tmp"))
    time.sleep(0.3)
    for child in pids.glob("*.child"):
        assert not _alive(int(child.read_text()))  # the hanging cells' process groups were killed


def test_progress_estimate_divides_by_the_workers():
    import io

    from collector.host.progress import Progress

    t = [0.0]
    for workers, expected in ((1, "about 4m00s left"), (2, "about 2m00s left")):
        out = io.StringIO()
        p = Progress(5, out=out, clock=lambda: t[0], workers=workers, load=quiet_host)
        p.start(1, "a")
        p.done({"cell_id": "a", "status": "ok"}, 60.0)
        p.start(2, "b")  # 4 cells left at 60 s each
        assert expected in out.getvalue().splitlines()[-1]


def test_progress_estimates_each_cell_left_from_the_finished_cells_most_like_it():
    """A fast cell (10 s) and a slow one (100 s), then four more like the fast one: the estimate is
    the 40 s they will take, where the mean of all (55 s a cell) would say 220 s; an interpreter's
    copy of a cell already measured under another counts that one's time."""
    from collector.host.progress import Progress

    plan = [(0, "a", "infer", "default"), (0, "b", "train", "default")] + [(0, "a", "infer", "default")] * 4
    p = Progress(6, out=io.StringIO(), plan=plan, load=quiet_host)
    assert p.estimate_left(1) is None
    p.done({"status": "ok"}, 10.0, k=1)
    p.done({"status": "ok"}, 100.0, k=2)
    assert p.estimate_left(3) == pytest.approx(40.0)
    assert Progress(6, out=io.StringIO(), load=quiet_host).estimate_left(3) is None
    q = Progress(4, out=io.StringIO(), plan=[(0, "a", "infer", "default"), (0, "b", "infer", "default"),
                                             (1, "a", "infer", "default"), (1, "c", "infer", "max-autotune")],
                 load=quiet_host)
    q.done({"status": "ok"}, 10.0, k=1)
    q.done({"status": "ok"}, 30.0, k=2)
    assert q.estimate_left(3) == pytest.approx(10.0 + 20.0)  # a's copy: 10 s; c: the mean of all, 20 s


def test_progress_expects_the_next_cell_from_the_cells_most_like_it_with_its_interpreters_start():
    """Progress.expected, which the time budget reads: nothing before any cell; a cell like a finished
    one takes that one's time (its interpreter's start, 14 s, set apart); the first cell of an
    interpreter not started yet adds that start; on a host twice as crowded as then, twice as long."""
    from collector.host.progress import Progress

    load = [None]
    plan = [(0, "a", "infer", "default"), (0, "a", "infer", "default"), (1, "a", "infer", "default")]
    p = Progress(3, out=io.StringIO(), plan=plan, load=lambda: load[0], cpus=2)
    assert p.expected(2) is None
    p.done({"status": "ok"}, 30.0, k=1, startup=14.0)
    assert p.expected(2) == pytest.approx(16.0)
    assert p.expected(3) == pytest.approx(16.0 + 14.0)
    load[0] = 2.0
    assert p.expected(2) == pytest.approx(32.0)


def test_stop_after_budget_starts_no_cell_it_cannot_finish_and_the_same_command_resumes(tmp_path, capsys):
    """Cells of 20 s (a cold and a warm process of 10 s on the fake clock). A budget of 25 s: the first
    cell starts, the next is not started with 5 s left, since the cells so far say it takes 20 s (a
    device's hard limit would have killed it halfway). The same command with 15 s starts its first cell
    whatever the estimate (every command makes progress), and then has none left. Without a budget, it
    measures the rest."""
    m = mx.build_matrix("smoke", {"models": ["mlp"], "modes": ["default"], "batch_sizes": [2, 4, 8], "processes": 1})
    assert len(m.cells) == 6
    now = [0.0]

    class Slow(FakeLauncher):  # each cell process "takes" 10 s of the fake clock
        def run(self, spec, cache_dir, log_path, timeout_s):
            now[0] += 10.0
            return super().run(spec, cache_dir, log_path, timeout_s)

    run_dir = collect(m, ENV, tmp_path, "rb", Slow(), clock=lambda: now[0], stop_after_s=25)
    assert len(list((run_dir / "cells").glob("*.parquet"))) == 1
    out = capsys.readouterr().out
    assert re.search(r"time budget of 25 s nearly spent: the next cell, mlp infer .*, should take about 20 s, "
                     r"more than the 5 s left: 5 cell\(s\) not started; run the same command again", out), out
    collect(m, ENV, tmp_path, "rb", Slow(), clock=lambda: now[0], stop_after_s=15)
    assert len(list((run_dir / "cells").glob("*.parquet"))) == 2
    assert "time budget of 15 s reached: 4 cell(s) not started" in capsys.readouterr().out
    collect(m, ENV, tmp_path, "rb", Slow(), clock=lambda: now[0])
    assert len(list((run_dir / "cells").glob("*.parquet"))) == 6
    assert "2 already done, 4 to measure" in capsys.readouterr().out


class ReplicateLauncher(LauncherBase):
    """Cold and replicate processes with distinct samples; replicate 2 can be made to crash."""

    def __init__(self, crash_replicate=None, stages=()):
        self.jobs = []
        self.crash_replicate = crash_replicate
        self.stages = list(stages)  # each process's process_stages_json, cold first

    def run(self, spec, cache_dir, log_path, timeout_s):
        self.jobs.append(spec)
        kind, i = spec["kind"], spec["replicate"]
        if kind == "replicate" and i == self.crash_replicate:
            return {"status": "crashed", "error": "cell process died (killed by signal SIGSEGV)\nlog tail"}
        if kind == "warm":
            return {"status": "ok", "warm_first_call_compiled_s": 9.0}
        out = {"status": "ok", "eager_step_ms": [2.0 + i] * 6, "compiled_step_ms": [1.0 + i] * 6,
               "eager_block_wall_ms": [2.0 + i] * 3, "compiled_block_wall_ms": [1.0 + i] * 3,
               "steps_per_block": 2, "steps_per_sample": 4,
               "process_stages_json": self.stages[i] if i < len(self.stages) else None}
        if kind == "cold":
            out.update(first_call_eager_s=0.1, first_call_compiled_s=3.0)
            if spec["protocol"].get("plant_slowdown_pct"):
                out.update(planted_slowdown_pct=10.0, planted_delay_ms=0.125)
        else:
            out.update(warm_first_call_compiled_s=0.5 + 0.1 * i)
        return out


def test_replicates_plant_the_cold_process_delay(tmp_path):
    """A planted slowdown is calibrated once, in the cold process; every replicate adds the same
    absolute time (a recalibration in each process would plant a different change in each)."""
    m = _matrix(processes=3, phases=["infer"], plant_slowdown_pct=10)
    launcher = ReplicateLauncher()
    measure_cell(m.cells[0], m, ENV, "r", tmp_path, launcher)
    assert [j["layout"]["planted_delay_ms"] for j in launcher.jobs[1:]] == [0.125, 0.125]


def test_replicate_processes_append_their_samples_process_after_process(tmp_path):
    m = _matrix(processes=3, phases=["infer"])
    launcher = ReplicateLauncher()
    row = measure_cell(m.cells[0], m, ENV, "r", tmp_path, launcher)
    kinds = [(j["kind"], j["replicate"]) for j in launcher.jobs]
    assert kinds == [("cold", 0), ("replicate", 1), ("replicate", 2)]  # no separate warm process
    # the replicates time with the cold process's layout, on its (warm) cache directory
    assert all(j["layout"] == {"steps_per_block": 2, "steps_per_sample": 4, "planted_delay_ms": None}
               for j in launcher.jobs[1:])
    assert row["processes"] == 3 and row["status"] == "ok"
    assert row["eager_step_ms"] == [2.0] * 6 + [3.0] * 6 + [4.0] * 6
    assert row["compiled_block_wall_ms"] == [1.0] * 3 + [2.0] * 3 + [3.0] * 3
    assert row["warm_first_call_compiled_s"] == pytest.approx(0.65)  # median of the replicates' warm first calls
    assert len(row["process_wall_s"]) == 3 and row["process_errors"] is None


def test_the_row_lists_each_processs_stages_in_process_order_null_where_one_said_none(tmp_path):
    """process_stages_json: the processes' splits cold first, as process_wall_s; a crashed process (no result) and
    one whose text is not a list of one split are null there; a row none of whose processes said is null."""
    m = _matrix(processes=3, phases=["infer"])
    cold, rep1 = json.dumps([{"build": 2.0, "compile": 3.0}]), json.dumps([{"build": 1.5, "compile": 0.5}])
    row = measure_cell(m.cells[0], m, ENV, "r", tmp_path, ReplicateLauncher(crash_replicate=2, stages=[cold, rep1]))
    assert json.loads(row["process_stages_json"]) == [{"build": 2.0, "compile": 3.0}, {"build": 1.5, "compile": 0.5},
                                                      None]
    assert len(row["process_wall_s"]) == 3
    row = measure_cell(m.cells[0], m, ENV, "r", tmp_path, ReplicateLauncher(stages=["not json", "{}", "[]"]))
    assert row["process_stages_json"] is None


def test_a_failed_replicate_is_named_and_the_cell_keeps_the_others(tmp_path):
    m = _matrix(processes=3, phases=["infer"])
    row = measure_cell(m.cells[0], m, ENV, "r", tmp_path, ReplicateLauncher(crash_replicate=2))
    assert row["processes"] == 2 and row["status"] == "ok"
    assert row["eager_step_ms"] == [2.0] * 6 + [3.0] * 6
    assert row["process_errors"].startswith("process 3: crashed: cell process died (killed by signal SIGSEGV)")


def test_one_process_keeps_the_separate_warm_compile(tmp_path):
    m = _matrix(processes=1, phases=["infer"])
    launcher = ReplicateLauncher()
    row = measure_cell(m.cells[0], m, ENV, "r", tmp_path, launcher)
    assert [j["kind"] for j in launcher.jobs] == ["cold", "warm"]
    assert row["processes"] == 1 and row["warm_first_call_compiled_s"] == 9.0


def test_job_refuses_unknown_fields_and_incomplete_jobs():
    from collector.plan.job import Job, JobError

    cell = {"model": "mlp", "phase": "infer", "dtype": "float32", "batch_size": 8, "mode": "default",
            "compile_scope": "model"}
    good = {"kind": "cold", "cell": cell, "protocol": {}, "device": "cpu"}
    job = Job.from_json(good)
    assert job.kind == "cold" and job.cell.phase == "infer" and job.protocol.processes == 3  # typed records
    with pytest.raises(JobError, match="phase"):
        Job.from_json({**good, "cell": {k: v for k, v in cell.items() if k != "phase"}})
    with pytest.raises(JobError, match="colour"):
        Job.from_json({**good, "cell": {**cell, "colour": "red"}})
    with pytest.raises(JobError, match="unknown job field\\(s\\) warm_only"):
        Job.from_json({**good, "warm_only": True})
    with pytest.raises(JobError, match="layout"):
        Job.from_json({**good, "kind": "replicate"})
    with pytest.raises(JobError, match="unknown job kind 'hot'"):
        Job.from_json({**good, "kind": "hot"})
    rep = Job.from_json({**good, "kind": "replicate", "layout": {"steps_per_block": 3, "steps_per_sample": 2}})
    assert rep.layout.steps_per_block == 3 and Job.from_json(rep.to_json()) == rep


def test_a_stop_whose_raise_was_lost_still_stops_at_the_next_process(tmp_path):
    """A signal that lands while a cell process is forked raises inside an at-fork handler, where
    Python drops the KeyboardInterrupt; the handler's flag (runner.INTERRUPTED) must still stop
    the collection before the next process, with the finished cells kept."""
    from collector.host import runner

    class LosesTheRaise(FakeLauncher):
        def run(self, spec, cache_dir, log_path, timeout_s):
            out = super().run(spec, cache_dir, log_path, timeout_s)
            if len(self.calls) == 2:
                runner.INTERRUPTED.set()  # as the handler does; its raise never surfaces here
            return out

    launcher = LosesTheRaise()
    try:
        with pytest.raises(KeyboardInterrupt):
            collect(_matrix(processes=3), ENV, tmp_path, "lost", launcher)
    finally:
        runner.INTERRUPTED.clear()
    assert len(launcher.calls) == 2  # the cold process and one replicate; nothing started after
    assert list((tmp_path / "lost" / "cells").glob("*.parquet")) == []  # the interrupted cell is not saved


class TuningLauncher(ReplicateLauncher):
    """As ReplicateLauncher, and each process that compiles into an empty cache leaves an autotuned
    kernel there the way Inductor does (a best_config beside the kernel's source): the cold process
    and replicate 2 choose XBLOCK=1024, replicate 1 XBLOCK=512. Records each process's cache."""

    def __init__(self):
        super().__init__()
        self.caches = []

    def run(self, spec, cache_dir, log_path, timeout_s):
        self.caches.append((Path(cache_dir), any(Path(cache_dir).rglob("*.best_config"))))
        d = Path(cache_dir) / "inductor" / "ab"
        if not any(Path(cache_dir).rglob("*.best_config")):
            d.mkdir(parents=True, exist_ok=True)
            (d / "cab.py").write_text("def triton_poi_fused__to_copy_8(in_ptr0, xnumel):\n    pass\n")
            x = 512 if spec["replicate"] == 1 else 1024
            (d / "k.best_config").write_text(json.dumps({"XBLOCK": x, "num_warps": 4, "num_stages": 1}))
        return super().run(spec, cache_dir, log_path, timeout_s)


@pytest.mark.parametrize("cold", [False, True])
def test_cold_replicates_compile_in_their_own_empty_caches(tmp_path, cold):
    """COLD_REPLICATES=1: every replicate gets an empty cache of its own (removed after it), its first
    call is a cold one (kept per process, no warm-cache figure), and its own autotuning draw is kept
    beside the cold process's; by default the replicates share the cold process's warm cache."""
    m = _matrix(processes=3, phases=["infer"], cold_replicates=cold)
    launcher = TuningLauncher()
    row = measure_cell(m.cells[0], m, ENV, "r", tmp_path / "run", launcher)
    caches = [c for c, _ in launcher.caches]
    warm_at_start = [w for _, w in launcher.caches]
    assert row["process_first_call_compiled_s"] == [3.0, pytest.approx(0.6), pytest.approx(0.7)]
    tuned = json.loads(row["autotune_json"])
    assert tuned["kernels"] == {"triton_poi_fused__to_copy_8": "XBLOCK=1024 num_warps=4 num_stages=1"}
    if cold:
        assert len(set(caches)) == 3 and warm_at_start == [False, False, False]
        assert not any(c.exists() for c in caches)  # every scratch cache removed
        assert row["replicate_cache"] == "cold" and row["warm_first_call_compiled_s"] is None
        assert tuned["replicates"] == [
            {"differ": 1, "kernels": {"triton_poi_fused__to_copy_8": "XBLOCK=512 num_warps=4 num_stages=1"}},
            {"differ": 0, "kernels": {}}]
        # read back per process (collector.record.contract.autotune_processes, the record's inverse)
        per = contract.autotune_processes(tuned)
        assert [k["triton_poi_fused__to_copy_8"].split()[0] for k in per] == ["XBLOCK=1024", "XBLOCK=512", "XBLOCK=1024"]
    else:
        assert contract.autotune_processes(tuned) is None
        assert len(set(caches)) == 1 and warm_at_start == [False, True, True]
        assert row["replicate_cache"] == "warm" and row["warm_first_call_compiled_s"] == pytest.approx(0.65)
        assert "replicates" not in tuned


def test_project_sha_says_dirty_where_tracked_files_differ_from_the_commit(tmp_path):
    """run.json's project_git_sha: the commit, '-dirty' once a tracked file changed (a working tree
    copied beside older git metadata, as on a lent GPU machine), None outside a git checkout."""
    import subprocess
    from collector.host.store import _project_sha
    assert _project_sha(tmp_path) is None
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "a.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "a.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / "new.txt").write_text("untracked files do not make it dirty\n")
    assert _project_sha(tmp_path) == sha
    (tmp_path / "a.py").write_text("x = 2\n")
    assert _project_sha(tmp_path) == sha + "-dirty"


def test_the_fork_parents_start_inside_the_first_cell_is_not_projected_onto_every_cell(tmp_path, capsys):
    """A launcher whose parent starts (import_s set) during the first cell: 14 s of the first cell's 20 s
    are the start; the estimate at the second of 4 cells is 3 cells at 6 s, not 3 at 20 s."""
    m = mx.build_matrix("smoke", {"models": ["mlp"], "modes": ["default"], "batch_sizes": [2, 4], "processes": 1})
    assert len(m.cells) == 4
    now = [0.0]

    class Parent(FakeLauncher):
        import_s = None

        def run(self, spec, cache_dir, log_path, timeout_s):
            if self.import_s is None:  # the parent starts with the first process it runs
                self.import_s = 14.0
                now[0] += 14.0
            now[0] += 3.0  # each process (cold and warm) 3 s of the fake clock
            return super().run(spec, cache_dir, log_path, timeout_s)

    collect(m, ENV, tmp_path, "ps", Parent(), clock=lambda: now[0])
    out = capsys.readouterr().out
    second = next(line for line in out.splitlines() if line.startswith("[2/4]"))
    assert "about 18s left" in second, out
    assert "[20s]" in out  # the first cell's own line keeps its whole wall time
