"""The clocks' arithmetic. CudaClock runs here against a stand-in for torch.cuda whose events read
the host clock (the real one runs on the GPU box); this checks the sample boundaries and the
per-step division, which the CPU path cannot."""
import time
import types

import pytest

from collector.child.timing import CpuClock, CudaClock


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


@pytest.mark.parametrize("clock", [CpuClock(), CudaClock(fake_torch())], ids=["cpu", "cuda"])
@pytest.mark.parametrize("k", [1, 4])
def test_samples_are_mean_step_times_over_k_steps(clock, k, monkeypatch):
    """A fake host clock that only steps move (2 ms each, the 3rd sample's steps 5 ms): exact
    arithmetic, whatever the load on the machine running the test."""
    now = [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    calls = []

    def step():
        calls.append(1)
        now[0] += 0.005 if (len(calls) - 1) // k == 2 else 0.002

    blk = clock.block(step, 5, k)
    assert len(calls) == 5 * k
    # per step, not per sample of k steps (a sample of 4 would read 8 ms)
    assert blk.step_ms == pytest.approx([2.0, 2.0, 5.0, 2.0, 2.0])
    assert blk.wall_ms_per_step == pytest.approx((4 * 2.0 + 5.0) / 5)
    if isinstance(clock, CudaClock):
        assert blk.enqueue_ms == pytest.approx([2.0, 2.0, 5.0, 2.0, 2.0])
