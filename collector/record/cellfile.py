"""The one reader of saved cell rows and the one rule for when one stands for its cell, used on
every side: the collector's resume (collector/host/store.py), merge (collector/commands/shard.py)
and the report (analysis/data/load.py). A file the report would leave out is one the collector
measures again, with the same words.

A file is judged from its Parquet footer alone: its columns and their types, its row count, and
the column statistics of schema_version, cell_id and status (the three columns themselves are
read only where a writer kept no statistics). That takes about 1 ms a file, so the report
judges loose cell files this way too before DuckDB reads the good ones together.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from collector.record.schema import (COLUMNS, SCHEMA_VERSION, STAT_COLUMNS, arrow_schema, columns_of, file_kind,
                                     regular)

KEYS = STAT_COLUMNS  # what is read of a file's values: the writer keeps their statistics


@dataclass(frozen=True)
class Saved:
    """A saved cell file (or a run's compact.parquet) as judged: `why` it cannot stand for its
    cell(s) (None: it can), its rows, and for a one-row file the cell and status it holds."""

    path: Path
    why: str | None = None
    rows: int = 0
    cell_id: str | None = None
    status: str | None = None

    @property
    def ok(self) -> bool:
        return self.why is None


def breaches(file_schema: pa.Schema) -> str | None:
    """Why a file's columns break the contract: no schema_version column, a column of the oldest
    schema missing, a column the contract does not have, a column stored as another type."""
    ref = {f.name: f.type for f in arrow_schema()}
    names = set(file_schema.names)
    if "schema_version" not in names:
        return "no schema_version column: not a cell file of this project"
    missing, extra = columns_of(1) - names, names - set(COLUMNS)
    wrong = sorted(f.name for f in file_schema if f.name in ref and not f.type.equals(ref[f.name]))
    if not (missing or extra or wrong):
        return None
    return "; ".join(([f"missing column(s) {', '.join(sorted(missing))}"] if missing else [])
                     + ([f"unexpected column(s) {', '.join(sorted(extra))}"] if extra else [])
                     + [f"column {c} stored as {file_schema.field(c).type}, not {ref[c]}" for c in wrong[:3]]
                     + ([f"and {len(wrong) - 3} more column(s) of the wrong type"] if len(wrong) > 3 else []))


def _span(meta: pq.FileMetaData, index: int):
    """(min, max) of column `index` over the file's row groups from the footer's statistics, or
    None where any row group lacks them."""
    lo = hi = None
    for g in range(meta.num_row_groups):
        st = meta.row_group(g).column(index).statistics
        if st is None or not st.has_min_max:
            return None
        lo = st.min if lo is None else min(lo, st.min)
        hi = st.max if hi is None else max(hi, st.max)
    return lo, hi


def _values(path: Path, meta: pq.FileMetaData, names: list[str]) -> dict[str, tuple]:
    """(min, max) of schema_version, cell_id and status: from the statistics, else read."""
    spans = {k: _span(meta, names.index(k)) for k in KEYS}
    if any(v is None for v in spans.values()):
        table = pq.read_table(path, columns=list(KEYS))
        for k in KEYS:
            values = [v for v in table.column(k).to_pylist() if v is not None]
            spans[k] = (min(values), max(values)) if values else (None, None)
    return spans


def inspect(path: Path, cell_file: bool = True) -> Saved:
    """Judge a saved file. `cell_file`: one cell's `<cell id>.parquet` (exactly one row, holding
    that cell); otherwise a run's compact.parquet (any rows). Never raises: a failure to read is
    the answer."""
    path = Path(path)
    if not regular(path):  # a FIFO would block the read; a folder is no row
        return Saved(path, f"not a regular file ({file_kind(path)})")
    try:
        meta = pq.read_metadata(path)
        file_schema = meta.schema.to_arrow_schema()
        why = breaches(file_schema)
        if why:
            return Saved(path, why, meta.num_rows)
        if cell_file and meta.num_rows != 1:
            return Saved(path, "no rows (an empty cell file)" if meta.num_rows == 0
                         else f"{meta.num_rows} rows; a cell file holds one cell (one row)", meta.num_rows)
        spans = _values(path, meta, file_schema.names) if meta.num_rows else {k: (None, None) for k in KEYS}
    except Exception as exc:  # noqa: BLE001 - any failure to read is the answer
        first = (str(exc).splitlines() or [""])[0]
        return Saved(path, f"unreadable Parquet ({type(exc).__name__}: {first[:160]})")
    return _judged(path, meta.num_rows, set(file_schema.names), spans, cell_file)


def _judged(path: Path, rows: int, names: set[str], spans: dict[str, tuple], cell_file: bool) -> Saved:
    """The checks on the values: known schema versions, the columns each version holds, the cell."""
    low, high = spans["schema_version"]
    if rows and (low is None or low < 1 or high > SCHEMA_VERSION):
        shown = low if low is None or low < 1 else high
        return Saved(path, f"schema version {shown} is not known (this project reads 1 to {SCHEMA_VERSION})", rows)
    if rows and columns_of(high) - names:  # later versions only add columns: the newest decides
        missing = ", ".join(sorted(columns_of(high) - names))
        return Saved(path, f"missing column(s) {missing} (schema version {high})", rows)
    if not cell_file:
        return Saved(path, None, rows)
    cell_id, status = spans["cell_id"][0], spans["status"][0]
    if cell_id != path.stem:
        return Saved(path, f"holds cell {cell_id!r}; a cell file is named <cell id>.parquet "
                           "(a copy? it would count the cell twice)", rows)
    return Saved(path, None, rows, cell_id, status)
