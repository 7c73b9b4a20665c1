"""Clocks for the timed region. The region holds the step and nothing else.

CUDA: one pair of CUDA events per step (recorded around the step, read after the
block's final synchronise), plus the host time to enqueue the step and the
synchronised wall time of the whole block. CPU: time.perf_counter per step.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable


@dataclass
class Block:
    """One timed block: per-step device (or CPU) times, host enqueue times, wall per step."""

    step_ms: list[float]
    enqueue_ms: list[float]
    wall_ms_per_step: float


class CpuClock:
    method = "perf_counter"

    def block(self, step: Callable[[], object], n: int) -> Block:
        times = [0.0] * n
        clock = time.perf_counter
        t_start = clock()
        for i in range(n):
            t0 = clock()
            step()
            times[i] = clock() - t0
        wall = clock() - t_start
        return Block([t * 1e3 for t in times], [], wall * 1e3 / n)

    def sync(self) -> None:
        pass


class CudaClock:
    method = "cuda_event"

    def __init__(self, torch):
        self.torch = torch

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def block(self, step: Callable[[], object], n: int) -> Block:
        Event = self.torch.cuda.Event
        starts = [Event(enable_timing=True) for _ in range(n)]
        ends = [Event(enable_timing=True) for _ in range(n)]
        enq = [0.0] * n
        clock = time.perf_counter
        self.torch.cuda.synchronize()
        t_start = clock()
        for i in range(n):
            starts[i].record()
            t0 = clock()
            step()
            enq[i] = clock() - t0
            ends[i].record()
        self.torch.cuda.synchronize()
        wall = clock() - t_start
        return Block([s.elapsed_time(e) for s, e in zip(starts, ends)], [e * 1e3 for e in enq], wall * 1e3 / n)
