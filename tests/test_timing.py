"""The clocks' arithmetic. CudaClock runs here against a stand-in for torch.cuda whose events read
the host clock (the real one runs on the GPU box); this checks the sample boundaries and the
per-step division, which the CPU path cannot."""
import time
import types

import pytest

from collector.timing import CpuClock, CudaClock


class FakeEvent:
    def __init__(self, enable_timing=True):
        self.t = None

    def record(self):
        self.t = time.perf_counter()

    def elapsed_time(self, other):
        return (other.t - self.t) * 1e3


def fake_torch():
    cuda = types.SimpleNamespace(Event=FakeEvent, synchronize=lambda: None)
    return types.SimpleNamespace(cuda=cuda)


def sleeper(ms):
    def step():
        end = time.perf_counter() + ms / 1e3
        while time.perf_counter() < end:
            pass
    return step


@pytest.mark.parametrize("clock", [CpuClock(), CudaClock(fake_torch())], ids=["cpu", "cuda"])
@pytest.mark.parametrize("k", [1, 4])
def test_samples_are_mean_step_times_over_k_steps(clock, k):
    calls = []

    def step():
        calls.append(1)
        sleeper(2.0)()

    blk = clock.block(step, 5, k)
    assert len(calls) == 5 * k
    assert len(blk.step_ms) == 5
    # per step, not per sample of k steps (a sample of 4 would be 8 ms or more); the upper bound
    # is on the median and loose, since a sleep overshoots on a loaded host
    upper = 3.5 if k == 1 else 1.8 * k
    assert all(t > 1.9 for t in blk.step_ms) and sorted(blk.step_ms)[2] < upper
    assert 1.9 < blk.wall_ms_per_step < upper
    if isinstance(clock, CudaClock):
        assert len(blk.enqueue_ms) == 5 and all(t > 1.9 for t in blk.enqueue_ms)
        assert sorted(blk.enqueue_ms)[2] < upper
