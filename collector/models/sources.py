"""Model sources beyond the built-in files: any timm model, any Hugging Face transformers model class,
any torchvision model, and the user's own build function. Importing this module does not import torch (nor timm,
transformers or the user's code): a reference is parsed here, built in the cell process.

References (the full reference is the cell's model key, so it names the cell in every run):
- `timm:<name>[:k=v,...]`: timm.create_model(name, pretrained=False), random weights, the model's
  default input size; options `image_size` and `classes`, any other option goes to create_model.
- `hf:<ModelClass>[:k=v,...]`: transformers.<ModelClass>(<its config class>()), random weights, no
  download, no tokenizer; options `seq_len` (tokens; default 512 or the model's limit), `image_size`
  and `attention_mask` (none, the default, as PyTorch's harness; ones; padded), any other option
  overrides a field of the config (hf:BertForMaskedLM:num_hidden_layers=2); `hf:<name>` for a name of
  PyTorch's list or a hub id builds from the published config shipped in hf_configs.py.
- `tv:<name>[:k=v,...]`: torchvision.models.get_model(name, weights=None), inputs and losses as
  torchvision's references build them (tv_source.py); options `image_size`, `frames`, the rest to get_model.
- `<module.path>:<function>[:k=v,...]` or `<path/to/file.py>:<function>[:k=v,...]`: the user's
  `function(batch_size, **options)` returning a collector.models.Built (docs/models.md).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

from collector.record import contract
from collector.models.base import ModelSkipped, ModelSpec

PREFIXES = contract.SOURCE_PREFIXES
PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BATCH = {"timm": 32, "hf": 8, "tv": 32, "user": 8}


class SourceError(ValueError):
    """A reference that cannot name a model; the message names the problem and the valid form."""


class ModelBuildError(RuntimeError):
    """Building the model failed (in the user's function, timm or transformers): status build_error."""


def kind_of(ref: str) -> str | None:
    """'timm', 'hf', 'user' or None (a built-in model) for a model reference (collector.record.contract,
    which the analysis shares to tell a row's suite)."""
    return contract.model_source(ref)


def _value(raw: str):
    """An option's value: an integer, a float, true/false, else the text itself."""
    low = raw.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw.strip()


def _options(ref: str, text: str) -> dict:
    opts = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, eq, raw = item.partition("=")
        if not eq or not key.strip().isidentifier():
            raise SourceError(f"model {ref!r}: bad option {item!r}; options are key=value, comma-separated")
        if key.strip().startswith("_"):
            raise SourceError(f"model {ref!r}: option {key.strip()!r} names no setting (an option name does not start "
                              "with '_'); options are the source's own or fields of the model's config")
        opts[key.strip()] = _value(raw)
    return opts


def parse(ref: str) -> tuple[str, dict]:
    """`timm:resnet50:image_size=160` -> ('timm:resnet50', {'image_size': 160}); SourceError names the
    problem. A user file's path is kept as written where it is relative to the project root (so a
    cell's key is the same on every machine); a file found only from the working directory is named by
    its absolute path (cell processes run from the project root)."""
    kind = kind_of(ref)
    if kind in PREFIXES:
        _, _, body = ref.partition(":")
        name, _, text = body.partition(":")
        if not name.strip():
            example = {"timm": "timm:resnet50", "tv": "tv:resnet50"}.get(kind, "hf:BertForMaskedLM")
            raise SourceError(f"model {ref!r}: no {kind} model named; write {kind}:<name>, e.g. {example}")
        return f"{kind}:{name.strip()}", _options(ref, text)
    target, _, rest = ref.partition(":")
    func, _, text = rest.partition(":")
    if not func.isidentifier():
        raise SourceError(f"model {ref!r}: a user model is <module.path>:<function> or <file.py>:<function>, "
                          f"with the function's name after the colon (got {func!r})")
    if target.endswith(".py"):
        found = _locate(target)
        if found is None:
            raise SourceError(f"model {ref!r}: no file {target!r} (looked in {PROJECT_ROOT} and {Path.cwd()})")
        if not Path(target).is_absolute() and not (PROJECT_ROOT / target).is_file():
            target = str(found.resolve())  # outside the project: cell processes run from the project root
    return f"{target}:{func}", _options(ref, text)


def canonical(name: str, opts: dict) -> str:
    """The stable string of a sourced model with options: every option given, sorted."""
    return name + (":" + ",".join(f"{k}={opts[k]}" for k in sorted(opts)) if opts else "")


def spec(name: str) -> ModelSpec:
    """A ModelSpec for a sourced model (name as parse returns it); options are free-form."""
    kind = kind_of(name)
    requires = {"timm": ("timm",), "hf": ("transformers",), "tv": ("torchvision",)}.get(kind, ())
    summary = {"timm": "timm model, random weights", "hf": "Hugging Face transformers model, random weights",
               "tv": "torchvision model, random weights",
               "user": "the user's build function"}[kind]

    def build(batch_size: int, opts: dict):
        return build_model(name, batch_size, opts)
    return ModelSpec(name, summary, build, {}, (DEFAULT_BATCH[kind],), requires=requires)


def _locate(target: str) -> Path | None:
    """The file a user reference names: absolute, or relative to the project root (where cell processes
    run), else to the working directory."""
    path = Path(target)
    for found in ((path,) if path.is_absolute() else (PROJECT_ROOT / path, Path.cwd() / path)):
        if found.is_file():
            return found
    return None


def load_user_function(name: str):
    """The user's function named by `module.path:function` or `file.py:function` (imports it)."""
    target, _, func = name.rpartition(":")
    if target.endswith(".py"):
        path = _locate(target)
        if path is None:
            raise ModelBuildError(f"{name}: no file {target!r}")
        mod_spec = importlib.util.spec_from_file_location(f"tcb_user_{path.stem}", path)
        module = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    if not hasattr(module, func):
        import difflib

        funcs = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")]
        close = difflib.get_close_matches(func, funcs, n=3, cutoff=0.5)
        raise LookupError(f"{target} has no function {func!r}" + (f"; closest: {', '.join(close)}" if close else
                          f"; its functions: {', '.join(funcs[:12]) or '(none)'}"))
    return getattr(module, func)


def build_model(name: str, batch_size: int, opts: dict):
    """Build a sourced model; any failure is a ModelBuildError naming the model (status build_error)."""
    from collector.models.base import Built

    kind = kind_of(name)
    try:
        if kind == "timm":
            from collector.models.timm_source import build
            built = build(name.partition(":")[2], batch_size, opts)
        elif kind == "hf":
            from collector.models.hf_source import build
            built = build(name.partition(":")[2], batch_size, opts)
        elif kind == "tv":
            from collector.models.tv_source import build
            built = build(name.partition(":")[2], batch_size, opts)
        else:
            built = load_user_function(name)(batch_size, **opts)
    except ModelSkipped:
        raise
    except Exception as exc:  # its text is kept: out of memory still reads as such (status oom)
        who = f"the user function {name}" if kind == "user" else name
        raise ModelBuildError(f"building {who} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(built, Built):
        raise ModelBuildError(f"{name} returned {type(built).__name__}, not collector.models.Built(module, inputs, "
                              "target, loss) (docs/models.md)")
    return built
