"""Group the pieces of one or more torch stacks (benchmarks/gpu_machine/torch-stack download) for the GPU machine.

    python benchmarks/gpu_machine/carry_groups.py 2.12.1 2.14.1       # .whl/torch-2.12.1, .whl/torch-2.14.1 -> .carry/g00 ...

Each device call carries the working tree plus what `carry` names, at most 64 MiB in all, so the pieces
travel a group a call: `.carry/gNN/` holds hard links to pieces whose sizes add up to at most --limit
(default 60 MiB). A piece two versions share (same wheel name: NCCL and cuDNN) travels once. The last
group holds each version's manifest as MANIFEST-<version>; `bash benchmarks/gpu_machine/versions_gpu.sh install
VERSION...` there gathers the groups and installs each version from its manifest. Prints one group a line:
the carry argument of one call, in order. Move data/ and docs/ out of the tree before sending (they
would travel with every call) and back afterwards.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path


def plan(versions: list[str], whl: Path, limit: int) -> tuple[list[list[Path]], list[tuple[str, Path]]]:
    """(groups of piece paths, [(version, its MANIFEST)]). Raises SystemExit naming what is missing."""
    pieces: dict[str, Path] = {}
    manifests = []
    for v in versions:
        d = whl / f"torch-{v}"
        manifest = d / "MANIFEST"
        if not manifest.is_file():
            sys.exit(f"no {manifest}: run `bash benchmarks/gpu_machine/torch-stack download {v}` first")
        manifests.append((v, manifest))
        for line in manifest.read_text().split("\n"):
            if not line.strip():
                continue
            name = line.split()[1]
            found = sorted(d.glob(f"{name}.part*"))
            if not found:
                sys.exit(f"{d} has no pieces of {name}: download {v} again")
            for p in found:
                pieces.setdefault(p.name, p)
    groups: list[list[Path]] = []
    # biggest first into the first group that has room (pieces are mostly the full size)
    for p in sorted(pieces.values(), key=lambda p: (-p.stat().st_size, p.name)):
        s = p.stat().st_size
        if s > limit:
            sys.exit(f"{p} is {s} bytes, more than the {limit}-byte limit of one call")
        for g in groups:
            if sum(q.stat().st_size for q in g) + s <= limit:
                g.append(p)
                break
        else:
            groups.append([p])
    return groups, manifests


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("versions", nargs="+")
    ap.add_argument("--whl", default=".whl", type=Path)
    ap.add_argument("--out", default=".carry", type=Path)
    ap.add_argument("--limit", default=60 * 2**20, type=int, help="bytes of pieces a group (default 60 MiB)")
    args = ap.parse_args(argv)
    groups, manifests = plan(args.versions, args.whl, args.limit)
    shutil.rmtree(args.out, ignore_errors=True)
    names = []
    for i, g in enumerate(groups):
        d = args.out / f"g{i:02d}"
        d.mkdir(parents=True)
        for p in g:
            os.link(p, d / p.name)
        names.append(d)
    for v, m in manifests:  # small: with the last group
        shutil.copy(m, names[-1] / f"MANIFEST-{v}")
    total = sum(p.stat().st_size for g in groups for p in g)
    print(f"# {len(groups)} groups, {total / 2**20:.0f} MiB of pieces for torch {' '.join(args.versions)}",
          file=sys.stderr)
    for d in names:
        print(d)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
