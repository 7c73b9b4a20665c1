"""Registry of models. Importing it does not import torch.

A model reference in a matrix is a built-in `name` or `name:option=value,option=value`,
for example `gpt:layers=2,seq_len=64` (options validated against the model's declared
defaults), or a sourced model (collector/models/sources.py): `timm:<name>`, `hf:<ModelClass>`,
`tv:<name>` (torchvision), or the user's `<module.path>:<function>` / `<file.py>:<function>`, each with free-form
`:k=v,...` options. The canonical reference, options included, is part of the cell key.

May import: collector.record (a sourced model's cell-key rules) and collector.modes; torch only inside a
model's build, never at import.
"""
from __future__ import annotations

import importlib
import importlib.util

from collector.models import sources
from collector.models.base import Built, ModelSpec
from collector.models.sources import ModelBuildError

_MODULES = ("mlp", "gpt", "moe", "gnn", "resnet18", "resnet50", "vit_b16")


class UnknownModel(ValueError):
    pass


def names() -> tuple[str, ...]:
    """All built-in model names, in a stable order."""
    return _MODULES


def spec(name: str) -> ModelSpec:
    """The ModelSpec of a model (as parse_ref names it); raises UnknownModel listing the valid names."""
    if sources.kind_of(name):
        return sources.spec(name)
    if name not in _MODULES:
        import difflib

        close = difflib.get_close_matches(name, _MODULES, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownModel(f"unknown model {name!r}{hint}; valid models: {', '.join(_MODULES)}, "
                           "or timm:<name>, hf:<ModelClass>, tv:<name>, <module.path>:<function>, <file.py>:<function>")
    return importlib.import_module(f"collector.models.{name}").SPEC


def parse_ref(ref: str) -> tuple[str, dict]:
    """Split `name:k=v,...` into the name and its full option dict (defaults filled in).

    Raises UnknownModel (a ValueError) naming the bad part and the valid choices.
    """
    if sources.kind_of(ref):
        try:
            return sources.parse(ref)
        except sources.SourceError as exc:
            raise UnknownModel(str(exc)) from None
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
    """The stable string for a model with options: only non-default options, sorted (a sourced
    model: every option given, sorted)."""
    if sources.kind_of(name):
        return sources.canonical(name, opts)
    defaults = spec(name).options
    changed = [f"{k}={opts[k]}" for k in sorted(opts) if opts[k] != defaults[k]]
    return name + (":" + ",".join(changed) if changed else "")


def build(name: str, batch_size: int, opts: dict) -> Built:
    """Build the model (in the cell process); ModelBuildError (status build_error) names the model
    when its builder fails."""
    if sources.kind_of(name):
        return sources.build_model(name, batch_size, opts)
    try:
        return spec(name).build(batch_size, opts)
    except Exception as exc:  # its text is kept: an out-of-memory failure still reads as one (status oom)
        raise ModelBuildError(f"building {name} failed: {type(exc).__name__}: {exc}") from exc


def missing_requirements(name: str) -> list[str]:
    """Modules the model needs that cannot be imported here. A sourced model's package is imported
    to tell (in the cell process): timm installed beside a torch without torchvision fails to import."""
    missing = []
    for m in spec(name).requires:
        if importlib.util.find_spec(m) is None:
            missing.append(m)
        elif sources.kind_of(name):
            try:
                importlib.import_module(m)
            except ImportError as exc:
                missing.append(f"{m} (its import fails: {exc})")
    return missing


__all__ = ["Built", "ModelSpec", "ModelBuildError", "UnknownModel", "build", "names", "spec", "parse_ref", "canonical_ref",
           "missing_requirements"]
