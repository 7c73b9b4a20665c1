"""GPU telemetry through NVML (module `pynvml` from nvidia-ml-py), read between timed blocks
(or sampled in a thread).

NVML ignores CUDA_VISIBLE_DEVICES, so the device is found by the UUID that torch
reports for the device in use. Anything unavailable stays None: never faked.
"""
from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Telemetry:
    gpu_util_pct: float | None
    gpu_power_w: float | None
    sm_clock_mhz: float | None
    gpu_temp_c: float | None


class NvmlMonitor:
    """Samples utilisation, power, SM clock and temperature every `interval_s` while running."""

    def __init__(self, pynvml, handle, interval_s: float = 0.05):
        self.nv, self.handle, self.interval_s = pynvml, handle, interval_s
        self.samples: list[tuple] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def open(cls, torch_uuid: str) -> "NvmlMonitor | None":
        """A monitor for the GPU with this UUID, or None where NVML is unavailable."""
        try:
            import pynvml

            pynvml.nvmlInit()
            uuid = torch_uuid if torch_uuid.startswith("GPU-") else f"GPU-{torch_uuid}"
            return cls(pynvml, pynvml.nvmlDeviceGetHandleByUUID(uuid))
        except Exception:
            return None

    def _read(self, fn, *args):
        try:
            return fn(self.handle, *args)
        except Exception:
            return None

    def energy_j(self) -> float | None:
        """Cumulative energy counter of the GPU in joules (None where unsupported)."""
        mj = self._read(self.nv.nvmlDeviceGetTotalEnergyConsumption)
        return None if mj is None else mj / 1e3

    def sample(self) -> None:
        """One reading of utilisation, power, SM clock and temperature (the collector takes one
        after each round of timed blocks, outside the timed region)."""
        nv = self.nv
        util = self._read(nv.nvmlDeviceGetUtilizationRates)
        power = self._read(nv.nvmlDeviceGetPowerUsage)
        clock = self._read(nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_SM)
        temp = self._read(nv.nvmlDeviceGetTemperature, nv.NVML_TEMPERATURE_GPU)
        self.samples.append((None if util is None else util.gpu,
                             None if power is None else power / 1e3, clock, temp))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> Telemetry:
        """Stop sampling; means of utilisation, power and SM clock, and the maximum temperature."""
        self._stop.set()
        if self._thread:
            self._thread.join()
        cols = list(zip(*self.samples)) if self.samples else [[], [], [], []]

        def agg(values, fn):
            vals = [v for v in values if v is not None]
            return float(fn(vals)) if vals else None

        return Telemetry(agg(cols[0], statistics.fmean), agg(cols[1], statistics.fmean),
                         agg(cols[2], statistics.fmean), agg(cols[3], max))
