"""Does sampling GPU utilization disturb the timing? The same trial, timed with and without it.

One process builds a spec's trial (compiling it unless its mode is eager), then times windows of
its steps alternating between two arms that differ only in the NVML sampler running during the
window: sampled, plain, plain, sampled, ... (half the pairs in each order). The change in the
median step time, with a 95% bootstrap interval over the pairs, is what sampling costs.

    python -m benchmarks.util_overhead SPEC --setting vit_tiny:eager:bf16 [...] [--windows 20]
        [--out OUT.json]

Needs a CUDA device and NVML (`pip install nvidia-ml-py`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from sweeper.measure import gpu_util
from sweeper.measure.pipeline import compile_model
from sweeper.measure.timing import Arm, WindowStats, calibrate, fixed_window, paired_interval, run_interleaved
from sweeper.measure.workbench import build_workbench
from sweeper.spec.sweep_spec import load_spec
from sweeper.spec.trials import Trial, expand

REPO = Path(__file__).resolve().parent.parent


def pick(spec_path: str, setting: str) -> Trial:
    """The spec's trial for `model:mode:precision` (its first batch size)."""
    model, mode, precision = setting.split(":")
    trials, _ = expand(load_spec(spec_path))
    for t in trials:
        if (t.model_name, t.mode, t.precision) == (model, mode, precision):
            return t
    raise ValueError(f"no trial {setting} in {spec_path}")


def merge_windows(a: WindowStats, b: WindowStats) -> WindowStats:
    return WindowStats(a.window_s + b.window_s, a.iter_s + b.iter_s, a.iters_per_window)


def sampling_overhead(trial: Trial, device: torch.device, windows: int = 20) -> dict[str, Any]:
    """Median step time with and without the sampler, from alternated windows of one module."""
    wb = build_workbench(trial, device)
    module = wb.model if trial.mode == "eager" else compile_model(wb)
    m = trial.measure
    iters = calibrate(lambda: wb.step(module), device, m.warmup_iters + 1, m.min_window_iters, m.min_window_s)
    with gpu_util.sampling(device) as sampler:
        if sampler is None:
            raise ValueError(f"no NVML on {device}: nothing to sample")
        util = gpu_util.ArmUtil()
        sampled = Arm(fixed_window(lambda: wb.step(module), device, iters), iters,
                      lambda: sampler.begin(util), sampler.end)
        plain = Arm(fixed_window(lambda: wb.step(module), device, iters), iters)
        s1, p1 = run_interleaved([sampled, plain], windows // 2)
        p2, s2 = run_interleaved([plain, sampled], windows - windows // 2)
    with_s, without_s = merge_windows(s1, s2), merge_windows(p1, p2)
    low, high = paired_interval(with_s, without_s, m.seed)  # sampled over plain step time
    return {"trial": trial.label, "device": torch.cuda.get_device_name(device), "windows": windows,
            "iters_per_window": iters, "step_ms_sampled": with_s.median_iter_s * 1e3,
            "step_ms_plain": without_s.median_iter_s * 1e3,
            "change_pct": (with_s.median_iter_s / without_s.median_iter_s - 1) * 100,
            "change_pct_ci": [(low - 1) * 100, (high - 1) * 100],
            "readings": len(util.kept), **util.as_row("")}


def reading_cost(device: torch.device, readings: int = 200) -> dict[str, float]:
    """What one NVML reading costs the process, timed in this thread: the sampler's thread can take
    at most that much from the timed loop per reading (less: NVML's calls run without the GIL), so
    its share of each period bounds what sampling can add to a step, however launch-bound."""
    probe = gpu_util.open_probe(device)
    if probe is None:
        raise ValueError(f"no NVML on {device}")
    costs = []
    for _ in range(readings):
        t0 = time.perf_counter()
        probe.read()
        costs.append(time.perf_counter() - t0)
    median_s = statistics.median(costs)
    return {"reading_us_median": median_s * 1e6, "reading_us_p90": statistics.quantiles(costs, n=10)[-1] * 1e6,
            "bound_pct": 100 * median_s / gpu_util.SAMPLE_PERIOD_S}


def write_json(result: Any, out: Path | None) -> None:
    """Print the result as JSON, and write it to `out` too when given."""
    text = json.dumps(result, indent=1)
    if out:
        out.write_text(text + "\n")
    sys.stdout.write(text + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("--setting", action="append", required=True, help="model:mode:precision")
    ap.add_argument("--windows", type=int, default=20)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    cost = reading_cost(torch.device("cuda"))
    results = [{**sampling_overhead(pick(args.spec, s), torch.device("cuda"), args.windows), **cost}
               for s in args.setting]
    write_json(results, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
