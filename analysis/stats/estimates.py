"""Estimates: one type for every quantity a report states with an interval, and one rule that calls it.

An `Estimate` is a ratio B/A (a change between two runs) or a figure of one run, with its 95%
interval, the call made on it and what the interval rests on (`reason`). Every call in the
comparison goes through `call_rule`; the change in a quantity is called when

  - its 95% interval excludes no change (1), and
  - its point estimate is at least the minimum effect away from 1 (|ln ratio| >= ln(1 + min_effect)),
  - and the data can carry a call at all (`not_callable` names why not, e.g. one process);
  - for a step time (compiled or eager, each side on its own), every process of one run lies beyond
    every process of the other (`separated`). The t interval over 3 processes assumes the process
    medians are normal; a launch-bound side is bimodal between processes (the host's fast and slow
    states), and in the committed H200 A/A (aa-x2-y against aa-x2-w) GPT bs1's compiled step read
    +50% (95% CI +0.5% to +132%) from one slow process. Full separation of 3 against 3 processes is
    what a permutation test can show at its smallest p (0.1): together with the interval it keeps
    that A/A clean and still calls the planted 5% and the 3% regressions (docs/comparison.md).
    The speedup is paired inside each process (eager and compiled share the process's state), so
    it needs no such guard.

Where the intervals come from, per quantity (docs/comparison.md, "Every quantity"):
  - step times and the speedup: Student's t over processes (analysis/stats/core.py), the runs independent;
  - cold and warm first-call (compile) time: one figure per run and cell (the cold compile runs once;
    the warm figure is the median of the replicate processes), so no within-run interval exists. The
    interval is the A/A noise: the largest |ln B/A| of one cell over the committed A/A pairs
    (benchmarks/first_call_noise.py prints it), put around the point: [point / e^q, point * e^q];
    over a run's cells, the geometric mean against the largest run-wide A/A shift;
  - a step time whose side is launch-bound in either run (the host paces it) is shown, not called:
    it moves with the host's state between processes and runs (the speedup, paired inside each
    process, is the callable quantity of such a cell);
  - peak memory: the allocator's peak is deterministic for a given build (0 of 50 A/A cell pairs on the
    H200 differed by a byte), so the interval is the point and the minimum effect alone decides.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from analysis.stats.tdist import welch

LEVEL = 0.95
# quantities, in the order a release note quotes them; True where a larger ratio is better
QUANTITIES = {"compiled": ("compiled step time", False), "eager": ("eager step time", False),
              "speedup": ("speedup", True), "cold": ("cold compile (first call)", False),
              "warm": ("warm-cache compile (first call)", False), "memory": ("compiled peak memory", False)}
# just above the largest |ln(B/A)| of one cell over the committed A/A pairs (benchmarks/first_call_noise.py,
# 72 and 63 cell pairs of 12 A/A run pairs, H200 and CPU; their 95% quantile is 0.37 and 0.33): a single
# run's first call moved this much when nothing changed, so a per-cell change of a first-call time
# must exceed it to be called (the 95% quantile would call ~5% of A/A cells by construction)
FIRST_CALL_NOISE = {"cold": 0.42, "warm": 0.59}  # rounded up
# the same for the geometric mean over a run's cells (the shift every cell of one run shares:
# compile workers, disk cache, host load): the largest |mean ln(B/A)| of the 12 A/A run pairs
FIRST_CALL_RUN_NOISE = {"cold": 0.18, "warm": 0.14}
# the verdict's run-level first-call line: the largest |mean ln(B/A)| of a run's first calls over every
# committed same-torch pair of 3 or more cells (benchmarks/false_alarms.py prints it: cold 0.392, warm
# 0.356, both CPU runs a day apart, one with the kernel profile after timing), rounded up. The 12 A/A
# pairs above set 0.18 and 0.14, and the 82 same-torch pairs went past them (host state and caches move
# a whole run's compiles). With fewer cells a "run" is a cell or two, and one cell's bound over
# sqrt(cells) applies where it is larger.
FIRST_CALL_RUN_BOUND = {"cold": 0.40, "warm": 0.36}


def run_level_bound(quantity: str, cells: int) -> float:
    """How far (|ln ratio|) the geometric mean of `cells` cells' first calls moves in A/A pairs."""
    return max(FIRST_CALL_RUN_BOUND[quantity], FIRST_CALL_NOISE[quantity] / math.sqrt(max(cells, 1)))

IMPROVED, REGRESSED = "improved", "regressed"
NO_CHANGE, BELOW_MIN = "no significant change", "below minimum effect"


@dataclass(frozen=True)
class Estimate:
    """A ratio B/A (or one run's figure) with its 95% interval and the call on it."""

    quantity: str  # a key of QUANTITIES
    point: float | None
    lo: float | None
    hi: float | None
    call: str  # improved / regressed / no significant change / below minimum effect / not called: ...
    reason: str  # what the interval rests on
    q: float | None = None  # Benjamini-Hochberg q-value, where the interval has a p-value behind it

    @property
    def called(self) -> bool:
        return self.call in (IMPROVED, REGRESSED)


OVERLAP = "not called: the runs' processes overlap"


def separated(a: list[float], b: list[float]) -> bool | None:
    """True when every value of `b` lies above every value of `a`, or every one below; None with
    fewer than two values on a side (nothing to tell)."""
    if len(a) < 2 or len(b) < 2:
        return None
    return min(b) > max(a) or max(b) < min(a)


def call_rule(point: float | None, lo: float | None, hi: float | None, min_effect: float,
              higher_is_better: bool, not_callable: str | None = None, apart: bool | None = None) -> str:
    """The one call rule (module docstring). `apart`: `separated` of the two runs' process figures
    (step times); False withholds the call. Returns improved / regressed / no significant change /
    below minimum effect / 'not called: <why>'."""
    if not_callable:
        return f"not called: {not_callable}"
    if point is None or lo is None or hi is None or not point > 0 or math.isnan(point):
        return "-"
    if not (lo > 1 or hi < 1):
        return NO_CHANGE
    if abs(math.log(point)) < math.log1p(min_effect):
        return BELOW_MIN
    if apart is False:
        return OVERLAP
    return IMPROVED if (point > 1) == higher_is_better else REGRESSED


def from_log_dist(quantity: str, dist, point: float | None, min_effect: float, reason: str,
                  q: float | None = None, not_callable: str | None = None, apart: bool | None = None) -> Estimate:
    """An estimate whose interval is the central 95% of a LogDist of ln(ratio) (analysis/stats/tdist.py)."""
    lo, hi = (math.exp(v) for v in dist.interval(LEVEL))
    return Estimate(quantity, point, lo, hi,
                    call_rule(point, lo, hi, min_effect, QUANTITIES[quantity][1], not_callable, apart), reason, q)


def from_noise(quantity: str, point: float | None, noise_log: float, min_effect: float, reason: str,
               not_callable: str | None = None) -> Estimate:
    """An estimate of a single-figure-per-run quantity: the interval is the A/A noise around the point."""
    if point is None or not point > 0:
        return Estimate(quantity, None, None, None, "-", reason)
    lo, hi = point / math.exp(noise_log), point * math.exp(noise_log)
    return Estimate(quantity, point, lo, hi,
                    call_rule(point, lo, hi, min_effect, QUANTITIES[quantity][1], not_callable), reason)


def ratio(b, a) -> float | None:
    """b / a where both are positive numbers, else None."""
    try:
        return float(b) / float(a) if a and b and float(a) > 0 and float(b) > 0 else None
    except (TypeError, ValueError):
        return None


def first_call(quantity: str, a, b, min_effect: float, not_callable: str | None = None) -> Estimate:
    """A cell's cold or warm first-call change, B against A (FIRST_CALL_NOISE)."""
    q = FIRST_CALL_NOISE[quantity]
    return from_noise(quantity, ratio(b, a), q, min_effect,
                      f"one figure per run; interval: the A/A spread of one cell's {quantity} first call "
                      f"(x/{math.exp(q):.2f})", not_callable)


def first_call_processes(quantity: str, a: list, b: list, min_effect: float,
                         not_callable: str | None = None) -> Estimate:
    """A cell's cold first-call change where every process of both runs compiled cold (protocol
    cold_replicates: one cold compile a process, each in its own empty cache): the ratio of the
    processes' geometric means, with Welch's 95% interval on their logarithms (stats.welch) widened on
    both sides by the largest run-wide A/A shift (FIRST_CALL_RUN_NOISE). The widening is needed: a run's
    processes compile one after the other under the host's state of that minute, which moves between
    runs, so their spread understates a between-run change. In the CPU A/A with a plant that leaves
    compiling alone (data/examples/cr-cpu-a, -b, -p10) Welch alone called +23.7% (+12.7 to +35.8%) and
    +17.9%, every process of one run beyond every process of the other; widened, nothing is called.
    Needs two processes a run; the caller falls back to `first_call` otherwise."""
    la, lb = np.log(np.asarray(a, float)), np.log(np.asarray(b, float))
    lo, hi = welch(la, lb)
    shift = FIRST_CALL_RUN_NOISE[quantity]
    point = float(np.exp(lb.mean() - la.mean()))
    lo, hi = float(np.exp(lo - shift)), float(np.exp(hi + shift))
    return Estimate(quantity, point, lo, hi,
                    call_rule(point, lo, hi, min_effect, QUANTITIES[quantity][1], not_callable),
                    f"Welch t over {len(a)} and {len(b)} cold compiles (every process compiled cold), "
                    f"widened by the run-wide A/A shift (x/{math.exp(shift):.2f})")


def cold_samples(first_calls, replicate_cache) -> list[float] | None:
    """A row's cold first calls, one a process, where every process compiled cold (two or more
    processes with a first call); else None."""
    if replicate_cache != "cold" or first_calls is None:
        return None
    got = [float(v) for v in first_calls if v is not None and float(v) > 0]
    return got if len(got) >= 2 else None


def memory(a, b, min_effect: float) -> Estimate:
    """A cell's compiled peak memory change, B against A: deterministic, the minimum effect decides."""
    return from_noise("memory", ratio(b, a), 0.0, min_effect,
                      "allocator peak: identical in every A/A pair, so the minimum effect alone decides")


def pct(r: float | None) -> str:
    """A ratio as a signed percentage change ('+3.2%'), '-' when missing."""
    return "-" if r is None else f"{(r - 1) * 100:+.1f}%"


def interval_text(e: Estimate) -> str:
    return "-" if e.lo is None else f"{pct(e.lo)} to {pct(e.hi)}"
