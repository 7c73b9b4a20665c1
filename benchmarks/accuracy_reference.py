"""The correctness check's reference chain, checked on the CPU with inductor (docs/validation.md): a bf16 cell
judged against float64, and against the float32 copy it takes where the float64 copy fails (forced here, as
out of memory beside other cells forced it on an H100), under an A/A (the real compile, nothing planted) and
planted errors of known size (the compiled output scaled by 1 + p). Each reference should pass the A/A and
the 1% plant (under the 5e-2 floor) and fail the 10% plant.

    python benchmarks/accuracy_reference.py [--model mlp:d_model=64,hidden=256]
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from collector.child import accuracy, cell, stages  # noqa: E402
from collector.plan.matrix import Protocol  # noqa: E402

PLANTS = (0.0, 0.01, 0.10)


def run(model: str, plant: float, float64: bool) -> dict:
    """One cell (amp_bf16, inference, default mode) in this process, compiled output x (1 + plant)."""
    real_compile, real_ref = torch.compile, stages._reference_copy

    def planted_compile(fn, *args, **kwargs):
        compiled = real_compile(fn, *args, **kwargs)
        return (lambda *a, **k: compiled(*a, **k) * (1 + plant)) if plant else compiled

    def no_float64(*args):
        if (args[7] if len(args) > 7 else "float64") == "float64":
            raise torch.OutOfMemoryError("CUDA out of memory (forced: the float64 copy beside other cells)")
        return real_ref(*args)

    proto = asdict(Protocol(blocks=2, steps_per_block=2, warmup_steps=1, min_block_ms=0, warm_compile=False))
    spec = {"kind": "cold", "cell": {"model": model, "phase": "infer", "dtype": "amp_bf16", "batch_size": 8,
                                     "mode": "default", "compile_scope": "model"}, "protocol": proto, "device": "cpu"}
    torch.compile = planted_compile
    stages._reference_copy = real_ref if float64 else no_float64
    try:
        return cell.run_cell(spec)
    finally:
        torch.compile, stages._reference_copy = real_compile, real_ref


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp:d_model=64,hidden=256")
    args = ap.parse_args()
    print("reference | planted error | eager's error | compiled's error | allowed | status")
    for float64 in (True, False):
        for plant in PLANTS:
            r = run(args.model, plant, float64)
            eager = r.get("eager_output_rel_err")
            print(f"{r['accuracy_reference']} | {plant:.0%} | {eager:.4f} | {r['output_rel_err']:.4f} | "
                  f"{accuracy.allowed(eager, r['tolerance']):.4f} | {r['status']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
