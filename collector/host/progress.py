"""Terminal progress for a long collection: cell k of n, elapsed, estimate, summary table."""
from __future__ import annotations

import math
import os
import statistics
from collections import Counter
import sys
import time
from typing import Callable, TextIO

from collector.host.hostload import UNCROWDED, busy_threads, crowding, host_load, slowdown
from collector.record.contract import DISAGREE, process_medians


def fmt_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def side_ms(row: dict, col: str) -> float | None:
    """A side's figure as the report computes it: the geometric mean of its processes' medians."""
    meds = [m for m in process_medians(row.get(col), row.get("processes")) if m > 0]
    return statistics.geometric_mean(meds) if meds else None


def process_speedups(row: dict) -> list[float]:
    """Eager / compiled median of each process that timed the cell."""
    return [e / c for e, c in zip(process_medians(row.get("eager_step_ms"), row.get("processes")),
                                  process_medians(row.get("compiled_step_ms"), row.get("processes"))) if c]


def _process_spread(row: dict) -> float:
    """max / min - 1 of the per-process speedups of an ok cell (0 with fewer than two)."""
    per = process_speedups(row) if row.get("status") == "ok" else []
    return max(per) / min(per) - 1 if len(per) > 1 and min(per) > 0 else 0.0


def outcome_line(row: dict) -> str:
    """One-line result of a finished cell: status, medians, speedup (and how far the processes'
    speedups spread), compile time, and on a shared GPU the wait for the timing turn."""
    eager, comp = side_ms(row, "eager_step_ms"), side_ms(row, "compiled_step_ms")
    parts = [row["status"]]
    if eager is not None:
        parts.append(f"eager {eager:.3f} ms")
    if comp is not None:
        parts.append(f"compiled {comp:.3f} ms")
    if eager and comp:
        parts.append(f"speedup {eager / comp:.2f}x")
        per = process_speedups(row)
        if len(per) > 1:
            parts.append(f"{len(per)} processes {min(per):.2f}-{max(per):.2f}x")
    if row.get("process_errors"):
        parts.append(f"replicate failed: {row['process_errors'][:120]}")
    if row.get("first_call_compiled_s") is not None:
        parts.append(f"first call {row['first_call_compiled_s']:.1f} s")
    if row.get("warm_first_call_compiled_s") is not None:
        parts.append(f"warm {row['warm_first_call_compiled_s']:.1f} s")
    waits = [w for w in row.get("timing_wait_s") or [] if w is not None]
    if waits:  # a GPU shared with other cells (GPUS=0,0): their timed sections went first
        parts.append(f"waited {sum(waits):.1f} s for its timing turn")
    if row.get("error") and row["status"] != "ok":
        parts.append(row["error"].splitlines()[0][:160])
    return ", ".join(parts)


def _levels(key: tuple) -> list[tuple]:
    """From most to least alike: this interpreter's same model, phase and mode; any interpreter's; the
    same model and phase; the same mode."""
    ti, model, phase, mode = key
    return [("exact", ti, model, phase, mode), ("cell", model, phase, mode), ("model", model, phase), ("mode", mode)]


class Timed(float):
    """An earlier cell's seconds, with the earlier run it came from (`run`: None where unknown), so
    that each earlier run is scaled by how its own cells compare with this run's (Progress._scale), and
    the threads it kept busy where its host was uncrowded (`busy`: None where not known or crowded)."""
    run: object = None
    busy: float | None = None

    def __new__(cls, secs: float, run=None, busy: float | None = None):
        x = super().__new__(cls, secs)
        x.run, x.busy = run, busy
        return x


MODEL_APART = 1.25  # a model's own scale replaces the run's where they differ by more than this factor
# while the host is crowded each scale counts this many cells at no change beside those it rests on: one
# cell's time beside two busy processes on 2 cores read 1.0-4.2x its quiet one (docs/estimate.md)
CROWDED_PRIOR_CELLS = 2
PACE_CELLS = 3  # the latest cells whose load at their end the present load is held against


class Progress:
    """Prints one line when a cell starts and one when it ends, with an estimate of what remains.

    With `plan` (per queue position: (interpreter, model, phase, mode)), each cell still to run is
    estimated from the mean time of the finished cells most like it (_levels; a model timed in the
    other phase only: its time there times the other models' ratio between the phases), else from
    the mean of all; without it, every cell counts the mean of all. Every time is read as on an
    uncrowded host (each finished cell's divided by its slowdown at the crowding as it ended: `load`,
    runnable threads per CPU, host_load; `crowding`), then each queued cell's stretched by its slowdown at the
    load now, by the threads a cell like it kept busy (slowdown): a host that got busier stretches most
    the cells that keep most CPUs busy. Without a plan, the load now against the load when the latest
    PACE_CELLS cells ended stretches what is left. (A pace from the latest cells' times against
    their estimates was tried and left out: on the committed H200 queues it moved the worst replayed
    estimate from 1.39x to 2.32x, one slow cell read as a trend.)"""

    def __init__(self, total: int, out: TextIO = sys.stdout, clock: Callable[[], float] = time.monotonic,
                 workers: int = 1, plan: list[tuple] | None = None, prior: dict | None = None,
                 load: Callable[[], float | None] = host_load, cpus: int | None = None):
        self.total, self.out, self.clock, self.workers = total, out, clock, max(1, workers)
        self.load, self.cpus = load, cpus or os.cpu_count() or 1
        self.crowds: list[float] = []  # crowding(load) as each cell ended
        # the threads this run's cells kept busy where the host was uncrowded, by _levels key
        self.busy: dict[tuple, list[float]] = {}
        self.basis = ""  # what the last estimate rests on, in words
        # earlier runs' cell times on this kind of machine (prior_times), by _levels key without the
        # interpreter: consulted after this run's own cells at each level, and alone before the first
        self.prior = {k: v for k, v in (prior or {}).items() if v}
        self.t0 = clock()
        self.durations: list[float] = []  # each finished cell's seconds as measured
        self.quiet: list[float] = []  # and as on an uncrowded host (slowdown)
        self.rows: list[dict] = []
        self.plan = plan
        self.seen: dict[tuple, list[float]] = {}
        # what is still queued, as counts of each kind of cell (a queue of a million cells has few
        # kinds), so an estimate costs the kinds, not the cells left; positions below _next are gone
        self._queued = Counter(plan or [])
        self._next = 1
        self.guessed = 0  # queued cells the last estimate had no timing of their model and phase for
        # one-off seconds an interpreter pays once, in its first cell (the fork parent importing torch:
        # 10-14 s on the H200): kept out of the cell times, counted once for each interpreter still to start
        self.startups: dict = {}

    def _scale(self) -> tuple[float, dict, dict]:
        """Earlier runs ran on another day, maybe another machine of the kind, another launcher or
        another version of a model's code: scale them by how this run's finished cells compare with the
        most alike cells there (the same cell, else the same model and phase, else the same mode;
        geometric mean of the ratios); each earlier run that shares a finished cell by its own ratios
        (the smoke preset's GPT training cells are in one run of 2026-11-30 only, whose MLP cells took
        1.1x today's and GPT cells 1.6-2.0x, while the other runs' took today's: one scale for all read
        the GPT's training 1.5-1.9x high); and, for a model this run has timed whose cells compare apart from the rest (by
        more than MODEL_APART), by its own cells' ratios. While the host is or was crowded each mean
        also counts CROWDED_PRIOR_CELLS cells at 1 (one cell's time then is a poor guess of the rest's).
        Returns (the scale, {model: its scale}, {run: its scale})."""
        both, by_model, by_run = [], {}, {}
        for lv in (lv for lv in self.seen if lv[0] == "cell"):
            there = next((self.prior[p] for p in _levels((None,) + lv[1:])[1:] if p in self.prior), None)
            mine = statistics.fmean(self.seen[lv])
            if there:
                both.append(mine / statistics.fmean(there))
                by_model.setdefault(lv[1], []).append(both[-1])
            for x in self.prior.get(lv, ()):  # the same cell in an earlier run: that run's own ratio
                if getattr(x, "run", None) is not None:
                    by_run.setdefault(x.run, []).append(mine / x)
        pseudo = CROWDED_PRIOR_CELLS if self.crowds and max(self.crowds) > UNCROWDED else 0

        def mean(ratios: list[float]) -> float:  # geometric, beside `pseudo` cells at 1
            return math.exp(sum(math.log(x) for x in ratios) / (len(ratios) + pseudo))
        return ((mean(both) if both else 1.0), {m: mean(v) for m, v in by_model.items()},
                {r: mean(v) for r, v in by_run.items()})

    def _prior_mean(self, times: list, scale: float, runs: dict) -> float:
        """The mean of earlier cells' seconds, each scaled by its run's own ratio where that run shares
        a finished cell with this run, else by `scale`."""
        return statistics.fmean(x * runs.get(getattr(x, "run", None), scale) for x in times)

    def _phase_ratio(self, phase: str, other: str) -> float | None:
        """How much longer a cell of `phase` takes than one of `other`, over the models timed in both
        (this run's cells first, else earlier runs'): the geometric mean of the per-model ratios."""
        for src in (self.seen, self.prior):
            models = {lv[1] for lv in src if lv[0] == "model"}
            got = [statistics.fmean(src[("model", m, phase)]) / statistics.fmean(src[("model", m, other)])
                   for m in models if ("model", m, phase) in src and ("model", m, other) in src]
            if got:
                return statistics.geometric_mean(got)
        return None

    def _one(self, key: tuple, mean: float, scales: tuple) -> tuple[float, str, bool]:
        """A queued cell's seconds, the level they came from ('exact', 'cell', 'model', 'phase', 'mode',
        or 'all': the mean of every cell) and whether this run's own cells gave them. This run's cells
        of the same model and phase come before earlier runs' (a quiet run read 1.44-1.64x high from the
        published runs' ratio of its GPT cells while its own GPT training cell in the other mode was
        within 2%); earlier runs' cells of the model come before this run's other models."""
        levels = _levels(key)
        own_scale = scales[1].get(key[1], scales[0])  # the model's own, where it departs from the rest
        apart = abs(math.log(own_scale / scales[0])) > math.log(MODEL_APART)
        scale = own_scale if apart else scales[0]
        order = [(lv, src) for lv in levels[:3] for src in ("seen",)] + \
                [(lv, "prior") for lv in levels[1:3]] + [("phase", "seen"), ("phase", "prior")] + \
                [(levels[3], src) for src in ("seen", "prior")]
        runs = {} if apart else scales[2]  # a model apart: its own scale stands for every run's
        for lv, src in order:
            got, f, own = (self.seen, 1.0, True) if src == "seen" else (self.prior, scale, False)
            if lv == "phase":  # the model timed in the other phase only
                other = "train" if key[2] == "infer" else "infer"
                there = got.get(("model", key[1], other))
                ratio = self._phase_ratio(key[2], other) if there else None
                if ratio:
                    return (f * statistics.fmean(there) if own else self._prior_mean(there, f, runs)) * ratio, \
                        "phase", own
            elif got.get(lv):
                return (statistics.fmean(got[lv]) if own else self._prior_mean(got[lv], f, runs)), lv[0], own
        return mean, "all", False

    def _busy(self, key: tuple) -> float | None:
        """The threads the cell `key` keeps busy on an uncrowded host: this run's alike cells' (the same
        cell, else the same model and phase), else earlier runs'; None where none says."""
        for lv in _levels(key)[1:3]:
            got = self.busy.get(lv) or [x.busy for x in self.prior.get(lv, ()) if getattr(x, "busy", None)]
            if got:
                return statistics.fmean(got)
        return None

    def _slowdown(self, crowd: float, key: tuple | None) -> float:
        return slowdown(crowd, self._busy(key) if key else None, self.cpus)

    def crowding_seen(self) -> float | None:
        """The mean crowding of the host as this session's cells ended (None before any): run.json's
        session `host_crowding`, by which a later run reads these cells' times (mark_crowding)."""
        return statistics.fmean(self.crowds) if self.crowds else None

    def pace(self) -> float:
        """The host's load now against its load when the latest cells ended (before any: against an
        uncrowded host, as earlier runs are taken to be); 1 while no CPU is oversubscribed."""
        then = self.crowds[-PACE_CELLS:]
        return crowding(self.load()) / (statistics.fmean(then) if then else 1.0)

    def estimate_left(self, k: int) -> float | None:
        """Seconds the cells from queue position k on will take (None before any cell finished).
        Queue positions only move forward (the workers take cells in order)."""
        for key in (self.plan or [])[self._next - 1:k - 1]:
            self._queued[key] -= 1
        self._next = max(self._next, k)
        every_prior = [x for v in self.prior.values() for x in v] if self.prior else []
        if not self.durations and not (self.plan and every_prior):
            return None
        n = len(self.durations)
        done = (f"the {n} cell{'s' if n > 1 else ''} done" if n else "")
        if not self.plan:
            self.basis = done
            return self.pace() * statistics.fmean(self.durations) * (self.total - k + 1) / self.workers
        mean = statistics.fmean(self.quiet) if self.quiet else statistics.fmean(every_prior)
        now, then = crowding(self.load()), statistics.fmean(self.crowds[-PACE_CELLS:] or [1.0])
        scales = self._scale()
        scale = scales[0]
        total, as_then, self.guessed, used_prior = 0.0, 0.0, 0, False
        for key, n in self._queued.items():
            if n > 0:
                secs, level, own = self._one(key, mean, scales)
                busy = self._busy(key)
                total += n * secs * slowdown(now, busy, self.cpus)
                as_then += n * secs * slowdown(then, busy, self.cpus)
                used_prior |= not own and level != "all"
                # no cell of this model timed in either phase, here or in an earlier run: a guess
                self.guessed += n if level in ("mode", "all") else 0
        if self.startups and self.plan:  # an interpreter's start: one process's share of a CPU
            waiting = {key[0] for key, n in self._queued.items() if n > 0} - set(self.startups)
            start = len(waiting) * statistics.fmean(self.startups.values())
            total, as_then = total + start * crowding(now), as_then + start * crowding(then)
        words = [done] if done else []
        if used_prior and self.prior:
            words.append("earlier runs here" + (f" (x{scale:.2f}, as this run's cells compare)" if done and
                                                abs(scale - 1) > 0.05 else ""))
        pace = total / as_then if as_then else 1.0
        if abs(pace - 1) > 0.05:
            words.append(f"the host {'busier' if pace > 1 else 'quieter'} now than then: x{pace:.2f}")
        self.basis = "; ".join(words)
        return total / self.workers

    def extend(self, plan: list[tuple], workers: int) -> None:
        """More cells queued (their `plan` keys), `workers` at a time from now on (collector/host/alone.py)."""
        self.total, self.workers = self.total + len(plan), max(1, workers)
        if self.plan is not None:
            self.plan.extend(plan)
            self._queued.update(plan)

    def expected(self, k: int) -> float | None:
        """Seconds queue position k's cell should take at the load now, as estimate_left counts it (an
        interpreter's first cell with its start); None with nothing to go on."""
        every = [x for v in self.prior.values() for x in v]
        if not self.plan or not (self.quiet or every):
            return statistics.fmean(self.durations) if self.durations else None
        key = self.plan[k - 1]
        secs = self._one(key, statistics.fmean(self.quiet or every), self._scale())[0]
        if self.startups and key[0] not in self.startups:
            secs += statistics.fmean(self.startups.values())
        return secs * self._slowdown(crowding(self.load()), key)

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def start(self, k: int, label: str) -> None:
        elapsed = self.clock() - self.t0
        # cells run `workers` at a time, so the remaining cells take 1/workers of their summed time
        left = self.estimate_left(k)
        eta = f", about {fmt_duration(left)} left" if left is not None else ""
        if left is not None and self.basis:
            eta += f" from {self.basis}"
        if left is not None and self.guessed:
            eta += (f"; {self.guessed} of them like no cell timed yet (counted as the average cell)"
                    if self.guessed > 1 else "; 1 of them like no cell timed yet (counted as the average cell)")
        self._say(f"[{k}/{self.total}] {label}  (elapsed {fmt_duration(elapsed)}{eta})")

    def done(self, row: dict, seconds: float, label: str | None = None, k: int | None = None,
             startup: float | None = None) -> None:
        """`label`: name the cell (cells running concurrently finish out of order); `k`: its queue
        position (what it was like, for the estimate); `startup`: seconds of `seconds` that its
        interpreter pays once (its fork parent started in this cell), not counted as the cell's."""
        shown = seconds
        crowd = crowding(self.load())
        key = self.plan[k - 1] if self.plan and k is not None else None
        if startup and 0 < startup < seconds:
            seconds -= startup
            if key:
                self.startups[key[0]] = startup / crowd
        busy = busy_threads(row)
        if key and busy is not None and crowd <= UNCROWDED:  # uncrowded: the threads it keeps busy
            for lv in _levels(key)[1:3]:
                self.busy.setdefault(lv, []).append(busy)
        self.durations.append(seconds)
        self.crowds.append(crowd)
        self.quiet.append(seconds / self._slowdown(crowd, key))
        if key:
            for lv in _levels(key):
                self.seen.setdefault(lv, []).append(self.quiet[-1])
        self.rows.append(row)
        self._say(f"    -> {label + ': ' if label else ''}{outcome_line(row)}  [{fmt_duration(shown)}]")

    def summary(self, skipped_done: int = 0) -> str:
        """The table printed at the end: one line per cell measured in this invocation."""
        width = max([58] + [len(row["cell_id"]) for row in self.rows])  # full cell ids, never cut
        lines = [f"{'cell':<{width}} {'status':<14} {'eager ms':>9} {'comp. ms':>9} {'speedup':>8}"]
        for row in self.rows:
            e, c = side_ms(row, "eager_step_ms"), side_ms(row, "compiled_step_ms")
            sp = f"{e / c:.2f}x" if e and c else "-"
            lines.append(f"{row['cell_id']:<{width}} {row['status']:<14} "
                         f"{(f'{e:.3f}' if e else '-'):>9} {(f'{c:.3f}' if c else '-'):>9} {sp:>8}")
        counts = Counter(row["status"] for row in self.rows)
        tally = ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "nothing new"
        lines.append(f"{len(self.rows)} cell(s) measured in {fmt_duration(self.clock() - self.t0)}: {tally}"
                     + (f"; {skipped_done} already done (skipped)" if skipped_done else ""))
        spread = [row["cell_id"] for row in self.rows if _process_spread(row) > DISAGREE]
        if spread:
            lines.append(f"note: {len(spread)} ok cell(s) have processes whose speedups differ by more than "
                         f"{DISAGREE * 100:.0f}% (e.g. {spread[0]}): their intervals are wide; the report's "
                         "caveats say which")
        return "\n".join(lines)


def prior_times(rows: list[dict]) -> dict:
    """Earlier cells' wall times (rows with model, phase, mode, cell_wall_s, and `startup_s` where
    the cell paid its fork parent's one-off start: set apart, as the live estimate does) by the
    _levels keys a Progress consults: ("cell", model, phase, mode), ("model", model, phase), ("mode", mode)."""
    out: dict[tuple, list[float]] = {}
    for r in rows:
        secs = r.get("cell_wall_s")
        if not secs or secs <= 0:
            continue
        start = r.get("startup_s") or 0.0
        secs = secs - start if 0 < start < secs else secs
        busy = busy_threads(r) if (r.get("crowd") or 1.0) <= UNCROWDED else None
        for lv in _levels((None, r.get("model"), r.get("phase"), r.get("mode")))[1:]:
            out.setdefault(lv, []).append(Timed(secs, r.get("run"), busy))
    return out


def mark_startups(rows: list[dict], sessions: list[dict]) -> list[dict]:
    """Set `startup_s` on the first cell (by started_at) each command of a run measured: it paid the
    command's fork parent's start (run.json's sessions: started_at, finished_at, launchers'
    parent_import_s). ISO times of one clock compare as text. Rows without started_at are left be."""
    for s in sessions or []:
        secs = [x.get("parent_import_s") for x in s.get("launchers") or [] if x.get("parent_import_s")]
        lo, hi = s.get("started_at"), s.get("finished_at") or "~"
        inside = [r for r in rows if secs and lo and r.get("started_at") and lo <= str(r["started_at"]) <= hi]
        if inside:
            min(inside, key=lambda r: str(r["started_at"]))["startup_s"] = float(secs[0])
    return rows


def as_cold(rows: list[dict], processes: int) -> list[dict]:
    """Earlier cells whose replicates reused the first process's compile (warm caches), as they
    would take with every process compiling cold (COLD_REPLICATES): P - 1 more compiles of the cold
    first call less the warm one each (first_call_compiled_s, warm_first_call_compiled_s). On the
    H200 (eta6-h200 against eta-cold-h200) this puts ResNet-18 training at 78 s for 90 s measured,
    where the warm cell's 38 s put the estimate 1.5x low. A cell without both figures is left be."""
    out = []
    for r in rows:
        cold, warm, secs = r.get("first_call_compiled_s"), r.get("warm_first_call_compiled_s"), r.get("cell_wall_s")
        if secs and cold and warm is not None and cold > warm:
            r = {**r, "cell_wall_s": secs + (max(1, processes) - 1) * (cold - warm)}
        out.append(r)
    return out
