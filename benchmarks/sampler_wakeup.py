"""What one wake-up of the utilization sampler costs a launch-bound loop, amplified until it shows.

A step that launches many tiny kernels is CPU-bound: Python holds the GIL nearly all the time, so
the sampler's thread waking up (the sleep's end, taking the GIL from the loop, its reading, giving
the GIL back) is what could slow it. At sweeper's rate (one reading per `SAMPLE_PERIOD_S`) that
cost is far below what alternated windows of a jittery step can resolve; here the real `Sampler`
thread wakes `PERIOD_S` apart instead (100 times as often), with a stand-in reading that spins in
Python for as long as an NVML reading took (holding the GIL throughout: NVML's calls go through
ctypes, which releases it, so a real reading costs the loop less). The loop is a chain of tiny
torch CPU ops. Windows alternate sampled/plain (half the pairs in each order); the change of the
median window, divided by the wake-ups in a window, is the cost of one wake-up, and that over
`SAMPLE_PERIOD_S` bounds what the sampler adds to a step at its real rate.

    python -m benchmarks.sampler_wakeup [--windows 200] [--reading-us 10] [--out OUT.json]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from benchmarks.util_overhead import merge_windows, write_json
from sweeper.measure import gpu_util
from sweeper.measure.timing import Arm, calibrate, fixed_window, paired_interval, run_interleaved

REPO = Path(__file__).resolve().parent.parent

PERIOD_S = 0.001
"""Seconds between wake-ups here: 100 times sweeper's rate."""
OPS_PER_STEP = 50
"""Tiny torch ops per step: a step of tens of microseconds, all of it on the CPU."""


class SpinProbe:
    """A stand-in NVML probe: each reading spins in Python for `reading_s`, holding the GIL."""

    nvml = SimpleNamespace(NVMLError=RuntimeError)

    def __init__(self, reading_s: float):
        self.reading_s, self.readings = reading_s, 0

    def read(self) -> gpu_util.Reading:
        end = time.perf_counter() + self.reading_s
        while time.perf_counter() < end:
            pass
        self.readings += 1
        return gpu_util.Reading(0.0, 0.0, 0.0)


def launch_bound_step(x: torch.Tensor) -> torch.Tensor:
    for _ in range(OPS_PER_STEP):
        x = x * 1.0001 + 0.5
    return x


def wakeup_cost(windows: int = 200, reading_us: float = 10.0, period_s: float = PERIOD_S,
                min_window_s: float = 0.05) -> dict[str, Any]:
    """Alternated windows with and without the sampler waking every `period_s`; the change and
    what it makes of one wake-up, and the bound at sweeper's own period."""
    cpu, x = torch.device("cpu"), torch.ones(8)
    iters = calibrate(lambda: launch_bound_step(x), cpu, 50, 100, min_window_s)
    probe = SpinProbe(reading_us * 1e-6)
    sampler = gpu_util.Sampler(probe, period_s=period_s)  # type: ignore[arg-type]
    util = gpu_util.ArmUtil()
    try:
        sampled = Arm(fixed_window(lambda: launch_bound_step(x), cpu, iters), iters,
                      lambda: sampler.begin(util), sampler.end)
        plain = Arm(fixed_window(lambda: launch_bound_step(x), cpu, iters), iters)
        s1, p1 = run_interleaved([sampled, plain], windows // 2)
        p2, s2 = run_interleaved([plain, sampled], windows - windows // 2)
    finally:
        sampler.close()
    with_s, without_s = merge_windows(s1, s2), merge_windows(p1, p2)
    low, high = paired_interval(with_s, without_s)  # sampled over plain
    window_s = without_s.median_iter_s * iters
    wakeups = probe.readings / windows
    per_wakeup = [(r - 1) * window_s / wakeups * 1e6 for r in (with_s.median_iter_s / without_s.median_iter_s,
                                                                low, high)]
    return {"period_s": period_s, "reading_us": reading_us, "windows": windows, "iters_per_window": iters,
            "step_us_plain": without_s.median_iter_s * 1e6, "step_us_sampled": with_s.median_iter_s * 1e6,
            "change_pct": (with_s.median_iter_s / without_s.median_iter_s - 1) * 100,
            "change_pct_ci": [(low - 1) * 100, (high - 1) * 100], "wakeups_per_window": wakeups,
            "wakeup_us": per_wakeup[0], "wakeup_us_ci": per_wakeup[1:],
            "bound_pct_at_sample_period": 100 * max(per_wakeup[2], 0.0) * 1e-6 / gpu_util.SAMPLE_PERIOD_S,
            "sample_period_s": gpu_util.SAMPLE_PERIOD_S, "torch_threads": torch.get_num_threads(),
            "python_switch_interval_s": sys.getswitchinterval(), "cpu": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "threads_alive": threading.active_count()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=int, default=200)
    ap.add_argument("--reading-us", type=float, default=10.0, help="what one NVML reading took on the GPU host")
    ap.add_argument("--period-s", type=float, default=PERIOD_S)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    write_json(wakeup_cost(args.windows, args.reading_us, args.period_s), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
