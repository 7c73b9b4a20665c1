"""How many cells of a screen's runs the alone pass has still to measure (collector/host/alone.py `pending`):
versions_gpu.sh holds a confirmation back until it is 0, since the screen's figures for those cells are not
in yet. Prints the count on stdout, the cells on stderr.

    python3 benchmarks/gpu_machine/pending_alone.py data/runs/su-h100-torch2.11.0-cu130 data/runs/su-h100-torch2.14.1-cu130
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from collector.host.alone import pending  # noqa: E402


def main(argv: list[str]) -> int:
    missing = [a for a in argv if not (Path(a) / "cells").is_dir()]
    if not argv or missing:
        print(f"not a run folder (no cells/): {', '.join(missing) or '(none given)'}", file=sys.stderr)
        return 2
    cells = pending(argv)
    print(len(cells))
    for c in cells:
        print(f"  {c}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
