"""The kernel profile (collector.child.profile): kinds by name, the per-step record, and the real path on
the CPU through the cell's stages with Inductor."""
import json

import pytest
import torch

from collector.child import cell, profile
from tests.test_cell import TINY, _spec


@pytest.mark.parametrize("name, kind", [
    ("triton_poi_fused_add_relu_3", "triton"),
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", "conv"),
    ("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTT", "gemm"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm>", "gemm"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", "aten"),
    ("Memcpy HtoD (Pageable -> Device)", "memory"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits>", "attention"),
    ("Torch-Compiled Region: 0/0", "framework"),
    ("aten::addmm", "aten"),
    ("some_custom_kernel", "other"),
])
def test_kernels_are_sorted_into_kinds_by_name(name, kind):
    assert profile.kind_of(name) == kind


def test_the_record_is_per_step_and_keeps_the_largest_names():
    events = [("a_gemm", 300.0, 10), ("triton_b", 100.0, 20), ("a_gemm", 100.0, 10)]
    events += [(f"triton_small_{i}", 1.0, 1) for i in range(profile.TOP + 5)]
    rec = profile.summarize(events, steps=10, device="cuda")
    assert rec["steps"] == 10
    assert rec["kernels"][0] == {"name": "a_gemm", "kind": "gemm", "calls": 2.0, "us": 40.0}
    assert rec["kernels"][1]["us"] == 10.0 and rec["kernels"][1]["calls"] == 2.0
    assert len(rec["kernels"]) == profile.TOP
    # what the top list leaves out is summed, so kept + other = the whole step
    kept = sum(k["us"] for k in rec["kernels"])
    assert kept + rec["other_us"] == pytest.approx(rec["us_per_step"])
    assert rec["kinds"] == pytest.approx({"gemm": 40.0, "triton": 10.0 + (profile.TOP + 5) * 0.1})


@pytest.mark.parametrize("step_ms, steps", [(0.1, profile.MAX_STEPS), (20.0, 10), (500.0, profile.MIN_STEPS),
                                            (0.0, profile.MIN_STEPS)])
def test_about_the_asked_step_time_is_profiled(step_ms, steps):
    assert profile.steps_for(step_ms) == steps


def test_a_profiler_failure_leaves_the_figure_null(monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("CUPTI unavailable")
    monkeypatch.setattr(profile, "profile_side", boom)
    assert profile.profile_sides(torch, [("eager", lambda: None)], {}, False, lambda: None) is None


@pytest.mark.compile
def test_a_cell_with_kernel_profile_records_both_sides_operators():
    """The real path: a tiny MLP through every stage with Inductor, profiled after timing. Its eager
    step is two addmm a step (two Linear layers); the compiled side runs Inductor's graph."""
    torch._dynamo.reset()
    result = cell.run_cell(_spec(TINY["mlp"], kernel_profile=True))
    assert result["status"] == "ok", result.get("error")
    prof = json.loads(result["kernel_profile_json"])
    assert set(prof) == {"eager", "compiled"}
    eager = {k["name"]: k for k in prof["eager"]["kernels"]}
    assert eager["aten::addmm"]["calls"] == 2.0
    assert prof["eager"]["device"] == "cpu" and prof["eager"]["steps"] >= profile.MIN_STEPS
    assert any(k["kind"] == "framework" for k in prof["compiled"]["kernels"])


@pytest.mark.compile
def test_without_the_setting_no_profile_is_taken():
    torch._dynamo.reset()
    result = cell.run_cell(_spec(TINY["mlp"]))
    assert result["status"] == "ok" and result.get("kernel_profile_json") is None


class _Avg:
    def __init__(self, key, device_type, count, self_cpu=0.0, self_device=0.0, annotation=False):
        self.key, self.device_type, self.count = key, device_type, count
        self.self_cpu_time_total, self.self_device_time_total = self_cpu, self_device
        self.is_user_annotation = annotation


def test_a_gpu_profile_keeps_kernels_and_the_host_side_apart(monkeypatch):
    """The GPU branch on a stand-in for the profiler's averages (no GPU here; the real path ran on the
    H200, docs/measurement.md): kernels by device time without the ranges on the GPU timeline, and the
    same steps' host operators by self CPU time under "host"."""
    CPU, CUDA = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA
    avgs = [_Avg("triton_poi_fused_relu_0", CUDA, 20, self_device=400.0),
            _Avg("nvjet_sm90_tst_128x64", CUDA, 40, self_device=1000.0),
            _Avg("Optimizer.step#AdamW.step", CUDA, 10, self_device=900.0, annotation=True),
            _Avg("cudaGraphLaunch", CPU, 10, self_cpu=150.0),
            _Avg("aten::addmm", CPU, 40, self_cpu=300.0),
            _Avg("ProfilerStep#1", CPU, 1, self_cpu=5.0)]

    class Prof:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def key_averages(self):
            return avgs

    from torch import profiler as torch_profiler

    monkeypatch.setattr(torch_profiler, "profile", lambda activities: Prof())
    calls = []
    rec = profile.profile_side(torch, lambda: calls.append(1), 10, True, lambda: None)
    assert len(calls) == 11  # one unprofiled step, then the profiled ones
    assert rec["device"] == "cuda" and rec["us_per_step"] == pytest.approx(140.0)  # (400 + 1000) / 10
    assert [k["name"] for k in rec["kernels"]] == ["nvjet_sm90_tst_128x64", "triton_poi_fused_relu_0"]
    assert rec["host"]["us_per_step"] == pytest.approx(45.0)  # (150 + 300) / 10, the profiler's step left out
    assert rec["host"]["ops"][0] == {"name": "aten::addmm", "kind": "aten", "calls": 4.0, "us": 30.0}
    cpu = profile.profile_side(torch, lambda: None, 10, False, lambda: None)
    assert "host" not in cpu and cpu["us_per_step"] == pytest.approx(45.0)


@pytest.mark.parametrize("name, family", [
    ("triton_poi_fused_add_mul_3", "triton_poi_fused_add_mul"),
    ("triton_per_fused__softmax_12", "triton_per_fused__softmax"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, float)",
     "at::native::vectorized_elementwise_kernel"),
    ("nvjet_tst_128x256_64x4_2x1_v_bz_coopB_NNT", "nvjet"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "sm90_xmma"),
    ("## Call CompiledFxGraph f245i7ig5pjy2qn3uwzwvapuieipqb33qump2suz2cewedh4mack ##", "## Call CompiledFxGraph ##"),
])
def test_kernel_families_drop_what_a_recompile_renumbers(name, family):
    from collector.record.contract import kernel_family

    assert kernel_family(name) == family


def test_the_record_counts_every_launch_and_groups_every_kernel_by_family():
    # 40 kernels: more than the 30 kept by name; the launches and families still cover all of them
    events = [(f"triton_poi_fused_add_{i}", 10.0, 2) for i in range(40)] + [("nvjet_tst_64x8_NNT", 50.0, 4)]
    rec = profile.summarize(events, 2, "cuda")
    assert rec["launches"] == (40 * 2 + 4) / 2
    assert rec["families"] == {"triton_poi_fused_add": [40.0, 200.0], "nvjet": [2.0, 25.0]}
    assert len(rec["kernels"]) == profile.TOP
