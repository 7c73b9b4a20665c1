"""Schedules cells: one fresh subprocess per cell, a timeout, fresh compile caches,
one Parquet file per cell written atomically, resume by skipping finished cells.

The launcher is injectable (tests use a fake one to drive the plumbing quickly);
`SubprocessLauncher` is the real path.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Protocol as TypingProtocol

from collector import modes, schema, zygote
from collector.cell import PARTIAL_NAME, last_logged_step, looks_like_oom
from collector.compact import compact_run
from collector.job import Job, Layout
from collector.matrix import Cell, Matrix
from collector.progress import Progress
from collector.store import RunStore

PROJECT_ROOT = Path(__file__).resolve().parent.parent
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
ENV_MUST_MATCH = ("device", "device_name", "torch_version")
PROTOCOL_MUST_MATCH = ("blocks", "steps_per_block", "min_block_ms", "min_sample_ms", "warmup_steps", "seed",
                       "tf32", "processes", "plant_slowdown_pct")

BEFORE = {"processes": 1, "plant_slowdown_pct": 0}

# Set by the CLI's signal handler before it raises KeyboardInterrupt. The raise can be lost: a
# signal that lands while a cell process is being forked is delivered inside an at-fork handler,
# where Python prints "Exception ignored" and carries on. Checked before and after every cell
# process, so a lost raise still stops the collection at the next process boundary.
INTERRUPTED = threading.Event()


REPORTED = threading.Event()  # the stop's message (what is saved, how to resume) has been printed
ZYGOTE_START_S = 600  # the fork parent's imports and CUDA probe (a cold disk cache can be slow)
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
        raise KeyboardInterrupt("stop requested")  # what a run made before a protocol key existed did


RETRYABLE = ("crashed", "timeout", "oom", "runtime_error", "compile_error", "export_error", None)


class RunError(RuntimeError):
    """The run cannot go on (locked, mismatched environment, unwritable directory)."""


class Launcher(TypingProtocol):
    def run(self, spec: dict, cache_dir: Path, log_path: Path, timeout_s: float) -> dict: ...


@dataclass(frozen=True)
class Worker:
    """Where one stream of cells runs: a physical GPU (None: the default device) and CPU cores."""
    gpu: int | None = None
    cpus: tuple[int, ...] | None = None


def plan_workers(gpus: list[int] | None) -> list[Worker]:
    """One worker per listed GPU, the CPU cores this process may use split evenly between them.

    No list: one worker on the default device with every core (the honest default: a cell
    alone on the host). Several: cells run concurrently, one per GPU (recorded per row).
    """
    if not gpus:
        return [Worker()]
    if len(set(gpus)) != len(gpus) or any(g < 0 for g in gpus):
        raise ValueError(f"GPU indices must be distinct and >= 0, got {gpus}")
    try:
        cores = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux: no pinning
        return [Worker(gpu=g) for g in gpus]
    if len(cores) < len(gpus):
        raise ValueError(f"{len(gpus)} GPU workers need at least as many CPU cores; this process has {len(cores)}")
    groups = physical_cores(cores)
    if len(groups) < len(gpus) or os.environ.get("TCB_CPU_SPLIT") == "logical":
        groups = [(c,) for c in cores]  # too few physical cores (or asked for): split logical CPUs
    per = len(groups) // len(gpus)
    return [Worker(gpu=g, cpus=tuple(sorted(c for grp in groups[i * per:(i + 1) * per] for c in grp)))
            for i, g in enumerate(gpus)]


def physical_cores(cpus: list[int], sysfs: Path = Path("/sys/devices/system/cpu")) -> list[tuple[int, ...]]:
    """`cpus` grouped by the physical core they belong to (SMT siblings together), in order.

    Splitting logical CPUs by number can give two workers the two hardware threads of one core
    (a common numbering puts sibling i + N/2 beside i): the neighbour's compile workers then share
    the core that runs this worker's timed loop. Whole cores go to one worker instead. Where the
    topology cannot be read, each CPU is its own group."""
    groups: dict[tuple[str, str], list[int]] = {}
    for c in cpus:
        topo = sysfs / f"cpu{c}" / "topology"
        try:
            key = ((topo / "physical_package_id").read_text().strip(), (topo / "core_id").read_text().strip())
        except OSError:
            key = ("?", str(c))
        groups.setdefault(key, []).append(c)
    return sorted((tuple(sorted(g)) for g in groups.values()), key=lambda g: g[0])


def dir_bytes(path: Path) -> int | None:
    """Total size of the files under `path` (None if it does not exist)."""
    if not path.exists():
        return None
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, f)).st_size
    return total


_die_with_parent = zygote.die_with_parent  # in the cell process (Linux): killed if the collector dies


LOG_HEAD_BYTES = 4 << 20  # a cell log keeps its first 4 MiB ...
LOG_TAIL_BYTES = 4 << 20  # ... and its last 4 MiB; what lies between is counted, not kept
TAIL_READ_BYTES = 256 << 10  # what is read back of a log for a failed cell


def _read_tail(path: Path, n: int = TAIL_READ_BYTES) -> str:
    """The last `n` bytes of a log as text (never the whole file: a log can be large)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - n))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _tail(path: Path, n: int = 1500) -> str:
    return _read_tail(path)[-n:]


class CappedLog:
    """Copies a cell process's output from a pipe into its log, keeping the first LOG_HEAD_BYTES
    and the last LOG_TAIL_BYTES: a cell that prints without end costs bounded disk and memory."""

    def __init__(self, fh, head: int = LOG_HEAD_BYTES, tail: int = LOG_TAIL_BYTES):
        self.fh, self.head, self.tail = fh, head, tail
        self.written, self.dropped, self.buf = 0, 0, bytearray()
        self.error: OSError | None = None  # the first write that failed (a full disk)

    def pump(self, pipe) -> None:
        """Until the pipe ends. A write that fails (a full disk) is kept in `error` and the output
        is still drained, so the cell never blocks on a full pipe."""
        while True:
            chunk = pipe.read1(1 << 16) if hasattr(pipe, "read1") else pipe.read(1 << 16)
            if not chunk:
                break
            if self.error:
                continue
            room = max(0, self.head - self.written)
            if room:
                try:
                    self.fh.write(chunk[:room])
                    self.fh.flush()
                except OSError as exc:
                    self.error = exc
                    continue
                self.written += min(room, len(chunk))
                chunk = chunk[room:]
            if chunk:
                self.buf += chunk
                if len(self.buf) > self.tail:
                    self.dropped += len(self.buf) - self.tail
                    del self.buf[:len(self.buf) - self.tail]

    def finish(self) -> None:
        """Write the kept tail; raise the write error the pump met, if any."""
        if self.error:
            raise self.error
        if self.dropped:
            self.fh.write(f"\n[... {self.dropped} bytes of output left out (the log keeps its first "
                          f"{self.head >> 20} MiB and last {self.tail >> 20} MiB) ...]\n".encode())
        self.fh.write(bytes(self.buf))
        self.fh.flush()
        self.buf = bytearray()


def _partial(out_path: Path) -> dict:
    """What a cell process that died had measured by its last logged step (collector.cell saves
    it beside its result file), or {} if nothing readable was saved."""
    try:
        saved = json.loads((out_path.parent / PARTIAL_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return saved if isinstance(saved, dict) else {}


def _last_step(path: Path) -> str:
    """'; last step logged: ...' from the cell log's latest process section, or '' if none.

    The cell logs each stage as `[cell +  12.3s] what`; the last one says where a process that
    died without a result (a native crash, a timeout) was."""
    text = _read_tail(path)
    step = last_logged_step(text.rsplit("\n=== ", 1)[-1])  # this process's section of the log only
    return f"; last step logged: {step}" if step else ""


class SubprocessLauncher:
    """Runs `python -m collector.cell` in a new process group with its own compile caches."""

    def __init__(self, python: str = sys.executable, worker: Worker = Worker()):
        self.python, self.worker = python, worker
        self.current: subprocess.Popen | None = None

    name = "exec"
    module = "collector.cell"  # what each process runs (its main(argv)); tests point it elsewhere

    def for_worker(self, worker: Worker) -> "SubprocessLauncher":
        return type(self)(self.python, worker)

    def _preexec(self) -> None:
        _die_with_parent()
        if self.worker.cpus:
            os.sched_setaffinity(0, self.worker.cpus)

    def _base_env(self) -> dict:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
        if self.worker.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(self.worker.gpu)
        return env

    def _tag(self) -> str:
        """What the log's process header says about how the process was started."""
        return ""

    def _start(self, args: list[str], env: dict, logs_dir: Path):
        """Start `python -m collector.cell ARGS` in a new session; the handle has pid, stdout (the
        merged output, a pipe), wait(timeout) and returncode, like subprocess.Popen."""
        return subprocess.Popen([self.python, "-m", self.module, *args],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=PROJECT_ROOT, env=env, start_new_session=True, preexec_fn=self._preexec)

    def close(self) -> None:
        """Release what the launcher holds between cells (nothing for exec)."""

    def run(self, spec: dict, cache_dir: Path, log_path: Path, timeout_s: float) -> dict:
        with tempfile.TemporaryDirectory(prefix="tcb-cell-") as tmp:
            spec_path, out_path = Path(tmp) / "spec.json", Path(tmp) / "result.json"
            spec_path.write_text(json.dumps(spec))
            env = self._base_env()
            env.update(TORCHINDUCTOR_CACHE_DIR=str(cache_dir / "inductor"), TRITON_CACHE_DIR=str(cache_dir / "triton"))
            with open(log_path, "ab") as log:
                kind = spec.get("kind", "cold") + (f" {spec['replicate']}" if spec.get("replicate") else "")
                begun = dt.datetime.now().isoformat(timespec='seconds')
                # started first, so the header says how (the output waits in the pipe meanwhile)
                proc = self._start([str(spec_path), str(out_path)], env, log_path.parent)
                log.write(f"\n=== {begun} {kind}{self._tag()} ===\n".encode())
                log.flush()
                self.current = proc
                RUNNING.add(self)
                if INTERRUPTED.is_set():  # a stop that came while the process was being started
                    self.kill_now()
                capped = CappedLog(log)
                pump = threading.Thread(target=capped.pump, args=(proc.stdout,), daemon=True)
                pump.start()
                timed_out = False
                try:
                    proc.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    timed_out = True
                finally:
                    self.kill()  # nothing of the cell outlives it (orphaned compile workers included)
                    RUNNING.discard(self)
                    self.current = None
                    pump.join(timeout=10)  # the whole group is dead: the pipe ends
                    capped.finish()
                    proc.stdout.close()
            if timed_out:  # read after the log is complete (its kept tail written)
                return {**_partial(out_path), "status": "timeout",
                        "error": f"no result within {timeout_s:.0f} s (process group killed)"
                                 f"{_last_step(log_path)}\n{_tail(log_path)}"}
            if out_path.exists():
                return json.loads(out_path.read_text())
            code = proc.returncode
            how = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            if looks_like_oom(_read_tail(log_path, 16 << 10)):  # e.g. std::bad_alloc abort in native code
                return {**_partial(out_path), "status": "oom",
                        "error": f"cell process ran out of memory and died ({how}){_last_step(log_path)}\n"
                                 f"{_tail(log_path)}"}
            return {**_partial(out_path), "status": "crashed",
                    "error": f"cell process died ({how}) without a result{_last_step(log_path)}\n{_tail(log_path)}"}

    def kill_now(self) -> None:
        """SIGKILL the cell's process group without waiting (safe in a signal handler)."""
        proc = self.current
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    def kill(self) -> None:
        proc = self.current
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                proc.wait(timeout=10)


class _Forked:
    """The handle of a cell process forked by the zygote (collector/zygote.py), shaped like the
    part of subprocess.Popen the launcher uses: pid, stdout, wait(timeout), returncode."""

    def __init__(self, pid: int, stdout, channel: socket.socket):
        self.pid, self.stdout, self.channel, self.returncode = pid, stdout, channel, None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        self.channel.settimeout(timeout)
        try:
            data = self.channel.recv(1 << 16)
        except socket.timeout:
            raise subprocess.TimeoutExpired("collector.cell (forked)", timeout) from None
        finally:
            with contextlib.suppress(OSError):
                self.channel.settimeout(None)
        if not data:  # the parent died (its children die with it)
            self.returncode = -signal.SIGKILL
        else:
            self.returncode = os.waitstatus_to_exitcode(json.loads(data)["status"])
        return self.returncode


class ForkLauncher(SubprocessLauncher):
    """Forks each cell process from a parent that has imported torch, Dynamo and Inductor once
    (collector/zygote.py): a process no longer pays ~8-10 s of imports. A CUDA parent whose
    imports reached the driver is replaced once by one without Inductor (retry_preload). Falls
    back to exec, for the rest of the run, when no parent can start, when CUDA does not start in
    a forked child, or when a forked process wrote into the parent's own (sentinel) compile cache."""

    name = "fork"

    def __init__(self, python: str = sys.executable, worker: Worker = Worker(), device: str = "cpu",
                 preload: str | None = None):
        super().__init__(python, worker)
        self.device, self.preload = device, preload
        # a CUDA parent that refused with the full preload is started once more with this one
        self.retry_preload = ",".join(zygote.NO_INDUCTOR_PRELOAD) if device == "cuda" and preload is None else None
        self.modules: list[str] | None = None  # what the serving parent imported
        self.first_refusal: str | None = None  # why a parent was replaced by one with retry_preload
        self.parent: subprocess.Popen | None = None
        self.channel: socket.socket | None = None
        self.sentinel: Path | None = None
        self.fallback: str | None = None  # why this launcher execs instead
        self.import_s: float | None = None
        self.forked = self.execed = 0

    def for_worker(self, worker: Worker) -> "ForkLauncher":
        twin = ForkLauncher(self.python, worker, self.device, self.preload)
        twin.retry_preload = self.retry_preload
        return twin

    def _tag(self) -> str:
        return " (forked)" if self.fallback is None else ""

    def describe(self) -> dict:
        return {"launcher": self.name, "forked_processes": self.forked, "execed_processes": self.execed,
                "parent_import_s": self.import_s, "parent_modules": self.modules,
                "parent_first_refusal": self.first_refusal, "fallback": self.fallback}

    def _start_parent(self, logs_dir: Path) -> None:
        hello = self._try_parent(logs_dir, self.preload)
        if not hello.get("ready") and self.retry_preload is not None and not hello.get("cuda_failed"):
            # e.g. Inductor's import asked the CUDA driver: a parent without it still saves torch's import
            self.first_refusal = str(hello.get("why"))
            print(f"note: fork parent with {', '.join(hello.get('modules') or ['the full preload'])} not used "
                  f"({self.first_refusal}); starting one that imports {self.retry_preload}", file=sys.stderr, flush=True)
            self.close()
            hello = self._try_parent(logs_dir, self.retry_preload)
        if not hello.get("ready"):
            self._give_up(f"fork parent not used: {hello.get('why')}; see {logs_dir / 'launcher.log'}")
        else:
            self.import_s, self.modules = hello.get("import_s"), hello.get("modules")

    def _try_parent(self, logs_dir: Path, preload: str | None) -> dict:
        """Start a parent importing `preload` (None: zygote.PRELOAD); its hello message."""
        self.sentinel = Path(tempfile.mkdtemp(prefix="tcb-zygote-cache-"))
        env = self._base_env()
        env.update(TORCHINDUCTOR_CACHE_DIR=str(self.sentinel / "inductor"),
                   TRITON_CACHE_DIR=str(self.sentinel / "triton"))
        if self.device == "cuda":
            env[zygote.CUDA_ENV] = "1"
        if preload is not None:
            env[zygote.PRELOAD_ENV] = preload
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with open(logs_dir / "launcher.log", "ab") as log:
                log.write(f"\n=== {dt.datetime.now().isoformat(timespec='seconds')} fork parent ===\n".encode())
                log.flush()
                self.parent = subprocess.Popen(
                    [self.python, "-m", "collector.zygote", str(theirs.fileno())], stdin=subprocess.DEVNULL,
                    stdout=log, stderr=subprocess.STDOUT, cwd=PROJECT_ROOT, env=env, start_new_session=True,
                    preexec_fn=self._preexec, pass_fds=(theirs.fileno(),))
        finally:
            theirs.close()
        self.channel = mine
        mine.settimeout(ZYGOTE_START_S)
        try:
            data = mine.recv(1 << 16)
            hello = json.loads(data) if data else {"ready": False, "why": "the parent exited while importing"}
        except (socket.timeout, ValueError) as exc:
            hello = {"ready": False, "why": f"no answer from the parent ({type(exc).__name__})"}
        mine.settimeout(None)
        return hello

    def _give_up(self, why: str) -> None:
        self.fallback = why
        print(f"note: {why}; cell processes are started with exec instead", file=sys.stderr, flush=True)
        self.close()

    def _start(self, args: list[str], env: dict, logs_dir: Path):
        if self.fallback is None and self.parent is None:
            self._start_parent(logs_dir)
        if self.fallback is not None:
            self.execed += 1
            return super()._start(args, env, logs_dir)
        r, w = os.pipe()
        try:
            socket.send_fds(self.channel, [json.dumps({"module": self.module, "args": args,
                                                       "env": env}).encode()], [w])
            data = self.channel.recv(1 << 16)
        except OSError as exc:
            data = json.dumps({"refused": f"the fork parent is gone ({exc.strerror or exc})"}).encode()
        finally:
            os.close(w)
        answer = json.loads(data) if data else {"refused": "the fork parent exited"}
        if "pid" not in answer:
            os.close(r)
            self._give_up(f"fork parent refused a process: {answer.get('refused')}")
            self.execed += 1
            return super()._start(args, env, logs_dir)
        self.forked += 1
        return _Forked(answer["pid"], os.fdopen(r, "rb"), self.channel)

    def run(self, spec: dict, cache_dir: Path, log_path: Path, timeout_s: float) -> dict:
        forked = self.fallback is None
        result = super().run(spec, cache_dir, log_path, timeout_s)
        if forked and self.fallback is None and self._sentinel_written():
            self._give_up(f"a forked process wrote into the fork parent's own compile cache ({self.sentinel}); "
                          "its result is discarded and measured again")
            if spec.get("kind", "cold") == "cold":  # its caches may be incomplete: start cold again
                for sub in ("inductor", "triton"):
                    shutil.rmtree(cache_dir / sub, ignore_errors=True)
            return super().run(spec, cache_dir, log_path, timeout_s)
        return result

    def _sentinel_written(self) -> bool:
        """A file in the parent's own cache folders (its imports create the empty folders)."""
        return self.sentinel is not None and any(p.is_file() for p in self.sentinel.rglob("*"))

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.parent is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.parent.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                self.parent.wait(timeout=10)
            self.parent = None
        if self.sentinel is not None:
            shutil.rmtree(self.sentinel, ignore_errors=True)
            self.sentinel = None


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


def _project_sha() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
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


def prepare_run(run_dir: Path, run_id: str, matrix: Matrix, env: dict) -> dict:
    """Create or reopen run.json; refuse to mix environments. Returns the manifest."""
    manifest_path = run_dir / "run.json"
    session = {"started_at": _now(), "hostname": env.get("hostname"), "boot_id": env.get("boot_id"),
               "preset": matrix.preset,
               "project_git_sha": _project_sha(), "collector_source_sha1": source_fingerprint(),
               "cells_in_matrix": len(matrix.cells)}
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        old = manifest["environment"]
        diff = [f"{k}: run has {old.get(k)!r}, this machine {env.get(k)!r}"
                for k in ENV_MUST_MATCH if old.get(k) != env.get(k)]
        if diff:
            raise RunError(f"{run_dir} was collected in another environment ({'; '.join(diff)}); "
                           "choose another run id (RUN=...) instead of mixing them")
        old_p, new_p = manifest.get("protocol", {}), asdict(matrix.protocol)
        changed = [f"{k}: {old_p.get(k, BEFORE.get(k))!r} -> {new_p[k]!r}" for k in PROTOCOL_MUST_MATCH
                   if old_p.get(k, BEFORE.get(k)) != new_p[k]]
        if changed:
            raise RunError(f"{run_dir} was measured with another protocol ({'; '.join(changed)}); "
                           "use another run id (RUN=...)")
    else:
        manifest = {"run_id": run_id, "schema_version": schema.SCHEMA_VERSION, "environment": env,
                    "protocol": asdict(matrix.protocol), "preset": matrix.preset,
                    "description": matrix.description, "sessions": []}
    manifest["sessions"].append(session)
    manifest["matrices"] = sorted(set(manifest.get("matrices", [])) | {matrix.preset})
    _write_json(manifest_path, manifest)
    return manifest


def _write_json(path: Path, data: dict) -> None:
    """Write under a private name, then rename (as analysis.render.write_atomic does for reports:
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


def cell_spec(cell: Cell, matrix: Matrix, device: str, kind: str = "cold", **extra) -> dict:
    """The job (collector.job.Job) for one process of `cell`, as the JSON the child reads."""
    return Job(kind=kind, cell=asdict(cell), protocol=asdict(matrix.protocol), device=device, **extra).to_json()


SAMPLE_LISTS = ("eager_step_ms", "compiled_step_ms", "eager_enqueue_ms", "compiled_enqueue_ms",
                "eager_block_wall_ms", "compiled_block_wall_ms")
PEAKS = ("eager_peak_allocated_bytes", "eager_peak_reserved_bytes", "compiled_peak_allocated_bytes",
         "compiled_peak_reserved_bytes")


def add_replicate(result: dict, rep: dict, index: int) -> str | None:
    """Append a replicate process's samples to the cell's `result` (process-major); returns why
    it was not used, or None. A replicate whose sample counts differ from the cold process's is
    refused: every process must have one block layout."""
    if rep.get("status") != "ok":
        first = (rep.get("error") or "").strip().splitlines()
        return f"process {index + 1}: {rep.get('status')}: {first[0] if first else 'no error text'}"[:300]
    per = result.get("processes") or 1
    for col in SAMPLE_LISTS:
        mine, theirs = result.get(col), rep.get(col)
        if mine is None and theirs is None:
            continue
        if mine is None or theirs is None or len(theirs) * per != len(mine):
            return f"process {index + 1}: {col} has {len(theirs or [])} samples, the cold process {len(mine or [])}"
    for col in SAMPLE_LISTS:
        if result.get(col) is not None:
            result[col] = list(result[col]) + list(rep[col])
    for col in PEAKS:
        if rep.get(col) is not None:
            result[col] = max(result.get(col) or 0, rep[col])
    result["processes"] = per + 1
    return None


def measure_cell(cell: Cell, matrix: Matrix, env: dict, run_id: str, run_dir: Path,
                 launcher: Launcher, clock: Callable[[], float] = time.monotonic,
                 worker: Worker = Worker(), concurrent: int = 1) -> dict:
    """Run one cell and return its complete row: the cold process, then `processes - 1`
    replicate processes on its warm cache (each a fresh process that times the cell again),
    or, with one process, the warm-cache compile alone if asked; then the portable-cache one."""
    started, t0 = _now(), clock()
    cache_dir = Path(tempfile.mkdtemp(prefix=f"tcb-cache-{cell.cell_id[:60]}-"))
    log_path = run_dir / "logs" / f"{cell.cell_id}.log"
    proto = matrix.protocol

    def run_job(spec: dict, cache: Path) -> dict:
        check_interrupted()
        got = launcher.run(spec, cache, log_path, proto.timeout_s)
        check_interrupted()
        return got

    try:
        portable = cache_dir / "portable-cache.bin"
        mode = modes.spec(cell.mode)
        portable_wanted = proto.portable_cache and mode.portable_cache
        extra = {"portable_path": str(portable)} if portable_wanted else {}
        p0 = clock()
        result = run_job(cell_spec(cell, matrix, env["device"], **extra), cache_dir)
        walls = [clock() - p0]
        if mode.compiles:
            result["cache_inductor_bytes"] = dir_bytes(cache_dir / "inductor")
            result["cache_triton_bytes"] = dir_bytes(cache_dir / "triton")
        timed_ok = result.get("status") in ("ok", "accuracy_fail") and result.get("eager_step_ms")
        compiled_ok = mode.compiles and result.get("status") in ("ok", "accuracy_fail")
        if timed_ok:
            result["processes"] = 1
        errors, warm_firsts = [], []
        if timed_ok and proto.processes > 1:
            layout = Layout(result.get("steps_per_block") or proto.steps_per_block,
                            result.get("steps_per_sample") or 1, result.get("planted_delay_ms"))
            for i in range(1, proto.processes):
                p0 = clock()
                rep = run_job(cell_spec(cell, matrix, env["device"], kind="replicate", replicate=i, layout=layout),
                              cache_dir)
                walls.append(clock() - p0)
                why = add_replicate(result, rep, i)
                if why:
                    errors.append(why)
                elif rep.get("warm_first_call_compiled_s") is not None:
                    warm_firsts.append(rep["warm_first_call_compiled_s"])
            if warm_firsts:  # every replicate compiled from the warm cache: their median
                result["warm_first_call_compiled_s"] = statistics.median(warm_firsts)
        elif proto.warm_compile and compiled_ok:
            p0 = clock()
            warm = run_job(cell_spec(cell, matrix, env["device"], kind="warm"), cache_dir)
            walls.append(clock() - p0)
            if warm.get("status") == "ok":
                result["warm_first_call_compiled_s"] = warm.get("warm_first_call_compiled_s")
                result["warm_compile_dynamo_s"] = warm.get("warm_compile_dynamo_s")
        if portable_wanted and compiled_ok and portable.exists():
            empty = Path(tempfile.mkdtemp(prefix="tcb-portable-"))
            try:
                p0 = clock()
                got = run_job(cell_spec(cell, matrix, env["device"], kind="portable", portable_from=str(portable)),
                              empty)
                walls.append(clock() - p0)
            finally:
                shutil.rmtree(empty, ignore_errors=True)
            if got.get("status") == "ok":
                result["portable_first_call_compiled_s"] = got.get("portable_first_call_compiled_s")
                result["portable_load_s"] = got.get("portable_load_s")
        result["process_wall_s"] = walls
        if errors:
            result["process_errors"] = "; ".join(errors)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    result = {k: v for k, v in result.items() if k in schema.COLUMNS}
    return schema.make_row({
        **result, "run_id": run_id, "cell_id": cell.cell_id, **asdict(cell),
        "tf32": proto.tf32, "device": env["device"], "device_name": env["device_name"],
        "torch_version": env["torch_version"], "hostname": env["hostname"],
        "started_at": started, "cell_wall_s": clock() - t0,
        "gpu_index": worker.gpu, "concurrent_cells": concurrent,
        "blocks": proto.blocks,
        "steps_per_block": result.get("steps_per_block", proto.steps_per_block),
        "status": result.get("status", "crashed"),
    })


LARGE_MATRIX = 100  # cells to measure from which the start line is followed by a size estimate
PROCESS_S = (20, 35)  # wall time per process: 3-process cells took 60-108 s on the H200 (docs/measurement.md)


def size_note(cells: int, processes: int, workers: int) -> str:
    """What a large matrix will take, before it starts, from the measured cost of a process."""
    lo, hi = (cells * max(processes, 2) * s / workers / 3600 for s in PROCESS_S)
    return (f"note: {cells} cells x {processes} process(es) is a large matrix: about {lo:.1f}-{hi:.1f} hours "
            f"at {PROCESS_S[0]}-{PROCESS_S[1]} s a process{f' on {workers} GPUs' if workers > 1 else ''}; "
            "--dry-run lists the cells, --stop-after bounds a session (the same command resumes), "
            "Ctrl-C stops keeping every finished cell")


def _kill_all(launchers) -> None:
    """Stop the cell process of every launcher (fakes without `kill` are skipped)."""
    for launcher in launchers:
        kill = getattr(launcher, "kill", None)
        if kill:
            kill()


@dataclass
class Target:
    """One run this session writes: its matrix, environment (from its interpreter), run id and
    launcher. Several targets are the same matrix under several interpreters (torch versions),
    measured interleaved (collect_targets)."""
    matrix: Matrix
    env: dict
    run_id: str
    launcher: Launcher
    label: str = ""


@dataclass
class _Open:
    """A target's run folder, opened and locked for this session."""
    target: Target
    run_dir: Path
    store: RunStore
    manifest: dict
    todo: list
    already: int


def _open_target(t: Target, out_dir: Path, stack: contextlib.ExitStack, workers: list[Worker],
                 retry_failed: bool, out) -> _Open:
    """Create (or reopen) the target's run folder under its lock; returns what is left to measure."""
    run_dir = Path(out_dir) / check_run_id(t.run_id)
    store = RunStore(run_dir)  # the local executor: one writer, under the run lock
    try:
        store.create()
        store.check_writable()
    except OSError as exc:
        raise RunError(f"cannot write to {run_dir}: {exc.strerror or exc}") from None
    stack.enter_context(run_lock(run_dir))
    store.sweep_temporaries()
    manifest = prepare_run(run_dir, t.run_id, t.matrix, t.env)
    manifest["sessions"][-1]["workers"] = [asdict(w) for w in workers]
    saved = store.set_aside_bad(out)
    done = {c for c, status in saved.items() if not (retry_failed and status in RETRYABLE)}
    todo = [c for c in t.matrix.cells if c.cell_id not in done]
    return _Open(t, run_dir, store, manifest, todo, len(t.matrix.cells) - len(todo))


def interleave(opened: list, cell_ids: list[str]) -> list[tuple[int, object]]:
    """The session's queue: (target index, cell) in matrix order, every target's copy of a cell
    next to the others', the targets' order reversed from one cell to the next (A B, B A, A B, ...)
    so that neither version always runs first after the other. Cells a target has already saved
    are left out of its turn."""
    queue, turn = [], 0
    for cid in cell_ids:
        here = [(i, c) for i, o in enumerate(opened) for c in o.todo if c.cell_id == cid]
        if not here:
            continue
        queue.extend(here if turn % 2 == 0 else here[::-1])
        turn += 1
    return queue


def collect(matrix: Matrix, env: dict, out_dir: Path, run_id: str, launcher: Launcher,
            out=None, clock: Callable[[], float] = time.monotonic, workers: list[Worker] | None = None,
            retry_failed: bool = False, stop_after_s: float | None = None) -> Path:
    """Measure every cell of `matrix` not yet in `out_dir/run_id`; returns the run directory.
    (collect_targets with one target.)"""
    return collect_targets([Target(matrix, env, run_id, launcher)], out_dir, out=out, clock=clock,
                           workers=workers, retry_failed=retry_failed, stop_after_s=stop_after_s)[0]


def collect_targets(targets: list[Target], out_dir: Path, out=None, clock: Callable[[], float] = time.monotonic,
                    workers: list[Worker] | None = None, retry_failed: bool = False,
                    stop_after_s: float | None = None) -> list[Path]:
    """Measure every cell of each target's matrix not yet in its run folder; returns the run
    directories, in the targets' order.

    Several targets (one per interpreter: torch versions side by side) are measured interleaved,
    cell by cell, their order alternating (`interleave`), so drift and the machine fall on every
    version alike. `workers` (plan_workers) run cells concurrently, one per GPU; each gets its own
    launcher from `launcher.for_worker`. `retry_failed` measures again the cells whose saved row
    failed (RETRYABLE: crashed, timeout, oom, runtime, compile or export error), replacing it.
    KeyboardInterrupt (Ctrl-C, or SIGTERM turned into it by the CLI) stops the cells in flight;
    every finished cell is already on disk. `stop_after_s` is a wall-clock budget: once it has
    passed no new cell starts (the cells in flight finish), so a time-limited machine ends
    between cells instead of killing one halfway; the same command resumes.
    """
    out = out or sys.stdout
    workers = workers or [Worker()]
    ids = [t.run_id for t in targets]
    if len(set(ids)) != len(ids):
        raise ValueError(f"two interpreters would write the same run {ids}: give each its own label")
    with contextlib.ExitStack() as stack:
        opened = [_open_target(t, out_dir, stack, workers, retry_failed, out) for t in targets]
        several = len(opened) > 1
        cells_dirs = ", ".join(str(o.store.cells_dir) for o in opened)
        where = (f" ({len(workers)} at a time, GPUs {', '.join(str(w.gpu) for w in workers)})"
                 if len(workers) > 1 else "")
        for o in opened:
            t = o.target
            print(f"run {t.run_id}: {len(t.matrix.cells)} cells in matrix '{t.matrix.preset}', {o.already} already "
                  f"done, {len(o.todo)} to measure on {t.env['device']} ({t.env['device_name']}){where}, "
                  f"{t.matrix.protocol.processes} process(es) each, torch {t.env['torch_version']}"
                  + (f" ({t.env.get('python_executable') or t.label})" if several else ""), file=out, flush=True)
        if several:
            print(f"{len(opened)} interpreters interleaved cell by cell, the order alternating", file=out, flush=True)
        queue = list(enumerate(interleave(opened, [c.cell_id for c in targets[0].matrix.cells]), 1))
        total = len(queue)
        if total >= LARGE_MATRIX:
            print(size_note(total, targets[0].matrix.protocol.processes, len(workers)), file=out, flush=True)
        progress = Progress(total, out=out, clock=clock, workers=len(workers))
        lock = threading.Lock()
        stop = threading.Event()
        failure: list[BaseException] = []
        # launchers[worker][target]
        launchers = [[t.launcher for t in targets]] if workers == [Worker()] else \
            [[t.launcher.for_worker(w) for t in targets] for w in workers]
        session_start = clock()
        budget_hit = threading.Event()

        def work(worker: Worker, own: list) -> None:
            while not stop.is_set():
                check_interrupted()
                with lock:
                    if not queue:
                        return
                    if stop_after_s is not None and clock() - session_start >= stop_after_s:
                        budget_hit.set()
                        return
                    k, (ti, cell) = queue.pop(0)
                    o = opened[ti]
                    label = cell.label() + (f" [{o.target.label}]" if several else "")
                    progress.start(k, label + (f" [GPU {worker.gpu}]" if len(workers) > 1 else ""))
                t0 = clock()
                try:
                    row = measure_cell(cell, o.target.matrix, o.target.env, o.target.run_id, o.run_dir, own[ti],
                                       clock, worker, len(workers))
                except OSError as exc:  # the cell's log or cache folder: a full or read-only disk
                    raise RunError(f"cannot write the files of cell {cell.cell_id} under {o.run_dir}: "
                                   f"{exc.strerror or exc}; the {len(progress.rows)} cell(s) finished before it "
                                   "are saved; fix the cause and run the same command to resume") from None
                if stop.is_set():  # interrupted while it ran: its result is not trusted
                    return
                try:
                    o.store.write_row(row)
                except OSError as exc:
                    raise RunError(f"cannot write {o.store.cells_dir / cell.cell_id}.parquet: {exc.strerror or exc}; "
                                   f"the {len(progress.rows)} cell(s) finished before it are saved; "
                                   "fix the cause and run the same command to resume") from None
                with lock:
                    progress.done(row, clock() - t0, label=label if (len(workers) > 1 or several) else None)

        def guarded(worker: Worker, own: list) -> None:
            try:
                work(worker, own)
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                failure.append(exc)
                stop.set()

        all_launchers = [lnch for row in launchers for lnch in row]
        try:
            if len(workers) == 1:
                work(workers[0], launchers[0])
            else:
                threads = [threading.Thread(target=guarded, args=(w, lnch), daemon=True)
                           for w, lnch in zip(workers, launchers)]
                for t in threads:
                    t.start()
                while any(t.is_alive() for t in threads):
                    for t in threads:
                        t.join(0.2)
                if failure:
                    raise failure[0]
        except BaseException as exc:  # Ctrl-C, SIGTERM, a write error in a worker: stop every cell in flight
            stop.set()
            _kill_all(all_launchers)
            if isinstance(exc, KeyboardInterrupt):
                print(f"\ninterrupted: {len(progress.rows)} cell(s) finished in this session are saved in "
                      f"{cells_dirs}; run the same command again to resume", file=out, flush=True)
                REPORTED.set()
            raise
        finally:  # a stop signal only sets a flag: these writes always finish
            for ti, o in enumerate(opened):
                mine = [row[ti] for row in launchers]
                described = [d for d in (getattr(lnch, "describe", lambda: None)() for lnch in mine) if d]
                if described:
                    o.manifest["sessions"][-1]["launchers"] = described
            for lnch in all_launchers:
                getattr(lnch, "close", lambda: None)()
            measured = {r.get("run_id") for r in progress.rows}
            active = [o for o in opened if o.target.run_id in measured]
            for o in active if len(active) > 1 else []:
                # the runs this session measured cell by cell beside this one, on this machine (a run
                # that measured nothing in the session is not interleaved with anything)
                others = [x.target.run_id for x in active if x is not o]
                o.manifest["sessions"][-1]["interleaved_with"] = others
                o.manifest["interleaved_with"] = sorted(set(o.manifest.get("interleaved_with", [])) | set(others))
            for o in opened:
                try:
                    compact_run(o.run_dir)
                except Exception as exc:  # an optimisation only: the cell files are complete without it
                    print(f"note: could not compact {o.run_dir}: {exc}", file=out)
                o.manifest["sessions"][-1]["finished_at"] = _now()
                o.manifest["sessions"][-1]["cells_measured"] = sum(
                    1 for r in progress.rows if r.get("run_id") == o.target.run_id)
                try:
                    _write_json(o.run_dir / "run.json", o.manifest)
                except OSError as exc:  # must not hide why the session ended; the cells are saved
                    print(f"note: could not update {o.run_dir / 'run.json'} ({exc.strerror or exc}); "
                          "the cell files are complete and the next session rewrites it", file=out, flush=True)
        if INTERRUPTED.is_set():  # a stop that arrived after the last cell, e.g. during compaction
            print(f"\ninterrupted: {len(progress.rows)} cell(s) finished in this session are saved in "
                  f"{cells_dirs}; run the same command again to resume", file=out, flush=True)
            REPORTED.set()
            raise KeyboardInterrupt("stop requested")
        already = sum(o.already for o in opened)
        print(progress.summary(skipped_done=already), file=out, flush=True)
        if not total:
            names = ", ".join(ids)
            print(f"nothing to measure: all {already} cells of run {names} are saved. To measure them again, "
                  "give a new run id (make collect RUN=<new id>, or --run-id); to measure the failed ones "
                  "again, RETRY=1 (--retry-failed).", file=out, flush=True)
        if budget_hit.is_set():
            print(f"time budget of {stop_after_s:g} s reached: {len(queue)} cell(s) not started; "
                  "run the same command again to resume", file=out, flush=True)
    return [o.run_dir for o in opened]
