"""Do two processes of one launch-bound eager step run at the same speed when timed at the same time?

    python3 -m studies.decisive.process_check --out process_check.json [--roles plain,plain,reduce-overhead]

A plain script (torch, transformers, and alternation_check's CPU probe and window timer) behind the
decisive study's open question: a compiled trial's in-trial eager baseline and the sweep's eager
trial (another process, minutes apart) differ by 10-20% on the H200 host at the same witness
reading. Is that a property of the process (its memory layout, its having compiled) or of the time
(the host's speed drifts over seconds to minutes)? Here several fresh processes build the same
model (bert-base, bf16, batch 8, seq 128) and take turns on the GPU, one window at a time, in
rotating order: a round gives every process one eager window within a second of the others.
A `plain` process never compiles; a process named by a mode compiles the model first and, like a
compiled trial, follows each of its eager windows with a compiled one.

Printed: each process's median eager step (all windows, and at the host's fast witness state); for
every pair of processes the median of their same-round ratios with its spread (what differs
between processes at one moment) and the correlation of their window times over the rounds (how
much of the movement is the host's, shared by all); and the median step of each third of the run
(how far the host itself moved during it).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import time

PROBE_FAST_QUANTILE = 0.2
SLOW_FACTOR = 1.25


def worker(role: str, batch: int, seq: int, window_s: float) -> None:
    """One measuring process: build, warm up, then answer 'e' (an eager window), 'c' (a compiled
    window) and 'q' on stdin with one JSON line each."""
    import psutil
    import torch
    from transformers import BertConfig, BertModel

    from studies.decisive.alternation_check import iters_for, probe_ms, window

    torch.manual_seed(0)
    model = BertModel(BertConfig()).to("cuda", torch.bfloat16).eval()
    ids = torch.randint(0, 30000, (batch, seq), device="cuda")
    mask = torch.ones_like(ids)
    me = psutil.Process()
    with torch.no_grad():
        steps = {"e": lambda: model(input_ids=ids, attention_mask=mask)}
        t0 = time.perf_counter()
        if role != "plain":
            compiled = torch.compile(model, mode=role)
            steps["c"] = lambda: compiled(input_ids=ids, attention_mask=mask)
        iters = {k: iters_for(step, window_s) for k, step in steps.items()}
        compile_s = time.perf_counter() - t0
        print(json.dumps({"ready": role, "iters": iters, "compile_s": compile_s}), flush=True)
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "q":
                return
            before = probe_ms()
            s = window(steps[cmd], iters[cmd])
            after = probe_ms()
            print(json.dumps({"s_per_iter": s, "witness_ms": max(before, after), "cpu": me.cpu_num(),
                              "t": time.time()}), flush=True)


class Proc:
    def __init__(self, role: str, args: argparse.Namespace):
        self.role = role
        self.p = subprocess.Popen([sys.executable, "-m", "studies.decisive.process_check", "--worker", role,
                                   "--batch", str(args.batch), "--seq", str(args.seq),
                                   "--window-s", str(args.window_s)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.ready = None

    def ask(self, cmd: str) -> dict:
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())


def pair_stats(a: list[dict], b: list[dict]) -> dict:
    ratios = sorted(x["s_per_iter"] / y["s_per_iter"] for x, y in zip(a, b, strict=True))
    n = len(ratios)
    xs, ys = [x["s_per_iter"] for x in a], [y["s_per_iter"] for y in b]
    return {"median_ratio": statistics.median(ratios), "q25": ratios[n // 4], "q75": ratios[(3 * n) // 4],
            "corr": statistics.correlation(xs, ys)}


def summarize(windows: dict[str, list[dict]], names: list[str]) -> dict:
    readings = sorted(r["witness_ms"] for n in names for r in windows[n])
    fast_ref = readings[int(PROBE_FAST_QUANTILE * len(readings))]
    out: dict = {"fast_ref_ms": fast_ref, "processes": {}, "pairs": {}, "thirds": {}}
    for n in names:
        rs = windows[n]
        fast = [r for r in rs if r["witness_ms"] <= SLOW_FACTOR * fast_ref]
        k = len(rs) // 3
        out["processes"][n] = {
            "step_ms_all": statistics.median(r["s_per_iter"] for r in rs) * 1e3,
            "step_ms_fast": statistics.median(r["s_per_iter"] for r in fast) * 1e3 if fast else None,
            "fast_windows": len(fast), "windows": len(rs),
            "witness_ms": statistics.median(r["witness_ms"] for r in rs),
            "cpus": len({r["cpu"] for r in rs}),
        }
        out["thirds"][n] = [statistics.median(r["s_per_iter"] for r in rs[i * k:(i + 1) * k]) * 1e3 for i in range(3)]
    for a, b in itertools.combinations(names, 2):
        out["pairs"][f"{a}/{b}"] = pair_stats(windows[a], windows[b])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker")
    ap.add_argument("--roles", default="plain,plain,reduce-overhead",
                    help="one process per entry: plain (never compiles) or a torch.compile mode")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--window-s", type=float, default=0.1)
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.batch, args.seq, args.window_s)
        return
    roles = args.roles.split(",")
    names = [f"{i}:{r}" for i, r in enumerate(roles)]
    procs = [Proc(r, args) for r in roles]
    for p in procs:
        p.ready = json.loads(p.p.stdout.readline())
    windows: dict[str, list[dict]] = {n: [] for n in names}
    compiled_windows: dict[str, list[dict]] = {n: [] for n in names}
    t0 = time.time()
    for r in range(args.rounds):
        order = list(range(len(procs)))
        order = order[r % len(order):] + order[:r % len(order)]
        for i in order:
            windows[names[i]].append(procs[i].ask("e"))
            if procs[i].role != "plain":
                compiled_windows[names[i]].append(procs[i].ask("c"))
    for p in procs:
        p.p.stdin.write("q\n")
        p.p.stdin.flush()
        p.p.wait()
    summary = summarize(windows, names)
    summary["run_s"] = time.time() - t0
    print(f"bert-base bf16 b{args.batch} s{args.seq}, {args.rounds} rounds of one eager window a process "
          f"({summary['run_s']:.0f} s); fast witness ref {summary['fast_ref_ms']:.2f} ms")
    for n, s in summary["processes"].items():
        fast = f"{s['step_ms_fast']:.3f}" if s["step_ms_fast"] else "-"
        thirds = " / ".join(f"{x:.3f}" for x in summary["thirds"][n])
        print(f"  {n:<20} step all {s['step_ms_all']:.3f} ms, fast {fast} ms ({s['fast_windows']}/{s['windows']}), "
              f"witness {s['witness_ms']:.2f} ms, {s['cpus']} CPUs; thirds {thirds}")
    for pair, s in summary["pairs"].items():
        print(f"  {pair:<40} same-round ratio {s['median_ratio']:.3f} [{s['q25']:.3f}-{s['q75']:.3f}], "
              f"corr {s['corr']:.2f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "ready": [p.ready for p in procs], "summary": summary,
                       "windows": windows, "compiled_windows": compiled_windows}, f)


if __name__ == "__main__":
    main()
