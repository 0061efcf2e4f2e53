#!/usr/bin/env bash
# The published-claims study on a GPU host:
#   studies/claims/run_h200.sh OUT_DIR        (OUT_DIR: studies/claims/results)
# One Ray head; the four sweeps of studies/claims/ start together against it, so their trials
# queue for the host's GPUs (one GPU and its own CPU slot per trial) and no GPU idles between
# sweeps; then, with the GPUs idle, the sampling check (the same trial timed with and without the
# NVML sampler); then the report and the docs/claims.md section from the rows.
set -u
out=${1:?usage: run_h200.sh OUT_DIR}
mkdir -p "$out"
gpus=$(nvidia-smi -L | wc -l)
ray() { python3 -m ray.scripts.scripts "$@"; }
stamp() { echo "$1 exit=$2 wall_s=$(( $(date +%s) - $3 )) gpus=$gpus" | tee -a "$out/walls.txt"; }
{ nproc; nvidia-smi -L; python3 -c "import pynvml; print('nvidia-ml-py', pynvml.__version__ if hasattr(pynvml, '__version__') else 'present')"; } >"$out/host.txt" 2>&1
ray start --head --num-gpus="$gpus" --include-dashboard=false --disable-usage-stats >"$out/ray.log" 2>&1
t0=$(date +%s)
pids=()
for part in autotune train vit_b_16 lstm; do  # the longest trials (max-autotune) first
  python3 -m sweeper run "studies/claims/$part.yaml" --address auto --results "$out/$part" --no-report --resume \
    >"$out/$part.log" 2>&1 &
  pids+=($!)
  sleep 5
done
for i in "${!pids[@]}"; do wait "${pids[$i]}"; echo "sweep $i exit=$?" >>"$out/walls.txt"; done
stamp sweeps 0 "$t0"
ray stop --force >>"$out/ray.log" 2>&1
t0=$(date +%s)
# a GPU-bound eager step, a CUDA-graph replay, and a launch-bound eager step (CPU-bound: the one
# the sampler's thread could slow, and the one that jitters most on its own)
python3 -m benchmarks.util_overhead studies/claims/train.yaml --setting resnet18:eager:fp32 \
  --setting vit_tiny:reduce-overhead:bf16 --setting vit_tiny:eager:bf16 --windows 30 \
  --out "$out/util_overhead.json" >"$out/util_overhead.log" 2>&1
stamp util_overhead $? "$t0"
python3 -m sweeper report "$out" -o "$out/report.html" >>"$out/report.log" 2>&1
python3 -m studies.claims.tables "$out" --write
echo done >"$out/DONE"
