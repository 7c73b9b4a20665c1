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
import math
import os
import sys
from pathlib import Path

try:
    from collector import executors, models, scratch, shard  # noqa: E402
    from collector import matrix as mx  # noqa: E402
    from collector.cell import memory_limit_mb  # noqa: E402
    from collector.runner import PROJECT_ROOT  # noqa: E402
    from collector.stop import INTERRUPTED, REPORTED, interrupt  # noqa: E402
    from collector.store import RunError, check_run_id  # noqa: E402
except ModuleNotFoundError as _missing:  # a bare interpreter: say what to install, not a traceback
    if __name__ != "__main__":
        raise
    print(f"error: the collector needs the package {_missing.name!r}, which {sys.executable} cannot import: "
          "use `make collect` (it builds .venv with what the collector needs), or `pip install .` and torch "
          "(`pip install torch`) into this interpreter; `make collect PYTHON=<python>` uses one that has them",
          file=sys.stderr)
    sys.exit(2)


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
    p.add_argument("--slurm-time", dest="slurm_time", type=int, metavar="MINUTES",
                   help="time limit of each cell's task (default 60)")
    p.add_argument("--slurm-parallelism", dest="slurm_parallelism", type=int,
                   help="array tasks running at once (default 16)")
    p.add_argument("--slurm-cpus", dest="slurm_cpus", type=int, metavar="N",
                   help="CPUs per task (sbatch --cpus-per-task; default 8, at most half the partition's smallest node)")
    p.add_argument("--site-profile", dest="site_profile", metavar="FILE.toml",
                   help="slurm: the site's settings (partition, account, qos, gres, cpus, mem, time, setup lines, "
                        "sbatch options; docs/slurm.md); a --slurm-* option given here wins over the file")
    p.add_argument("--slurm-gpus", dest="slurm_gpus", type=int, metavar="N",
                   help="GPUs per task (default 1 for a CUDA matrix, 0 for a CPU one)")
    p.add_argument("--slurm-mem", dest="slurm_mem", metavar="MEM", help="memory per node, as sbatch takes it (e.g. 64G)")
    p.add_argument("--slurm-qos", dest="slurm_qos", metavar="QOS")
    p.add_argument("--slurm-exclusive", action="store_true", dest="slurm_exclusive",
                   help="a whole node per task (sbatch --exclusive): no other job beside a timed cell")
    p.add_argument("--slurm-arg", action="append", dest="slurm_args", default=[], metavar="KEY[=VALUE]",
                   help="any other sbatch option, repeatable (e.g. gres=gpu:h200:1, reservation=bench; KEY alone: a flag)")
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
        req = executors.Request(
            preset=args.preset, overrides=overrides, out=Path(args.out), run_id=args.run_id,
            pythons=[executors.split_python(t) for t in (args.pythons or [sys.executable])],
            shard=shard.parse(args.shard) if args.shard else None, cells=args.cells, device=args.device,
            gpus=args.gpus, launcher=args.launcher, retry_failed=args.retry_failed, stop_after_s=args.stop_after,
            plant_on=args.plant_on, dry_run=args.dry_run,
            slurm={"partition": args.slurm_partition, "account": args.slurm_account,
                   "constraint": args.slurm_constraint, "time_min": args.slurm_time,
                   "parallelism": args.slurm_parallelism, "allow_mixed": args.allow_mixed,
                   "cpus": args.slurm_cpus, "gpus": args.slurm_gpus, "mem": args.slurm_mem, "qos": args.slurm_qos,
                   "exclusive": args.slurm_exclusive, "args": args.slurm_args, "profile": args.site_profile})
        if args.executor != "local":  # SLURM tasks inherit the submitter's environment: no TMPDIR of ours
            return executors.EXECUTORS[args.executor]().execute(req)
        with scratch.session():  # every temporary file of this collect, removed at exit (swept after a kill)
            return executors.EXECUTORS[args.executor]().execute(req)
    except (mx.MatrixError, shard.ShardError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except OSError as exc:  # any other write that failed (a full or read-only disk): one line, exit 3
        print(f"error: cannot write {exc.filename or args.out}: {exc.strerror or exc}; cells saved before this "
              "are complete, and the same command resumes", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        if not REPORTED.is_set():
            print("\ninterrupted before anything was submitted: no task is queued" if args.executor == "slurm" else
                  "\ninterrupted: every cell finished so far is saved; run the same command again to resume",
                  file=sys.stderr, flush=True)
        return 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
