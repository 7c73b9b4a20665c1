"""Starting one cell process: exec a fresh interpreter (`SubprocessLauncher`) or fork it from a
parent that has imported torch once (`ForkLauncher`, the client of the fork server in
collector/host/zygote.py). A launcher runs one process of a cell with its own compile caches, a
timeout and a capped log (collector/host/cell_output.py), and returns the process's result (or a
failed row saying why).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Protocol as TypingProtocol

from collector.host import zygote
from collector.child.cell import looks_like_oom
from collector.host.cell_output import CappedLog, _last_step, _partial, _read_tail, _tail
from collector.host.stop import INTERRUPTED, RUNNING
from collector.host.workers import TIMED_CPUS_ENV, TIMING_LOCK_ENV, Worker

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ZYGOTE_START_S = 600  # the fork parent's imports and CUDA probe (a cold disk cache can be slow)


class Launcher(TypingProtocol):
    """What the scheduler asks of a launcher: run one process of a cell; a copy for a GPU worker;
    stop the process in flight (waiting for it, or at once from a signal handler); say how its
    processes were started (for run.json); release what it holds between sessions."""

    def run(self, spec: dict, cache_dir: Path, log_path: Path, timeout_s: float) -> dict: ...
    def for_worker(self, worker: Worker) -> "Launcher": ...
    def prepare(self, logs_dir: Path) -> None: ...
    def kill(self) -> None: ...
    def kill_now(self) -> None: ...
    def describe(self) -> dict | None: ...
    def close(self) -> None: ...


class LauncherBase:
    """Defaults for the parts of a Launcher a stand-in need not do (nothing to kill, describe or
    close; one launcher serves every worker): a fake launcher (tests) writes `run` alone. `name` is
    how its processes start, as run.json records it (earlier runs count for an estimate only with
    the same): a stand-in starts none, like the exec launcher's one interpreter a process."""

    name = "exec"

    def for_worker(self, worker: Worker) -> "LauncherBase":
        return self

    def prepare(self, logs_dir: Path) -> None:
        """Get ready for the first cell now rather than at it (nothing for most launchers)."""

    def kill(self) -> None:
        """Stop the cell process in flight and wait for it (nothing for a stand-in)."""

    def kill_now(self) -> None:
        """Stop it without waiting, from a signal handler (nothing for a stand-in)."""

    def describe(self) -> dict | None:
        return None

    def close(self) -> None:
        """Release what the launcher holds between cells (nothing for a stand-in)."""


_die_with_parent = zygote.die_with_parent  # in the cell process (Linux): killed if the collector dies


class SubprocessLauncher(LauncherBase):
    """Runs `python -m collector.child.cell` in a new process group with its own compile caches."""

    def __init__(self, python: str = sys.executable, worker: Worker = Worker()):
        self.python, self.worker = python, worker
        self.current: subprocess.Popen | None = None

    name = "exec"
    module = "collector.child.cell"  # what each process runs (its main(argv)); tests point it elsewhere

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
        env.pop(TIMING_LOCK_ENV, None)
        env.pop(TIMED_CPUS_ENV, None)
        if self.worker.timing_lock:
            env[TIMING_LOCK_ENV] = self.worker.timing_lock
            if self.worker.timed_cpus:
                env[TIMED_CPUS_ENV] = ",".join(map(str, self.worker.timed_cpus))
        return env

    def _tag(self) -> str:
        """What the log's process header says about how the process was started."""
        return ""

    def _start(self, args: list[str], env: dict, logs_dir: Path):
        """Start `python -m collector.child.cell ARGS` in a new session; the handle has pid, stdout (the
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
    """The handle of a cell process forked by the zygote (collector/host/zygote.py), shaped like the
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
            raise subprocess.TimeoutExpired("collector.child.cell (forked)", timeout) from None
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
    (collector/host/zygote.py): a process no longer pays ~8-10 s of imports. A CUDA parent whose
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
                    [self.python, "-m", "collector.host.zygote", str(theirs.fileno())], stdin=subprocess.DEVNULL,
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

    def prepare(self, logs_dir: Path) -> None:
        """Start the fork parent now (a SLURM task overlaps its imports with the node's probe)."""
        if self.fallback is None and self.parent is None:
            self._start_parent(logs_dir)

    def _start(self, args: list[str], env: dict, logs_dir: Path):
        self.prepare(logs_dir)
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


