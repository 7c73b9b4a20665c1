"""Render every published example under docs/examples/ again from the committed data, as
tests/test_examples_rerender.py renders it to check it (after a change that moves what a report says).

    python benchmarks/render_examples.py                 # all of them
    python benchmarks/render_examples.py compare-su-h200-torch2.11.0-cu130-vs-su-h200-torch2.14.1-cu130

A comparison is rendered with the candidates of its trend and the repeat pairs its estimates.json
records; a run report by its run id.
"""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis.__main__ import main as analysis_main, rendered_folder  # noqa: E402


def args_for(name: str, data: Path, out: Path, shipped: Path) -> list[str]:
    """The `python -m analysis` arguments that render published example `name` into `out`."""
    args = ["--data", str(data), "--out", str(out)]
    if not name.startswith("compare-"):
        return args + ["--run", name]
    a, b = name[len("compare-"):].split("-vs-")
    est = shipped / name / "estimates.json"
    recorded = json.loads(est.read_text()) if est.exists() else {}
    args += ["--baseline", a, "--allow-mismatch"]
    for c in recorded.get("trend_runs", [])[1:] or [b]:
        args += ["--candidate", c]
    for x, y in recorded.get("repeat_pairs", [])[1:]:
        args += ["--repeat", f"{x}:{y}"]
    return args


def main(argv: list[str]) -> int:
    shipped = ROOT / "docs" / "examples"
    names = argv or sorted(p.name for p in shipped.iterdir() if (p / "report.md").exists())
    for i, name in enumerate(names, 1):
        print(f"[{i}/{len(names)}] {name}", flush=True)
        args = args_for(name, ROOT / "data" / "examples", shipped, shipped)
        folder = rendered_folder(name, args)
        if folder == name:
            ok = analysis_main(args) == 0
        else:  # a comparison with REPEATS renders into its own folder: published under its usual name
            with tempfile.TemporaryDirectory() as tmp:
                args[args.index("--out") + 1] = tmp
                ok = analysis_main(args) == 0
                if ok:
                    shutil.rmtree(shipped / name, ignore_errors=True)
                    shutil.copytree(Path(tmp) / folder, shipped / name)
        if not ok:
            print(f"error: {name} did not render", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
