"""How a collection stops: the flag a stop signal sets, and the launchers it kills.

A signal handler only sets a flag and kills the cell processes in flight; the scheduler
(collector/host/runner.py) and the launchers (collector/host/launch.py) check the flag at every process
boundary. Shared by both, so neither imports the other for it.
"""
from __future__ import annotations

import threading

# Set by the CLI's signal handler before it raises KeyboardInterrupt. The raise can be lost: a
# signal that lands while a cell process is being forked is delivered inside an at-fork handler,
# where Python prints "Exception ignored" and carries on. Checked before and after every cell
# process, so a lost raise still stops the collection at the next process boundary.
INTERRUPTED = threading.Event()


REPORTED = threading.Event()  # the stop's message (what is saved, how to resume) has been printed
RUNNING: set = set()  # launchers with a cell process in flight (the stop handler kills them)


def interrupt(signum, frame) -> None:
    """SIGINT/SIGTERM handler. The stop is a flag and nothing else: the handler raises nothing
    (an exception raised in a handler can surface inside library code, e.g. Python's at-fork
    lock handling, which prints it and drops it). It kills the cell processes in flight so their
    waits end at once; the scheduler checks the flag before and after every cell process, stops
    there, and finishes run.json on the way out."""
    INTERRUPTED.set()
    for launcher in list(RUNNING):
        launcher.kill_now()


def check_interrupted() -> None:
    """Raise KeyboardInterrupt if a stop was requested (INTERRUPTED)."""
    if INTERRUPTED.is_set():
        raise KeyboardInterrupt("stop requested")


