#!/usr/bin/env bash
# Any model by name on an H200 host (issue 30's evidence):
#   studies/anymodel/run_h200.sh OUT_DIR PART...
# PART:
#   sweep      the 20 trials of studies/anymodel/anymodel.yaml on every GPU of the host. Each call
#              runs at most LIMIT_S seconds (default 540), then resumes the same sweep on the next call:
#              repeat it until OUT_DIR/sweep.done exists.
#   recommend  `sweeper recommend` per model (text and JSON), and the block each regional trial compiled.
#   report     the HTML report.
# Needs timm on the host (pip install timm).
set -u
out=${1:?usage: run_h200.sh OUT_DIR PART...}
shift
mkdir -p "$out"
spec=${ANYMODEL_SPEC:-studies/anymodel/anymodel.yaml}
. studies/resumable_sweep.sh
sweep() { resumable_sweep sweep "$spec"; }
recommend() {
  local model file
  for model in timm:convnext_base timm:vit_base_patch16_224 hf:llama hf:qwen2; do
    file=${model//:/-}
    python3 -m sweeper recommend "$out/sweep" --model "$model" >"$out/recommend-$file.txt" 2>&1
    python3 -m sweeper recommend "$out/sweep" --model "$model" --json >"$out/recommend-$file.json" 2>&1
  done
  python3 - "$out/sweep" >"$out/blocks.txt" <<'PY'
import sys
import sweeper
df = sweeper.load(sys.argv[1]).df
cols = ["model", "mode", "scope", "status", "region_classes", "compiled_regions", "block_choice", "compile_s",
        "throughput_items_s", "speedup_vs_eager", "peak_mem_gib", "error"]
print(df[cols].sort_values(["model", "scope", "mode"]).to_string(index=False))
PY
}
{ nproc; nvidia-smi -L 2>/dev/null; python3 -c 'import torch, timm, transformers; print(torch.__version__, torch.version.cuda, timm.__version__, transformers.__version__)'; } >"$out/host.txt"
for part in "$@"; do
  case $part in
    sweep) sweep ;;
    recommend) recommend ;;
    report) python3 -m sweeper report "$out/sweep" -o "$out/sweep/report.html" --title "any model on H200" ;;
    *) echo "unknown part $part" >&2 ;;
  esac
done
