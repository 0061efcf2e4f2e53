"""An independent check of phase generate's rows: plain transformers `generate`, timed by hand.

It builds the same model shape from its config (random weights), a random prompt batch, and times
`generate` twice over: with transformers' defaults (with a static cache on a GPU it compiles the
decode step itself: inductor, reduce-overhead) and with `disable_compile=True` (eager). Nothing of
sweeper's measuring code is used. Time to first token is a `max_new_tokens=1` call; decode tokens/s is
batch x (new - 1) over the rest of a full call. Then, given the sweep's results, it prints the
tool's rows beside it: reduce-overhead (transformers' default compile) and eager, and whether the
check's speedup lies inside the row's interval; then eager and compiled whole calls taking turns
(`--pairs`), whose median ratio is the check's speedup at matched host speed. A launch-bound eager
decode moves with the host's CPU speed, so before every timed call it reads a CPU probe of the same
work as the tool's witness (400 tiny torch CPU ops, this script's own copy) and prints its median
beside the rows' witness readings: a check against rows from another host or time compares speeds
first.

    python3 -m studies.generate.check_generate --model gpt2 --batch 1 --prompt 128 --new 128 \
        --results OUT/gpt2/sweep
"""

from __future__ import annotations

import argparse
import glob
import statistics
import time

import torch
import transformers as tf

LLAMA_1B = {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
            "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 4096,
            "tie_word_embeddings": True, "rope_theta": 500000.0}
ROW_NAMES = {"gpt2": "gpt2", "llama1b": "hf:llama"}


def build(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if name == "gpt2":
        model = tf.GPT2LMHeadModel(tf.GPT2Config())
    else:
        model = tf.LlamaForCausalLM(tf.LlamaConfig(**LLAMA_1B))
    model = model.to("cuda", torch.bfloat16).eval()
    model.generation_config.eos_token_id = None  # random weights: decode every new token
    return model


def timed(fn, calls: int, before=None) -> list[float]:
    """Seconds of each of `calls` calls of `fn`; `before` runs (untimed) ahead of each."""
    out = []
    for _ in range(calls):
        if before is not None:
            before()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append(time.perf_counter() - t0)
    return out


def probe_ms(ops: int = 400) -> float:
    """Milliseconds of `ops` tiny torch CPU ops on a 4-element tensor: the host's CPU speed now."""
    t = torch.zeros(4)
    t0 = time.perf_counter()
    for _ in range(ops):
        t.add(1)
    return (time.perf_counter() - t0) * 1e3


def generate_kwargs(ids: torch.Tensor, **extra) -> dict:
    """Greedy decoding from a static cache, every prompt position attended: as the sweep's rows."""
    return {"attention_mask": torch.ones_like(ids), "do_sample": False, "cache_implementation": "static",
            "pad_token_id": 0, **extra}


def measure(model, ids, new: int, calls: int, **extra) -> dict[str, float]:
    kw = generate_kwargs(ids, **extra)
    probes: list[float] = []

    def read() -> None:
        probes.append(probe_ms())
    with torch.no_grad():
        first = timed(lambda: model.generate(ids, max_new_tokens=new, min_new_tokens=new, **kw), 1)[0]
        timed(lambda: model.generate(ids, max_new_tokens=new, min_new_tokens=new, **kw), 2)
        full = timed(lambda: model.generate(ids, max_new_tokens=new, min_new_tokens=new, **kw), calls, read)
        one = timed(lambda: model.generate(ids, max_new_tokens=1, min_new_tokens=1, **kw), calls, read)
    gen_s, ttft_s = statistics.median(full), statistics.median(one)
    return {"first_call_s": first, "generate_s": gen_s, "ttft_ms": ttft_s * 1e3,
            "decode_tokens_per_s": ids.shape[0] * (new - 1) / (gen_s - ttft_s), "probe_ms": statistics.median(probes)}


def paired(model, ids, new: int, pairs: int) -> dict[str, float]:
    """Eager and compiled whole calls taking turns, `pairs` of each, a probe before every call: the
    speedup as the median of the pairs' ratios (each pair at one host speed), with its p10-p90."""
    kw = generate_kwargs(ids, max_new_tokens=new, min_new_tokens=new)
    ratios, probes = [], []
    with torch.no_grad():
        for _ in range(pairs):
            probes.append(probe_ms())
            eager = timed(lambda: model.generate(ids, disable_compile=True, **kw), 1)[0]
            probes.append(probe_ms())
            ratios.append(eager / timed(lambda: model.generate(ids, **kw), 1)[0])
    deciles = statistics.quantiles(ratios, n=10)
    return {"speedup": statistics.median(ratios), "p10": deciles[0], "p90": deciles[-1],
            "probe_ms": statistics.median(probes)}


def rows(results: str, model: str, batch: int, prompt: int, new: int):
    """The sweep's rows of this setting, as its report reads them (the reported interval included)."""
    from pathlib import Path

    from sweeper.analysis.frames import prepare
    from sweeper.results.store import read_results

    dirs = sorted({Path(f).parent for f in glob.glob(f"{results}/**/results.parquet", recursive=True)})
    df = prepare(read_results(dirs or [Path(results)]))
    df = df[(df["model"] == ROW_NAMES[model]) & (df["phase"] == "generate") & (df["batch_size"] == batch)
            & (df["seq_len"] == prompt) & (df["new_tokens"] == new) & (df["cache"] == "static")]
    return {r["mode"]: r for r in df.to_dict("records")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(ROW_NAMES), default="gpt2")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=20, help="alternated eager / compiled calls after the two arms")
    ap.add_argument("--results", help="the sweep's results directory, to print its rows beside the check")
    args = ap.parse_args()
    print(f"transformers {tf.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}")
    model = build(args.model)
    ids = torch.randint(3, model.config.vocab_size, (args.batch, args.prompt), device="cuda")
    eager = measure(model, ids, args.new, args.calls, disable_compile=True)
    default = measure(model, ids, args.new, args.calls)  # transformers' defaults: it compiles by itself
    speedup = eager["generate_s"] / default["generate_s"]
    print(f"{args.model} batch {args.batch} prompt {args.prompt} +{args.new}")
    for name, m in (("check eager (disable_compile)", eager), ("check transformers default", default)):
        print(f"  {name:<34} " + "  ".join(f"{k} {v:.4g}" for k, v in m.items()))
    print(f"  check speedup (generate_s) {speedup:.3f}")
    pair = paired(model, ids, args.new, args.pairs)
    print(f"  check paired speedup ({args.pairs} alternated calls each) {pair['speedup']:.3f} [p10-p90 "
          f"{pair['p10']:.3f}-{pair['p90']:.3f}]  probe_ms {pair['probe_ms']:.4g}")
    if not args.results:
        return
    found, nan = rows(args.results, args.model, args.batch, args.prompt, args.new), float("nan")
    for mode in ("eager", "reduce-overhead"):
        r = found.get(mode)
        if r is None:
            print(f"  tool {mode}: no row")
            continue
        print(f"  tool {mode:<29} status {r['status']}  generate_s {r['generate_s']:.4g}  ttft_ms "
              f"{r['ttft_ms']:.4g}  decode_tokens_per_s {r['decode_tokens_per_s']:.4g}  witness_ms "
              f"{r.get('witness_ms', nan):.4g} (its eager windows' {r.get('eager_witness_ms', nan):.4g})")
    r = found.get("reduce-overhead")
    if r is not None and r["status"] == "ok":
        low, high = r["speedup_low"], r["speedup_high"]  # the reported interval (the report's, recommend's)
        verdict = "AGREES" if low <= speedup <= high else "DISAGREES"
        print(f"  tool speedup {r['speedup_vs_eager']:.3f} reported [{low:.3f}, {high:.3f}] (windows' "
              f"[{r['speedup_ci_low']:.3f}, {r['speedup_ci_high']:.3f}]): check {speedup:.3f} {verdict}, "
              f"paired {pair['speedup']:.3f} {'AGREES' if low <= pair['speedup'] <= high else 'DISAGREES'}")


if __name__ == "__main__":
    main()
