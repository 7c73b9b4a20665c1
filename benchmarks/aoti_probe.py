"""Does AOTInductor work with this torch on this device, and where does it break?

    python benchmarks/aoti_probe.py [--device cuda|cpu] [--timeout 300]

The `aot-inductor` cells of the H200 run died with SIGSEGV inside `aoti_load_package`
(torch 2.11.0+cu130). This probe separates the stages, each in its own process, with a
two-layer MLP (no harness, no buffers), so one command tells which one breaks:

1. build:       torch.export + aoti_compile_and_package, no load
2. fresh load:  aoti_load_package of that package in a new process, then one run
3. same process: export, compile, load and run in one process (what the collector's cell does)
4. same process with bf16 autocast inside forward (what an amp_bf16 cell exports)

Each line: stage, outcome (ok / exit code / signal name), seconds, last line of output.
"""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r'''
import faulthandler, sys, time
faulthandler.enable()
import torch
stage, device, path = sys.argv[1], sys.argv[2], sys.argv[3]
amp = stage == "same-amp"
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(device).eval()


class Wrapped(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        if amp:
            with torch.autocast(device, dtype=torch.bfloat16):
                return self.inner(x)
        return self.inner(x)


x = torch.randn(4, 64, device=device)
if stage in ("build", "same", "same-amp"):
    with torch.no_grad():
        program = torch.export.export(Wrapped(model), (x,))
    t0 = time.perf_counter()
    path = torch._inductor.aoti_compile_and_package(program, package_path=path)
    print(f"built in {time.perf_counter() - t0:.1f} s", flush=True)
if stage != "build":
    run = torch._inductor.aoti_load_package(path)
    print("loaded", flush=True)
    out = run(x)
    print(f"ran: output sum {float(out.float().sum()):.4f}", flush=True)
'''


def run_stage(stage: str, device: str, package: Path, timeout: float) -> tuple[str, float, str]:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, stage, device, str(package)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timeout after {timeout:.0f} s", time.perf_counter() - t0, ""
    code = proc.returncode
    outcome = "ok" if code == 0 else (f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit {code}")
    # what it got to (stdout), and on a failure what it said last (stderr: Python's or faulthandler's)
    said = proc.stdout if code == 0 else proc.stdout + proc.stderr
    lines = [ln.strip() for ln in said.splitlines() if ln.strip() and "Warning" not in ln]
    crash = [i for i, ln in enumerate(lines) if ln.startswith("Current thread")]
    if crash and crash[-1] + 1 < len(lines):  # faulthandler: the innermost frame of the crashing thread
        return outcome, time.perf_counter() - t0, "crashed in " + lines[crash[-1] + 1]
    return outcome, time.perf_counter() - t0, (lines[-1] if lines else "")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per stage")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="aoti-probe-") as tmp:
        built = Path(tmp) / "built.pt2"
        plan = [("build", built), ("fresh-load", built), ("same", Path(tmp) / "same.pt2"),
                ("same-amp", Path(tmp) / "same-amp.pt2")]
        for stage, package in plan:
            if stage == "fresh-load" and not built.exists():
                print(f"{stage:11s} skipped: no package was built", flush=True)
                continue
            outcome, secs, last = run_stage(stage, args.device, package, args.timeout)
            print(f"{stage:11s} {outcome:22s} {secs:6.1f} s  {last[:140]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
