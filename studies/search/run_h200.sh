#!/usr/bin/env bash
# A real multi-objective search against its grid on a GPU host:
#   studies/search/run_h200.sh OUT_DIR        (OUT_DIR: studies/search/results)
# 1. search.yaml: OptunaSearch over the 60 settings of grid.yaml (the 12 eager baselines, then 9
#    compiled settings it picks: 21 trials, 35% of the grid);
# 2. grid.yaml, resumed from a copy of the search's rows: the 39 settings the search left, so a
#    setting both measured is one measurement;
# 3. studies/search/front.py: the share of the grid front's hypervolume the search found, and
#    what replaying the grid's rows predicts for the same budget.
set -u
out=${1:?usage: run_h200.sh OUT_DIR}
mkdir -p "$out"
gpus=$(nvidia-smi -L | wc -l)
ray() { python3 -m ray.scripts.scripts "$@"; }
run() {  # name spec [args]: one sweep against the running head, wall time recorded
  local name=$1 spec=$2 t0=$(date +%s) code
  shift 2
  python3 -m sweeper run "$spec" --address auto --results "$out/$name" --no-report "$@" >>"$out/$name.log" 2>&1
  code=$?
  echo "$name exit=$code wall_s=$(( $(date +%s) - t0 )) gpus=$gpus" | tee -a "$out/walls.txt"
  return $code
}
{ nproc; nvidia-smi -L; python3 -c 'import torch, optuna; print(torch.__version__, "optuna", optuna.__version__)'; } \
  >"$out/host.txt" 2>&1
ray start --head --num-gpus="$gpus" --include-dashboard=false --disable-usage-stats >"$out/ray.log" 2>&1
if [ ! -e "$out/search.done" ]; then
  run search studies/search/search.yaml --resume && touch "$out/search.done"
fi
if [ -e "$out/search.done" ] && [ ! -e "$out/grid.done" ]; then
  if [ ! -e "$out/grid" ]; then
    cp -r "$out/search" "$out/grid" && rm -rf "$out/grid/tune" "$out/grid/megacache"
  fi
  run grid studies/search/grid.yaml --resume && touch "$out/grid.done"
fi
ray stop --force >>"$out/ray.log" 2>&1
if [ -e "$out/grid.done" ]; then
  python3 -m studies.search.front studies/search/search.yaml "$out/search" "$out/grid" >"$out/front.md" 2>"$out/front.err"
  python3 -m sweeper report "$out/grid" -o "$out/grid/report.html" --title "resnet50: search vs grid" \
    >>"$out/report.log" 2>&1
fi
