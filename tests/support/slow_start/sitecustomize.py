"""On PYTHONPATH, a slow interpreter start in a SLURM task: $FAKE_START_SECONDS_IN_SLURM seconds of
sleep before any of the task's code (site imports on a slow file system, say); elsewhere nothing."""
import os
import time

if os.environ.get("SLURM_JOB_ID") and os.environ.get("FAKE_START_SECONDS_IN_SLURM"):
    time.sleep(float(os.environ["FAKE_START_SECONDS_IN_SLURM"]))
