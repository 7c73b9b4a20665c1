"""One scratch folder per collector process: everything temporary goes there, nothing elsewhere.

`with session():` makes `$TMPDIR/tcb-scratch-<pid>/` (mode 0700), points this process's `tempfile`
and the TMPDIR its children inherit at it (the per-cell Inductor and Triton caches, the cell logs'
temporary files, the fork server's sentinel, and what Inductor writes to the temporary folder on its
own, such as its precompiled header), and removes it at exit. A collector killed with SIGKILL cannot
clean up: the next collector to start removes every `tcb-scratch-<pid>` whose process is gone.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path

from collector.contract import pid_alive

PREFIX = "tcb-scratch-"
_NAME = re.compile(re.escape(PREFIX) + r"(\d+)")


def sweep(base: Path) -> list[Path]:
    """Remove the scratch folders of collectors that are gone (killed); returns what was removed."""
    gone = []
    try:
        entries = list(Path(base).iterdir())
    except OSError:
        return gone
    for p in entries:
        m = _NAME.fullmatch(p.name)
        if m and int(m.group(1)) != os.getpid() and not pid_alive(int(m.group(1))):
            shutil.rmtree(p, ignore_errors=True)
            gone.append(p)
    return gone


@contextlib.contextmanager
def session():
    """This process's scratch folder for the duration of the block (see the module's docstring)."""
    base = Path(tempfile.gettempdir())
    sweep(base)
    folder = base / f"{PREFIX}{os.getpid()}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700)
    saved_tempdir, saved_env = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir = os.environ["TMPDIR"] = str(folder)
    try:
        yield folder
    finally:
        tempfile.tempdir = saved_tempdir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        shutil.rmtree(folder, ignore_errors=True)
