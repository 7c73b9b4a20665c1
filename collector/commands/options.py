"""The collect command's options, declared once: `python -m collector`'s parser is built from this table
(the protocol's settings from collector.record.settings, the matrix axes and the run's options here), the
Makefile's variables are held to it (tests/test_options.py: each variable known, passed as its option,
listed by `make help`), docs/options.md's reference table is what `python -m collector.commands.options`
prints, and an option that the chosen executor would not use is refused by name, never ignored.

Adding an option: one `Option` here (or one `Setting` for a protocol setting) and its use: the Makefile
line and the docs table follow, and the tests name what is missing.
"""
from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass
from pathlib import Path

from collector import models
from collector.plan import matrix as mx
from collector.record.settings import SETTINGS

BOTH, LOCAL, SLURM = ("local", "slurm"), ("local",), ("slurm",)


def csv(kind):
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


def whole(lo: int):
    """A parse function for a whole number of at least `lo` (argparse names the option)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"expected a whole number of at least {lo}, got {text!r}")
        return value
    parse.__name__ = f"whole number >= {lo}"
    return parse


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive, finite number of seconds, got {text!r}")
    return value


@dataclass(frozen=True)
class Option:
    """One option of `python -m collector`: its flag, the Makefile variable that passes it (None: none),
    how it is parsed (`kind`: a parse function, `switch` (a flag), `append` (repeatable), or a
    `choices` tuple), its default, which executors use it (given to another: refused), and its help."""

    cli: str
    dest: str
    make: str | None
    help: str
    kind: object = str
    default: object = None
    choices: tuple | None = None
    metavar: str | None = None
    executors: tuple = BOTH

    @property
    def switch(self) -> bool:
        return self.kind == "switch"


def _axes() -> tuple[Option, ...]:
    return (
        Option("--models", "models", "MODELS", "comma-separated, options after a colon (gpt:layers=2,seq_len=128); "
               f"built in: {', '.join(models.names())}", parse_models),
        Option("--phases", "phases", "PHASES", ", ".join(mx.PHASES), csv(str)),
        Option("--modes", "modes", "MODES", ", ".join(mx.MODES), csv(str)),
        Option("--dtypes", "dtypes", "DTYPES", ", ".join(mx.DTYPES), csv(str)),
        Option("--batch-sizes", "batch_sizes", "BATCH_SIZES", "comma-separated batch sizes (default: each model's)",
               csv(int)),
        Option("--scopes", "compile_scopes", "SCOPES", ", ".join(mx.SCOPES), csv(str)),
        Option("--dynamic", "dynamic", "DYNAMIC", f"torch.compile dynamic shapes: {', '.join(mx.DYNAMIC)}", csv(str)),
    )


def _protocol() -> tuple[Option, ...]:
    """The protocol settings with an option (collector.record.settings.SETTINGS)."""
    return tuple(Option(s.cli, s.name, s.make, s.help, s.kind if s.kind is not bool else str,
                        choices=("0", "1") if s.kind is bool else None,
                        metavar="PCT" if s.name == "plant_slowdown_pct" else None)
                 for s in SETTINGS if s.cli)


RUN = (
    Option("--preset", "preset", "PRESET", f"auto (default on a GPU, smoke on a CPU), a name "
           f"({', '.join(mx.preset_names())}) or a path to a .toml file", default="auto"),
    Option("--device", "device", "DEVICE", "auto (cuda where there is one), cuda or cpu", choices=tuple(mx.DEVICES)),
    Option("--run-id", "run_id", "RUN", "run directory name (default: <preset>-<device>-torch<version>)"),
    Option("--out", "out", "RUNS", "parent of run directories (default data/runs)"),
    Option("--gpus", "gpus", "GPUS", "measure cells concurrently, one per GPU: comma-separated indices or 'all'; "
           "a GPU listed twice (0,0) takes two cells at a time, timed in turn while the other compiles "
           "(default: one cell at a time on the default device, the cleanest timing)", default="", executors=LOCAL),
    Option("--timed-cpus", "timed_cpus", "TIMED_CPUS", "where a GPU is listed more than once, the cores a cell's "
           "timed section runs on: 'worker' (its worker's share of the host, the default) or 'all' (every core "
           "this collector may use, back to the worker's share after; docs/scale-out.md)",
           choices=("worker", "all"), default="worker", executors=LOCAL),
    Option("--retry-failed", "retry_failed", "RETRY", "measure again the cells of this run whose saved row failed "
           "(crash, timeout, error, out of memory, an accuracy failure judged against eager)", "switch", default=False),
    Option("--stop-after", "stop_after", "STOP_AFTER", "wall-clock budget: start no new cell after this many "
           "seconds, nor one that the cells timed so far say would end past it (a command's first cell always "
           "starts; cells in flight finish); the same command resumes the rest", seconds, metavar="SECONDS",
           executors=LOCAL),
    Option("--shard", "shard", "SHARD", "measure only the K-th of N disjoint slices of the matrix (K from 1 to N), "
           "in its own run folder <run id>-shard<K>of<N>; `make merge` joins the shards", metavar="K/N"),
    Option("--cells", "cells", "CELLS", "only the matrix's cells whose id matches one of these shell patterns "
           "(e.g. 'gpt__infer__*__bs128__*'; --dry-run lists the ids)", csv(str), metavar="PATTERN[,PATTERN]"),
    Option("--executor", "executor", "EXECUTOR", "local: measure here (default); slurm: submit one SLURM array "
           "task per cell through submitit and return (progress: make collect-status RUN=<run id>)",
           choices=("local", "slurm"), default="local"),
    Option("--python", "pythons", "PYTHONS", "interpreter that runs each cell (default: this one). Repeat it to "
           "measure the same matrix under several interpreters (torch versions) on this machine, interleaved cell "
           "by cell; each writes its own run, <run id>-<LABEL> (LABEL default: torch<version>)", "append",
           metavar="[LABEL=]PATH"),
    Option("--plant-on", "plant_on", "PLANT_ON", "with several --python: plant the slowdown (--plant-slowdown) in "
           "these interpreters' runs only (default: all)", csv(str), metavar="LABEL[,LABEL]", executors=LOCAL),
    Option("--launcher", "launcher", "LAUNCHER", "how each cell process starts: fork it from a parent that has "
           "imported torch, Dynamo and Inductor once (default; saves ~8-10 s a process) or exec a fresh "
           "interpreter", choices=("fork", "exec"), default="fork" if hasattr(os, "fork") else "exec"),
    Option("--dry-run", "dry_run", None, "validate and list the cells, measure nothing", "switch", default=False),
    Option("--note", "note", "NOTE", "a line kept in run.json with this collecting command's record (what was special about "
           "the machine or the run: a driver update, another job beside it); the run report lists it",
           metavar="TEXT"),
)

SLURM_OPTIONS = (
    Option("--slurm-partition", "slurm_partition", "SLURM_PARTITION", "the partition", executors=SLURM),
    Option("--slurm-account", "slurm_account", "SLURM_ACCOUNT", "the account", executors=SLURM),
    Option("--slurm-constraint", "slurm_constraint", "SLURM_CONSTRAINT", "e.g. the GPU model's feature name",
           executors=SLURM),
    Option("--slurm-time", "slurm_time", "SLURM_TIME", "time limit of each cell's task (default 60)", whole(1),
           metavar="MINUTES", executors=SLURM),
    Option("--slurm-parallelism", "slurm_parallelism", "SLURM_PARALLELISM", "array tasks running at once "
           "(default 16)", whole(1), executors=SLURM),
    Option("--slurm-cpus", "slurm_cpus", "SLURM_CPUS", "CPUs per task (sbatch --cpus-per-task; default 8, at most "
           "half the partition's smallest node)", whole(1), metavar="N", executors=SLURM),
    Option("--slurm-gpus", "slurm_gpus", "SLURM_GPUS", "GPUs per task (default 1 for a CUDA matrix, 0 for a CPU "
           "one)", whole(0), metavar="N", executors=SLURM),
    Option("--slurm-mem", "slurm_mem", "SLURM_MEM", "memory per node, as sbatch takes it (e.g. 64G)", metavar="MEM",
           executors=SLURM),
    Option("--slurm-qos", "slurm_qos", "SLURM_QOS", "the quality of service", metavar="QOS", executors=SLURM),
    Option("--slurm-exclusive", "slurm_exclusive", "SLURM_EXCLUSIVE", "a whole node per task (sbatch "
           "--exclusive): no other job beside a timed cell", "switch", default=False, executors=SLURM),
    Option("--slurm-arg", "slurm_args", "SLURM_ARGS", "any other sbatch option, repeatable (e.g. gres=gpu:h200:1, "
           "reservation=bench; KEY alone: a flag)", "append", metavar="KEY[=VALUE]", executors=SLURM),
    Option("--site-profile", "site_profile", "SITE_PROFILE", "the site's settings (partition, account, qos, gres, "
           "cpus, mem, time, setup lines, sbatch options; docs/scale-out.md); a --slurm-* option given here wins "
           "over the file", metavar="FILE.toml", executors=SLURM),
    Option("--allow-mixed", "allow_mixed", "ALLOW_MIXED", "let nodes whose torch or GPU differs from the run's "
           "write their rows", "switch", default=False, executors=SLURM),
)


def all_options() -> tuple[Option, ...]:
    return RUN[:1] + _axes() + _protocol() + RUN[1:] + SLURM_OPTIONS


class Parser(argparse.ArgumentParser):
    """argparse with a short error: the one line that says what is wrong, the option named with the make
    variable that sets it (`--batch-sizes (BATCH_SIZES=)`), and where the valid choices are; not the
    whole usage, which buried that line under 28 others."""

    def error(self, message: str):
        for o in all_options():
            if o.make and f"argument {o.cli}" in message:
                message = message.replace(f"argument {o.cli}", f"argument {o.cli} ({o.make}=)", 1)
                break
        self.exit(2, f"{self.prog}: error: {message}\n({self.prog} --help lists every option; make help the "
                     "make variables)\n")


def add_to(parser: argparse.ArgumentParser) -> None:
    """Every option of the table, as argparse arguments."""
    for o in all_options():
        extra = dict(metavar=o.metavar) if o.metavar else {}
        if o.switch:
            parser.add_argument(o.cli, dest=o.dest, action="store_true", help=o.help)
        elif o.kind == "append":
            parser.add_argument(o.cli, dest=o.dest, action="append", default=None, help=o.help, **extra)
        else:
            kind = dict(choices=list(o.choices)) if o.choices else dict(type=o.kind)
            parser.add_argument(o.cli, dest=o.dest, default=o.default, help=o.help.replace("%", "%%"), **kind, **extra)


def unused_by(executor: str, args: argparse.Namespace) -> list[Option]:
    """The options given (not at their defaults) that `executor` does not use."""
    return [o for o in all_options() if executor not in o.executors
            and getattr(args, o.dest, None) not in (None, o.default, [], "")]


def refuse_unused(executor: str, args: argparse.Namespace) -> None:
    """ValueError naming every given option that `executor` would ignore, and which executor uses it."""
    unused = unused_by(executor, args)
    if unused:
        names = ", ".join(f"{o.cli} ({o.make}=)" if o.make else o.cli for o in unused)
        raise ValueError(f"{names}: not used by EXECUTOR={executor} (only by EXECUTOR="
                         f"{'/'.join(unused[0].executors)}); drop {'it' if len(unused) == 1 else 'them'}")


def reference_table() -> str:
    """docs/options.md's table of every `make collect` variable: its option, who uses it, what it does."""
    rows = ["| variable | option | executors | what it does |", "|---|---|---|---|"]
    for o in all_options():
        if o.make:
            rows.append(f"| `{o.make}` | `{o.cli}` | {', '.join(o.executors)} | {o.help.replace('%%', '%')} |")
    return "\n".join(rows) + "\n"


# passed by the Makefile by hand: PRESET and RUNS always (their defaults are the Makefile's), the
# interpreters from PYTHONS or PYTHON
BY_HAND = ("PRESET", "RUNS", "PYTHONS")
MAKE_FRAGMENT = Path(__file__).with_name("options.mk")


def _make_arg(o: Option) -> str:
    if o.switch:
        return f"$(if $(call on,$({o.make})),{o.cli})"
    if o.kind == "append":
        return f'$(foreach a,$({o.make}),{o.cli} $(call sq,$(a)))'
    return f"$(call opt,{o.cli},$({o.make}))"


def make_fragment() -> str:
    """collector/commands/options.mk, which the Makefile includes: every collect variable (for its check
    of unknown variables and for `make help`) and the options they pass."""
    made = [o for o in all_options() if o.make]
    names = " ".join(o.make for o in made)
    args = " \\\n  ".join(_make_arg(o) for o in made if o.make not in BY_HAND)
    return ("# Written by `python -m collector.commands.options --write` from collector/commands/options.py;\n"
            "# tests/test_options.py fails when it is stale. The Makefile includes it.\n"
            f"COLLECT_VARS := {names}\n"
            f"COLLECT_OPTION_ARGS = {args}\n")


if __name__ == "__main__":  # python -m collector.commands.options [--write]: the docs' table; --write: the files
    import sys

    if sys.argv[1:] == ["--write"]:
        MAKE_FRAGMENT.write_text(make_fragment())
        docs = Path(__file__).resolve().parents[2] / "docs" / "options.md"
        text = docs.read_text()
        start = text.index("| variable | option | executors | what it does |")
        end = text.index("\n\n", start) + 1
        docs.write_text(text[:start] + reference_table() + text[end:])
        print(f"wrote {MAKE_FRAGMENT} and the table in {docs}")
    else:
        print(reference_table(), end="")
