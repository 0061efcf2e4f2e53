#!/usr/bin/env bash
# The measurement-truth study on a host with 2 GPUs, in this order: the 24-setting sweep with two
# trials at once, its 16 compiled settings one at a time, training accuracy, two more repeats of the
# 6-setting subset (the first repeat is inside the at-once sweep), and the memory-fit check.
#   experiments/truth/run_h200.sh OUT_DIR
set -u
out=${1:?usage: run_h200.sh OUT_DIR}
mkdir -p "$out"
ray() { python3 -m ray.scripts.scripts "$@"; }
sweep() {  # name spec: one sweep against the running head, wall time recorded
  local t0=$(date +%s)
  python3 -m sweeper run "$2" --address auto --results "$out/$1" --no-report >"$out/$1.log" 2>&1
  echo "$1 exit=$? wall_s=$(( $(date +%s) - t0 ))" | tee -a "$out/walls.txt"
}
nproc >"$out/host.txt"; nvidia-smi -L >>"$out/host.txt"
ray start --head --num-gpus=2 --include-dashboard=false --disable-usage-stats >"$out/ray.log" 2>&1
sweep at_once experiments/truth/at_once.yaml
sweep alone experiments/truth/alone.yaml
sweep train experiments/truth/train.yaml
sweep repeat2 experiments/truth/repeat.yaml
sweep repeat3 experiments/truth/repeat.yaml
ray stop --force >>"$out/ray.log" 2>&1
t0=$(date +%s)
CUDA_VISIBLE_DEVICES=0 python3 benchmarks/memory_fit.py experiments/truth/at_once.yaml \
  --setting resnet50:reduce-overhead:bf16 --out "$out/memory_fit" >"$out/memory_fit_0.log" 2>&1 &
CUDA_VISIBLE_DEVICES=1 python3 benchmarks/memory_fit.py experiments/truth/at_once.yaml \
  --setting gpt2:reduce-overhead:fp32 --out "$out/memory_fit" >"$out/memory_fit_1.log" 2>&1
wait
echo "memory_fit wall_s=$(( $(date +%s) - t0 ))" | tee -a "$out/walls.txt"
echo done >"$out/DONE"
