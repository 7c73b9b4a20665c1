"""collector.child.diagnostics against the real torch of this interpreter, and its degradation to unknown.

Run it under each torch this machine has, e.g. `.venv-torch-2.14.1/bin/python -m pytest
tests/test_diagnostics.py`, since the module reads private APIs that change between releases.
"""
from __future__ import annotations

import contextlib
import json
import types

import pytest

from collector.child import diagnostics

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.compile
def test_counts_graph_breaks_with_reasons_and_graphs():
    def f(x):
        y = torch.sin(x) + 1
        print("break here")  # a graph break Dynamo names
        return torch.cos(y) * 2

    before = diagnostics.snapshot(torch)
    compiled = torch.compile(f, backend="eager")
    compiled(torch.randn(8))
    found = diagnostics.since(torch, before)
    assert found["graph_break_count"] >= 1
    assert found["graph_count"] >= 2  # the code before and after the break
    assert sum(found["graph_break_reasons"].values()) == found["graph_break_count"]
    assert any("print" in r.lower() or "builtin" in r.lower() for r in found["graph_break_reasons"])


def test_differences_exclude_what_happened_before_the_snapshot():
    def g(x):
        print("b")
        return x + 1

    torch.compile(g, backend="eager")(torch.randn(4))
    before = diagnostics.snapshot(torch)
    found = diagnostics.since(torch, before)
    assert found["graph_break_count"] == 0 and found["graph_count"] == 0
    assert found["recompile_count"] == 0


@pytest.mark.compile
def test_recompile_counted_with_its_reason():
    def h(x):
        return x * 2

    compiled = torch.compile(h, backend="eager", dynamic=False)
    before = diagnostics.snapshot(torch)
    compiled(torch.randn(4))
    compiled(torch.randn(5))  # a new static shape: a guard fails, Dynamo recompiles
    found = diagnostics.since(torch, before)
    assert found["recompile_count"] == 1, found
    (reason,) = found["recompile_reasons"]
    assert "size" in reason.lower() or "shape" in reason.lower()
    assert found["graph_count"] == 2


@pytest.mark.compile
def test_compile_split_in_seconds_from_inductor():
    def k(x):
        return torch.relu(x) @ x.T

    before = diagnostics.snapshot(torch)
    torch.compile(k)(torch.randn(16, 16))
    split = diagnostics.since(torch, before)["compile_split"]
    assert split is not None and split["dynamo"] > 0
    assert split["dynamo"] >= split.get("inductor", 0) >= 0  # nested: Dynamo includes Inductor
    row = diagnostics.to_row(diagnostics.since(torch, before))
    assert json.loads(row["compile_split_json"])["dynamo"] == pytest.approx(split["dynamo"])


@pytest.mark.compile
def test_kernel_count_from_inductor_and_the_same_when_compiled_again():
    def k(x):
        return torch.relu(x).sum(1) * 2, x.cos()

    x = torch.randn(32, 16)
    before = diagnostics.snapshot(torch)
    torch.compile(k, backend="eager")(x)
    assert diagnostics.since(torch, before)["kernel_count"] == 0  # no Inductor, no kernels
    torch._dynamo.reset()
    before = diagnostics.snapshot(torch)
    torch.compile(k)(x)
    first = diagnostics.since(torch, before)["kernel_count"]
    assert first >= 1
    torch._dynamo.reset()  # compiled again: from the FX-graph cache (its saved count) or anew
    before = diagnostics.snapshot(torch)
    torch.compile(k)(x)
    assert diagnostics.since(torch, before)["kernel_count"] == first
    assert diagnostics.to_row(diagnostics.since(torch, before))["kernel_count"] == first


def test_missing_private_apis_degrade_to_unknown_not_zero():
    bare = types.SimpleNamespace(_dynamo=types.SimpleNamespace())  # a torch without these fields
    before = diagnostics.snapshot(bare)
    found = diagnostics.since(bare, before)
    assert set(found) >= {"graph_count", "graph_break_count", "recompile_count", "cudagraph_skip_count",
                          "compile_split", "kernel_count"}
    assert all(v is None for v in found.values()), found
    row = diagnostics.to_row(found)
    assert all(v is None for v in row.values())
    # the cell's other private reads degrade the same way
    assert diagnostics.activity(bare) is None
    assert diagnostics.compile_times(bare) == {} and diagnostics.inductor_cache_counters(bare) == {}


def test_metrics_without_a_field_leave_only_that_field_unknown():
    class Metric:  # an older CompilationMetrics: no recompile_reason, no cudagraph_skip_reason
        dynamo_cumulative_compile_time_us = 2_000_000

    records: list = []
    counters = {"stats": {"unique_graphs": 0}, "graph_break": {}, "inductor": {}}
    fake = types.SimpleNamespace(_dynamo=types.SimpleNamespace(utils=types.SimpleNamespace(
        counters=counters, get_compilation_metrics=lambda: list(records))))
    before = diagnostics.snapshot(fake)
    records.append(Metric())
    counters["stats"] = {"unique_graphs": 1}
    found = diagnostics.since(fake, before)
    assert found["graph_count"] == 1 and found["graph_break_count"] == 0
    assert found["recompile_count"] is None and found["cudagraph_skip_reasons"] is None
    assert found["compile_split"] == {"dynamo": 2.0}


def test_flops_of_a_matrix_product():
    a, b = torch.randn(32, 64), torch.randn(64, 16)
    assert diagnostics.count_flops(torch, lambda: a @ b) == 2 * 32 * 64 * 16
    assert diagnostics.count_flops(torch, lambda: 1 / 0) is None  # a failing count is unknown


def test_cudagraph_skips_counted_with_their_logged_reasons():
    from torch._inductor import cudagraph_utils

    before = diagnostics.snapshot(torch)
    cudagraph_utils.log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to mutated inputs (1 instances)")
    found = diagnostics.since(torch, before)
    assert found["cudagraph_skip_count"] == 1
    assert found["cudagraph_skip_reasons"] == {"skipping cudagraphs due to mutated inputs (1 instances)": 1}


def test_silent_cudagraph_skips_are_counted_as_unlogged_not_dropped():
    before = diagnostics.snapshot(torch)
    torch._dynamo.utils.counters["inductor"]["cudagraph_skips"] += 1  # what Inductor does for CPU graphs
    found = diagnostics.since(torch, before)
    assert found["cudagraph_skip_count"] == 1
    assert found["cudagraph_skip_reasons"] == {diagnostics.UNLOGGED: 1}


@pytest.mark.compile
def test_activity_changes_only_when_something_compiles():
    """The cell's warm-up stops once a call leaves Dynamo's counters unchanged."""
    torch._dynamo.reset()
    f = torch.compile(lambda x: x * 2 + 1, backend="eager")
    x = torch.ones(4)
    before = diagnostics.activity(torch)
    f(x)
    after_compile = diagnostics.activity(torch)
    f(x)
    assert after_compile != before and diagnostics.activity(torch) == after_compile


def test_the_captured_graph_is_counted_by_op_and_says_which_ops_a_path_adds():
    """A real Dynamo trace (no Inductor) of a module whose forward takes another path by a flag: the
    record names the ops of each, so two runs' records show what one path added."""
    import torch

    from collector.child.graph_ops import capture

    class Net(torch.nn.Module):
        def __init__(self, mask):
            super().__init__()
            self.lin, self.mask = torch.nn.Linear(8, 8), mask

        def forward(self, x):
            y = torch.nn.functional.gelu(self.lin(x))
            if self.mask:  # the path transformers takes under torch < 2.14: build a mask in the graph
                y = torch.where(torch.arange(8) <= 3, y, y * 0)
            return y + 1

    x = torch.randn(2, 8)
    plain = capture(torch, Net(False), [x], "infer", contextlib.nullcontext, None)
    masked = capture(torch, Net(True), [x], "infer", contextlib.nullcontext, None)
    assert plain["graphs"] == 1 and plain["ops"]["torch.nn.functional.gelu"] == 1
    assert plain["ops"]["operator.add"] == 1
    added = {k for k in masked["ops"] if k not in plain["ops"]}
    assert {"torch.arange", "torch.where"} <= added
    assert masked["nodes"] > plain["nodes"]
