#!/usr/bin/env bash
# Inductor option sets and the AOTInductor path on an H200 host (issue 32's evidence):
#   studies/knobs/run_h200.sh OUT_DIR STAGE...
# STAGE:
#   probe   the load probe first (about 8 minutes): a two-layer MLP's package, then resnet50 bs64's
#           (PROBE_BUILDS, default tiny,default), each loaded in its building process and in fresh
#           processes in several orders and environments (load_probe.py);
#           OUT_DIR/probe/load_probe.jsonl says which crash, where and how. PROBE_DEVICE=cpu: packages
#           for the CPU instead (the same constructor, without CUDA).
#   regex   regex_probe.py: the host's C++ toolchain, the package constructor's std::regex in a small
#           library built with it and called in a torch process, and what the probe's package
#           libraries need (OUT_DIR/regex/regex_probe.json; under a minute).
#   isa     isa_check.py --device cuda: aoti_load_package in fresh processes with empty inductor caches,
#           alone and after inductor's CPU check timed apart (OUT_DIR/isa/isa_check.json; a few minutes).
#           Built with CXX=${ISA_CXX:-/usr/bin/g++}: the host's environment names a compiler whose
#           packages cannot load beside torch (run5), and this plain script does not choose one.
#   knobs   the 39-trial sweep of knobs.yaml on every GPU of the host. Each call runs at most LIMIT_S
#           seconds (default 540), then resumes the same sweep on the next call: repeat it until
#           OUT_DIR/knobs.done exists.
#   aoti    the 9-trial sweep of aoti.yaml, resumed the same way until OUT_DIR/aoti.done exists.
#   tables  sweeper prices (both sweeps), recommend (long run, 1000 iterations cold and --warm-start),
#           the HTML report, and an export of the best aoti trial.
set -u
out=${1:?usage: run_h200.sh OUT_DIR STAGE...}
shift
mkdir -p "$out"
here=studies/knobs
models=${KNOBS_MODELS:-resnet50 vit_b_16 gpt2}  # another list (and spec): a dry run
export_model=${models%% *}
. studies/resumable_sweep.sh
resumable() { resumable_sweep "$1" "$2"; }  # NAME SPEC
tables() {
  python3 -m sweeper prices "$out/knobs" "$out/aoti" >"$out/prices.txt" 2>&1
  python3 -m sweeper prices "$out/knobs" "$out/aoti" --json >"$out/prices.json" 2>>"$out/prices.txt"
  for m in $models; do
    python3 -m sweeper recommend "$out/knobs" "$out/aoti" --model "$m" >"$out/recommend-$m.txt" 2>&1
    python3 -m sweeper recommend "$out/knobs" "$out/aoti" --model "$m" --iterations 1000 \
      >"$out/recommend-$m-1000.txt" 2>&1
    python3 -m sweeper recommend "$out/knobs" "$out/aoti" --model "$m" --iterations 1000 --warm-start \
      >"$out/recommend-$m-1000-warm-start.txt" 2>&1
  done
  python3 -m sweeper report "$out/knobs" "$out/aoti" -o "$out/report.html" --title "inductor knobs and AOTI on H200"
  trial=$(python3 -c 'import sys, pandas as pd; d = pd.read_parquet(sys.argv[1]);
d = d[(d["path"] == "aoti") & (d["status"] == "ok") & (d["model"] == sys.argv[2])]
print(d.sort_values("throughput_items_s").iloc[-1]["trial_id"] if len(d) else "")' "$out/aoti/results.parquet" \
    "$export_model")
  [ -n "$trial" ] && python3 -m sweeper export "$out/aoti" --model "$export_model" --trial "$trial" \
    -o "$out/export-aoti" >"$out/export.txt" 2>&1
}
{ nproc; nvidia-smi -L 2>/dev/null; python3 -c 'import torch; print(torch.__version__, torch.version.cuda)'; } >"$out/host.txt"
for stage in "$@"; do
  case $stage in
    probe) python3 -m studies.knobs.load_probe "$out/probe" --model resnet50 --batch-size 64 \
      --device "${PROBE_DEVICE:-cuda}" --builds "${PROBE_BUILDS:-tiny,default}" >"$out/probe.txt" 2>&1 ;;
    regex) python3 -m studies.knobs.regex_probe "$out/regex" --packages "$out/probe" >"$out/regex.txt" 2>&1 ;;
    isa) CXX=${ISA_CXX:-/usr/bin/g++} python3 -m studies.knobs.isa_check "$out/isa" --device cuda >"$out/isa.txt" 2>&1 ;;
    knobs) resumable knobs "$here/knobs.yaml" ;;
    aoti) resumable aoti "$here/aoti.yaml" ;;
    tables) tables ;;
    *) echo "unknown stage $stage" >&2 ;;
  esac
done
