"""The protocol's settings, declared once: how each cell is measured (blocks, samples, processes, the
planted changes, the extra timings), with each setting's type, bounds, default, option, Make variable and
whether it changes what is measured (`must_match`). A run's run.json stores the protocol under these
names; the collector's Protocol dataclass, its CLI, the preset check, the upgrade of old manifests and
the one comparability rule (collector.record.comparable) are derived from this table. No torch.
"""
from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass


@dataclass(frozen=True)
class Setting:
    """One protocol setting, declared once: the Protocol dataclass, preset validation, the CLI
    (`cli`), the refusal to resume a run measured otherwise (`must_match`) and the value of runs made
    before the setting existed (`before`; collector.record.contract.PROTOCOL_BEFORE) are derived from
    this table, and the Makefile and the docs' option reference are checked against it."""

    name: str
    kind: type
    default: object
    lo: int | None = None
    hi: int | None = None
    must_match: bool = True  # it changes what is measured: a run resumed, a shard merged or a run compared
    # with another value is refused (collector.record.comparable)
    cli: str | None = None  # the collector's option, where it has one
    help: str = ""
    make: str | None = None  # the Makefile's variable for `cli` (tests/test_matrix.py holds the Makefile to it)
    before: object = None  # the value of runs made before the setting existed (None: it existed from the start)


SETTINGS = (
    Setting("blocks", int, 8, 1, 1000, cli="--blocks", make="BLOCKS", help="timed blocks per side (alternating eager/compiled)"),
    Setting("steps_per_block", int, 5, 1, 10000, cli="--steps-per-block", make="STEPS", help="samples per block (at least)"),
    Setting("min_block_ms", int, 100, 0, 60000, help="a block lasts at least this long"),
    Setting("min_sample_ms", int, 2, 0, 1000, help="a sample lasts at least this long (steps per sample)"),
    Setting("warmup_steps", int, 3, 0, 1000, cli="--warmup-steps", make="WARMUP", help="untimed steps per side before timing"),
    Setting("max_warmup_calls", int, 10, 3, 1000, must_match=False,
            help="compiled calls allowed until no compile event occurs"),
    Setting("timeout_s", int, 900, 1, 24 * 3600, must_match=False, cli="--timeout", make="TIMEOUT", help="seconds per cell process"),
    Setting("seed", int, 0, 0, 2**31 - 1, help="model and input seed"),
    # fresh processes that time each cell: the cold-compile one plus processes - 1 on its warm
    # cache (the process is the unit of repetition: docs/measurement.md)
    Setting("processes", int, 3, 1, 50, before=1, cli="--processes", make="PROCESSES",
            help="fresh processes that time each cell: the cold-compile one plus N-1 on its warm cache "
                 "(default 3; the process is the unit of repetition, docs/measurement.md)"),
    # replicates that compile cold, each in its own empty cache, instead of from the cold process's
    # warm cache: the compile's own draws (autotuning) then fall inside the processes' spread
    Setting("cold_replicates", bool, False, cli="--cold-replicates", make="COLD_REPLICATES", before=False,
            help="every replicate process compiles cold in its own empty cache instead of from the cold "
                 "process's warm cache: what one compile chose (autotuned launch configurations) then varies "
                 "between processes and the intervals hold it, and the cold compile gets one sample a process "
                 "(costs a compile a process; no warm-cache first call; default 0)"),
    # test option: extra work after each compiled step worth this % of its median (0: none)
    Setting("plant_slowdown_pct", int, 0, 0, 100, before=0, cli="--plant-slowdown", make="PLANT_SLOWDOWN",
            help="test option: add work worth PCT%% of the compiled step after each compiled step (a host busy "
                 "wait, plus the same GPU time on a GPU), to check that a comparison calls a change of known size"),
    # test option: a host sleep of this many ms inside every timed compiled first call (0: none)
    Setting("plant_compile_ms", int, 0, 0, 600000, before=0, cli="--plant-compile", make="PLANT_COMPILE",
            help="test option: add MS ms (a host sleep) inside every timed first call of the compiled side (cold, "
                 "warm, replicate), to check that a comparison calls a compile-time change of known size"),
    Setting("warm_compile", bool, True, must_match=False, cli="--warm-compile", make="WARM_COMPILE",
            help="also time compilation with a warm cache in a second process (default 1)"),
    Setting("portable_cache", bool, False, must_match=False, cli="--portable-cache", make="PORTABLE",
            help="also time a third process that loads the cold compile's portable cache artifacts into an "
                 "empty cache directory (torch.compiler.save/load_cache_artifacts; default 0)"),
    Setting("recompile_sweep", bool, False, must_match=False, cli="--recompile-sweep", make="SWEEP",
            help="inference cells: after timing, call the compiled step at x2, x4 and /2 the batch size in the "
                 "same process and record the first calls and recompiles (default 0)"),
    Setting("kernel_profile", bool, False, must_match=False, cli="--kernel-profile", make="PROFILE",
            help="after timing, in the cold process, profile each side's steps (torch.profiler) and record "
                 "its kernels by kind and name, per step (default 0)"),
    Setting("energy_windows", bool, True, must_match=False, cli="--energy-windows", make="ENERGY",
            help="after timing, in the cold process on a GPU, run each side back to back for 1 s between two "
                 "readings of the GPU's energy counter (*_energy_j; 2.1 s of an H100 screen cell's 26.4 s). "
                 "The suite presets screen without it (default 1)"),
    Setting("graph_capture", bool, True, must_match=False, cli="--graph-capture", make="GRAPH_CAPTURE", before=False,
            help="last in the cold process, trace the model's forward again with Dynamo and a backend that only "
                 "records, and keep the captured graph's ops (graph_ops_json: the comparison's 'same captured "
                 "graph or not'; default 1)"),
    Setting("tf32", bool, False, cli="--tf32", make="TF32", help="TF32 for float32 matmuls and convolutions (default 0)"),
)

MUST_MATCH = tuple(s.name for s in SETTINGS if s.must_match)
# what a run made before a protocol key existed did: the one place old run.json files are upgraded
BEFORE = {s.name: s.before for s in SETTINGS if s.before is not None}

Protocol = make_dataclass("Protocol", [(x.name, x.kind, field(default=x.default)) for x in SETTINGS], frozen=True)
Protocol.__doc__ = "How each cell is measured; stored with the run (fields: SETTINGS, declared once)."
Protocol.__module__ = __name__
