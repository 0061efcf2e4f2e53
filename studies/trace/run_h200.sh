#!/usr/bin/env bash
# The traced GPU sweep (studies/trace/trace.yaml) against a running Ray or a new local one:
#   studies/trace/run_h200.sh OUT_DIR            (e.g. studies/trace/results)
# then, where tlparse is installed (pip install 'sweeper[trace]'), one trace as HTML:
#   sweeper trace OUT_DIR TRIAL_ID -o OUT_DIR/trace-TRIAL_ID
set -u
cd "$(dirname "$0")/.."
out=${1:?usage: trace_h200.sh OUT_DIR}
t0=$(date +%s)
python3 -m sweeper run studies/trace/trace.yaml --results "$out" --no-report >"$out.log" 2>&1
echo "trace exit=$? wall_s=$(( $(date +%s) - t0 ))" | tee -a "$out.walls.txt"
du -sh "$out/traces" 2>/dev/null
