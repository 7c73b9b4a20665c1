"""Find runs, check their Parquet files against the contract, load them into DuckDB.

Bad files (truncated, corrupt, unknown schema version, missing or extra columns)
are reported by name and left out; `strict=True` turns them into an error.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from collector.compact import COMPACT, fingerprint, read_index
from collector.schema import COLUMNS, SCHEMA_VERSION, columns_of

KNOWN_VERSIONS = tuple(range(1, SCHEMA_VERSION + 1))
_STRUCTURAL = {"schema", "duckdb_schema", "list", "element", "item", "array"}
SQL_DIR = Path(__file__).parent / "sql"


class DataError(ValueError):
    """Input data that cannot be reported; the message names the file."""


@dataclass(frozen=True)
class Run:
    """One run directory: its id, folder and manifest (run.json)."""

    run_id: str
    path: Path
    manifest: dict

    @property
    def env(self) -> dict:
        return self.manifest.get("environment", {})

    @property
    def files(self) -> list[Path]:
        return sorted((self.path / "cells").glob("*.parquet"))


@dataclass
class Loaded:
    """A DuckDB connection holding table `cells_raw` (good rows only, as stored), view `cells` (the
    same rows brought up to the current schema) and the files left out."""

    con: duckdb.DuckDBPyConnection
    runs: list[Run]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)


def sql(name: str) -> str:
    """Text of analysis/sql/<name>.sql."""
    return (SQL_DIR / f"{name}.sql").read_text()


def discover_runs(root: Path) -> list[Run]:
    """Every folder under `root` (or `root` itself) that holds a run.json, sorted by path."""
    root = Path(root)
    manifests = [root / "run.json"] if (root / "run.json").exists() else sorted(root.glob("**/run.json"))
    runs = []
    for m in manifests:
        try:
            manifest = json.loads(m.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DataError(f"{m}: unreadable run manifest: {exc}") from None
        runs.append(Run(str(manifest.get("run_id", m.parent.name)), m.parent, manifest))
    return runs


def check_unique(runs: list[Run]) -> None:
    """Two folders with one run id would mix their cells: refuse, naming both."""
    seen: dict[str, Path] = {}
    for r in runs:
        if r.run_id in seen:
            raise DataError(f"run id {r.run_id!r} is in two folders, {seen[r.run_id]} and {r.path}; "
                            "move or rename one (run ids must be unique across --data folders)")
        seen[r.run_id] = r.path


def _file_columns(con, files: list[str]) -> tuple[dict[str, set], list[tuple[str, str]]]:
    """Column names per file from the Parquet footers; corrupt files found one by one."""
    try:
        rows = con.execute("SELECT file_name, name FROM parquet_schema(?)", [files]).fetchall()
        bad = []
    except duckdb.Error:
        rows, bad = [], []
        for f in files:
            try:
                rows += con.execute("SELECT file_name, name FROM parquet_schema(?)", [[f]]).fetchall()
            except duckdb.Error as exc:
                bad.append((f, f"unreadable Parquet ({str(exc).splitlines()[0][:200]})"))
    cols: dict[str, set] = {}
    for f, name in rows:
        cols.setdefault(f, set()).add(name)
    return cols, bad


def _validate(con, files: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Split files into (good, skipped with reasons): readable, this schema's columns and version."""
    if not files:
        return [], []
    cols, skipped = _file_columns(con, files)
    good = []
    oldest = columns_of(1)  # every version has these; later versions only add columns
    for f in files:
        if f not in cols:
            continue
        # parquet_schema also lists the root ("schema"/"duckdb_schema") and list children
        missing, extra = oldest - cols[f], cols[f] - set(COLUMNS) - _STRUCTURAL
        if "schema_version" not in cols[f]:
            skipped.append((f, "no schema_version column: not a cell file of this project"))
        elif missing or extra:
            parts = ([f"missing column(s) {', '.join(sorted(missing))}"] if missing else []) + \
                    ([f"unexpected column(s) {', '.join(sorted(extra))}"] if extra else [])
            skipped.append((f, "; ".join(parts)))
        else:
            good.append(f)
    if good:
        versions = con.execute("SELECT DISTINCT filename, schema_version FROM read_parquet(?, filename=true, "
                               "union_by_name=true)", [good]).fetchall()
        bad = {}
        for f, v in versions:
            if v not in KNOWN_VERSIONS:
                bad[f] = f"schema version {v} is not known (this report reads {KNOWN_VERSIONS})"
            elif columns_of(v) - cols[f]:
                bad[f] = f"missing column(s) {', '.join(sorted(columns_of(v) - cols[f]))} (schema version {v})"
        skipped += sorted(bad.items())
        good = [f for f in good if f not in bad]
    return good, skipped


def load(runs: list[Run], strict: bool = False) -> Loaded:
    """Validate every cell of `runs` and load the good ones into table `cells`.

    A run's compact.parquet (written by the collector at the end of each session) stands in
    for the cell files it holds unchanged; new or changed cell files are read one by one.
    """
    check_unique(runs)
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    loose: list[str] = []
    compacts: list[tuple[str, list[str], str]] = []  # (compact file, cell ids it stands for, run dir)
    for run in runs:
        index = read_index(run.path)
        covered = []
        for f in run.files:
            if f.name in index and index[f.name] == fingerprint(f):
                covered.append(f.stem)
            else:
                loose.append(str(f))
        if covered:
            compacts.append((str(run.path / COMPACT), covered, str(run.path)))
    good_compacts, _ = _validate(con, [c[0] for c in compacts])
    for path, ids, run_dir in compacts:
        if path not in good_compacts:  # a bad compact file only means the slower path: its cell files
            loose += [str(Path(run_dir) / "cells" / f"{i}.parquet") for i in ids]
    good, skipped = _validate(con, loose)
    if skipped and strict:
        raise DataError("bad input files:\n" + "\n".join(f"  {f}: {why}" for f, why in skipped))
    con.execute("CREATE TABLE cells_raw AS SELECT *, '' AS filename FROM read_parquet(?) LIMIT 0",
                [str(_empty_file())])
    for path, ids, run_dir in compacts:
        if path in good_compacts:
            con.execute("INSERT INTO cells_raw BY NAME SELECT *, $dir || '/cells/' || cell_id || '.parquet' AS filename "
                        "FROM read_parquet($path) WHERE cell_id IN (SELECT unnest($ids))",
                        {"dir": run_dir, "path": path, "ids": ids})
    if good:
        con.execute("INSERT INTO cells_raw BY NAME SELECT * FROM read_parquet(?, filename=true, union_by_name=true)",
                    [good])
    con.execute(sql("upgrade"))  # view `cells`: every row in the current schema's terms
    return Loaded(con, runs, sorted(skipped))


def _empty_file() -> Path:
    """A zero-row Parquet file with the contract's schema (so an empty run still has a table)."""
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    from collector.schema import SCHEMA

    import hashlib

    digest = hashlib.sha1(str(SCHEMA).encode()).hexdigest()[:12]  # a changed schema gets its own file
    path = Path(tempfile.gettempdir()) / f"tcb-empty-v{SCHEMA_VERSION}-{digest}.parquet"
    if not path.exists():  # written under a private name and renamed: concurrent reports never see half a file
        import os

        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        pq.write_table(pa.Table.from_pylist([], schema=SCHEMA), tmp)
        os.replace(tmp, path)
    return path
