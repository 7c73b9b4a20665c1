"""Measure one cell in this fresh process (the protocol of docs/measurement.md).

    python -m collector.child.cell SPEC.json RESULT.json

SPEC holds the job (collector.plan.job.Job: the cell, the protocol and the device); RESULT
receives what this process measured, a CellResult (collector.record.result: the measured
columns of the Parquet row), including a status and error text when something fails. The
parent adds identity and writes the Parquet.
"""
from __future__ import annotations

import faulthandler
import json
import os
import sys
import time
import traceback
from pathlib import Path

from collector.child import childlog
from collector.child.childlog import Stage, _partial, log
from collector.child.cpu import cpu_seconds
# the child's parts, each in its module (accuracy, hygiene, plant, sides, stages, timing)
from collector.models import ModelBuildError
from collector.models.base import ModelSkipped
from collector.record.result import CellResult
from collector.child.sides import ExportError
from collector.child.stages import measure


PARTIAL_NAME = "partial.json"  # beside the result file: what the cell had measured at its last logged step


# How running out of memory reads, wherever it strikes: Python (MemoryError), CUDA, libtorch's
# allocator and its mmap of a shared segment, C++ (std::bad_alloc inside Dynamo or inductor), the OS.
OOM_MARKERS = ("memoryerror", "outofmemoryerror", "out of memory", "can't allocate memory",
               "cannot allocate memory", "bad_alloc", "failed to map segment", "errno 12", "enomem")


def looks_like_oom(text: str) -> bool:
    """Whether an error text (or a crashed process's log tail) is an out-of-memory failure."""
    text = text.lower()
    return any(m in text for m in OOM_MARKERS)


def classify(exc: BaseException, stage: str) -> str:
    """Map an exception to a row status: out of memory is `oom` in every stage."""
    text = f"{type(exc).__name__} {exc}"
    if isinstance(exc, ModelSkipped):
        return "skipped"
    if isinstance(exc, ExportError):
        return "export_error"
    if isinstance(exc, MemoryError) or looks_like_oom(text):
        return "oom"
    if isinstance(exc, ModelBuildError):
        return "build_error"
    if stage == "compile":
        return "compile_error"
    return "runtime_error"


def _apply_memory_limit() -> None:
    """TCB_CELL_MEMORY_LIMIT_MB (tests, shared hosts): cap this process's address space."""
    limit = memory_limit_mb()
    if limit:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit << 20, limit << 20))


def memory_limit_mb() -> int | None:
    """TCB_CELL_MEMORY_LIMIT_MB as a positive integer, None when unset; a ValueError naming the
    setting otherwise (the collector checks it before any cell runs)."""
    text = os.environ.get("TCB_CELL_MEMORY_LIMIT_MB", "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) <= 0:
        raise ValueError(f"TCB_CELL_MEMORY_LIMIT_MB={text!r}: expected a positive whole number of MiB (e.g. 4096)")
    return int(text)


def run_cell(spec: dict, partial_path: Path | None = None) -> CellResult:
    """Measure the job `spec` (a Job's JSON); never raises for a failure of the cell itself: it
    becomes a status. With `partial_path`, every logged step saves the result so far there (see `log`)."""
    result = CellResult()
    if partial_path is not None:
        _partial.update(path=partial_path, result=result)
    stage = Stage(result)
    try:
        measure(spec, result, stage)
    except (Exception, MemoryError) as exc:
        traceback.print_exc()
        tail = "".join(traceback.format_exception(exc)[-3:])
        result["status"] = classify(exc, stage.name)
        result["error"] = (str(exc)[:1500] if result["status"] == "skipped" else  # a reason, not a fault
                           f"during {stage.name}: {type(exc).__name__}: {exc}"[:1500] + "\n" + tail[-1500:])
    stage.close()
    log(f"finished: {result.get('status')}")
    return result


def main(argv: list[str]) -> None:
    childlog.T0 = time.perf_counter()  # the log's clock starts here (a forked process imported this module long before)
    spec_path, out_path = Path(argv[0]), Path(argv[1])
    faulthandler.enable()  # a crash in native code (SIGSEGV, SIGABRT) leaves the Python stack in the cell's log
    _apply_memory_limit()
    result = run_cell(json.loads(spec_path.read_text()), out_path.with_name(PARTIAL_NAME))
    _partial.clear()
    result["process_cpu_s"] = [cpu_seconds()]  # the host lists each process's (cell_measure._Jobs)
    tmp = out_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result.to_json()))
    os.replace(tmp, out_path)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown (compile-worker pools, CUDA context): it took ~10 s a process on
    # the H200 box, and the parent kills the process group anyway.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
