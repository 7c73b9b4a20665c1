"""The two sides of a cell: the model built on its device with the cell's precision, the eager step
and the compiled (or AOTInductor) step, sharing no mutable state that one side changes."""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from collector import models, modes
from collector.child.childlog import log
from collector.child.turns import gpu_turn
from collector.child.accuracy import _tree_tensors
from collector.record.result import CellResult


class ExportError(RuntimeError):
    """torch.export (mode aot-inductor) could not capture the model: status export_error."""


def provenance(model: str, built) -> dict:
    """The row's record of what built the model (packages_json: the model packages' versions, a user
    file's sha256) and what shaped its inputs (inputs_json: each input's shape and dtype, and the
    source's settings), as JSON text."""
    import hashlib
    import json

    from collector.record.contract import USER_FILE, model_packages

    packages = model_packages()
    if models.sources.kind_of(model) == "user":
        target = model.partition(":")[0]
        path = Path(target) if target.endswith(".py") else None
        if path is not None and not path.is_absolute():
            path = models.sources.PROJECT_ROOT / path
        if path is not None and path.is_file():
            packages[USER_FILE] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    shapes = [{"shape": list(getattr(x, "shape", ())), "dtype": str(getattr(x, "dtype", type(x).__name__))
               .replace("torch.", "")} for x in built.inputs]
    inputs = {"inputs": shapes, **dict(sorted((built.settings or {}).items()))}
    return {"packages_json": json.dumps(packages, sort_keys=True), "inputs_json": json.dumps(inputs)}


def _setup(job, record: dict | None = None, stage=None):
    """Import torch, apply precision settings, build the model on the device: (torch, parts);
    `record` receives the model's provenance (packages_json, inputs_json); `stage` (childlog.Stage)
    is named "build", then "to device"."""
    import torch

    cell, proto = job.cell, job.protocol
    torch.manual_seed(proto.seed)
    torch.backends.cuda.matmul.allow_tf32 = proto.tf32
    torch.backends.cudnn.allow_tf32 = proto.tf32
    name, opts = models.parse_ref(cell.model)
    if stage is not None:
        stage.name = "build"
    built = models.build(name, cell.batch_size, opts)
    if record is not None:
        record.update(provenance(cell.model, built))
    dev = torch.device(job.device)
    if stage is not None:
        stage.name = "to device"
    with gpu_turn("the model moved to the device"):  # a shared GPU: not while another cell is timed
        module = built.module.to(dev)
        inputs = [x.to(dev) for x in built.inputs]
        target = built.target.to(dev)
        dtype = cell.dtype
        if dtype in ("bfloat16", "float16"):
            low = getattr(torch, dtype)
            module = module.to(low)
            inputs = [x.to(low) if i in built.float_inputs else x for i, x in enumerate(inputs)]
    module.train(cell.phase == "train")
    amp = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}.get(dtype)

    def autocast():
        return torch.autocast(dev.type, dtype=amp) if amp else contextlib.nullcontext()

    return torch, dev, module, inputs, target, built.loss, autocast, built.float_inputs


def _aoti_step(torch, module, inputs, autocast, record: dict):
    """A step that, on its first call, exports the model (torch.export), compiles it into an
    AOTInductor package, loads it, and runs it; later calls run the loaded package. The stages'
    times go into `record` (aot_export_s, aot_compile_s, aot_load_s)."""
    state: dict = {}

    class Exported(torch.nn.Module):  # autocast inside forward, so export captures it
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *xs):
            with autocast():
                return self.inner(*xs)

    def step():
        if "run" not in state:
            t0 = time.perf_counter()
            try:
                with torch.no_grad():
                    program = torch.export.export(Exported(module), tuple(inputs))
            except Exception as exc:
                raise ExportError(f"torch.export failed: {type(exc).__name__}: {exc}") from exc
            t1 = time.perf_counter()
            record["aot_export_s"] = t1 - t0
            log(f"exported in {t1 - t0:.1f} s; AOTInductor compile")
            folder = Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or ".") / "aoti"
            folder.mkdir(parents=True, exist_ok=True)
            package = torch._inductor.aoti_compile_and_package(program, package_path=str(folder / "model.pt2"))
            t2 = time.perf_counter()
            record["aot_compile_s"] = t2 - t1
            log(f"AOTInductor package built in {t2 - t1:.1f} s; loading")
            state["run"] = torch._inductor.aoti_load_package(package)
            record["aot_load_s"] = time.perf_counter() - t2
            log("package loaded; first run")
        with torch.no_grad():
            return state["run"](*inputs)
    return step


@dataclass
class Sides:
    """The two sides of a cell. They share no mutable state that running one side changes: in
    training the compiled side has its own copy of the model (same initial weights) and its own
    optimizer, so its optimizer state (AdamW's `step` tensors, which a compiled step moves to the
    device), its weights and its gradients never reach the eager side. Inference shares the
    module: no_grad in eval mode changes nothing in it."""

    eager: Callable[[], object]
    compiled: Callable[[], object] | None
    eager_module: object
    compiled_module: object
    eager_opt: object
    compiled_opt: object


def _make_sides(torch, job, module, inputs, target, loss_fn, autocast, record: CellResult) -> Sides:
    """Both sides' steps. Each step returns its output or loss; `record` receives the
    aot-inductor stage times."""
    import copy

    cell = job.cell
    mode, phase, scope = modes.spec(cell.mode), cell.phase, cell.compile_scope
    dynamic = {"auto": None, "true": True, "false": False}[cell.dynamic]

    def compile_(fn):
        return torch.compile(fn, mode=mode.compile_mode, dynamic=dynamic)

    mark = (torch.compiler.cudagraph_mark_step_begin
            if mode.cudagraphs and job.device == "cuda" else (lambda: None))

    def infer_with(fn):
        def step():
            with torch.no_grad(), autocast():
                return fn(*inputs)
        return step

    def train_body(opt, fn):
        def body():
            opt.zero_grad(set_to_none=True)
            with autocast():
                loss = loss_fn(fn(*inputs), target)
            loss.backward()
            opt.step()
            return loss.detach()
        return body

    if phase == "infer":
        eager = infer_with(module)
        if mode.kind == "aot":
            compiled = _aoti_step(torch, module, inputs, autocast, record)
        else:
            compiled = infer_with(compile_(module)) if mode.compiles else None
        return Sides(eager, compiled, module, module, None, None)
    # the compiled side's copy is taken before any step runs: both start from the same weights
    with gpu_turn("the compiled side's copy of the model"):
        cmodule = copy.deepcopy(module) if mode.compiles else None
    opt = torch.optim.AdamW(module.parameters(), lr=1e-5)
    eager = train_body(opt, module)
    if not mode.compiles:
        return Sides(eager, None, module, None, opt, None)
    copt = torch.optim.AdamW(cmodule.parameters(), lr=1e-5)
    inner = train_body(copt, compile_(cmodule)) if scope == "model" else compile_(train_body(copt, cmodule))

    def compiled():
        mark()
        return inner()
    return Sides(eager, compiled, module, cmodule, opt, copt)


def _host(t):
    """A copy of `t` in host memory. The correctness check's captures are held there, not on the GPU:
    resident through the timed blocks, they were counted in both sides' peak memory (BERT MLM at batch
    32: its float64 reference logits alone are 4.0 GB), and DistilBERT MLM at batch 256 ran out of an
    80 GB card's memory in its eager first call beside its 29.8 GiB of float64 reference logits
    (data/examples/rs-h100-a)."""
    return t.detach().to("cpu", copy=True)


def _capture(torch, out, module, phase):
    """Copies, in host memory, of the step's outputs and (training) the gradients, for the
    correctness check."""
    outs = [_host(t) for t in _tree_tensors(out)]
    grads = ([None if p.grad is None else _host(p.grad) for p in module.parameters()]
             if phase == "train" else [])
    return outs, grads


def _reference_copy(torch, module, inputs, target, loss_fn, float_inputs, phase, wide: str = "float64"):
    """Outputs (and gradients) of one step of a `wide` (float64, or float32 where that does not fit)
    copy of the model, without autocast, and without TF32 (a float32 copy's matmuls in full float32)."""
    import copy

    dtype = getattr(torch, wide)
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    ref = copy.deepcopy(module).to(dtype)
    x = [t.to(dtype) if i in float_inputs else t for i, t in enumerate(inputs)]
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        if phase == "infer":
            with torch.no_grad():
                return [_host(t) for t in _tree_tensors(ref(*x))], []
        loss = loss_fn(ref(*x), target)  # a train step's output is its loss
        loss.backward()
        return _capture(torch, loss.detach(), ref, phase)
    finally:
        del ref
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32


