"""Every quantity of every paired cell of two runs (baseline A, candidate B) as an Estimate.

The one place a comparison's per-cell statistics are computed: the comparison report
(analysis/compare_report/compare.py) and the repeats across pairs of runs (analysis/compare_report/repeats.py) both read it.
Per paired ok cell: the change in speedup, compiled step and eager step, each a ratio B/A with a
95% interval of the difference of the two runs' log figures (analysis/stats/tdist.py: the exact t model
over processes where a cell has several, block-bootstrap replicates where it has one; the runs
independent) and a Benjamini-Hochberg q-value over
the family; cold and warm first call and compiled peak memory (analysis/stats/estimates.py). Cells timed
in one process in either run, and the step time of a launch-bound side, are never called.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.stats import estimates as est
from analysis.stats import run_level, core as stats
from analysis.stats.history import QUANTITIES, History
from analysis.stats.fmt import cell_label
from analysis.data.load import Loaded, Run, sql
from analysis.stats.run_level import RunShift
from analysis.stats.tdist import LogDist


@dataclass
class PairEstimates:
    """The comparison's per-cell figures: the paired rows (compare_pairs.sql), the log-ratio
    replicates per family, the estimates per quantity and what their intervals rest on."""

    a: Run
    b: Run
    pairs: list[dict]
    samples: tuple[dict, dict]  # per run: {"reps": [CellReps], "has_compiled": {cell_id: bool}}
    processes: tuple[dict, dict]  # per run: cell_id -> processes
    callable_ids: set  # cells timed in several processes in both runs
    fam: dict[str, dict[str, LogDist]]  # speedup / compiled / eager: cell_id -> ln(B/A), exact or drawn
    ests: dict[str, dict[str, est.Estimate]]  # quantity -> cell_id -> estimate
    shift: RunShift | None = None  # a run-wide shift of both sides, named once (analysis/stats/run_level.py)

    @property
    def labels(self) -> dict[str, str]:
        return {p["cell_id"]: cell_label(p) for p in self.pairs}


def samples(loaded: Loaded, run_id: str) -> dict:
    """The run's samples as the run report loaded them (stats.run_samples: once per run)."""
    got = stats.run_samples(loaded, run_id)
    return {"reps": [c for c, _ in got], "has_compiled": {c.key: has for c, has in got}}


def with_run_spread(dists: dict, run: Run, history: History | None) -> dict:
    """The run's cells' LogDists, each exact term replaced by the run-to-run spread of the run's
    siblings where that is larger (analysis/stats/history.py); (cell id, quantity) -> sibling count for
    those replaced."""
    widened: dict = {}
    if history is None:
        return widened
    for cid, by in dists.items():
        for q in QUANTITIES:
            d = by.get(q)
            if d is None or not d.exact or len(d.terms) != 1:
                continue
            sp = history.spread(run, cid, q)
            if sp is not None and sp.s > d.terms[0][0]:
                by[q] = LogDist(d.loc, ((sp.s, sp.runs - 1),))
                widened[(cid, q)] = sp.runs
    return widened


def _step_estimates(name: str, reps_by: dict[str, LogDist], by_id: dict, procs: tuple, callable_ids: set,
                    spread: tuple, runs: tuple, cells: tuple, min_effect: float) -> dict[str, est.Estimate]:
    """One step quantity (speedup, compiled or eager) of every paired cell: the one call rule on its
    exact interval, the basis it rests on, and why a cell is not called where it is not."""
    out = {}
    ids = list(reps_by)
    qs = stats.benjamini_hochberg([reps_by[i].p_value() for i in ids])
    for cid, q in zip(ids, qs):
        pr = by_id[cid]
        point = est.ratio(pr[f"{name}_b"], pr[f"{name}_a"])
        # the gate is the interval and the minimum effect, not BH: with 3 processes a cell's
        # t interval has 2 degrees of freedom, whose tails keep p above ~0.01 even for a 5-sigma
        # change, so BH over a family would call nothing; q is shown, and the summary counts
        # how many calls also survive it (docs/comparison.md)
        # one process: the interval holds that process's noise only (far too narrow where
        # processes differ, docs/measurement.md), so nothing is called on it
        single = None if cid in callable_ids else "one process"
        if not single and name != "speedup" and (pr.get(f"{name}_lb_a") or pr.get(f"{name}_lb_b")):
            # a host-paced side moves between processes and runs with the host's state (A/A on
            # the H200: up to +50% with one process slow); only the in-process speedup is callable
            single = "launch-bound side"
        basis = (f"t over {procs[0][cid]} and {procs[1].get(cid, 1)} processes" if cid in callable_ids
                 else "block bootstrap inside one process")
        siblings = [f"{r.run_id}'s {spread[i][(cid, name)]} sibling runs" for i, r in enumerate(runs)
                    if (cid, name) in spread[i]]
        if siblings and cid in callable_ids:
            basis += "; run-to-run spread of " + " and ".join(siblings)
        apart = None
        if name != "speedup":  # each side on its own: its processes must not overlap between the runs
            side = {"eager": "eager_ms", "compiled": "compiled_ms"}[name]
            apart = est.separated(*(list(stats.process_medians(getattr(cs[cid], side), cs[cid].processes))
                                    for cs in cells))
        out[cid] = est.from_log_dist(name, reps_by[cid], point, min_effect, basis, q, single, apart)
    return out


# A first call compiles outside any timing turn: beside cells sharing its GPU (GPUS=0,0,0) it shares the
# host with their compiles. In the H100 suite screen of three cells a GPU (su-h100-*), 18 of 89 cells' cold
# compiles moved beyond one cell's A/A spread, 13 of them longer, and for all but one model the same model in
# the other mode, compiled minutes apart, stayed within it (docs/findings-suites.md). One cell a GPU beside another
# GPU's worker is among what the A/A spread was measured on (aa-x2-z; default-h200 in the false-alarm
# budget): called as alone.
BESIDE = "compiled beside the cells sharing its GPU"


def _first_call_and_memory(pairs: list[dict], ests: dict, min_effect: float) -> None:
    """Cold and warm first calls and compiled peak memory of every paired ok compiled cell, into `ests`."""
    for p in pairs:
        cid = p["cell_id"]
        if p["status_a"] != "ok" or p["status_b"] != "ok" or p["mode"] == "eager":
            continue
        ca = est.cold_samples(p.get("cold_all_a"), p.get("rep_cache_a"))
        cb = est.cold_samples(p.get("cold_all_b"), p.get("rep_cache_b"))
        crowd = BESIDE if p.get("turns_a") or p.get("turns_b") else None
        ests["cold"][cid] = (est.first_call_processes("cold", ca, cb, min_effect, crowd) if ca and cb
                             else est.first_call("cold", p["cold_a"], p["cold_b"], min_effect, crowd))
        ests["warm"][cid] = est.first_call("warm", p["warm_a"], p["warm_b"], min_effect, crowd)
        ests["memory"][cid] = est.memory(p["mem_a"], p["mem_b"], min_effect)


def estimate_pair(loaded: Loaded, a: Run, b: Run, reps: int = stats.DEFAULT_REPS,
                  min_effect: float = stats.MIN_EFFECT, history: History | None = None) -> PairEstimates:
    """Every quantity of every paired ok cell of runs a and b as an Estimate (one call rule); with
    `history` (the runs of the data folders) a run's level carries its siblings' run-to-run spread."""
    pairs = loaded.con.execute(sql("compare_pairs"), {"baseline": a.run_id, "candidate": b.run_id}).df()
    pairs = pairs.replace({np.nan: None}).to_dict("records")
    by_id = {p["cell_id"]: p for p in pairs}
    sa, sb = samples(loaded, a.run_id), samples(loaded, b.run_id)
    cells_a, cells_b = ({c.key: c for c in x["reps"]} for x in (sa, sb))
    ma = stats.cell_dists(sa["reps"], reps=reps, seed=1)
    mb = stats.cell_dists(sb["reps"], reps=reps, seed=2)
    spread = (with_run_spread(ma, a, history), with_run_spread(mb, b, history))
    procs = ({c.key: c.processes for c in sa["reps"]}, {c.key: c.processes for c in sb["reps"]})
    # cells timed in several processes in both runs: the only ones a change is called on
    callable_ids = {cid for cid in procs[0] if procs[0][cid] >= 2 and procs[1].get(cid, 1) >= 2}

    fam: dict[str, dict[str, LogDist]] = {"speedup": {}, "compiled": {}, "eager": {}}
    for p in pairs:
        cid = p["cell_id"]
        if cid not in ma or cid not in mb or p["status_a"] != "ok" or p["status_b"] != "ok":
            continue
        fam["eager"][cid] = mb[cid]["eager"] - ma[cid]["eager"]
        if sa["has_compiled"].get(cid) and sb["has_compiled"].get(cid):
            fam["compiled"][cid] = mb[cid]["compiled"] - ma[cid]["compiled"]
            fam["speedup"][cid] = mb[cid]["speedup"] - ma[cid]["speedup"]
    ests: dict[str, dict[str, est.Estimate]] = {q: {} for q in est.QUANTITIES}
    for name, reps_by in fam.items():
        ests[name] = _step_estimates(name, reps_by, by_id, procs, callable_ids, spread, (a, b),
                                     (cells_a, cells_b), min_effect)
    _first_call_and_memory(pairs, ests, min_effect)
    # what the processes cannot show: a shift of the whole run (analysis/stats/run_level.py)
    shift = run_level.withhold_run_wide(ests, callable_ids, min_effect)
    return PairEstimates(a, b, pairs, (sa, sb), procs, callable_ids, fam, ests, shift)
