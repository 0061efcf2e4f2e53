"""Does an eager step run at another speed when its windows alternate with other work?

    python3 -m studies.decisive.alternation_check --out alternation.json [--no-compile]

A plain script (torch, transformers and NVML only) behind the decisive study's open question: a
compiled trial's in-trial eager windows ran faster than the sweep's eager trial at the same
host-speed witness reading. One process times the same eager step under four neighbours, in short
rotating blocks (a slow stretch of the host falls on every condition alike): `alone` (eager windows
back to back), `compiled` (each followed by a compiled window), `gpu_busy` (by a GPU-only wait as
long) and `idle` (by a sleep as long). Per window: seconds per iteration (CUDA events), the witness
(tiny CPU ops timed around the window) and the SM clock (NVML); printed per condition, the median
step at the fast witness state and over all windows. `--no-compile` leaves the compiled condition
out (is eager itself different in a process that never compiled?)."""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

PROBE_OPS = 400


def probe_ms() -> float:
    t = torch.zeros(4)
    t0 = time.perf_counter()
    for _ in range(PROBE_OPS):
        t.add(1)
    return (time.perf_counter() - t0) * 1e3


def open_clock():
    try:
        import pynvml
    except ImportError:
        return lambda: None
    pynvml.nvmlInit()
    uuid = str(torch.cuda.get_device_properties(0).uuid)
    handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    return lambda: float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))


def build(args):
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    model = BertModel(BertConfig()).to("cuda", torch.bfloat16).eval()
    ids = torch.randint(0, 30000, (args.batch, args.seq), device="cuda")
    mask = torch.ones_like(ids)
    return model, (lambda m: m(input_ids=ids, attention_mask=mask))


def window(step, iters: int) -> float:
    """Seconds per iteration of `iters` back-to-back steps (events; one sync at the end)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def iters_for(step, seconds: float) -> int:
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    return max(5, round(seconds / ((time.perf_counter() - t0) / 20)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--mode", default="reduce-overhead")
    ap.add_argument("--window-s", type=float, default=0.1)
    ap.add_argument("--blocks", type=int, default=12, help="rotations of the conditions")
    ap.add_argument("--per-block", type=int, default=5, help="windows of each condition per block")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args()
    clock = open_clock()
    model, call = build(args)
    with torch.no_grad():
        eager = lambda: call(model)  # noqa: E731
        e_iters = iters_for(eager, args.window_s)
        fill_s = args.window_s
        compiled_step = None
        if not args.no_compile:
            compiled = torch.compile(model, mode=args.mode)
            compiled_step = lambda: call(compiled)  # noqa: E731
            c_iters = iters_for(compiled_step, args.window_s)
        cycles_per_s = None
        conditions = ["alone", "gpu_busy", "idle"] + ([] if args.no_compile else ["compiled"])
        rows = {c: [] for c in conditions}
        # a GPU wait of fill_s: calibrate torch.cuda._sleep's cycles per second once
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.cuda._sleep(10_000_000)
        torch.cuda.synchronize()
        cycles_per_s = 10_000_000 / (time.perf_counter() - t0)
        neighbours = {
            "alone": None,
            "gpu_busy": lambda: (torch.cuda._sleep(int(cycles_per_s * fill_s)), torch.cuda.synchronize()),
            "idle": lambda: time.sleep(fill_s),
            "compiled": (lambda: window(compiled_step, c_iters)) if compiled_step else None,
        }
        for b in range(args.blocks):
            order = conditions[b % len(conditions):] + conditions[:b % len(conditions)]
            for c in order:
                for _ in range(args.per_block):
                    before = probe_ms()
                    s = window(eager, e_iters)
                    mhz = clock()
                    after = probe_ms()
                    rows[c].append({"s_per_iter": s, "witness_ms": max(before, after), "clock_mhz": mhz})
                    if neighbours[c] is not None:
                        neighbours[c]()
    readings = sorted(r["witness_ms"] for c in rows for r in rows[c])
    fast_ref = readings[int(0.2 * len(readings))]
    summary = {}
    for c, rs in rows.items():
        fast = [r for r in rs if r["witness_ms"] <= 1.25 * fast_ref]
        summary[c] = {
            "windows": len(rs), "fast_windows": len(fast),
            "step_ms_fast": statistics.median(r["s_per_iter"] for r in fast) * 1e3 if fast else None,
            "step_ms_all": statistics.median(r["s_per_iter"] for r in rs) * 1e3,
            "clock_mhz": statistics.median(r["clock_mhz"] for r in rs) if rs[0]["clock_mhz"] is not None else None,
            "witness_ms": statistics.median(r["witness_ms"] for r in rs),
        }
    base = summary["alone"]["step_ms_fast"] or summary["alone"]["step_ms_all"]
    print(f"bert-base bf16 b{args.batch} s{args.seq}, eager {e_iters} iters/window, fast ref {fast_ref:.2f} ms")
    print(f"{'neighbour':<10} {'fast/all':>9} {'step fast ms':>13} {'vs alone':>9} {'step all ms':>12} {'SM MHz':>7}")
    for c, s in summary.items():
        rel = f"{(s['step_ms_fast'] / base - 1) * 100:+.1f}%" if s["step_ms_fast"] else "-"
        fast = f"{s['step_ms_fast']:.3f}" if s["step_ms_fast"] else "-"
        print(f"{c:<10} {s['fast_windows']:>4}/{s['windows']:<4} {fast:>13} {rel:>9} {s['step_ms_all']:>12.3f} "
              f"{s['clock_mhz'] or 0:>7.0f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "fast_ref_ms": fast_ref, "summary": summary, "windows": rows}, f)


if __name__ == "__main__":
    main()
