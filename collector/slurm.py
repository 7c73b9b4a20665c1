"""The matrix on a SLURM cluster (`EXECUTOR=slurm`, `--executor slurm`): one array task per cell,
submitted through submitit; every task writes its row into the one run folder on a shared
filesystem (collector/store.py). The submitting command returns once the array is queued;
`make collect-status RUN=...` (`python -m collector.slurm status RUN_DIR`) shows done / running /
queued / failed / lost with an ETA, and `--resubmit` queues again what was lost (a cancelled,
preempted, timed-out or crashed task: no row and no live job).

What runs on a node is `run_cell_job(CellJob)`: the node's environment is probed and compared
with the run's (torch, device, GPU name); a node that differs writes nothing unless the run
allows mixing (then its rows carry their own torch and GPU, as every row does). Then the cell is
claimed (a second task given the same cell leaves it), measured exactly as locally (its cold
process and replicates, collector.runner.measure_cell; with the fork launcher, the default where
the node has fork, a fork parent per task imports torch once for the cell's processes), its row
written atomically and the claim released.

The scheduler's state comes from `squeue` (a job not in the queue is finished, whatever its
outcome; the row says which), not from `sacct`: without accounting sacct fails, and submitit's
own job state then never learns that a cancelled job died.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from collector import envinfo
from collector.store import ENV_MUST_MATCH as ENV_KEYS  # what a node must share with the run
from collector.store import RunStore

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = "submissions.json"


@dataclass(frozen=True)
class SlurmSettings:
    partition: str | None = None
    account: str | None = None
    constraint: str | None = None
    time_min: int = 60  # per task: a cell's processes (3 by default) with compile, 60 min is ample
    array_parallelism: int = 16
    gpus_per_task: int = 1  # 0 on a CPU matrix
    cpus_per_task: int | None = None
    additional: dict = field(default_factory=dict)  # passed to sbatch as --key=value


_SBATCH_KEY = re.compile(r"[a-z][a-z0-9_-]*")


def settings_from(opts: dict, device: str) -> SlurmSettings:
    """The submission's settings from the command line's (--slurm-*): the named options, and every
    other sbatch option as KEY=VALUE (KEY alone: a flag). ValueError naming a malformed one."""
    extra: dict = {}
    for item in opts.get("args") or []:
        key, eq, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not _SBATCH_KEY.fullmatch(key):
            raise ValueError(f"--slurm-arg {item!r}: an sbatch option is KEY or KEY=VALUE, KEY in lower case "
                             "(e.g. gres=gpu:h200:1, reservation=bench, exclusive)")
        extra[key.replace("-", "_")] = value if eq else True
    for key in ("mem", "qos"):
        if opts.get(key):
            extra[key] = opts[key]
    if opts.get("exclusive"):
        extra["exclusive"] = True
    for name in ("cpus", "gpus"):
        if opts.get(name) is not None and opts[name] < 0:
            raise ValueError(f"--slurm-{name} must be 0 or more, got {opts[name]}")
    gpus = opts.get("gpus")
    return SlurmSettings(partition=opts.get("partition"), account=opts.get("account"),
                         constraint=opts.get("constraint"), time_min=opts.get("time_min", 60),
                         array_parallelism=opts.get("parallelism", 16),
                         gpus_per_task=gpus if gpus is not None else (1 if device == "cuda" else 0),
                         cpus_per_task=opts.get("cpus"), additional=extra)


@dataclass(frozen=True)
class CellJob:
    """What one array task needs: where the run is, the matrix, its cell, the run's environment."""

    run_dir: str
    run_id: str
    matrix: dict
    cell_id: str
    environment: dict
    allow_mixed: bool = False
    python: str = sys.executable
    launcher: str = "fork" if hasattr(os, "fork") else "exec"  # how the task starts the cell's processes


def _job_id() -> str | None:
    """This task's id as squeue prints it (`<array job>_<task>`), or the plain job id."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID")


def node_environment(python: str, device: str) -> dict:
    return envinfo.probe_in(python, device)


def first_node_environment(store: RunStore, env: dict) -> dict:
    """The run's environment as the first node that ran wrote it (created with O_EXCL: of two
    first nodes one wins, the other reads it)."""
    path = store.run_dir / "node-environment.json"
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        for _ in range(50):  # the winner may still be writing it
            try:
                return json.loads(path.read_text())
            except ValueError:
                time.sleep(0.1)
        return json.loads(path.read_text())
    with os.fdopen(fd, "w") as fh:
        json.dump({k: env.get(k) for k in ENV_KEYS + ("hostname",)}, fh)
    return env


def run_cell_job(job: CellJob) -> str:
    """Runs on the node. Returns what happened: the row's status, 'claimed elsewhere', or
    'refused: ...' (a node whose environment differs from the run's writes nothing)."""
    from collector import runner
    from collector.matrix import Matrix
    from collector.runner import measure_cell

    store = RunStore(Path(job.run_dir))
    matrix = Matrix.from_json(job.matrix)
    cell = next(c for c in matrix.cells if c.cell_id == job.cell_id)
    env = node_environment(job.python, job.environment["device"])
    expected = dict(job.environment)
    if expected.get("device_name") is None:  # submitted from a host without the device: the first
        expected = first_node_environment(store, env)  # node to run fixes the run's GPU model
    differ = [f"{k}: run {expected.get(k)!r}, node {env.get(k)!r}" for k in ENV_KEYS
              if expected.get(k) != env.get(k)]
    if differ and not job.allow_mixed:
        note = store.logs_dir / f"{job.cell_id}.refused"
        note.write_text(f"node {env.get('hostname')} (job {_job_id()}) refused to write: {'; '.join(differ)}\n")
        return f"refused: {'; '.join(differ)}"
    if not store.claim(job.cell_id, {"job_id": _job_id()}):
        return "claimed elsewhere"
    # The scheduler stops a task with SIGTERM (scancel, preemption) or, before its time limit,
    # submitit's SIGUSR2; submitit itself lets SIGTERM pass (a requeue), and SLURM signals the
    # cell's processes too. A cell stopped that way did not crash: no row, the claim released,
    # so `status` shows it lost and a resubmission measures it.
    previous = {sig: signal.signal(sig, runner.interrupt) for sig in (signal.SIGTERM, signal.SIGUSR2)}
    runner.INTERRUPTED.clear()
    launcher = (runner.ForkLauncher(job.python, device=env["device"]) if job.launcher == "fork"
                else runner.SubprocessLauncher(job.python))
    try:
        row = measure_cell(cell, matrix, env, job.run_id, store.run_dir, launcher)
        runner.check_interrupted()
        store.write_row(row)
        return row["status"]
    except KeyboardInterrupt:
        return "stopped by the scheduler (no row written)"
    finally:
        launcher.close()  # the task's fork parent, if it has one
        store.release(job.cell_id)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class SubmititExecutor:
    """The real engine: a submitit job array on SLURM, and squeue for the jobs' states."""

    def __init__(self, settings: SlurmSettings):
        self.settings = settings

    def submit(self, jobs: list[CellJob], folder: Path) -> list[str]:
        import submitit

        s = self.settings
        ex = submitit.AutoExecutor(folder=str(folder / "%j"), cluster="slurm")
        time_min = max(1, s.time_min)
        params = dict(timeout_min=time_min, slurm_array_parallelism=s.array_parallelism,
                      # submitit's default USR2 90 s before the limit fires at once under short limits
                      slurm_signal_delay_s=min(90, max(5, time_min * 60 // 10)),
                      slurm_setup=[f"export PYTHONPATH={PROJECT_ROOT}${{PYTHONPATH:+:$PYTHONPATH}}",
                                   f"cd {PROJECT_ROOT}"],
                      name="tcb-cell")
        for key, value in (("slurm_partition", s.partition), ("slurm_account", s.account),
                           ("slurm_constraint", s.constraint), ("cpus_per_task", s.cpus_per_task)):
            if value is not None:
                params[key] = value
        if s.gpus_per_task:
            params["slurm_gpus_per_task"] = s.gpus_per_task
        if s.additional:
            params["slurm_additional_parameters"] = dict(s.additional)
        ex.update_parameters(**params)
        submitted = ex.map_array(run_cell_job, jobs)
        return [str(j.job_id) for j in submitted]

    def states(self, job_ids: list[str]) -> dict[str, str]:
        return squeue_states(job_ids)

    def cancel(self, job_ids: list[str]) -> None:
        arrays = sorted({j.split("_")[0] for j in job_ids})
        if arrays:
            subprocess.run(["scancel", *arrays], check=False)


def squeue_states(job_ids: list[str]) -> dict[str, str]:
    """job id -> state (PENDING, RUNNING, ...) of the given jobs still known to the scheduler;
    array tasks are listed one by one (`%i` prints `<array>_<task>`)."""
    arrays = sorted({j.split("_")[0] for j in job_ids})
    if not arrays:
        return {}
    proc = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T", "-j", ",".join(arrays)],
                          capture_output=True, text=True)
    if proc.returncode != 0 and "Invalid job id" not in proc.stderr:
        raise RuntimeError(f"squeue failed: {proc.stderr.strip()[-400:]}")
    out = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            out[parts[0]] = parts[1]
    return out


def _submissions(run_dir: Path) -> dict:
    path = run_dir / "slurm" / SUBMISSIONS
    return json.loads(path.read_text()) if path.exists() else {"submissions": [], "cells": {}}


def _write_submissions(run_dir: Path, data: dict) -> None:
    from collector.store import write_json as _write_json

    (run_dir / "slurm").mkdir(parents=True, exist_ok=True)
    _write_json(run_dir / "slurm" / SUBMISSIONS, data)


def submit_run(matrix, env: dict, out_dir: Path, run_id: str, executor, out=None,
               allow_mixed: bool = False, resubmit_failed: bool = False, python: str = sys.executable,
               settings: SlurmSettings | None = None, launcher: str = CellJob.launcher) -> Path:
    """Queue every cell of `matrix` that has no row and no live job; returns the run folder.
    The run's manifest is prepared as for a local run (one environment per run, the protocol)."""
    from collector.store import (RETRYABLE, RunError, check_run_id, left_to_measure, prepare_run, run_lock,
                                 write_json as _write_json)

    out = out or sys.stdout
    run_dir = Path(out_dir) / check_run_id(run_id)
    store = RunStore(run_dir)
    try:
        store.create(shared=True)
    except OSError as exc:
        raise RunError(f"cannot write to {run_dir}: {exc.strerror or exc}") from None
    with run_lock(run_dir):  # one submitter at a time (on the submitting host)
        manifest = prepare_run(run_dir, run_id, matrix, env)
        subs = _submissions(run_dir)
        known = subs["cells"]
        live = executor.states([known[c]["job_id"] for c in known])
        stale = store.release_stale(lambda job_id: job_id in live)
        saved = store.saved()
        todo = [c for c in left_to_measure(matrix.cells, saved, resubmit_failed)
                if known.get(c.cell_id, {}).get("job_id") not in live]
        if stale:
            print(f"released {len(stale)} claim(s) of jobs that are gone: {', '.join(stale)}", file=out)
        if not todo:
            print(f"run {run_id}: nothing to submit ({len(saved)} of {len(matrix.cells)} cells saved, "
                  f"{sum(1 for c in matrix.cells if known.get(c.cell_id, {}).get('job_id') in live)} queued or running)",
                  file=out, flush=True)
            return run_dir
        for c in todo:  # a failed row being measured again is replaced when its task finishes
            if resubmit_failed and saved.get(c.cell_id) in RETRYABLE:
                (store.cells_dir / f"{c.cell_id}.parquet").rename(store.cells_dir / f"{c.cell_id}.parquet.retried")
        n = len(subs["submissions"]) + 1
        # what `status --resubmit` needs to queue the same cells again from any later shell
        subs.update(matrix=matrix.to_json(), allow_mixed=allow_mixed, python=python, launcher=launcher)
        if settings is not None:
            subs["settings"] = asdict(settings)
        jobs = [CellJob(str(run_dir.resolve()), run_id, matrix.to_json(), c.cell_id,
                        {k: env.get(k) for k in ENV_KEYS}, allow_mixed, python, launcher) for c in todo]
        folder = run_dir / "slurm" / f"submission{n}"  # never reused: job ids restart with a cluster
        ids = executor.submit(jobs, folder)
        now = time.time()
        subs["submissions"].append({"n": n, "submitted_at": now, "cells": len(todo), "folder": str(folder)})
        for c, job_id in zip(todo, ids):
            known[c.cell_id] = {"job_id": job_id, "submission": n}
        _write_submissions(run_dir, subs)
        manifest["sessions"][-1].update(executor="slurm", submitted_cells=len(todo), submission=n)
        _write_json(run_dir / "run.json", manifest)
    print(f"run {run_id}: submitted {len(todo)} cell(s) as SLURM job(s) {_span(ids)} "
          f"({len(saved)} already saved); this command can exit now.\n"
          f"  progress: make collect-status RUN={run_id}   (python -m collector.slurm status {run_dir})\n"
          f"  lost tasks (cancelled, preempted, timed out): the same status command with RESUBMIT=1",
          file=out, flush=True)
    return run_dir


def _span(ids: list[str]) -> str:
    arrays = sorted({i.split("_")[0] for i in ids})
    return ", ".join(arrays)


def status(run_dir: Path, states) -> dict:
    """Per cell: done / failed / running / queued / lost / not submitted, plus counts and an ETA.
    `states(job_ids)` is the scheduler's view (squeue_states)."""
    run_dir = Path(run_dir)
    manifest = json.loads((run_dir / "run.json").read_text())
    store = RunStore(run_dir)
    subs = _submissions(run_dir)
    known = subs["cells"]
    live = states([v["job_id"] for v in known.values()])
    saved = store.saved()
    claims = store.claims()
    cells = sorted(set(known) | set(saved))
    per = {}
    for cid in cells:
        job = known.get(cid, {}).get("job_id")
        if cid in saved:
            per[cid] = "done" if saved[cid] == "ok" else f"failed ({saved[cid]})"
        elif job in live:
            per[cid] = "running" if live[job] in ("RUNNING", "COMPLETING") or cid in claims else "queued"
        elif (store.logs_dir / f"{cid}.refused").exists():
            per[cid] = "refused"
        elif job is not None:
            per[cid] = "lost"
        else:
            per[cid] = "not submitted"
    counts: dict[str, int] = {}
    for v in per.values():
        key = "failed" if v.startswith("failed") else v
        counts[key] = counts.get(key, 0) + 1
    walls = store.cell_walls()
    left = counts.get("running", 0) + counts.get("queued", 0)
    eta = None
    if walls and left:
        par = max(1, counts.get("running", 0))
        eta = statistics.median(walls) * left / par
    return {"run_id": manifest["run_id"], "cells": per, "counts": counts, "eta_s": eta,
            "in_matrix": manifest["sessions"][-1].get("cells_in_matrix")}


def format_status(st: dict) -> str:
    order = ("done", "failed", "running", "queued", "lost", "refused", "not submitted")
    parts = [f"{st['counts'][k]} {k}" for k in order if st["counts"].get(k)]
    eta = f", about {st['eta_s'] / 60:.0f} min left" if st["eta_s"] else ""
    lines = [f"run {st['run_id']}: {', '.join(parts) or 'nothing submitted'}{eta}"]
    for cid, state in st["cells"].items():
        if state != "done":
            lines.append(f"  {state:<14} {cid}")
    if st["counts"].get("lost"):
        lines.append("lost: no row and no live job (cancelled, preempted, timed out, node died); "
                     "queue them again with RESUBMIT=1 (--resubmit)")
    return "\n".join(lines)


def watch(run_dir: Path, states, interval: float, out=None, sleep=time.sleep, max_looks: int | None = None) -> dict:
    """The submitting side's progress: one line whenever the counts change, until no cell is
    queued or running (then the final status). Ctrl-C stops watching, not the run."""
    out = out or sys.stdout
    last, looks, t0 = None, 0, time.monotonic()
    try:
        while True:
            st = status(run_dir, states)
            line = format_status(st).splitlines()[0]
            if line != last:
                print(f"[{time.monotonic() - t0:6.0f}s] {line}", file=out, flush=True)
                last = line
            looks += 1
            if not (st["counts"].get("running") or st["counts"].get("queued")):
                return st
            if max_looks is not None and looks >= max_looks:
                return st
            sleep(interval)
    except KeyboardInterrupt:
        print("stopped watching; the run goes on (make collect-status RUN=... to look again)", file=out)
        return status(run_dir, states)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m collector.slurm", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("status", help="show a SLURM run's progress; --resubmit queues the lost cells again")
    s.add_argument("run_dir")
    s.add_argument("--resubmit", action="store_true")
    s.add_argument("--json", action="store_true")
    s.add_argument("--watch", action="store_true",
                   help="print the counts again whenever they change, until nothing is queued or running")
    s.add_argument("--interval", type=float, default=10.0, help="seconds between looks with --watch")
    c = sub.add_parser("cancel", help="cancel every queued or running task of the run")
    c.add_argument("run_dir")
    args = p.parse_args(argv)
    run_dir = Path(args.run_dir)
    if not (run_dir / "slurm" / SUBMISSIONS).exists():
        print(f"error: {run_dir} has no SLURM submissions (was it collected with EXECUTOR=slurm?)", file=sys.stderr)
        return 2
    saved = _submissions(run_dir)
    ex = SubmititExecutor(SlurmSettings(**saved.get("settings", {})))
    if args.cmd == "cancel":
        ids = [v["job_id"] for v in saved["cells"].values()]
        ex.cancel(ids)
        print(f"cancelled the run's SLURM jobs {_span(ids)}")
        return 0
    st = status(run_dir, ex.states)
    if args.watch:
        st = watch(run_dir, ex.states, args.interval)
    print(json.dumps(st, indent=2) if args.json else format_status(st))
    if args.resubmit and st["counts"].get("lost"):
        from collector.matrix import Matrix

        manifest = json.loads((run_dir / "run.json").read_text())
        matrix = Matrix.from_json(saved["matrix"])
        submit_run(matrix, manifest["environment"], run_dir.parent, manifest["run_id"], ex,
                   allow_mixed=saved.get("allow_mixed", False), python=saved.get("python", sys.executable),
                   settings=ex.settings, launcher=saved.get("launcher", CellJob.launcher))
    return 0


if __name__ == "__main__":
    sys.exit(main())
