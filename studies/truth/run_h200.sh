#!/usr/bin/env bash
# The measurement-truth study on an H200 host, part by part:
#   studies/truth/run_h200.sh OUT_DIR PART...
# PART: at_once (the 24-setting sweep, one trial per GPU, all GPUs at once), alone (its 16
# compiled settings one at a time on the host), train (training accuracy against float64),
# repeats (two more sweeps of the 6-setting subset; the first repeat is inside at_once),
# memory_fit (cap the allocator above and below two settings' reported need).
set -u
out=${1:?usage: run_h200.sh OUT_DIR PART...}
shift
mkdir -p "$out"
gpus=$(nvidia-smi -L | wc -l)
ray() { python3 -m ray.scripts.scripts "$@"; }
sweep() {  # name spec: one sweep against the running head, wall time recorded
  local t0=$(date +%s)
  python3 -m sweeper run "$2" --address auto --results "$out/$1" --no-report >"$out/$1.log" 2>&1
  echo "$1 exit=$? wall_s=$(( $(date +%s) - t0 )) gpus=$gpus" | tee -a "$out/walls.txt"
}
memory_fit() {
  local t0=$(date +%s) settings=(resnet50:reduce-overhead:bf16 gpt2:reduce-overhead:fp32) i
  for i in 0 1; do
    CUDA_VISIBLE_DEVICES=$(( i % gpus )) python3 -m benchmarks.memory_fit studies/truth/at_once.yaml \
      --setting "${settings[$i]}" --out "$out/memory_fit" >"$out/memory_fit_$i.log" 2>&1 &
    [ "$gpus" -gt 1 ] || wait
  done
  wait
  echo "memory_fit wall_s=$(( $(date +%s) - t0 )) gpus=$gpus" | tee -a "$out/walls.txt"
}
{ nproc; nvidia-smi -L; } >"$out/host-$gpus.txt"
ray start --head --num-gpus="$gpus" --include-dashboard=false --disable-usage-stats >"$out/ray.log" 2>&1
for part in "$@"; do
  case $part in
    at_once|alone|train) sweep "$part" "studies/truth/$part.yaml" ;;
    repeats) sweep repeat2 studies/truth/repeat.yaml; sweep repeat3 studies/truth/repeat.yaml ;;
    memory_fit) ray stop --force >>"$out/ray.log" 2>&1; memory_fit ;;
    *) echo "unknown part $part" >&2 ;;
  esac
done
ray stop --force >>"$out/ray.log" 2>&1
echo "$*" >"$out/DONE"
