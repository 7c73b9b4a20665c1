"""The matrix on a SLURM cluster (`EXECUTOR=slurm`, `--executor slurm`): one array task per cell,
submitted through submitit; every task writes its row into the one run folder on a shared
filesystem (collector/host/store.py). The submitting command returns once the array is queued;
`make collect-status RUN=...` (`python -m collector.slurm.submit status RUN_DIR`) shows done / running /
queued / failed / lost with an ETA, and `--resubmit` queues again what was lost (a cancelled,
preempted, timed-out or crashed task: no row and no live job).

What runs on a node is `run_cell_job(CellJob)` (collector/slurm/task.py): the node's environment
is probed and compared with the run's (torch, device, GPU name); a node that differs writes
nothing unless the run allows mixing (then its rows carry their own torch and GPU, as every row
does). Then the cell is claimed (a second task given the same cell leaves it), measured exactly
as locally, its row written atomically and the claim released.

The scheduler's live state comes from `squeue` (a job not in the queue is finished, whatever
its outcome): without accounting sacct fails, and submitit's own job state then never learns that
a cancelled job died. Why a finished task left no row (timed out, cancelled, node failure,
crashed) is collector/slurm/status.py's answer: the task's own record first, sacct where there is
accounting, submitit's result file, the claims.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from collector.slurm.site_profile import DEFAULT_CPUS, partition_cpus, with_profile  # noqa: F401 (with_profile: executors)
from collector.slurm.status import SUBMISSIONS, arrays_of, format_status, scheduler_record, status, to_resubmit, watch
from collector.slurm.task import CellJob, run_cell_job
from collector.slurm.status import submissions as _submissions
from collector.record import comparable
from collector.host.store import RunStore, read_run_manifest

ENV_KEYS = comparable.environment_keys(comparable.JOIN)  # what a node must share with the run

PROJECT_ROOT = Path(__file__).resolve().parents[2]


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
    setup: tuple = ()  # the site's shell lines before the task (module load, conda activate, source env.sh)
    wckey: str | None = None  # sbatch --wckey only where asked (submitit would add --wckey=submitit)


_SBATCH_KEY = re.compile(r"[a-z][a-z0-9_-]*")


def settings_from(opts: dict, device: str) -> SlurmSettings:
    """The submission's settings from the command line's (--slurm-*) and the site profile's: the named
    options, and every other sbatch option as KEY=VALUE (KEY alone: a flag). ValueError naming a
    malformed one. Without --slurm-cpus a task asks DEFAULT_CPUS, at most half the partition's
    smallest node."""
    extra: dict = {}
    for item in opts.get("args") or []:
        key, eq, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not _SBATCH_KEY.fullmatch(key):
            raise ValueError(f"--slurm-arg {item!r}: an sbatch option is KEY or KEY=VALUE, KEY in lower case "
                             "(e.g. gres=gpu:h200:1, reservation=bench, exclusive)")
        extra[key.replace("-", "_")] = value if eq else True
    for key in ("mem", "qos", "gres"):
        if opts.get(key):
            extra[key] = opts[key]
    if opts.get("exclusive"):
        extra["exclusive"] = True
    for name in ("cpus", "gpus"):
        if opts.get(name) is not None and opts[name] < 0:
            raise ValueError(f"--slurm-{name} must be 0 or more, got {opts[name]}")
    gpus = opts.get("gpus")
    if gpus is None:  # a GRES site asks for its GPUs by gres=gpu:<type>:N: no --gpus-per-task beside it
        gpus = 0 if opts.get("gres") or "gres" in extra else (1 if device == "cuda" else 0)
    cpus = opts.get("cpus")
    if cpus is None:
        node = partition_cpus(opts.get("partition"))  # at most half a node: its other GPUs' tasks need theirs
        cpus = max(1, min(DEFAULT_CPUS, node // 2)) if node else DEFAULT_CPUS
    return SlurmSettings(partition=opts.get("partition"), account=opts.get("account"),
                         constraint=opts.get("constraint"), time_min=opts.get("time_min") or 60,
                         array_parallelism=opts.get("parallelism") or 16,
                         gpus_per_task=gpus, cpus_per_task=cpus or None, additional=extra,
                         setup=tuple(opts.get("setup") or ()), wckey=opts.get("wckey") or None)


class SubmititExecutor:
    """The real engine: a submitit job array on SLURM, and squeue for the jobs' states."""

    def __init__(self, settings: SlurmSettings):
        self.settings = settings

    def submit(self, jobs: list[CellJob], folder: Path, name: str = "tcb-cell") -> list[str]:
        """Queue `jobs` as one array named `name`; returns the tasks' ids."""
        import submitit

        s = self.settings
        # one folder for the whole submission, made before sbatch runs: with submitit's usual
        # `<folder>/%j` the job's log folder is made only after sbatch answers, and a task the
        # scheduler starts in between fails to launch (JobLaunchFailure: no folder for its output)
        folder.mkdir(parents=True, exist_ok=True)
        ex = submitit.AutoExecutor(folder=str(folder), cluster="slurm")
        time_min = max(1, s.time_min)
        params = dict(timeout_min=time_min, slurm_array_parallelism=s.array_parallelism,
                      # submitit's default USR2 90 s before the limit fires at once under short limits
                      slurm_signal_delay_s=min(90, max(5, time_min * 60 // 10)),
                      slurm_setup=[*s.setup, f"export PYTHONPATH={PROJECT_ROOT}${{PYTHONPATH:+:$PYTHONPATH}}",
                                   f"cd {PROJECT_ROOT}"],
                      **({"slurm_wckey": s.wckey} if s.wckey else {}),
                      name=name)
        for key, value in (("slurm_partition", s.partition), ("slurm_account", s.account),
                           ("slurm_constraint", s.constraint), ("cpus_per_task", s.cpus_per_task)):
            if value is not None:
                params[key] = value
        if s.gpus_per_task:
            params["slurm_gpus_per_task"] = s.gpus_per_task
        if s.additional:
            params["slurm_additional_parameters"] = dict(s.additional)
        ex.update_parameters(**params)
        inner = getattr(ex, "_executor", None)  # submitit's SlurmExecutor: a None is left out of the script
        if s.wckey is None and isinstance(getattr(inner, "parameters", None), dict):
            inner.parameters["wckey"] = None  # update_parameters drops a None and keeps --wckey=submitit
        submitted = ex.map_array(run_cell_job, jobs)
        return [str(j.job_id) for j in submitted]

    def states(self, job_ids: list[str]) -> dict[str, str]:
        return squeue_states(job_ids)

    def accounting(self, job_ids: list[str]) -> dict[str, str]:
        return scheduler_record(job_ids)

    def cancel_name(self, name: str) -> None:
        """Cancel this user's jobs named `name`: an array sbatch queued but never reported (Ctrl-C)."""
        subprocess.run(["scancel", f"--name={name}", f"--user={os.environ.get('USER') or os.getuid()}"],
                       check=False, capture_output=True)

    def cancel(self, job_ids: list[str]) -> None:
        arrays = arrays_of(job_ids)
        if arrays:
            subprocess.run(["scancel", *arrays], check=False)


def squeue_states(job_ids: list[str]) -> dict[str, str]:
    """job id -> state (PENDING, RUNNING, ...) of the given jobs still known to the scheduler;
    array tasks are listed one by one (`%i` prints `<array>_<task>`)."""
    arrays = arrays_of(job_ids)
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


def _write_submissions(run_dir: Path, data: dict) -> None:
    from collector.host.store import write_json as _write_json

    (run_dir / "slurm").mkdir(parents=True, exist_ok=True)
    _write_json(run_dir / "slurm" / SUBMISSIONS, data)


def submit_run(matrix, env: dict, out_dir: Path, run_id: str, executor, out=None,
               allow_mixed: bool = False, resubmit_failed: bool = False, python: str = sys.executable,
               settings: SlurmSettings | None = None, launcher: str = CellJob.launcher,
               note: str | None = None) -> Path:
    """Queue every cell of `matrix` that has no row and no live job; returns the run folder.
    The run's manifest is prepared as for a local run (one environment per run, the protocol)."""
    from collector.host.store import (RETRYABLE, RunError, check_run_id, left_to_measure, prepare_run, run_lock,
                                 write_json as _write_json)

    out = out or sys.stdout
    run_dir = Path(out_dir) / check_run_id(run_id)
    store = RunStore(run_dir)
    try:
        store.create(shared=True)
    except OSError as exc:
        raise RunError(f"cannot write to {run_dir}: {exc.strerror or exc}") from None
    with run_lock(run_dir):  # one submitter at a time (on the submitting host)
        manifest = prepare_run(run_dir, run_id, matrix, env, note=note)
        subs = _submissions(run_dir)
        known = subs["cells"]
        # the claims' own job ids too: a claim of another submitter's live task is not stale
        claimed = [o.get("job_id") for o in store.claims().values() if o.get("job_id")]
        live = executor.states(sorted({known[c]["job_id"] for c in known} | set(claimed)))
        stale = store.release_stale(lambda owner: store.owner_alive(owner, live))
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
        n = _next_submission(run_dir, subs)
        # what `status --resubmit` needs to queue the same cells again from any later shell
        subs.update(matrix=matrix.to_json(), allow_mixed=allow_mixed, python=python, launcher=launcher)
        if settings is not None:
            subs["settings"] = asdict(settings)
        jobs = [CellJob(str(run_dir.resolve()), run_id, matrix.to_json(), c.cell_id,
                        {k: env.get(k) for k in ENV_KEYS}, allow_mixed, python, launcher,
                        max(1, settings.time_min) if settings is not None else None) for c in todo]
        folder = run_dir / "slurm" / f"submission{n}"  # never reused: job ids restart with a cluster
        name = f"tcb-{run_id}-s{n}-{os.urandom(3).hex()}"  # what finds the array if sbatch never answers
        entry = {"n": n, "submitted_at": time.time(), "cells": len(todo), "folder": str(folder), "name": name,
                 **({"time_min": max(1, settings.time_min)} if settings is not None else {})}
        ids = _submit_or_cancel(executor, jobs, folder, name, run_dir, subs, entry, out)
        subs["submissions"].append({**entry, "arrays": arrays_of(ids)})
        _remember(known, todo, ids, n)
        _write_submissions(run_dir, subs)
        manifest["sessions"][-1].update(executor="slurm", submitted_cells=len(todo), submission=n,
                                        slurm_arrays=subs["submissions"][-1]["arrays"])
        _write_json(run_dir / "run.json", manifest)
    print(f"run {run_id}: submitted {len(todo)} cell(s) as SLURM job(s) {_span(ids)} "
          f"({len(saved)} already saved); this command can exit now.\n{_FOLLOW_UP.format(run_id=run_id, run_dir=run_dir)}",
          file=out, flush=True)
    return run_dir


_FOLLOW_UP = ("  progress: make collect-status RUN={run_id}   (python -m collector.slurm.submit status {run_dir})\n"
              "  lost tasks (cancelled, preempted, timed out): the same status command with RESUBMIT=1")


def _remember(known: dict, todo: list, ids: list, n: int) -> None:
    """Each submitted cell's job id, submission and every job that has tried it (submissions.json)."""
    for c, job_id in zip(todo, ids):
        before = known.get(c.cell_id, {})
        attempts = before.get("attempts") or ([before["job_id"]] if before.get("job_id") else [])
        known[c.cell_id] = {"job_id": job_id, "submission": n, "attempts": attempts + [job_id]}


def _next_submission(run_dir: Path, subs: dict) -> int:
    """A submission number no earlier one used, recorded or not (an interrupted submission's
    folder may exist without a record)."""
    used = {s.get("n", 0) for s in subs["submissions"]}
    for path in (run_dir / "slurm").glob("submission*"):
        if path.name[len("submission"):].isdigit():
            used.add(int(path.name[len("submission"):]))
    return max(used, default=0) + 1


def _submit_or_cancel(executor, jobs, folder: Path, name: str, run_dir: Path, subs: dict, entry: dict, out) -> list:
    """executor.submit, and on Ctrl-C (or a stop signal) during it: cancel whatever sbatch queued
    under `name`, record the submission as interrupted, one message, KeyboardInterrupt."""
    from collector.host.stop import INTERRUPTED, REPORTED

    try:
        ids = executor.submit(jobs, folder, name)
    except BaseException as exc:
        if not (isinstance(exc, KeyboardInterrupt) or INTERRUPTED.is_set()):
            from collector.host.store import RunError

            raise RunError(f"sbatch refused the submission: {str(exc).strip()[-600:]}") from None
        executor.cancel_name(name)
        subs["submissions"].append({**entry, "interrupted": True, "cancelled": True})
        _write_submissions(run_dir, subs)
        print(f"\ninterrupted while submitting: every task queued under the name {name} was cancelled; "
              "nothing of this submission runs. The same command submits again.", file=out, flush=True)
        REPORTED.set()
        raise KeyboardInterrupt("interrupted while submitting") from None
    if INTERRUPTED.is_set():  # Ctrl-C after sbatch answered: the array is queued and recorded
        print(f"\ninterrupted after the submission: its {len(ids)} task(s) are queued and recorded; "
              "make collect-cancel RUN=... cancels them", file=out, flush=True)
    return ids


def _span(ids: list[str]) -> str:
    return ", ".join(arrays_of(ids))


def main(argv=None) -> int:
    if argv is None:  # the command line: `... status RUN | head -1` ends quietly, no BrokenPipeError
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    p = argparse.ArgumentParser(prog="python -m collector.slurm.submit", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("status", help="show a SLURM run's progress; --resubmit queues the lost cells again")
    s.add_argument("run_dir")
    s.add_argument("--resubmit", action="store_true",
                   help="queue again every cell that ended without a row (timed out, cancelled, crashed, lost)")
    s.add_argument("--slurm-time", dest="time_min", type=int, metavar="MINUTES",
                   help="with --resubmit: the new tasks' time limit (default: the run's last one)")
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
    settings = SlurmSettings(**saved.get("settings", {}))
    if args.cmd == "status" and args.time_min is not None:
        if not args.resubmit:
            print("error: --slurm-time sets the limit of resubmitted tasks: it goes with --resubmit "
                  "(make collect-status RUN=... RESUBMIT=1 SLURM_TIME=<minutes>)", file=sys.stderr)
            return 2
        if args.time_min < 1:
            print(f"error: --slurm-time must be 1 minute or more, got {args.time_min}", file=sys.stderr)
            return 2
        settings = replace(settings, time_min=args.time_min)
    ex = SubmititExecutor(settings)
    if args.cmd == "cancel":
        ids = [v["job_id"] for v in saved["cells"].values()]
        ex.cancel(ids)
        print(f"cancelled the run's SLURM jobs {_span(ids)}")
        return 0
    st = status(run_dir, ex.states, ex.accounting)
    if args.watch:
        st = watch(run_dir, ex.states, args.interval, accounting=ex.accounting)
    print(json.dumps(st, indent=2) if args.json else format_status(st))
    if args.resubmit and to_resubmit(st):
        from collector.plan.matrix import Matrix
        from collector.host.store import RunError

        manifest = read_run_manifest(run_dir / "run.json")
        matrix = Matrix.from_json(saved["matrix"])
        try:
            submit_run(matrix, manifest["environment"], run_dir.parent, manifest["run_id"], ex,
                       allow_mixed=saved.get("allow_mixed", False), python=saved.get("python", sys.executable),
                       settings=ex.settings, launcher=saved.get("launcher", CellJob.launcher))
        except RunError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 3
        except KeyboardInterrupt:
            return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
