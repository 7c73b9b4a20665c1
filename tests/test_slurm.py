"""The SLURM executor: submission, what a node does (environment check, claim, atomic row),
progress, lost tasks and their resubmission. First with a fake scheduler (the plumbing), then
against a real one-node SLURM cluster when one is up (CI starts it: .ci/slurm-up.sh)."""
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collector.host.launch import LauncherBase
from collector.plan import matrix as mx
from collector.host import launch, runner
from collector.slurm import submit as slurm, task as slurm_task
from collector.host.store import RunStore
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

    def submit(self, jobs, folder, name="tcb-cell"):
        ids = [f"{self.next}_{i}" for i in range(len(jobs))]
        self.names = getattr(self, "names", []) + [name]
        self.next += 1
        self.jobs += list(zip(ids, jobs))
        self.live.update({i: "PENDING" for i in ids})
        return ids

    def states(self, ids):
        return {i: s for i, s in self.live.items() if i in ids}

    def accounting(self, ids):
        return {}

    def cancel_name(self, name):
        self.cancelled = getattr(self, "cancelled", []) + [name]

    def run(self, job_id, monkeypatch, node_env=ENV):
        """The task `job_id` runs on a node: returns run_cell_job's answer; the job then leaves the queue."""
        job = dict(self.jobs)[job_id]
        monkeypatch.setattr(slurm_task, "node_environment", lambda python, device: dict(node_env))
        monkeypatch.setattr(launch, "SubprocessLauncher", OkLauncher)
        monkeypatch.setattr(launch, "ForkLauncher", OkLauncher)
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
    assert st["cells"][lost_cell].startswith("node failure (job 100_1 left its claim")  # killed outright
    assert st["counts"]["node failure"] == 1 and "RESUBMIT=1" in slurm.format_status(st)
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
    proc = subprocess.run([sys.executable, "-m", "collector.slurm.submit", "status", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "has no SLURM submissions" in proc.stderr


# ---- the real engine: a one-node SLURM cluster (CI brings it up; elsewhere skipped) ----

def _slurm_up() -> bool:
    if not shutil.which("sinfo"):
        return False
    proc = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    # a node that answers, in whatever state a second suite on the same cluster left it (reserved
    # by its reservation, completing its jobs, planned for them): not down, drained or silent (*)
    down = ("down", "drain", "fail", "unk", "inval", "not_responding", "future", "power")
    return proc.returncode == 0 and any(not s.startswith(down) and not s.endswith("*") for s in proc.stdout.split())


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
    proc = subprocess.run([sys.executable, "-m", "collector.slurm.submit", "status", str(run_dir), "--json", *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout[:proc.stdout.rindex("}") + 1])


def _wait(run_dir, until, timeout=400):
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = _status(run_dir)
        if until(st):
            return st
        time.sleep(1)
    raise AssertionError(f"timed out waiting; last status {st}")


def _cells_and_statuses(data_dir, run_id):
    from analysis.data.load import discover_runs, load

    loaded = load(discover_runs(data_dir))
    return sorted(loaded.con.execute("SELECT cell_id, status FROM cells WHERE run_id = ?", [run_id]).fetchall())


def test_real_slurm_run_of_the_smoke_preset_reports_what_a_local_run_reports(tmp_path):
    """`make collect EXECUTOR=slurm PRESET=smoke` on the cluster, narrowed to the MLP's training
    cell of the default mode (the other real-cluster test measures inference cells): the cell
    through sbatch (Inductor on the CPU), then the same cell measured locally; the report reads
    the same cell with the same status from both."""
    _need_slurm()
    quick = ["--processes", "1", "--blocks", "2"]
    cells = "mlp__train__*__default__*"
    proc = subprocess.run(["make", "collect", "EXECUTOR=slurm", "PRESET=smoke", "RUN=sm", f"RUNS={tmp_path / 'slurm'}",
                           "PROCESSES=1", "BLOCKS=2", "SLURM_TIME=15", f"CELLS={cells}", f"PYTHON={sys.executable}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "submitted 1 cell(s)" in proc.stdout, proc.stdout + proc.stderr
    st = _wait(tmp_path / "slurm" / "sm", lambda s: not (s["counts"].get("running") or s["counts"].get("queued")),
               timeout=600)
    assert st["counts"] == {"done": 1}, st
    local = subprocess.run([sys.executable, "-m", "collector", "--preset", "smoke", *quick, "--run-id", "sm",
                            "--cells", cells, "--out", str(tmp_path / "local")],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert local.returncode == 0, local.stderr
    got = _cells_and_statuses(tmp_path / "slurm", "sm")
    assert len(got) == 1 and got == _cells_and_statuses(tmp_path / "local", "sm")


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
    # a third run (a stand-in cell of 60 s: what is tested is the scheduler's side): its one task is
    # cancelled while it runs, shows as cancelled, and is queued again
    proc = _collect_fake(tmp_path, "c", 60, "--modes", "default")
    assert proc.returncode == 0, proc.stderr
    run_dir = tmp_path / "c"
    _wait(run_dir, lambda s: list((run_dir / "claims").glob("*.claim")) != [], timeout=120)
    subprocess.run([sys.executable, "-m", "collector.slurm.submit", "cancel", str(run_dir)], cwd=ROOT, check=True,
                   capture_output=True)
    # the task's record says "cancelled or preempted"; scontrol's memory of the job tells which
    st = _wait(run_dir, lambda s: s["counts"].get("cancelled") == 1, timeout=120)
    assert not list((run_dir / "cells").glob("*.parquet"))  # the cancelled cell wrote no row
    # the submitting command, run again, picks up where the run is: it queues the lost cell alone
    proc = _collect_fake(tmp_path, "c", 1, "--modes", "default")
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

    from collector.slurm import submit as slurm_mod

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


class SignalledLauncher(OkLauncher):
    """The scheduler signals the task while its cell process runs."""
    sig = signal.SIGUSR2

    def run(self, spec, cache_dir, log_path, timeout_s):
        os.kill(os.getpid(), self.sig)
        return super().run(spec, cache_dir, log_path, timeout_s)


@pytest.mark.parametrize("sig, reason", [(signal.SIGUSR2, "timed out (limit 7 min; job 100_0 on "),
                                         (signal.SIGTERM, "cancelled or preempted (job 100_0 on ")])
def test_a_task_stopped_by_the_scheduler_says_why_and_a_resubmission_takes_a_new_limit(tmp_path, monkeypatch,
                                                                                       sig, reason):
    """SIGUSR2 (submitit's warning before the time limit) or SIGTERM (scancel, preemption): no
    row, the claim released, a record of why; status names it; RESUBMIT with a new limit."""
    m = _matrix()
    sched = FakeScheduler()
    run_dir = slurm.submit_run(m, ENV, tmp_path, "r", sched, settings=slurm.SlurmSettings(time_min=7))
    job_id, job = sched.jobs[0]
    monkeypatch.setattr(SignalledLauncher, "sig", sig)
    monkeypatch.setattr(slurm_task, "node_environment", lambda python, device: {**ENV, "hostname": "node7"})
    monkeypatch.setattr(launch, "ForkLauncher", SignalledLauncher)
    monkeypatch.setattr(launch, "SubprocessLauncher", SignalledLauncher)
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "100")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "0")
    answer = slurm.run_cell_job(job)
    del sched.live[job_id]
    runner.INTERRUPTED.clear()
    assert answer.startswith("stopped by the scheduler") and not RunStore(run_dir).claims()
    assert not (run_dir / "cells" / f"{job.cell_id}.parquet").exists()
    st = slurm.status(run_dir, sched.states)
    assert st["cells"][job.cell_id] == reason + "node7)", st["cells"][job.cell_id]
    if sig == signal.SIGTERM:  # the scheduler's record (sacct, or scontrol's memory) tells the two apart
        told = slurm.status(run_dir, sched.states, lambda ids: {job_id: "PREEMPTED"})
        assert told["cells"][job.cell_id] == "preempted (job 100_0 on node7)"
    subs = json.loads((run_dir / "slurm" / "submissions.json").read_text())
    slurm.submit_run(m, ENV, tmp_path, "r", sched, settings=slurm.SlurmSettings(time_min=20))
    new_id, again = sched.jobs[-1]
    assert again.cell_id == job.cell_id and again.time_limit_min == 20
    # the old attempt's record says nothing of the new task: queued, then done
    assert slurm.status(run_dir, sched.states)["cells"][job.cell_id] == "queued"
    assert sched.run(new_id, monkeypatch) == "ok"
    subs = json.loads((run_dir / "slurm" / "submissions.json").read_text())
    assert subs["cells"][job.cell_id]["attempts"] == [job_id, new_id]


@pytest.mark.parametrize("per_job_folder", [False, True])  # True: runs submitted before one folder a submission
def test_sacct_and_submitit_results_say_why_where_the_task_left_no_record(tmp_path, monkeypatch, per_job_folder):
    import pickle

    m = _matrix()
    sched = FakeScheduler()
    run_dir = slurm.submit_run(m, ENV, tmp_path, "r", sched)
    (a, ja), (b, jb), (c, jc) = sched.jobs[:3]
    for j in (a, b, c):
        del sched.live[j]
    folder = run_dir / "slurm" / "submission1" / (b if per_job_folder else "")
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{b}_0_result.pkl").open("wb") as fh:  # submitit's own record of a task that raised
        pickle.dump(("error", "Traceback (most recent call last):\n  ...\nMemoryError: no room"), fh)
    st = slurm.status(run_dir, sched.states, lambda ids: {a: "TIMEOUT"})
    assert st["cells"][ja.cell_id] == f"timed out (scheduler: TIMEOUT, job {a})"
    assert st["cells"][jb.cell_id] == f"crashed (job {b}: MemoryError: no room)"
    assert st["cells"][jc.cell_id] == "lost"
    assert slurm.to_resubmit(st) == 3


def test_ctrl_c_while_sbatch_runs_cancels_the_array_by_name_and_the_next_submission_has_its_own_folder(
        tmp_path, capsys):
    class Interrupted(FakeScheduler):
        def submit(self, jobs, folder, name="tcb-cell"):
            folder.mkdir(parents=True)  # submitit made its folder; sbatch may have queued the array
            self.names = [name]
            raise KeyboardInterrupt

    m = _matrix()
    sched = Interrupted()
    with pytest.raises(KeyboardInterrupt):
        slurm.submit_run(m, ENV, tmp_path, "r", sched)
    out = capsys.readouterr().out
    assert sched.cancelled == sched.names and sched.names[0].startswith("tcb-r-s1-")
    assert "interrupted while submitting" in out and "Traceback" not in out
    subs = json.loads((tmp_path / "r" / "slurm" / "submissions.json").read_text())
    assert subs["submissions"][0]["interrupted"] and subs["cells"] == {}
    fine = FakeScheduler()
    slurm.submit_run(m, ENV, tmp_path, "r", fine)
    assert fine.names[0].startswith("tcb-r-s2-")
    subs = json.loads((tmp_path / "r" / "slurm" / "submissions.json").read_text())
    assert subs["submissions"][-1]["folder"].endswith("submission2") and len(subs["cells"]) == len(m.cells)


def test_a_claim_of_another_submitters_live_task_is_not_released(tmp_path, monkeypatch, capsys):
    """Two submit hosts: this one's submissions.json does not know the other's job, the scheduler does."""
    m = _matrix()
    sched = FakeScheduler()
    run_dir = slurm.submit_run(m, ENV, tmp_path, "r", sched)
    cell = m.cells[0].cell_id
    (run_dir / "cells").mkdir(exist_ok=True)
    RunStore(run_dir).claim(cell, {"job_id": "555_0"})  # measured by the other submitter's task
    sched.live["555_0"] = "RUNNING"
    slurm.submit_run(m, ENV, tmp_path, "r", sched)
    assert cell in RunStore(run_dir).claims() and "released" not in capsys.readouterr().out
    del sched.live["555_0"]
    slurm.submit_run(m, ENV, tmp_path, "r", sched)
    assert cell not in RunStore(run_dir).claims() and "released 1 claim(s)" in capsys.readouterr().out


def test_a_claim_without_a_job_id_is_released_when_its_process_on_this_host_is_gone(tmp_path, capsys):
    """A claim taken outside the scheduler (no job id) used to be kept forever; now its process is
    asked where it was taken on this host. Elsewhere, or a claim still being written, it is kept."""
    import socket
    import subprocess

    m = _matrix()
    run_dir = slurm.submit_run(m, ENV, tmp_path, "r", FakeScheduler())
    store = RunStore(run_dir)
    dead = subprocess.Popen(["true"])
    dead.wait()
    ids = [c.cell_id for c in m.cells[:3]]
    for cid, owner in zip(ids, [{"host": socket.gethostname(), "pid": dead.pid},
                                {"host": "another-login-node", "pid": dead.pid}, {}]):
        store.claims_dir.mkdir(exist_ok=True)
        (store.claims_dir / f"{cid}.claim").write_text(json.dumps(owner) if owner else "")
    assert RunStore.owner_alive({"host": socket.gethostname(), "pid": __import__("os").getpid()}, set())
    slurm.submit_run(m, ENV, tmp_path, "r", FakeScheduler())
    left = RunStore(run_dir).claims()
    assert ids[0] not in left and ids[1] in left and ids[2] in left
    assert f"released 1 claim(s) of jobs that are gone: {ids[0]}" in capsys.readouterr().out


# ---- the real cluster with stand-in cells (tests/support/fake_python.py): the scheduler, the nodes,
# the signals and the process table are real, each cell process only sleeps FAKE_CELL_SECONDS ----

def _nodes() -> list[str]:
    proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True)
    return sorted(set(proc.stdout.split()))


def _collect_fake(tmp_path, run_id, seconds, *args, cells=("mlp",), env=None):
    """Submit stand-in cells of `seconds` each; `env`: more variables for the tasks (sbatch passes
    the submitting environment on)."""
    from support import faults

    env = {**os.environ, **(env or {}), "FAKE_CELL_SECONDS": str(seconds)}
    return subprocess.run([sys.executable, "-m", "collector", "--preset", "smoke", "--models", ",".join(cells),
                           "--phases", "infer", "--modes", "default,reduce-overhead", "--processes", "1",
                           "--executor", "slurm", "--python", faults.fake_python(tmp_path), "--launcher", "exec",
                           "--run-id", run_id, "--out", str(tmp_path), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def own_nodes():
    """The test cluster's nodes for this test alone, when another suite shares the cluster: a SLURM
    reservation on every node (jobs that do not ask for it cannot start there), once the jobs already
    running on them have ended. Yields the reservation's name, for sbatch's --reservation."""
    _need_slurm()
    name = f"tcb-test-{os.getpid()}-{time.monotonic_ns() % 100000}"
    deadline = time.time() + 600
    while True:  # another suite's test may hold the nodes reserved: wait for its reservation to end
        made = subprocess.run(["scontrol", "create", "reservation", f"ReservationName={name}", "StartTime=now",
                               "Duration=20", f"Users={os.environ.get('USER') or 'root'}", "Nodes=ALL",
                               "Flags=IGNORE_JOBS"], capture_output=True, text=True, timeout=30)
        if made.returncode == 0:
            break
        if time.time() > deadline:
            pytest.fail(f"cannot reserve the test cluster's nodes in 10 min: {made.stderr.strip()}")
        time.sleep(2)
    try:
        deadline = time.time() + 300
        while time.time() < deadline:  # the jobs that were running before the reservation end first
            busy = subprocess.run(["squeue", "-h", "-t", "RUNNING,COMPLETING", "-o", "%i"], capture_output=True,
                                  text=True, timeout=30).stdout.split()
            if not busy:
                break
            time.sleep(1)
        yield name
    finally:
        subprocess.run(["scontrol", "delete", f"ReservationName={name}"], capture_output=True, timeout=30)


def _rows(run_dir):
    import pyarrow.parquet as pq

    return [pq.read_table(p).to_pylist()[0] for p in sorted((run_dir / "cells").glob("*.parquet"))]


def test_real_two_nodes_take_the_cells_and_each_row_records_its_node_neighbour(tmp_path, own_nodes):
    """Four 8-second cells on the two-node cluster (.ci/slurm-up.sh; 2 CPUs a node), reserved for
    the test: two tasks a node at once; every row says its node and that one other cell measured
    beside it there."""
    nodes = _nodes()
    if len(nodes) < 2:
        pytest.skip(f"a one-node cluster ({nodes}): SLURM_NODES=2 bash .ci/slurm-up.sh makes two")
    proc = _collect_fake(tmp_path, "two", 8, "--slurm-time", "5", "--slurm-arg", f"reservation={own_nodes}",
                         cells=("mlp", "gnn"))
    assert proc.returncode == 0 and "submitted 4 cell(s)" in proc.stdout, proc.stdout + proc.stderr
    st = _wait(tmp_path / "two", lambda s: s["counts"].get("done") == 4, timeout=120)
    rows = _rows(tmp_path / "two")
    by_node = {n: sum(r["hostname"] == n for r in rows) for n in nodes}
    assert by_node == {n: 2 for n in nodes}, by_node
    # each saw its sibling task; on the host's own namespace (vm) another suite's local cells count too,
    # so there it is at least 2; node2 (a namespace of its own, reserved) holds exactly the test's two
    assert all(r["concurrent_cells"] >= 2 for r in rows), st
    assert [r["concurrent_cells"] for r in rows if r["hostname"] == "node2"] in ([2, 2], []), rows
    from analysis.run_report.context import build_run_report, prepare  # the report: where the cells ran, beside what
    from analysis.data.load import discover_runs, load

    runs = discover_runs(tmp_path)
    loaded = load(runs)
    prepare(loaded)
    text = " ".join(build_run_report(loaded, next(r for r in runs if r.run_id == "two"), reps=100).notes)
    assert "through SLURM" in text and all(n in text for n in nodes) and "seen measuring on the host" in text
    assert "where other jobs ran" not in text  # the project's own tasks are not "other jobs"
    assert len(list((tmp_path / "two" / "logs").glob("*.node-jobs.json"))) == 4


def test_other_jobs_on_the_node_are_read_from_squeue_and_the_projects_own_left_out(monkeypatch):
    """A task asks squeue for the running jobs on its node; this project's tasks (tcb-...) are left
    out (their cells are counted from the process table); no node name or a failing squeue: None."""
    calls = []

    def fake(cmd, **kw):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "17|alice|train.sh\n18_2|bob|tcb-r-s1-ab12cd\n19|carol|eval\n", "")

    from collector.slurm.task import other_jobs_on_node

    assert other_jobs_on_node("vm", run=fake) == ["17 (alice, train.sh)", "19 (carol, eval)"]
    assert calls[0][:6] == ["squeue", "-h", "-w", "vm", "-t", "RUNNING"]
    assert other_jobs_on_node("vm", run=lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "no")) is None
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    assert other_jobs_on_node(run=fake) is None  # not on a SLURM node

    def missing(cmd, **kw):
        raise FileNotFoundError("squeue")

    assert other_jobs_on_node("vm", run=missing) is None


def test_real_another_users_job_beside_a_cell_is_recorded_and_reported(tmp_path, own_nodes):
    """A job that is not a cell (a sleeper, one CPU on each node) runs while two stand-in cells are
    measured on the nodes reserved for the test: each cell's record names it and the run report says so."""
    nodes = _nodes()
    sleepers = []
    for n in nodes:
        got = subprocess.run(["sbatch", "--parsable", "-w", n, "-c", "1", "-J", "other-users-job", "-o", "/dev/null",
                              f"--reservation={own_nodes}", "--wrap", "sleep 60"], capture_output=True, text=True, timeout=30)
        assert got.returncode == 0, got.stderr
        sleepers.append(got.stdout.strip().split(";")[0])
    try:
        deadline = time.time() + 60
        while time.time() < deadline:  # both sleepers running before the cells start
            st = subprocess.run(["squeue", "-h", "-j", ",".join(sleepers), "-o", "%T"], capture_output=True, text=True)
            if st.stdout.split() == ["RUNNING"] * len(sleepers):
                break
            time.sleep(1)
        proc = _collect_fake(tmp_path, "ob", 3, "--slurm-arg", f"reservation={own_nodes}")
        assert proc.returncode == 0 and "submitted 2 cell(s)" in proc.stdout, proc.stdout + proc.stderr
        _wait(tmp_path / "ob", lambda s: s["counts"].get("done") == 2, timeout=120)
    finally:
        subprocess.run(["scancel", *sleepers], capture_output=True)
    recs = [json.loads(p.read_text()) for p in sorted((tmp_path / "ob" / "logs").glob("*.node-jobs.json"))]
    assert len(recs) == 2
    for rec in recs:
        assert any("(" in j and "other-users-job)" in j for j in rec["before"] + rec["after"]), rec
        assert not any("tcb-" in j for j in rec["before"] + rec["after"])
    from analysis.run_report.context import build_run_report, prepare
    from analysis.data.load import discover_runs, load

    runs = discover_runs(tmp_path)
    loaded = load(runs)
    prepare(loaded)
    text = " ".join(build_run_report(loaded, next(r for r in runs if r.run_id == "ob"), reps=100).notes)
    assert "2 of 2 cells ran on a SLURM node where other jobs ran at the same time" in text
    assert "other-users-job" in text and "SLURM_EXCLUSIVE=1" in text


def test_real_time_limit_is_reported_and_a_resubmission_with_more_time_finishes(tmp_path):
    """A cell longer than its task's 1-minute limit: submitit's SIGUSR2 before the limit stops it,
    status says timed out with the limit; RESUBMIT with SLURM_TIME=3 measures it."""
    _need_slurm()
    proc = _collect_fake(tmp_path, "t", 300, "--slurm-time", "1", "--modes", "default")
    assert proc.returncode == 0 and "submitted 1 cell(s)" in proc.stdout, proc.stdout + proc.stderr
    st = _wait(tmp_path / "t", lambda s: s["counts"].get("timed out") == 1, timeout=150)
    (state,) = st["cells"].values()
    assert state.startswith("timed out (limit 1 min; job ") and not _rows(tmp_path / "t"), state
    env = {**os.environ, "FAKE_CELL_SECONDS": "1"}
    again = subprocess.run(["make", "-s", "collect-status", "RUN=t", f"RUNS={tmp_path}", "RESUBMIT=1", "SLURM_TIME=3",
                            f"PYTHON={sys.executable}"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 0 and "submitted 1 cell(s)" in again.stdout, again.stdout + again.stderr
    st = _wait(tmp_path / "t", lambda s: s["counts"].get("done") == 1, timeout=120)
    subs = json.loads((tmp_path / "t" / "slurm" / "submissions.json").read_text())
    assert subs["settings"]["time_min"] == 3 and len(next(iter(subs["cells"].values()))["attempts"]) == 2


def test_real_task_that_raises_is_reported_crashed_with_its_last_line(tmp_path):
    """A node whose probe fails: the task raises, submitit records the error in its result file,
    and status says crashed with the error's last line (not just lost)."""
    _need_slurm()
    proc = _collect_fake(tmp_path, "x", 1, "--slurm-time", "5", "--modes", "default",
                         env={"FAKE_PROBE_FAIL_IN_SLURM": "1"})
    assert proc.returncode == 0 and "submitted 1 cell(s)" in proc.stdout, proc.stdout + proc.stderr
    st = _wait(tmp_path / "x", lambda s: s["counts"].get("crashed") == 1, timeout=120)
    (state,) = st["cells"].values()
    assert state.startswith("crashed (job ") and "this node's torch does not import" in state, state


def test_real_preempted_task_is_reported_preempted_and_resubmitted(tmp_path, own_nodes):
    """A job of the higher-priority partition `urgent` (.ci/slurm-up.sh) takes the whole node a
    cell's task runs on: SLURM cancels the task (PreemptMode=CANCEL); status says preempted (the
    task's record, told apart from scancel by scontrol's record of the job), and RESUBMIT measures it.
    Both jobs run on the nodes reserved for the test: the preemptor takes a whole node, and would
    otherwise preempt another suite's tasks there."""
    parts = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True).stdout.split()
    if "urgent" not in parts:
        pytest.skip("no `urgent` partition (an older .ci/slurm-up.sh): run it again")
    proc = _collect_fake(tmp_path, "p", 120, "--slurm-time", "5", "--modes", "default",
                         "--slurm-arg", f"reservation={own_nodes}")
    assert proc.returncode == 0 and "submitted 1 cell(s)" in proc.stdout, proc.stdout + proc.stderr
    run_dir = tmp_path / "p"
    _wait(run_dir, lambda s: list((run_dir / "claims").glob("*.claim")) != [], timeout=120)
    (claim,) = (run_dir / "claims").glob("*.claim")
    node = json.loads(claim.read_text())["host"]
    urgent = subprocess.run(["sbatch", "-p", "urgent", "-w", node, "--exclusive", "-o", "/dev/null",
                             f"--reservation={own_nodes}", "--wrap", "sleep 2"], capture_output=True, text=True)
    assert urgent.returncode == 0, urgent.stderr
    st = _wait(run_dir, lambda s: s["counts"].get("preempted") == 1, timeout=120)
    (state,) = st["cells"].values()
    (entry,) = json.loads((run_dir / "slurm" / "submissions.json").read_text())["cells"].values()
    assert state == f"preempted (job {entry['job_id']} on {node})", state
    env = {**os.environ, "FAKE_CELL_SECONDS": "1"}
    again = subprocess.run([sys.executable, "-m", "collector.slurm.submit", "status", str(run_dir), "--resubmit"],
                           cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 0 and "submitted 1 cell(s)" in again.stdout, again.stdout + again.stderr
    _wait(run_dir, lambda s: s["counts"].get("done") == 1, timeout=120)


def test_real_ctrl_c_while_sbatch_answers_leaves_no_job_and_no_traceback(tmp_path):
    """sbatch queues the array, then is slow to answer (a wrapper on PATH); Ctrl-C to the
    command's process group then: the array is cancelled by its name, one message, exit 130."""
    _need_slurm()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    queued = tmp_path / "queued"  # what sbatch answered, before the wrapper sleeps
    (bindir / "sbatch").write_text(f"#!/bin/sh\nout=$({shutil.which('sbatch')} \"$@\") || exit 1\n"
                                   f"echo \"$out\" > {queued}.tmp && mv {queued}.tmp {queued}\nsleep 30\necho \"$out\"\n")
    (bindir / "sbatch").chmod(0o755)
    from support import faults

    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_CELL_SECONDS": "30"}
    cmd = [sys.executable, "-m", "collector", "--preset", "smoke", "--models", "mlp", "--phases", "infer",
           "--modes", "default", "--processes", "1", "--executor", "slurm", "--python", faults.fake_python(tmp_path),
           "--launcher", "exec", "--run-id", "i", "--out", str(tmp_path)]
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and not queued.exists():
        time.sleep(0.1)
    array = re.search(r"\d+", queued.read_text()).group()  # queued, and the command does not know it
    # squeue can time out or answer late on a loaded two-core machine (slurmctld shares it with the
    # tests): ask again for up to 30 s; scontrol keeps a job's record after it ends, for the message
    tried = []
    for _ in range(60):
        got = subprocess.run(["squeue", "-h", "-r", "-j", array, "-o", "%j"], capture_output=True, text=True)
        job_names = got.stdout
        if job_names.strip():
            break
        tried.append(got.stderr.strip())
        time.sleep(0.5)
    record = subprocess.run(["scontrol", "show", "job", array], capture_output=True, text=True)
    assert job_names.strip(), ("the array should be queued", tried[-3:], record.stdout[-800:], record.stderr)
    os.killpg(p.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "Traceback" not in out + err, out + err
    assert "interrupted while submitting" in out and "cancelled" in out
    subs = json.loads((tmp_path / "i" / "slurm" / "submissions.json").read_text())
    name = subs["submissions"][0]["name"]
    assert set(job_names.split()) == {name}  # the name it was cancelled by is the array's
    for _ in range(50):
        left = subprocess.run(["squeue", "-h", "-j", array], capture_output=True, text=True).stdout.strip()
        if not left:
            break
        time.sleep(0.2)
    assert not left, left


@pytest.mark.parametrize("executor, says", [("slurm", "interrupted before anything was submitted"),
                                            ("local", "every cell finished so far is saved")])
def test_ctrl_c_during_the_environment_probe_is_one_line_and_exit_130(tmp_path, executor, says):
    """The probe imports torch (seconds); Ctrl-C reaches it too (one process group): a stop, not
    'environment probe failed' with the probe's KeyboardInterrupt traceback."""
    from support import faults

    env = {**os.environ, "FAKE_PROBE_SECONDS": "10"}
    p = subprocess.Popen([sys.executable, "-m", "collector", "--preset", "smoke", "--models", "mlp", "--executor",
                          executor, "--python", faults.fake_python(tmp_path), "--run-id", "p", "--out", str(tmp_path)],
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    time.sleep(1.5)
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130 and says in err and "Traceback" not in out + err, out + err


def test_a_shard_submitted_to_slurm_writes_to_its_shard_folder(tmp_path, monkeypatch):
    """SHARD=1/2 EXECUTOR=slurm RUN=ss: the run is ss-shard1of2, as a local shard's is."""
    from collector.commands import executors

    seen = {}
    monkeypatch.setattr(executors, "_submit_env", lambda python, device: dict(ENV))
    monkeypatch.setattr(slurm, "submit_run", lambda matrix, env, out, run_id, *a, **k: seen.update(run_id=run_id))
    req = executors.Request(preset="smoke", overrides={"models": ["mlp"]}, pythons=[(None, sys.executable)],
                            out=tmp_path, run_id="ss", shard=(1, 2), slurm=executors.SlurmOptions(time_min=5))
    assert executors.SlurmExecutor().execute(req) == 0 and seen["run_id"] == "ss-shard1of2"


def test_a_new_time_limit_without_resubmit_is_refused_by_name(tmp_path):
    m = _matrix()
    run_dir = slurm.submit_run(m, ENV, tmp_path, "r", FakeScheduler())
    assert slurm.main(["status", str(run_dir), "--slurm-time", "5"]) == 2
    assert slurm.main(["status", str(run_dir), "--resubmit", "--slurm-time", "0"]) == 2


def test_a_site_profile_fills_what_the_command_line_leaves_and_a_bad_one_is_named(tmp_path, monkeypatch):
    """--site-profile (make SITE_PROFILE=): the site's settings in TOML; a --slurm-* option given wins;
    a GRES site's gres replaces --gpus-per-task; no --wckey unless asked; without --slurm-cpus a task
    asks 8 CPUs, at most half the partition's smallest node (sinfo)."""
    from collector.slurm import submit as slurm_mod

    prof = tmp_path / "site.toml"
    prof.write_text('partition = "gpu"\naccount = "proj"\ngres = "gpu:h100:1"\ntime = 90\ncpus = 16\n'
                    'setup = ["module load cuda/12.4", "source ~/env.sh"]\n[sbatch]\nreservation = "bench"\nrequeue = true\n')
    opts = slurm_mod.with_profile({"profile": str(prof), "account": "mine", "cpus": None, "args": ["reservation=other"]})
    s = slurm_mod.settings_from(opts, "cuda")
    assert (s.partition, s.account, s.time_min, s.cpus_per_task, s.gpus_per_task) == ("gpu", "mine", 90, 16, 0)
    assert s.additional == {"gres": "gpu:h100:1", "reservation": "other", "requeue": True}
    assert s.setup == ("module load cuda/12.4", "source ~/env.sh") and s.wckey is None
    monkeypatch.setattr(slurm_mod, "partition_cpus", lambda part: 64)
    assert slurm_mod.settings_from({}, "cuda").cpus_per_task == 8
    monkeypatch.setattr(slurm_mod, "partition_cpus", lambda part: 2)
    assert slurm_mod.settings_from({}, "cuda").cpus_per_task == 1
    monkeypatch.setattr(slurm_mod, "partition_cpus", lambda part: None)
    assert slurm_mod.settings_from({"wckey": "bench"}, "cpu").wckey == "bench"
    for text, says in (('partitoin = "gpu"\n', "unknown key(s) partitoin; valid: partition"),
                       ('cpus = "many"\n', "cpus must be of type int"), ("setup = [1]\n", "list of shell lines"),
                       ("time = 0\n", "time must be at least 1, got 0"), ("cpus = 0\n", "cpus must be at least 1"),
                       ("parallelism = -3\n", "parallelism must be at least 1"), ("gpus = -1\n", "gpus must be at least 0"),
                       ("partition = \n", "not valid TOML")):
        prof.write_text(text)
        with pytest.raises(ValueError, match=re.escape(says)):
            slurm_mod.with_profile({"profile": str(prof)})
    with pytest.raises(ValueError, match="no-such.toml"):
        slurm_mod.with_profile({"profile": str(tmp_path / "no-such.toml")})


def test_real_a_site_profile_runs_its_setup_lines_in_every_task_and_adds_no_wckey(tmp_path):
    """On the two-node cluster, through make: SITE_PROFILE's setup line runs before each task (here it
    leaves a mark a task), its sbatch option is in the script, and no --wckey line is there."""
    _need_slurm()
    from support import faults

    marks = tmp_path / "marks"
    marks.mkdir()
    prof = tmp_path / "site.toml"
    prof.write_text(f'setup = ["touch {marks}/$SLURM_JOB_ID"]\ntime = 5\n[sbatch]\ncomment = "tcb-site"\n')
    env = {**os.environ, "FAKE_CELL_SECONDS": "1"}
    proc = subprocess.run(["make", "collect", "EXECUTOR=slurm", "PRESET=smoke", "MODELS=mlp", "PHASES=infer",
                           "MODES=default", "PROCESSES=1", "RUN=site", f"RUNS={tmp_path}", f"SITE_PROFILE={prof}",
                           f"PYTHON={sys.executable}", f"PYTHONS={faults.fake_python(tmp_path)}", "LAUNCHER=exec"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0 and "submitted 1 cell(s)" in proc.stdout, proc.stdout + proc.stderr
    _wait(tmp_path / "site", lambda s: s["counts"].get("done") == 1, timeout=180)
    assert len(list(marks.iterdir())) == 1
    (script,) = list((tmp_path / "site" / "slurm").rglob("*_submission.sh"))  # the batch script sbatch ran
    text = script.read_text()
    assert "#SBATCH --comment=tcb-site" in text and "#SBATCH --time=5" in text and "--wckey" not in text, text
    assert "#SBATCH --cpus-per-task=1" in text  # half of a 2-CPU node


def test_a_requeued_task_takes_over_the_claim_its_first_run_left(tmp_path, monkeypatch):
    """After a node failure SLURM requeues the task under the same id; its first run's claim is still
    there. The requeued run measures the cell (it used to exit 'claimed elsewhere' and wait for a manual
    RESUBMIT); another task's claim still stops it."""
    m = _matrix()
    sched = FakeScheduler()
    run_dir = slurm.submit_run(m, ENV, tmp_path, "rq", sched)
    a, job = sched.jobs[0]
    store = RunStore(run_dir)
    store.claim(job.cell_id, {"job_id": a})  # the first run, on the node that failed
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    assert sched.run(a, monkeypatch) == "ok"
    assert (run_dir / "cells" / f"{job.cell_id}.parquet").exists() and job.cell_id not in store.claims()
    b, other = sched.jobs[1]
    store.claim(other.cell_id, {"job_id": "555_0"})  # someone else's
    assert sched.run(b, monkeypatch) == "claimed elsewhere"


def test_status_shows_the_last_line_a_task_wrote_to_its_stderr(tmp_path):
    """A task that died before Python ran (a site's setup line, srun) leaves no result and no claim:
    status says what it wrote last, submitit's own log lines left out."""
    m = _matrix()
    sched = FakeScheduler()
    run_dir = slurm.submit_run(m, ENV, tmp_path, "e", sched)
    a, job = sched.jobs[0]
    sched.live.pop(a)
    subs = json.loads((run_dir / "slurm" / "submissions.json").read_text())
    folder = Path(subs["submissions"][0].get("folder") or run_dir / "slurm" / "submission1")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{a}_0_log.err").write_text("/var/spool/slurmd/job01/slurm_script: line 12: module: command not found\n"
                                           "submitit INFO (2026-12-03) - Job completed\n\n")
    st = slurm.status(run_dir, sched.states)
    assert st["cells"][job.cell_id] == "lost (its last error line: /var/spool/slurmd/job01/slurm_script: line 12: " \
                                       "module: command not found)", st
    assert st["counts"].get("lost") == 1


def test_a_time_limit_signal_before_the_cell_runs_is_timed_out_not_crashed(tmp_path, monkeypatch):
    """SLURM signals a task up to a minute before its limit: a SIGUSR2 while the node is probed (before
    the claim) is recorded as timed out, no claim left, and status says `timed out`; submitit's own
    answer to it, before the task's code ran, is read as timed out too."""
    m = _matrix()
    sched = FakeScheduler()
    run_dir = slurm.submit_run(m, ENV, tmp_path, "tl", sched)
    a, job = sched.jobs[0]

    def probe_signalled(python, device):
        os.kill(os.getpid(), signal.SIGUSR2)
        time.sleep(0.05)
        return dict(ENV)

    sched.run(a, monkeypatch)  # the fake scheduler's run sets the node up; now the signalled probe
    (run_dir / "cells" / f"{job.cell_id}.parquet").unlink()
    monkeypatch.setattr(slurm_task, "node_environment", probe_signalled)
    monkeypatch.setattr(launch, "SubprocessLauncher", OkLauncher)
    monkeypatch.setattr(launch, "ForkLauncher", OkLauncher)
    answer = slurm.run_cell_job(job)
    assert answer.startswith("stopped by the scheduler before the cell ran: timed out"), answer
    assert job.cell_id not in RunStore(run_dir).claims()
    assert slurm.status(run_dir, sched.states)["cells"][job.cell_id].startswith("timed out")
    from collector.slurm import status as slurm_status

    entry = {"job_id": "7_0", "submission": 1}
    (run_dir / "logs" / f"{job.cell_id}{slurm_status.STOPPED}").unlink()
    monkeypatch.setattr(slurm_status, "_task_result",
                        lambda *a: ("error", "submitit.core.utils.UncompletedJobError: Job 7_0 was timed-out and not checkpointable"))
    assert slurm_status.why_gone(run_dir, job.cell_id, entry, {}, {}, {"submissions": []}).startswith("timed out")


def test_real_a_task_run_again_under_its_id_takes_over_the_claim_its_first_run_left(tmp_path):
    """A node failure leaves the task's claim behind and SLURM runs the task again under the same id.
    On the cluster: a held task, the claim its 'first run' left written under its id, then released:
    the cell is measured (it used to end 'claimed elsewhere' and wait for a manual RESUBMIT)."""
    _need_slurm()
    proc = _collect_fake(tmp_path, "rq", 1, "--modes", "default", "--slurm-arg", "hold")
    assert proc.returncode == 0 and "submitted 1 cell(s)" in proc.stdout, proc.stdout + proc.stderr
    (entry,) = json.loads((tmp_path / "rq" / "slurm" / "submissions.json").read_text())["cells"].items()
    cell_id, job_id = entry[0], entry[1]["job_id"]
    RunStore(tmp_path / "rq").claim(cell_id, {"job_id": job_id, "host": "a-node-that-died"})
    subprocess.run(["scontrol", "release", job_id.split("_")[0]], check=True, capture_output=True, timeout=30)
    st = _wait(tmp_path / "rq", lambda s: s["counts"].get("done") == 1 or not s["counts"].get("queued")
               and not s["counts"].get("running"), timeout=120)
    assert st["counts"] == {"done": 1}, st
    assert RunStore(tmp_path / "rq").claims() == {}


def test_real_a_time_limit_signal_while_the_task_still_starts_is_timed_out(tmp_path):
    """SLURM signals a task before its limit (USR2 6 s early under a 1-minute limit, then SIGTERM):
    here both land while the node's probe still runs (70 s: a slow import of torch). Status says timed
    out; it used to say crashed (submitit's own USR2 handler: 'timed-out and not checkpointable')."""
    _need_slurm()
    proc = _collect_fake(tmp_path, "tp", 1, "--slurm-time", "1", "--modes", "default",
                         env={"FAKE_PROBE_SECONDS_IN_SLURM": "70"})
    assert proc.returncode == 0 and "submitted 1 cell(s)" in proc.stdout, proc.stdout + proc.stderr
    st = _wait(tmp_path / "tp", lambda s: not s["counts"].get("queued") and not s["counts"].get("running"),
               timeout=240)
    (state,) = st["cells"].values()
    assert state.startswith("timed out (limit 1 min; job ") and not _rows(tmp_path / "tp"), state


def test_real_a_time_limit_signal_while_the_tasks_python_starts_is_timed_out_not_crashed(tmp_path):
    """The limit's early signal (USR2, 6 s before a 1-minute limit) lands while the task's interpreter
    still starts (70 s of site imports, before submitit or the task set any handler): SIGUSR2's default
    kills it, srun says "User defined signal 2" and the scheduler FAILED. Status said "crashed"; it is
    timed out, with the limit and what to do."""
    _need_slurm()
    slow = ROOT / "tests" / "support" / "slow_start"
    proc = _collect_fake(tmp_path, "ts", 1, "--slurm-time", "1", "--modes", "default",
                         env={"FAKE_START_SECONDS_IN_SLURM": "70",
                              "PYTHONPATH": f"{slow}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
    assert proc.returncode == 0 and "submitted 1 cell(s)" in proc.stdout, proc.stdout + proc.stderr
    st = _wait(tmp_path / "ts", lambda s: not s["counts"].get("queued") and not s["counts"].get("running"),
               timeout=240)
    (state,) = st["cells"].values()
    assert state.startswith("timed out (limit 1 min; the limit's signal came while the task's Python still started: "
                            "give more time with SLURM_TIME; job "), state
    assert st["counts"] == {"timed out": 1} and not _rows(tmp_path / "ts")


def test_real_a_task_whose_setup_line_fails_shows_that_line_in_status(tmp_path):
    """A site's setup line fails before Python starts (a module that is not there): the task leaves
    no result and no claim; status names the line it wrote last instead of a bare 'lost'."""
    _need_slurm()
    from support import faults

    prof = tmp_path / "site.toml"
    prof.write_text('setup = ["echo \\"module: unable to locate a modulefile for cuda/99.9\\" >&2", "exit 3"]\n'
                    'time = 5\n')
    proc = subprocess.run(["make", "collect", "EXECUTOR=slurm", "PRESET=smoke", "MODELS=mlp", "PHASES=infer",
                           "MODES=default", "PROCESSES=1", "RUN=bad", f"RUNS={tmp_path}", f"SITE_PROFILE={prof}",
                           f"PYTHON={sys.executable}", f"PYTHONS={faults.fake_python(tmp_path)}", "LAUNCHER=exec"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "submitted 1 cell(s)" in proc.stdout, proc.stdout + proc.stderr
    st = _wait(tmp_path / "bad", lambda s: not s["counts"].get("queued") and not s["counts"].get("running"),
               timeout=120)
    (state,) = st["cells"].values()
    assert "unable to locate a modulefile for cuda/99.9" in state, state


@pytest.mark.parametrize("args, says", [
    (["--slurm-time", "-1"], "--slurm-time (SLURM_TIME=): expected a whole number of at least 1, got '-1'"),
    (["--slurm-time", "0"], "--slurm-time (SLURM_TIME=): expected a whole number of at least 1, got '0'"),
    (["--slurm-parallelism", "0"], "--slurm-parallelism (SLURM_PARALLELISM=): expected a whole number of at least 1"),
    (["--slurm-parallelism", "-3"], "--slurm-parallelism (SLURM_PARALLELISM=): expected a whole number of at least 1"),
    (["--slurm-cpus", "0"], "--slurm-cpus (SLURM_CPUS=): expected a whole number of at least 1"),
    (["--slurm-gpus", "-1"], "--slurm-gpus (SLURM_GPUS=): expected a whole number of at least 0"),
])
def test_slurm_numbers_out_of_range_are_refused_not_changed(args, says, tmp_path, capsys):
    """SLURM_TIME=-1 once became 1 minute and 0 became 60, SLURM_PARALLELISM=0 became 16 and -3 was
    taken, SLURM_CPUS=0 dropped --cpus-per-task: each is now refused by name before anything is submitted."""
    from collector.__main__ import main as collector_main

    with pytest.raises(SystemExit) as exc:
        collector_main(["--executor", "slurm", "--preset", "smoke", "--out", str(tmp_path), "--dry-run", *args])
    assert exc.value.code == 2 and says in capsys.readouterr().err
