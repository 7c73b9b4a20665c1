"""The shared turns' A/A and planted 5% on a machine without a GPU: the collector's real path
(collect_targets, fork launcher, cell processes) with two workers that share one timing lock, as
`GPUS=0,0` plans them on a GPU (on the CPU `--gpus` is refused, so the workers are made here), each on
its half of the cores. The `versions_gpu.sh turns` protocol on the `smoke` preset's MLP inference cells:

    python benchmarks/turns_cpu.py RUN     # data/runs/RUN-2-s, -2-s2, -2-p5 (shared, interleaved), RUN-1 (alone)
    python benchmarks/turns_cpu.py RUN --plant-compile 4000   # and RUN-2-pc beside them: every compiled
    # first call 4 s longer, where no cell's first call is called (each compiled beside the other's), only
    # their mean over the run (docs/comparison.md)
    # then gate each pair with only its two runs in the data folder (four runs of one build in one folder
    # pool into a run-to-run spread that calls nothing): the A/A RUN-2-s / RUN-2-s2; the plant RUN-2-s /
    # RUN-2-p5 (--allow-mismatch --max-regression 2%); shared against alone RUN-1 / RUN-2-s (docs/validation.md)

On the CPU the timed cell's neighbour compiles on the other cores and shares the caches and memory
bandwidth, which no lock keeps out: a check of the path and of what sharing a CPU host costs, not of a
GPU's figures (docs/scale-out.md).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collector.commands.executors import probe_env, without_plants  # noqa: E402
from collector.host.launch import ForkLauncher  # noqa: E402
from collector.host.runner import Target, collect_targets  # noqa: E402
from collector.host.workers import Worker, timing_lock_path  # noqa: E402
from collector.plan import matrix as mx  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run")
    ap.add_argument("--out", default="data/runs")
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--models", default="mlp", help="the smoke preset's models (two, e.g. mlp,gpt: the queue keeps a "
                    "model's two cells apart on the shared lock, collector/host/queue.py)")
    ap.add_argument("--plant-compile", type=int, default=0, metavar="MS",
                    help="a fourth shared run, RUN-2-pc, with every compiled first call MS longer")
    args = ap.parse_args(argv)
    matrix = mx.build_matrix("smoke", {"models": args.models.split(","), "phases": ["infer"], "processes": args.processes,
                                       "energy_windows": False})
    planted = dataclasses.replace(matrix, protocol=dataclasses.replace(matrix.protocol, plant_slowdown_pct=5))
    env = probe_env(sys.executable, "cpu")
    cores = sorted(os.sched_getaffinity(0))
    half = max(1, len(cores) // 2)
    lock = timing_lock_path(0)
    shared = [Worker(cpus=tuple(cores[:half]), timing_lock=lock), Worker(cpus=tuple(cores[half:] or cores),
                                                                       timing_lock=lock)]
    out = Path(args.out)
    targets = [Target(without_plants(planted), env, f"{args.run}-2-{label}", ForkLauncher(sys.executable), label=label)
               for label in ("s", "s2")] + \
        [Target(planted, env, f"{args.run}-2-p5", ForkLauncher(sys.executable), label="p5")]
    if args.plant_compile:
        compile_plant = dataclasses.replace(matrix, protocol=dataclasses.replace(
            matrix.protocol, plant_compile_ms=args.plant_compile))
        targets.append(Target(compile_plant, env, f"{args.run}-2-pc", ForkLauncher(sys.executable), label="pc"))
    collect_targets(targets, out, workers=shared)
    collect_targets([Target(without_plants(planted), env, f"{args.run}-1", ForkLauncher(sys.executable))], out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
