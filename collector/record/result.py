"""What one process of a cell measured, as a typed record: `CellResult`.

The cell process (collector/child/) fills one as it measures and writes it as JSON; the host
(collector/host/cell_measure.py) reads each process's back into one, joins a cell's processes
and adds the cell's identity and where it ran to make the row (collector/record/schema.py).
Its fields are the row's columns less those the host adds (IDENTITY), each typed as its column
(int, float, str, bool, or a list of floats with None where one is missing; None: not measured), so a name the row does not have
or a value of the wrong type is refused where it is set or read, naming it, instead of being
dropped on the way to the Parquet file.
"""
from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Iterable, Mapping

from collector.record.schema import FIELDS

# the row's columns the host sets from the cell, the run and where it ran, never a cell process
IDENTITY = ("schema_version", "run_id", "cell_id", "model", "phase", "dtype", "batch_size", "mode",
            "compile_scope", "tf32", "device", "dynamic", "device_name", "torch_version", "hostname",
            "gpu_index", "concurrent_cells", "started_at", "cell_wall_s", "blocks")


class ResultError(ValueError):
    """A result field the row does not have, or a value of the wrong type for its column."""


def _kind(arrow_name: str) -> tuple[type, str]:
    """(Python type, words) of a column's values, from Arrow's name of its type (schema.FIELDS)."""
    return {"list<double>": (list, "a list of numbers (null where missing)"), "bool": (bool, "true or false"),
            "int64": (int, "a whole number"), "double": (float, "a number"), "string": (str, "text")}[arrow_name]


KINDS = {name: _kind(t) for name, t in FIELDS if name not in IDENTITY}


def checked(name: str, value: Any) -> Any:
    """`value` as the column `name` holds it (an int as a float, a numpy scalar as Python's);
    ResultError naming both where it cannot be."""
    if name not in KINDS:
        raise ResultError(f"{name!r} is not a measured column of the row (collector/record/schema.py)")
    if value is None:
        return None
    py, words = KINDS[name]
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if py is float and real:
        return float(value)
    if py is int and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if py is bool and type(value).__name__ in ("bool", "bool_"):  # numpy's too, without importing it
        return bool(value)
    if py is str and isinstance(value, str):
        return value
    if py is list and isinstance(value, (list, tuple)) and all(
            v is None or isinstance(v, numbers.Real) and not isinstance(v, bool) for v in value):
        return [None if v is None else float(v) for v in value]
    raise ResultError(f"{name}={value!r:.80}: expected {words}")


class _Record:
    """The methods of CellResult (its fields are made from the schema below)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, checked(name, value))

    def __getitem__(self, name: str) -> Any:
        """For the fields named by a side (`f"{side}_step_ms"`); an unknown name is an error."""
        if name not in KINDS:
            raise ResultError(f"{name!r} is not a measured column of the row (collector/record/schema.py)")
        return getattr(self, name)

    def __setitem__(self, name: str, value: Any) -> None:
        setattr(self, name, value)

    def get(self, name: str, default: Any = None) -> Any:
        value = self[name]
        return default if value is None else value

    def update(self, values: Mapping[str, Any] | Iterable = (), **more: Any) -> None:
        for name, value in {**dict(values), **more}.items():
            setattr(self, name, value)

    def to_json(self) -> dict:
        """The fields that hold a value, as the JSON a cell process writes."""
        return {name: getattr(self, name) for name in KINDS if getattr(self, name) is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CellResult":
        """A result from its JSON; ResultError naming every field that is not a measured column
        or holds the wrong type."""
        if not isinstance(data, Mapping):
            raise ResultError(f"a cell result is a JSON object, not {type(data).__name__}")
        out, wrong = cls(), []
        for name, value in data.items():
            try:
                setattr(out, name, value)
            except ResultError as exc:
                wrong.append(str(exc))
        if wrong:
            raise ResultError("; ".join(wrong[:5]) + (f"; and {len(wrong) - 5} more" if len(wrong) > 5 else ""))
        return out


CellResult = dataclasses.make_dataclass(
    "CellResult",
    [(name, f"{py.__name__}{'[float]' if py is list else ''} | None", dataclasses.field(default=None))
     for name, (py, _) in KINDS.items()],
    bases=(_Record,), slots=True)
CellResult.__module__ = __name__
CellResult.__doc__ = ("What one process of a cell measured: the row's measured columns, each typed as its "
                      "column (None: not measured); see the module's docstring.")
