"""The local executor: schedules cells (each measured by collector/host/cell_measure.py: several fresh
processes a cell, launched by collector/host/launch.py, fresh compile caches), one Parquet row per cell
written through the run store (collector/host/store.py), resume by skipping finished cells; several
interpreters interleaved.

The launcher is injectable (tests use a fake one to drive the plumbing quickly);
collector.host.launch's `SubprocessLauncher` and `ForkLauncher` are the real paths.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from collector.host import alone
from collector.host.cell_measure import measure_cell
from collector.record.compact import compact_run
from collector.host.launch import Launcher
from collector.plan.matrix import Matrix
from collector.host.earlier import earlier_times
from collector.host.progress import Progress
from collector.host.queue import interleave, memory_key, next_entry
from collector.host.stop import INTERRUPTED, REPORTED, check_interrupted
from collector.host.store import RunError, RunStore, _now, _write_json, check_run_id, left_to_measure, prepare_run, run_lock
from collector.host.workers import Worker

PROJECT_ROOT = Path(__file__).resolve().parents[2]


LARGE_MATRIX = 100  # cells to measure from which the start line is followed by a size estimate
PROCESS_S = (20, 35)  # wall time per process: 3-process cells took 60-108 s on the H200 (docs/measurement.md)


def size_note(cells: int, processes: int, workers: int) -> str:
    """What a large matrix will take, before it starts, from the measured cost of a process."""
    lo, hi = (cells * max(processes, 2) * s / workers / 3600 for s in PROCESS_S)
    return (f"note: {cells} cells x {processes} process(es) is a large matrix: about {lo:.1f}-{hi:.1f} hours "
            f"at {PROCESS_S[0]}-{PROCESS_S[1]} s a process{f', {workers} at a time' if workers > 1 else ''}; "
            "--dry-run lists the cells, --stop-after bounds a session (the same command resumes), "
            "Ctrl-C stops keeping every finished cell")


def _kill_all(launchers) -> None:
    """Stop the cell process of every launcher."""
    for launcher in launchers:
        launcher.kill()


@dataclass
class Target:
    """One run this session writes: its matrix, environment (from its interpreter), run id and
    launcher. Several targets are the same matrix under several interpreters (torch versions),
    measured interleaved (collect_targets)."""
    matrix: Matrix
    env: dict
    run_id: str
    launcher: Launcher
    label: str = ""
    note: str | None = None  # --note: kept with this session in run.json


@dataclass
class _Open:
    """A target's run folder, opened and locked for this session."""
    target: Target
    run_dir: Path
    store: RunStore
    manifest: dict
    todo: list
    already: int


def _open_target(t: Target, out_dir: Path, stack: contextlib.ExitStack, workers: list[Worker],
                 retry_failed: bool, out) -> _Open:
    """Create (or reopen) the target's run folder under its lock; returns what is left to measure."""
    run_dir = Path(out_dir) / check_run_id(t.run_id)
    store = RunStore(run_dir)  # the local executor: one writer, under the run lock
    try:
        store.create()
        store.check_writable()
    except OSError as exc:
        raise RunError(f"cannot write to {run_dir}: {exc.strerror or exc}") from None
    stack.enter_context(run_lock(run_dir))
    try:
        store.sweep_temporaries()
        manifest = prepare_run(run_dir, t.run_id, t.matrix, t.env, note=t.note)
        manifest["sessions"][-1]["workers"] = [asdict(w) for w in workers]
        saved = store.set_aside_bad(out)
    except OSError as exc:  # a disk that filled up or turned read-only before the first cell
        raise RunError(f"cannot write {exc.filename or run_dir}: {exc.strerror or exc}; nothing was measured "
                       "in this session, and the run's saved cells are untouched") from None
    todo = left_to_measure(t.matrix.cells, saved, retry_failed)
    return _Open(t, run_dir, store, manifest, todo, len(t.matrix.cells) - len(todo))


def collect(matrix: Matrix, env: dict, out_dir: Path, run_id: str, launcher: Launcher,
            out=None, clock: Callable[[], float] = time.monotonic, workers: list[Worker] | None = None,
            retry_failed: bool = False, stop_after_s: float | None = None) -> Path:
    """Measure every cell of `matrix` not yet in `out_dir/run_id`; returns the run directory.
    (collect_targets with one target.)"""
    return collect_targets([Target(matrix, env, run_id, launcher)], out_dir, out=out, clock=clock,
                           workers=workers, retry_failed=retry_failed, stop_after_s=stop_after_s)[0]


def _announce(opened: list[_Open], workers: list[Worker], out) -> None:
    """The lines a collect starts with: each run's cells, done and to measure, where and how."""
    several = len(opened) > 1
    where = f" ({len(workers)} at a time, GPUs {', '.join(str(w.gpu) for w in workers)})" if len(workers) > 1 else ""
    for o in opened:
        t, n = o.target, len(o.target.matrix.cells)
        print(f"run {t.run_id}: {n} cell{'' if n == 1 else 's'} in matrix '{t.matrix.preset}', {o.already} already "
              f"done, {len(o.todo)} to measure on {t.env['device']} ({t.env['device_name']}){where}, "
              f"{t.matrix.protocol.processes} process(es) each, torch {t.env['torch_version']}"
              + (f" ({t.env.get('python_executable') or t.label})" if several else ""), file=out, flush=True)
    if several:
        print(f"{len(opened)} interpreters interleaved cell by cell, the order alternating", file=out, flush=True)
        first, proto = opened[0].target, opened[0].target.matrix.protocol
        if proto.processes > 1 and not proto.cold_replicates and first.env.get("device") == "cuda":
            print("note: each interpreter compiles a cell once and the cell's other processes reuse that "
                  "compile's autotuning, so a version change in a cell whose compile autotunes can be that one "
                  "draw; COLD_REPLICATES=1 compiles every process (docs/comparison.md)", file=out, flush=True)


def _write_error(what: Path, exc: OSError, done: int, cell_id: str | None = None) -> RunError:
    """A full or read-only disk while a cell's files or row are written: what is saved and what to do."""
    head = f"cannot write the files of cell {cell_id} under {what}" if cell_id else f"cannot write {what}"
    return RunError(f"{head}: {exc.strerror or exc}; the {done} cell(s) finished before it are saved; "
                    "fix the cause and run the same command to resume")


@dataclass
class _Session:
    """What the workers of one collect share: the queue (queue position, (target index, cell)), its
    lock, the stop flag, the progress lines. One worker runs in the calling thread; several run a
    thread each, and the first failure stops them all."""
    opened: list
    queue: list
    progress: Progress
    workers: list
    clock: Callable[[], float]
    out: object
    stop_after_s: float | None
    start: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    budget_hit: threading.Event = field(default_factory=threading.Event)
    failure: list = field(default_factory=list)
    noted: list = field(default_factory=list)  # the first cell measured beside another collector's (said once)
    measured: set = field(default_factory=set)  # the targets (indices) that saved a row in this session
    started: int = 0  # cells started in this session: the first always starts, whatever the budget says
    running: list = field(default_factory=list)  # (GPU, cell) of the cells in flight (queue.next_entry)
    too_long: tuple | None = None  # (cell, seconds expected, seconds left) of the cell the budget did not start
    spilled: set = field(default_factory=set)  # memory_key of cells out of memory beside others: left alone

    def take(self, worker: Worker):
        """The next cell for `worker` (announced), or None: the queue is empty or the time budget spent."""
        with self.lock:
            if not self.queue:
                return None
            j = next_entry(self.queue, [c for g, c in self.running if g == worker.gpu], bool(worker.timing_lock),
                           self.spilled)
            if j is None:  # what is left waits for the alone pass (queue.py)
                return None
            if self.stop_after_s is not None:  # a time budget: no cell past it, if the cells so far tell
                left = self.stop_after_s - (self.clock() - self.start)
                need = self.progress.expected(self.queue[j][0]) if self.started and left > 0 else None
                if left <= 0 or (need is not None and need > left):
                    self.budget_hit.set()
                    self.too_long = None if left <= 0 else (self.queue[j][1][1].label(), need, left)
                    return None
            self.started += 1
            k, (ti, cell) = self.queue.pop(j)
            self.running.append((worker.gpu, cell))
            label = cell.label() + (f" [{self.opened[ti].target.label}]" if len(self.opened) > 1 else "")
            where = f"GPU {worker.gpu}" if worker.gpu is not None else f"worker {self.workers.index(worker) + 1}"
            self.progress.start(k, label + (f" [{where}]" if len(self.workers) > 1 else ""))
            return k, ti, cell, label

    def measure(self, worker: Worker, own: list, k: int, ti: int, cell, label: str) -> bool:
        """Measure one cell and save its row; False when the session was stopped meanwhile."""
        o, t0 = self.opened[ti], self.clock()
        started_before = getattr(own[ti], "import_s", None)  # a fork parent already running
        try:
            row = measure_cell(cell, o.target.matrix, o.target.env, o.target.run_id, o.run_dir, own[ti],
                               self.clock, worker, len(self.workers))
        except OSError as exc:  # the cell's log or cache folder
            raise _write_error(o.run_dir, exc, len(self.progress.rows), cell.cell_id) from None
        if self.stop.is_set():  # interrupted while it ran: its result is not trusted
            return False
        try:
            o.store.write_row(row)
        except OSError as exc:
            raise _write_error(o.store.cells_dir / f"{cell.cell_id}.parquet", exc, len(self.progress.rows)) from None
        started_now = getattr(own[ti], "import_s", None)
        with self.lock:
            if row.get("status") == alone.OOM_SHARED:
                self.spilled.add(memory_key(cell))
            self.progress.done(row, self.clock() - t0, k=k,
                               label=label if (len(self.workers) > 1 or len(self.opened) > 1) else None,
                               startup=started_now if started_before is None and started_now else None)
            if ti not in self.measured:  # the interleaving is on disk as soon as it exists: a command killed
                self.measured.add(ti)     # later (a device's time limit, kill -9) never runs _end_session
                if len(self.measured) > 1:
                    _record_interleaving([self.opened[i] for i in sorted(self.measured)], self.out, write=True)
            beside = (row.get("concurrent_cells") or 1) - len(self.workers)
            if beside > 0 and not self.noted:  # once: another collector, shard or task on this host
                self.noted.append(cell.cell_id)
                print(f"note: {beside} cell(s) of another collector were measuring on this host beside "
                      f"{cell.cell_id}; its row says so (concurrent_cells {row['concurrent_cells']}) and the "
                      "report will; for clean timings measure one collector at a time", file=self.out, flush=True)
        return True

    def budget_note(self, left_in_queue: int) -> str:
        """What the time budget left undone, and why the next cell did not start."""
        why = "reached" if self.too_long is None else \
            "nearly spent: the next cell, {}, should take about {:.0f} s, more than the {:.0f} s left".format(
                *self.too_long)
        return (f"time budget of {self.stop_after_s:g} s {why}: {left_in_queue} cell(s) not started; "
                "run the same command again to resume")

    def work(self, worker: Worker, own: list) -> None:
        while not self.stop.is_set():
            check_interrupted()
            got = self.take(worker)
            if got is None:
                return
            try:
                done = self.measure(worker, own, *got)
            finally:
                with self.lock:
                    self.running.remove((worker.gpu, got[2]))
            if not done:
                return

    def guarded(self, worker: Worker, own: list) -> None:
        try:
            self.work(worker, own)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            self.failure.append(exc)
            self.stop.set()

    def run(self, launchers: list[list]) -> None:
        """Every worker with its launchers (one per target) until the queue is done or stopped."""
        if len(self.workers) == 1:
            self.work(self.workers[0], launchers[0])
            return
        threads = [threading.Thread(target=self.guarded, args=(w, lnch), daemon=True)
                   for w, lnch in zip(self.workers, launchers)]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(0.2)
        if self.failure:
            raise self.failure[0]


def _alone_again(session: _Session, targets: list[Target], launchers: list[list]) -> _Session:
    """Where workers share a GPU: the cells that ran out of memory beside another cell, and those left
    waiting for it, with the GPU to themselves (collector/host/alone.py) before the session ends; returns
    the session that ran them, or `session` where there were none (or its time budget or a stop ended it)."""
    if session.budget_hit.is_set() or session.stop.is_set() or not any(w.timing_lock for w in session.workers):
        return session
    waiting = {c.cell_id for _, (_, c) in session.queue}  # not tried beside others (queue.py)
    queue = alone.again_queue(session.opened, waiting)
    if not queue:
        return session
    lone = Worker(gpu=session.workers[0].gpu)
    launchers.append([t.launcher.for_worker(lone) for t in targets])
    session.progress.total -= len(session.queue)  # counted again below
    print(alone.note(queue, len(targets), len(session.queue)), file=session.out, flush=True)
    for o in session.opened:
        o.manifest["sessions"][-1]["measured_alone"] = sorted({c.cell_id for _, c in queue})
    first = session.progress.total + 1
    session.progress.extend([(ti, c.model, c.phase, c.mode) for ti, c in queue], workers=1)
    again = _Session(session.opened, list(enumerate(queue, first)), session.progress, [lone], session.clock,
                     session.out, session.stop_after_s, session.start, measured=session.measured,
                     started=session.started)
    again.run([launchers[-1]])
    return again


def _end_session(opened: list[_Open], launchers: list[list], rows: list[dict], out,
                 crowding: float | None = None) -> None:
    """What every session writes at its end, however it ended: the launchers' description, the runs
    interleaved with each other, the compact index, the session's end in run.json, and how crowded the
    host was as its cells ended (`crowding`: Progress.crowding_seen; a later run's estimate reads this
    run's cell times as they would take on an uncrowded host)."""
    for ti, o in enumerate(opened):
        described = [d for d in (row[ti].describe() for row in launchers) if d]
        if described:
            o.manifest["sessions"][-1]["launchers"] = described
    for lnch in (x for row in launchers for x in row):
        lnch.close()
    measured = {r.get("run_id") for r in rows}
    _record_interleaving([o for o in opened if o.target.run_id in measured], out, write=False)
    for o in opened:
        try:
            compact_run(o.run_dir)
        except Exception as exc:  # an optimisation only: the cell files are complete without it
            print(f"note: could not compact {o.run_dir}: {exc}", file=out)
        o.manifest["sessions"][-1]["finished_at"] = _now()
        o.manifest["sessions"][-1]["cells_measured"] = sum(1 for r in rows if r.get("run_id") == o.target.run_id)
        if crowding:
            o.manifest["sessions"][-1]["host_crowding"] = round(crowding, 3)
        try:
            _write_json(o.run_dir / "run.json", o.manifest)
        except OSError as exc:  # must not hide why the session ended; the cells are saved
            print(f"note: could not update {o.run_dir / 'run.json'} ({exc.strerror or exc}); "
                  "the cell files are complete and the next session rewrites it", file=out, flush=True)


def _record_interleaving(active: list[_Open], out, write: bool) -> None:
    """The runs this session measured cell by cell beside each other, on this machine, into each one's
    run.json (`interleaved_with`, its session's too); a run that measured nothing in the session is not
    interleaved with anything. `write`: now (the second run's first row), not only at the session's end."""
    if len(active) < 2:
        return
    for o in active:
        others = [x.target.run_id for x in active if x is not o]
        o.manifest["sessions"][-1]["interleaved_with"] = others
        o.manifest["interleaved_with"] = sorted(set(o.manifest.get("interleaved_with", [])) | set(others))
        if write:
            try:
                _write_json(o.run_dir / "run.json", o.manifest)
            except OSError as exc:  # the session's end writes it again
                print(f"note: could not update {o.run_dir / 'run.json'} ({exc.strerror or exc})", file=out, flush=True)


def _interrupted(rows: int, opened: list[_Open], out) -> None:
    print(f"\ninterrupted: {rows} cell(s) finished in this session are saved in "
          f"{', '.join(str(o.store.cells_dir) for o in opened)}; run the same command again to resume",
          file=out, flush=True)
    REPORTED.set()


def collect_targets(targets: list[Target], out_dir: Path, out=None, clock: Callable[[], float] = time.monotonic,
                    workers: list[Worker] | None = None, retry_failed: bool = False,
                    stop_after_s: float | None = None) -> list[Path]:
    """Measure every cell of each target's matrix not yet in its run folder; returns the run
    directories, in the targets' order.

    Several targets (one per interpreter: torch versions side by side) are measured interleaved,
    cell by cell, their order alternating (`interleave`), so drift and the machine fall on every
    version alike. `workers` (plan_workers) run cells concurrently, one per GPU; each gets its own
    launcher from `launcher.for_worker`. `retry_failed` measures again the cells whose saved row
    failed (RETRYABLE: crashed, timeout, oom, runtime, compile or export error, an accuracy failure
    judged against eager), replacing it.
    KeyboardInterrupt (Ctrl-C, or SIGTERM turned into it by the CLI) stops the cells in flight; every
    finished cell is already on disk. `stop_after_s` is a wall-clock budget: past it no new cell starts,
    nor, after the first, one the progress estimate (Progress.expected) says would end past it, so a
    time-limited machine ends between cells, not in one; the same command resumes.
    """
    out = out or sys.stdout
    workers = workers or [Worker()]
    ids = [t.run_id for t in targets]
    if len(set(ids)) != len(ids):
        raise ValueError(f"two interpreters would write the same run {ids}: give each its own label")
    with contextlib.ExitStack() as stack:
        opened = [_open_target(t, out_dir, stack, workers, retry_failed, out) for t in targets]
        _announce(opened, workers, out)
        queue = list(enumerate(interleave(opened, [c.cell_id for c in targets[0].matrix.cells]), 1))
        total = len(queue)
        if total >= LARGE_MATRIX:
            print(size_note(total, targets[0].matrix.protocol.processes, len(workers)), file=out, flush=True)
        progress = Progress(total, out=out, clock=clock, workers=len(workers),
                            plan=[(ti, c.model, c.phase, c.mode) for _, (ti, c) in queue],
                            prior=earlier_times(out_dir, targets))
        # launchers[worker][target]
        launchers = [[t.launcher for t in targets]] if workers == [Worker()] else \
            [[t.launcher.for_worker(w) for t in targets] for w in workers]
        session = _Session(opened, queue, progress, workers, clock, out, stop_after_s, clock(),
                           spilled=alone.spilled_keys(opened))
        try:
            session.run(launchers)
            session = _alone_again(session, targets, launchers)
        except BaseException as exc:  # Ctrl-C, SIGTERM, a write error in a worker: stop every cell in flight
            session.stop.set()
            _kill_all([x for row in launchers for x in row])
            if isinstance(exc, KeyboardInterrupt):
                _interrupted(len(progress.rows), opened, out)
            raise
        finally:  # a stop signal only sets a flag: these writes always finish
            _end_session(opened, launchers, progress.rows, out, progress.crowding_seen())
        if INTERRUPTED.is_set():  # a stop that arrived after the last cell, e.g. during compaction
            _interrupted(len(progress.rows), opened, out)
            raise KeyboardInterrupt("stop requested")
        already = sum(o.already for o in opened)
        print(progress.summary(skipped_done=already), file=out, flush=True)
        if not progress.total:
            print(f"nothing to measure: all {already} cells of run {', '.join(ids)} are saved. To measure them again, "
                  "give a new run id (make collect RUN=<new id>, or --run-id); to measure the failed ones "
                  "again, RETRY=1 (--retry-failed).", file=out, flush=True)
        if session.budget_hit.is_set():
            print(session.budget_note(len(session.queue)), file=out, flush=True)
    return [o.run_dir for o in opened]
