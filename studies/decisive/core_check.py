"""Does a launch-bound eager step's speed depend on the CPU its process runs on, and what sees it?

A plain script (torch, transformers, and alternation_check's CPU probe and window timer) behind the
decisive study's open question: two processes of one launch-bound eager step differ at the same
CPU-witness reading. Here one process times the same eager step (bert-base, bf16, batch 8, seq 128) with
its main thread pinned to each logical CPU in turn, and unpinned, in rotating blocks (a slow stretch
of the host falls on every condition alike). Before each window two witnesses are timed:

  cpu     400 tiny torch CPU ops (`t.add(1)` on 4 elements): the tool's witness
  launch  200 launches of a tiny CUDA kernel (`g.add_(1)` on 1 element), CPU time to enqueue them,
          the GPU idle before (the driver's launch path, which a launch-bound step pays per kernel)

Printed: per condition the median step, both witnesses' medians and the CPU the window ended on;
over all windows the correlation of step time with each witness. Run it in several fresh processes
to see whether a CPU's rank holds from one process to the next.

    python3 -m studies.decisive.core_check --out core_check.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

from studies.decisive.alternation_check import probe_ms, window


def launch_probe_ms(g: torch.Tensor, launches: int = 200) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(launches):
        g.add_(1)
    ms = (time.perf_counter() - t0) * 1e3
    torch.cuda.synchronize()
    return ms


def current_cpu() -> int:
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


def corr(xs: list[float], ys: list[float]) -> float:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sx = sum((x - mx) ** 2 for x in xs) ** 0.5
    sy = sum((y - my) ** 2 for y in ys) ** 0.5
    return sxy / (sx * sy) if sx and sy else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--window-s", type=float, default=0.1)
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--per-block", type=int, default=3, help="windows of each condition per block")
    ap.add_argument("--out")
    args = ap.parse_args()
    from transformers import BertConfig, BertModel

    all_cpus = sorted(os.sched_getaffinity(0))
    torch.manual_seed(0)
    model = BertModel(BertConfig()).to("cuda", torch.bfloat16).eval()
    ids = torch.randint(0, 30000, (args.batch, args.seq), device="cuda")
    mask = torch.ones_like(ids)
    g = torch.zeros(1, device="cuda")
    conditions: list[tuple[str, list[int]]] = [("all", all_cpus)] + [(f"cpu{c}", [c]) for c in all_cpus]
    windows = []
    with torch.no_grad():
        def step():
            return model(input_ids=ids, attention_mask=mask)

        for _ in range(20):
            step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            step()
        torch.cuda.synchronize()
        iters = max(5, round(args.window_s / ((time.perf_counter() - t0) / 20)))
        for block in range(args.blocks):
            order = conditions[block % len(conditions):] + conditions[: block % len(conditions)]
            for name, cpus in order:
                os.sched_setaffinity(0, cpus)
                step()
                torch.cuda.synchronize()
                for _ in range(args.per_block):
                    cpu_ms = probe_ms()
                    launch_ms = launch_probe_ms(g)
                    s = window(step, iters)
                    windows.append({"condition": name, "block": block, "cpu_ms": cpu_ms,
                                    "launch_ms": launch_ms, "step_ms": s * 1e3, "ran_on": current_cpu()})
    os.sched_setaffinity(0, all_cpus)
    print(f"pid {os.getpid()} iters/window {iters} windows {len(windows)}")
    print(f"{'condition':>9} {'step ms':>8} {'min':>7} {'cpu w':>6} {'launch w':>8}  ran on")
    summary = {}
    for name, _ in conditions:
        ws = [w for w in windows if w["condition"] == name]
        row = {k: statistics.median(w[k] for w in ws) for k in ("step_ms", "cpu_ms", "launch_ms")}
        row["min_step_ms"] = min(w["step_ms"] for w in ws)
        row["ran_on"] = sorted({w["ran_on"] for w in ws})
        summary[name] = row
        print(f"{name:>9} {row['step_ms']:8.3f} {row['min_step_ms']:7.3f} {row['cpu_ms']:6.3f} "
              f"{row['launch_ms']:8.3f}  {row['ran_on'][:6]}")
    steps = [w["step_ms"] for w in windows]
    c = {"cpu": corr([w["cpu_ms"] for w in windows], steps),
         "launch": corr([w["launch_ms"] for w in windows], steps)}
    print(f"correlation with step time over all windows: cpu witness {c['cpu']:.2f}, launch witness {c['launch']:.2f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"iters": iters, "summary": summary, "correlation": c, "windows": windows}, f)


if __name__ == "__main__":
    main()
