"""A run folder: the one place that writes and lists its rows. The local collector uses it as its
only writer (under its run lock); a SLURM job array shares it between many writers on many hosts
(a shared filesystem): claim a cell, write its row atomically, list what is done, failed or claimed.

No file lock is relied on across hosts (NFS does not promise one). A claim is a file created
with O_CREAT | O_EXCL, which is atomic on local filesystems and on NFS v3 and later: of two jobs
given the same cell, one creates the claim and measures, the other leaves it. A row is written to
a temporary name in the same folder and renamed (collector.schema.write_row), so a reader never
sees half a row. A claim whose job died stays behind; only the submitting side, which can ask the
scheduler whether that job is still alive, removes it (`release_stale`).
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from collector import schema


class RunStore:
    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.cells_dir = self.run_dir / "cells"
        self.claims_dir = self.run_dir / "claims"
        self.logs_dir = self.run_dir / "logs"

    def create(self, shared: bool = False) -> None:
        """The folders; `shared`: also the claims folder, for a run many writers share."""
        for d in (self.cells_dir, self.logs_dir) + ((self.claims_dir,) if shared else ()):
            d.mkdir(parents=True, exist_ok=True)

    def check_writable(self) -> None:
        """OSError now, not after the first cell, if rows cannot be written here."""
        probe = self.cells_dir / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()

    def sweep_temporaries(self) -> int:
        """Remove the temporary files an earlier writer left when it was killed. Only for a single
        writer (the local collector, under its run lock): on a shared run a task may be writing one."""
        n = 0
        for folder in (self.run_dir, self.cells_dir):
            for tmp in folder.glob(".*.tmp"):
                try:
                    tmp.unlink()
                    n += 1
                except OSError:
                    pass
        return n

    def set_aside_bad(self, out) -> dict[str, str | None]:
        """Saved cell files that cannot stand for their cell (zero bytes, truncated, another cell's
        row) are renamed `<name>.parquet.invalid` (kept for inspection, never read) and measured
        again. Returns the good ones: cell id -> saved status."""
        good = {}
        for path in sorted(self.cells_dir.glob("*.parquet")):
            why, status = schema.read_saved(path)
            if why is None:
                good[path.stem] = status
                continue
            aside = path.with_name(path.name + ".invalid")
            os.replace(path, aside)
            print(f"note: {path.name} is {why}; renamed to {aside.name} and measured again", file=out, flush=True)
        return good

    def _claim_path(self, cell_id: str) -> Path:
        return self.claims_dir / f"{cell_id}.claim"

    def claim(self, cell_id: str, owner: dict) -> bool:
        """Take the cell for `owner` (job id, host); False if another holds it or its row exists."""
        if (self.cells_dir / f"{cell_id}.parquet").exists():
            return False
        try:
            fd = os.open(self._claim_path(cell_id), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as fh:
            json.dump({**owner, "host": socket.gethostname(), "pid": os.getpid(), "claimed_at": time.time()}, fh)
        return True

    def release(self, cell_id: str) -> None:
        self._claim_path(cell_id).unlink(missing_ok=True)

    def claims(self) -> dict[str, dict]:
        """cell id -> its claim's owner ({} for a claim being written or unreadable)."""
        out = {}
        for path in sorted(self.claims_dir.glob("*.claim")) if self.claims_dir.exists() else []:
            try:
                out[path.name[:-len(".claim")]] = json.loads(path.read_text())
            except (OSError, ValueError):
                out[path.name[:-len(".claim")]] = {}
        return out

    def release_stale(self, alive) -> list[str]:
        """Remove the claims whose owner's job `alive(job_id)` says is gone; returns their cells."""
        gone = []
        for cell_id, owner in self.claims().items():
            if not alive(owner.get("job_id")):
                self.release(cell_id)
                gone.append(cell_id)
        return gone

    def write_row(self, row: dict) -> Path:
        path = self.cells_dir / f"{row['cell_id']}.parquet"
        schema.write_row(row, path)
        return path

    def saved(self) -> dict[str, str | None]:
        """cell id -> status of every readable saved row (a broken file is left out: not done)."""
        out = {}
        for path in sorted(self.cells_dir.glob("*.parquet")) if self.cells_dir.exists() else []:
            why, status = schema.read_saved(path)
            if why is None:
                out[path.stem] = status
        return out

    def cell_walls(self) -> list[float]:
        """Wall seconds of the saved rows (for an ETA)."""
        import pyarrow.parquet as pq

        walls = []
        for path in sorted(self.cells_dir.glob("*.parquet")) if self.cells_dir.exists() else []:
            try:
                value = pq.read_table(path, columns=["cell_wall_s"]).column(0)[0].as_py()
            except Exception:  # noqa: BLE001 - a broken file gives no wall time, nothing more
                continue
            if value:
                walls.append(float(value))
        return walls
