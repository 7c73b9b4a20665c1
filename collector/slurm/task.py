"""What one SLURM array task does on its node (`run_cell_job`, submitted by collector/slurm/submit.py):
probe the node's environment and compare it with the run's (a node that differs writes nothing
unless the run allows mixing), claim the cell (a second task given the same cell leaves it),
measure it exactly as locally (collector.host.cell_measure.measure_cell: its cold process and replicates;
with the fork launcher one fork parent per task, started while the probe runs), write its row
atomically and release the claim. A stop by the scheduler leaves a record of why
(collector/slurm/status.py reads it).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from collector.host import envinfo
from collector.record.contract import NODE_JOBS
from collector.slurm.status import TIMED_OUT, record_stop
from collector.record import comparable
from collector.host.store import RunStore, write_json

ENV_KEYS = comparable.environment_keys(comparable.JOIN)  # what a node must share with the run


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
    time_limit_min: int | None = None  # the task's limit, for the record of a task that reached it


OWN_JOBS = "tcb-"  # the project's array tasks (collector/slurm/submit.py names them): counted from the process table


def other_jobs_on_node(node: str | None = None, run=subprocess.run) -> list[str] | None:
    """The jobs running on this node that are not this project's cells, as '<id> (<user>, <name>)',
    from squeue; None where squeue cannot say (no node name, no squeue, an error). The project's own
    tasks are left out: their cells are counted from the process table (collector/host/neighbours.py)."""
    node = node or os.environ.get("SLURMD_NODENAME")
    if not node:
        return None
    try:
        got = run(["squeue", "-h", "-w", node, "-t", "RUNNING", "-o", "%i|%u|%j"],
                  capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if got.returncode != 0:
        return None
    out = []
    for line in got.stdout.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) == 3 and parts[0] and not parts[2].startswith(OWN_JOBS):
            out.append(f"{parts[0]} ({parts[1]}, {parts[2]})")
    return sorted(set(out))


def _job_id() -> str | None:
    """This task's id as squeue prints it (`<array job>_<task>`), or the plain job id."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID")


def _take_over_own_claim(store: RunStore, cell_id: str) -> bool:
    """A task that SLURM requeued (after a node failure, `--requeue`, preemption) runs again under its
    own id and finds the claim its first run left: no other task can hold that id, so the claim is
    stale and this run takes it over. True when it did (the cell's row not yet written)."""
    me = _job_id()
    held = store.claims().get(cell_id) or {}
    if not me or held.get("job_id") != me:
        return False
    print(f"task {me} (restart {os.environ.get('SLURM_RESTART_COUNT', '?')}): taking over its own claim on "
          f"{cell_id} from its earlier run on {held.get('host')}", file=sys.stderr, flush=True)
    store.release(cell_id)
    return store.claim(cell_id, {"job_id": me, "restart": os.environ.get("SLURM_RESTART_COUNT")})


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
    # a stop before the cell is measured (the probe, the fork parent's imports: SLURM sends the time
    # limit's signal up to a minute early) is recorded here and told apart like one during the cell
    early_stop: list[int] = []
    before_us = ({sig: signal.signal(sig, lambda s, f: early_stop.append(s)) for sig in (signal.SIGTERM, signal.SIGUSR2)}
                 if threading.current_thread() is threading.main_thread() else {})
    try:
        return _run_cell_job(job, early_stop)
    finally:
        for sig, handler in before_us.items():
            signal.signal(sig, handler)


def _stopped_early(store: RunStore, job: CellJob, sigs: list[int], host) -> str:
    reason = TIMED_OUT if signal.SIGUSR2 in sigs else "cancelled or preempted"
    record_stop(store, job.cell_id, reason, job_id=_job_id(), host=host, time_limit_min=job.time_limit_min,
                signal=signal.Signals(sigs[0]).name)
    return f"stopped by the scheduler before the cell ran: {reason} (no row written)"


def _run_cell_job(job: CellJob, early_stop: list[int]) -> str:
    from collector.host import launch
    from collector.plan.matrix import Matrix

    store = RunStore(Path(job.run_dir))
    matrix = Matrix.from_json(job.matrix)
    cell = next(c for c in matrix.cells if c.cell_id == job.cell_id)
    launcher = (launch.ForkLauncher(job.python, device=job.environment["device"]) if job.launcher == "fork"
                else launch.SubprocessLauncher(job.python))
    # the node's probe runs in a thread while this one starts the fork parent: one import of torch
    # less before the first cell. Not the other way round: the parent dies with the thread that
    # started it (PR_SET_PDEATHSIG belongs to the thread), and this thread lives as long as the task.
    probed: dict = {}

    def probe():
        try:
            probed["env"] = node_environment(job.python, job.environment["device"])
        except BaseException as exc:  # raised below, in this thread
            probed["error"] = exc

    early = threading.Thread(target=probe, name="tcb-node-probe", daemon=True)
    early.start()
    try:
        try:
            launcher.prepare(store.logs_dir)
        except Exception:
            if not early_stop:
                raise
        early.join()
        if early_stop and "error" in probed:
            # SLURM signals every process of the task, the probe's too: a probe killed by the limit's
            # signal is the time limit, not a broken node (a fork parent it killed: the check below)
            return _stopped_early(store, job, early_stop, socket.gethostname())
        if "error" in probed:
            raise probed["error"]
        env = probed["env"]
        expected = dict(job.environment)
        if expected.get("device_name") is None:  # submitted from a host without the device: the first
            expected = first_node_environment(store, env)  # node to run fixes the run's GPU model
        differ = [f"{d.key}: run {d.first!r}, node {d.other!r}" for d in
                  comparable.environment_differences(expected, env, comparable.JOIN)]
        if differ and not job.allow_mixed:
            note = store.logs_dir / f"{job.cell_id}.refused"
            note.write_text(f"node {env.get('hostname')} (job {_job_id()}) refused to write: {'; '.join(differ)}\n")
            return f"refused: {'; '.join(differ)}"
        if early_stop:
            return _stopped_early(store, job, early_stop, env.get("hostname"))
        if not store.claim(job.cell_id, {"job_id": _job_id()}) and not _take_over_own_claim(store, job.cell_id):
            return "claimed elsewhere"
        try:
            return _measure_claimed(job, store, matrix, cell, env, launcher)
        finally:
            store.release(job.cell_id)
    finally:
        early.join()
        launcher.close()  # the task's fork parent, if it has one


def _measure_claimed(job: CellJob, store: RunStore, matrix, cell, env: dict, launcher) -> str:
    """Measure the claimed cell and write its row; the scheduler's stop signals recorded.
    The scheduler stops a task with SIGTERM (scancel, preemption) or, before its time limit,
    submitit's SIGUSR2; submitit itself lets SIGTERM pass (a requeue), and SLURM signals the
    cell's processes too. A cell stopped that way did not crash: no row, the claim released, a
    record of why (logs/<cell>.stopped: timed out with its limit, or cancelled or preempted),
    so `status` says so and a resubmission measures it."""
    from collector.host import stop as stop_mod
    from collector.host.cell_measure import measure_cell

    got: list[int] = []

    def stop(sig, frame):
        got.append(sig)
        stop_mod.interrupt(sig, frame)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGUSR2)}
    stop_mod.INTERRUPTED.clear()
    before = other_jobs_on_node()  # other users' jobs beside the cell: asked before and after it ran
    try:
        row = measure_cell(cell, matrix, env, job.run_id, store.run_dir, launcher)
        stop_mod.check_interrupted()
        after = other_jobs_on_node()
        write_json(store.logs_dir / f"{job.cell_id}{NODE_JOBS}",
                   {"node": env.get("hostname"), "job_id": _job_id(), "before": before, "after": after})
        store.write_row(row)
        return row["status"]
    except KeyboardInterrupt:
        reason = TIMED_OUT if signal.SIGUSR2 in got else "cancelled or preempted"
        record_stop(store, job.cell_id, reason, job_id=_job_id(), host=env.get("hostname"),
                    time_limit_min=job.time_limit_min, signal=signal.Signals(got[0]).name if got else None)
        return f"stopped by the scheduler: {reason} (no row written)"
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
