"""The SLURM executor: submission, what a node does (environment check, claim, atomic row),
progress, lost tasks and their resubmission. First with a fake scheduler (the plumbing), then
against a real one-node SLURM cluster when one is up (CI starts it: .ci/slurm-up.sh)."""
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import pytest

from collector.launch import LauncherBase
from collector import matrix as mx
from collector import runner, slurm
from collector.store import RunStore
from conftest import ROOT

ENV = {"device": "cpu", "device_name": "x", "torch_version": "1", "hostname": "h"}


class OkLauncher(LauncherBase):
    def __init__(self, *args, **kwargs):
        pass

    def run(self, spec, cache_dir, log_path, timeout_s):
        return {"status": "ok", "eager_step_ms": [2.0] * 4, "compiled_step_ms": [1.0] * 4}


class FakeScheduler:
    """Records the array it is given; `states` answers from `live` (job id -> state)."""

    def __init__(self):
        self.jobs, self.live, self.next = [], {}, 100

    def submit(self, jobs, folder):
        ids = [f"{self.next}_{i}" for i in range(len(jobs))]
        self.next += 1
        self.jobs += list(zip(ids, jobs))
        self.live.update({i: "PENDING" for i in ids})
        return ids

    def states(self, ids):
        return {i: s for i, s in self.live.items() if i in ids}

    def run(self, job_id, monkeypatch, node_env=ENV):
        """The task `job_id` runs on a node: returns run_cell_job's answer; the job then leaves the queue."""
        job = dict(self.jobs)[job_id]
        monkeypatch.setattr(slurm, "node_environment", lambda python, device: dict(node_env))
        monkeypatch.setattr(runner, "SubprocessLauncher", OkLauncher)
        monkeypatch.setattr(runner, "ForkLauncher", OkLauncher)
        monkeypatch.setenv("SLURM_ARRAY_JOB_ID", job_id.split("_")[0])
        monkeypatch.setenv("SLURM_ARRAY_TASK_ID", job_id.split("_")[1])
        self.live[job_id] = "RUNNING"
        try:
            return slurm.run_cell_job(job)
        finally:
            del self.live[job_id]


def _matrix(**kw):
    return mx.build_matrix("smoke", {"models": ["mlp"], "processes": 1, **kw})


def test_submit_queues_one_task_per_cell_and_status_follows_them(tmp_path, monkeypatch, capsys):
    m = _matrix()
    sched = FakeScheduler()
    run_dir = slurm.submit_run(m, ENV, tmp_path, "r", sched, settings=slurm.SlurmSettings(partition="gpu"))
    out = capsys.readouterr().out
    assert f"submitted {len(m.cells)} cell(s)" in out and "make collect-status RUN=r" in out
    assert sorted(j.cell_id for _, j in sched.jobs) == sorted(c.cell_id for c in m.cells)
    st = slurm.status(run_dir, sched.states)
    assert st["counts"] == {"queued": len(m.cells)}
    first = sched.jobs[0][0]
    assert sched.run(first, monkeypatch) == "ok"
    st = slurm.status(run_dir, sched.states)
    assert st["counts"] == {"done": 1, "queued": len(m.cells) - 1}
    walls = RunStore(run_dir).cell_walls()  # the ETA: median cell wall x cells left, one at a time
    assert walls and st["eta_s"] == pytest.approx(statistics.median(walls) * (len(m.cells) - 1))
    assert not list((run_dir / "claims").iterdir())  # released after the row was written
    # submitting again queues nothing: every cell has a row or a live task
    slurm.submit_run(m, ENV, tmp_path, "r", sched)
    assert "nothing to submit" in capsys.readouterr().out and len(sched.jobs) == len(m.cells)
    saved = json.loads((run_dir / "slurm" / "submissions.json").read_text())
    assert saved["settings"]["partition"] == "gpu" and len(saved["matrix"]["cells"]) == len(m.cells)


def test_a_lost_task_is_reported_and_resubmitted_alone(tmp_path, monkeypatch, capsys):
    m = _matrix()
    sched = FakeScheduler()
    run_dir = slurm.submit_run(m, ENV, tmp_path, "r", sched)
    ids = [i for i, _ in sched.jobs]
    sched.run(ids[0], monkeypatch)
    # ids[1] was cancelled (or preempted, or hit its time limit) while it held its claim
    lost_cell = dict(sched.jobs)[ids[1]].cell_id
    RunStore(run_dir).claim(lost_cell, {"job_id": ids[1]})
    del sched.live[ids[1]]
    st = slurm.status(run_dir, sched.states)
    assert st["cells"][lost_cell] == "lost" and "RESUBMIT=1" in slurm.format_status(st)
    slurm.submit_run(m, ENV, tmp_path, "r", sched)
    out = capsys.readouterr().out
    assert "released 1 claim(s)" in out and "submitted 1 cell(s)" in out
    new_id, job = sched.jobs[-1]
    assert job.cell_id == lost_cell
    assert sched.run(new_id, monkeypatch) == "ok"  # the stale claim no longer blocks it
    assert slurm.status(run_dir, sched.states)["cells"][lost_cell] == "done"


def test_two_tasks_given_one_cell_measure_it_once(tmp_path, monkeypatch):
    m = _matrix()
    sched = FakeScheduler()
    run_dir = slurm.submit_run(m, ENV, tmp_path, "r", sched)
    a, job = sched.jobs[0]
    sched.jobs.append(("999_0", job))  # the same cell submitted twice (two submitters, a requeue)
    sched.live["999_0"] = "PENDING"
    RunStore(run_dir).claim(job.cell_id, {"job_id": "999_0"})  # the other task is measuring it
    assert sched.run(a, monkeypatch) == "claimed elsewhere"
    assert not (run_dir / "cells" / f"{job.cell_id}.parquet").exists()
    RunStore(run_dir).release(job.cell_id)
    assert sched.run("999_0", monkeypatch) == "ok"
    assert sched.run(a, monkeypatch) == "claimed elsewhere"  # its row exists now
    assert len(list((run_dir / "cells").glob("*.parquet"))) == 1


def test_a_node_with_another_torch_writes_nothing_unless_mixing_is_allowed(tmp_path, monkeypatch):
    m = _matrix()
    sched = FakeScheduler()
    run_dir = slurm.submit_run(m, ENV, tmp_path, "r", sched)
    other = dict(ENV, torch_version="2")
    got = sched.run(sched.jobs[0][0], monkeypatch, node_env=other)
    assert got.startswith("refused: torch_version: run '1', node '2'")
    assert not list((run_dir / "cells").glob("*.parquet"))
    assert slurm.status(run_dir, sched.states)["cells"][sched.jobs[0][1].cell_id] == "refused"
    mixed = slurm.submit_run(_matrix(), ENV, tmp_path, "m", sched, allow_mixed=True)
    assert sched.run(sched.jobs[-1][0], monkeypatch, node_env=other) == "ok"
    assert len(list((mixed / "cells").glob("*.parquet"))) == 1


def test_a_gpu_run_submitted_from_a_host_without_one_takes_the_first_nodes_gpu(tmp_path, monkeypatch):
    m = _matrix()
    sched = FakeScheduler()
    login = dict(ENV, device="cuda", device_name=None)
    run_dir = slurm.submit_run(m, login, tmp_path, "g", sched)
    h200 = dict(ENV, device="cuda", device_name="NVIDIA H200")
    ids = [i for i, _ in sched.jobs]
    assert sched.run(ids[0], monkeypatch, node_env=h200) == "ok"
    assert json.loads((run_dir / "node-environment.json").read_text())["device_name"] == "NVIDIA H200"
    assert sched.run(ids[1], monkeypatch, node_env=dict(h200, device_name="NVIDIA A100")).startswith("refused")
    assert sched.run(ids[2], monkeypatch, node_env=h200) == "ok"


def test_status_of_a_folder_that_is_no_slurm_run_is_an_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "collector.slurm", "status", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "has no SLURM submissions" in proc.stderr


# ---- the real engine: a one-node SLURM cluster (CI brings it up; elsewhere skipped) ----

def _slurm_up() -> bool:
    if not shutil.which("sinfo"):
        return False
    proc = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    return proc.returncode == 0 and any(s.startswith(("idle", "mix", "alloc")) for s in proc.stdout.split())


def _need_slurm():
    if _slurm_up():
        return
    if os.environ.get("TCB_REQUIRE_SLURM") == "1":
        pytest.fail("TCB_REQUIRE_SLURM=1 but no SLURM cluster answers (sinfo)")
    pytest.skip("no SLURM cluster here (CI starts one with .ci/slurm-up.sh)")


def _collect(args, out):
    return subprocess.run([sys.executable, "-m", "collector", "--preset", "smoke", "--models", "mlp",
                           "--phases", "infer", "--processes", "1", "--blocks", "2", "--executor", "slurm",
                           "--slurm-time", "10", "--out", str(out), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def _status(run_dir, *extra):
    proc = subprocess.run([sys.executable, "-m", "collector.slurm", "status", str(run_dir), "--json", *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout[:proc.stdout.rindex("}") + 1])


def _wait(run_dir, until, timeout=400):
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = _status(run_dir)
        if until(st):
            return st
        time.sleep(2)
    raise AssertionError(f"timed out waiting; last status {st}")


def _cells_and_statuses(data_dir, run_id):
    from analysis.load import discover_runs, load

    loaded = load(discover_runs(data_dir))
    return sorted(loaded.con.execute("SELECT cell_id, status FROM cells WHERE run_id = ?", [run_id]).fetchall())


def test_real_slurm_run_of_the_smoke_preset_reports_what_a_local_run_reports(tmp_path):
    """`make collect EXECUTOR=slurm PRESET=smoke` on the one-node cluster: every cell through
    sbatch (Inductor on the CPU), then the same matrix measured locally; the report reads the
    same cells with the same statuses from both."""
    _need_slurm()
    quick = ["--processes", "1", "--blocks", "2"]
    proc = subprocess.run(["make", "collect", "EXECUTOR=slurm", "PRESET=smoke", "RUN=sm", f"RUNS={tmp_path / 'slurm'}",
                           "PROCESSES=1", "BLOCKS=2", "SLURM_TIME=15", f"PYTHON={sys.executable}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "submitted 8 cell(s)" in proc.stdout, proc.stdout + proc.stderr
    st = _wait(tmp_path / "slurm" / "sm", lambda s: not (s["counts"].get("running") or s["counts"].get("queued")),
               timeout=900)
    assert st["counts"] == {"done": 8}, st
    local = subprocess.run([sys.executable, "-m", "collector", "--preset", "smoke", *quick, "--run-id", "sm",
                            "--out", str(tmp_path / "local")], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert local.returncode == 0, local.stderr
    got = _cells_and_statuses(tmp_path / "slurm", "sm")
    assert len(got) == 8 and got == _cells_and_statuses(tmp_path / "local", "sm")


def test_real_slurm_cluster_measures_the_cells_and_a_cancelled_one_is_resubmitted(tmp_path):
    _need_slurm()
    # two real cells (inductor on the CPU) as an array; the command returns once they are queued
    proc = _collect(["--modes", "default,reduce-overhead", "--run-id", "s"], tmp_path)
    assert proc.returncode == 0 and "submitted 2 cell(s)" in proc.stdout, proc.stdout + proc.stderr
    run_dir = tmp_path / "s"
    st = _wait(run_dir, lambda s: s["counts"].get("done", 0) + s["counts"].get("failed", 0) == 2)
    assert st["counts"] == {"done": 2}, st
    rows = sorted((run_dir / "cells").glob("*.parquet"))
    assert len(rows) == 2 and not list((run_dir / "claims").iterdir())
    for row in rows:  # each task forked the cell's processes from its own parent (imports once)
        headers = [h for h in (run_dir / "logs" / f"{row.stem}.log").read_text().splitlines() if h.startswith("=== ")]
        assert headers and all(h.endswith("(forked) ===") for h in headers), headers
    # a third run: its one task is cancelled while it runs, shows as lost, and is queued again
    proc = _collect(["--modes", "default", "--run-id", "c"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    run_dir = tmp_path / "c"
    _wait(run_dir, lambda s: list((run_dir / "claims").glob("*.claim")) != [], timeout=120)
    subprocess.run([sys.executable, "-m", "collector.slurm", "cancel", str(run_dir)], cwd=ROOT, check=True,
                   capture_output=True)
    st = _wait(run_dir, lambda s: s["counts"].get("lost") == 1, timeout=120)
    assert not list((run_dir / "cells").glob("*.parquet"))  # the cancelled cell wrote no row
    # the submitting command, run again, picks up where the run is: it queues the lost cell alone
    proc = _collect(["--modes", "default", "--run-id", "c"], tmp_path)
    assert proc.returncode == 0 and "submitted 1 cell(s)" in proc.stdout, proc.stdout + proc.stderr
    st = _wait(run_dir, lambda s: s["counts"].get("done") == 1)
    assert st["counts"] == {"done": 1} and len(list((run_dir / "cells").glob("*.parquet"))) == 1
    subs = json.loads((run_dir / "slurm" / "submissions.json").read_text())
    assert len(subs["submissions"]) == 2  # its own folder per submission


def test_watch_prints_when_the_counts_change_and_stops_when_nothing_is_left(tmp_path, monkeypatch):
    import io

    m = _matrix()
    sched = FakeScheduler()
    run_dir = slurm.submit_run(m, ENV, tmp_path, "r", sched)
    ids = iter([i for i, _ in sched.jobs])

    def one_task_finishes(_):  # between two looks, the next task runs
        sched.run(next(ids), monkeypatch)

    out = io.StringIO()
    st = slurm.watch(run_dir, sched.states, 0, out=out, sleep=one_task_finishes)
    lines = out.getvalue().splitlines()
    n = len(m.cells)
    assert st["counts"] == {"done": n}
    assert len(lines) == n + 1 and lines[0].endswith(f"{n} queued") and lines[-1].endswith(f"{n} done")


def test_every_sbatch_option_reaches_submitit_and_a_bad_one_is_named(tmp_path, monkeypatch):
    """--slurm-cpus/-gpus/-mem/-qos/-exclusive and --slurm-arg KEY[=VALUE] become the parameters of
    submitit's executor, rendered by submitit's own sbatch writer as #SBATCH lines."""
    submitit = pytest.importorskip("submitit")
    from submitit.slurm.slurm import _as_sbatch_flag

    from collector import slurm as slurm_mod

    opts = {"partition": "debug", "time_min": 30, "cpus": 8, "gpus": 2, "mem": "64G", "qos": "high",
            "exclusive": True, "args": ["gres=gpu:h200:2", "reservation=bench", "--requeue"]}
    settings = slurm_mod.settings_from(opts, "cuda")
    seen = {}

    class Recorder:
        def __init__(self, folder, cluster):
            pass

        def update_parameters(self, **kw):
            seen.update(kw)

        def map_array(self, fn, jobs):
            return []

    monkeypatch.setattr(submitit, "AutoExecutor", Recorder)
    slurm_mod.SubmititExecutor(settings).submit([], tmp_path)
    assert seen["cpus_per_task"] == 8 and seen["slurm_gpus_per_task"] == 2 and seen["slurm_partition"] == "debug"
    lines = {_as_sbatch_flag(k, v) for k, v in seen["slurm_additional_parameters"].items()}
    assert lines == {"#SBATCH --mem=64G", "#SBATCH --qos=high", "#SBATCH --exclusive", "#SBATCH --gres=gpu:h200:2",
                     "#SBATCH --reservation=bench", "#SBATCH --requeue"}
    assert slurm_mod.settings_from({}, "cpu").gpus_per_task == 0
    with pytest.raises(ValueError, match="KEY or KEY=VALUE"):
        slurm_mod.settings_from({"args": ["Bad Key=1"]}, "cuda")
