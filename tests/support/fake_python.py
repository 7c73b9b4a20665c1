"""Stands in for the interpreter the collector starts (`--python`), for fault tests.

    fake_python.py -m collector.host.envinfo DEVICE   -> a fixed environment
    fake_python.py -m collector.child.cell SPEC OUT    -> after FAKE_CELL_SECONDS (default 0.1-0.4 s,
                                                    random), a plausible ok result
Every cell it finishes is appended to $FAKE_CELL_LEDGER (one cell id per line), so a test can
count how often each cell was measured. $FAKE_CELL_PRINT_MB prints that many MiB first (a cell
that floods its log); $FAKE_CELL_ABORT prints that text and aborts without a result (a native
crash, e.g. std::bad_alloc). $FAKE_PROBE_SECONDS makes the environment probe take that long ($FAKE_PROBE_SECONDS_IN_SLURM: in a SLURM task only); $FAKE_PROBE_FAIL_IN_SLURM
makes it fail inside a SLURM job (a broken node; the submitting host's probe still answers).
"""
import json
import os
import random
import socket
import sys
import time

args = sys.argv[1:]
if args[:2] == ["-m", "collector.host.envinfo"]:
    time.sleep(float(os.environ.get("FAKE_PROBE_SECONDS", 0)))  # a slow probe (importing torch)
    if os.environ.get("SLURM_JOB_ID"):  # slow on the nodes only, not where the run is submitted
        time.sleep(float(os.environ.get("FAKE_PROBE_SECONDS_IN_SLURM", 0)))
    if os.environ.get("FAKE_PROBE_FAIL_IN_SLURM") and os.environ.get("SLURM_JOB_ID"):
        sys.exit("fake_python: this node's torch does not import")  # a broken node, not the submitter
    print(json.dumps({"device": "cpu", "device_name": "Fake CPU", "gpu_name": None, "torch_version": "0.0+fake",
                      "hostname": socket.gethostname(), "cpu_model": "Fake CPU", "cpu_count": 1}))
elif args[:2] == ["-m", "collector.child.cell"]:
    spec = json.loads(open(args[2]).read())
    if os.environ.get("FAKE_CELL_PRINT_MB"):
        line = ("x" * 1023 + "\n").encode()
        for _ in range(int(float(os.environ["FAKE_CELL_PRINT_MB"]) * 1024)):
            sys.stdout.buffer.write(line)
        sys.stdout.buffer.write(b"[cell +   1.0s] the last step before the end\n")
        sys.stdout.flush()
    if os.environ.get("FAKE_CELL_ABORT"):
        sys.stderr.write(os.environ["FAKE_CELL_ABORT"] + "\n")
        sys.stderr.flush()
        os.abort()
    time.sleep(float(os.environ.get("FAKE_CELL_SECONDS", random.uniform(0.1, 0.4))))
    c = spec["cell"]
    cell_id = "__".join([c["model"], c["phase"], c["dtype"], f"bs{c['batch_size']}", c["mode"], c["compile_scope"]])
    result = {"status": "ok", "eager_step_ms": [1.0] * 4, "compiled_step_ms": [0.5] * 4,
              "first_call_eager_s": 0.1, "first_call_compiled_s": 1.0}
    if spec.get("kind") == "warm":
        result = {"status": "ok", "warm_first_call_compiled_s": 0.2}
    elif spec.get("kind", "cold") == "cold" and os.environ.get("FAKE_CELL_LEDGER"):
        with open(os.environ["FAKE_CELL_LEDGER"], "a") as fh:
            fh.write(cell_id + "\n")
    with open(args[3] + ".tmp", "w") as fh:
        json.dump(result, fh)
    os.replace(args[3] + ".tmp", args[3])
else:
    sys.exit(f"fake_python: unexpected arguments {args}")
