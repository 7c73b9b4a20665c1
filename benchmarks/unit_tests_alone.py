"""Whether the tests that are not marked `evidence` own their data: copies the repository's files
without data/examples and docs/examples into a temporary folder (beside this checkout's .venv) and
runs `pytest -m "not evidence and ..."` there (docs/layout.md).

    python benchmarks/unit_tests_alone.py [--also-compile]

Leaves out the real-SLURM and browser tests (they need a cluster and Chromium, not the examples),
and the Inductor compiles unless --also-compile. Exits with pytest's status.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVIDENCE = ("data/examples/", "docs/examples/")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--also-compile", action="store_true", help="run the Inductor compile tests too")
    args = ap.parse_args()
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    with tempfile.TemporaryDirectory(prefix="tcb-unit-") as tmp:
        copy = Path(tmp)
        kept = [f for f in listed if not f.startswith(EVIDENCE) and (ROOT / f).is_file()]
        for f in kept:
            (copy / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, copy / f)
        (copy / ".venv").symlink_to(ROOT / ".venv")
        print(f"{len(kept)} files copied to {copy}, {len(listed) - len(kept)} under data/examples and docs/examples left out",
              flush=True)
        marks = "not evidence and not slurm and not browser" + ("" if args.also_compile else " and not compile")
        return subprocess.run([str(copy / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-m", marks, "tests"], cwd=copy).returncode


if __name__ == "__main__":
    sys.exit(main())
