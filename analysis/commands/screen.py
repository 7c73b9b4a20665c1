"""Screen, then confirm: which cells of two screening runs (one process a cell) to measure again.

    python -m analysis confirm --baseline A --candidate B [--threshold 10% | --aa X:Y] [--processes 3] [--run ID]
        [--cells PATTERN,...] [--max-cells N] [--dry-run | --write-only]
    make confirm BASELINE=A CANDIDATE=B [THRESHOLD=10% | AA=X:Y] [PROCESSES=3] [RUN=ID] [CELLS=] [MAX_CELLS=]
        [DRY=1 | WRITE_ONLY=1]

A suite pass cannot afford several processes for every cell, so it is screened with one (the
dashboard's protocol: the suite presets' default) and only the cells whose screen moved are measured
again, with PROCESSES (default 3) fresh processes, under both runs' interpreters interleaved, into
runs <ID>-A and <ID>-B. The comparison of those two runs is the one that calls changes; the screens'
comparison only chooses what to confirm (docs/suites.md). A cell moved when its compiled step time or
its speedup changed by more than the threshold either way, or when it passes in one screen and fails in
the other. The threshold is the screen's own A/A spread: the largest change of each quantity over the
cells of an A/A pair of screens (--aa X:Y, the same interpreter screened twice), taken apart for the
GPU-bound cells and the host-paced ones (a side host-paced in either screen, as the suite table
counts it), since a one-process screen
moves the second by tens of percent and the first by a few; or --threshold for both.
On a budget, --cells narrows the choice to cell ids matching a pattern and --max-cells keeps the N cells
that moved most (status changes first); the listing says how many were left out. --write-only writes the
preset and prints the collector's command without measuring: to run the confirmation on another machine
(the GPU one), where the interpreters the screens recorded live.
"""
from __future__ import annotations

import fnmatch
import json
import math
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from analysis.stats.fmt import cell_label
from analysis.run_report.suites import CONFIRMATION, NOT_THE_MODEL

DEFAULT_THRESHOLD = 0.10  # what it sends to confirmation in an A/A and a planted 5%: docs/suites.md
AXES = (("models", "model"), ("phases", "phase"), ("dtypes", "dtype"), ("batch_sizes", "batch_size"),
        ("modes", "mode"), ("compile_scopes", "compile_scope"), ("dynamic", "dynamic"))


@dataclass(frozen=True)
class Moved:
    cell_id: str
    label: str
    why: str  # "compiled step +14.2%", "ok -> compile_error"
    size: float = math.inf  # the larger |ln B/A| of the two quantities; inf for a status change


def changes(pairs: list[dict]) -> dict[str, tuple[float, float]]:
    """cell_id -> (|ln compiled B/A|, |ln speedup B/A|) over the compiled cells ok in both runs."""
    out = {}
    for p in pairs:
        if p.get("mode") == "eager" or p.get("status_a") != "ok" or p.get("status_b") != "ok":
            continue
        vals = [p.get(k) for k in ("compiled_a", "compiled_b", "speedup_a", "speedup_b")]
        if all(isinstance(v, (int, float)) and v > 0 for v in vals):
            out[p["cell_id"]] = (abs(math.log(vals[1] / vals[0])), abs(math.log(vals[3] / vals[2])))
    return out


def paced(p: dict) -> bool:
    """Whether the host set the pace of a side of the cell in either screen, as the suite table counts
    it (analysis/run_report/suites.py, host_paced: launch-bound by the enqueue rule, or, with a kernel
    profile, kernels filling under 90% of the step): where a one-process screen moves by tens of percent
    run to run."""
    from analysis.run_report.suites import host_paced

    for x in ("a", "b"):
        row = {"kernel_profile_json": p.get(f"profile_{x}")}
        for side in ("eager", "compiled"):
            row[f"{side}_launch_bound"] = p.get(f"{side}_lb_{x}")
            row[f"{side}_median_ms"] = p.get(f"{side}_{x}")
        if any(host_paced(row, side) for side in ("eager", "compiled")):
            return True
    return False


CLASSES = ("GPU-bound", "host-paced")


def aa_spread(pairs: list[dict]) -> dict[str, tuple[float, float]]:
    """The A/A spread of a pair of screens, per class of cell (GPU-bound, host-paced: `paced`) and
    quantity: the largest change of the compiled step and of the speedup over the class's cells, as
    fractions (exp(max |ln B/A|) - 1). A class with no cell ok in both takes the other class's larger
    spread (no class is judged by a spread it has not shown). ValueError when no cell is ok in both."""
    ch = changes(pairs)
    if not ch:
        raise ValueError("the A/A pair has no compiled cell ok in both runs: no spread to measure")
    by_id = {p["cell_id"]: p for p in pairs}
    out = {}
    for cls in CLASSES:
        vals = [c for cid, c in ch.items() if (CLASSES[1] if paced(by_id[cid]) else CLASSES[0]) == cls]
        if vals:
            out[cls] = tuple(math.exp(max(c[i] for c in vals)) - 1 for i in (0, 1))
    overall = tuple(math.exp(max(c[i] for c in ch.values())) - 1 for i in (0, 1))
    return {cls: out.get(cls, overall) for cls in CLASSES}


def threshold_text(threshold) -> str:
    """The threshold in words: one fraction, (compiled step, speedup), or those per class."""
    if isinstance(threshold, dict) and len(set(threshold.values())) == 1:  # one class (a CPU run): one spread
        return threshold_text(next(iter(threshold.values())))
    if isinstance(threshold, dict):
        return "; ".join(f"{threshold_text(t)} on {cls} cells" for cls, t in threshold.items())
    if isinstance(threshold, tuple):
        return f"{threshold[0]:.1%} (compiled step) or {threshold[1]:.1%} (speedup)"
    return f"{threshold:.1%}"


# a change equal to the threshold is not beyond it: an A/A spread read back as a fraction and through
# log1p again can come out below the change it was taken from (it did for 39% of random cells, and
# rs-h200's and rs-h100's A/A each sent its own widest cell to confirmation)
ROUNDING = 1e-9


def moved(pairs: list[dict], threshold: float | tuple[float, float] | dict) -> list[Moved]:
    """The cells to confirm: a change beyond the threshold either way (one fraction for both quantities,
    (compiled step, speedup), or such a pair per class of cell as `aa_spread` gives them), or a status
    change (ok in one screen only; not a cell skipped in either, nor one out of memory beside other cells on
    a shared GPU, which the screen's own command measures again alone: collector/host/alone.py)."""
    ch = changes(pairs)

    def limits_of(p: dict) -> list[float]:
        t = threshold[CLASSES[1] if paced(p) else CLASSES[0]] if isinstance(threshold, dict) else threshold
        return [math.log1p(x) + ROUNDING for x in (t if isinstance(t, tuple) else (t, t))]
    out = []
    for p in pairs:
        if p.get("mode") == "eager":
            continue
        limits = limits_of(p)
        cid = p["cell_id"]
        sa, sb = p.get("status_a"), p.get("status_b")
        if not {sa, sb} & set(NOT_THE_MODEL) and (sa == "ok") != (sb == "ok"):  # skipped, oom_shared: no change
            out.append(Moved(cid, cell_label(p), f"{sa} -> {sb}"))
        elif cid in ch and (ch[cid][0] > limits[0] or ch[cid][1] > limits[1]):
            comp = math.log(p["compiled_b"] / p["compiled_a"])
            sp = math.log(p["speedup_b"] / p["speedup_a"])
            why = (f"compiled step {100 * math.expm1(comp):+.1f}%" if abs(comp) > limits[0]
                   else f"speedup {100 * math.expm1(sp):+.1f}%")
            out.append(Moved(cid, cell_label(p), why, max(ch[cid])))
    return out


def narrow(found: list[Moved], patterns: list[str] | None = None, max_cells: int | None = None) -> list[Moved]:
    """The moved cells whose id matches one of `patterns` (fnmatch; all when none), at most `max_cells`
    of them: status changes first, then the largest moves (ties in the screen's order), each model's
    largest before a second mode of one already kept (a release screen moves a model in both modes
    alike: twelve cells then confirm twelve models, the regressions beside the larger gains)."""
    if patterns:
        found = [m for m in found if any(fnmatch.fnmatchcase(m.cell_id, pat) for pat in patterns)]
    if max_cells is not None:
        if max_cells < 1:
            raise ValueError(f"--max-cells must be at least 1 (got {max_cells})")
        ranked = sorted(found, key=lambda m: -m.size)
        firsts, seen = [], set()
        for m in ranked:  # the largest move of each cell's twins first: one more model, not the same in another mode
            if _twins(m.cell_id) not in seen:
                seen.add(_twins(m.cell_id))
                firsts.append(m)
        keep = {m.cell_id for m in [*firsts, *(m for m in ranked if m not in firsts)][:max_cells]}
        found = [m for m in found if m.cell_id in keep]
    return found


def _twins(cell_id: str) -> str:
    """A cell's id without its mode: the same model, phase, dtype, batch and scope in every mode
    (contract.cell_id_of spells model__phase__dtype__bsN__mode__scope)."""
    parts = cell_id.split("__")
    return "__".join(parts[:4] + parts[5:]) if len(parts) >= 6 else cell_id


def confirm_preset(manifest: dict, cells: list[dict], processes: int) -> str:
    """A preset (TOML text) of exactly `cells`, one include each, with the screen's protocol and
    `processes` fresh processes a cell."""
    proto = dict(manifest.get("protocol") or {})
    proto["processes"] = processes
    for k in ("plant_slowdown_pct", "plant_compile_ms"):
        proto.pop(k, None)  # given on the command line, for the candidate only
    lines = [f"description = {json.dumps(CONFIRMATION.format(len(cells)))}",
             f"device = {json.dumps(manifest.get('device') or 'auto')}"]
    lines += [f"{k} = {json.dumps(v) if not isinstance(v, bool) else str(v).lower()}" for k, v in sorted(proto.items())]
    first, rest = cells[0], cells[1:]
    lines += [f"{axis} = [{json.dumps(first.get(key) or 'auto')}]" for axis, key in AXES]
    for c in rest:
        lines.append("[[include]]")
        lines += [f"{axis} = [{json.dumps(c.get(key) or 'auto')}]" for axis, key in AXES]
    return "\n".join(lines) + "\n"


def command(preset: Path, run_id: str, out: Path, python_a: str, python_b: str, plant: dict) -> list[str]:
    """The collector's command line for the confirmation: both interpreters interleaved, runs <run_id>-A/-B."""
    cmd = [sys.executable, "-m", "collector", "--preset", str(preset), "--out", str(out), "--run-id", run_id,
           "--python", f"A={python_a}", "--python", f"B={python_b}"]
    if plant.get("plant_slowdown_pct"):
        cmd += ["--plant-slowdown", str(int(plant["plant_slowdown_pct"])), "--plant-on", "B"]
    if plant.get("plant_compile_ms"):
        cmd += ["--plant-compile", str(int(plant["plant_compile_ms"])), "--plant-on", "B"]
    return cmd


def parse_args(argv: list[str]):
    import argparse

    p = argparse.ArgumentParser(prog="python -m analysis confirm", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", action="append", help="folder holding run folders (repeatable; default: data/)")
    p.add_argument("--baseline", required=True)
    p.add_argument("--candidate", required=True)
    p.add_argument("--threshold", help=f"confirm cells that moved by more than this (default {DEFAULT_THRESHOLD:.0%}%)")
    p.add_argument("--aa", metavar="X:Y", help="an A/A pair of screens: the threshold is its largest change")
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--run", help="the confirmation's run id (runs <id>-A and <id>-B; default <baseline>-confirm)")
    p.add_argument("--out", default="data/runs", help="where the confirmation runs are written")
    p.add_argument("--cells", help="only cells whose id matches one of these comma-separated patterns ('hf-*')")
    p.add_argument("--max-cells", type=int, help="at most this many cells: status changes, then the largest moves")
    p.add_argument("--after", metavar="RUN", help="leave out the cells an earlier confirmation RUN of these screens "
                   "holds (its runs RUN-<label>): a second confirmation of a screen that grew")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--dry-run", action="store_true", help="list the cells and the command, write and measure nothing")
    how.add_argument("--write-only", action="store_true",
                     help="write the preset and print the command, measure nothing (to run it on another machine)")
    return p.parse_args(argv)


def confirmed(runs: dict, run_id: str) -> set[str]:
    """The cell ids an earlier confirmation `run_id` holds (its runs `<run_id>-<label>`, one per interpreter);
    ValueError naming the runs there are when it has none."""
    mine = [r for r in runs.values() if r.run_id.startswith(f"{run_id}-")]
    if not mine:
        import difflib

        near = difflib.get_close_matches(run_id, sorted({r.run_id.rsplit("-", 1)[0] for r in runs.values()}), 5, 0.5)
        raise ValueError(f"--after {run_id}: no run {run_id}-<label> in the data folders"
                         + (f" (like it there: {', '.join(near)})" if near else ""))
    return {f.stem for r in mine for f in r.files}


def _screens(args):
    """(the runs by id, the two screens' cell pairs, the threshold and where it came from); ValueError or
    DataError on bad input."""
    from analysis.commands.gate import parse_bound
    from analysis.data.load import discover_runs, load, own_ids, sql, unknown_runs
    from analysis.run_report.context import prepare

    if args.processes < 2:
        raise ValueError("--processes must be at least 2: a confirmation calls changes over processes")
    roots = [Path(d) for d in (args.data or ["data"])]
    runs = {r.run_id: r for d in roots for r in discover_runs(d)}
    aa = args.aa.split(":") if args.aa else []
    if args.aa and len(aa) != 2:
        raise ValueError(f"--aa takes two run ids as X:Y (got {args.aa!r})")
    missing = [x for x in [args.baseline, args.candidate, *aa] if x not in runs]
    if missing:
        raise ValueError(unknown_runs(missing, runs, own_ids(runs.values())))
    loaded = load([runs[x] for x in dict.fromkeys([args.baseline, args.candidate, *aa])])
    prepare(loaded)

    def pairs(x: str, y: str) -> list[dict]:
        df = loaded.con.execute(sql("compare_pairs"), {"baseline": x, "candidate": y}).df()
        return df.astype(object).where(df.notna(), None).to_dict("records")
    if aa:
        threshold, source = aa_spread(pairs(*aa)), f"the A/A spread of {aa[0]}:{aa[1]}"
        for line in aa_unlike([runs[x] for x in aa], [runs[args.baseline], runs[args.candidate]]):
            print(f"note: {line}", file=sys.stderr)
    elif args.threshold:
        threshold, source = parse_bound(args.threshold, "--threshold"), "--threshold"
    else:
        threshold, source = DEFAULT_THRESHOLD, "the default; docs/suites.md"
    return runs, pairs(args.baseline, args.candidate), threshold, source


def aa_unlike(aa: list, screens: list) -> list[str]:
    """How the A/A pair was measured unlike the screens (the device; alone on the GPU or taking turns with
    neighbours, analysis/stats/history.sharing): its spread is then another protocol's, and the
    host-paced cells' differs most (docs/scale-out.md)."""
    from analysis.stats.history import sharing

    def turns(r) -> str:
        return "/".join("alone on its GPU" if n == 1 else f"{n} cells at a time on a GPU"
                        + (", timed on every core" if wide else "") for n, wide in sharing(r))
    out = []
    for what, of in (("device", lambda r: str(r.env.get("device_name"))), ("cells", turns)):
        mine, theirs = sorted({of(r) for r in aa}), sorted({of(r) for r in screens})
        if mine != theirs:
            out.append(f"the A/A pair's {what}: {', '.join(mine)}; the screens': {', '.join(theirs)}. Its spread "
                       "is another protocol's, so the cells it sends (the host-paced ones most) are a guess; an A/A "
                       "pair screened as these were measures theirs")
    return out


def _confirm(args, runs: dict, screen_pairs: list[dict], found: list) -> int:
    """Write the confirmation's preset and run (or print) the collector's command for it."""
    a, b = runs[args.baseline], runs[args.candidate]
    rows = {r["cell_id"]: r for r in screen_pairs}
    run_id = args.run or f"{args.baseline}-confirm"
    out = Path(args.out)
    preset = out / f"{run_id}.toml"
    text = confirm_preset(a.manifest, [rows[m.cell_id] for m in found], args.processes)
    pys = [r.env.get("python_executable") or "python3" for r in (a, b)]
    cmd = command(preset, run_id, out, pys[0], pys[1], b.manifest.get("protocol") or {})
    print("confirm with: " + shlex.join(cmd))
    if args.dry_run:
        return 0
    out.mkdir(parents=True, exist_ok=True)
    preset.write_text(text)
    if args.write_only:
        print(f"wrote {preset} ({len(found)} cell(s)); measure nothing here")
        return 0
    return subprocess.call(cmd, cwd=Path(__file__).resolve().parents[2])


def main(argv: list[str]) -> int:
    import signal

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `... | head` ends the listing quietly, no traceback

    from analysis.data.load import DataError

    args = parse_args(argv)
    try:
        runs, screen_pairs, threshold, source = _screens(args)  # the pairs read once: choice, count, preset
        every = moved(screen_pairs, threshold)
        done = confirmed(runs, args.after) if args.after else set()
        found = narrow([m for m in every if m.cell_id not in done],
                       [x.strip() for x in args.cells.split(",") if x.strip()] if args.cells else None, args.max_cells)
    except (ValueError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    screened = len(changes(screen_pairs))
    beyond = threshold_text(threshold)
    print(f"screen {args.candidate} against {args.baseline}: {len(every)} cell(s) moved of {screened} ok in "
          f"both, beyond {beyond} ({source}), or passing in one screen only")
    for m in found:
        print(f"  {m.label}: {m.why}")
    again = sum(m.cell_id in done for m in every)
    if again:
        print(f"  ({again} moved cell(s) confirmed already in {args.after})")
    if len(found) < len(every) - again:
        print(f"  ({len(every) - again - len(found)} moved cell(s) left out by --cells/--max-cells: not confirmed)")
    if not found:
        print("nothing to confirm")
        return 0
    return _confirm(args, runs, screen_pairs, found)
