"""The launch configurations Inductor chose by timing candidates during a cell's cold compile.

Inductor compiles some Triton kernels with several candidate launch configurations (tile sizes, warps,
stages) and keeps the fastest by timing each once during the first call (pointwise kernels tiled in two
dimensions, reductions; every kernel under max-autotune). The winner is written beside the kernel's
source in the Inductor cache as a `<key>.best_config` JSON file, and every later process of the cell
(the replicates) reads it from that cache instead of timing again: the choice is made once a cell, so
the processes of a run share it. A near-tie can fall either way from one cold compile to the next,
and a slower choice then moves every process of the run alike, which the processes' spread cannot
show. This record makes the choice visible: read by the parent from the cell's cache folder after the
cold process (no torch needed), one row column (schema v8 `autotune_json`), compared by
collector.record.contract.autotune_differences (here for cold replicates, in analysis/explain/kernels.py between runs).
"""
from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

from collector.record.contract import autotune_differences

# the configuration's own keys; the rest of a best_config file is bookkeeping (hashes, timings)
_BOOKKEEPING = {"configs_hash", "found_by_coordesc", "time_taken_ms", "triton_cache_hash", "extra_options"}
_DEF = re.compile(r"^def (triton_\w+)\(", re.M)


def _kernel_name(best: Path, triton_cache_hash: str | None, triton_dir: Path | None) -> str | None:
    """The kernel's function name: from its compiled Triton artefacts (named after the function), else
    from the one kernel source beside the best_config file."""
    if triton_cache_hash and triton_dir is not None:
        folder = triton_dir / triton_cache_hash
        with contextlib.suppress(OSError):
            names = sorted({p.name.split(".")[0] for p in folder.iterdir()
                            if p.name.startswith("triton_") and p.suffix in (".json", ".cubin", ".hsaco", ".ttir")})
            if len(names) == 1:
                return names[0]
    defs = set()
    with contextlib.suppress(OSError):
        for src in best.parent.glob("*.py"):
            if src.is_file():
                defs.update(_DEF.findall(src.read_text(errors="replace")))
    return defs.pop() if len(defs) == 1 else None


def config_text(data: dict) -> str:
    """'XBLOCK=64 YBLOCK=32 num_warps=4 num_stages=1': the launch configuration, keys in a fixed order."""
    keys = sorted(k for k in data if k not in _BOOKKEEPING and k not in ("num_warps", "num_stages"))
    keys += [k for k in ("num_warps", "num_stages") if k in data]
    return " ".join(f"{k}={data[k]}" for k in keys)


def choices(cache_dir: Path) -> dict | None:
    """{"kernels": {name: configuration}, "count": n, "unnamed": m} for the best_config files of a cell's
    cache folder (inductor/ and triton/ under it); None when the compile timed no candidates (no file:
    eager, the CPU, a compile whose kernels each had one configuration). A kernel whose name cannot be
    told is counted in `unnamed`, never guessed; two kernels of one name (one per compiled graph) are
    told apart by a #2, #3 suffix in the order of their files' paths."""
    inductor, triton = cache_dir / "inductor", cache_dir / "triton"
    if not inductor.is_dir():
        return None
    files = sorted(p for p in inductor.rglob("*.best_config") if p.is_file())
    if not files:
        return None
    kernels: dict[str, str] = {}
    unnamed = 0
    for f in files:
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError):
            unnamed += 1
            continue
        if not isinstance(data, dict):
            unnamed += 1
            continue
        name = _kernel_name(f, data.get("triton_cache_hash"), triton if triton.is_dir() else None)
        if name is None:
            unnamed += 1
            continue
        key, n = name, 1
        while key in kernels:
            n += 1
            key = f"{name}#{n}"
        kernels[key] = config_text(data)
    return {"kernels": kernels, "count": len(files), "unnamed": unnamed}


def with_replicates(cold: str | None, draws: list[dict | None]) -> dict | None:
    """The cold process's record (JSON) with, for each replicate that compiled cold in its own cache
    (protocol cold_replicates), how many kernels it autotuned otherwise than the cold process, and
    its own choices where they differ: `replicates: [{differ, kernels: {name: configuration}}]`."""
    base = json.loads(cold) if cold else None
    if base is None and not any(draws):
        return None
    base = base or {"kernels": {}, "count": 0, "unnamed": 0}
    reps = []
    for d in draws:
        changed = {k: c for k, _, c in autotune_differences(base, d)} if d is not None else None
        reps.append({"differ": len(changed), "kernels": changed} if changed is not None else None)
    return {**base, "replicates": reps}
