"""`python -m collector`: validate the matrix, probe the environment, measure every cell.

Exit codes: 0 done (failed cells are rows, not errors), 2 bad input, 3 run refused
(locked, mismatched environment, unwritable), 130 interrupted.
"""
from __future__ import annotations

import signal

_EARLY_STOP: list[int] = []  # a stop before the collector's own handler is in place (during imports)
if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda signum, frame: _EARLY_STOP.append(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: _EARLY_STOP.append(signum))

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import math
import os
import re
import shutil
import sys
from pathlib import Path

from collector import matrix as mx  # noqa: E402
from collector import envinfo, models, shard  # noqa: E402
from collector.cell import memory_limit_mb  # noqa: E402
from collector.store import RunStore, left_to_measure  # noqa: E402
from collector.runner import (INTERRUPTED, PROJECT_ROOT, REPORTED, ForkLauncher, RunError, SubprocessLauncher,  # noqa: E402
                              Target, check_run_id, collect_targets, default_run_id, interrupt,
                              plan_workers)


def _csv(kind):
    def parse(text: str):
        items = [t.strip() for t in text.split(",") if t.strip()] if text.strip() else []
        if kind is int:
            try:
                return [int(t) for t in items]
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
        return items
    return parse


def parse_models(text: str) -> list[str]:
    """--models / MODELS=: comma-separated models, each with options after a colon, and the options
    of one model also comma-separated: `mlp,gpt:layers=2,seq_len=128` is mlp and gpt with two
    options. A piece with `=` and no `:` continues the model before it (model names have no `=`)."""
    out: list[str] = []
    for piece in (t.strip() for t in text.split(",")):
        if not piece:
            continue
        if "=" in piece and ":" not in piece:
            if not out or ":" not in out[-1]:
                raise argparse.ArgumentTypeError(
                    f"--models: option {piece!r} follows no model; write it as model:{piece}")
            out[-1] += "," + piece
        else:
            out.append(piece)
    return out


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive, finite number of seconds, got {text!r}")
    return value


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m collector", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="auto",
                   help=f"auto (default on a GPU, smoke on a CPU), a name ({', '.join(mx.preset_names())}) "
                        "or a path to a .toml file")
    p.add_argument("--models", type=parse_models,
                   help=f"comma-separated, options after a colon (gpt:layers=2,seq_len=128); built in: "
                        f"{', '.join(models.names())}")
    p.add_argument("--phases", type=_csv(str), help=f"{', '.join(mx.PHASES)}")
    p.add_argument("--modes", type=_csv(str), help=f"{', '.join(mx.MODES)}")
    p.add_argument("--dtypes", type=_csv(str), help=f"{', '.join(mx.DTYPES)}")
    p.add_argument("--batch-sizes", type=_csv(int), dest="batch_sizes")
    p.add_argument("--scopes", type=_csv(str), dest="compile_scopes", help=f"{', '.join(mx.SCOPES)}")
    p.add_argument("--dynamic", type=_csv(str), help=f"torch.compile dynamic shapes: {', '.join(mx.DYNAMIC)}")
    for setting in mx.SETTINGS:  # the protocol's options, declared once (collector/matrix.py)
        if setting.cli:
            kind = dict(choices=["0", "1"]) if setting.kind is bool else dict(type=setting.kind)
            p.add_argument(setting.cli, dest=setting.name, help=setting.help or None,
                           metavar="PCT" if setting.name == "plant_slowdown_pct" else None, **kind)
    p.add_argument("--device", choices=list(mx.DEVICES))
    p.add_argument("--run-id", help="run directory name (default: <preset>-<device>-torch<version>)")
    p.add_argument("--out", default=str(PROJECT_ROOT / "data" / "runs"), help="parent of run directories")
    p.add_argument("--gpus", default="",
                   help="measure cells concurrently, one per GPU: comma-separated indices or 'all' "
                        "(default: one cell at a time on the default device, the cleanest timing)")
    p.add_argument("--retry-failed", action="store_true", dest="retry_failed",
                   help="measure again the cells of this run whose saved row failed (crash, timeout, error)")
    p.add_argument("--stop-after", type=_seconds, default=None, dest="stop_after", metavar="SECONDS",
                   help="wall-clock budget: start no new cell after this many seconds (cells in flight "
                        "finish); the same command resumes the rest")
    p.add_argument("--shard", default=None, metavar="K/N",
                   help="measure only the K-th of N disjoint slices of the matrix (K from 1 to N), in its own "
                        "run folder <run id>-shard<K>of<N>; `make merge` joins the shards (collector/shard.py)")
    p.add_argument("--cells", type=_csv(str), default=None, metavar="PATTERN[,PATTERN]",
                   help="only the matrix's cells whose id matches one of these shell patterns "
                        "(e.g. 'gpt__infer__*__bs128__*'; --dry-run lists the ids)")
    p.add_argument("--executor", choices=("local", "slurm"), default="local",
                   help="local: measure here (default); slurm: submit one SLURM array task per cell "
                        "through submitit and return (progress: python -m collector.slurm status RUN_DIR)")
    p.add_argument("--slurm-partition", dest="slurm_partition")
    p.add_argument("--slurm-account", dest="slurm_account")
    p.add_argument("--slurm-constraint", dest="slurm_constraint", help="e.g. the GPU model's feature name")
    p.add_argument("--slurm-time", dest="slurm_time", type=int, default=60, metavar="MINUTES",
                   help="time limit of each cell's task (default 60)")
    p.add_argument("--slurm-parallelism", dest="slurm_parallelism", type=int, default=16,
                   help="array tasks running at once (default 16)")
    p.add_argument("--allow-mixed", action="store_true", dest="allow_mixed",
                   help="slurm: let nodes whose torch or GPU differs from the run's write their rows")
    p.add_argument("--python", action="append", dest="pythons", metavar="[LABEL=]PATH",
                   help="interpreter that runs each cell (default: this one). Repeat it to measure the same "
                        "matrix under several interpreters (torch versions) on this machine, interleaved cell by "
                        "cell; each writes its own run, <run id>-<LABEL> (LABEL default: torch<version>)")
    p.add_argument("--plant-on", type=_csv(str), dest="plant_on", metavar="LABEL[,LABEL]",
                   help="with several --python: plant the slowdown (--plant-slowdown) in these interpreters' "
                        "runs only (default: all)")
    p.add_argument("--launcher", choices=("fork", "exec"), default="fork" if hasattr(os, "fork") else "exec",
                   help="how each cell process starts: fork it from a parent that has imported torch, Dynamo "
                        "and Inductor once (default; saves ~8-10 s a process) or exec a fresh interpreter")
    p.add_argument("--dry-run", action="store_true", help="validate and list the cells, measure nothing")
    return p.parse_args(argv)


def _sharded(matrix: mx.Matrix, kn, patterns=None):
    """The matrix narrowed to --cells, then its K-th of N slices (collector/shard.py)."""
    if patterns:
        matrix = mx.select_cells(matrix, patterns)
    if not kn:
        return matrix
    cells = shard.select(matrix.cells, *kn)
    print(f"shard {kn[0]}/{kn[1]}: {len(cells)} of the matrix's {len(matrix.cells)} cells")
    return dataclasses.replace(matrix, cells=cells)


def _shard_run_id(run_id: str | None, kn) -> str | None:
    return shard.run_id_for(run_id, *kn) if (run_id and kn) else run_id


def split_python(text: str) -> tuple[str | None, str]:
    """`[LABEL=]PATH` -> (LABEL or None, PATH). A label is a run id's tail: letters, digits, . _ -."""
    label, sep, path = text.partition("=")
    if not sep or os.sep in label:
        return None, text
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,40}", label):
        raise ValueError(f"--python {text!r}: the label {label!r} must be 1-41 letters, digits, '.', '_' or '-'")
    return label, path


def target_labels(given: list[str | None], envs: list[dict]) -> list[str]:
    """Each interpreter's label: the one given, else torch<version>; repeats get -2, -3, ..."""
    labels, seen = [], {}
    for label, env in zip(given, envs):
        label = label or re.sub(r"[^A-Za-z0-9._-]+", "-", f"torch{env['torch_version']}")
        seen[label] = seen.get(label, 0) + 1
        labels.append(label if seen[label] == 1 else f"{label}-{seen[label]}")
    return labels


def check_python(python: str) -> None:
    """--python must name an interpreter that exists, before anything runs."""
    found = shutil.which(python) if os.sep not in python else (python if os.access(python, os.X_OK) else None)
    if not found or os.path.isdir(found):
        raise ValueError(f"--python {python!r}: no such executable (give the path of a Python interpreter "
                         f"with torch installed; default: this one, {sys.executable})")


def probe_env(python: str, device: str) -> dict:
    check_python(python)
    try:
        return envinfo.probe_in(python, device)
    except RuntimeError as exc:
        raise RunError(str(exc)) from None


def _submit_env(python: str, device: str) -> dict:
    """The run's environment as the submitting host sees it. A login node without the matrix's
    GPU probes its CPU for torch's version; the GPU model is then fixed by the first node that
    runs a cell (collector/slurm.py: first_node_environment)."""
    try:
        return probe_env(python, device)
    except RunError:
        if device != "cuda":
            raise
        env = probe_env(python, "cpu")
        env.update(device="cuda", device_name=None, gpu_name="gpu")
        return env


def _submit_slurm(args, matrix) -> int:
    from collector import slurm

    env = _submit_env(args.python, args.device or matrix.device)
    settings = slurm.SlurmSettings(partition=args.slurm_partition, account=args.slurm_account,
                                   constraint=args.slurm_constraint, time_min=args.slurm_time,
                                   array_parallelism=args.slurm_parallelism,
                                   gpus_per_task=1 if env["device"] == "cuda" else 0)
    run_id = args.run_id or default_run_id(matrix.preset, env)
    slurm.submit_run(matrix, env, Path(args.out), run_id, slurm.SubmititExecutor(settings),
                     allow_mixed=args.allow_mixed, resubmit_failed=args.retry_failed, python=args.python,
                     settings=settings, launcher=args.launcher)
    return 0


def parse_gpus(text: str, env: dict) -> list[int] | None:
    """--gpus: '' (none), 'all', or comma-separated indices checked against the GPUs the probe saw."""
    text = (text or "").strip()
    if not text:
        return None
    count = int(env.get("gpu_count") or 0)
    if env.get("device") != "cuda" or count == 0:
        raise ValueError(f"--gpus {text!r} needs a CUDA device; this run is on {env.get('device')}")
    if text == "all":
        return list(range(count))
    try:
        gpus = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"--gpus: expected 'all' or comma-separated GPU indices, got {text!r}") from None
    bad = [g for g in gpus if not 0 <= g < count]
    if bad:
        raise ValueError(f"--gpus: no GPU {', '.join(map(str, bad))}; valid: 0..{count - 1} or 'all'")
    return gpus


def dry_run(matrix: mx.Matrix, out: Path, run_id: str | None, retry_failed: bool = False) -> int:
    """List the matrix's cells; with the run folder of `run_id` under `out`, mark those it holds
    (`done`, or the failed status) and count what the same command would measure: the run store's
    rule (collector.store.left_to_measure), so a file the collector would set aside (zero bytes,
    truncated, another cell's row) counts as left, and RETRY=1 counts the failed rows as left."""
    saved = RunStore(out / run_id).saved() if run_id else {}
    left = {c.cell_id for c in left_to_measure(matrix.cells, saved, retry_failed)}
    for cell in matrix.cells:
        if cell.cell_id in saved:
            status = saved[cell.cell_id]
            again = " (measured again: RETRY)" if cell.cell_id in left else ""
            print(f"{cell.cell_id}  [{'done' if status == 'ok' else status}]{again}")
        else:
            print(cell.cell_id)
    where = (f"; run {run_id}: {len(matrix.cells) - len(left)} saved, {len(left)} to measure"
             if saved else "")
    print(f"{len(matrix.cells)} cells{where}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    overrides = {k: getattr(args, k) for k in mx.AXES + ("device",) + tuple(s.name for s in mx.SETTINGS if s.cli)}
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    INTERRUPTED.clear()
    REPORTED.clear()
    try:
        if _EARLY_STOP:
            raise KeyboardInterrupt("stopped while starting")
        memory_limit_mb()  # a bad setting is an error before anything runs, not a crashed row per cell
        if args.run_id:
            check_run_id(args.run_id)
        shard_kn = shard.parse(args.shard) if args.shard else None
        preset = args.preset
        if preset != "auto":
            matrix = _sharded(mx.build_matrix(preset, overrides), shard_kn, args.cells)  # bad input fails here
            if args.dry_run:  # no environment probe: plan a GPU run from a machine without one
                return dry_run(matrix, Path(args.out), _shard_run_id(args.run_id, shard_kn), args.retry_failed)
            if args.executor == "slurm":
                if len(args.pythons or []) > 1:
                    raise ValueError("several --python interpreters are measured interleaved on one machine; "
                                     "EXECUTOR=slurm takes one")
                args.python = split_python((args.pythons or [sys.executable])[0])[1]
                return _submit_slurm(args, matrix)
        elif args.executor == "slurm":
            raise ValueError("EXECUTOR=slurm needs a preset (PRESET=...): the nodes' device is not known here")
        given = [split_python(t) for t in (args.pythons or [sys.executable])]
        env = probe_env(given[0][1], args.device or (matrix.device if preset != "auto" else "auto"))
        if preset == "auto":
            preset = "default" if env["device"] == "cuda" else "smoke"
            matrix = _sharded(mx.build_matrix(preset, overrides), shard_kn, args.cells)
            print(f"preset auto -> {preset} ({env['device']})")
        envs = [env] + [probe_env(path, env["device"]) for _, path in given[1:]]
        labels = target_labels([label for label, _ in given], envs)
        if len(given) == 1:
            run_ids = [_shard_run_id(args.run_id or default_run_id(matrix.preset, env), shard_kn)]
        else:
            run_ids = [_shard_run_id(f"{args.run_id}-{label}" if args.run_id else default_run_id(matrix.preset, e)
                                     + (f"-{label}" if label != f"torch{e['torch_version']}" else ""), shard_kn)
                       for label, e in zip(labels, envs)]
            for r in run_ids:
                check_run_id(r)
            if len(set(run_ids)) != len(run_ids):
                raise ValueError(f"the interpreters would share a run ({', '.join(run_ids)}): "
                                 "label them, --python LABEL=PATH")
        unknown = sorted(set(args.plant_on or []) - set(labels))
        if unknown:
            raise ValueError(f"--plant-on {','.join(unknown)}: no such interpreter label; valid: {', '.join(labels)}")
        if args.dry_run:
            for r in run_ids:
                dry_run(matrix, Path(args.out), r, args.retry_failed)
            return 0
        workers = plan_workers(parse_gpus(args.gpus, env))
        targets = []
        for (label, path), e, lab, rid in zip(given, envs, labels, run_ids):
            m = matrix
            if args.plant_on and lab not in args.plant_on:
                m = dataclasses.replace(matrix, protocol=dataclasses.replace(matrix.protocol, plant_slowdown_pct=0))
            launcher = (ForkLauncher(path, device=e["device"]) if args.launcher == "fork"
                        else SubprocessLauncher(path))
            targets.append(Target(m, e, rid, launcher, label=lab))
        run_dirs = collect_targets(targets, Path(args.out), workers=workers,
                                   retry_failed=args.retry_failed, stop_after_s=args.stop_after)
        for run_dir in run_dirs:
            print(f"done: {run_dir}  (make report renders it)")
        return 0
    except (mx.MatrixError, shard.ShardError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        if not REPORTED.is_set():
            print("\ninterrupted: every cell finished so far is saved; run the same command again to resume",
                  file=sys.stderr, flush=True)
        return 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
