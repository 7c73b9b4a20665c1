"""Clocks for the timed region. The region holds the steps and nothing else.

A sample is the mean time of `k` consecutive steps (k = steps per sample, 1 for any step
longer than the protocol's min_sample_ms): a CUDA event record costs ~12 us of host time
inside the interval it measures (measured on the H200 box, docs/performance.md), which
would bias a 0.2 ms launch-bound step by 6%; spreading it over k steps keeps it under 1%.

CUDA: events at sample boundaries (read after the block's final synchronise), the host
time to enqueue each sample's steps, and the synchronised wall time of the whole block.
CPU: time.perf_counter at sample boundaries.
"""
from __future__ import annotations

import time
import math
from dataclasses import dataclass
from typing import Callable

from collector.child import diagnostics

from collector import modes
from collector.child.childlog import log
from collector.record.result import CellResult


@dataclass
class Block:
    """One timed block: per-sample mean step time and host enqueue time (ms), wall per step (ms)."""

    step_ms: list[float]
    enqueue_ms: list[float]
    wall_ms_per_step: float


class CpuClock:
    method = "perf_counter"

    def block(self, step: Callable[[], object], n: int, k: int = 1) -> Block:
        """n samples of k steps each."""
        times = [0.0] * n
        clock = time.perf_counter
        t_start = clock()
        for i in range(n):
            t0 = clock()
            for _ in range(k):
                step()
            times[i] = clock() - t0
        wall = clock() - t_start
        return Block([t * 1e3 / k for t in times], [], wall * 1e3 / (n * k))

    def sync(self) -> None:
        pass


class CudaClock:
    method = "cuda_event"

    def __init__(self, torch):
        self.torch = torch

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def block(self, step: Callable[[], object], n: int, k: int = 1) -> Block:
        """n samples of k steps each; one event at each sample boundary (n + 1 events)."""
        Event = self.torch.cuda.Event
        marks = [Event(enable_timing=True) for _ in range(n + 1)]
        enq = [0.0] * n
        clock = time.perf_counter
        self.torch.cuda.synchronize()
        t_start = clock()
        marks[0].record()
        for i in range(n):
            t0 = clock()
            for _ in range(k):
                step()
            enq[i] = clock() - t0
            marks[i + 1].record()
        self.torch.cuda.synchronize()
        wall = clock() - t_start
        return Block([marks[i].elapsed_time(marks[i + 1]) / k for i in range(n)],
                     [e * 1e3 / k for e in enq], wall * 1e3 / (n * k))


MAX_STEPS_PER_BLOCK = 500
ENERGY_WINDOW_S = 1.0  # energy: each side runs back to back for at least this long (the counter is coarse)


def _energy_window(side, step, median_ms, clock, monitor, result: CellResult) -> None:
    """Energy of one side: steps back to back for at least ENERGY_WINDOW_S, the GPU's energy
    counter read once before and once after (synchronised): joules, steps and seconds.

    The step count is first estimated from the timed median; back-to-back steps can run faster
    than timed ones (no synchronisation between them, the host runs ahead), so the window is
    extended in further chunks until it has really lasted ENERGY_WINDOW_S."""
    n = max(1, math.ceil(ENERGY_WINDOW_S * 1e3 / max(median_ms, 1e-3)))
    clock.sync()
    e0, t0 = monitor.energy_j(), time.perf_counter()
    steps = 0
    while True:
        for _ in range(n):
            step()
        steps += n
        clock.sync()
        secs = time.perf_counter() - t0
        if secs >= ENERGY_WINDOW_S:
            break
        # the steps still needed at the rate seen so far, 10% over
        n = max(1, math.ceil((ENERGY_WINDOW_S - secs) * steps / max(secs, 1e-9) * 1.1))
    e1 = monitor.energy_j()
    if e0 is not None and e1 is not None:
        result.update({f"{side}_energy_j": e1 - e0, f"{side}_energy_steps": steps, f"{side}_energy_window_s": secs})
    log(f"energy window {side}: {steps} steps in {secs:.2f} s" + (f", {e1 - e0:.1f} J" if e0 is not None
                                                                  and e1 is not None else ""))


def time_blocks(sides: list, blocks: int, spb: int, k: int, clock, between=lambda: None,
                on_block=lambda side: None) -> dict:
    """The timed region: `blocks` rounds, each side's block in turn (ABAB: drift in clocks or load
    hits both sides equally). Per side: samples (ms a step), enqueue times, wall per step of each
    block, and the seconds spent. `between` runs after each round, outside the timed blocks
    (telemetry); `on_block(side)` after each block (peak memory)."""
    samples = {s: {"step": [], "enq": [], "wall": [], "secs": 0.0} for s, _ in sides}
    for _ in range(blocks):
        for side, step in sides:
            rec = samples[side]
            w0 = time.perf_counter()
            blk = clock.block(step, spb, k)
            rec["secs"] += time.perf_counter() - w0
            rec["step"] += blk.step_ms
            rec["enq"] += blk.enqueue_ms
            rec["wall"].append(blk.wall_ms_per_step)
            on_block(side)
        between()
    return samples


def _warm_compiled(torch, step, mode: str, max_calls: int) -> int:
    """Call the compiled step (first call already made) until no compile event occurs; at least the
    mode's minimum (3 for CUDA-graph modes: warm-up, record, replay). Returns the calls made, first
    included."""
    calls, min_calls = 1, modes.spec(mode).min_warmup_calls
    while calls < max_calls:
        seen = diagnostics.activity(torch)
        step()
        calls += 1
        if calls >= min_calls and diagnostics.activity(torch) == seen:
            break
    return calls


