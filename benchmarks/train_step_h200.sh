#!/usr/bin/env bash
# The tool's training step against a user's plain loop for the settings of the ResNet-18 training
# check (benchmarks/results/h200/train_step/README.md), one JSON per setting:
#   benchmarks/train_step_h200.sh OUT_DIR [MODEL:PRECISION:MODE ...]
# Default settings: ResNet-18 and ViT-Ti/16, fp32 and bf16, default and reduce-overhead. Each
# setting runs the plain loop and the tool's measuring process (about 80 s on one H200); a setting
# whose JSON exists is skipped, so a call cut short is repeated with the same arguments.
set -u
out=${1:?usage: train_step_h200.sh OUT_DIR [MODEL:PRECISION:MODE ...]}
shift
mkdir -p "$out"
settings=("$@")
if [ ${#settings[@]} -eq 0 ]; then
  for m in resnet18 vit_tiny; do for p in fp32 bf16; do for mode in default reduce-overhead; do
    settings+=("$m:$p:$mode"); done; done; done
fi
for s in "${settings[@]}"; do
  json=$out/${s//:/-}.json
  [ -e "$json" ] && { echo "$s already measured"; continue; }
  python3 -m benchmarks.train_step_check --setting "$s" --variants "${VARIANTS:-plain,pipeline}" --out "$json.part" \
    >>"$out/train_step.log" 2>&1 && mv "$json.part" "$json"
  echo "$s exit=$? $(date +%T)" | tee -a "$out/walls.txt"
done
