#!/usr/bin/env bash
# The issue's H200 evidence in one go (2x H200, about 15 minutes):
#   experiments/speed/run_h200.sh OUT_DIR
# Runs the 24-setting yardstick twice on a new local Ray each time (Ray start included in the wall
# time): measuring processes as new interpreters (subprocess: the before, on this code), then forked
# from each worker's fork server (the after). Then the per-phase medians and overhead per trial
# (scaling.py analyze) and the speedups side by side with their intervals (scaling.py compare).
set -u
out=${1:?usage: run_h200.sh OUT_DIR}
mkdir -p "$out"
{ nproc; nvidia-smi -L; git rev-parse HEAD; } >"$out/host.txt"
for run in subprocess forkserver; do
  spec=experiments/speed/at_once_warm.yaml
  [ "$run" = subprocess ] && spec=experiments/speed/at_once_warm_subprocess.yaml
  t0=$(date +%s.%N)
  python3 -m sweeper run "$spec" --address local --results "$out/$run" --no-report >"$out/$run.log" 2>&1
  echo "$run exit=$? wall_s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")" | tee -a "$out/walls.txt"
done
python3 benchmarks/scaling.py analyze "$out/subprocess" "$out/forkserver" --markdown >"$out/phases.md" 2>&1
python3 benchmarks/scaling.py compare "$out/subprocess" "$out/forkserver" >"$out/speedups.md" 2>&1
cat "$out/walls.txt" "$out/phases.md" "$out/speedups.md"
