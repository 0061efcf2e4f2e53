"""Does a trial's steady peak memory count what a user's loop holds? The tool against a plain loop.

    python -m benchmarks.peak_memory_check [--model gpt2] [--batch 32] [--seq 256] [--precision bf16]
        [--modes eager default reduce-overhead] [--device cuda] [--out FILE.json]

For each mode, in fresh processes one after the other: (a) the tool's measuring process for that
trial (its row's `peak_mem_gib`: allocated peak from the warm-up through the timed windows), and
(b) a plain loop over the same model and batch that holds one output at a time: compile (not
for eager) and the first call, then `torch.cuda.reset_peak_memory_stats`, then as many steps as
the trial ran from its warm-up on (`for _ in range(n): step()`), and `max_memory_allocated`.
A model with large outputs (a decoder LM's logits: batch x seq x vocab) shows any output a
timing helper keeps alive. Prints both and their ratio; `--device cpu` compares RSS high-waters.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import expand

GIB = 1024**3


def trial_for(args: argparse.Namespace, mode: str):
    spec = {"name": "peak_memory_check", "models": [{"name": args.model}],
            "axes": {"mode": [mode], "dynamic": [False], "batch_size": [args.batch], "seq_len": [args.seq],
                     "phase": ["infer"], "precision": [args.precision]},
            "measure": {"warm_compile": False, "megacache_warm_start": False, "windows": 10,
                        "min_window_s": 0.1, "gpu_util": False},
            "resources": {"device": args.device}}
    (trial,), _ = expand(parse_spec(spec))
    return trial


def tool_peak(trial, device: str) -> dict:
    from sweeper.measure import process

    with tempfile.TemporaryDirectory() as tmp:
        row = process.run({"trial": trial.to_dict(), "device": device}, Path(tmp) / "row.json")
    steps = row["iters_per_window"] * row["timed_windows"] * (2 if trial.mode != "eager" else 1)
    return {"status": row["status"], "peak_mem_gib": row["peak_mem_gib"],
            "eager_peak_mem_gib": row["eager_peak_mem_gib"],
            "steps": steps + trial.measure.warmup_iters + trial.measure.min_window_iters, "error": row["error"]}


def plain_peak(trial, device_name: str, steps: int) -> dict:
    from sweeper.measure.workbench import build_bundle

    device = torch.device(device_name)
    torch.manual_seed(0)
    torch.set_float32_matmul_precision("high")
    bundle = build_bundle(trial, device)
    model = bundle.model.to(device).eval()
    batch = bundle.make_batch(trial.batch_size, trial.seq_len, torch.Generator().manual_seed(0)).to(device)
    run = model if trial.mode == "eager" else torch.compile(model, mode=trial.mode)
    bf16 = trial.precision == "bf16"

    def step():
        if trial.mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        with torch.no_grad(), torch.autocast(device.type, torch.bfloat16, enabled=bf16):
            return run(*batch.args, **batch.kwargs)
    step()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    for _ in range(steps):
        step()  # one output alive at a time, as in a user's loop
    if device.type == "cuda":
        torch.cuda.synchronize()
        return {"peak_mem_gib": torch.cuda.max_memory_allocated() / GIB}
    return {"peak_mem_gib": None}


def child(args: argparse.Namespace) -> None:
    trial = trial_for(args, args.mode)
    out = tool_peak(trial, args.device) if args.child == "tool" else plain_peak(trial, args.device, args.steps)
    print(json.dumps(out))


def fresh(args: argparse.Namespace, kind: str, mode: str, steps: int = 0) -> dict:
    cmd = [sys.executable, __file__, "--child", kind, "--mode", mode, "--steps", str(steps), "--model", args.model,
           "--batch", str(args.batch), "--seq", str(args.seq), "--precision", args.precision, "--device", args.device]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    ap.add_argument("--modes", nargs="+", default=["eager", "default", "reduce-overhead"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out")
    ap.add_argument("--child", choices=["tool", "plain"], help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    results = []
    for mode in args.modes:
        tool = fresh(args, "tool", mode)
        plain = fresh(args, "plain", mode, tool.get("steps", 50))
        ratio = (tool["peak_mem_gib"] / plain["peak_mem_gib"]
                 if tool.get("peak_mem_gib") and plain.get("peak_mem_gib") else None)
        results.append({"mode": mode, "tool": tool, "plain": plain, "tool_over_plain": ratio})
        print(f"{args.model} b{args.batch} s{args.seq} {args.precision} {mode}: tool {tool.get('peak_mem_gib')} GiB, "
              f"plain loop {plain.get('peak_mem_gib')} GiB, ratio {ratio}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"setting": vars(args), "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
