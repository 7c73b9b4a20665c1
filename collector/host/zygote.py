"""A parent that has imported torch, Dynamo and Inductor once, and forks each
cell process from that state (`--launcher fork`, the default on Linux).

Why: a fresh `python -m collector.child.cell` spends most of a warm replicate's wall time importing
(on this project's CPU machine `import torch` takes ~4 s and Dynamo plus Inductor another ~6 s;
on the H200 a warm replicate that times for ~2.5 s cost ~20 s). A forked child starts with those
modules loaded. What it does not share: the CUDA context (the parent never initialises CUDA, and
a probe child checks that CUDA starts in a forked child before any cell is served), the compile
caches (each request names its own cache directories; the parent's own point to an empty
sentinel folder that the launcher checks after every process), and anything a cell creates.
What forked children do share that exec'd processes do not: the parent's address-space layout
and hash seed; docs/measurement.md says what the A/A between the two launchers showed.

Protocol (a SOCK_SEQPACKET socket inherited, its fd number in argv[1]; one JSON message per packet):
- parent -> launcher: {"ready": true, "import_s": s, "pid": p, "modules": [...]} or
  {"ready": false, "why": ..., "modules": [...], "cuda_failed": bool};
- launcher -> parent: {"module": m, "args": [...], "env": {...}} with the write end of the
  cell's output pipe attached (SCM_RIGHTS); the child calls m.main(args);
- parent -> launcher: {"pid": child} once forked (or {"refused": why}), then
  {"pid": child, "status": wait status} when the child has ended.
One request at a time: the parent waits for its child before reading the next request.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback

# What the parent imports once, so that a forked child's torch.compile() imports nothing: torch,
# Dynamo, the cell module and Inductor's compile_fx (the import an exec'd process does inside
# torch.compile(), before any timer; so no timed figure changes). On the H200 Inductor's import chain
# calls torch.cuda.is_available() (torch/_inductor/runtime/benchmarking.py), whose NVML query leaves
# a driver thread behind ("cuda00001c00008") and the parent then refuses to fork; so a CUDA parent
# answers is_available() and device_count() during its imports from a forked probe child that
# started CUDA (_DriverGuard), and nothing in the parent asks the driver.
PRELOAD = ("torch", "torch._dynamo", "collector.child.cell", "torch._inductor.compile_fx")
# A CUDA parent whose full preload still reached the driver (or started a thread) is replaced by one
# with this (launch.ForkLauncher): Inductor is then imported in each child, as before (~2.8 s there).
NO_INDUCTOR_PRELOAD = PRELOAD[:3]
PRELOAD_ENV = "TCB_ZYGOTE_PRELOAD"  # comma-separated modules instead of PRELOAD (the tests' light parent)
CUDA_ENV = "TCB_ZYGOTE_CUDA"  # "1": check that CUDA starts in a forked child before serving
CUDA_FAILED = "CUDA did not start in a forked child"
# Environment variables a request may set differently from the parent's: read when used, not at
# import. Anything else that differs would be seen by the child in the parent's version (torch
# reads many variables at import), so such a request is refused and the launcher execs instead.
PER_REQUEST_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def die_with_parent() -> None:
    """In a child (Linux): be killed if the parent dies, even by kill -9."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _send(sock: socket.socket, msg: dict) -> None:
    sock.send(json.dumps(msg).encode())


def env_difference(parent: dict, wanted: dict) -> list[str]:
    """The variables a request would change that a forked child cannot take on (see PER_REQUEST_ENV)."""
    keys = set(parent) | set(wanted)
    return sorted(k for k in keys if parent.get(k) != wanted.get(k) and k not in PER_REQUEST_ENV)


def _child(req: dict, out_fd: int, sock: socket.socket) -> None:
    """In the forked child: become a process group of its own, write to the cell's pipe, take the
    request's environment, and run the module as __main__. Never returns."""
    code = 1
    try:
        sock.close()
        os.setsid()
        die_with_parent()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(null)
        os.close(out_fd)
        os.environ.clear()
        os.environ.update(req["env"])
        sys.argv = [req["module"]] + list(req["args"])
        import importlib

        importlib.import_module(req["module"]).main(list(req["args"]))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported in the cell's log, as an exec'd process would
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _native_threads() -> int:
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1


def _thread_names() -> str:
    """The native threads' names (what started them, often), for the parent's log."""
    names: dict[str, int] = {}
    for tid in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else []:
        try:
            with open(f"/proc/self/task/{tid}/comm") as fh:
                name = fh.read().strip()
        except OSError:
            continue
        names[name] = names.get(name, 0) + 1
    return ", ".join(f"{n} x{c}" if c > 1 else n for n, c in sorted(names.items()))


_PROBE_CHILD = False  # True in the probe child (_probe_cuda)


class _DriverGuard:
    """What the parent's imports asked about CUDA: `touched` lists calls that reached the CUDA
    runtime's device count (they initialise the driver); `answers` (set by answer()) are returned
    by torch.cuda.is_available()/device_count() instead of asking NVML."""

    def __init__(self):
        self.touched: list[str] = []
        self.answers: dict[str, object] = {}

    def answer(self, device_count: int) -> None:
        self.answers = {"is_available": device_count > 0, "device_count": device_count}


@contextlib.contextmanager
def _no_cuda_driver(with_torch: bool):
    """While the parent imports: torch.cuda.is_available() asks NVML instead of the CUDA runtime
    (PYTORCH_NVML_BASED_CUDA_CHECK; the runtime's cudaGetDeviceCount initialises the driver, and a
    driver initialised before fork cannot be used in the children: torch then refuses with
    "Cannot re-initialize CUDA in forked subprocess", as seen on the H200), or, once the guard has
    answers, returns them without asking anyone; any call that still reaches the runtime's device
    count is recorded with its caller. Yields the _DriverGuard."""
    guard = _DriverGuard()
    had = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    real = None
    if with_torch:
        import torch

        real = getattr(torch._C, "_cuda_getDeviceCount", None)
    def caller() -> str:
        return " <- ".join(f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno}"
                           for f in reversed(traceback.extract_stack(limit=7)[:-2]))

    saved = {}
    if real is not None:
        def recording():
            guard.touched.append(f"torch._C._cuda_getDeviceCount called from {caller()}")
            return real()
        torch._C._cuda_getDeviceCount = recording
    if with_torch:
        # who asks about CUDA while importing goes to the parent's log (launcher.log): an NVML
        # query also starts a thread in some drivers, which makes the parent refuse to fork
        for name in ("is_available", "device_count"):
            saved[name] = getattr(torch.cuda, name)

            def logged(*a, _name=name, **k):
                known = _name in guard.answers
                if not _PROBE_CHILD:
                    print(f"fork parent: torch.cuda.{_name}() during the imports, from {caller()}"
                          + (f"; answered {guard.answers[_name]!r} from the probe" if known else ""),
                          file=sys.stderr, flush=True)
                return guard.answers[_name] if known else saved[_name](*a, **k)
            setattr(torch.cuda, name, logged)
    try:
        yield guard
    finally:
        if real is not None:
            torch._C._cuda_getDeviceCount = real
        for name, fn in saved.items():
            setattr(torch.cuda, name, fn)
        if had is None:
            os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)
        else:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = had


def _probe_cuda() -> tuple[int, str | None]:
    """Fork a child that initialises CUDA and runs one kernel: (the devices it sees, None) if it
    worked, else (0, why not)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        global _PROBE_CHILD
        _PROBE_CHILD = True  # its own CUDA start is not the parent's imports asking: not logged
        os.close(r)
        try:
            import torch

            torch.zeros(1, device="cuda").add_(1).item()
            # the runtime's count (torch.cuda.device_count() may be the guard's logging wrapper here)
            os.write(w, f"ok {torch._C._cuda_getDeviceCount()}".encode())
            os._exit(0)
        except BaseException as exc:  # noqa: BLE001
            os.write(w, f"{type(exc).__name__}: {exc}"[:2000].encode(errors="replace"))
            os._exit(1)
    os.close(w)
    chunks = []
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    said = b"".join(chunks).decode(errors="replace")
    if os.waitstatus_to_exitcode(status) == 0 and said.startswith("ok "):
        return int(said.split()[1]), None
    return 0, f"{CUDA_FAILED}: {said or f'wait status {status}'}"


def serve(sock: socket.socket) -> None:
    die_with_parent()
    t0 = time.perf_counter()
    # the launcher's settings for this parent: not part of the environment the children compare
    probe_cuda = os.environ.pop(CUDA_ENV, "") == "1"
    names = [m for m in os.environ.pop(PRELOAD_ENV, ",".join(PRELOAD)).split(",") if m]
    parent_env = dict(os.environ)  # as launched: what an import sets is set again in every child
    try:
        import importlib

        why = None
        with _no_cuda_driver(any(n.split(".")[0] in ("torch", "collector") for n in names)) as guard:
            # `import torch` starts one native thread of its own, which it makes safe to fork (a
            # DataLoader forks its workers after it); any other thread would be someone else's
            baseline = _native_threads()
            if probe_cuda and "torch" in sys.modules:
                # the children's answers, from a child that started CUDA (the parent must not)
                count, why = _probe_cuda()
                guard.answer(count)
            for name in names if why is None else ():
                importlib.import_module(name)
        import_s = time.perf_counter() - t0
        native = _native_threads()
        if why is None:
            print(f"fork parent: imported {', '.join(names)} in {import_s:.1f} s; native threads {baseline} "
                  f"after torch, {native} after all ({_thread_names()})", file=sys.stderr, flush=True)
        if why:
            pass
        elif guard.touched:
            why = f"the imports initialised the CUDA driver (forked children could not use CUDA): {guard.touched[0]}"
        elif threading.active_count() != 1 or native > baseline:
            # fewer is fine: on the H200 torch's 16 threads were gone after the probe child's fork
            why = (f"{threading.active_count()} Python and {native} native threads after the imports, "
                   f"{baseline} after importing torch (forking with other threads alive is unsafe)")
        elif "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized():
            why = "CUDA was initialised by the imports"
        elif probe_cuda:
            why = _probe_cuda()[1]  # and still starts in a child of the parent as it now is
    except BaseException as exc:  # noqa: BLE001
        why, import_s = f"import failed: {type(exc).__name__}: {exc}", None
    if why:
        # a failed CUDA probe: no parent can serve CUDA cells, whatever it imports (no retry)
        _send(sock, {"ready": False, "why": why, "modules": names, "cuda_failed": why.startswith(CUDA_FAILED)})
        return
    _send(sock, {"ready": True, "import_s": import_s, "pid": os.getpid(), "modules": names})
    _serve_requests(sock, parent_env)


def _serve_requests(sock: socket.socket, parent_env: dict) -> None:
    """Fork one child a request, with the request's output pipe, until the launcher closes the channel;
    a request whose environment differs from the parent's is refused, naming the variables."""
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 1)
        except OSError:
            return
        if not data:
            return  # the launcher closed the channel
        req = json.loads(data)
        out_fd = fds[0] if fds else None
        differ = env_difference(parent_env, req["env"])
        if out_fd is None or differ:
            if out_fd is not None:
                os.close(out_fd)
            _send(sock, {"refused": "no output pipe" if out_fd is None else
                         f"the environment differs from the parent's in {', '.join(differ)}"})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(req, out_fd, sock)
        os.close(out_fd)
        _send(sock, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        _send(sock, {"pid": pid, "status": status})


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
