"""A run folder: its manifest (run.json: created, reopened, refused when the environment or the
protocol differs), its lock, and the one place that writes and lists its rows. The local collector uses it as its
only writer (under its run lock); a SLURM job array shares it between many writers on many hosts
(a shared filesystem): claim a cell, write its row atomically, list what is done, failed or claimed.

No file lock is relied on across hosts (NFS does not promise one). A claim is a file created
with O_CREAT | O_EXCL, which is atomic on local filesystems and on NFS v3 and later: of two jobs
given the same cell, one creates the claim and measures, the other leaves it. A row is written to
a temporary name in the same folder and renamed (collector.record.schema.write_row), so a reader never
sees half a row. A claim whose job died stays behind; only the submitting side, which can ask the
scheduler whether that job is still alive, removes it (`release_stale`).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import re
import socket
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

from collector.record import cellfile, schema
from collector.record import comparable
from collector.record import manifest as manifest_record
from collector.record.contract import pid_alive
from collector.plan.matrix import Matrix

PROJECT_ROOT = Path(__file__).resolve().parents[2]


RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
class RunError(RuntimeError):
    """The run cannot go on (locked, mismatched environment, unwritable directory)."""


def default_run_id(preset: str, env: dict) -> str:
    """`<preset>-<device>-torch<version>`: the same command on the same setup resumes the same run."""
    device = env["gpu_name"] if env["device"] == "cuda" else "cpu"
    raw = f"{preset}-{device}-torch{env['torch_version']}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", raw).strip("-").lower()


def check_run_id(run_id: str) -> str:
    if not RUN_ID_RE.match(run_id or ""):
        raise ValueError(f"invalid run id {run_id!r}: use 1-100 letters, digits, '.', '_' or '-', "
                         "starting with a letter or digit (no slashes, no '..')")
    return run_id


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _project_sha(root: Path = PROJECT_ROOT) -> str | None:
    """The checkout's commit, with '-dirty' where a tracked file differs from it (a copied working
    tree beside older git metadata reads dirty, not as the older commit); None without git."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
    try:
        sha = git("rev-parse", "HEAD")
        if not sha:
            return None
        return sha + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.SubprocessError):
        return None


def source_fingerprint() -> str:
    """SHA-1 over the collector's own source files (path and content): which measuring code ran,
    also where the checkout's git metadata is missing or stale (a copied working tree)."""
    import hashlib

    digest = hashlib.sha1()
    for path in sorted((PROJECT_ROOT / "collector").rglob("*")):
        if path.is_file() and path.suffix in (".py", ".toml"):
            digest.update(str(path.relative_to(PROJECT_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


class ManifestError(ValueError):
    """A run.json the collector cannot resume from (bad input: exit 2), naming the file."""


def read_run_manifest(path: Path) -> dict:
    """An existing run.json, upgraded, by the record layer's one reader (collector.record.manifest);
    ManifestError naming the file and what is wrong (not a regular file, not JSON, not an object, a
    breach of run.json's schema)."""
    try:
        data, found = manifest_record.read(path)
    except manifest_record.Unreadable as exc:
        hint = ("a run's run.json is a JSON file: remove it, or use another run id" if "regular file" in str(exc) else
                "fix or remove it (the cell files beside it are kept), or use another run id")
        raise ManifestError(f"{path} {exc}; {hint}") from None
    if found:
        raise ManifestError(f"{path} does not meet run.json's schema (collector/record/run.schema.json): "
                            f"{'; '.join(found[:3])} (a hand-edited or foreign file, or a newer collector's?); "
                            "restore it or use another run id")
    return data


def prepare_run(run_dir: Path, run_id: str, matrix: Matrix, env: dict, note: str | None = None) -> dict:
    """Create or reopen run.json; refuse to mix environments. Returns the manifest."""
    manifest_path = run_dir / "run.json"
    session = {"started_at": _now(), "hostname": env.get("hostname"), "boot_id": env.get("boot_id"),
               "preset": matrix.preset,
               "project_git_sha": _project_sha(), "collector_source_sha1": source_fingerprint(),
               "cells_in_matrix": len(matrix.cells), **({"note": note} if note else {})}
    if manifest_path.exists():
        manifest = read_run_manifest(manifest_path)
        differ = comparable.differences(manifest, {"environment": env, "protocol": asdict(matrix.protocol)},
                                        comparable.JOIN)
        diff = [f"{d.key}: run has {d.first!r}, this machine {d.other!r}" for d in differ if d.part == "environment"]
        if diff:
            raise RunError(f"{run_dir} was collected in another environment ({'; '.join(diff)}); "
                           "choose another run id (RUN=...) instead of mixing them")
        changed = [f"{d.key}: {d.first!r} -> {d.other!r}" for d in differ if d.part == "protocol"]
        if changed:
            raise RunError(f"{run_dir} was measured with another protocol ({'; '.join(changed)}); "
                           "use another run id (RUN=...)")
        known = set(manifest.get("matrices", [])) | {manifest.get("preset")}
        if matrix.preset not in known and matrix.description:
            # another preset's cells join the run (a later confirmation of the same screens): its description too
            manifest["description"] = "; ".join(filter(None, (manifest.get("description"), matrix.description)))
    else:
        manifest = {"run_id": run_id, "schema_version": schema.SCHEMA_VERSION, "environment": env,
                    "protocol": asdict(matrix.protocol), "preset": matrix.preset,
                    "description": matrix.description, "sessions": []}
    manifest["sessions"].append(session)
    manifest["matrices"] = sorted(set(manifest.get("matrices", [])) | {matrix.preset})
    _write_json(manifest_path, manifest)
    return manifest


def _write_json(path: Path, data: dict) -> None:
    """Write under a private name, then rename (as analysis.render.pages.write_atomic does for reports:
    the collector does not import analysis, which needs packages a GPU node may not have)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # a full disk leaves no empty temporary file behind


@contextlib.contextmanager
def run_lock(run_dir: Path):
    """Exclusive lock on the run directory: a second collector on it refuses at once."""
    fh = open(run_dir / ".lock", "w")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        raise RunError(f"another collector is running on {run_dir}; wait for it or use another run id")
    try:
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


write_json = _write_json  # the one atomic JSON writer of the collector (runner, SLURM, shards)

# an accuracy failure judged against eager, no float64 (or float32) copy having run (RunStore.saved says
# so): not a verdict on the compile where eager's own error is large (GPT-Neo bf16: 0.357 against float64)
FAIL_AGAINST_EAGER = "accuracy_fail (against eager)"
# saved statuses that RETRY=1 measures again (None: a row without a status)
RETRYABLE = ("crashed", "timeout", "oom", "oom_shared", "runtime_error", "build_error", "compile_error", "export_error",
             FAIL_AGAINST_EAGER, None)


def _status(path: Path, status: str | None) -> str | None:
    """A saved row's status, FAIL_AGAINST_EAGER for an accuracy failure whose reference was eager."""
    if status != "accuracy_fail":
        return status
    import pyarrow.parquet as pq

    try:
        ref = pq.read_table(path, columns=["accuracy_reference"]).column(0)[0].as_py()
    except Exception:  # noqa: BLE001 - an older row without the column keeps its status
        return status
    return FAIL_AGAINST_EAGER if ref == "eager" else status


def left_to_measure(cells: list, saved: dict, retry_failed: bool = False) -> list:
    """The one rule for what is left: the cells without a good saved row (`saved`: cell id ->
    status, from RunStore.saved or set_aside_bad), and with `retry_failed` those whose saved row
    failed (RETRYABLE). The local executor, SLURM submission and --dry-run all use it."""
    return [c for c in cells if c.cell_id not in saved or (retry_failed and saved[c.cell_id] in RETRYABLE)]


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
            saved = cellfile.inspect(path)
            if saved.ok:
                good[path.stem] = _status(path, saved.status)
                continue
            aside = path.with_name(path.name + ".invalid")
            os.replace(path, aside)
            print(f"note: {path.name}: {saved.why}; renamed to {aside.name} and measured again", file=out, flush=True)
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
        """Remove the claims whose owner `alive(owner)` says is gone (owner: the claim's record, {}
        while it is being written); returns their cells."""
        gone = []
        for cell_id, owner in self.claims().items():
            if not alive(owner):
                self.release(cell_id)
                gone.append(cell_id)
        return gone

    @staticmethod
    def owner_alive(owner: dict, live_jobs) -> bool:
        """Is a claim's owner alive? A job id: the scheduler's answer (`live_jobs`). No job id (a claim
        taken outside the scheduler): its process, where it was taken on this host; elsewhere, or a
        claim still being written ({}), it is kept (nothing here can tell)."""
        if owner.get("job_id"):
            return owner["job_id"] in live_jobs
        if owner.get("host") == socket.gethostname() and isinstance(owner.get("pid"), int):
            return pid_alive(owner["pid"])
        return True

    def write_row(self, row: dict) -> Path:
        path = self.cells_dir / f"{row['cell_id']}.parquet"
        schema.write_row(row, path)
        return path

    def saved(self) -> dict[str, str | None]:
        """cell id -> status of every readable saved row (a broken file is left out: not done); an
        accuracy failure judged against eager is FAIL_AGAINST_EAGER."""
        out = {}
        for path in sorted(self.cells_dir.glob("*.parquet")) if self.cells_dir.exists() else []:
            saved = cellfile.inspect(path)
            if saved.ok:
                out[path.stem] = _status(path, saved.status)
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
