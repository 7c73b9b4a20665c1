"""The shape every built-in model file has: metadata at import time, torch only inside `build`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Built:
    """A model ready to measure: module, positional inputs, training target and loss.

    `loss(output, target)` returns a scalar tensor; `float_inputs` names the
    indices of `inputs` that are floating point (cast for pure-low-precision dtypes).
    """

    module: Any
    inputs: tuple
    target: Any
    loss: Callable[[Any, Any], Any]
    float_inputs: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class ModelSpec:
    """Static description of a model: options with defaults, sensible batch sizes, needs."""

    name: str
    summary: str
    build: Callable[[int, dict], Built]
    options: dict = field(default_factory=dict)
    batch_sizes: tuple[int, ...] = (32,)
    requires: tuple[str, ...] = ()  # importable modules the model needs (e.g. torchvision)

    @property
    def default_batch_size(self) -> int:
        return self.batch_sizes[0]
