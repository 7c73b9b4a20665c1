"""Harness overhead per timed sample, against a 1 ms step (target: under 1%, i.e. under 10 us).

    python benchmarks/harness_overhead.py [--n 20000]

Two figures per clock:
- timed-region overhead: the sample the harness records for an empty step (what the clock
  itself adds inside the interval it reports);
- added wall time per step: a timed block of empty steps minus a bare loop of the same steps.
On a CUDA machine the CUDA-event clock is measured too (an empty step on the device).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collector.child.timing import CpuClock, CudaClock  # noqa: E402


def bare_loop_us(step, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - t0) / n * 1e6


def measure(clock, step, n: int, repeats: int = 5, k: int = 1) -> tuple[float, float]:
    """(median recorded per-step time of an empty step in us, added wall time per step in us)."""
    inside, added = [], []
    for _ in range(repeats):
        clock.sync()
        bare = bare_loop_us(step, n * k)
        blk = clock.block(step, n, k)
        inside.append(statistics.median(blk.step_ms) * 1e3)
        added.append(blk.wall_ms_per_step * 1e3 - bare)
    return statistics.median(inside), statistics.median(added)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--n", type=int, default=20000)
    args = p.parse_args()
    clocks = [("perf_counter (CPU)", CpuClock())]
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.init()
            clocks.append(("cuda_event (GPU)", CudaClock(torch)))
    except ImportError:
        pass
    print(f"{'clock':<20} {'steps/sample':>12} {'in timed region':>16} {'added wall/step':>16} {'% of 1 ms step':>15}")
    for name, clock in clocks:
        # k=1, and k=2: what the protocol uses for a 1 ms step (min_sample_ms = 2)
        for k in (1, 2):
            inside, added = measure(clock, lambda: None, args.n if "CPU" in name else min(args.n, 2000), k=k)
            print(f"{name:<20} {k:>12} {inside:>13.2f} us {added:>13.2f} us {inside / 10:>14.3f}%")


if __name__ == "__main__":
    main()
