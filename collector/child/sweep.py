"""The recompile sweep (protocol `recompile_sweep`): the compiled step called at other batch sizes in
the cold process, after timing."""
from __future__ import annotations

import time

from collector import models
from collector.child import diagnostics
from collector.child.childlog import log

SWEEP_FACTORS = (2, 4, 0.5)  # batch sizes tried after the timed one, in this order


def _recompile_sweep(torch, job, dev, inputs, float_inputs, compiled_step, clock, result) -> None:
    """In this process, after timing: call the compiled step at other batch sizes (x2, x4, /2) and
    record each first call's time and how many recompiles the sweep cost (inference cells).
    What it shows depends on `dynamic`: false recompiles for every size; true should not; the
    default (auto) recompiles once, then marks the batch dimension dynamic."""
    cell = job.cell
    name, opts = models.parse_ref(cell.model)
    sizes = []
    for factor in SWEEP_FACTORS:
        bs = max(1, int(cell.batch_size * factor))
        if bs != cell.batch_size and bs not in sizes:
            sizes.append(bs)
    original = list(inputs)
    before = diagnostics.snapshot(torch)
    times = []
    try:
        for bs in sizes:
            built = models.build(name, bs, opts)
            new = [x.to(dev) for x in built.inputs]
            if cell.dtype in ("bfloat16", "float16"):
                low = getattr(torch, cell.dtype)
                new = [x.to(low) if i in float_inputs else x for i, x in enumerate(new)]
            inputs[:] = new  # the steps read this list
            clock.sync()
            t0 = time.perf_counter()
            compiled_step()
            clock.sync()
            times.append(time.perf_counter() - t0)
    finally:
        inputs[:] = original
    found = diagnostics.since(torch, before)
    result.update(sweep_batch_sizes=[float(b) for b in sizes], sweep_first_call_s=times,
                  sweep_recompile_count=found.get("recompile_count"),
                  sweep_graph_count=found.get("graph_count"))
    log(f"recompile sweep over batch sizes {sizes}: first calls {[round(t, 3) for t in times]} s, "
        f"recompiles {found.get('recompile_count')}")
