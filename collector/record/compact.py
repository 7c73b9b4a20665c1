"""Compaction: all finished cells of a run in one Parquet file, for fast reading.

The per-cell files stay the source of truth (resume, crash safety). `compact.parquet`
records, in its schema metadata, the size and mtime of each cell file it holds; a
reader trusts a compacted row only while its cell file is unchanged, and reads any
new or changed cell file directly. Compaction is incremental: unchanged rows are
carried over, only new files are read. No torch here.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from collector.record.schema import SCHEMA, SCHEMA_VERSION, regular

COMPACT = "compact.parquet"
META_KEY = b"cell_files"


def fingerprint(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def read_index(run_dir: Path) -> dict[str, list[int]]:
    """{cell file name: [size, mtime_ns]} of the files held by the compact file ({} if none)."""
    path = Path(run_dir) / COMPACT
    try:
        if not regular(path):  # a FIFO would block the read
            return {}
        meta = pq.read_schema(path).metadata or {}
        return json.loads(meta.get(META_KEY, b"{}"))
    except (OSError, ValueError, pa.ArrowException):
        return {}


def compact_run(run_dir: Path) -> int:
    """Rewrite run_dir/compact.parquet to hold every valid cell file; returns the row count."""
    run_dir = Path(run_dir)
    files = {p.name: p for p in sorted((run_dir / "cells").glob("*.parquet")) if p.is_file()}
    old_index = read_index(run_dir)
    current = {name: fingerprint(p) for name, p in files.items()}
    keep = {n for n, fp in old_index.items() if current.get(n) == fp}
    tables, index = [], {}
    if keep:
        try:
            old = pq.read_table(run_dir / COMPACT)
            if old.schema.names != SCHEMA.names:  # written by an older collector: rebuild from the cells
                raise ValueError("compact file of another schema")
            ids = pa.array([n[: -len(".parquet")] for n in sorted(keep)])
            tables.append(old.cast(SCHEMA).filter(pa.compute.is_in(old["cell_id"], value_set=ids)))
            index.update({n: current[n] for n in keep})
        except (OSError, pa.ArrowException, ValueError):
            keep = set()
    for name in sorted(set(files) - keep):
        try:
            t = pq.read_table(files[name])
            if t.schema.names != SCHEMA.names or t.column("schema_version")[0].as_py() != SCHEMA_VERSION:
                # older schema versions stay as cell files: the reader handles them one by one
                continue  # not this schema: left for the reader to report by name
            tables.append(t.cast(SCHEMA))
            index[name] = current[name]
        except (OSError, pa.ArrowException):
            continue  # unreadable: the reader reports it
    table = pa.concat_tables(tables) if tables else SCHEMA.empty_table()
    table = table.replace_schema_metadata({META_KEY: json.dumps(index, sort_keys=True).encode()})
    tmp = run_dir / f".{COMPACT}.{os.getpid()}.tmp"
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, run_dir / COMPACT)
    finally:
        tmp.unlink(missing_ok=True)
    return table.num_rows
