#!/usr/bin/env bash
# The issue's H200 evidence in one go (2x H200, about 15 minutes):
#   studies/speed/run_h200.sh OUT_DIR [RUN...]        RUN: subprocess forkserver shared shared3 grid_shared grid_one8
# Runs the 24-setting yardstick on a new local Ray each time (Ray start included in the wall
# time): measuring processes as new interpreters (subprocess: the before, on this code), forked
# from each worker's fork server (forkserver: the after), and two trials per GPU (shared,
# at_once_shared.yaml, about 5 minutes) or three (shared3, at_once_shared3.yaml); or the decisive
# study's small-batch grid two per GPU (grid_shared) and one at a time on the same 8 CPUs (grid_one8).
# Default: subprocess forkserver. Then the per-phase
# medians and overhead per trial (scaling.py analyze) and the speedups side by side with their
# intervals (scaling.py compare: each run against the first).
set -u
out=${1:?usage: run_h200.sh OUT_DIR [RUN...]}
shift
runs=("$@")
[ ${#runs[@]} -eq 0 ] && runs=(subprocess forkserver)
mkdir -p "$out"
{ nproc; nvidia-smi -L; git rev-parse HEAD; } >"$out/host.txt"
declare -A specs=([subprocess]=at_once_warm_subprocess [forkserver]=at_once_warm [shared]=at_once_shared [shared3]=at_once_shared3
                  [grid_shared]=grid_shared [grid_one8]=grid_one8)
for run in "${runs[@]}"; do
  spec=studies/speed/${specs[$run]:?unknown run $run}.yaml
  t0=$(date +%s.%N)
  python3 -m sweeper run "$spec" --address local --results "$out/$run" --no-report >"$out/$run.log" 2>&1
  echo "$run exit=$? wall_s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")" | tee -a "$out/walls.txt"
done
dirs=("${runs[@]/#/$out/}")
python3 -m studies.scaling.scaling analyze "${dirs[@]}" --markdown >"$out/phases.md" 2>&1
: >"$out/speedups.md"
for d in "${dirs[@]:1}"; do
  python3 -m studies.scaling.scaling compare "${dirs[0]}" "$d" >>"$out/speedups.md" 2>&1
done
cat "$out/walls.txt" "$out/phases.md" "$out/speedups.md"
