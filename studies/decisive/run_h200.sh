#!/usr/bin/env bash
# Decisive numbers on one GPU host (run from the repository root):
#   studies/decisive/run_h200.sh OUT_DIR [STAGE ...]   (OUT_DIR: studies/decisive/results)
# With STAGE names, only those run (in the order below).
# Each stage leaves OUT_DIR/STAGE.done, so a second call finishes what the first left. Stages:
#  host      `sweeper calibrate`: the host profile (witness states, run-to-run floors)
#  witness   benchmarks/witness_check.py: the witness against a launch-bound step, its cost on a GPU-bound one
#  topo      the host's CPU/NUMA/GPU topology (lscpu, nvidia-smi topo -m, per-CPU MHz)
#  core      studies/decisive/core_check.py in three fresh processes: the eager step pinned to each CPU
#  pcheck    studies/decisive/process_check.py three times: fresh processes of one eager step taking turns
#            on the GPU a window each (two never compile, one compiles: reduce-overhead twice, default once)
#  pinned    plain_check.py's bert-base setting as the tool feeds it, in three processes: unpinned, pinned
#            to CPUs 0-7 with 8 torch threads (as a measuring process sharing its GPU is placed), unpinned
#  alt alt_nc studies/decisive/alternation_check.py: an eager step's speed beside each neighbour
#            (back to back, compiled windows, a GPU-only wait, a sleep); alt_nc: in a process that never compiled
#  r1 r2 r3  studies/decisive/launch_bound.yaml three times, one trial per GPU
#  memory    benchmarks/peak_memory_check.py: gpt2 bf16 batch 32 seq 256, the tool vs a plain loop
#  smoke     experiments/smoke.yaml (the README's first command) on the GPU
#  shared    launch_bound_shared.yaml: the same 6 settings, two trials per GPU
#  grid      small_batch_grid.yaml: the search grid's 18 small-batch settings
set -u
out=${1:?usage: run_h200.sh OUT_DIR [STAGE ...]}
shift
only=("$@")
mkdir -p "$out"
gpus=$(nvidia-smi -L | wc -l)
ray() { python3 -m ray.scripts.scripts "$@"; }
stage() {  # name command...: run once, wall time recorded
  local name=$1 t0=$(date +%s) code
  shift
  [ -e "$out/$name.done" ] && return 0
  [ ${#only[@]} -gt 0 ] && [[ " ${only[*]} " != *" $name "* ]] && return 0
  echo "$(date +%T) start $name" >>"$out/progress.txt"
  "$@" >>"$out/$name.log" 2>&1
  code=$?
  echo "$(date +%T) $name exit=$code wall_s=$(( $(date +%s) - t0 ))" | tee -a "$out/walls.txt" >>"$out/progress.txt"
  [ $code -eq 0 ] && touch "$out/$name.done"
}
sweep() {  # results_name spec
  python3 -m sweeper run "$2" --address auto --results "$out/$1" --resume
}
{ nproc; nvidia-smi -L; git rev-parse HEAD 2>/dev/null; python3 -c 'import torch, ray; print(torch.__version__, ray.__version__)'; } \
  >"$out/host.txt" 2>&1
stage host python3 -m sweeper calibrate --seconds 20 --processes 4 -o "$out/host_profile.json"
stage witness python3 -m benchmarks.witness_check --out "$out/witness.json"
stage topo bash -c 'lscpu; nvidia-smi topo -m; grep MHz /proc/cpuinfo; cat /sys/devices/system/cpu/cpu*/topology/thread_siblings_list'
stage core bash -c "for p in 1 2 3; do python3 -m studies.decisive.core_check --out $out/core_\$p.json; done"
stage pcheck bash -c "for r in reduce-overhead reduce-overhead default; do python3 -m studies.decisive.process_check \
  --roles plain,plain,\$r --out $out/pcheck_\$r.\$RANDOM.json; done"
stage pinned bash -c "for p in '' '--pin 0-7 --threads 8' ''; do python3 -m studies.decisive.plain_check --only 4 \
  \$p --out $out/pinned.\$RANDOM.json; done"
stage alt python3 -m studies.decisive.alternation_check --out "$out/alternation.json"
stage alt_nc python3 -m studies.decisive.alternation_check --no-compile --out "$out/alternation_nc.json"
stage memory python3 -m benchmarks.peak_memory_check --modes eager default --out "$out/memory.json"
ray start --head --num-gpus="$gpus" --include-dashboard=false --disable-usage-stats >"$out/ray.log" 2>&1
for r in r1 r2 r3; do stage "$r" sweep "$r" studies/decisive/launch_bound.yaml; done
stage smoke sweep smoke experiments/smoke.yaml
stage shared sweep shared studies/decisive/launch_bound_shared.yaml
stage grid sweep grid studies/decisive/small_batch_grid.yaml
ray stop --force >/dev/null 2>&1
echo "$(date +%T) all done" >>"$out/progress.txt"
