"""Measure a host: its CPU-speed states as the witness sees them, and its run-to-run floors.

`sweeper calibrate` runs this. The probe is read every few milliseconds for a while: the low
quantile is the host's fast state, readings over WITNESS_SLOW_FACTOR of it are the slow state (shown;
the processes below record the fast state their windows read, which later trials judge by).
Then a launch-bound eager step (a stack of tiny layers: hundreds of small kernels) is timed in
fresh processes, one after the other, each with the witness around every window. The floors are
how far one process's median step lies from the others' (rounded up to a whole percent): at
the fast state only (what a matched comparison sees), and over every window (what an unmatched
one sees). The analysis uses them instead of its defaults (`sweeper.analysis.floors.read_profile`).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from sweeper.measure import matching, witness
from sweeper.measure.timing import Arm, calibrate, fixed_window

MIN_FLOOR = 0.02
"""No floor below the in-trial interval's own (timing.IN_TRIAL_FLOOR)."""


def probe_states(seconds: float, gap_s: float = 0.005) -> dict[str, Any]:
    """Read the witness for `seconds`: the fast state, the slow state and how often it came."""
    readings: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        readings.append(witness.probe_ms())
        time.sleep(gap_s)
    fast = witness.own_fast_ms(readings)
    slow = [r for r in readings if witness.is_slow(r, fast)]
    return {"witness_fast_ms": fast, "witness_slow_ms": statistics.median(slow) if slow else None,
            "slow_readings_pct": 100.0 * len(slow) / len(readings), "readings": len(readings)}


def _launch_bound_step(device: torch.device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(60)]).to(device).eval()
    x = torch.randn(8, 64, device=device)

    def step():
        with torch.no_grad():
            return model(x)
    return step


def one_process(device_name: str, windows: int) -> dict[str, Any]:
    """In this (fresh) process: the launch-bound step's median at the fast state and overall."""
    device = torch.device(device_name)
    step = _launch_bound_step(device)
    iters = calibrate(step, device, warmup_iters=10, min_iters=10, min_window_s=0.05)
    m = matching.run_matched([Arm(fixed_window(step, device, iters), iters)], windows)
    fast = m.headline(0)
    return {"fast_step_s": fast.median_iter_s if m.state != "slow" else None,
            "all_step_s": m.arms[0].median_iter_s, "slow_windows_pct": m.slow_windows_pct,
            "ref_ms": m.ref_ms}


def _floor(values: list[float]) -> float:
    mid = statistics.median(values)
    worst = max(abs(v / mid - 1.0) for v in values)
    return max(MIN_FLOOR, math.ceil(worst * 100) / 100)


def measure_host(device_name: str, seconds: float, processes: int, windows: int) -> dict[str, Any]:
    """The host profile: probe states, then `processes` fresh processes one after the other."""
    states = probe_states(seconds)  # idle readings: shown, never recorded (windows read higher)
    runs = []
    for _ in range(processes):
        out = subprocess.run([sys.executable, "-m", "sweeper.measure.host_profile", device_name, str(windows)],
                             capture_output=True, text=True, check=True, env=os.environ.copy())
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    fast = [r["fast_step_s"] for r in runs if r["fast_step_s"] is not None]
    all_windows = [r["all_step_s"] for r in runs]
    r2r = _floor(fast) if len(fast) >= 2 else _floor(all_windows)
    return {"hostname": socket.gethostname(), "cpu": platform.processor() or platform.machine(),
            "device": device_name if device_name == "cpu" else torch.cuda.get_device_name(0),
            "measured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            **states, "run_to_run_floor": r2r, "unstable_baseline_floor": max(r2r, _floor(all_windows)),
            "processes": runs}


def write_profile(profile: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(profile, indent=2) + "\n")
    return path


if __name__ == "__main__":
    print(json.dumps(one_process(sys.argv[1], int(sys.argv[2]))))
