"""Registry of built-in models. Importing it does not import torch.

A model reference in a matrix is `name` or `name:option=value,option=value`,
for example `gpt:layers=2,seq_len=64`; options are validated against the
model's declared defaults and become part of the cell key.
"""
from __future__ import annotations

import importlib
import importlib.util

from collector.models.base import Built, ModelSpec

_MODULES = ("mlp", "gpt", "moe", "gnn", "resnet18", "resnet50", "vit_b16")


class UnknownModel(ValueError):
    pass


def names() -> tuple[str, ...]:
    """All built-in model names, in a stable order."""
    return _MODULES


def spec(name: str) -> ModelSpec:
    """The ModelSpec of a built-in model; raises UnknownModel listing the valid names."""
    if name not in _MODULES:
        import difflib

        close = difflib.get_close_matches(name, _MODULES, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownModel(f"unknown model {name!r}{hint}; valid models: {', '.join(_MODULES)}")
    return importlib.import_module(f"collector.models.{name}").SPEC


def parse_ref(ref: str) -> tuple[str, dict]:
    """Split `name:k=v,...` into the name and its full option dict (defaults filled in).

    Raises UnknownModel (a ValueError) naming the bad part and the valid choices.
    """
    name, _, rest = ref.partition(":")
    model = spec(name.strip())
    opts = dict(model.options)
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, raw = item.partition("=")
        if not eq or key not in opts:
            valid = ", ".join(f"{k}={v}" for k, v in model.options.items()) or "(none)"
            raise UnknownModel(f"model {name!r}: bad option {item!r}; valid options (defaults): {valid}")
        default = model.options[key]
        try:
            value = type(default)(raw)
        except ValueError:
            raise UnknownModel(f"model {name!r}: option {key} needs a {type(default).__name__}, got {raw!r}")
        if isinstance(value, (int, float)) and value <= 0:
            raise UnknownModel(f"model {name!r}: option {key} must be positive, got {raw!r}")
        opts[key] = value
    return model.name, opts


def canonical_ref(name: str, opts: dict) -> str:
    """The stable string for a model with options: only non-default options, sorted."""
    defaults = spec(name).options
    changed = [f"{k}={opts[k]}" for k in sorted(opts) if opts[k] != defaults[k]]
    return name + (":" + ",".join(changed) if changed else "")


def missing_requirements(name: str) -> list[str]:
    """Modules the model needs that cannot be imported here."""
    return [m for m in spec(name).requires if importlib.util.find_spec(m) is None]


__all__ = ["Built", "ModelSpec", "UnknownModel", "names", "spec", "parse_ref", "canonical_ref",
           "missing_requirements"]
