"""Where a run's cells are measured: one interface, one small class per place (hyperfine's Executor
and asv's spawners are the model). The CLI (collector/__main__.py) turns its arguments into a
`Request` and hands it to the executor the user chose:

- `LocalExecutor`: this machine, one cell process at a time (or one per GPU), several interpreters
  interleaved (collector/host/runner.py);
- `SlurmExecutor`: one SLURM array task per cell, through submitit (collector/slurm/submit.py);
- shards are not an executor but a filter of the matrix (`--shard K/N`, collector/commands/shard.py) that
  either executor runs.

A test registers a stand-in in EXECUTORS to see the request the CLI builds without measuring.
"""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol as TypingProtocol

from collector.host import envinfo

from collector.commands import shard
from collector.models.check import check_all, check_in
from collector import models
from collector.plan import matrix as mx
from collector.host.launch import ForkLauncher, SubprocessLauncher
from collector.host.runner import Target, collect_targets
from collector.host.store import RunError, RunStore, check_run_id, default_run_id, left_to_measure
from collector.host.workers import plan_workers


@dataclass(frozen=True)
class SlurmOptions:
    """The --slurm-* options of one collect (collector/commands/options.py), before the site profile
    (--site-profile) fills what the command line left out."""

    partition: str | None = None
    account: str | None = None
    constraint: str | None = None
    time_min: int | None = None
    parallelism: int | None = None
    allow_mixed: bool = False
    cpus: int | None = None
    gpus: int | None = None
    mem: str | None = None
    qos: str | None = None
    exclusive: bool = False
    args: tuple[str, ...] = ()
    profile: str | None = None

    def as_dict(self) -> dict:
        """As collector.slurm.site_profile.with_profile takes them (the sbatch options a list)."""
        return {**asdict(self), "args": list(self.args)}


@dataclass
class Request:
    """What one collect command asks for, parsed and validated, before any interpreter is probed."""

    preset: str  # a name, a .toml path, or "auto" (resolved from the first interpreter's device)
    overrides: dict  # axes and protocol settings from the command line
    pythons: list[tuple[str | None, str]]  # (label or None, interpreter path), at least one
    out: Path
    run_id: str | None = None
    shard: tuple[int, int] | None = None
    cells: list[str] | None = None  # --cells patterns
    device: str | None = None
    gpus: str = ""
    timed_cpus: str = "worker"  # --timed-cpus: a shared GPU's timed sections on the worker's cores or on all
    launcher: str = "fork"
    retry_failed: bool = False
    stop_after_s: float | None = None
    plant_on: list[str] | None = None
    dry_run: bool = False
    note: str | None = None  # --note: kept with the session in run.json
    slurm: SlurmOptions = field(default_factory=SlurmOptions)

    def matrix(self, preset: str | None = None) -> mx.Matrix:
        """The matrix, narrowed to --cells and the shard; bad input fails here (MatrixError)."""
        return _sharded(mx.build_matrix(preset or self.preset, self.overrides), self.shard, self.cells)


class Executor(TypingProtocol):
    name: str

    def execute(self, req: Request) -> int:
        """Measure (or submit) what `req` asks; returns the exit code (0: done or submitted)."""
        ...


def _sharded(matrix: mx.Matrix, kn, patterns=None):
    """The matrix narrowed to --cells, then its K-th of N slices (collector/commands/shard.py)."""
    if patterns:
        matrix = mx.select_cells(matrix, patterns)
    if not kn:
        return matrix
    cells = shard.select(matrix.cells, *kn)
    print(f"shard {kn[0]}/{kn[1]}: {len(cells)} of the matrix's {len(matrix.cells)} cells")
    return dataclasses.replace(matrix, cells=cells)


def models_label(chosen) -> str:
    """A run's name for the models a command names (MODELS=): their names without options, joined, at most
    40 characters, and a digest of the full references, so two model lists never share a run."""
    import hashlib

    refs = [str(m) for m in chosen]
    names = "+".join(models_parse_name(r) for r in refs)
    slug = re.sub(r"[^A-Za-z0-9._+-]+", "-", names).strip("-.+").lower()[:40].rstrip("-.+")
    return f"{slug or 'models'}-{hashlib.sha1(','.join(refs).encode()).hexdigest()[:6]}"


def models_parse_name(ref: str) -> str:
    """A model reference's name without its options (hf:BertForMaskedLM:seq_len=64 -> hf:BertForMaskedLM)."""
    try:
        return models.parse_ref(ref)[0].rsplit("/", 1)[-1]
    except Exception:  # a reference the name check refuses later: its text
        return ref


def base_run_id(req, matrix, env: dict) -> str:
    """The run a command writes without RUN=: the preset's default run, or, where MODELS= names the
    models, a run of their own (never pooled into the preset's run, whose description they do not fit)."""
    chosen = req.overrides.get("models")
    return default_run_id(models_label(chosen) if chosen else matrix.preset, env)


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
    runs a cell (collector/slurm/submit.py: first_node_environment)."""
    try:
        return probe_env(python, device)
    except RunError:
        if device != "cuda":
            raise
        env = probe_env(python, "cpu")
        env.update(device="cuda", device_name=None, gpu_name="gpu")
        return env


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
    rule (collector.host.store.left_to_measure), so a file the collector would set aside (zero bytes,
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




PLANTS = ("plant_slowdown_pct", "plant_compile_ms")  # the protocol's test options that plant a change


def without_plants(matrix: mx.Matrix) -> mx.Matrix:
    """`matrix` with every planted change off: the runs PLANT_ON leaves out."""
    return dataclasses.replace(matrix, protocol=dataclasses.replace(matrix.protocol, **{k: 0 for k in PLANTS}))


class LocalExecutor:
    """This machine: every interpreter probed, its run folder opened, cells interleaved."""

    name = "local"

    def execute(self, req: Request) -> int:
        if req.preset != "auto" and req.dry_run:  # no environment probe: plan a GPU run from a machine without one
            return dry_run(req.matrix(), req.out, _shard_run_id(req.run_id, req.shard), req.retry_failed)
        matrix = req.matrix() if req.preset != "auto" else None
        env = probe_env(req.pythons[0][1], req.device or (matrix.device if matrix else "auto"))
        if matrix is None:
            preset = "default" if env["device"] == "cuda" else "smoke"
            matrix = req.matrix(preset)
            print(f"preset auto -> {preset} ({env['device']})")
        envs = [env] + [probe_env(path, env["device"]) for _, path in req.pythons[1:]]
        check_all([path for _, path in req.pythons], [c.model for c in matrix.cells], matrix.protocol.timeout_s)
        labels = target_labels([label for label, _ in req.pythons], envs)
        run_ids = self.run_ids(req, matrix, envs, labels)
        unknown = sorted(set(req.plant_on or []) - set(labels))
        if unknown:
            raise ValueError(f"--plant-on {','.join(unknown)}: no such interpreter label; valid: {', '.join(labels)}")
        if req.dry_run:
            for r in run_ids:
                dry_run(matrix, req.out, r, req.retry_failed)
            return 0
        workers = plan_workers(parse_gpus(req.gpus, env), timed_on_all=req.timed_cpus == "all")
        if req.timed_cpus == "all" and not any(w.timed_cpus for w in workers):
            print("note: --timed-cpus all changes nothing here: no GPU is listed more than once in --gpus "
                  "(e.g. GPUS=0,0,0), so every cell already runs on its worker's cores alone", file=sys.stderr)
        targets = []
        for (_, path), e, label, run_id in zip(req.pythons, envs, labels, run_ids):
            m = matrix
            if req.plant_on and label not in req.plant_on:
                m = without_plants(matrix)
            launcher = (ForkLauncher(path, device=e["device"]) if req.launcher == "fork"
                        else SubprocessLauncher(path))
            targets.append(Target(m, e, run_id, launcher, label=label, note=req.note))
        for run_dir in collect_targets(targets, req.out, workers=workers, retry_failed=req.retry_failed,
                                       stop_after_s=req.stop_after_s):
            print(f"done: {run_dir}  (make report renders it)")
        return 0

    @staticmethod
    def run_ids(req: Request, matrix: mx.Matrix, envs: list[dict], labels: list[str]) -> list[str]:
        """One run per interpreter: RUN (or the default id), with the label appended when there are several."""
        if len(envs) == 1:
            return [_shard_run_id(req.run_id or base_run_id(req, matrix, envs[0]), req.shard)]
        run_ids = [_shard_run_id(f"{req.run_id}-{label}" if req.run_id else base_run_id(req, matrix, e)
                                 + (f"-{label}" if label != f"torch{e['torch_version']}" else ""), req.shard)
                   for label, e in zip(labels, envs)]
        for r in run_ids:
            check_run_id(r)
        if len(set(run_ids)) != len(run_ids):
            raise ValueError(f"the interpreters would share a run ({', '.join(run_ids)}): label them, --python LABEL=PATH")
        return run_ids


class SlurmExecutor:
    """One SLURM array task per cell (collector/slurm/submit.py); returns after submitting."""

    name = "slurm"

    def execute(self, req: Request) -> int:
        from collector.slurm import submit as slurm

        if req.preset == "auto":
            raise ValueError("EXECUTOR=slurm needs a preset (PRESET=...): the nodes' device is not known here")
        matrix = req.matrix()
        if req.dry_run:
            return dry_run(matrix, req.out, _shard_run_id(req.run_id, req.shard), req.retry_failed)
        if len(req.pythons) > 1:
            raise ValueError("several --python interpreters are measured interleaved on one machine; "
                             "EXECUTOR=slurm takes one")
        python = req.pythons[0][1]
        env = _submit_env(python, req.device or matrix.device)
        check_in(python, [c.model for c in matrix.cells], matrix.protocol.timeout_s)
        opts = slurm.with_profile(req.slurm.as_dict())
        settings = slurm.settings_from(opts, env["device"])
        run_id = _shard_run_id(req.run_id or base_run_id(req, matrix, env), req.shard)
        slurm.submit_run(matrix, env, req.out, run_id, slurm.SubmititExecutor(settings),
                         allow_mixed=opts.get("allow_mixed", False), resubmit_failed=req.retry_failed,
                         python=python, settings=settings, launcher=req.launcher, note=req.note)
        return 0


EXECUTORS: dict[str, type] = {"local": LocalExecutor, "slurm": SlurmExecutor}
