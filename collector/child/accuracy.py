"""Correctness: compiled and eager outputs (and gradients) against a float64 reference, with
documented tolerances (docs/measurement.md)."""
from __future__ import annotations

from collector.record.contract import ERROR_MULTIPLIER, accuracy_allowed as allowed  # noqa: F401

# Compiled and eager are both compared with a float64 run of the same step; compiled passes if its
# relative L2 error is at most max(ERROR_MULTIPLIER x eager's error, TOLERANCE[dtype]) (the record layer
# holds that rule, which the report reads too: contract.accuracy_blind).
TOLERANCE = {"float32": 1e-3, "float32+tf32": 1e-2, "bfloat16": 5e-2, "amp_bf16": 5e-2,
             "float16": 1e-2, "amp_fp16": 1e-2}


def _tree_tensors(obj):
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(obj) if isinstance(t, torch.Tensor)]


CHUNK = 1 << 25  # elements a slice: 256 MiB of float64 per temporary


def rel_l2(actual: list, expected: list, device=None) -> float:
    """||actual - expected|| / ||expected|| over all tensors together (nan if shapes differ), a slice
    at a time, each slice moved to `device` (default: where the tensors are; the captures are held in
    host memory and a GPU cell sums on its GPU): DistilBERT MLM at batch 256 and 512 tokens has 4.0e9
    logits, and the difference of two whole float64 copies asked for 29.8 GiB more of an H200 that held
    the model, its float64 reference and both outputs (an `oom` cell whose model had compiled and run:
    data/examples/rs-h200-a)."""
    import torch

    if len(actual) != len(expected) or not expected:
        return float("nan")
    num = den = 0.0
    for a, e in zip(actual, expected):
        if a is None or e is None or a.shape != e.shape:
            return float("nan")
        a, e = a.detach().reshape(-1), e.detach().reshape(-1)
        dev = e.device if device is None else device
        for i in range(0, e.numel(), CHUNK):  # float64 copies of a slice at a time, never of the whole
            x, y = a[i:i + CHUNK].to(dev).double(), e[i:i + CHUNK].to(dev).double()
            num += torch.sum((x - y) ** 2).item()
            den += torch.sum(y ** 2).item()
    return (num ** 0.5) / max(den ** 0.5, 1e-30)


def _within(got: float, eager: float | None, tol: float) -> bool:
    """Compiled error `got` passes if it is a number <= allowed(eager, tol)."""
    return got == got and got <= allowed(eager, tol)  # got == got: not nan


def _check_accuracy(job, cuda, ref64, ref_out_eager, ref_grads, got_out, got_grads, result) -> None:
    """Compiled against the float64 reference (or eager where there is none): errors, tolerance
    and accuracy_ok into `result`."""
    cell, proto = job.cell, job.protocol
    key = cell.dtype + ("+tf32" if proto.tf32 and cell.dtype == "float32" and cuda else "")
    tol = TOLERANCE[key]
    result["tolerance"] = tol
    dev = job.device if cuda else None  # the captures are in host memory; a GPU cell sums on its GPU
    if ref64 is not None:
        ref_out, ref_grads_cmp = ref64
        result["eager_output_rel_err"] = rel_l2(ref_out_eager, ref_out, dev)
        if cell.phase == "train":
            result["eager_grad_rel_err"] = rel_l2(ref_grads, ref_grads_cmp, dev)
    else:
        ref_out, ref_grads_cmp = ref_out_eager, ref_grads
    result["output_rel_err"] = rel_l2(got_out, ref_out, dev)
    checks = [(result["output_rel_err"], result.get("eager_output_rel_err"))]
    if cell.phase == "train":
        result["grad_rel_err"] = rel_l2(got_grads, ref_grads_cmp, dev)
        checks.append((result["grad_rel_err"], result.get("eager_grad_rel_err")))
    result["accuracy_ok"] = all(_within(got, eager, tol) for got, eager in checks)


