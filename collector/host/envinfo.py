"""Environment of a run, probed in a child process (the parent never imports torch).

    python -m collector.host.envinfo DEVICE   # prints one JSON object
DEVICE is auto, cuda or cpu; the answer's `device` is the one resolved.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import socket
from pathlib import Path
import sys


def probe_in(python: str, device: str) -> dict:
    """This module run by `python` in a child process: the environment it sees. RuntimeError with
    the child's last words if it fails."""
    import subprocess

    from collector.host.zygote import die_with_parent

    root = Path(__file__).resolve().parents[2]
    # the probe dies with the collector (a kill -9 of the collector left it running for seconds)
    proc = subprocess.run([python, "-m", "collector.host.envinfo", device], cwd=root, capture_output=True, text=True,
                          preexec_fn=die_with_parent)
    from collector.host.stop import INTERRUPTED

    if proc.returncode != 0 and (INTERRUPTED.is_set() or proc.returncode in (-2, 130, -15)
                                 or proc.stderr.rstrip().endswith("KeyboardInterrupt")):
        # Ctrl-C reaches the probe too (one process group): a stop, not a failed probe
        raise KeyboardInterrupt("stopped during the environment probe")
    if proc.returncode != 0:
        raise RuntimeError(f"environment probe failed: {(proc.stderr or proc.stdout).strip()[-800:]}")
    return json.loads(proc.stdout)


def _version(pkg: str) -> str | None:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


# environment variables that change what torch.compile does or costs (Inductor and Dynamo settings,
# Triton, the allocator, logging, which can lengthen a compile), recorded per run so that two runs
# collected under different settings are not compared as if only the torch differed; the per-process
# cache folders the collector sets and the variable it sets around a fork are not settings
COMPILE_ENV_PREFIXES = ("TORCHINDUCTOR_", "TORCHDYNAMO_", "TORCH_COMPILE", "TORCH_LOGS", "TRITON_", "PYTORCH_",
                        "CUDA_LAUNCH_BLOCKING")
COMPILE_ENV_SKIP = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "PYTORCH_NVML_BASED_CUDA_CHECK",
                    "TORCHINDUCTOR_COMPILE_THREADS")  # the last has its own field


def compile_env(environ=None) -> str:
    """The settings above as 'NAME=value' pairs, sorted, space-separated; '' where none is set."""
    environ = os.environ if environ is None else environ
    return " ".join(f"{k}={environ[k]}" for k in sorted(environ)
                    if k.startswith(COMPILE_ENV_PREFIXES) and k not in COMPILE_ENV_SKIP)


def _nvml(uuid: str) -> dict:
    """Driver, SM clock and power limit at start, by UUID (NVML ignores CUDA_VISIBLE_DEVICES)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        return {"driver": pynvml.nvmlSystemGetDriverVersion(),
                "sm_clock_mhz_start": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                "sm_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
                "power_limit_w": pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1e3}
    except Exception as exc:  # no NVML: say so, never fake
        return {"nvml_error": f"{type(exc).__name__}: {exc}"}


def measure_peak_tflops(torch, device: str) -> dict:
    """Achieved TFLOP/s of a large matrix product, per precision, measured once per run on this
    device (GPU 0 of the process): the ceiling the report's efficiency figures are fractions of.

    CUDA: 8192^3 products in bf16, fp32 with TF32 and plain fp32, median of 10 after 3 warm-ups,
    timed with CUDA events. CPU: 2048^3 fp32, median of 5 after 1, perf_counter.
    """
    import statistics
    import time

    out = {}
    cuda = device == "cuda"
    n = 8192 if cuda else 2048
    cases = ([("bf16", torch.bfloat16, False), ("tf32", torch.float32, True), ("fp32", torch.float32, False)]
             if cuda else [("fp32", torch.float32, False)])
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        for name, dtype, tf32 in cases:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(n, n, device=device, dtype=dtype)
            b = torch.randn(n, n, device=device, dtype=dtype)
            times = []
            for i in range(13 if cuda else 6):
                if cuda:
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    torch.mm(a, b)
                    end.record()
                    end.synchronize()
                    dt_s = start.elapsed_time(end) / 1e3
                else:
                    t0 = time.perf_counter()
                    torch.mm(a, b)
                    dt_s = time.perf_counter() - t0
                if i >= (3 if cuda else 1):
                    times.append(dt_s)
            out[name] = round(2 * n ** 3 / statistics.median(times) / 1e12, 3)
            del a, b
    except Exception as exc:  # a figure we cannot measure stays absent, with the reason
        out["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    if cuda:
        torch.cuda.empty_cache()
    return out


def measure_host_dispatch(torch, device: str) -> dict:
    """The host's pace at issuing work, measured once per run: microseconds per eager op
    (`x.add_(1)` on a one-element tensor), issued back to back (`dispatch_us`: Python, the
    dispatcher and, on CUDA, the kernel launch) and each followed by a synchronise
    (`dispatch_sync_us`: plus the round trip to the device). Median of 7 batches of 500 after one
    warm-up batch. Launch-bound cells move with this figure between machines (docs/measurement.md);
    it also moves with the torch version, which pays the dispatch."""
    import statistics
    import time

    try:
        x = torch.zeros(1, device=device)
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        out = {}
        for name, each in (("dispatch_us", False), ("dispatch_sync_us", True)):
            per = []
            for batch in range(8):
                sync()
                t0 = time.perf_counter()
                for _ in range(500):
                    x.add_(1)
                    if each:
                        sync()
                sync()
                if batch:
                    per.append((time.perf_counter() - t0) / 500 * 1e6)
            out[name] = round(statistics.median(per), 3)
        return out
    except Exception as exc:  # a figure we cannot measure stays absent, with the reason
        return {"error": f"{type(exc).__name__}: {exc}"}


def probe(device: str) -> dict:
    """What run.json's environment records (docs/data.md) that can be read before the first cell."""
    import torch

    from collector.record.contract import model_packages

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("device 'cuda' was asked for, but torch sees no CUDA device; "
                         "valid here: cpu (or device=auto)")
    env = {
        "device": device,
        "torch_version": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", None),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "triton": _version("triton") or _version("pytorch-triton"),
        "torchvision": _version("torchvision"),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "hostname": socket.gethostname(),
        # hostnames repeat across machines of one kind (every lent H200 VM is "vm"): the kernel's
        # boot id tells two machines (or two boots) apart
        "boot_id": _boot_id(),
        "platform": platform.platform(),
        "inductor_compile_threads": os.environ.get("TORCHINDUCTOR_COMPILE_THREADS"),
        "compile_env": compile_env(),
        "torch_num_threads": torch.get_num_threads(),
        # what builds the models beside torch (transformers, timm, ...): a comparison names a difference
        "model_packages": model_packages(),
        "gpu_name": None, "gpu_count": 0,
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(gpu_name=props.name, gpu_count=torch.cuda.device_count(), gpu_uuid=str(props.uuid),
                   gpu_memory_bytes=props.total_memory, gpu_sm_count=props.multi_processor_count)
        env.update(_nvml(str(props.uuid)))
    env["device_name"] = env["gpu_name"] if device == "cuda" else env["cpu_model"]
    env["peak_tflops"] = measure_peak_tflops(torch, device)
    env["host_calibration"] = measure_host_dispatch(torch, device)
    return env


if __name__ == "__main__":
    print(json.dumps(probe(sys.argv[1] if len(sys.argv) > 1 else "auto")))
