"""Static shards and their merge: a matrix measured by N independent invocations (CI jobs, or
machines without a shared scheduler), as PyTorch's benchmark harness does with
`--total-partitions N --partition-id i`.

- `SHARD=k/N` (`--shard k/N`, k from 1 to N): this invocation measures only its slice of the
  matrix: the cells in cell-id order, every N-th starting at the k-th. The slice depends on the
  matrix alone, so every machine computes the same partition; the N slices are disjoint and
  cover the matrix. Each shard writes its own run folder (`<run id>-shard<k>of<N>`): shards never
  share a folder or a lock (a lock across hosts on a shared filesystem cannot be relied on).
- `python -m collector.commands.shard merge --into RUN_DIR SHARD_DIR...` (`make merge`) copies the shards'
  cell files into one run folder. A cell found in two shards is a duplicate: the same bytes are
  kept once, different rows are refused, naming both files. Shards must share torch, device and
  protocol (as a resumed run must), unless `--allow-mixed`, and then run.json says so.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from collector.record import cellfile
from collector.record import comparable
from collector.host.store import RunError, check_run_id, read_run_manifest, run_lock, write_json as _write_json


class ShardError(ValueError):
    """A bad shard setting or a merge that would mix or duplicate cells; the message says which."""


def parse(text: str) -> tuple[int, int]:
    """'k/N' -> (k, N), 1 <= k <= N."""
    try:
        k, n = (int(x) for x in str(text).split("/"))
    except ValueError:
        raise ShardError(f"shard {text!r}: expected k/N, e.g. 2/4 (the 2nd of 4 shards)") from None
    if not (n >= 1 and 1 <= k <= n):
        raise ShardError(f"shard {text!r}: k must be from 1 to N (N >= 1)")
    return k, n


def select(cells: list, k: int, n: int) -> list:
    """The k-th of n disjoint slices of `cells` (objects with a cell_id): every n-th cell in
    cell-id order, starting at the k-th; round-robin spreads models and modes over the shards."""
    ordered = sorted(cells, key=lambda c: c.cell_id)
    return [c for i, c in enumerate(ordered) if i % n == k - 1]


def run_id_for(run_id: str, k: int, n: int) -> str:
    return f"{run_id}-shard{k}of{n}"


def _copy_atomic(src: Path, dst: Path) -> None:
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    try:
        shutil.copy2(src, tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)


def merge(into: Path, shards: list[Path], allow_mixed: bool = False, out=sys.stdout) -> dict:
    """Copy the cell files of `shards` (run folders) into run folder `into` under its run lock (a
    collector writing it, or another merge, refuses it). Returns counts. The target's name is a run
    id (`check_run_id`: no slashes, no '..', no newline)."""
    into, shards = Path(into), [Path(s) for s in shards]
    try:
        check_run_id(into.name)
    except ValueError as exc:
        raise ShardError(f"--into {str(into)!r}: {exc}") from None
    if any(part == ".." for part in into.parts):
        raise ShardError(f"--into {str(into)!r}: the merged run folder is named without '..' (it would be written "
                         "outside the runs folder)")
    into.mkdir(parents=True, exist_ok=True)
    try:
        with run_lock(into):
            return _merge(into, shards, allow_mixed, out)
    except RunError as exc:
        raise ShardError(f"{exc} (merge writes run.json and cell files there)") from None


def _merge(into: Path, shards: list[Path], allow_mixed: bool, out) -> dict:
    manifests = []
    for s in shards:
        try:  # the collector's own reader: a FIFO or a foreign file is refused, never read
            manifests.append(read_run_manifest(s / "run.json"))
        except (OSError, ValueError) as exc:
            raise ShardError(f"{s}: not a run folder with a readable run.json ({exc})") from None
    mixed = []
    for s, m in zip(shards[1:], manifests[1:]):  # the one rule a resumed run and a SLURM node obey too
        diff = [d.words() for d in comparable.differences(manifests[0], m, comparable.JOIN)]
        if diff and not allow_mixed:
            raise ShardError(f"{s} differs from {shards[0]}: {'; '.join(diff)}; merge shards of one "
                             "environment and protocol, or pass --allow-mixed (the run then says so)")
        mixed += [f"{s.name}: {d}" for d in diff]
    seen: dict[str, Path] = {}
    existing = into / "cells"
    if existing.is_dir():
        seen = {p.stem: p for p in existing.glob("*.parquet") if p.is_file()}
    plan, same = [], 0
    for s in shards:
        for f in sorted((s / "cells").glob("*.parquet")):
            why = cellfile.inspect(f).why
            if why:
                raise ShardError(f"{f}: {why}; fix or remove it before merging")
            if f.stem in seen:
                if seen[f.stem].read_bytes() == f.read_bytes():
                    same += 1
                    continue
                raise ShardError(f"cell {f.stem} is in two shards with different rows: {seen[f.stem]} and {f}; "
                                 "keep one (a shard measured twice?)")
            seen[f.stem] = f
            plan.append(f)
    existing.mkdir(parents=True, exist_ok=True)
    for f in plan:  # under a private name, then renamed: a full disk never leaves half a cell file
        _copy_atomic(f, existing / f.name)
    manifest = dict(manifests[0])
    manifest["run_id"] = into.name
    manifest["sessions"] = [dict(x, shard=s.name) for s, m in zip(shards, manifests) for x in m.get("sessions", [])]
    manifest["merged_from"] = [s.name for s in shards]
    if mixed:
        manifest["mixed"] = mixed
    _write_json(into / "run.json", manifest)
    print(f"merged {len(shards)} shard(s) into {into}: {len(plan)} cell file(s) copied, {same} duplicate(s) "
          f"with the same row kept once" + (f"; MIXED: {'; '.join(mixed)}" if mixed else ""), file=out)
    return {"copied": len(plan), "same": same, "mixed": mixed}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m collector.commands.shard", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("merge", help="copy the cells of shard run folders into one run folder")
    m.add_argument("--into", required=True, type=Path, help="the merged run folder (created if missing)")
    m.add_argument("--allow-mixed", action="store_true", help="merge shards of different environments or protocols")
    m.add_argument("shards", nargs="+", type=Path, help="shard run folders")
    args = p.parse_args(argv)
    try:
        merge(args.into, args.shards, args.allow_mixed)
    except ShardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full or read-only disk: what was copied is whole, the rest can follow
        print(f"error: cannot write the merged run: {exc.strerror or exc} ({exc.filename or args.into}); "
              "cell files already copied are complete, and the same command resumes", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
