"""A run folder that several writers on several hosts share (a SLURM job array on a shared
filesystem): claim a cell, write its row atomically, list what is done, failed or claimed.

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

    def create(self) -> None:
        for d in (self.cells_dir, self.claims_dir, self.logs_dir):
            d.mkdir(parents=True, exist_ok=True)

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
