"""`python -m analysis`: render a report for every run found under --data.

Exit codes: 0 rendered, 2 bad input (no runs, unknown run, bad files with --strict),
3 the output folder cannot be written (read-only, full disk, a name that would leave it).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

NEEDS = ("duckdb", "numpy", "pandas", "pyarrow", "jinja2", "matplotlib")


def _needs() -> None:
    """Before anything imports them: an interpreter without the report's packages (a plain `python`
    beside the project's .venv) gets one line and exit 2, not an ImportError's traceback and exit 1,
    the code the gate keeps for a called regression."""
    missing = [m for m in NEEDS if importlib.util.find_spec(m) is None]
    if missing:
        print(f"error: {sys.executable} lacks {', '.join(missing)}, which python -m analysis needs: run it with "
              f".venv/bin/python (any `make report` or `make gate` installs them there), or pip install "
              f"{' '.join(missing)}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__" or Path(sys.argv[0]).name == "compile-bench-report":  # not when imported as a library
    _needs()

from analysis.commands import index  # noqa: E402 (after the check above)

from analysis.compare_report import repeats

from analysis.stats import core as stats
from analysis.run_report.context import build_run_report, prepare
from analysis.data.load import DataError, discover_runs, load, own_ids, unknown_runs
from analysis.compare_report.compare import build_compare_report
from analysis.stats.history import History
from analysis.render.pages import render, render_compare

from analysis.commands.index import ROOT  # the checkout, or the current folder for an installed package


class OutputError(OSError):
    """The report cannot be written where it belongs."""


def compare_folder(baseline: str, candidate: str, repeat_ids: list[tuple[str, str]]) -> str:
    """A comparison's folder under OUT: compare-A-vs-B, and with REPEATS its own folder beside it
    (compare-A-vs-B-repeats-X-vs-Y-...; named by a digest where the names would run long), so the
    two renderings never replace each other."""
    name = f"compare-{baseline}-vs-{candidate}"
    if not repeat_ids:
        return name
    tail = "-repeats-" + "-".join(f"{x}-vs-{y}" for x, y in repeat_ids)
    if len(name + tail) > 150:
        import hashlib

        tail = f"-repeats-{len(repeat_ids)}-{hashlib.sha1(tail.encode()).hexdigest()[:8]}"
    return name + tail


def rendered_folder(name: str, argv: list[str]) -> str:
    """The folder `python -m analysis argv` renders published example `name` (a run, or compare-A-vs-B)
    into: the example's own name, or with --repeat its comparison's folder of its own."""
    repeats = [tuple(argv[i + 1].split(":")) for i, a in enumerate(argv[:-1]) if a == "--repeat"]
    return compare_folder(*name[len("compare-"):].split("-vs-"), repeats) if repeats else name


def out_dir(out: Path, name: str) -> Path:
    """OUT/<name>, refusing any name that would land outside OUT (a run is named by its folder,
    but a symlink inside OUT or a crafted name must not send files elsewhere)."""
    target = out / name
    if name in ("", ".", "..") or "/" in name or os.sep in name or \
            not target.resolve().is_relative_to(out.resolve()):
        raise OutputError(f"refusing to write the report for {name!r} outside {out}")
    return target


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m analysis", description=__doc__)
    p.add_argument("--data", action="append", type=Path,
                   help="folder holding run folders (repeatable; default: data/)")
    p.add_argument("--run", action="append", help="only these run ids (repeatable)")
    p.add_argument("--all", action="store_true", help="every run under data/, the evidence runs behind the docs "
                   "included (default without --data or --run: your runs under data/runs/ and the published examples)")
    p.add_argument("--out", type=Path, default=ROOT / "reports", help="reports go to OUT/<run_id>/")
    p.add_argument("--strict", action="store_true", help="fail on any bad input file instead of skipping it")
    p.add_argument("--reps", type=stats.replicates, default=stats.DEFAULT_REPS,
                   help=f"bootstrap replicates per cell timed in one process (default {stats.DEFAULT_REPS}, at least 20)")
    p.add_argument("--baseline", help="compare: the baseline run id (A)")
    p.add_argument("--candidate", action="append",
                   help="compare: candidate run id(s) (B); several give one report each and a trend table")
    p.add_argument("--repeat", action="append", default=[], metavar="A2:B2",
                   help="compare: a further pair of runs of the same two versions, from another machine or run set (repeatable); "
                   "the report says which called changes repeat in every pair")
    p.add_argument("--allow-mismatch", action="store_true",
                   help="compare runs from different devices, matrices or protocols (said on top of the report)")
    p.add_argument("--noise", type=stats.positive_fraction, default=stats.NOISE_THRESHOLD,
                   help="IQR/median above which a cell is marked noisy (default 0.10)")
    p.add_argument("--min-effect", type=stats.fraction, default=stats.MIN_EFFECT, dest="min_effect",
                   help="smallest change (as a fraction) that is called or judged faster/slower (default 0.02)")
    return p.parse_args(argv)


def _check(args, runs: list) -> list[tuple[str, str]]:
    """DataError for options that do not go together; the --repeat pairs."""
    if not runs:
        raise DataError(f"no runs (folders with run.json) under {', '.join(map(str, args.data or ['data/']))}; "
                        "`make collect` makes one")
    if not 0 <= args.min_effect < 1:
        raise DataError(f"--min-effect is a fraction from 0 to 1 (0.02 = 2%), got {args.min_effect:g}")
    if bool(args.baseline) != bool(args.candidate):
        raise DataError("a comparison needs both --baseline and --candidate (BASELINE= and CANDIDATE=)")
    if args.repeat and not args.baseline:
        raise DataError("--repeat (REPEATS=) belongs to a comparison: give BASELINE= and CANDIDATE= too")
    if args.repeat and len(args.candidate) != 1:
        raise DataError(f"--repeat (REPEATS=) repeats one comparison: give one CANDIDATE=, not "
                        f"{len(args.candidate)} ({' '.join(args.candidate)})")
    return [repeats.parse(x) for x in args.repeat]


def _select(args, runs: list, repeat_ids: list):
    """(the runs to render, the published examples or None, how many evidence runs were left out)."""
    if args.baseline:
        args.run = [args.baseline] + args.candidate + [x for pair in repeat_ids for x in pair]
    pub, evidence = None, 0
    if args.run:
        known = {r.run_id for r in runs}
        unknown = [x for x in args.run if x not in known]
        if unknown:
            raise DataError(unknown_runs(unknown, known, own_ids(runs)))
        runs = [r for r in runs if r.run_id in args.run]
    elif not args.data and not args.all and (pub := index.published()) is not None:
        # a newcomer's `make report`: their runs and the published examples, not the evidence runs
        examples = ROOT / "data" / "examples"
        chosen = [r for r in runs if not r.path.is_relative_to(examples) or r.run_id in pub.runs]
        missing = sorted(set(pub.runs) - {r.run_id for r in chosen})
        if missing:
            print(f"warning: published example(s) {', '.join(missing)} not found under data/examples/",
                  file=sys.stderr)
        evidence, runs = len(runs) - len(chosen), chosen
    return runs, pub, evidence


def _compare(args, loaded, runs: list, repeat_ids: list, history, t0: float) -> int:
    """One comparison report per candidate against the baseline."""
    by_id = {r.run_id: r for r in runs}
    order = [by_id[x] for x in [args.baseline] + args.candidate]
    for cand in args.candidate:
        report = build_compare_report(loaded, by_id[args.baseline], by_id[cand], order,
                                      allow_mismatch=args.allow_mismatch, reps=args.reps,
                                      min_effect=args.min_effect,
                                      repeat_runs=[(by_id[x], by_id[y]) for x, y in repeat_ids],
                                      history=history)
        md, html = render_compare(report, out_dir(args.out, compare_folder(args.baseline, cand, repeat_ids)))
        print(f"{args.baseline} -> {cand}:\n  " + "\n  ".join(report.headline) + f"\n  {html}\n  {md}")
    index.refresh_rendered(args.out)  # reports/index.html lists it
    print(f"rendered {len(args.candidate)} comparison(s) in {time.perf_counter() - t0:.1f} s")
    return 0


def _run_reports(args, loaded, runs: list, pub, evidence: int) -> None:
    """One report per run, and the index of them where the published examples are rendered."""
    entries: list = []
    for run in runs:
        report = build_run_report(loaded, run, reps=args.reps, noise=args.noise, min_effect=args.min_effect)
        md, html = render(report, out_dir(args.out, run.run_id))
        print(f"{run.run_id}: {report.status_line}\n  {html}\n  {md}")
        entries.append(index.Entry(run.run_id, (pub.runs.get(run.run_id) if pub else None)
                                   or run.manifest.get("description") or "", report.status_line,
                                   str(run.env.get("device_name") or run.env.get("device") or "?"),
                                   str(run.env.get("torch_version") or "?")))
    if pub is not None:
        print(f"index: {index.write_index(args.out, entries, pub, evidence)}")


def gate_main() -> int:
    """The installed `compile-bench-gate`: python -m analysis gate."""
    return main(["gate", *sys.argv[1:]])


def confirm_main() -> int:
    """The installed `compile-bench-confirm`: python -m analysis confirm."""
    return main(["confirm", *sys.argv[1:]])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["confirm"]:  # python -m analysis confirm --baseline A --candidate B (analysis/commands/screen.py)
        from analysis.commands import screen

        return screen.main(argv[1:])
    if argv[:1] == ["gate"]:  # python -m analysis gate --baseline A --candidate B --max-regression 5%
        from analysis.commands import gate

        return gate.main(argv[1:])
    args = parse_args(argv)
    t0 = time.perf_counter()
    try:
        runs = [r for d in (args.data or [ROOT / "data"]) for r in discover_runs(d)]
        repeat_ids = _check(args, runs)
        history = History(runs)  # every run of the data folders: the siblings a run's spread is measured on
        runs, pub, evidence = _select(args, runs, repeat_ids)
        loaded = load(runs, strict=args.strict)
        for f, why in loaded.skipped:
            print(f"warning: skipped {f}: {why}", file=sys.stderr)
        prepare(loaded)
        if args.baseline:
            return _compare(args, loaded, runs, repeat_ids, history, t0)
        _run_reports(args, loaded, runs, pub, evidence)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # read-only or full output folder, or a name that would leave it
        detail = exc if isinstance(exc, OutputError) else f"cannot write the report: {exc.strerror or exc} " \
            f"({exc.filename or args.out})"
        print(f"error: {detail}; reports written before this one are complete", file=sys.stderr)
        return 3
    print(f"rendered {len(runs)} report(s) in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
