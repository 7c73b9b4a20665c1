"""The shape every built-in model file has: metadata at import time, torch only inside `build`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Built:
    """A model ready to measure: module, positional inputs, training target and loss.

    `loss(output, target)` returns a scalar tensor; `float_inputs` names the
    indices of `inputs` that are floating point (cast for pure-low-precision dtypes). `settings`
    names what shaped the inputs beyond their shapes ({"seq_len": 512, "attention_mask": "padded"}):
    the row keeps it (inputs_json) beside the inputs' shapes, so a comparison can tell two runs fed
    the model alike.
    """

    module: Any
    inputs: tuple
    target: Any
    loss: Callable[[Any, Any], Any]
    float_inputs: tuple[int, ...] = (0,)
    settings: dict = field(default_factory=dict)


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


class ModelSkipped(RuntimeError):
    """A source cannot build inputs for this model (a class whose main input it does not know): status
    skipped with the reason, not a failure charged to the model."""
