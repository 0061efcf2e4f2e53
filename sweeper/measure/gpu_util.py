"""GPU utilization of a trial's timed windows, read through NVML (the `nvidia-ml-py` package).

A background thread samples the GPU's SM utilization, memory-bus utilization and power while a
timed window runs; it is told when a window begins and ends by the arm's hooks, which run
outside the timed region, and otherwise sleeps on an event. Each arm (eager, compiled) gets
the means over its windows. Nothing is read on CPU, or where NVML cannot be opened (package
missing, no driver): the row's columns stay null.

NVML reports utilization as the share of its own sample period (1/6 s to 1 s by product)
during which a kernel ran, and power averaged over up to 1 s, so a reading taken early in a
window still covers the time before it (the other arm's window, the hooks). Readings taken
within `SETTLE_S` of a window's start are left out, unless the window had no later one.
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

log = logging.getLogger(__name__)

SAMPLE_PERIOD_S = 0.1
"""Seconds between readings during a window: ten NVML calls a second."""
SETTLE_S = 0.2
"""Readings this soon after a window's start are left out (they cover time before it)."""
COLUMNS = ("gpu_util_pct", "gpu_mem_util_pct", "gpu_power_w")
"""The compiled arm's (or an eager trial's) means; `eager_` + each: the eager arm's."""


@dataclass(frozen=True)
class Reading:
    sm_pct: float
    mem_pct: float
    power_w: float


class Probe:
    """One GPU's NVML handle: a reading is SM %, memory-bus %, and power (instantaneous where
    the driver offers it, else the driver's averaged figure)."""

    def __init__(self, nvml: ModuleType, handle: Any):
        self.nvml, self.handle = nvml, handle
        self.instant_power = self._power_instant() is not None

    def _power_instant(self) -> float | None:
        try:
            (value,) = self.nvml.nvmlDeviceGetFieldValues(self.handle, [self.nvml.NVML_FI_DEV_POWER_INSTANT])
        except (self.nvml.NVMLError, AttributeError):
            return None
        return value.value.uiVal / 1e3 if value.nvmlReturn == self.nvml.NVML_SUCCESS else None

    def sm_clock_mhz(self) -> float | None:
        """The SM clock now (MHz); None when the driver will not say."""
        try:
            return float(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))
        except (self.nvml.NVMLError, AttributeError):
            return None

    def read(self) -> Reading:
        rates = self.nvml.nvmlDeviceGetUtilizationRates(self.handle)
        power = self._power_instant() if self.instant_power else None
        if power is None:
            power = self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1e3
        return Reading(float(rates.gpu), float(rates.memory), power)


def _import_nvml() -> ModuleType | None:
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def open_probe(device: torch.device, nvml: ModuleType | None = None) -> Probe | None:
    """The NVML probe of `device`'s GPU (found by UUID, so CUDA_VISIBLE_DEVICES cannot mislead
    it), or None on CPU, without the package, or when NVML cannot start."""
    if device.type != "cuda":
        return None
    nvml = nvml or _import_nvml()
    if nvml is None:
        log.info("GPU utilization not sampled: nvidia-ml-py is not installed")
        return None
    try:
        nvml.nvmlInit()
        uuid = str(torch.cuda.get_device_properties(device).uuid)
        return Probe(nvml, nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"))
    except nvml.NVMLError as e:
        log.warning("GPU utilization not sampled: NVML: %s", e)
        return None


@dataclass
class ArmUtil:
    """The readings kept for one arm's windows."""

    kept: list[Reading] = field(default_factory=list)

    def add_window(self, timed: list[tuple[float, Reading]]) -> None:
        """One window's readings as (seconds after its start, reading)."""
        settled = [r for age, r in timed if age >= SETTLE_S]
        self.kept.extend(settled or [r for _, r in timed[-1:]])

    def as_row(self, prefix: str) -> dict[str, Any]:
        if not self.kept:
            return {f"{prefix}{c}": None for c in COLUMNS}
        return {f"{prefix}gpu_util_pct": statistics.fmean(r.sm_pct for r in self.kept),
                f"{prefix}gpu_mem_util_pct": statistics.fmean(r.mem_pct for r in self.kept),
                f"{prefix}gpu_power_w": statistics.fmean(r.power_w for r in self.kept)}


class Sampler:
    """The background thread. `begin(arm)` before a window, `end()` after it; `close()` once.

    While no window runs the thread blocks on an event. In a window it sleeps a period, then
    reads, so the window's first reading is a period after its start."""

    def __init__(self, probe: Probe, period_s: float | None = None):
        self.probe, self.period_s = probe, period_s or SAMPLE_PERIOD_S
        self._lock = threading.Lock()
        self._active = threading.Event()
        self._closed = False
        self._arm: ArmUtil | None = None
        self._window_no = 0
        self._start = 0.0
        self._readings: list[tuple[float, Reading]] = []
        self._thread = threading.Thread(target=self._loop, name="gpu-util", daemon=True)
        self._thread.start()

    def begin(self, arm: ArmUtil) -> None:
        with self._lock:
            self._arm, self._start, self._readings = arm, time.monotonic(), []
            self._window_no += 1
        self._active.set()

    def end(self) -> None:
        self._active.clear()
        with self._lock:
            arm, readings, self._arm = self._arm, self._readings, None
        if arm is not None:
            arm.add_window(readings)

    def clock_mhz(self) -> float | None:
        """The SM clock now, read on the caller's thread (NVML is thread-safe)."""
        return self.probe.sm_clock_mhz()

    def close(self) -> None:
        self._closed = True
        self._active.set()
        self._thread.join(timeout=5 * self.period_s + 1)

    def _loop(self) -> None:
        while True:
            self._active.wait()
            if self._closed:
                return
            time.sleep(self.period_s)
            with self._lock:
                window, start, running = self._window_no, self._start, self._arm is not None
            reading = self._read() if running else None
            with self._lock:
                if reading is not None and self._arm is not None and self._window_no == window:
                    self._readings.append((time.monotonic() - start, reading))

    def _read(self) -> Reading | None:
        try:
            return self.probe.read()
        except self.probe.nvml.NVMLError as e:
            log.warning("NVML reading failed: %s", e)
            return None


@contextlib.contextmanager
def sampling(device: torch.device, enabled: bool = True) -> Iterator[Sampler | None]:
    """A sampler for the block's timed windows, or None (disabled, CPU, no NVML)."""
    probe = open_probe(device) if enabled else None
    sampler = Sampler(probe) if probe is not None else None
    try:
        yield sampler
    finally:
        if sampler is not None:
            sampler.close()
