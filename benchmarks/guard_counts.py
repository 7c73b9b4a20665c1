"""Count the guards a compile installed, by kind, from cell logs collected with TORCH_LOGS=guards
(`bash benchmarks/gpu_machine/versions_gpu.sh guards RUN CELLS PY...`); one column a log, gzipped logs too.

    python benchmarks/guard_counts.py data/examples/gd-torch2.11.0-cu130/logs/*.log.gz \\
        data/examples/gd-torch2.14.1-cu130/logs/*.log.gz

TorchDynamo prints each frame's guard tree as lines `[frame/compile] [__guards] ... +- KIND: ...`;
a kind's count is how many such lines name it (a guard the tree evaluates on every call of the
compiled frame, before the cache hit). Prints the kinds by their largest count, the frames seen and
each log's total, so two versions' guard trees can be put side by side.
"""
from __future__ import annotations

import argparse
import collections
import gzip
import re
import sys
from pathlib import Path

_GUARD = re.compile(r"\[(\d+/\d+)\] \[__guards\].*?\+- ([A-Z][A-Z_]+)\b")


def count(path: Path) -> tuple[collections.Counter, set[str]]:
    """(guards by kind, frames) of one log."""
    opener = gzip.open if path.suffix == ".gz" else open
    kinds: collections.Counter = collections.Counter()
    frames: set[str] = set()
    with opener(path, "rt", errors="replace") as f:
        for line in f:
            m = _GUARD.search(line)
            if m:
                frames.add(m.group(1))
                kinds[m.group(2)] += 1
    return kinds, frames


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("logs", nargs="+", type=Path)
    args = p.parse_args(argv)
    missing = [str(x) for x in args.logs if not x.is_file()]
    if missing:
        print(f"no such log: {', '.join(missing)}", file=sys.stderr)
        return 2
    counted = [count(x) for x in args.logs]
    if not any(k for k, _ in counted):
        print("no guard lines in these logs (were they collected with TORCH_LOGS=guards?)", file=sys.stderr)
        return 1
    names = [x.parent.parent.name or x.name for x in args.logs]
    width = max(12, *(len(n) for n in names))
    kinds = sorted({k for c, _ in counted for k in c}, key=lambda k: (-max(c[k] for c, _ in counted), k))
    print(f"{'guard kind':34}" + "".join(f"{n:>{width + 2}}" for n in names))
    for k in kinds:
        print(f"{k:34}" + "".join(f"{c[k]:>{width + 2}}" for c, _ in counted))
    print(f"{'all guards':34}" + "".join(f"{sum(c.values()):>{width + 2}}" for c, _ in counted))
    print(f"{'frames compiled':34}" + "".join(f"{len(fr):>{width + 2}}" for _, fr in counted))
    return 0


if __name__ == "__main__":
    sys.exit(main())
