"""Earlier runs' cell times, for the collector's "about N left" before and beside this run's own.

Which runs count: those collected on this kind of device with as many processes a cell and the same
launcher (a cell's time holds the launcher's start or not); in the runs folder, else the published
runs beside it (data/examples beside data/runs), else this checkout's own published runs; of this
device model first, else another of its type (cuda, cpu: a GPU's relative cell costs stand for
another GPU's, and the estimate scales them by this run's own cells). A run whose every process
compiles cold (COLD_REPLICATES) reads the others' cells with P - 1 more cold compiles each
(progress.as_cold); a run that does not reads such runs only where there is nothing else. Anything
unreadable is skipped: an estimate, never a failure.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from collector.host.hostload import mark_crowding, uncrowd
from collector.host.progress import as_cold, mark_startups, prior_times

EARLIER_RUNS = 20  # the most recent runs an estimate reads
MOST_EARLIER_RUNS = 100  # and at most this many while a model and phase of the run is in none of them
PUBLISHED = Path(__file__).resolve().parents[2] / "data" / "examples"  # this checkout's published runs
COLUMNS = ("model", "phase", "mode", "cell_wall_s", "started_at", "first_call_compiled_s",
           "warm_first_call_compiled_s", "process_cpu_s", "process_wall_s")


@dataclass(frozen=True)
class EarlierRun:
    when: tuple  # (when its last command began, run.json's mtime): the newest first
    folder: Path
    sessions: list
    cold: bool  # protocol cold_replicates


def _launchers(sessions: list) -> set[str]:
    """How the run's last command started its processes; a run without launchers recorded predates
    the fork launcher: its processes each started torch."""
    last = (sessions[-1].get("launchers") if sessions else None) or []
    return {x.get("launcher") for x in last if x.get("launcher")} or {"exec"}


def _read(manifest: Path, env: dict, key: str, processes: int, launcher: str) -> EarlierRun | None:
    """The run of `manifest` if it was collected alike (same `key` of the environment, processes,
    launcher), else None."""
    m = json.loads(manifest.read_text())
    sessions = m.get("sessions") or []
    protocol = m.get("protocol") or {}
    if env.get(key) is None or m.get("environment", {}).get(key) != env.get(key) \
            or protocol.get("processes") != processes or launcher not in _launchers(sessions):
        return None
    when = max([str(x.get("started_at") or "") for x in sessions] or [""])
    return EarlierRun((when, manifest.stat().st_mtime), manifest.parent, sessions, bool(protocol.get("cold_replicates")))


def earlier_runs(out_dir: Path, target, own: set[str]) -> list[EarlierRun]:
    """The runs collected alike with `target`, from the first place that has any (the module's
    docstring), the newest first; `own`: the run ids being collected now."""
    env, protocol = target.env, target.matrix.protocol
    published = [p for p in dict.fromkeys((Path(out_dir).resolve().parent / "examples", PUBLISHED)) if p.is_dir()]
    runs: list[EarlierRun] = []
    for folder, key in [(Path(out_dir), "device_name")] + [(p, k) for k in ("device_name", "device") for p in published]:
        for manifest in folder.glob("*/run.json") if not runs else ():
            try:
                got = _read(manifest, env, key, protocol.processes, target.launcher.name)
            except (OSError, ValueError, AttributeError):
                continue
            if got is not None and manifest.parent.name not in own:
                runs.append(got)
    if not protocol.cold_replicates and not all(r.cold for r in runs):  # a cold run's cells hold P compiles
        runs = [r for r in runs if not r.cold]
    return sorted(runs, key=lambda r: r.when, reverse=True)


def _cells(run: EarlierRun) -> list[dict]:
    import pyarrow.parquet as pq

    got = []
    for f in (run.folder / "cells").glob("*.parquet"):
        try:
            t = pq.read_table(f)
            got += t.select([c for c in COLUMNS if c in t.column_names]).to_pylist()
        except Exception:  # noqa: BLE001 - an older or damaged file: no prior from it
            continue
    return got


def earlier_times(out_dir: Path, targets: list) -> dict:
    """Cell wall times of the earlier runs (earlier_runs) by progress.prior_times's keys: the newest
    EARLIER_RUNS runs, and older ones too (up to MOST_EARLIER_RUNS) while a model and phase of this
    run is in none read yet (an unseen model is the estimate's worst guess)."""
    target = targets[0]
    procs, cold_now = target.matrix.protocol.processes, bool(target.matrix.protocol.cold_replicates)
    wanted = {(c.model, c.phase) for t in targets for c in t.matrix.cells}
    rows: list[dict] = []
    for n, run in enumerate(earlier_runs(out_dir, target, {t.run_id for t in targets})[:MOST_EARLIER_RUNS]):
        if n >= EARLIER_RUNS and not wanted - {(r.get("model"), r.get("phase")) for r in rows}:
            break
        got = [{**r, "run": run.folder} for r in _cells(run)]
        if cold_now and not run.cold:
            got = as_cold(got, procs)
        try:  # each command's first cell paid its fork parent's start: set apart, as live
            rows += mark_crowding(mark_startups(got, run.sessions), run.sessions)
        except (AttributeError, TypeError):
            rows += got
    return prior_times(follow_newest(uncrowd(rows)))


def follow_newest(rows: list[dict]) -> list[dict]:
    """Earlier runs' cells of a model that no newer run timed, brought to the pace of the newer runs that
    timed others of the model's cells (rows in the order read: the newest run first): times the geometric
    mean of newer / its own over the cells both timed (the newest run's of each, as already brought).
    Cells a newer run timed too are left as they were, so the estimate's mean over runs keeps them.
    A model's code, inputs or torch change between runs; its newest timing is the best guess of its pace
    now, and an older run's other cells of it follow. The smoke preset's GPT training is in one published
    CPU run only (2026-11-30: 117-123 s, where the machine now takes 61 s), whose GPT inference took 45 s
    where later runs took 31-36 s: read as it was, a quiet run's estimate was 1.4-1.6x high until its own
    GPT cells ran. A cell's interpreter start (startup_s) is left as it was."""
    newest: dict[tuple, float] = {}  # (model, phase, mode): seconds in the newest run that has it
    out: list[dict] = []
    by_run: dict = {}
    for r in rows:
        by_run.setdefault(r.get("run"), []).append(r)
    for run, mine in by_run.items():
        ratios: dict[str, list[float]] = {}
        for r in mine:
            key, secs = (r.get("model"), r.get("phase"), r.get("mode")), r.get("cell_wall_s")
            if key in newest and secs and secs > 0:
                ratios.setdefault(r.get("model"), []).append(newest[key] / secs)
        factor = {m: statistics.geometric_mean(v) for m, v in ratios.items()}
        for r in mine:
            f, secs = factor.get(r.get("model")), r.get("cell_wall_s")
            if f and secs and run is not None and (r.get("model"), r.get("phase"), r.get("mode")) not in newest:
                start = r.get("startup_s") or 0.0
                start = start if 0 < start < secs else 0.0
                r = {**r, "cell_wall_s": start + (secs - start) * f}
            out.append(r)
        for r in out[len(out) - len(mine):]:
            if r.get("cell_wall_s") and run is not None:
                newest.setdefault((r.get("model"), r.get("phase"), r.get("mode")), r["cell_wall_s"])
    return out
