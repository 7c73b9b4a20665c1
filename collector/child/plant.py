"""The planted slowdown (a test option, PLANT_SLOWDOWN=): work worth a known share of the compiled
step added after each compiled step, so that a comparison's sensitivity can be checked against a
change of known size (docs/measurement.md)."""
from __future__ import annotations

import statistics
import time

from collector.child.childlog import log
from collector.record.result import CellResult

def _planted(torch, step, delay_ms: float, cycles_per_ms: float):
    """`step` followed by `delay_ms` of work on both critical paths: the same time of device work
    (torch.cuda._sleep; cycles_per_ms 0 on the CPU) and a host busy wait."""
    cycles = max(1, int(cycles_per_ms * delay_ms)) if cycles_per_ms else 0

    def planted():
        out = step()
        if cycles:
            torch.cuda._sleep(cycles)
        until = time.perf_counter() + delay_ms / 1e3
        while time.perf_counter() < until:
            pass
        return out
    return planted


def calibrate_plant(median_of, step, wrap, pct: float) -> tuple[float, dict]:
    """The delay that lengthens `step` by `pct`% of its median, and what the fit saw.

    `median_of(fn)` times one block of `fn` and returns its median step time; `wrap(fn, d)` plants
    d ms. A first block of the unplanted step is discarded (right after compiling a step runs
    slower than later: on the CPU the calibration then planted 15-16% instead of 10%); then the
    base, the step planted with d1 = the target and with d2 = 2 x the target, and the base again.
    The planted work costs a fixed amount besides its length (a kernel launch and the wait's own
    clock reads: +0.011 ms a step on the H200, 0.8 points of a 10% plant), so the added time is
    fitted as c + s x d through the two lengths and the delay solved for the target. A fit that
    makes no sense (noise larger than the plant: s outside 0.5-2), or whose fixed cost leaves less
    than half the target to plant (a loaded host: it once solved to zero and planted nothing),
    plants the target as it is: never less than asked, the fixed cost on top, said in the log."""
    median_of(step)
    base = [median_of(step)]
    target = base[0] * pct / 100
    m1 = median_of(wrap(step, target))
    m2 = median_of(wrap(step, 2 * target))
    base.append(median_of(step))
    base_ms = statistics.median(base)
    slope = (m2 - m1) / target if target > 0 else 0.0
    fixed = (m1 - base_ms) - slope * target
    fit = {"base_ms": base_ms, "target_ms": target, "slope": slope, "fixed_ms": fixed}
    if not 0.5 <= slope <= 2.0:
        fit["fallback"] = "slope outside 0.5-2"
        return target, fit
    delay = (target - fixed) / slope
    if delay < 0.5 * target / slope:  # the fixed cost ate most of the target (a loaded host): the fit
        fit["fallback"] = "fixed cost above half the target"  # would plant (almost) nothing; never less
        return target, fit  # than asked: plant the target itself (the fixed cost comes on top)
    return delay, fit


def plant_slowdown(torch, cuda: bool, step, pct: float, clock, record: CellResult, spb: int = 9, k: int = 1,
                   delay_ms: float | None = None):
    """A test option (protocol plant_slowdown_pct): `step` followed by extra work that lengthens
    it by `pct`% of its own median time, calibrated here on blocks of the timed blocks' shape
    (`spb` samples of `k` steps; calibrate_plant), unless `delay_ms` is given (a replicate plants
    the cold process's delay, so every process adds the same absolute time). Returns the wrapped
    step; `record` gets the delay.

    The work lies on both critical paths: a host busy wait and, on the GPU, the same time of
    device work. A step runs at the pace of the slower of host and device; adding d to both
    lengthens it by d whichever is the bottleneck. Device time alone is absorbed by a host-bound
    step (seen on the H200: ResNet-18 training, enqueue time = step time, a planted 10% moved it
    by 0-2%)."""
    cycles_per_ms = 0.0
    if cuda:
        probe = 1_000_000
        times = []
        for _ in range(5):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(probe)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        cycles_per_ms = probe / statistics.median(times)
    if delay_ms is None:
        delay_ms, fit = calibrate_plant(lambda fn: statistics.median(clock.block(fn, spb, k).step_ms), step,
                                        lambda fn, d: _planted(torch, fn, d, cycles_per_ms), pct)
        log(f"planted slowdown: +{delay_ms:.4f} ms a step for {pct:g}% of the compiled median {fit['base_ms']:.4f} ms "
            f"(added time = {fit['fixed_ms']:.4f} ms + {fit['slope']:.3f} x delay"
            f"{'; ' + fit['fallback'] + ': planted the target as it is' if 'fallback' in fit else ''})")
    else:
        log(f"planted slowdown: +{delay_ms:.4f} ms a step (the cold process's delay)")
    record["planted_delay_ms"] = delay_ms
    return _planted(torch, step, delay_ms, cycles_per_ms)
