"""One scratch folder per collector process: everything temporary goes there, nothing elsewhere.

`with session():` makes `$TMPDIR/tcb-scratch-<pid>/` (mode 0700), points this process's `tempfile`
and the TMPDIR its children inherit at it (the per-cell Inductor and Triton caches, the cell logs'
temporary files, the fork server's sentinel, and what Inductor writes to the temporary folder on its
own), and removes it at exit. A collector killed with SIGKILL cannot clean up: the next collector to
start removes every `tcb-scratch-<pid>` whose process is gone.

One thing stays shared: Inductor's precompiled C++ headers (`torchinductor_<user>/precompiled_headers`,
~150 MB), which PyTorch keeps global on purpose (compiler state, reused by every later process).
Rebuilt in each scratch folder, they landed in the cold compile of each collect's first CPU cell
(MLP inference: 10.4 s against 6.6-8.0 s for the other cells, 6.3 s before the scratch folder); so
the scratch folder holds a link to the machine's shared folder instead.
"""
from __future__ import annotations

import contextlib
import getpass
import os
import re
import shutil
import tempfile
from pathlib import Path

from collector.record.contract import pid_alive

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


def _share_precompiled_headers(base: Path, folder: Path) -> None:
    """folder/torchinductor_<user>/precompiled_headers -> base/torchinductor_<user>/precompiled_headers
    (the path torch._inductor.codecache derives from the temporary folder)."""
    try:
        user = re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    shared = base / f"torchinductor_{user}" / "precompiled_headers"
    try:
        shared.mkdir(parents=True, exist_ok=True)
        (folder / f"torchinductor_{user}").mkdir()
        (folder / f"torchinductor_{user}" / "precompiled_headers").symlink_to(shared, target_is_directory=True)
    except OSError:
        pass  # no shared folder: the headers are built in the scratch folder and removed with it


@contextlib.contextmanager
def session():
    """This process's scratch folder for the duration of the block (see the module's docstring)."""
    base = Path(tempfile.gettempdir())
    sweep(base)
    folder = base / f"{PREFIX}{os.getpid()}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700)
    _share_precompiled_headers(base, folder)
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
