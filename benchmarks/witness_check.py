"""Does the host-speed witness see what slows a launch-bound step, and what does it cost?

    python -m benchmarks.witness_check [--windows 150] [--out FILE.json]

Part 1: a launch-bound eager step (bert-base bf16, batch 8, seq 128: hundreds of small kernels
from one CPU thread) timed in `--windows` windows of 20 steps, the witness read before each
(the tool's probe, `witness.PROBE_OPS` tiny torch CPU ops) and a 3,000-op probe beside it:
the correlation of the window's step time with each probe, and the step's median at the fast
and the slow state. Part 2: a GPU-bound step (resnet50 fp32, batch 64) in windows alternated
with and without the probe before them: the step time either way (the probe is outside the
timed window, so only its wall cost should show) and the probe's share of a 0.1 s window.
Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

from sweeper.measure import witness


def big_probe_ms(ops: int = 3000) -> float:
    t = torch.zeros(4)
    t0 = time.perf_counter()
    for _ in range(ops):
        t.add(1)
    return (time.perf_counter() - t0) * 1e3


def window_ms(step, iters: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters


def launch_bound(windows: int) -> dict:
    from transformers import BertConfig, BertModel

    with torch.device("cuda"):
        model = BertModel(BertConfig()).eval()
    ids = torch.randint(0, 30000, (8, 128), device="cuda")

    def step():
        with torch.no_grad(), torch.autocast("cuda", torch.bfloat16):
            model(ids)
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    rows = []
    for _ in range(windows):
        small = witness.probe_ms()
        big = big_probe_ms()
        rows.append((small, big, window_ms(step, 20)))
    small, big, step_ms = (np.array(c) for c in zip(*rows, strict=True))
    ref = witness.own_fast_ms(list(small))
    slow = small > ref * witness.SLOW_FACTOR
    return {"windows": windows, "probe_ops": witness.PROBE_OPS,
            "corr_step_vs_probe": float(np.corrcoef(step_ms, small)[0, 1]),
            "corr_step_vs_probe_3000": float(np.corrcoef(step_ms, big)[0, 1]),
            "probe_fast_ms": ref, "probe_median_ms": float(np.median(small)),
            "slow_windows_pct": float(100 * slow.mean()),
            "step_ms_fast_median": float(np.median(step_ms[~slow])) if (~slow).any() else None,
            "step_ms_slow_median": float(np.median(step_ms[slow])) if slow.any() else None,
            "step_ms_min": float(step_ms.min()), "step_ms_max": float(step_ms.max()),
            "rows": [[round(a, 4), round(b, 4), round(c, 4)] for a, b, c in rows]}


def gpu_bound(pairs: int) -> dict:
    import torchvision

    with torch.device("cuda"):
        model = torchvision.models.resnet50().eval()
    x = torch.randn(64, 3, 224, 224, device="cuda")

    def step():
        with torch.no_grad():
            model(x)
    for _ in range(10):
        step()
    with_probe, without = [], []
    for _ in range(pairs):
        without.append(window_ms(step, 10))
        witness.probe_ms()
        with_probe.append(window_ms(step, 10))
    probe = statistics.median(witness.probe_ms() for _ in range(20))
    a, b = statistics.median(with_probe), statistics.median(without)
    return {"pairs": pairs, "step_ms_with_probe": a, "step_ms_without": b, "change_pct": 100 * (a / b - 1),
            "probe_ms": probe, "probe_share_of_100ms_window_pct": probe / 100 * 100}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=150)
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--out")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    out = {"launch_bound": launch_bound(args.windows), "gpu_bound": gpu_bound(args.pairs),
           "device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    lb, gb = out["launch_bound"], out["gpu_bound"]
    print(f"launch-bound bert-base bf16 b8: corr(step, probe {lb['probe_ops']} ops) {lb['corr_step_vs_probe']:.2f}, "
          f"3000 ops {lb['corr_step_vs_probe_3000']:.2f}; slow windows {lb['slow_windows_pct']:.0f}%; step "
          f"{lb['step_ms_fast_median']} ms fast / {lb['step_ms_slow_median']} ms slow (medians)")
    print(f"gpu-bound resnet50 fp32 b64: {gb['step_ms_without']:.3f} ms without the probe, "
          f"{gb['step_ms_with_probe']:.3f} ms after it ({gb['change_pct']:+.2f}%); probe {gb['probe_ms']:.2f} ms "
          f"= {gb['probe_share_of_100ms_window_pct']:.1f}% of a 0.1 s window")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
