"""How far one eager `generate` call moves between fresh processes, and what a per-token clock costs it.

The independent check (check_generate.py) found the tool's eager GPT-2 calls 5-20% slower than a plain
script's, at the host's fast witness state, with the compiled calls agreeing. This separates the two
candidate causes with plain transformers only (no sweeper code): `--processes` fresh processes, one
after the other, each building the model (random weights, bf16 on a GPU), warming up, then timing
`--calls` eager calls (`disable_compile=True`, static cache, greedy) in alternation: without a streamer,
and with a streamer that synchronizes the device and reads the clock at every token (as the tool's
token clock does). Printed per process: both medians and their ratio; then the spread of the medians
between processes (max / min - 1) against the spread inside one (the median of each process's
(p90 - p10) / p50).

    python3 -m studies.generate.eager_spread --model gpt2 --batch 32 --prompt 128 --new 128 --processes 4
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


class ClockStreamer:
    """What the tool's token clock does at each step: wait for the device, read the clock."""

    def __init__(self, sync):
        self.sync, self.times = sync, []

    def put(self, value) -> None:
        self.sync()
        self.times.append(time.perf_counter())

    def end(self) -> None:
        pass


def child(args: argparse.Namespace) -> dict:
    import torch
    import transformers as tf

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.manual_seed(0)
    if args.model == "gpt2":
        model = tf.GPT2LMHeadModel(tf.GPT2Config())
    else:  # a small config for a dry run on the CPU
        model = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=1024))
    model = model.to(device, torch.bfloat16 if cuda else torch.float32).eval()
    model.generation_config.eos_token_id = None
    ids = torch.randint(3, model.config.vocab_size, (args.batch, args.prompt), device=device)
    kw = {"attention_mask": torch.ones_like(ids), "do_sample": False, "cache_implementation": "static",
          "pad_token_id": 0, "max_new_tokens": args.new, "min_new_tokens": args.new, "disable_compile": True}

    def call(streamer=None) -> float:
        sync()
        t0 = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, streamer=streamer, **kw)
        sync()
        return time.perf_counter() - t0

    for _ in range(3):
        call()
    plain, clocked = [], []
    for _ in range(args.calls):  # alternated, so both see the same stretches of the host
        plain.append(call())
        clocked.append(call(ClockStreamer(sync)))
    return {"plain_s": plain, "clocked_s": clocked}


def _q(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=10)[int(q * 10) - 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["gpt2", "gpt2-small-config"], default="gpt2")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", help="write every process's call times here")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    argv = [sys.executable, "-m", "studies.generate.eager_spread", "--child", *sys.argv[1:]]
    runs = []
    for p in range(args.processes):
        out = subprocess.run(argv, capture_output=True, text=True, check=True)
        run = json.loads(out.stdout.strip().splitlines()[-1])
        runs.append(run)
        plain, clocked = statistics.median(run["plain_s"]), statistics.median(run["clocked_s"])
        print(f"process {p + 1}: eager call {plain:.4f} s plain, {clocked:.4f} s with a token clock "
              f"({100 * (clocked / plain - 1):+.1f}%)", flush=True)
    medians = [statistics.median(r["plain_s"]) for r in runs]
    inside = statistics.median((_q(r["plain_s"], 0.9) - _q(r["plain_s"], 0.1)) / statistics.median(r["plain_s"])
                               for r in runs)
    print(f"between processes: medians {min(medians):.4f}-{max(medians):.4f} s, spread "
          f"{100 * (max(medians) / min(medians) - 1):.1f}%; inside one (p90 - p10) / p50, median: {100 * inside:.1f}%")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "processes": runs}, f)


if __name__ == "__main__":
    main()
