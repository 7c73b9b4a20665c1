"""Find runs, check their Parquet files against the contract, load them into DuckDB.

Every file is checked on its own before any union, by the record layer's one rule
(collector/record/cellfile.py: readable, this schema's columns with its types, a known version, one
row, named after its cell): a bad file is reported by name and left out, and never changes how the
other files are read; `strict=True` turns bad files into an error. A run is its folder: its id is the folder's name (reports are written
under that name, never under a name read from a file), and an unreadable run.json affects that
run only.
"""
from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from analysis.data import bad_samples
from collector.record.compact import COMPACT, fingerprint, read_index
from collector.record import manifest as manifest_record
from collector.record.contract import cell_id_of
from collector.record import cellfile
from collector.record.schema import SCHEMA_VERSION, file_kind, regular

SQL_DIR = Path(__file__).parent / "sql"
LOOSE_BATCH = 500  # cell files read by one DuckDB read_parquet (docs/performance.md)


class DataError(ValueError):
    """Input data that cannot be reported; the message names the file."""


SHOWN_RUNS = 12  # run ids an unknown-run message lists when none is close


def unknown_runs(missing: list[str], known, own=()) -> str:
    """The message for run ids not found: each one's closest known ids, or the first SHOWN_RUNS ids and how
    many more there are (a data folder can hold 160 runs: one long line helps no one). `own`: the ids of
    the user's runs (not the shipped examples), named first in both, as are ids the typed one begins."""
    import difflib

    own = set(own) & set(known)
    known = sorted(own) + sorted(set(known) - own)  # the user's runs first, then the examples
    parts = []
    for x in missing:
        close = [k for k in known if k.startswith(x)][:3]
        close += [k for k in difflib.get_close_matches(x, known, n=3, cutoff=0.6) if k not in close][:3 - len(close)]
        parts.append(f"{x} (closest: {', '.join(close)})" if close else x)
    listing = ", ".join(known[:SHOWN_RUNS]) + (f" and {len(known) - SHOWN_RUNS} more (data/examples/INDEX.md lists "
                                               "the examples)" if len(known) > SHOWN_RUNS else "")
    return f"unknown run(s) {'; '.join(parts)}; available: {listing or 'none'}"


def own_ids(runs) -> set[str]:
    """The ids of the user's runs among `runs` (Run objects): every run not in an `examples` folder."""
    return {r.run_id for r in runs if r.path.parent.name != "examples"}


@dataclass(frozen=True)
class Run:
    """One run directory: its id (the folder's name), folder, manifest (run.json) and what was
    wrong with the manifest (each problem a (file, reason) pair, shown on the run's report)."""

    run_id: str
    path: Path
    manifest: dict
    problems: tuple = ()

    @property
    def env(self) -> dict:
        return self.manifest.get("environment", {})

    @property
    def record(self) -> "manifest_record.RunManifest | None":
        """The manifest as typed fields (the protocol as a Protocol), where it is valid."""
        try:
            return manifest_record.RunManifest.from_json(self.manifest)
        except (ValueError, TypeError):
            return None

    @property
    def files(self) -> list[Path]:
        """The run's cell files: regular files only (a FIFO or device named *.parquet would block
        or mislead a reader; `irregular` names them)."""
        return [p for p in sorted((self.path / "cells").glob("*.parquet")) if regular(p)]

    @property
    def irregular(self) -> list[tuple[str, str]]:
        return [(str(p), f"not a regular file ({file_kind(p)}): left out") for p in
                sorted((self.path / "cells").glob("*.parquet")) if not regular(p)]


@dataclass
class Loaded:
    """A DuckDB connection holding table `cells_raw` (good rows only, as stored), view `cells` (the
    same rows brought up to the current schema) and the files left out."""

    con: duckdb.DuckDBPyConnection
    runs: list[Run]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)
    flagged: list[tuple[str, str]] = field(default_factory=list)  # (cell file, what was left out of it)
    cache: dict = field(default_factory=dict)  # what is computed once per run (stats.run_samples)

    def skipped_in(self, *runs: Run) -> list[tuple[str, str]]:
        """The files left out (and manifest problems) of these runs only."""
        roots = [str(r.path) + os.sep for r in runs]
        return [(f, why) for f, why in self.skipped if any((f + os.sep).startswith(x) for x in roots)]

    def flagged_in(self, *runs: Run) -> list[tuple[str, str]]:
        """The cells of these runs whose samples were partly left out (not finite positive times)."""
        roots = [str(r.path) + os.sep for r in runs]
        return [(f, why) for f, why in self.flagged if any(f.startswith(x) for x in roots)]


def sql(name: str) -> str:
    """Text of analysis/data/sql/<name>.sql."""
    return (SQL_DIR / f"{name}.sql").read_text()


def read_manifest(path: Path) -> tuple[dict, list[tuple[str, str]]]:
    """run.json as a dict and its problems, by the record layer's one reader and rule
    (collector.record.manifest): an unreadable manifest is an empty one, and a field that breaks
    run.json's schema is left out; the run's cells are still reported, and each problem names the file."""
    try:
        data, found = manifest_record.read(path)
    except manifest_record.Unreadable as exc:
        return {}, [(str(path), f"run manifest {exc}; the run is reported without its environment and sessions")]
    problems, name = [], path.parent.name
    if data.get("run_id") not in (None, name):
        problems.append((str(path), f"run manifest names run {str(data.get('run_id'))[:100]!r}; this report "
                                    f"uses the folder's name {name!r} (a run is its folder)"))
    for breach in found:  # '$.protocol.blocks: ...', '$: unexpected 'x'', '$: missing 'environment''
        head = breach.split(":", 1)[0]
        key = head[2:].split(".")[0].split("[")[0] if head.startswith("$.") else None
        if key is None and "unexpected '" in breach:
            key = breach.split("unexpected '", 1)[1].rstrip("'")
        problems.append((str(path), f"run manifest: {breach}" + (f"; field {key!r} left out" if key else "")))
        data.pop(key, None)
    return data, problems


def _manifests(root: Path) -> list[Path]:
    """Every run.json under `root`, following symlinked folders (data on another disk) once each."""
    found, seen = [], set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen:  # a symlink loop, or two links to one folder
            dirnames[:] = []
            continue
        seen.add(real)
        dirnames.sort()
        if "run.json" in filenames:
            found.append(Path(dirpath) / "run.json")
            dirnames[:] = [d for d in dirnames if d != "cells" and d != "logs"]
    return found


def discover_runs(root: Path) -> list[Run]:
    """Every folder under `root` (or `root` itself) that holds a run.json, sorted by path. The run
    id is the folder's name."""
    root = Path(root)
    if (root / "run.json").exists():
        manifests = [root / "run.json"]
    elif not root.exists():
        raise DataError(f"{root}: no such folder")
    else:
        manifests = sorted(_manifests(root))
    runs = []
    for m in manifests:
        manifest, problems = read_manifest(m)  # a FIFO is never opened; the other runs are reported
        runs.append(Run(m.parent.name, m.parent, manifest, tuple(problems)))
    return runs


def check_unique(runs: list[Run]) -> None:
    """Two folders with one run id would mix their cells: refuse, naming both."""
    seen: dict[str, Path] = {}
    for r in runs:
        if r.run_id in seen:
            raise DataError(f"run id {r.run_id!r} is in two folders, {seen[r.run_id]} and {r.path}; "
                            "move or rename one (run ids must be unique across --data folders)")
        seen[r.run_id] = r.path


def _judge(files: list[str], cell_files: bool = True) -> tuple[list[str], list[tuple[str, str]]]:
    """Split files into (good, skipped with reasons), each file judged on its own by the record
    layer's one rule (collector/record/cellfile.py), the collector's and merge's too."""
    good, skipped = [], []
    for f in files:
        saved = cellfile.inspect(Path(f), cell_file=cell_files)
        if saved.ok:
            good.append(f)
        else:
            skipped.append((f, saved.why))
    return good, skipped


def _check_cells(con, runs: list["Run"]) -> list[tuple[str, str]]:
    """After loading: two rows of one run must not share a cell key (a copy renamed
    and relabelled as another cell); rows take their run id from their folder. Returns what was
    left out or noted."""
    notes = []
    rows = con.execute("SELECT filename, cell_id, model, phase, dtype, batch_size, mode, compile_scope, dynamic "
                       "FROM cells_raw ORDER BY filename").fetchall()
    by_key: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for f, cell_id, *key in rows:  # a file named after another cell was refused by cellfile.inspect
        by_key.setdefault((str(Path(f).parent), cell_id_of(*key)), []).append((f, cell_id))
    for (_, keyed), found in by_key.items():  # one cell measured twice under two names (a relabelled copy)
        if len(found) < 2:
            continue
        keep = next(((f, c) for f, c in found if c == keyed), found[0])
        for f, cell_id in found:
            if (f, cell_id) != keep:
                notes.append((f, f"names cell {cell_id!r} but its key (model, phase, dtype, batch size, mode, scope) "
                                 f"is that of {keep[1]!r}, already counted: a relabelled copy"))
                con.execute("DELETE FROM cells_raw WHERE filename = ?", [f])
    for run in runs:
        prefix = str(run.path / "cells") + os.sep
        merged = run.manifest.get("merged_from") or []  # shards joined by collector.commands.shard: expected ids
        others = [o for o in con.execute("SELECT DISTINCT run_id FROM cells_raw WHERE starts_with(filename, $p) "
                                         "AND run_id IS DISTINCT FROM $id", {"p": prefix, "id": run.run_id}).fetchall()
                  if o[0] not in merged]
        if others or merged:
            if others:
                notes.append((str(run.path / "cells"), "rows name run(s) " + ", ".join(repr(o[0]) for o in others) +
                              f"; counted as run {run.run_id!r}, the folder's name"))
            con.execute("UPDATE cells_raw SET run_id = $id WHERE starts_with(filename, $p)",
                        {"p": prefix, "id": run.run_id})
    return notes


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
    good_compacts, _ = _judge([c[0] for c in compacts], cell_files=False)
    for path, ids, run_dir in compacts:
        if path not in good_compacts:  # a bad compact file only means the slower path: its cell files
            loose += [str(Path(run_dir) / "cells" / f"{i}.parquet") for i in ids]
    good, skipped = _judge(loose)
    con.execute("CREATE TABLE cells_raw AS SELECT *, '' AS filename FROM read_parquet(?) LIMIT 0",
                [str(_empty_file())])
    for path, ids, run_dir in compacts:
        if path in good_compacts:
            con.execute("INSERT INTO cells_raw BY NAME SELECT *, $dir || '/cells/' || cell_id || '.parquet' AS filename "
                        "FROM read_parquet($path) WHERE cell_id IN (SELECT unnest($ids))",
                        {"dir": run_dir, "path": path, "ids": ids})
    for i in range(0, len(good), LOOSE_BATCH):  # in batches: 10,000 files in one read took 10 GB
        con.execute("INSERT INTO cells_raw BY NAME SELECT * FROM read_parquet(?, filename=true, union_by_name=true)",
                    [good[i:i + LOOSE_BATCH]])
    skipped = sorted(p for run in runs for p in [*run.problems, *run.irregular]) + \
        sorted(skipped + _check_cells(con, runs))
    if skipped and strict:
        raise DataError("bad input files:\n" + "\n".join(f"  {f}: {why}" for f, why in skipped))
    flagged = bad_samples.leave_out(con)
    con.execute(sql("upgrade"))  # view `cells`: every row in the current schema's terms
    return Loaded(con, runs, skipped, flagged)


@functools.lru_cache(maxsize=1)
def _empty_file() -> Path:
    """A zero-row Parquet file with the contract's schema (so an empty run still has a table), written
    once per process into a private folder of its own (mkdtemp: mode 0700, a fresh name) and removed
    at exit: nothing another process or an earlier run left in the temporary folder is trusted."""
    import atexit
    import shutil
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    from collector.record.schema import SCHEMA

    folder = Path(tempfile.mkdtemp(prefix="tcb-report-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / f"empty-v{SCHEMA_VERSION}.parquet"
    pq.write_table(pa.Table.from_pylist([], schema=SCHEMA), path)
    return path
