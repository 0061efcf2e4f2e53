#!/usr/bin/env bash
# Phase generate on one H200 (issue 31's evidence):
#   studies/generate/run_h200.sh OUT_DIR STAGE...
# STAGE:
#   smoke      studies/generate/smoke.yaml (6 short trials: every mode, static and dynamic caches).
#   gpt2       studies/generate/gpt2.yaml (18 trials). Each call runs at most LIMIT_S seconds (default
#              540), then resumes the same sweep on the next call: repeat until OUT_DIR/gpt2.done exists.
#   llama      studies/generate/llama1b.yaml (18 trials), likewise (OUT_DIR/llama.done).
#   check      the independent check (check_generate.py: plain transformers generate) for a few settings,
#              beside the tool's rows.
#   recommend  `sweeper recommend --workload` for a chat-like (200x128+128) and a batch-like
#              (10000x1024+128) workload, per model; text and JSON.
#   table      the table of prefill, decode, compile and memory per setting (OUT_DIR/table.txt).
#   spread     eager_spread.py: GPT-2 batch 32's eager call in 4 fresh processes, with and without a
#              per-token clock (OUT_DIR/eager_spread.txt, .json; about 2 minutes).
#   report     the HTML report of both sweeps.
set -u
out=${1:?usage: run_h200.sh OUT_DIR STAGE...}
shift
mkdir -p "$out"
here=studies/generate
. studies/resumable_sweep.sh
sweep() { resumable_sweep "$1" "$2"; }  # NAME SPEC
check() {
  local args
  for args in "gpt2 1 128" "gpt2 32 128" "llama1b 1 128" "llama1b 8 1024"; do
    set -- $args
    local dir=$out/gpt2; [ "$1" = llama1b ] && dir=$out/llama
    python3 -m studies.generate.check_generate --model "$1" --batch "$2" --prompt "$3" --new 128 --results "$dir" \
      >>"$out/check.txt" 2>&1
  done
}
recommend() {
  local model dir file w
  for model in gpt2 hf:llama; do
    dir=$out/gpt2; file=gpt2; [ "$model" = hf:llama ] && { dir=$out/llama; file=llama1b; }
    for w in 200x128+128 10000x1024+128; do
      [ "$model" = gpt2 ] && w=${w/x1024+/x896+}
      python3 -m sweeper recommend "$dir" --model "$model" --workload "$w" >"$out/recommend-$file-$w.txt" 2>&1
      python3 -m sweeper recommend "$dir" --model "$model" --workload "$w" --json >"$out/recommend-$file-$w.json" 2>&1
    done
  done
}
table() {
  python3 - "$out" >"$out/table.txt" <<'PY'
import sys
import sweeper
cols = ["model", "mode", "batch_size", "seq_len", "status", "ttft_ms", "eager_ttft_ms", "decode_tokens_per_s",
        "eager_decode_tokens_per_s", "decode_speedup_vs_eager", "decode_speedup_ci_low", "decode_speedup_ci_high",
        "decode_token_p50_ms", "decode_token_p99_ms", "generate_s", "speedup_vs_eager", "compile_s",
        "warm_compile_s", "peak_mem_gib", "eager_peak_mem_gib", "cudagraph_skips", "eager_compiled_frames",
        "tokens_match_rate", "accuracy_ok", "generate_compile_path", "host_state", "error"]
for name in ("gpt2", "llama"):
    try:
        df = sweeper.load(f"{sys.argv[1]}/{name}").df
    except Exception as e:  # a stage not run yet
        print(name, "not loaded:", e)
        continue
    print(df[cols].sort_values(["seq_len", "batch_size", "mode"]).to_string(index=False, max_colwidth=80))
PY
}
{ nproc; nvidia-smi -L 2>/dev/null; python3 -c 'import torch, transformers; print(torch.__version__, torch.version.cuda, transformers.__version__)'; } >"$out/host.txt"
for stage in "$@"; do
  case $stage in
    smoke) sweep smoke $here/smoke.yaml ;;
    gpt2) sweep gpt2 $here/gpt2.yaml ;;
    llama) sweep llama $here/llama1b.yaml ;;
    check) check ;;
    recommend) recommend ;;
    table) table ;;
    spread) python3 -m studies.generate.eager_spread --model gpt2 --batch 32 --prompt 128 --new 128 --processes 4 \
      --json "$out/eager_spread.json" >"$out/eager_spread.txt" 2>&1 ;;
    report) for n in gpt2 llama; do python3 -m sweeper report "$out/$n" -o "$out/$n/report.html" --title "generate $n on H200"; done ;;
    *) echo "unknown stage $stage" >&2 ;;
  esac
done
