#!/usr/bin/env bash
# Regional compilation and the Mega-Cache warm start on an H200 host (issue 16's evidence):
#   studies/regional/run_h200.sh OUT_DIR PART...
# PART:
#   sweep   the 40-trial sweep of studies/regional/regional.yaml on every GPU of the host. Each
#           call runs at most LIMIT_S seconds (default 540), then resumes the same sweep on the next
#           call: repeat it until OUT_DIR/sweep.done exists.
#   export  recommend bert-base (10,000 iterations, cold and --warm-start), export the setting
#           (the best compiled one if eager wins), then its first call in fresh processes with
#           empty caches: three times from the artifact, three times cold.
#   tables  the Markdown tables (whole vs regional; Mega-Cache warm start) and the HTML report.
set -u
out=${1:?usage: run_h200.sh OUT_DIR PART...}
shift
mkdir -p "$out"
spec=${REGIONAL_SPEC:-studies/regional/regional.yaml}  # another spec and model: a dry run
model=${REGIONAL_MODEL:-bert-base}
. studies/resumable_sweep.sh
sweep() { resumable_sweep sweep "$spec"; }
export_part() {
  local dir="$out/export-$model" args=(--model "$model" --iterations 10000) trial
  python3 -m sweeper recommend "$out/sweep" "${args[@]}" >"$out/recommend-$model.txt" 2>&1
  python3 -m sweeper recommend "$out/sweep" "${args[@]}" --warm-start >"$out/recommend-$model-warm-start.txt" 2>&1
  if ! python3 -m sweeper export "$out/sweep" "${args[@]}" --warm-start -o "$dir" >"$out/export.txt" 2>&1; then
    trial=$(python3 -m sweeper recommend "$out/sweep" "${args[@]}" --warm-start --json \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["best_compiled"]["trial_id"])')
    python3 -m sweeper export "$out/sweep" "${args[@]}" --trial "$trial" -o "$dir" >>"$out/export.txt" 2>&1
  fi
  ls -l "$dir" >"$out/export-listing.txt"
  for i in 1 2 3; do
    python3 -m benchmarks.export_first_call "$dir" >>"$out/first_call.jsonl" 2>>"$out/first_call.err"
    python3 -m benchmarks.export_first_call "$dir" --cold >>"$out/first_call.jsonl" 2>>"$out/first_call.err"
  done
}
{ nproc; nvidia-smi -L 2>/dev/null; python3 -c 'import torch; print(torch.__version__, torch.version.cuda)'; } >"$out/host.txt"
for part in "$@"; do
  case $part in
    sweep) sweep ;;
    export) export_part ;;
    tables) python3 -m studies.regional.tables "$out/sweep" >"$out/tables.md"
            python3 -m sweeper report "$out/sweep" -o "$out/sweep/report.html" --title "regional on H200" ;;
    *) echo "unknown part $part" >&2 ;;
  esac
done
