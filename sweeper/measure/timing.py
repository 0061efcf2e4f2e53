"""Trackers: per-iteration latency in timed windows, and peak memory, on CUDA or CPU.

On CUDA an event is recorded after every iteration and the device is synchronized once
per window, so per-iteration latencies cost no extra synchronization. On CPU the host
clock is read after every iteration.
"""

from __future__ import annotations

import math
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

GIB = 1024**3


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_call(fn: Callable[[], object], device: torch.device) -> tuple[float, object]:
    """Wall seconds of one call, device synchronized before and after."""
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t0, out


@dataclass
class WindowStats:
    window_s: list[float]
    iter_s: list[float]
    iters_per_window: int

    @property
    def median_iter_s(self) -> float:
        return statistics.median(self.window_s) / self.iters_per_window

    def throughput(self, items_per_iter: float) -> float:
        return items_per_iter / self.median_iter_s

    def percentile_ms(self, q: float) -> float:
        xs = sorted(self.iter_s)
        k = min(len(xs) - 1, max(0, math.ceil(q / 100 * len(xs)) - 1))
        return xs[k] * 1e3

    @property
    def spread_pct(self) -> float:
        per_iter = [w / self.iters_per_window for w in self.window_s]
        return (max(per_iter) - min(per_iter)) / statistics.median(per_iter) * 100


def calibrate(fn: Callable[[], object], device: torch.device, warmup_iters: int,
              min_iters: int, min_window_s: float) -> int:
    """Run the warm-up; return iterations per window meeting both floors."""
    elapsed, _ = timed_call(lambda: [fn() for _ in range(warmup_iters)], device)
    per_iter = max(elapsed / warmup_iters, 1e-7)
    return max(min_iters, math.ceil(min_window_s / per_iter))


def _window(fn: Callable[[], object], device: torch.device, iters: int) -> list[float]:
    """Seconds of each of `iters` back-to-back calls."""
    if device.type == "cuda":
        events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
        events[0].record()
        for i in range(iters):
            fn()
            events[i + 1].record()
        events[-1].synchronize()
        return [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(iters)]
    laps = []
    t = time.perf_counter()
    for _ in range(iters):
        fn()
        now = time.perf_counter()
        laps.append(now - t)
        t = now
    return laps


@dataclass
class Arm:
    """One contender of an interleaved measurement: what to call, how often per window, and
    optionally a memory tracker reset before each of its windows (its peak is kept)."""

    fn: Callable[[], object]
    iters: int
    mem: MemoryTracker | None = None
    peak_gib: float = 0.0


def run_interleaved(arms: list[Arm], device: torch.device, windows: int) -> list[WindowStats]:
    """Time `windows` windows of each arm, alternating arms window by window (A B A B ...).

    Contenders timed one after the other see different conditions when something else
    shares the host (a neighbour's compile, clock changes); alternating short windows gives
    both the same conditions, so their ratio holds even when the absolute numbers drift.
    """
    window_s: list[list[float]] = [[] for _ in arms]
    iter_s: list[list[float]] = [[] for _ in arms]
    for _ in range(windows):
        for k, arm in enumerate(arms):
            if arm.mem is not None:
                arm.mem.reset()
            laps = _window(arm.fn, device, arm.iters)
            if arm.mem is not None:
                arm.peak_gib = max(arm.peak_gib, arm.mem.peak_gib())
            iter_s[k].extend(laps)
            window_s[k].append(sum(laps))
    return [WindowStats(w, i, arm.iters) for w, i, arm in zip(window_s, iter_s, arms, strict=True)]


def run_windows(fn: Callable[[], object], device: torch.device, windows: int,
                iters: int) -> WindowStats:
    return run_interleaved([Arm(fn, iters)], device, windows)[0]


class MemoryTracker:
    """Peak memory since the last reset: CUDA allocator stats, or the process's RSS high-water."""

    def __init__(self, device: torch.device):
        self.device = device

    def reset(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            _reset_rss_hwm()

    def peak_gib(self) -> float:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device) / GIB
        return _rss_hwm_bytes() / GIB

    def peak_reserved_gib(self) -> float | None:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_reserved(self.device) / GIB
        return None


def _reset_rss_hwm() -> None:
    try:  # Linux: writing 5 resets the peak resident set size (VmHWM)
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _rss_hwm_bytes() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
