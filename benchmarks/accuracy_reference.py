"""The correctness check's reference chain, checked on the CPU with inductor (docs/validation.md): a bf16 cell
judged against float64, and against the float32 copy it takes where the float64 copy fails (forced here, as
out of memory beside other cells forced it on an H100), under an A/A (the real compile, nothing planted) and
planted errors of known size (the compiled output scaled by 1 + p). Each reference should pass the A/A and
the 1% plant (under the 5e-2 floor) and fail the 10% plant.

With --blind: a check that could not fail (contract.accuracy_blind, which the reports name). The compiled
output is zeroed (an error of exactly 1.0) and eager's own error is planted by scaling the float64
reference's outputs by 1 + q: at q = 0 and 0.4 (eager 0.29, allowed 0.86) the zeroed compile must fail and the
cell not be named; at q = 0.6 (eager 0.375, allowed 1.125) it passes, and the rule must name it. Then a
training cell, compiled as is, with eager's gradient error planted the same way (the float64 gradients scaled
by 1 + q): at q = 0.6 its gradients' check could not fail and its output's could (contract.accuracy_blind_parts
must say ["gradients"]); at 0 and 0.4 nothing is named.

    python benchmarks/accuracy_reference.py [--model mlp:d_model=64,hidden=256] [--blind]
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
from collector.record.contract import accuracy_blind_parts, accuracy_unchecked  # noqa: E402

PLANTS = (0.0, 0.01, 0.10)


def run(model: str, plant: float, float64: bool, ref_scale: float = 1.0, grad_scale: float = 1.0,
        phase: str = "infer") -> dict:
    """One cell (amp_bf16, default mode) in this process, compiled output x (1 + plant), the reference's
    outputs x `ref_scale` and its gradients x `grad_scale`."""
    real_compile, real_ref = torch.compile, stages._reference_copy

    def planted_compile(fn, *args, **kwargs):
        compiled = real_compile(fn, *args, **kwargs)
        return (lambda *a, **k: compiled(*a, **k) * (1 + plant)) if plant else compiled

    def reference(*args):  # the float64 copy failing where `float64` is off; its outputs scaled
        if not float64 and (args[7] if len(args) > 7 else "float64") == "float64":
            raise torch.OutOfMemoryError("CUDA out of memory (forced: the float64 copy beside other cells)")
        outs, grads = real_ref(*args)
        return ([t * ref_scale for t in outs] if ref_scale != 1.0 else outs,
                [None if g is None else g * grad_scale for g in grads] if grad_scale != 1.0 and grads else grads)

    proto = asdict(Protocol(blocks=2, steps_per_block=2, warmup_steps=1, min_block_ms=0, warm_compile=False))
    spec = {"kind": "cold", "cell": {"model": model, "phase": phase, "dtype": "amp_bf16", "batch_size": 8,
                                     "mode": "default", "compile_scope": "model"}, "protocol": proto, "device": "cpu"}
    torch.compile = planted_compile
    stages._reference_copy = reference
    try:
        return cell.run_cell(spec)
    finally:
        torch.compile, stages._reference_copy = real_compile, real_ref


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp:d_model=64,hidden=256")
    ap.add_argument("--blind", action="store_true")
    args = ap.parse_args()
    if args.blind:
        print("eager's error planted | eager's error | compiled's error (zeroed) | allowed | status | named unchecked")
        for q in (0.0, 0.4, 0.6):
            r = run(args.model, -1.0, True, 1 + q)
            eager = r.get("eager_output_rel_err")
            row = {"phase": "infer", "accuracy_ok": r.get("accuracy_ok"), "tolerance": r.get("tolerance"),
                   "eager_output_rel_err": eager}
            print(f"{q:.0%} | {eager:.4f} | {r['output_rel_err']:.4f} | {accuracy.allowed(eager, r['tolerance']):.4f} | "
                  f"{r['status']} | {accuracy_unchecked(row)}", flush=True)
        print("training: eager's gradient error planted | eager's output error | eager's gradient error | "
              "compiled's gradient error | allowed | status | blind parts named")
        for q in (0.0, 0.4, 0.6):
            r = run(args.model, 0.0, True, grad_scale=1 + q, phase="train")
            row = {k: r.get(k) for k in ("accuracy_ok", "tolerance", "eager_output_rel_err", "eager_grad_rel_err")}
            row["phase"] = "train"
            print(f"{q:.0%} | {r['eager_output_rel_err']:.4f} | {r['eager_grad_rel_err']:.4f} | {r['grad_rel_err']:.4f} | "
                  f"{accuracy.allowed(r['eager_grad_rel_err'], r['tolerance']):.4f} | {r['status']} | "
                  f"{accuracy_blind_parts(row)}", flush=True)
        return 0
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
