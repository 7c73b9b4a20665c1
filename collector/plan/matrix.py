"""The matrix: a named TOML preset plus overrides, validated into cells.

No torch here: validation must finish (and fail, with exit code 2) before any
process is started or any file is written.
"""
from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field, replace
from itertools import product
from pathlib import Path

from collector.record import contract
from collector.record.settings import SETTINGS, Protocol, Setting  # noqa: F401 (mx.SETTINGS, mx.Protocol for callers)

from collector import models, modes

PRESET_DIR = Path(__file__).parent / "presets"

PHASES = ("infer", "train")
MODES = contract.MODES  # the registry of collector/modes/, one file a mode
INFER_ONLY_MODES = tuple(m.name for m in modes.all_specs() if m.infer_only)  # e.g. aot-inductor
CUDAGRAPH_MODES = contract.CUDAGRAPH_MODES  # modes that replay CUDA graphs
DTYPES = ("float32", "bfloat16", "float16", "amp_bf16", "amp_fp16")
SCOPES = ("model", "step")
DYNAMIC = ("auto", "true", "false")  # torch.compile(dynamic=None | True | False)
DEVICES = ("auto", "cuda", "cpu")
AXES = ("models", "phases", "modes", "dtypes", "batch_sizes", "compile_scopes", "dynamic")
OPTIONAL_AXES = ("batch_sizes", "dynamic")  # default: each model's batch size; dynamic "auto"
# protocol key -> (type, minimum, maximum), for validation
PROTOCOL = {s.name: (s.kind, s.lo, s.hi) for s in SETTINGS}
TOP_KEYS = ("description", "device", "include", "combine") + AXES + tuple(PROTOCOL)
MAX_BATCH = 1 << 16


class MatrixError(ValueError):
    """A matrix that cannot be run; the message names the problem and the valid choices."""


@dataclass(frozen=True, order=True)
class Cell:
    """One point of the matrix: what is measured. `model` is the canonical model reference."""

    model: str
    phase: str
    dtype: str
    batch_size: int
    mode: str
    compile_scope: str
    dynamic: str = "auto"

    @property
    def cell_id(self) -> str:
        """File-name-safe identity, stable across runs (used to resume and to pair runs); cells with
        the default dynamic-shape behaviour keep the id they had before that axis existed."""
        return contract.cell_id_of(self.model, self.phase, self.dtype, self.batch_size, self.mode,
                                   self.compile_scope, self.dynamic)

    def label(self) -> str:
        dyn = "" if self.dynamic == "auto" else f" dynamic={self.dynamic}"
        return f"{self.model} {self.phase} {self.dtype} bs={self.batch_size} {self.mode}{dyn} ({self.compile_scope})"




@dataclass(frozen=True)
class Matrix:
    """A validated matrix: its preset name, device request, protocol and cells (sorted, unique)."""

    preset: str
    description: str
    device: str
    protocol: Protocol
    cells: tuple[Cell, ...] = field(default_factory=tuple)

    def to_json(self) -> dict:
        return {"preset": self.preset, "description": self.description, "device": self.device,
                "protocol": asdict(self.protocol), "cells": [asdict(c) for c in self.cells]}

    @classmethod
    def from_json(cls, data: dict) -> "Matrix":
        """The inverse of to_json (a job on another node rebuilds the submitter's matrix)."""
        return cls(data["preset"], data["description"], data["device"], Protocol(**data["protocol"]),
                   tuple(Cell(**c) for c in data["cells"]))


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def load_preset(name_or_path: str) -> tuple[str, dict]:
    """Read a preset by name (collector/plan/presets/NAME.toml) or path; returns (name, raw table)."""
    path = Path(name_or_path)
    if not (path.suffix == ".toml" and path.exists()):
        if name_or_path not in preset_names():
            raise MatrixError(f"unknown preset {name_or_path!r}; valid presets: {', '.join(preset_names())} "
                              "(or a path to a .toml file)")
        path = PRESET_DIR / f"{name_or_path}.toml"
    if path.is_dir():
        raise MatrixError(f"{path}: is a folder, not a preset file; valid presets: {', '.join(preset_names())} "
                          "(or a path to a .toml file)")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise MatrixError(f"{path}: cannot read the preset: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark (some editors write one) is not TOML
    except UnicodeDecodeError as exc:
        raise MatrixError(f"{path}: not UTF-8 text (byte {exc.start}: {raw[exc.start:exc.start + 1]!r}); "
                          "TOML files are UTF-8, save it as UTF-8") from None
    try:
        return path.stem, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError(f"{path}: malformed TOML: {exc}") from None


def _as_list(key: str, value, where: str) -> list:
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value:
        raise MatrixError(f"{where}: {key} must be a non-empty list, got {value!r}")
    return value


def did_you_mean(value, valid) -> str:
    """' (did you mean 'reduce-overhead'?)' for a near miss, else ''."""
    import difflib

    close = difflib.get_close_matches(str(value), [str(v) for v in valid], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_choices(key: str, values: list, valid: tuple, where: str) -> None:
    for v in values:
        if v not in valid:
            raise MatrixError(f"{where}: unknown {key[:-1] if key.endswith('s') else key} {v!r}"
                              f"{did_you_mean(v, valid)}; valid {key}: {', '.join(valid)}")


def _expand(table: dict, where: str) -> list[Cell]:
    """Cells of one (sub-)matrix table that already holds every axis key it needs."""
    missing = [k for k in AXES if k not in table and k not in OPTIONAL_AXES]
    if missing:
        raise MatrixError(f"{where}: missing {', '.join(missing)}")
    axes = {k: _as_list(k, table[k], where) for k in AXES if k in table}
    _check_choices("phases", axes["phases"], PHASES, where)
    _check_choices("modes", axes["modes"], MODES, where)
    _check_choices("dtypes", axes["dtypes"], DTYPES, where)
    _check_choices("compile_scopes", axes["compile_scopes"], SCOPES, where)
    dynamics = [str(v).lower() if isinstance(v, bool) else v for v in axes.get("dynamic", ["auto"])]
    _check_choices("dynamic", dynamics, DYNAMIC, where)
    refs = []
    for ref in axes["models"]:
        if not isinstance(ref, str):
            raise MatrixError(f"{where}: model names are strings, got {ref!r}")
        try:
            name, opts = models.parse_ref(ref)
        except models.UnknownModel as exc:
            raise MatrixError(f"{where}: {exc}") from None
        refs.append((name, models.canonical_ref(name, opts)))
    for bs in axes.get("batch_sizes", []):
        if isinstance(bs, bool) or not isinstance(bs, int) or not 0 < bs <= MAX_BATCH:
            raise MatrixError(f"{where}: batch size must be an integer from 1 to {MAX_BATCH}, got {bs!r}")
    cells = []
    for (name, ref), phase, dtype, mode, scope, dynamic in product(
            refs, axes["phases"], axes["dtypes"], axes["modes"], axes["compile_scopes"], dynamics):
        sizes = axes.get("batch_sizes") or [models.spec(name).default_batch_size]
        # scope only matters when training with a compiled model: normalise the rest to "model"
        spec = modes.spec(mode)
        scope = scope if (phase == "train" and spec.compiles) else "model"
        if phase == "train" and spec.infer_only:
            continue  # no training cell for an inference-only mode (the matrix says so if it ends empty)
        # dynamic shapes are a torch.compile option: eager and the exported mode use the default
        dynamic = dynamic if spec.dynamic_axis else "auto"
        cells.extend(Cell(ref, phase, dtype, bs, mode, scope, dynamic) for bs in sizes)
    return cells


def _combined(raw: dict, overrides: dict, name: str, where: str) -> list[Cell]:
    """The cells of the presets a `combine = [...]` names, in order (a suite of suites: the protocol
    and device are this preset's own; axis overrides apply to each)."""
    cells = []
    for part in _as_list("combine", raw["combine"], where):
        if Path(str(part)).stem == name:
            raise MatrixError(f"{where}: combine names the preset itself")
        part_name, part_raw = load_preset(part)
        if "combine" in part_raw:
            raise MatrixError(f"{where}: combine names {part_name!r}, which combines presets itself")
        cells.extend(build_matrix(part, {k: v for k, v in overrides.items() if k in AXES}).cells)
    return cells


def build_matrix(preset: str = "smoke", overrides: dict | None = None) -> Matrix:
    """Validate preset + overrides into a Matrix; raises MatrixError with the valid choices.

    `overrides` may hold any axis (replacing it in the preset and in every include)
    and any protocol key or `device`.
    """
    name, raw = load_preset(preset)
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    where = f"preset {name!r}"
    for source, table in (("preset", raw), ("overrides", overrides)):
        unknown = sorted(set(table) - set(TOP_KEYS))
        if unknown:
            raise MatrixError(f"{where} ({source}): unknown key(s) {', '.join(unknown)}; "
                              f"valid keys: {', '.join(TOP_KEYS)}")
    merged = {**raw, **overrides}
    device = merged.get("device", "auto")
    if device not in DEVICES:
        raise MatrixError(f"{where}: unknown device {device!r}; valid devices: {', '.join(DEVICES)}")
    proto = {}
    for key, (typ, lo, hi) in PROTOCOL.items():
        if key not in merged:
            continue
        value = merged[key]
        if typ is bool and isinstance(value, str) and value.lower() in ("0", "1", "true", "false"):
            value = value.lower() in ("1", "true")
        if typ is int and isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if type(value) is not typ or (lo is not None and not lo <= value <= hi):
            span = "true or false" if typ is bool else f"an integer from {lo} to {hi}"
            raise MatrixError(f"{where}: {key} must be {span}, got {value!r}")
        proto[key] = value
    axis_overrides = {k: v for k, v in overrides.items() if k in AXES}
    cells = _combined(raw, overrides, name, where) if "combine" in raw else []
    base = {k: v for k, v in raw.items() if k in AXES} | axis_overrides
    if "combine" not in raw or any(k in raw for k in AXES):
        cells += _expand(base, where)
    includes = raw.get("include", [])
    if not isinstance(includes, list):
        raise MatrixError(f"{where}: include must be an array of tables ([[include]])")
    for i, inc in enumerate(includes):
        bad = sorted(set(inc) - set(AXES))
        if bad:
            raise MatrixError(f"{where}: include #{i + 1}: unknown key(s) {', '.join(bad)}; "
                              f"valid keys: {', '.join(AXES)}")
        table = {k: v for k, v in raw.items() if k in AXES} | inc | axis_overrides
        cells.extend(_expand(table, f"{where} include #{i + 1}"))
    unique = tuple(dict.fromkeys(cells))  # preset order: base matrix first, then includes
    if not unique:
        raise MatrixError(f"{where}: the matrix is empty (note: {', '.join(INFER_ONLY_MODES)} "
                          "makes inference cells only)")
    return Matrix(name, str(raw.get("description", "")), device, Protocol(**proto), unique)


def select_cells(matrix: Matrix, patterns: list[str]) -> Matrix:
    """The matrix narrowed to the cells whose id matches any of the shell-style `patterns`
    (e.g. `gpt__infer__*__bs128__*`); a pattern that matches nothing is an error naming the ids."""
    import fnmatch

    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(c.cell_id, p) for c in matrix.cells)]
    if unmatched:
        ids = [c.cell_id for c in matrix.cells]
        shown = ", ".join(ids[:12]) + (f", ... ({len(ids)} in all)" if len(ids) > 12 else "")
        raise MatrixError(f"--cells: no cell of matrix '{matrix.preset}' matches {', '.join(unmatched)}; "
                          f"its cells: {shown} (--dry-run lists them)")
    cells = tuple(c for c in matrix.cells if any(fnmatch.fnmatchcase(c.cell_id, p) for p in patterns))
    return replace(matrix, cells=cells)
