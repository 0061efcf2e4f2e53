"""An independent check of the host-speed matching, in plain torch (nothing imported from sweeper).

    python -m studies.decisive.plain_check [--pairs 30] [--out FILE.json] [--only N ...]
                                           [--pin FIRST-LAST] [--threads N]

Settings the tool's committed sweeps also time (studies/decisive/launch_bound.yaml and the
speed study's 24-setting yardstick): bert-base bf16 inference at batch 8, seq 128 (launch-bound:
eager against `reduce-overhead`; the bare encoder fed ids only, then as the tool's zoo builds and
feeds it: with its classification head and an all-ones attention mask, with the head but no
mask, and with head and mask compiled with `dynamic=False` as the tool's specs do; matmul precision
"high" as the tool's specs set it), and resnet50 fp32 (matmul precision "high") at batch 64
(GPU-bound: eager against `default`). Per setting: both arms built and warmed in this process,
then `--pairs` pairs of windows (eager then compiled, >= 0.1 s and >= 10 steps each, timed with
CUDA events), a pure-Python probe (200,000 additions, this script's own) timed right before and
right after each window; a window's reading is the slower of its two probes. The fast state is
every window whose reading is within 15% of the 20th percentile of all readings; the rest are slow.

Printed and written per setting: each arm's median step at each state (and how many windows),
the slow/fast ratio with its standard error, whether the arm moved by more than 1% (the ratio
+/- 2 SE outside 1.00 +/- 0.01 means moved; inside means unmoved; otherwise undecided), and the
speedup (median of per-pair ratios) over fast pairs, slow pairs and all pairs. Needs CUDA.

`--only` runs the settings of those numbers (1-5, in the order above); `--pin` and `--threads` place
the process as a measuring process sharing its GPU is placed (`trials_per_gpu: 2` on 16 vCPUs: CPUs
0-7, 8 torch threads), to compare a compiled step placed both ways.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
import torch

FAST_WITHIN = 1.15


def probe_ms(n: int = 200_000) -> float:
    t0 = time.perf_counter()
    s = 0
    for i in range(n):
        s += i
    return (time.perf_counter() - t0) * 1e3


def window(step, min_s: float = 0.1, min_iters: int = 10) -> float:
    """Median-free window: total GPU time / steps, CUDA events around the whole window."""
    t_end = time.perf_counter() + min_s
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    n = 0
    while n < min_iters or time.perf_counter() < t_end:
        step()
        n += 1
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / n


def bert_arms(head: bool = False, mask: bool = False, dynamic: bool | None = None):
    """bert-base bf16 (autocast), batch 8, seq 128; `head`: with the sequence-classification head
    (the tool's zoo model), `mask`: an all-ones attention mask passed too (as the tool's batches do;
    under torch.compile transformers keeps it, so SDPA gets a boolean mask); `dynamic`: torch.compile's
    flag (the tool's specs set False, torch's default is None)."""
    from transformers import BertConfig, BertForSequenceClassification, BertModel

    torch.set_float32_matmul_precision("high")
    with torch.device("cuda"):
        model = (BertForSequenceClassification if head else BertModel)(BertConfig()).eval()
    ids = torch.randint(3, 30000, (8, 128), device="cuda")
    kwargs = {"attention_mask": torch.ones_like(ids)} if mask else {}
    compiled = torch.compile(model, mode="reduce-overhead", dynamic=dynamic)

    def arm(m):
        def step():
            with torch.no_grad(), torch.autocast("cuda", torch.bfloat16):
                torch.compiler.cudagraph_mark_step_begin()
                m(ids, **kwargs)
        return step
    return arm(model), arm(compiled)


def resnet_arms():
    import torchvision

    torch.set_float32_matmul_precision("high")
    with torch.device("cuda"):
        model = torchvision.models.resnet50().eval()
    x = torch.randn(64, 3, 224, 224, device="cuda")
    compiled = torch.compile(model)

    def arm(m):
        def step():
            with torch.no_grad():
                m(x)
        return step
    return arm(model), arm(compiled)


def ratio_se(slow: list[float], fast: list[float]) -> tuple[float, float]:
    """slow/fast median ratio and its standard error (delta method on the two medians' SEs)."""
    ms, mf = statistics.median(slow), statistics.median(fast)
    se = lambda v: 1.2533 * statistics.stdev(v) / len(v) ** 0.5  # noqa: E731  SE of a median
    r = ms / mf
    return r, r * ((se(slow) / ms) ** 2 + (se(fast) / mf) ** 2) ** 0.5


def judge(r: float, se: float) -> str:
    if r - 2 * se > 1.01 or r + 2 * se < 0.99:
        return "moved"
    if r - 2 * se >= 0.99 and r + 2 * se <= 1.01:
        return "unmoved"
    return "undecided"


def run_setting(name: str, arms, pairs: int) -> dict:
    t0 = time.perf_counter()
    eager, compiled = arms()
    for step in (eager, compiled):
        for _ in range(5):
            step()
    torch.cuda.synchronize()
    setup_s = time.perf_counter() - t0
    rows = []
    for _ in range(pairs):
        row = {}
        for arm, step in (("eager", eager), ("compiled", compiled)):
            before = probe_ms()
            ms = window(step)
            row[arm] = ms
            row[arm + "_reading"] = max(before, probe_ms())
        rows.append(row)
    readings = [r[a + "_reading"] for r in rows for a in ("eager", "compiled")]
    ref = float(np.quantile(readings, 0.2))
    out = {"setting": name, "setup_s": round(setup_s, 1), "ref_probe_ms": round(ref, 3), "windows": rows}
    for arm in ("eager", "compiled"):
        fast = [r[arm] for r in rows if r[arm + "_reading"] <= FAST_WITHIN * ref]
        slow = [r[arm] for r in rows if r[arm + "_reading"] > FAST_WITHIN * ref]
        a = {"fast_n": len(fast), "slow_n": len(slow), "all_ms": statistics.median(r[arm] for r in rows)}
        if fast:
            a["fast_ms"] = statistics.median(fast)
        if len(fast) >= 3 and len(slow) >= 3:
            r, se = ratio_se(slow, fast)
            a.update(slow_over_fast=round(r, 4), se=round(se, 4), judged=judge(r, se))
        out[arm] = a
    both_fast = [r for r in rows if max(r["eager_reading"], r["compiled_reading"]) <= FAST_WITHIN * ref]
    both_slow = [r for r in rows if min(r["eager_reading"], r["compiled_reading"]) > FAST_WITHIN * ref]
    for label, sel in (("fast", both_fast), ("slow", both_slow), ("all", rows)):
        if sel:
            out[f"speedup_{label}"] = round(statistics.median(r["eager"] / r["compiled"] for r in sel), 3)
            out[f"pairs_{label}"] = len(sel)
    return out


SETTINGS = [
    ("bert-base bf16 bs8 seq128, eager vs reduce-overhead", bert_arms),
    ("bert-base + classification head, attention mask, bf16 bs8 seq128, eager vs reduce-overhead",
     lambda: bert_arms(head=True, mask=True)),
    ("bert-base + classification head, no mask", lambda: bert_arms(head=True)),
    ("bert-base + classification head, attention mask, dynamic=False (as the tool's specs)",
     lambda: bert_arms(head=True, mask=True, dynamic=False)),
    ("resnet50 fp32 bs64, eager vs default", resnet_arms),
]


def place(pin: str | None, threads: int | None) -> dict:
    """Pin the process to CPUs FIRST-LAST and set torch's threads, as asked; what the process has."""
    if pin:
        first, _, last = pin.partition("-")
        os.sched_setaffinity(0, range(int(first), int(last or first) + 1))
    if threads:
        torch.set_num_threads(threads)
    cpus = sorted(os.sched_getaffinity(0))
    return {"cpus": f"{cpus[0]}-{cpus[-1]}" if cpus == list(range(cpus[0], cpus[-1] + 1)) else cpus,
            "torch_threads": torch.get_num_threads()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=30)
    ap.add_argument("--out")
    ap.add_argument("--only", type=int, nargs="+", choices=range(1, len(SETTINGS) + 1),
                    help="the settings to run, by number (default: all)")
    ap.add_argument("--pin", help="CPUs FIRST-LAST to pin the process to (e.g. 0-7)")
    ap.add_argument("--threads", type=int, help="torch's intra-op threads")
    args = ap.parse_args()
    placement = place(args.pin, args.threads)
    chosen = [SETTINGS[i - 1] for i in (args.only or range(1, len(SETTINGS) + 1))]
    results = [dict(run_setting(name, arms, args.pairs), **placement) for name, arms in chosen]
    results.insert(0, {"torch": torch.__version__, "device": torch.cuda.get_device_name()})
    for r in results[1:]:
        print(json.dumps({k: v for k, v in r.items() if k != "windows"}))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
