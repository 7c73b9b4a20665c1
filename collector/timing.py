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
from dataclasses import dataclass
from typing import Callable


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
