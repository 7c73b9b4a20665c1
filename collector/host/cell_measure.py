"""One cell, measured: its cold process, then `processes - 1` replicate processes on its warm
cache (or, with one process, the warm-cache compile alone), then the portable-cache one, each a
fresh process the launcher starts (collector/host/launch.py); the samples joined process-major into one
complete row (collector/record/schema.py), with what else measured on the host meanwhile
(collector/host/neighbours.py). Every executor measures a cell through `measure_cell`: the local
scheduler (collector/host/runner.py) and a SLURM task (collector/slurm/task.py).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from collector.host import autotune, neighbours

from collector import modes

from collector.record import schema
from collector.record.contract import OOM_SHARED, SHARED_GPU_OOM_HEAD
from collector.record.result import CellResult, ResultError
from collector.plan.job import Job, Layout
from collector.host.launch import Launcher
from collector.plan.matrix import Cell, Matrix
from collector.host.stop import check_interrupted
from collector.host.store import _now
from collector.host.workers import Worker


def dir_bytes(path: Path) -> int | None:
    """Total size of the files under `path` (None if it does not exist)."""
    if not path.exists():
        return None
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, f)).st_size
    return total


def cell_spec(cell: Cell, matrix: Matrix, device: str, kind: str = "cold", **extra) -> dict:
    """The job (collector.plan.job.Job) for one process of `cell`, as the JSON the child reads."""
    return Job(kind=kind, cell=cell, protocol=matrix.protocol, device=device, **extra).to_json()


SAMPLE_LISTS = ("eager_step_ms", "compiled_step_ms", "eager_enqueue_ms", "compiled_enqueue_ms",
                "eager_block_wall_ms", "compiled_block_wall_ms")
PEAKS = ("eager_peak_allocated_bytes", "eager_peak_reserved_bytes", "compiled_peak_allocated_bytes",
         "compiled_peak_reserved_bytes")


def add_replicate(result: CellResult, rep: CellResult, index: int) -> str | None:
    """Append a replicate process's samples to the cell's `result` (process-major); returns why
    it was not used, or None. A replicate whose sample counts differ from the cold process's is
    refused: every process must have one block layout."""
    if rep.get("status") != "ok":
        first = (rep.get("error") or "").strip().splitlines()
        return f"process {index + 1}: {rep.get('status')}: {first[0] if first else 'no error text'}"[:300]
    per = result.get("processes") or 1
    for col in SAMPLE_LISTS:
        mine, theirs = result.get(col), rep.get(col)
        if mine is None and theirs is None:
            continue
        if mine is None or theirs is None or len(theirs) * per != len(mine):
            return f"process {index + 1}: {col} has {len(theirs or [])} samples, the cold process {len(mine or [])}"
    for col in SAMPLE_LISTS:
        if result.get(col) is not None:
            result[col] = list(result[col]) + list(rep[col])
    for col in PEAKS:
        if rep.get(col) is not None:
            result[col] = max(result.get(col) or 0, rep[col])
    result["processes"] = per + 1
    return None


def measure_cell(cell: Cell, matrix: Matrix, env: dict, run_id: str, run_dir: Path,
                 launcher: Launcher, clock: Callable[[], float] = time.monotonic,
                 worker: Worker = Worker(), concurrent: int = 1) -> dict:
    """Run one cell and return its complete row (_measure_cell). `concurrent`: the cells this
    collector runs at once (its GPU workers); the row's concurrent_cells adds the most cells seen
    measuring at once on this host outside this collector (a shard, another collector, SLURM
    tasks on one node: collector/host/neighbours.py)."""
    with neighbours.Watch() as seen:
        row = _measure_cell(cell, matrix, env, run_id, run_dir, launcher, clock, worker)
    row["concurrent_cells"] = concurrent + seen.most
    return row


SHARED_GPU_OOM = (f"{SHARED_GPU_OOM_HEAD} (GPUS=0,0): not the model's need until it is "
                  "measured alone, as the same command does once the other cells are done (collector/host/alone.py).")
SHARED_GPU_WAIT = ("timed out waiting for its turn on a GPU shared with another cell (GPUS=0,0): the other cell "
                   "held the GPU's lock (its timing, or a hang of its own), so this time limit says nothing of this "
                   "cell; measure it again with RETRY=1.")
WAITING_STEP = "last step logged: waiting for the "  # collector/child/turns.py's waits, as launch._last_step puts them


@dataclass
class _Jobs:
    """The processes of one cell: each run through the launcher with the cell's log and time limit,
    its wall and CPU time and its wait for a shared GPU's timing lock kept (process_wall_s, process_cpu_s,
    timing_wait_s), a stop request checked before and after."""
    cell: Cell
    matrix: Matrix
    device: str
    launcher: Launcher
    clock: Callable[[], float]
    log_path: Path
    walls: list = field(default_factory=list)
    cpus: list = field(default_factory=list)
    waits: list = field(default_factory=list)
    stages: list = field(default_factory=list)

    def run(self, cache: Path, **spec) -> CellResult:
        """One process: its job written as the JSON the child reads, its result read back typed."""
        check_interrupted()
        p0 = self.clock()
        got = self.launcher.run(cell_spec(self.cell, self.matrix, self.device, **spec), cache, self.log_path,
                                self.matrix.protocol.timeout_s)
        self.walls.append(self.clock() - p0)
        check_interrupted()
        result = received(got)
        said = result.get("process_cpu_s") or [None]
        self.cpus.append(said[0])
        waited = result.get("timing_wait_s") or [None]
        self.waits.append(waited[0])
        self.stages.append(_stages_of(result))
        return result


def _stages_of(result: CellResult) -> dict | None:
    """A process's {stage: seconds} (its process_stages_json, a list of one); None where it said none."""
    try:
        said = json.loads(result.get("process_stages_json") or "null")
    except ValueError:
        return None
    return said[0] if isinstance(said, list) and said and isinstance(said[0], dict) else None


def received(got: dict) -> CellResult:
    """A process's result JSON as a CellResult; one that breaks the row's contract (a field the row
    lacks, a value of another type: a child of other code) is a crashed process that says so."""
    try:
        return CellResult.from_json(got)
    except ResultError as exc:
        return CellResult(status="crashed", error=f"the cell process's result breaks the row's contract: {exc}"[:1500])


def _cold_process(jobs: _Jobs, cache_dir: Path, mode, extra: dict) -> CellResult:
    """The first process: compiles cold in `cache_dir`; its cache's sizes and autotuning choices."""
    result = jobs.run(cache_dir, **extra)
    if mode.compiles:
        result["cache_inductor_bytes"] = dir_bytes(cache_dir / "inductor")
        result["cache_triton_bytes"] = dir_bytes(cache_dir / "triton")
        tuned = autotune.choices(cache_dir)
        result["autotune_json"] = json.dumps(tuned, sort_keys=True) if tuned else None
    return result


def _replicates(jobs: _Jobs, result: CellResult, cache_dir: Path, mode) -> list[str]:
    """`processes - 1` replicate processes, each timing the cell again, on the cold one's warm cache
    or (COLD_REPLICATES) each in an empty cache of its own; folded into `result`. Returns the
    replicates' failures."""
    proto, cell = jobs.matrix.protocol, jobs.cell
    layout = Layout(result.get("steps_per_block") or proto.steps_per_block,
                    result.get("steps_per_sample") or 1, result.get("planted_delay_ms"))
    cold_reps = proto.cold_replicates and mode.compiles
    firsts, draws, errors, warm_firsts = [result.get("first_call_compiled_s")], [], [], []
    for i in range(1, proto.processes):
        # a cold replicate compiles in its own empty cache (removed after it), else the cold one's
        rep_cache = Path(tempfile.mkdtemp(prefix=f"tcb-cache-{cell.cell_id[:50]}-r{i}-")) if cold_reps else cache_dir
        try:
            rep = jobs.run(rep_cache, kind="replicate", replicate=i, layout=layout)
            if cold_reps:
                draws.append(autotune.choices(rep_cache))
        finally:
            if cold_reps:
                shutil.rmtree(rep_cache, ignore_errors=True)
        why = add_replicate(result, rep, i)
        first = rep.get("warm_first_call_compiled_s")  # the replicate's first call, whatever its cache
        firsts.append(None if why else first)
        if why:
            errors.append(why)
        elif first is not None and not cold_reps:
            warm_firsts.append(first)
    if mode.compiles:
        result["process_first_call_compiled_s"] = firsts
        result["replicate_cache"] = "cold" if cold_reps else "warm"
    if cold_reps:  # no warm cache was used: no warm first call; the autotuning drawn in each process
        tuned = autotune.with_replicates(result.get("autotune_json"), draws)
        result["autotune_json"] = json.dumps(tuned, sort_keys=True) if tuned else None
    if warm_firsts:  # every replicate compiled from the warm cache: their median
        result["warm_first_call_compiled_s"] = statistics.median(warm_firsts)
    return errors


def _portable(jobs: _Jobs, result: CellResult, portable: Path) -> None:
    """The compile from the portable cache artefact alone, in an empty cache folder."""
    empty = Path(tempfile.mkdtemp(prefix="tcb-portable-"))
    try:
        got = jobs.run(empty, kind="portable", portable_from=str(portable))
    finally:
        shutil.rmtree(empty, ignore_errors=True)
    if got.get("status") == "ok":
        result["portable_first_call_compiled_s"] = got.get("portable_first_call_compiled_s")
        result["portable_load_s"] = got.get("portable_load_s")


def _measure_cell(cell: Cell, matrix: Matrix, env: dict, run_id: str, run_dir: Path,
                  launcher: Launcher, clock: Callable[[], float], worker: Worker) -> dict:
    """The cold process, then `processes - 1` replicate processes on its warm cache (each a fresh
    process that times the cell again), or, with one process, the warm-cache compile alone if
    asked; then the portable-cache one."""
    started, t0 = _now(), clock()
    cache_dir = Path(tempfile.mkdtemp(prefix=f"tcb-cache-{cell.cell_id[:60]}-"))
    proto = matrix.protocol
    jobs = _Jobs(cell, matrix, env["device"], launcher, clock, run_dir / "logs" / f"{cell.cell_id}.log")
    try:
        portable = cache_dir / "portable-cache.bin"
        mode = modes.spec(cell.mode)
        portable_wanted = proto.portable_cache and mode.portable_cache
        result = _cold_process(jobs, cache_dir, mode, {"portable_path": str(portable)} if portable_wanted else {})
        timed_ok = result.get("status") in ("ok", "accuracy_fail") and result.get("eager_step_ms")
        compiled_ok = mode.compiles and result.get("status") in ("ok", "accuracy_fail")
        if timed_ok:
            result["processes"] = 1
        errors = []
        if timed_ok and proto.processes > 1:
            errors = _replicates(jobs, result, cache_dir, mode)
        elif proto.warm_compile and compiled_ok:
            warm = jobs.run(cache_dir, kind="warm")
            if warm.get("status") == "ok":
                result["warm_first_call_compiled_s"] = warm.get("warm_first_call_compiled_s")
                result["warm_compile_dynamo_s"] = warm.get("warm_compile_dynamo_s")
        if portable_wanted and compiled_ok and portable.exists():
            _portable(jobs, result, portable)
        result["process_wall_s"] = jobs.walls
        result["process_cpu_s"] = jobs.cpus if any(c is not None for c in jobs.cpus) else None
        result["timing_wait_s"] = jobs.waits if any(w is not None for w in jobs.waits) else None
        result["process_stages_json"] = json.dumps(jobs.stages) if any(jobs.stages) else None
        if errors:
            result["process_errors"] = "; ".join(errors)
        if worker.timing_lock and result.get("status") == "oom":  # the other cell on the GPU held memory too
            result["status"], result["error"] = OOM_SHARED, (f"{SHARED_GPU_OOM} {result.get('error') or ''}")[:3000]
        if worker.timing_lock and result.get("status") == "timeout" and WAITING_STEP in (result.get("error") or ""):
            result["error"] = (f"{SHARED_GPU_WAIT} {result.get('error')}")[:3000]  # killed in a wait, not its work
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    return schema.make_row({
        **result.to_json(), "run_id": run_id, "cell_id": cell.cell_id, **asdict(cell),
        "tf32": proto.tf32, "device": env["device"], "device_name": env["device_name"],
        "torch_version": env["torch_version"], "hostname": env["hostname"],
        "started_at": started, "cell_wall_s": clock() - t0,
        "gpu_index": worker.gpu,
        "blocks": proto.blocks,
        "steps_per_block": result.get("steps_per_block", proto.steps_per_block),
        "status": result.get("status", "crashed"),
    })
