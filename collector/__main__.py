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
import sys
from pathlib import Path

try:
    from collector.commands import executors, options, shard
    from collector.host import scratch  # noqa: E402
    from collector.plan import matrix as mx  # noqa: E402
    from collector.child.cell import memory_limit_mb  # noqa: E402
    from collector.host.runner import PROJECT_ROOT  # noqa: E402
    from collector.host.stop import INTERRUPTED, REPORTED, interrupt  # noqa: E402
    from collector.host.store import RunError, check_run_id  # noqa: E402
except ModuleNotFoundError as _missing:  # a bare interpreter: say what to install, not a traceback
    if __name__ != "__main__":
        raise
    print(f"error: the collector needs the package {_missing.name!r}, which {sys.executable} cannot import: "
          "use `make collect` (it builds .venv with what the collector needs), or `pip install .` and torch "
          "(`pip install torch`) into this interpreter; `make collect PYTHON=<python>` uses one that has them",
          file=sys.stderr)
    sys.exit(2)


def home() -> Path:
    """Where runs go by default: the checkout this package sits in (it has data/), else the current
    folder (an installed `compile-bench-collect` lives in site-packages: it writes ./data/runs)."""
    return PROJECT_ROOT if (PROJECT_ROOT / "data").is_dir() else Path.cwd()


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The options of collector/commands/options.py (the one table), parsed."""
    p = options.Parser(prog="python -m collector", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_to(p)
    args = p.parse_args(argv)
    args.out = args.out or str(home() / "data" / "runs")
    args.slurm_args = args.slurm_args or []
    return args


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
        options.refuse_unused(args.executor, args)  # an option this executor would not use: named, not ignored
        req = executors.Request(
            preset=args.preset, overrides=overrides, out=Path(args.out), run_id=args.run_id,
            pythons=[executors.split_python(t) for t in (args.pythons or [sys.executable])],
            shard=shard.parse(args.shard) if args.shard else None, cells=args.cells, device=args.device,
            gpus=args.gpus, timed_cpus=args.timed_cpus, launcher=args.launcher, retry_failed=args.retry_failed, stop_after_s=args.stop_after,
            plant_on=args.plant_on, dry_run=args.dry_run, note=args.note,
            slurm=executors.SlurmOptions(
                partition=args.slurm_partition, account=args.slurm_account, constraint=args.slurm_constraint,
                time_min=args.slurm_time, parallelism=args.slurm_parallelism, allow_mixed=args.allow_mixed,
                cpus=args.slurm_cpus, gpus=args.slurm_gpus, mem=args.slurm_mem, qos=args.slurm_qos,
                exclusive=args.slurm_exclusive, args=tuple(args.slurm_args), profile=args.site_profile))
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
