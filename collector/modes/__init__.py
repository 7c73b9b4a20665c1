"""Registry of compile modes, one small file each (like collector/models/). No torch here.

Adding a mode: a file with a ModeSpec named SPEC, and its module name in _MODULES. The matrix,
the cell, the runner and the report read what they need from the spec (whether it compiles,
replays CUDA graphs, is inference-only), so nothing else changes.

The lowest floor. May import: the standard library only (collector.record reads the labels from here).
"""
from __future__ import annotations

import importlib

from collector.modes.base import ModeSpec

# matrix order: the baseline first, then by how much each mode does
_MODULES = ("eager", "default", "reduce_overhead", "max_autotune", "max_autotune_no_cudagraphs", "aot_inductor")


def all_specs() -> tuple[ModeSpec, ...]:
    return tuple(importlib.import_module(f"collector.modes.{m}").SPEC for m in _MODULES)


def names() -> tuple[str, ...]:
    return tuple(s.name for s in all_specs())


def spec(name: str) -> ModeSpec:
    """The spec of mode `name`; ValueError naming the valid modes."""
    for s in all_specs():
        if s.name == name:
            return s
    raise ValueError(f"unknown mode {name!r}; valid modes: {', '.join(names())}")
