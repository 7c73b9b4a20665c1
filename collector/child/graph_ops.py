"""The captured graph (protocol `graph_capture`): what Dynamo traced of the model's forward, as a
histogram of its ops.

Last in the cold process (after timing, the kernel profile and the sweep: nothing timed sees it),
Dynamo's caches are reset and the model's forward is traced again, with the cell's inputs, grad mode,
autocast and `dynamic`, by a backend that only records each graph's nodes and runs the graph as it is
(no Inductor). The Dynamo graph depends on the torch version and on the model's code, not on the
backend or the mode, so the record is the graph the cell's compile started from:

    {"graphs": 1, "nodes": 412, "ops": {"torch.nn.functional.linear": 72, "operator.add": 25, ...}}

Two runs' records say whether the model's code took the same path (transformers builds an attention
mask inside a compiled graph under torch < 2.14 and not from 2.14: the ops that build it show up in
A only). A diagnostic: a failure leaves the column null with the reason in the cell's log.
"""
from __future__ import annotations

import contextlib
import json
import time
from collections import Counter

from collector import modes
from collector.child.childlog import log

# modules whose functions the record names by a shorter public path
MODULE_NAMES = {"torch._C._nn": "torch.nn.functional", "torch._C._VariableFunctions": "torch", "torch._C": "torch",
                "_operator": "operator", "torch.functional": "torch", "torch._C._special": "torch.special",
                "torch._C._linalg": "torch.linalg", "torch._C._fft": "torch.fft"}
NODE_OPS = ("call_function", "call_method", "call_module")


def op_name(node, gm) -> str:
    """A graph node's op as a stable name: torch.nn.functional.linear, operator.add, Tensor.view,
    or the class of a called submodule."""
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.op == "call_module":
        try:
            return type(gm.get_submodule(node.target)).__name__
        except Exception:
            return "module"
    target = node.target
    name = getattr(target, "__name__", None) or str(target)
    module = getattr(target, "__module__", None) or ""
    module = MODULE_NAMES.get(module, module)
    return f"{module}.{name}" if module else name


def histogram(graphs: list) -> dict:
    """The record of the graphs (GraphModules) one trace produced."""
    ops: Counter = Counter()
    nodes = 0
    for gm in graphs:
        for node in gm.graph.nodes:
            if node.op in NODE_OPS:
                ops[op_name(node, gm)] += 1
                nodes += 1
    return {"graphs": len(graphs), "nodes": nodes, "ops": dict(sorted(ops.items()))}


def capture(torch, module, inputs, phase: str, autocast, dynamic) -> dict:
    """Trace `module(*inputs)` again with a recording backend (Dynamo's caches reset before and after)."""
    graphs: list = []

    def record(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    try:
        traced = torch.compile(module, backend=record, dynamic=dynamic)
        grad = torch.no_grad() if phase == "infer" else contextlib.nullcontext()
        with grad, autocast():
            traced(*inputs)
    finally:
        torch._dynamo.reset()
    return histogram(graphs)


def capture_json(torch, module, inputs, phase: str, autocast, dynamic) -> str | None:
    """capture() as the row's graph_ops_json, or None (the reason logged): never fails the cell."""
    t0 = time.perf_counter()
    try:
        rec = capture(torch, module, inputs, phase, autocast, dynamic)
    except Exception as exc:  # a diagnostic: never fail the cell
        log(f"graph capture failed: {type(exc).__name__}: {str(exc)[:200]}")
        return None
    log(f"graph capture: {rec['graphs']} graph(s), {rec['nodes']} ops of {len(rec['ops'])} kinds in "
        f"{time.perf_counter() - t0:.2f} s")
    return json.dumps(rec, sort_keys=True)


def for_cell(torch, cell, module, inputs, autocast) -> str | None:
    """capture_json for a cell (its phase and `dynamic`); None for mode aot-inductor, whose program is
    torch.export's graph, not a Dynamo compile's."""
    if modes.spec(cell.mode).kind == "aot":
        return None
    dynamic = {"auto": None, "true": True, "false": False}[cell.dynamic]
    return capture_json(torch, module, inputs, cell.phase, autocast, dynamic)
