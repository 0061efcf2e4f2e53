#!/usr/bin/env bash
# A mixed sweep on one 2-GPU host: a head with no GPU, one Ray node per GPU (the second with an
# extra type name), `sweeper validate --address`, the sweep, and the first GPU node's raylet
# SIGKILLed 60 s in. Writes everything under OUT (default: ./out).
set -euo pipefail
OUT=${OUT:-$PWD/out}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
PORT=6390
export RAY_USAGE_STATS_ENABLED=0 RAY_health_check_period_ms=1000 RAY_health_check_failure_threshold=3
ray start --head --port=$PORT --num-cpus=4 --num-gpus=0 --include-dashboard=false --disable-usage-stats
CUDA_VISIBLE_DEVICES=0 ray start --address=127.0.0.1:$PORT --num-cpus=8 --num-gpus=1 --disable-usage-stats
CUDA_VISIBLE_DEVICES=1 ray start --address=127.0.0.1:$PORT --num-cpus=8 --num-gpus=1 --disable-usage-stats \
  --resources='{"accelerator_type:H200-B": 1}'
ray status | tee "$OUT/ray_status.txt"
python -m sweeper validate "$HERE/spec.yaml" --address 127.0.0.1:$PORT | tee "$OUT/validate.txt"
python -m sweeper run "$HERE/spec.yaml" --address 127.0.0.1:$PORT --results "$OUT/mixed_types" \
  --tune-logs none > "$OUT/sweep.log" 2>&1 &
SWEEP=$!
sleep 60
# The raylet of the first GPU node (H200 only; not the head's, where the driver is attached).
VICTIM=$(pgrep -f "raylet.*node-manager-port" | sed -n 2p || true)
if [ -n "$VICTIM" ]; then
  kill -9 "$VICTIM"
  echo "SIGKILLed raylet $VICTIM at $(date +%T)" | tee "$OUT/killed.txt"
fi
rc=0
wait $SWEEP || rc=$?
echo "sweep exit $rc" | tee -a "$OUT/killed.txt"
python -m sweeper compare "$OUT/mixed_types" --types H200 H200-B | tee "$OUT/compare.txt"
python -c "import sys; from sweeper.results.store import read_results as r; \
print(r([sys.argv[1]])[['model','mode','accelerator_type','node_id','device_name','status','attempts', \
'lost_attempts','lost_nodes']].to_string())" "$OUT/mixed_types" | tee "$OUT/placement.txt"
ray stop
