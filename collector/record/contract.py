"""What the collector and the analysis share, and nothing else: no torch, no duckdb, no numpy.

The analysis reads rows the collector wrote; these are the names and small rules both sides must
agree on, in one place: the mode labels (from the mode registry, collector/modes/), the per-process
medians of a row's stored samples (the statistic the progress line and the report both quote), the
threshold at which a cell's processes disagree, the step lines a cell process logs, the name
of a SLURM task's record of the other jobs on its node, what a kernel profile counts as a kernel,
and how two autotune records are read and compared.
The row's columns and schema version live in collector/record/schema.py (also torch-free).
"""
from __future__ import annotations

import json

import re
import statistics

from collector import modes
from collector.record import settings

MODES = modes.names()  # every mode of the registry, in its order
CUDAGRAPH_MODES = tuple(m.name for m in modes.all_specs() if m.cudagraphs)  # modes that replay CUDA graphs

# processes "disagree" when their speedups span more than 5% (max / min - 1)
DISAGREE = 0.05

# a cell that ran out of memory beside other cells on one GPU (GPUS=0,0,0): not the model's need until
# measured alone (collector/host/alone.py). Its row's status is OOM_SHARED and its error opens with
# SHARED_GPU_OOM_HEAD (collector/host/cell_measure.SHARED_GPU_OOM); rows written before the status
# existed say `oom` with that error, and read as OOM_SHARED (shared_status; analysis/data/sql/upgrade.sql)
OOM_SHARED = "oom_shared"
SHARED_GPU_OOM_HEAD = "out of memory on a GPU shared with another cell"


# the accuracy check (collector/child/accuracy.py): a compiled error against the float64 reference passes up
# to max(tolerance, ERROR_MULTIPLIER x eager's own error against it)
ERROR_MULTIPLIER = 3.0


def accuracy_allowed(eager: float | None, tol: float) -> float:
    """The largest compiled error that passes: max(tol, ERROR_MULTIPLIER x eager's error), or tol where
    eager has no error to read (no wider reference, or nan)."""
    return tol if eager is None or eager != eager else max(tol, ERROR_MULTIPLIER * eager)


def accuracy_blind(tol: float | None, eager_errors: list) -> bool:
    """Whether a passed accuracy check could not have failed: for every quantity it compared (the output; the
    gradients too in training) eager's own error against the float64 reference was read, and the error allowed
    is at least 1.0, the error of an all-zero output (GPT-Neo's bf16 eager output is 36-48% from float64;
    a detection model's boxes after its top-k selection, 72%): a wrong compiled output passes there."""
    return bool(eager_errors) and all(e is not None and e == e and accuracy_allowed(e, tol or 0.0) >= 1.0
                                      for e in eager_errors)


def eager_errors(row: dict) -> list:
    """Eager's own errors against the reference for the quantities a row's phase compares: the output;
    the gradients too in training."""
    return [row.get("eager_output_rel_err")] + ([row.get("eager_grad_rel_err")] if row.get("phase") == "train" else [])


ACCURACY_QUANTITIES = ("output", "gradients")  # in eager_errors' order


def accuracy_blind_parts(row: dict) -> list[str]:
    """The quantities of a row's passed accuracy check whose own check could not have failed (accuracy_blind
    of each alone): ["output", "gradients"] for a wholly blind training cell; ["gradients"] where the output
    was checked and the gradients not (ResNet-50's bf16 training gradients in eager are 131% from float64's on
    an H200, default-h200: a check allowing 3x that passes any gradients of about their size, or none)."""
    if not row.get("accuracy_ok"):
        return []
    return [q for q, e in zip(ACCURACY_QUANTITIES, eager_errors(row)) if accuracy_blind(row.get("tolerance"), [e])]


def accuracy_unchecked(row: dict) -> bool:
    """Whether a row's accuracy check passed but could not have failed: blind in every quantity it compared."""
    return len(accuracy_blind_parts(row)) == len(eager_errors(row))


def shared_status(status: str | None, error: str | None) -> str | None:
    """A row's status in today's terms: an older row out of memory beside another cell (status `oom`, its
    error opening with SHARED_GPU_OOM_HEAD) is OOM_SHARED; every other status is itself."""
    return OOM_SHARED if status == "oom" and (error or "").startswith(SHARED_GPU_OOM_HEAD) else status


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def pid_alive(pid: int) -> bool:
    """Whether a process of this id exists (the temporary folders both sides name by pid are swept
    only once their process is gone)."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cell_id_of(model: str, phase: str, dtype: str, batch_size: int, mode: str, compile_scope: str,
               dynamic: str | None = "auto") -> str:
    """A cell's file-name-safe identity from its key (collector.plan.matrix.Cell.cell_id; the analysis checks
    that a row's cell_id is the one its key gives, so a relabelled copy cannot count a cell twice)."""
    parts = [model, phase, dtype, f"bs{batch_size}", mode, compile_scope]
    if dynamic not in (None, "auto"):
        parts.append(f"dyn-{dynamic}")
    # a path reference (../m.py:build, /abs/m.py:build) would start the file name with '.' (hidden from ls)
    # or '-' (read as an option by ls and rm): the model part starts with a letter or digit
    return "__".join(_SAFE.sub("-", str(p)).lstrip(".-") or "-" for p in parts)


SOURCE_PREFIXES = ("timm", "hf", "tv")
SUITES = {"timm": "timm", "hf": "huggingface", "tv": "torchvision", "user": "user", None: "builtin"}


def model_source(ref: str) -> str | None:
    """Where a model reference comes from: 'timm', 'hf', 'tv' (torchvision), 'user' (module.path:function or
    file.py:function) or None (a built-in model: `name` or `name:k=v,...`)."""
    head, _, rest = str(ref).partition(":")
    if head in SOURCE_PREFIXES:
        return head
    second = rest.partition(":")[0]
    if head.endswith(".py") or "/" in head or "." in head or (rest and "=" not in second and second.isidentifier()):
        return "user"
    return None


REDUCE_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "encoder_layers", "decoder_layers")


def reduced_layers(model: str) -> str | None:
    """'num_hidden_layers=4' where a sourced model's options set its layer count (a model run with fewer
    layers than published: the suite table names it), else None."""
    if model_source(model) not in SOURCE_PREFIXES:
        return None
    opts = str(model).split(":", 2)[2] if str(model).count(":") >= 2 else ""
    got = [kv for kv in opts.split(",") if kv.partition("=")[0].strip() in REDUCE_KEYS]
    return ",".join(got) or None


def suite_of(model: str) -> str:
    """The suite a row's model belongs to: timm, huggingface, user or builtin."""
    return SUITES[model_source(model)]


# the packages that build or run a model beside torch: a change of any of them changes the measured
# program as a torch version would (transformers picks code paths by torch's version), so every run
# records their versions (run.json's environment `model_packages`, the rows' packages_json) and a
# comparison names the ones that differ
MODEL_PACKAGES = ("transformers", "timm", "torchvision", "triton", "numpy")
# of those, the ones a torch build brings with it (a torch release pins its Triton and pairs with one
# torchvision): they differ whenever the torch does, and count as the torch's side of a comparison
TORCH_STACK = ("triton", "torchvision")
USER_FILE = "user_file"  # packages_json's key for a user model file's sha256 (first 16 hex digits)


def model_packages() -> dict[str, str | None]:
    """{package: installed version or None} of MODEL_PACKAGES in this interpreter, read from the
    installed metadata (nothing is imported). Triton's CUDA builds are named pytorch-triton in some
    releases."""
    import importlib.metadata as md

    out: dict[str, str | None] = {}
    for name in MODEL_PACKAGES:
        for dist in (name, "pytorch-triton") if name == "triton" else (name,):
            try:
                out[name] = md.version(dist)
                break
            except md.PackageNotFoundError:
                out[name] = None
    return out


def package_differences(a: dict | None, b: dict | None, torch_stack: bool = False) -> list[tuple[str, object, object]]:
    """[(package, version in A, version in B)] of the model packages whose versions differ between two
    records ({package: version}), TORCH_STACK's left out unless `torch_stack`; empty where either
    record is missing (not recorded)."""
    if not a or not b:
        return []
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b))
            if a.get(k) != b.get(k) and (torch_stack or k not in TORCH_STACK)]


LOG_STEP = re.compile(r"^\[cell \+\s*[\d.]+s\] (.+)$", re.M)  # the lines a cell process logs


def last_logged_step(text: str) -> str | None:
    """The last step a cell process logged in `text` (a cell log or the tail kept in a row's error)."""
    steps = LOG_STEP.findall(text or "")
    return steps[-1].strip() if steps else None


def is_annotation(name: str) -> bool:
    """A profiler range around kernels, not a kernel: torch.profiler records record_function ranges
    (Optimizer.step#AdamW.step, ## Call CompiledFxGraph ... ##) on the GPU's timeline as well, where
    they would count their kernels twice (the kernel profile, collector/child/profile.py)."""
    return "#" in name and "(" not in name


_KERNEL_INDEX = re.compile(r"_\d+$")
_LIBRARY = re.compile(r"^(nvjet|sm\d+_xmma|cutlass|ampere|hopper|sm\d+)_", re.I)
FAMILIES_KEPT = 150  # kernel families a profile keeps by name per side; the rest is summed under "(others)"


def kernel_family(name: str) -> str:
    """A kernel's family: its name without what changes between two compiles of the same work.
    Inductor numbers its kernels (triton_poi_fused_add_mul_3 -> triton_poi_fused_add_mul); a library
    kernel loses its template arguments and parameters (at::native::elementwise_kernel); cuBLAS and
    CUTLASS kernels named by their tile shape are one family per library (nvjet)."""
    text = re.sub(r"(CompiledFxGraph) \w{16,}", r"\1", name)  # a host range named by the graph's hash
    text = text.replace("void ", "").replace("(anonymous namespace)::", "").strip()
    text = re.sub(r"_knob_\w*$", "", text)  # cuDNN's generated kernels: their tuning knobs and tile shape
    text = re.split(r"[<(]", text, maxsplit=1)[0].strip()
    lib = _LIBRARY.match(text)
    if lib:
        return lib.group(1).lower()
    return _KERNEL_INDEX.sub("", text) or name


def autotune_record(raw) -> dict | None:
    """A row's autotune record (schema v8 `autotune_json`, written by collector/host/autotune.py) as a dict
    with a `kernels` mapping; None for a null, unreadable or malformed value."""
    if not raw:
        return None
    try:
        rec = json.loads(raw) if isinstance(raw, str) else raw
    except (TypeError, ValueError):
        return None
    return rec if isinstance(rec, dict) and isinstance(rec.get("kernels"), dict) else None


def autotune_differences(a: dict | None, b: dict | None) -> list[tuple[str, str, str]]:
    """[(kernel, configuration in a, in b)] for the kernels both autotune records name with different
    choices, by name: meaningful between compiles of one torch (a kernel's name is its place in the
    graph); across versions the same name may be another kernel. The one comparison of two records,
    for the collector (a cold replicate against its cold process) and the analysis (two runs)."""
    ka, kb = (a or {}).get("kernels") or {}, (b or {}).get("kernels") or {}
    return [(k, ka[k], kb[k]) for k in sorted(set(ka) & set(kb)) if ka[k] != kb[k]]


def autotune_processes(rec: dict | None) -> list[dict | None] | None:
    """Each process's autotuned launch configurations from a record with cold replicates
    (collector/host/autotune.py with_replicates): the cold process's, then each replicate's (the cold
    process's with the replicate's recorded differences; None for a replicate without a record).
    None for a record without replicates. The inverse of with_replicates, for the analysis and the
    benchmarks."""
    if rec is None or not rec.get("replicates"):
        return None
    base = dict(rec.get("kernels") or {})
    return [base] + [{**base, **(x.get("kernels") or {})} if isinstance(x, dict) else None
                     for x in rec["replicates"]]


NODE_JOBS = ".node-jobs.json"  # logs/<cell>.node-jobs.json: other SLURM jobs on a cell's node (collector/slurm/task.py)
# protocol keys added after runs were first collected, with the value every run made before had:
# the one place old run.json files are upgraded (upgrade_manifest), for the collector resuming a
# run and for the analysis reading one
PROTOCOL_BEFORE = settings.BEFORE  # {key: value} from the settings table's `before`


def upgrade_manifest(manifest: dict) -> dict:
    """run.json as the current code reads it: a copy whose protocol has every key PROTOCOL_BEFORE
    names (an old run's missing key is the value such runs had). Nothing else is invented."""
    out = dict(manifest)
    if isinstance(out.get("protocol"), dict):
        out["protocol"] = {**PROTOCOL_BEFORE, **out["protocol"]}
    return out


def process_medians(values, processes) -> list[float]:
    """Median of each process's samples, a row's list column stored one process after the other
    (the last `len % processes` samples, if any, belong to no process). The one implementation:
    the progress line, the statistics (analysis/stats/core.py) and the comparison use it; the SQL twin in
    analysis/data/sql/cell_stats.sql computes the same (a test holds them together)."""
    values = list(values or [])
    p = max(1, int(processes or 1))
    n = len(values) // p
    out = []
    for i in range(p if n else 0):  # sliced by position first: a sample left out (None, NaN) moves no other
        kept = [v for v in values[i * n:(i + 1) * n] if v is not None and v == v]
        if kept:
            out.append(statistics.median(kept))
    return out
