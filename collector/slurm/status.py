"""A SLURM run's state per cell (`make collect-status`): done, failed, running, queued, and for a
cell with no row and no live task, why: timed out, cancelled or preempted, node failure, crashed,
or lost when nothing says.

Where that comes from, first answer kept:
1. the task's own record, `logs/<cell>.stopped` (JSON), written when the scheduler stopped it:
   submitit's SIGUSR2 before the time limit -> timed out (with the limit it had); SIGTERM ->
   cancelled or preempted (scancel and preemption send the same signal; the scheduler's record,
   3., tells them apart where it has one);
2. submitit's result file of the task: an error there is a task that raised (crashed, with the
   error's last line); no result and srun's "User defined signal 2" as the task's last error line:
   the limit's signal killed the interpreter while it still started -> timed out;
3. the scheduler's record of the finished job: `sacct` where the cluster keeps accounting, else
   `scontrol show job`, which remembers a job for MinJobAge (300 s by default): TIMEOUT,
   CANCELLED, PREEMPTED, NODE_FAIL, FAILED, OUT_OF_MEMORY, ...;
4. a claim the task never released: the task was killed outright (SIGKILL, out of memory) or
   its node died -> node failure or killed;
5. else lost.
Only a record of the cell's latest job counts (an older attempt's record says nothing of it).
"""
from __future__ import annotations

import json
import pickle
import statistics
import subprocess
import sys
import time
from pathlib import Path

from collector.host.store import RunStore, read_run_manifest

SUBMISSIONS = "submissions.json"
LIMIT_SIGNAL = "User defined signal 2"  # srun's words for a task killed by SIGUSR2, the time limit's early signal
STOPPED = ".stopped"  # logs/<cell>.stopped: why the scheduler stopped a task before its row
TIMED_OUT, CANCELLED, PREEMPTED, NODE_FAILURE, CRASHED, LOST = (
    "timed out", "cancelled", "preempted", "node failure", "crashed", "lost")
STOPPED_STATES = (TIMED_OUT, CANCELLED, PREEMPTED, "cancelled or preempted", NODE_FAILURE, CRASHED, LOST)
ORDER = ("done", "failed", "running", "queued") + STOPPED_STATES + ("refused", "not submitted")
SACCT = {"TIMEOUT": TIMED_OUT, "CANCELLED": CANCELLED, "PREEMPTED": PREEMPTED, "NODE_FAIL": NODE_FAILURE,
         "BOOT_FAIL": NODE_FAILURE, "FAILED": CRASHED, "OUT_OF_MEMORY": CRASHED, "DEADLINE": TIMED_OUT}


def arrays_of(job_ids) -> list[str]:
    """The job arrays of task ids (`<array>_<task>` -> `<array>`; a plain job id is its own)."""
    return sorted({j.split("_")[0] for j in job_ids})


def submissions(run_dir: Path) -> dict:
    path = Path(run_dir) / "slurm" / SUBMISSIONS
    return json.loads(path.read_text()) if path.exists() else {"submissions": [], "cells": {}}


def sacct_states(job_ids: list[str]) -> dict[str, str]:
    """job id -> sacct's final state, or {} where the cluster has no accounting (sacct fails)."""
    if not job_ids:
        return {}
    try:
        proc = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j",
                               ",".join(arrays_of(job_ids))],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if proc.returncode != 0:
        return {}
    out = {}
    for line in proc.stdout.splitlines():
        job, _, state = line.partition("|")
        if state:
            out[job] = state.split()[0]  # "CANCELLED by 0" -> CANCELLED
    return out


def scontrol_states(job_ids: list[str]) -> dict[str, str]:
    """job id -> final state from `scontrol show job`, which keeps a finished job for MinJobAge
    (300 s by default) with or without accounting; {} where it knows none of them."""
    out: dict[str, str] = {}
    for array in arrays_of(job_ids):
        try:
            proc = subprocess.run(["scontrol", "show", "job", "-o", array], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return out
        for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
            f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            key = f"{f['ArrayJobId']}_{f['ArrayTaskId']}" if f.get("ArrayTaskId") else f.get("JobId")
            if key and f.get("JobState"):
                out[key] = f["JobState"]
    return out


def scheduler_record(job_ids: list[str]) -> dict[str, str]:
    """The scheduler's final states: sacct where the cluster keeps accounting, else scontrol's
    memory of recent jobs."""
    return sacct_states(job_ids) or scontrol_states(job_ids)


def record_stop(store: RunStore, cell_id: str, reason: str, **info) -> None:
    from collector.host.store import write_json

    write_json(store.logs_dir / f"{cell_id}{STOPPED}", {"reason": reason, "at": time.time(), **info})


def _task_result(run_dir: Path, sub: dict, job_id: str) -> tuple[str, str] | None:
    """submitit's result of the task: ("success", answer) or ("error", traceback), or None."""
    folder = Path(sub.get("folder") or run_dir / "slurm" / f"submission{sub.get('n')}")
    path = folder / f"{job_id}_0_result.pkl"  # one folder a submission
    if not path.exists():
        path = folder / job_id / f"{job_id}_0_result.pkl"  # runs submitted with a folder a job
    try:
        with path.open("rb") as fh:
            got = pickle.load(fh)  # written by this run's own tasks
        return (str(got[0]), str(got[1]))
    except Exception:
        return None


def _err_tail(run_dir: Path, sub: dict, job_id: str) -> str | None:
    """The last line the task wrote to its stderr (submitit's `<job>_0_log.err`): what a task that
    died outside Python (a setup line, srun, the node) said last; None when it said nothing."""
    folder = Path(sub.get("folder") or run_dir / "slurm" / f"submission{sub.get('n')}")
    for path in (folder / f"{job_id}_0_log.err", folder / job_id / f"{job_id}_0_log.err"):
        try:
            with path.open("rb") as fh:
                fh.seek(0, 2)
                fh.seek(max(0, fh.tell() - 8192))
                lines = [ln.strip() for ln in fh.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        except OSError:
            continue
        lines = [ln for ln in lines if not ln.startswith("submitit ")]  # submitit's own log lines
        return lines[-1][:160] if lines else None
    return None


def why_gone(run_dir: Path, cid: str, entry: dict, claims: dict, accounting: dict, subs: dict) -> str:
    """Why a submitted cell has no row and no live task (see the module's docstring)."""
    job = entry.get("job_id")
    try:
        rec = json.loads((Path(run_dir) / "logs" / f"{cid}{STOPPED}").read_text())
    except (OSError, ValueError):
        rec = {}
    state = accounting.get(job)
    if rec.get("job_id") == job and rec.get("reason"):
        where = f"job {job} on {rec.get('host', '?')}"
        if rec["reason"] == TIMED_OUT and rec.get("time_limit_min"):
            return f"{TIMED_OUT} (limit {rec['time_limit_min']} min; {where})"
        if state in ("CANCELLED", "PREEMPTED"):  # the one signal told apart by the scheduler's record
            return f"{SACCT[state]} ({where})"
        return f"{rec['reason']} ({where})"
    sub = next((s for s in subs.get("submissions", []) if s.get("n") == entry.get("submission")), {})
    result = _task_result(Path(run_dir), sub, job) if job else None
    if result and result[0] == "error" and "timed-out and not checkpointable" in result[1]:
        # submitit's own answer to the time limit's signal before the task's handler was in place
        # (while submitit unpickled the job and imported the collector)
        return f"{TIMED_OUT} (before the task started; job {job})"
    if result and result[0] == "error":  # the task raised: its own last line says most
        last = [ln for ln in result[1].strip().splitlines() if ln.strip()]
        return f"{CRASHED} (job {job}: {last[-1][:160] if last else 'no traceback'})"
    said = _err_tail(Path(run_dir), sub, job) if job else None
    tail = f"; its last error line: {said}" if said else ""
    if said and LIMIT_SIGNAL in said and state not in ("CANCELLED", "PREEMPTED", "NODE_FAIL"):
        # the limit's early signal (submitit's --signal=USR2@...) reached the task's interpreter while it
        # still started, before any handler (site imports, a slow file system): its default kills it
        limit = f"limit {sub['time_min']} min; " if sub.get("time_min") else ""
        return (f"{TIMED_OUT} ({limit}the limit's signal came while the task's Python still started: give more time "
                f"with SLURM_TIME; job {job})")
    if state in SACCT:
        return f"{SACCT[state]} (scheduler: {state}, job {job}{tail})"
    if claims.get(cid, {}).get("job_id") == job:
        return f"{NODE_FAILURE} (job {job} left its claim on {claims[cid].get('host', '?')}: killed or its node died{tail})"
    return f"{LOST} ({tail[2:]})" if tail else LOST


def _category(state: str) -> str:
    if state.startswith("failed"):
        return "failed"
    return next((k for k in ORDER if state == k or state.startswith(k + " (")), state)


def status(run_dir: Path, states, accounting=None) -> dict:
    """Per cell: done / failed / running / queued / why a task ended without a row / refused / not
    submitted, plus counts and an ETA. `states(job_ids)` is the scheduler's live view (squeue),
    `accounting(job_ids)` its record of finished jobs (sacct_states; None: none)."""
    run_dir = Path(run_dir)
    manifest = read_run_manifest(run_dir / "run.json")  # the one reader: a FIFO or a foreign file is refused
    store = RunStore(run_dir)
    subs = submissions(run_dir)
    known = subs["cells"]
    live = states([v["job_id"] for v in known.values()])
    saved = store.saved()
    claims = store.claims()
    cells = sorted(set(known) | set(saved))
    gone = [v["job_id"] for c, v in known.items() if c not in saved and v["job_id"] not in live]
    acct = accounting(gone) if (accounting and gone) else {}
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
            per[cid] = why_gone(run_dir, cid, known[cid], claims, acct, subs)
        else:
            per[cid] = "not submitted"
    counts: dict[str, int] = {}
    for v in per.values():
        counts[_category(v)] = counts.get(_category(v), 0) + 1
    walls = store.cell_walls()
    left = counts.get("running", 0) + counts.get("queued", 0)
    eta = None
    if walls and left:
        eta = statistics.median(walls) * left / max(1, counts.get("running", 0))
    return {"run_id": manifest["run_id"], "cells": per, "counts": counts, "eta_s": eta,
            "in_matrix": manifest["sessions"][-1].get("cells_in_matrix")}


def to_resubmit(st: dict) -> int:
    """How many cells ended without a row and no live task (what --resubmit queues again)."""
    return sum(st["counts"].get(k, 0) for k in STOPPED_STATES)


def format_status(st: dict) -> str:
    parts = [f"{st['counts'][k]} {k}" for k in ORDER if st["counts"].get(k)]
    eta = f", about {st['eta_s'] / 60:.0f} min left" if st["eta_s"] else ""
    lines = [f"run {st['run_id']}: {', '.join(parts) or 'nothing submitted'}{eta}"]
    for cid, state in st["cells"].items():
        if state != "done":
            lines.append(f"  {cid}: {state}")
    if to_resubmit(st):
        lines.append("no row and no live task: queue them again with RESUBMIT=1 (--resubmit); "
                     "timed out: give more time with RESUBMIT=1 SLURM_TIME=<minutes>")
    return "\n".join(lines)


def watch(run_dir: Path, states, interval: float, out=None, sleep=time.sleep, max_looks: int | None = None,
          accounting=None) -> dict:
    """The submitting side's progress: one line whenever the counts change, until no cell is
    queued or running (then the final status). Ctrl-C stops watching, not the run."""
    out = out or sys.stdout
    last, looks, t0 = None, 0, time.monotonic()
    try:
        while True:
            st = status(run_dir, states, accounting)
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
        return status(run_dir, states, accounting)
